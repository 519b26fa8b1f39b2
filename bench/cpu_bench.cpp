// splitzip_cpu_bench — ratio and encode/decode throughput of the SplitZip CPU codec on raw tensor files, next to
// memcpy, zstd and lz4 measured in the same run on the same bytes.
//
//   splitzip_cpu_bench FILE... [--dtype bf16] [--layers N] [--threads 1,2] [--repeats 7] [--csv out.csv]
//
// For every file: the whole file, and for a KV cache laid out [layer][K/V][...] (the trained-d512 and stories260K
// dumps, detected from the file size, the file name or a sidecar .json with n_layers; or --layers N) its K half and
// V half, each gathered into one contiguous buffer as a K-only or V-only tensor would be (and with --per-layer
// every layer's K and V slice). Throughput is of
// uncompressed bytes (GB/s = 1e9 B/s), the median of --repeats timed repeats, each repeating the call for at least
// --min-time seconds. Every SplitZip and peer result is decoded and compared with the input before it is timed.
#include <splitzip/splitzip.h>

#include <CLI/CLI.hpp>
#include <lz4.h>
#include <nlohmann/json.hpp>
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "eval/measure_core.h"
#include "harness/harness.h"

namespace {

using szbench::median_seconds;

struct Options {
  std::vector<std::string> files;
  std::string dtype;
  unsigned layers = 0;
  std::vector<unsigned> threads{1, 2};
  std::vector<int> zstd_levels{1, 3};
  int repeats = 7;
  double min_time = 0.05;
  std::string codebook = "default";
  std::string csv, json;
  bool whole_only = false;
  bool per_layer = false;
  std::vector<std::string> codecs{"memcpy", "splitzip", "zstd", "lz4"};
  bool wants(const char* c) const { return std::find(codecs.begin(), codecs.end(), c) != codecs.end(); }
};

struct Part {
  std::string name;  // "all", "K", "V"
  sz_tensor_kind kind;
  std::vector<uint8_t> bytes;
};

struct Row {
  std::string file, part, dtype, codec, codebook;
  unsigned threads = 1;
  int checksums = -1;  // -1: not applicable
  uint64_t raw_bytes = 0, compressed_bytes = 0, escapes = 0;
  double enc_gbps = 0, dec_gbps = 0;
};

std::string base_name(const std::string& path) {
  const size_t p = path.find_last_of('/');
  return p == std::string::npos ? path : path.substr(p + 1);
}

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// The dtype a file name announces, or "" if it does not.
std::string dtype_from_name(const std::string& path) {
  const std::string b = base_name(path);
  if (contains(b, "e4m3")) return "fp8_e4m3";
  if (contains(b, "e5m2")) return "fp8_e5m2";
  if (contains(b, "bf16")) return "bf16";
  if (contains(b, "fp16")) return "fp16";
  if (contains(b, "fp32")) return "fp32";
  return "";
}

// Layer count of a [layer][kv][...] KV dump: a sidecar FILE-without-extension.json with "n_layers" (stories260K),
// a known trained-d512 size (8 layers, 256 values per token per layer and kv), else 0 (no K/V split).
unsigned detect_layers(const std::string& path, uint64_t n_values) {
  const size_t dot = path.find_last_of('.');
  if (dot != std::string::npos && dot > path.find_last_of('/') + 1) {
    std::ifstream js(path.substr(0, dot) + ".json");
    if (js) {
      try {
        nlohmann::json j = nlohmann::json::parse(js);
        if (j.contains("n_layers")) return j["n_layers"].get<unsigned>();
      } catch (const std::exception&) {
      }
    }
  }
  const std::string b = base_name(path);
  if ((contains(b, "kv_code") || contains(b, "kv_prose")) && n_values % (8 * 2 * 256) == 0) return 8;
  return 0;
}

void add_row(std::vector<Row>& rows, Row r) {
  std::printf("%-28s %-5s %-9s %-22s %2u %3s %8.4f %9.3f %9.3f\n", r.file.c_str(), r.part.c_str(), r.dtype.c_str(),
              r.codec.c_str(), r.threads, r.checksums < 0 ? "-" : (r.checksums ? "on" : "off"),
              szbench::ratio(r.raw_bytes, r.compressed_bytes), r.enc_gbps, r.dec_gbps);
  std::fflush(stdout);
  rows.push_back(std::move(r));
}

int bench_part(const Options& opt, const std::string& file, const Part& part, sz_dtype dtype,
               std::vector<Row>& rows) {
  const uint8_t* src = part.bytes.data();
  const size_t raw = part.bytes.size();
  const uint64_t n = raw / sz_dtype_size(dtype);
  Row base;
  base.file = base_name(file);
  base.part = part.name;
  base.dtype = sz_dtype_name(dtype);
  base.raw_bytes = raw;

  // memcpy: the speed limit of a pass that reads and writes every byte once.
  if (opt.wants("memcpy")) {
    std::vector<uint8_t> dst(raw);
    const double t = median_seconds([&] { std::memcpy(dst.data(), src, raw); }, opt.repeats, opt.min_time);
    Row r = base;
    r.codec = "memcpy";
    r.compressed_bytes = raw;
    r.enc_gbps = r.dec_gbps = szbench::gbps(raw, t);
    add_row(rows, r);
  }

  // SplitZip, fast path, for every thread count, with and without chunk checksums.
  if (opt.wants("splitzip")) {
    std::string spec = "self";
    if (opt.codebook == "default") {
      spec = part.kind == SZ_KIND_KEY ? "default:key" : part.kind == SZ_KIND_VALUE ? "default:value" : "default:generic";
      sz_codebook probe;
      if (sz_default_codebook(dtype, part.kind, &probe) != SZ_OK) spec = "self";  // no shipped codebook: calibrate
    } else if (opt.codebook != "self") {
      spec = opt.codebook;
    }
    sz_codebook cb;
    std::string err;
    sz_status st = szbench::codebook_from_spec(spec, dtype, src, n, &cb, &err);
    if (st != SZ_OK) {
      std::fprintf(stderr, "splitzip_cpu_bench: error: codebook %s for %s/%s: %s %s\n", spec.c_str(), file.c_str(),
                   part.name.c_str(), sz_status_name(st), err.c_str());
      return 1;
    }
    std::vector<uint8_t> frame((size_t)sz_compress_bound(n, dtype));
    std::vector<uint8_t> back(raw);
    for (int checksums = 1; checksums >= 0; --checksums) {
      for (unsigned th : opt.threads) {
        sz_params params = sz_params_default();
        params.flags = checksums ? SZ_FLAG_CHECKSUMS : 0u;
        params.threads = th;
        size_t fsize = 0, bsize = 0;
        st = sz_compress(src, n, dtype, &cb, &params, frame.data(), frame.size(), &fsize);
        if (st == SZ_OK) st = sz_decompress(frame.data(), fsize, back.data(), back.size(), &bsize, th);
        if (st != SZ_OK || bsize != raw || std::memcmp(back.data(), src, raw) != 0) {
          std::fprintf(stderr, "splitzip_cpu_bench: error: SplitZip round trip failed on %s/%s: %s\n", file.c_str(),
                       part.name.c_str(), sz_status_name(st));
          return 1;
        }
        sz_frame_info info;
        uint64_t escapes = 0;
        if (sz_frame_info_get(frame.data(), fsize, &info) == SZ_OK) escapes = info.escapes;
        const double te = median_seconds(
            [&] { sz_compress(src, n, dtype, &cb, &params, frame.data(), frame.size(), &fsize); }, opt.repeats,
            opt.min_time);
        const double td = median_seconds(
            [&] { sz_decompress(frame.data(), fsize, back.data(), back.size(), &bsize, th); }, opt.repeats,
            opt.min_time);
        Row r = base;
        r.codec = "splitzip";
        r.codebook = szbench::codebook_string(cb) + (spec == "self" ? " (self)" : " (" + spec + ")");
        r.threads = th;
        r.checksums = checksums;
        r.compressed_bytes = fsize;
        r.escapes = escapes;
        r.enc_gbps = szbench::gbps(raw, te);
        r.dec_gbps = szbench::gbps(raw, td);
        add_row(rows, r);
      }
    }
  }

  // zstd at the requested levels, one thread, reusing contexts as a server would.
  if (opt.wants("zstd")) {
    std::vector<uint8_t> dst(ZSTD_compressBound(raw));
    std::vector<uint8_t> back(raw);
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    ZSTD_DCtx* dctx = ZSTD_createDCtx();
    for (int level : opt.zstd_levels) {
      size_t csize = ZSTD_compressCCtx(cctx, dst.data(), dst.size(), src, raw, level);
      size_t dsize = ZSTD_isError(csize) ? csize : ZSTD_decompressDCtx(dctx, back.data(), raw, dst.data(), csize);
      if (ZSTD_isError(csize) || ZSTD_isError(dsize) || dsize != raw || std::memcmp(back.data(), src, raw) != 0) {
        std::fprintf(stderr, "splitzip_cpu_bench: error: zstd round trip failed on %s/%s\n", file.c_str(),
                     part.name.c_str());
        return 1;
      }
      const double te = median_seconds(
          [&] { csize = ZSTD_compressCCtx(cctx, dst.data(), dst.size(), src, raw, level); }, opt.repeats,
          opt.min_time);
      const double td = median_seconds(
          [&] { dsize = ZSTD_decompressDCtx(dctx, back.data(), raw, dst.data(), csize); }, opt.repeats, opt.min_time);
      Row r = base;
      r.codec = "zstd -" + std::to_string(level);
      r.compressed_bytes = csize;
      r.enc_gbps = szbench::gbps(raw, te);
      r.dec_gbps = szbench::gbps(raw, td);
      add_row(rows, r);
    }
    ZSTD_freeCCtx(cctx);
    ZSTD_freeDCtx(dctx);
  }

  // lz4 (default acceleration), one thread.
  if (opt.wants("lz4") && raw <= (size_t)LZ4_MAX_INPUT_SIZE) {
    std::vector<uint8_t> dst((size_t)LZ4_compressBound((int)raw));
    std::vector<uint8_t> back(raw);
    int csize = LZ4_compress_default((const char*)src, (char*)dst.data(), (int)raw, (int)dst.size());
    int dsize = csize > 0 ? LZ4_decompress_safe((const char*)dst.data(), (char*)back.data(), csize, (int)raw) : -1;
    if (csize <= 0 || dsize != (int)raw || std::memcmp(back.data(), src, raw) != 0) {
      std::fprintf(stderr, "splitzip_cpu_bench: error: lz4 round trip failed on %s/%s\n", file.c_str(),
                   part.name.c_str());
      return 1;
    }
    const double te = median_seconds(
        [&] { csize = LZ4_compress_default((const char*)src, (char*)dst.data(), (int)raw, (int)dst.size()); },
        opt.repeats, opt.min_time);
    const double td = median_seconds(
        [&] { dsize = LZ4_decompress_safe((const char*)dst.data(), (char*)back.data(), csize, (int)raw); },
        opt.repeats, opt.min_time);
    Row r = base;
    r.codec = "lz4";
    r.compressed_bytes = (uint64_t)csize;
    r.enc_gbps = szbench::gbps(raw, te);
    r.dec_gbps = szbench::gbps(raw, td);
    add_row(rows, r);
  }
  return 0;
}

// The rows as CSV; false if the file could not be written.
bool write_csv(const std::string& path, const std::vector<Row>& rows) {
  szbench::CsvWriter csv(path, {"file", "part", "dtype", "codec", "codebook", "threads", "checksums", "raw_bytes",
                                "compressed_bytes", "escapes", "ratio", "enc_gbps", "dec_gbps"});
  for (const Row& r : rows)
    csv.row({r.file, r.part, r.dtype, r.codec, r.codebook, std::to_string(r.threads),
             r.checksums < 0 ? std::string() : std::to_string(r.checksums), std::to_string(r.raw_bytes),
             std::to_string(r.compressed_bytes), std::to_string(r.escapes),
             szbench::fixed(szbench::ratio(r.raw_bytes, r.compressed_bytes), 6), szbench::fixed(r.enc_gbps, 4),
             szbench::fixed(r.dec_gbps, 4)});
  return csv.ok() && csv.close();
}

void write_json(const std::string& path, const std::vector<Row>& rows, const Options& opt) {
  nlohmann::json j;
  j["tool"] = "splitzip_cpu_bench";
  j["library_version"] = sz_version_string();
  j["repeats"] = opt.repeats;
  j["min_time_s"] = opt.min_time;
  j["zstd_version"] = ZSTD_versionString();
  j["lz4_version"] = LZ4_versionString();
  for (const Row& r : rows) {
    nlohmann::json o;
    o["file"] = r.file;
    o["part"] = r.part;
    o["dtype"] = r.dtype;
    o["codec"] = r.codec;
    o["codebook"] = r.codebook;
    o["threads"] = r.threads;
    if (r.checksums >= 0) o["checksums"] = r.checksums != 0;
    o["raw_bytes"] = r.raw_bytes;
    o["compressed_bytes"] = r.compressed_bytes;
    o["escapes"] = r.escapes;
    o["ratio"] = szbench::ratio(r.raw_bytes, r.compressed_bytes);
    o["enc_gbps"] = r.enc_gbps;
    o["dec_gbps"] = r.dec_gbps;
    j["rows"].push_back(o);
  }
  std::ofstream(path) << j.dump(1) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{"SplitZip CPU benchmark: ratio and GB/s next to memcpy, zstd and lz4 on the same bytes"};
  app.add_option("files", opt.files, "raw tensor files")->required()->check(CLI::ExistingFile);
  app.add_option("--dtype", opt.dtype, "dtype of every file (default: from the file name)");
  app.add_option("--layers", opt.layers, "files are [layers][K,V][...] KV dumps with this many layers (0: detect)");
  app.add_option("--threads", opt.threads, "SplitZip thread counts")->delimiter(',');
  app.add_option("--zstd-levels", opt.zstd_levels, "zstd levels")->delimiter(',');
  app.add_option("--repeats", opt.repeats, "timed repeats; the median is reported")->check(CLI::Range(1, 1000));
  app.add_option("--min-time", opt.min_time, "seconds each repeat runs at least");
  app.add_option("--codebook", opt.codebook,
                 "default (the library's K/V/generic codebook), self (calibrated on each part) or a codebook spec");
  app.add_option("--codecs", opt.codecs, "codecs to run: memcpy,splitzip,zstd,lz4")->delimiter(',');
  app.add_flag("--whole-only", opt.whole_only, "only the whole file, no K/V split");
  app.add_flag("--per-layer", opt.per_layer, "also every layer's K and V on its own");
  app.add_option("--csv", opt.csv, "write the rows as CSV");
  app.add_option("--json", opt.json, "write the rows as JSON");
  CLI11_PARSE(app, argc, argv);

  std::printf("# splitzip %s, zstd %s, lz4 %s; median of %d repeats, >= %.3f s each\n", sz_version_string(),
              ZSTD_versionString(), LZ4_versionString(), opt.repeats, opt.min_time);
  std::printf("%-28s %-5s %-9s %-22s %2s %3s %8s %9s %9s\n", "file", "part", "dtype", "codec", "th", "crc", "ratio",
              "enc GB/s", "dec GB/s");
  std::vector<Row> rows;
  int rc = 0;
  for (const std::string& file : opt.files) {
    const std::string dname = opt.dtype.empty() ? dtype_from_name(file) : opt.dtype;
    sz_dtype dtype;
    if (dname.empty() || sz_dtype_from_name(dname.c_str(), &dtype) != SZ_OK) {
      std::fprintf(stderr, "splitzip_cpu_bench: error: %s: unknown dtype (give --dtype)\n", file.c_str());
      return 2;
    }
    szbench::FileBytes f = szbench::read_file(file);
    const size_t vs = sz_dtype_size(dtype);
    if (!f.ok || f.bytes.size() % vs != 0) {
      std::fprintf(stderr, "splitzip_cpu_bench: error: cannot read %s as %s values\n", file.c_str(), dname.c_str());
      return 2;
    }
    const uint64_t n = f.bytes.size() / vs;
    std::vector<Part> parts;
    parts.push_back(Part{"all", SZ_KIND_GENERIC, f.bytes});
    const unsigned layers = opt.layers ? opt.layers : detect_layers(file, n);
    if (!opt.whole_only && layers > 0 && n % (2ull * layers) == 0) {
      const size_t slice = f.bytes.size() / (2ull * layers);
      Part k{"K", SZ_KIND_KEY, {}}, v{"V", SZ_KIND_VALUE, {}};
      for (unsigned l = 0; l < layers; ++l) {
        const uint8_t* base = f.bytes.data() + 2ull * l * slice;
        k.bytes.insert(k.bytes.end(), base, base + slice);
        v.bytes.insert(v.bytes.end(), base + slice, base + 2 * slice);
      }
      parts.push_back(std::move(k));
      parts.push_back(std::move(v));
      if (opt.per_layer) {
        for (unsigned l = 0; l < layers; ++l) {
          for (unsigned kv = 0; kv < 2; ++kv) {
            const uint8_t* base = f.bytes.data() + (2ull * l + kv) * slice;
            parts.push_back(Part{"L" + std::to_string(l) + (kv ? ".V" : ".K"), kv ? SZ_KIND_VALUE : SZ_KIND_KEY,
                                 std::vector<uint8_t>(base, base + slice)});
          }
        }
      }
    }
    for (const Part& p : parts) rc |= bench_part(opt, file, p, dtype, rows);
  }
  if (!opt.csv.empty() && !write_csv(opt.csv, rows)) {
    std::fprintf(stderr, "splitzip_cpu_bench: error: cannot write %s\n", opt.csv.c_str());
    rc = 1;
  }
  if (!opt.json.empty()) write_json(opt.json, rows, opt);
  return rc;
}
