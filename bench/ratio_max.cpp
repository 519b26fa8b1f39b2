// ratio_max — the ratio table of the max mode (entropy-coded frames, docs/FORMAT.md §4.10) on real KV caches, in
// one run next to the fast mode with a channel book, zstd -1, -3 and -19, lz4, and the channel-conditioned entropy
// bound (bench/ratio_max.py adds ZipNN on the same bytes).
//
//   splitzip_ratio_max --dtype D --kv-shape L,2,T,H,D --calib FILE --measure FILE [--groups G] [--label NAME]
//                      [--tensors]
//
// Tables and books are calibrated on --calib and applied to --measure (another text). Per K, V and both it prints:
//   max      raw bytes / sum of the version 3 frames (one per tensor, chunk 2^16, checksums on; the symbol table is
//            shipped once and not counted; its size is printed)
//   paired   FP8 only: max mode with paired rows (§4.10.6): each row (token) paired with the previous row of the same
//            token, the symbol table calibrated on the paired symbols of --calib. The row map of each file comes
//            from its layer-0 V rows (equal rows: the same token; a serving engine builds it from the token ids)
//   fast     the same with version 2 frames from a channel book (chunk 2^12, checksums on)
//   zstd-1, zstd-3, zstd-19, lz4   libzstd (one thread) and liblz4 (LZ4_compress_default) on the concatenated K (or
//            V) tensors; K+V adds the two sizes
//   bound    W / (H + R'): H = the entropy of the symbol (BF16/FP16 exponent, FP8 whole byte) given the channel
//            (layer, K/V, kv_head, dim), measured on --measure itself; R' the raw bits (§4.10.2)
//   frac     max / bound
// and the single-thread CPU speed of the max mode (GB/s of uncompressed data per second of the thread's CPU time,
// over all tensors) of the scalar reference coder (one run) and of the fast coder with each kernel set this CPU
// runs (sz_set_cpu_isa: portable, avx2, avx512; median of 3 runs).
// --tensors adds a line per tensor (layer, K or V) of --measure: max and zstd -1 on the tensor alone, and how much
// of it repeats earlier rows. A row is one token's H x D values; a token's identity is its layer-0 V row (which
// depends only on the token's embedding), and `same-token` pairs each row with the row of the same tensor at the
// previous token with that identity: the share of rows with such a pair, of rows equal to it, and of bytes equal
// to the paired row's byte at the same place. This is what a symbol "equal to the paired row" could gain.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <lz4.h>
#include <zstd.h>

#include "harness/harness.h"
#include "splitzip/splitzip.h"

namespace {

[[noreturn]] void die(const std::string& m) {
  fprintf(stderr, "ratio_max: %s\n", m.c_str());
  exit(2);
}
void ok(sz_status s, const char* what) {
  if (s != SZ_OK) die(std::string(what) + ": " + sz_status_name(s));
}

std::vector<uint8_t> read_all(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) die("cannot open " + path);
  std::vector<uint8_t> v;
  uint8_t buf[1 << 16];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) v.insert(v.end(), buf, buf + got);
  fclose(f);
  return v;
}

// CPU time of the calling thread: the codec runs on one thread, and on a shared machine wall time would also count
// other processes' time slices.
double now() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double zstd_size(const uint8_t* v, size_t n, int level) {
  std::vector<uint8_t> out(ZSTD_compressBound(n));
  const size_t r = ZSTD_compress(out.data(), out.size(), v, n, level);
  if (ZSTD_isError(r)) die("zstd failed");
  return (double)r;
}

