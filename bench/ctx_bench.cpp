// splitzip_ctx_bench — what a reusable context (sz_cctx / sz_dctx) saves over the one-shot calls, which allocate
// their escape scratch and start their threads for every call: time per call, one-shot and context, on slices of a
// raw BF16 file (default data/kv_code_bf16_slice.bin, real KV) from 256 values to MiBs, with 1 and 2 threads.
//
//   splitzip_ctx_bench [FILE] [--repeats 7] [--min-time 0.2]
//
// A repeat times a batch of one-shot calls and then a batch of context calls, each lasting at least --min-time
// seconds; the figures are the medians over --repeats of the batch means, and the speedup the median of the
// per-repeat ratios, so that load that comes and goes on a shared machine hits both sides of a ratio alike
// (szbench::paired_seconds, bench/harness/harness.h).
// Every frame is checked against the one-shot frame and decoded back before anything is timed.
#include <splitzip/splitzip.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "harness/harness.h"

namespace {

[[noreturn]] void die(const char* what, sz_status s) {
  std::fprintf(stderr, "splitzip_ctx_bench: %s: %s\n", what, sz_status_name(s));
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  std::string file = std::string(SPLITZIP_SOURCE_DIR) + "/data/kv_code_bf16_slice.bin";
  unsigned repeats = 7;
  double min_time = 0.2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc) {
      repeats = unsigned(std::atoi(argv[++i]));
    } else if (a == "--min-time" && i + 1 < argc) {
      min_time = std::atof(argv[++i]);
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: splitzip_ctx_bench [FILE (raw bf16)] [--repeats N] [--min-time SECONDS]\n");
      return 0;
    } else {
      file = a;
    }
  }
  std::ifstream in(file, std::ios::binary);
  std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < 2) {
    std::fprintf(stderr, "splitzip_ctx_bench: cannot read %s\n", file.c_str());
    return 1;
  }
  // Tile the file up to 8 MiB so the multi-threaded rows have work for two threads.
  const size_t file_values = data.size() / 2;
  while (data.size() < (size_t(8) << 20)) data.insert(data.end(), data.begin(), data.begin() + file_values * 2);

  std::printf("splitzip %s ctx bench: %s (bf16, tiled to %zu values), median of %u batches of >= %.2f s\n",
              sz_version_string(), file.c_str(), data.size() / 2, repeats, min_time);
  std::printf("%10s %7s  %12s %12s %7s  %12s %12s %7s\n", "values", "threads", "enc one-shot", "enc context",
              "speedup", "dec one-shot", "dec context", "speedup");
  const size_t sizes[] = {256, 4096, 65536, 1 << 20, 4 << 20};
  for (unsigned threads : {1u, 2u}) {
    sz_cctx* cctx = sz_cctx_create(threads);
    sz_dctx* dctx = sz_dctx_create(threads);
    if (cctx == nullptr || dctx == nullptr) die("context", SZ_ERROR_OUT_OF_MEMORY);
    for (size_t n : sizes) {
      if (threads > 1 && n * 2 < (size_t(2) << 20)) continue;  // below 1 MiB a thread both use one thread
      sz_params p = sz_params_default();
      p.threads = threads;
      std::vector<uint8_t> frame(size_t(sz_compress_bound(n, SZ_DTYPE_BF16))), frame2(frame.size()), out(n * 2);
      size_t fsize = 0, fsize2 = 0, osize = 0;
      sz_status s = sz_compress(data.data(), n, SZ_DTYPE_BF16, nullptr, &p, frame.data(), frame.size(), &fsize);
      if (s != SZ_OK) die("sz_compress", s);
      s = sz_compress_cctx(cctx, data.data(), n, SZ_DTYPE_BF16, nullptr, &p, frame2.data(), frame2.size(), &fsize2);
      if (s != SZ_OK) die("sz_compress_cctx", s);
      if (fsize != fsize2 || std::memcmp(frame.data(), frame2.data(), fsize) != 0) die("frames differ", SZ_OK);
      s = sz_decompress_dctx(dctx, frame.data(), fsize, out.data(), out.size(), &osize);
      if (s != SZ_OK || std::memcmp(out.data(), data.data(), out.size()) != 0) die("round trip", s);

      const szbench::Paired e = szbench::paired_seconds(
          [&] { sz_compress(data.data(), n, SZ_DTYPE_BF16, nullptr, &p, frame2.data(), frame2.size(), &fsize2); },
          [&] {
            sz_compress_cctx(cctx, data.data(), n, SZ_DTYPE_BF16, nullptr, &p, frame2.data(), frame2.size(),
                             &fsize2);
          },
          repeats, min_time);
      const szbench::Paired d = szbench::paired_seconds(
          [&] { sz_decompress(frame.data(), fsize, out.data(), out.size(), &osize, threads); },
          [&] { sz_decompress_dctx(dctx, frame.data(), fsize, out.data(), out.size(), &osize); }, repeats, min_time);
      auto us = [](double s) { return s * 1e6; };
      std::printf("%10zu %7u  %9.2f us %9.2f us %6.2fx  %9.2f us %9.2f us %6.2fx\n", n, threads, us(e.a_s), us(e.b_s),
                  e.a_over_b, us(d.a_s), us(d.b_s), d.a_over_b);
    }
    sz_cctx_free(cctx);
    sz_dctx_free(dctx);
  }
  return 0;
}
