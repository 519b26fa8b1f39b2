// splitzip_measure — exact SplitZip frame sizes for slices of raw tensor files, driven by bench/eval.py.
//
// Reads one job per line on stdin (whitespace-separated, '#' starts a comment line):
//     ID FILE DTYPE OFFSET COUNT CODEBOOK CHUNK_LOG2 CHECKSUMS
// OFFSET and COUNT are in values (COUNT 0 = to the end of the file); CODEBOOK is a spec of bench/eval/measure_core.h
// (default:key, self, calib:FILE:OFFSET:COUNT, ...); CHECKSUMS is 0 or 1.
// Writes one JSON object per job on stdout: the codebook used, frame size, escapes, chunk modes, round-trip check.
// Every frame is decoded and compared with its input; a mismatch is reported as an error, never as a size.
#include "eval/measure_core.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>
#include <map>
#include <sstream>

int main(int argc, char** argv) {
  CLI::App app{"Exact SplitZip frame sizes for slices of raw tensor files (jobs on stdin, JSON lines out)"};
  unsigned threads = 1;
  app.add_option("--threads", threads, "CPU threads for compress/decompress (never changes the bytes)");
  CLI11_PARSE(app, argc, argv);

  std::map<std::string, szbench::FileBytes> files;
  std::string line;
  int failures = 0;
  while (std::getline(std::cin, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string id, path, dtype_name, codebook;
    uint64_t offset = 0, count = 0;
    unsigned chunk_log2 = SZ_DEFAULT_CHUNK_LOG2;
    int checksums = 1;
    nlohmann::json out;
    if (!(in >> id >> path >> dtype_name >> offset >> count >> codebook >> chunk_log2 >> checksums)) {
      out["error"] = "cannot parse job line: " + line;
      std::cout << out.dump() << "\n" << std::flush;
      ++failures;
      continue;
    }
    out["id"] = id;
    sz_dtype dtype;
    if (sz_dtype_from_name(dtype_name.c_str(), &dtype) != SZ_OK) {
      out["error"] = "unknown dtype " + dtype_name;
      std::cout << out.dump() << "\n" << std::flush;
      ++failures;
      continue;
    }
    auto it = files.find(path);
    if (it == files.end()) it = files.emplace(path, szbench::read_file(path)).first;
    const szbench::FileBytes& f = it->second;
    const size_t vs = sz_dtype_size(dtype);
    const uint64_t total = f.bytes.size() / vs;
    if (count == 0 && offset <= total) count = total - offset;
    if (!f.ok || offset + count > total) {
      out["error"] = f.ok ? "range outside file" : "cannot read " + path;
      std::cout << out.dump() << "\n" << std::flush;
      ++failures;
      continue;
    }
    szbench::Measurement m = szbench::measure(f.bytes.data() + offset * vs, count, dtype, codebook, chunk_log2,
                                              checksums != 0, threads);
    if (m.status != SZ_OK) {
      out["error"] = m.error;
      out["status"] = sz_status_name(m.status);
      ++failures;
    } else {
      out["codebook"] = szbench::codebook_string(m.codebook);
      out["code_bits"] = m.codebook.code_bits;
      std::vector<int> vals(m.codebook.values, m.codebook.values + m.codebook.count);
      out["codebook_values"] = vals;
      out["n_values"] = m.n_values;
      out["raw_bytes"] = m.raw_bytes;
      out["frame_bytes"] = m.frame_bytes;
      out["escapes"] = m.escapes;
      out["coded_chunks"] = m.coded_chunks;
      out["raw_chunks"] = m.raw_chunks;
      out["round_trip_ok"] = m.round_trip_ok;
    }
    std::cout << out.dump() << "\n" << std::flush;
  }
  return failures == 0 ? 0 : 1;
}
