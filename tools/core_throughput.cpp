// core_throughput — a quick throughput check of the fast CPU codec (the benchmark proper is bench/).
//
//   ninja -C build splitzip_core_throughput      (or by hand, from a build of the library:
//   c++ -std=c++17 -O2 -Iinclude -Ibench tools/core_throughput.cpp bench/harness/harness.cpp \
//       build/src/libsplitzip.a -lpthread -o build/bench/splitzip_core_throughput)
//   build/bench/splitzip_core_throughput FILE [dtype=bf16] [threads=1,2] [min_mib=64] [isa=best|portable|avx2|avx512]
//
// Tiles FILE (raw values) up to min_mib MiB, then reports, the median of 7 runs after a warm-up each
// (szbench::median_seconds): memcpy, and sz_compress / sz_decompress with and without chunk checksums, in GB/s of
// uncompressed bytes and as a fraction of memcpy's, with the ratio and a bit-exact check. isa limits the kernel sets
// (sz_set_cpu_isa).
#include <splitzip/splitzip.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness/harness.h"

// Timed runs per figure, after one warm-up run; the median is reported.
constexpr unsigned kRuns = 7;

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: core_throughput FILE [dtype] [threads,...] [min_mib]\n");
    return 2;
  }
  sz_dtype dtype = SZ_DTYPE_BF16;
  if (argc > 2 && sz_dtype_from_name(argv[2], &dtype) != SZ_OK) {
    fprintf(stderr, "unknown dtype %s\n", argv[2]);
    return 2;
  }
  std::vector<unsigned> threads;
  for (const char* p = argc > 3 ? argv[3] : "1,2"; *p;) {
    threads.push_back((unsigned)strtoul(p, const_cast<char**>(&p), 10));
    if (*p == ',') ++p;
  }
  const size_t min_bytes = (size_t)(argc > 4 ? atof(argv[4]) : 64.0) * 1048576;
  FILE* f = fopen(argv[1], "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", argv[1]);
    return 1;
  }
  std::vector<uint8_t> file;
  uint8_t buf[1 << 16];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) file.insert(file.end(), buf, buf + got);
  fclose(f);
  const size_t vb = sz_dtype_size(dtype);
  file.resize(file.size() / vb * vb);
  if (file.empty()) return 1;
  std::vector<uint8_t> in;
  while (in.size() < min_bytes) in.insert(in.end(), file.begin(), file.end());
  const size_t n = in.size() / vb;
  std::vector<uint8_t> frame(sz_compress_bound(n, dtype)), out(in.size()), copy(in.size());
  memset(frame.data(), 0, frame.size());
  memset(out.data(), 0, out.size());
  memset(copy.data(), 0, copy.size());

  auto copy_all = [&] {
    memcpy(copy.data(), in.data(), in.size());
    asm volatile("" ::"r"(copy.data()) : "memory");
  };
  const double mc = szbench::gbps(in.size(), szbench::median_seconds(copy_all, kRuns));
  if (argc > 5 && sz_set_cpu_isa(argv[5]) != SZ_OK) {
    fprintf(stderr, "unknown kernel set %s\n", argv[5]);
    return 2;
  }
  printf("input %s (%s, tiled to %.1f MiB)  isa=%s\n", argv[1], sz_dtype_name(dtype), in.size() / 1048576.0,
         sz_cpu_isa());
  printf("memcpy %.2f GB/s\n", mc);
  printf("%-7s %-9s %7s %9s %9s %9s %9s %6s\n", "threads", "checksums", "ratio", "enc GB/s", "enc/mcpy", "dec GB/s",
         "dec/mcpy", "exact");
  for (unsigned t : threads) {
    for (uint32_t flags : {SZ_FLAG_CHECKSUMS, 0u}) {
      sz_params p = sz_params_default();
      p.flags = flags;
      p.threads = t;
      size_t size = 0, outsize = 0;
      sz_status s1 = SZ_OK, s2 = SZ_OK;
      auto encode = [&] { s1 = sz_compress(in.data(), n, dtype, nullptr, &p, frame.data(), frame.size(), &size); };
      auto decode = [&] { s2 = sz_decompress(frame.data(), size, out.data(), out.size(), &outsize, t); };
      const double e = szbench::gbps(in.size(), szbench::median_seconds(encode, kRuns));
      const double d = szbench::gbps(in.size(), szbench::median_seconds(decode, kRuns));
      const bool exact = s1 == SZ_OK && s2 == SZ_OK && outsize == in.size() && memcmp(out.data(), in.data(), in.size()) == 0;
      printf("%-7u %-9s %7.4f %9.2f %9.2f %9.2f %9.2f %6s\n", t, flags ? "on" : "off", szbench::ratio(in.size(), size),
             e, szbench::fraction_of(e, mc), d, szbench::fraction_of(d, mc), exact ? "yes" : "NO");
    }
  }
  return 0;
}