double lz4_size(const uint8_t* v, size_t n) {
  if (n > (size_t)LZ4_MAX_INPUT_SIZE) die("lz4: input too large");
  std::vector<char> out((size_t)LZ4_compressBound((int)n));
  const int r = LZ4_compress_default((const char*)v, out.data(), (int)n, (int)out.size());
  if (r <= 0) die("lz4 failed");
  return (double)r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dtype_name, shape_text, calib, measure, label;
  uint32_t groups = 64;
  bool per_tensor = false;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--tensors") {
      per_tensor = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) die("missing value of " + a);
    const std::string v = argv[i + 1];
    if (a == "--dtype") dtype_name = v;
    else if (a == "--kv-shape") shape_text = v;
    else if (a == "--calib") calib = v;
    else if (a == "--measure") measure = v;
    else if (a == "--groups") groups = (uint32_t)atoi(v.c_str());
    else if (a == "--label") label = v;
    else die("unknown option " + a);
  }
  if (dtype_name.empty() || shape_text.empty() || calib.empty() || measure.empty())
    die("usage: --dtype D --kv-shape L,2,T,H,D --calib FILE --measure FILE [--groups G] [--label NAME] [--tensors]");
  sz_dtype dt;
  ok(sz_dtype_from_name(dtype_name.c_str(), &dt), "--dtype");
  unsigned L = 0, two = 0, T = 0, H = 0, D = 0;
  if (sscanf(shape_text.c_str(), "%u,%u,%u,%u,%u", &L, &two, &T, &H, &D) != 5 || two != 2) die("bad --kv-shape");
  const uint32_t tensors = 2 * L, period = H * D;
  const size_t vb = sz_dtype_size(dt);
  const std::vector<uint8_t> cal = read_all(calib), mea = read_all(measure);
  const uint64_t tensor_values = (uint64_t)T * period, tensor_bytes = tensor_values * vb;
  if (mea.size() != tensors * tensor_bytes || cal.size() % (tensors * period * vb) != 0)
    die("file sizes do not match --kv-shape");
  const uint64_t cal_tokens = cal.size() / (tensors * period * vb);

  // Max mode: symbol table from --calib.
  std::vector<uint32_t> counts(sz_symbol_histogram_size(dt, tensors, period) / 4, 0);
  ok(sz_symbol_histogram_add(counts.data(), dt, tensors, period, cal.data(), cal_tokens), "histogram");
  std::vector<uint8_t> table_file(sz_symbol_table_file_size(dt, tensors, period, groups));
  size_t table_size = 0;
  ok(sz_symbol_calibrate(counts.data(), dt, tensors, period, groups, table_file.data(), table_file.size(), &table_size,
                         nullptr),
     "calibrate");
  sz_symbol_table table;
  ok(sz_symbol_table_parse(table_file.data(), table_size, &table), "parse");
  std::vector<uint8_t> ws(sz_symbol_table_workspace_size(&table));
  ok(sz_symbol_table_prepare(&table, ws.data(), ws.size()), "prepare");

  // Paired rows (FP8): row maps of both files from their layer-0 V rows, a table calibrated on the paired symbols.
  const bool fp8 = vb == 1;
  struct Paired {
    std::vector<uint8_t> file;
    sz_row_map map{};
  } cal_map, mea_map;
  auto row_map_of = [&](const std::vector<uint8_t>& kv, uint64_t tokens, Paired* out) {
    std::vector<uint8_t> ws(sz_row_map_workspace_size(tokens));
    out->file.resize(sz_row_map_file_size(tokens));
    size_t size = 0;
    ok(sz_row_map_from_rows(kv.data() + tokens * period, tokens, period, ws.data(), ws.size(), out->file.data(),
                            out->file.size(), &size),
       "row map");
    ok(sz_row_map_parse(out->file.data(), size, &out->map), "row map parse");
  };
  std::vector<uint8_t> ptable_file;
  sz_symbol_table ptable{};
  std::vector<uint8_t> pws;
  if (fp8) {
    row_map_of(cal, cal_tokens, &cal_map);
    row_map_of(mea, T, &mea_map);
    std::vector<uint32_t> pc(counts.size(), 0);
    ok(sz_symbol_histogram_add_paired(pc.data(), dt, tensors, period, cal.data(), cal_tokens, &cal_map.map),
       "paired histogram");
    ptable_file.resize(table_file.size());
    size_t psize = 0;
    ok(sz_symbol_calibrate(pc.data(), dt, tensors, period, groups, ptable_file.data(), ptable_file.size(), &psize,
                           nullptr),
       "paired calibrate");
    ok(sz_symbol_table_parse(ptable_file.data(), psize, &ptable), "paired parse");
    pws.resize(sz_symbol_table_workspace_size(&ptable));
    ok(sz_symbol_table_prepare(&ptable, pws.data(), pws.size()), "paired prepare");
  }

  // Fast mode: channel book from --calib.
  std::vector<uint32_t> ccounts(sz_channel_histogram_size(dt, tensors, period) / 4, 0);
  ok(sz_channel_histogram_add(ccounts.data(), dt, tensors, period, cal.data(), cal_tokens), "channel histogram");
  std::vector<uint8_t> bases((size_t)tensors * period);
  unsigned k = 0;
  ok(sz_channel_calibrate(ccounts.data(), dt, tensors, period, 0, bases.data(), &k, nullptr), "channel calibrate");
  sz_channel_book book;
  ok(sz_channel_book_init(&book, dt, k, period, tensors, bases.data()), "book");

  // Max mode's frames in chunks of 2^16 whatever the tensor's size (what the table says; the default chunk of a
  // call, sz_entropy_chunk_log2, is smaller for tensors of fewer than 2^29 values, for a GPU's sake).
  sz_params mp = sz_params_default();
  mp.chunk_log2 = SZ_ENTROPY_CHUNK_LOG2;

  // Sizes per K / V, and the round trip of every frame.
  const uint64_t bound = sz_compress_bound(tensor_values, dt);
  std::vector<uint8_t> frame(bound), back(tensor_bytes);
  double max_size[2] = {0, 0}, paired_size[2] = {0, 0}, fast_size[2] = {0, 0}, raw[2] = {0, 0};
  std::vector<double> tensor_max(tensors);
  std::vector<uint8_t> part[2];
  for (uint32_t t = 0; t < tensors; ++t) {
    const uint8_t* src = mea.data() + t * tensor_bytes;
    size_t size = 0, w = 0;
    ok(sz_compress_entropy(src, tensor_values, dt, &table, t, &mp, frame.data(), frame.size(), &size), "max");
    ok(sz_decompress_entropy(frame.data(), size, &table, back.data(), back.size(), &w, 1), "max decode");
    if (w != tensor_bytes || memcmp(back.data(), src, w) != 0) die("max mode round trip differs");
    max_size[t % 2] += size;
    tensor_max[t] = (double)size;
    raw[t % 2] += tensor_bytes;
    part[t % 2].insert(part[t % 2].end(), src, src + tensor_bytes);
    if (fp8) {
      ok(sz_compress_entropy_paired(src, tensor_values, dt, &ptable, t, &mea_map.map, &mp, frame.data(), frame.size(),
                                    &size),
         "paired");
      ok(sz_decompress_entropy_paired(frame.data(), size, &ptable, &mea_map.map, back.data(), back.size(), &w, 1),
         "paired decode");
      if (w != tensor_bytes || memcmp(back.data(), src, w) != 0) die("paired round trip differs");
      paired_size[t % 2] += size;
    }
    ok(sz_compress_channels(src, tensor_values, dt, &book, t, nullptr, frame.data(), frame.size(), &size), "fast");
    ok(sz_decompress_book(frame.data(), size, &book, back.data(), back.size(), &w, 1), "fast decode");
    if (w != tensor_bytes || memcmp(back.data(), src, w) != 0) die("fast mode round trip differs");
    fast_size[t % 2] += size;
  }

  // Speed of the max mode: the reference coder once, the fast coder with each kernel set (median of 3); every
  // frame is checked against the reference's and every decode against the input.
  std::vector<std::vector<uint8_t>> ref_frames(tensors);
  struct Speed {
    std::string name;
    double enc, dec;
  };
  std::vector<Speed> speeds;
  std::vector<std::string> variants = {"reference", "portable"};
  for (const char* isa : {"avx2", "avx512"})
    if (sz_set_cpu_isa(isa) == SZ_OK && strcmp(sz_cpu_isa(), isa) == 0) variants.push_back(isa);
  for (const std::string& v : variants) {
    const bool ref = v == "reference";
    if (!ref) ok(sz_set_cpu_isa(v.c_str()), "sz_set_cpu_isa");
    std::vector<double> enc_t, dec_t;
    for (int rep = 0; rep < (ref ? 1 : 3); ++rep) {
      double te = 0, td = 0;
      for (uint32_t t = 0; t < tensors; ++t) {
        const uint8_t* src = mea.data() + t * tensor_bytes;
        size_t size = 0, w = 0;
        double a = now();
        ok(ref ? sz_compress_entropy_reference(src, tensor_values, dt, &table, t, &mp, frame.data(), frame.size(),
                                               &size)
               : sz_compress_entropy(src, tensor_values, dt, &table, t, &mp, frame.data(), frame.size(), &size),
           "max");
        te += now() - a;
        if (ref) ref_frames[t].assign(frame.data(), frame.data() + size);
        else if (size != ref_frames[t].size() || memcmp(frame.data(), ref_frames[t].data(), size) != 0)
          die("the " + v + " frame differs from the reference's");
        a = now();
        ok(ref ? sz_decompress_entropy_reference(frame.data(), size, &table, back.data(), back.size(), &w)
               : sz_decompress_entropy(frame.data(), size, &table, back.data(), back.size(), &w, 1),
           "max decode");
        td += now() - a;
        if (w != tensor_bytes || memcmp(back.data(), src, w) != 0) die("max mode round trip differs (" + v + ")");
      }
      enc_t.push_back(te);
      dec_t.push_back(td);
    }
    const uint64_t total = (uint64_t)tensor_bytes * tensors;
    speeds.push_back({v, szbench::gbps(total, szbench::median(enc_t)), szbench::gbps(total, szbench::median(dec_t))});
  }
  sz_set_cpu_isa(nullptr);

  // The channel-conditioned bound on --measure.
  const unsigned B = dt == SZ_DTYPE_FP16 ? 5 : 8, A = 1u << B, W = (unsigned)vb * 8;
  const unsigned Rp = vb == 1 ? 0 : W - sz_dtype_exponent_bits(dt);
  double bits[2] = {0, 0};
  std::vector<uint64_t> h((size_t)period * A);
  for (uint32_t t = 0; t < tensors; ++t) {
    std::fill(h.begin(), h.end(), 0);
    const uint8_t* src = mea.data() + t * tensor_bytes;
    for (uint64_t i = 0; i < tensor_values; ++i) {
      uint32_t x = 0;
      for (size_t b = 0; b < vb; ++b) x |= (uint32_t)src[i * vb + b] << (8 * b);
      const uint32_t sym = vb == 1 ? x : (x >> (W - 1 - sz_dtype_exponent_bits(dt))) & (A - 1);
      ++h[(i % period) * A + sym];
    }
    for (uint32_t c = 0; c < period; ++c) {
      double n = 0;
      for (unsigned s = 0; s < A; ++s) n += (double)h[(size_t)c * A + s];
      for (unsigned s = 0; s < A; ++s) {
        const double m = (double)h[(size_t)c * A + s];
        if (m > 0) bits[t % 2] += -m * log2(m / n);
      }
    }
  }

  const char* names[3] = {"K", "V", "K+V"};
  // Peers on K and on V (K+V: the two compressed sizes added, as the frames are per tensor): zstd -1, -3, -19, lz4.
  const int kLevels[3] = {1, 3, 19};
  double peer[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
  for (int p = 0; p < 2; ++p) {
    for (int l = 0; l < 3; ++l) peer[p][l] = zstd_size(part[p].data(), part[p].size(), kLevels[l]);
    peer[p][3] = lz4_size(part[p].data(), part[p].size());
  }
  printf("%-22s %-9s %-4s %8s %8s %8s %8s %8s %8s %8s %8s %7s\n", "data", "dtype", "part", "max", "paired", "fast",
         "zstd-1", "zstd-3", "zstd-19", "lz4", "bound", "frac");
  for (int p = 0; p < 3; ++p) {
    const double r = p < 2 ? raw[p] : raw[0] + raw[1];
    const double ms = p < 2 ? max_size[p] : max_size[0] + max_size[1];
    const double fs = p < 2 ? fast_size[p] : fast_size[0] + fast_size[1];
    const double ps = p < 2 ? paired_size[p] : paired_size[0] + paired_size[1];
    const double n = r / vb, hb = p < 2 ? bits[p] : bits[0] + bits[1];
    const double bound_ratio = W / (hb / n + Rp);
    double pr[4];
    for (int q = 0; q < 4; ++q) pr[q] = r / (p < 2 ? peer[p][q] : peer[0][q] + peer[1][q]);
    printf("%-22s %-9s %-4s %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %7.3f\n", label.c_str(), sz_dtype_name(dt),
           names[p], r / ms, fp8 ? r / ps : NAN, r / fs, pr[0], pr[1], pr[2], pr[3], bound_ratio,
           (r / ms) / bound_ratio);
  }
  if (per_tensor) {
    // Each token's previous token with the same layer-0 V row (tensor 1), or T when there is none.
    const size_t row = (size_t)period * vb;
    std::vector<uint32_t> prev(T, T);
    std::map<std::string, uint32_t> last;
    for (uint32_t i = 0; i < T; ++i) {
      const std::string key((const char*)mea.data() + tensor_bytes + i * row, row);
      const auto it = last.find(key);
      if (it != last.end()) prev[i] = it->second;
      last[key] = i;
    }
    for (uint32_t t = 0; t < tensors; ++t) {
      const uint8_t* src = mea.data() + t * tensor_bytes;
      uint64_t paired = 0, equal_rows = 0, equal_bytes = 0;
      for (uint32_t i = 0; i < T; ++i) {
        if (prev[i] == T) continue;
        ++paired;
        const uint8_t *a = src + i * row, *b = src + prev[i] * row;
        size_t same = 0;
        for (size_t j = 0; j < row; ++j) same += a[j] == b[j];
        equal_rows += same == row;
        equal_bytes += same;
      }
      printf("%-22s %-9s layer %2u %s  max %7.4f  zstd-1 %7.4f  same-token rows paired %5.1f%%, equal %5.1f%%, "
             "bytes equal %5.1f%%\n",
             label.c_str(), sz_dtype_name(dt), t / 2, t % 2 ? "V" : "K", (double)tensor_bytes / tensor_max[t],
             (double)tensor_bytes / zstd_size(src, tensor_bytes, 1), 100.0 * paired / T, 100.0 * equal_rows / T,
             100.0 * equal_bytes / ((double)T * row));
    }
  }
  std::string line;
  char buf[128];
  for (const Speed& sp : speeds) {
    snprintf(buf, sizeof buf, "%s%s %.3f / %.3f", line.empty() ? "" : ", ", sp.name.c_str(), sp.enc, sp.dec);
    line += buf;
  }
  printf("%-22s %-9s symbol table %zu bytes (%u groups, shipped once, not counted); max mode on 1 thread, encode / "
         "decode GB/s of its CPU time (reference 1 run, others median of 3): %s\n",
         label.c_str(), sz_dtype_name(dt), table_size, table.groups, line.c_str());
  return 0;
}
