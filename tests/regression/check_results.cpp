// splitzip_check_results — recomputes every row of bench/results.csv with the library and fails on any difference.
//
//   splitzip_check_results bench/results.csv --root .            check (what ctest runs)
//   splitzip_check_results bench/results.csv --root . --record   re-record on purpose after a deliberate change
//
// A row is (file, shared, dtype, part, offset, count, codebook spec, chunk_log2, checksums) -> (frame_bytes,
// escapes, raw_chunks). Paths are relative to --root. Rows whose file is absent (the ../shared data on a machine
// without it) are skipped with a message; --record keeps them as they are.
#include "eval/measure_core.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace {
constexpr const char* kHeader =
    "file,shared,dtype,part,offset,count,codebook,chunk_log2,checksums,frame_bytes,escapes,raw_chunks";
constexpr int kColumns = 12;
}  // namespace

int main(int argc, char** argv) {
  std::string csv_path, root = ".";
  bool record = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--record") record = true;
    else if (a == "--root" && i + 1 < argc) root = argv[++i];
    else if (csv_path.empty() && a[0] != '-') csv_path = a;
    else {
      std::cerr << "usage: splitzip_check_results RESULTS.csv [--root DIR] [--record]\n";
      return 2;
    }
  }
  if (csv_path.empty()) {
    std::cerr << "usage: splitzip_check_results RESULTS.csv [--root DIR] [--record]\n";
    return 2;
  }
  std::ifstream in(csv_path);
  if (!in) {
    std::cerr << "splitzip_check_results: error: cannot read " << csv_path << "\n";
    return 2;
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  in.close();
  char* resolved = realpath(csv_path.c_str(), nullptr);
  const std::string csv_abs = resolved ? resolved : csv_path;
  std::free(resolved);
  if (chdir(root.c_str()) != 0) {
    std::cerr << "splitzip_check_results: error: cannot enter " << root << "\n";
    return 2;
  }

  int passed = 0, failed = 0, skipped = 0, updated = 0;
  bool header_seen = false;
  for (size_t li = 0; li < lines.size(); ++li) {
    const std::string& line = lines[li];
    if (line.empty() || line[0] == '#') continue;
    if (!header_seen) {
      if (line != kHeader) {
        std::cerr << "splitzip_check_results: error: unexpected header in " << csv_path << "\n";
        return 2;
      }
      header_seen = true;
      continue;
    }
    std::vector<std::string> c = szbench::split(line, ',');
    if ((int)c.size() != kColumns) {
      std::cerr << csv_path << ":" << li + 1 << ": error: expected " << kColumns << " columns\n";
      ++failed;
      continue;
    }
    const std::string& file = c[0];
    if (!szbench::file_exists(file)) {
      std::cout << "SKIP " << csv_path << ":" << li + 1 << ": " << file << " is absent"
                << (c[1] == "1" ? " (shared data not on this machine)" : "") << "\n";
      ++skipped;
      continue;
    }
    sz_dtype dtype;
    if (sz_dtype_from_name(c[2].c_str(), &dtype) != SZ_OK) {
      std::cerr << csv_path << ":" << li + 1 << ": error: unknown dtype " << c[2] << "\n";
      ++failed;
      continue;
    }
    szbench::FileBytes f = szbench::read_file(file);
    const size_t vs = sz_dtype_size(dtype);
    const uint64_t off = std::stoull(c[4]), count = std::stoull(c[5]);
    if (!f.ok || (off + count) * vs > f.bytes.size()) {
      std::cerr << csv_path << ":" << li + 1 << ": error: range outside " << file << "\n";
      ++failed;
      continue;
    }
    szbench::Measurement m = szbench::measure(f.bytes.data() + off * vs, count, dtype, c[6],
                                              (unsigned)std::stoul(c[7]), c[8] == "1", 2);
    if (m.status != SZ_OK) {
      std::cerr << csv_path << ":" << li + 1 << ": error: " << m.error << "\n";
      ++failed;
      continue;
    }
    const std::string got_frame = std::to_string(m.frame_bytes), got_esc = std::to_string(m.escapes),
                      got_raw = std::to_string(m.raw_chunks);
    if (record) {
      if (c[9] != got_frame || c[10] != got_esc || c[11] != got_raw) ++updated;
      c[9] = got_frame;
      c[10] = got_esc;
      c[11] = got_raw;
      std::string out;
      for (int i = 0; i < kColumns; ++i) out += (i ? "," : "") + c[i];
      lines[li] = out;
      ++passed;
    } else if (c[9] == got_frame && c[10] == got_esc && c[11] == got_raw) {
      ++passed;
    } else {
      std::cout << "FAIL " << csv_path << ":" << li + 1 << ": " << file << " " << c[3] << " " << c[6]
                << " chunk_log2 " << c[7] << " checksums " << c[8] << ": recorded frame_bytes/escapes/raw_chunks "
                << c[9] << "/" << c[10] << "/" << c[11] << ", now " << got_frame << "/" << got_esc << "/" << got_raw
                << "\n";
      ++failed;
    }
  }
  if (record) {
    std::ofstream out(csv_abs);
    for (const std::string& l : lines) out << l << "\n";
    if (!out) {
      std::cerr << "splitzip_check_results: error: cannot write " << csv_path << "\n";
      return 2;
    }
    std::cout << "re-recorded " << csv_path << ": " << updated << " rows changed\n";
  }
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  if (failed) {
    std::cout << "A change in compressed size is a change in ratio. If it is intended, re-record with\n"
                 "  splitzip_check_results bench/results.csv --root . --record   (or: python3 bench/eval.py)\n"
                 "and commit bench/results.csv with the reason.\n";
    return 1;
  }
  if (passed == 0) return 77;  // nothing could be checked here
  return 0;
}
