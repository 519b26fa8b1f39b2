// bench_gpu.cpp — GPU encode / decode throughput of the CUDA codec next to cudaMemcpy, on real KV tiled to >= 1 GiB.
//
// For every dataset: the same-run device-to-device cudaMemcpy bandwidth B (bytes read + written per second), the
// frame size, and encode / decode GB/s of uncompressed bytes, with and without chunk checksums. The roofline of a
// codec that reads its input once and writes its output once is B * raw / (raw + compressed) (issue 3), and the
// table gives each speed's ratio to it. Timing: CUDA events around each call, after warm-up, median of --reps runs;
// every buffer is >= 1 GiB, far larger than the 60 MB L2, so no run is served from cache. Every frame is checked
// byte for byte against the CPU codec, and every decode against the input.
//
// Datasets (files from --data, as copied into .devdata/ for the GPU machine):
//   bf16   kv_code_bf16.bin (+ kv_prose_bf16.bin)           real BF16 KV of trained-d512
//   fp16   the BF16 values rounded to binary16               (real values, FP16 container)
//   fp32   the BF16 values widened to binary32               (exact)
//   e4m3 / e5m2  kv_code_e4m3.bin / kv_code_e5m2.bin         real FP8 KV of the same model
//   bf16_esc1 / bf16_esc5  the BF16 data with 1% / 5% of the values given an exponent outside the codebook
// Output: a markdown table on stdout, and CSV rows to --csv.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "splitzip/splitzip.h"
#include "splitzip/splitzip_cuda.h"

namespace {

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)
#define SZ(x)                                                                                \
  do {                                                                                       \
    sz_status s_ = (x);                                                                      \
    if (s_ != SZ_OK) {                                                                       \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, sz_status_name(s_));         \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

std::vector<uint8_t> read_file(const std::string& path) {
  std::vector<uint8_t> v;
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return v;
  fseek(f, 0, SEEK_END);
  v.resize((size_t)ftell(f));
  fseek(f, 0, SEEK_SET);
  if (fread(v.data(), 1, v.size(), f) != v.size()) v.clear();
  fclose(f);
  return v;
}

float bf16_to_float(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
uint16_t float_to_half(float f) {  // round to nearest even, with subnormals, inf and NaN
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7FFFFFFFu;
  if (absx >= 0x7F800000u) return (uint16_t)(sign | 0x7C00u | (absx > 0x7F800000u ? 0x200u : 0u));
  if (absx >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  // rounds to inf
  if (absx < 0x38800000u) {                                     // subnormal or zero in half
    const float a = fabsf(f) * 16777216.0f;                     // 2^24: units of the smallest half subnormal
    const uint32_t m = (uint32_t)nearbyintf(a);
    return (uint16_t)(sign | m);
  }
  const uint32_t e = ((absx >> 23) - 112) << 10;
  const uint32_t m = absx & 0x7FFFFFu;
  uint32_t h = e | (m >> 13);
  const uint32_t rem = m & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)(sign | h);
}

struct Dataset {
  std::string name;
  sz_dtype dtype;
  std::vector<uint8_t> bytes;  // one tile
  sz_codebook codebook;        // calibrated on the (un-escaped) real data of the dtype
};

sz_codebook calibrate(const std::vector<uint8_t>& bytes, sz_dtype dtype) {
  sz_histogram h;
  SZ(sz_histogram_init(&h, dtype));
  SZ(sz_histogram_add(&h, bytes.data(), bytes.size() / sz_dtype_size(dtype)));
  sz_codebook cb;
  SZ(sz_calibrate(&h, &cb, nullptr));
  return cb;
}

// Gives a fraction `rate` of the BF16 values an exponent outside the codebook (deterministic positions).
std::vector<uint8_t> with_escapes(const std::vector<uint8_t>& bf16, const sz_codebook& cb, double rate, uint64_t seed) {
  std::vector<uint8_t> out = bf16;
  bool in_cb[256] = {};
  for (unsigned i = 0; i < cb.count; ++i) in_cb[cb.values[i]] = true;
  std::vector<uint8_t> outside;
  for (unsigned e = 100; e < 160; ++e)
    if (!in_cb[e]) outside.push_back((uint8_t)e);
  uint64_t s = seed;
  const size_t n = out.size() / 2;
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = (double)(s >> 11) * (1.0 / 9007199254740992.0);
    if (u < rate) {
      uint16_t v;
      memcpy(&v, &out[2 * i], 2);
      const uint16_t e = outside[(s >> 7) % outside.size()];
      v = (uint16_t)((v & 0x807Fu) | (e << 7));
      memcpy(&out[2 * i], &v, 2);
    }
  }
  return out;
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  template <class F>
  double median_ms(F&& f, int warmup, int reps) {
    for (int i = 0; i < warmup; ++i) f();
    CK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) {
      CK(cudaEventRecord(a));
      f();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string data_dir = ".devdata", csv_path, only;
  double gib = 1.0;
  int reps = 20, warmup = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--data") data_dir = next();
    else if (a == "--gib") gib = atof(next().c_str());
    else if (a == "--reps") reps = atoi(next().c_str());
    else if (a == "--warmup") warmup = atoi(next().c_str());
    else if (a == "--csv") csv_path = next();
    else if (a == "--only") only = next();
    else {
      fprintf(stderr, "usage: %s [--data DIR] [--gib G] [--reps N] [--warmup N] [--csv FILE] [--only NAME]\n", argv[0]);
      return 2;
    }
  }
  if (!sz_cuda_available()) {
    fprintf(stderr, "no CUDA device: nothing to measure\n");
    return 77;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0, mem_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0);
  printf("device: %s, %d SMs, L2 %d MB, clock %d MHz, memory clock %d MHz\n", prop.name, prop.multiProcessorCount,
         prop.l2CacheSize >> 20, clock_khz / 1000, mem_khz / 1000);

  // ---- datasets ----
  std::vector<uint8_t> bf16 = read_file(data_dir + "/kv_code_bf16.bin");
  const std::vector<uint8_t> prose = read_file(data_dir + "/kv_prose_bf16.bin");
  if (bf16.empty()) {
    fprintf(stderr, "missing %s/kv_code_bf16.bin\n", data_dir.c_str());
    return 1;
  }
  bf16.insert(bf16.end(), prose.begin(), prose.end());
  std::vector<Dataset> sets;
  sets.push_back({"bf16", SZ_DTYPE_BF16, bf16, calibrate(bf16, SZ_DTYPE_BF16)});
  {
    std::vector<uint8_t> h(bf16.size()), f(bf16.size() * 2);
    for (size_t i = 0; i < bf16.size() / 2; ++i) {
      uint16_t b;
      memcpy(&b, &bf16[2 * i], 2);
      const uint16_t hv = float_to_half(bf16_to_float(b));
      memcpy(&h[2 * i], &hv, 2);
      const uint32_t fv = (uint32_t)b << 16;
      memcpy(&f[4 * i], &fv, 4);
    }
    sets.push_back({"fp16", SZ_DTYPE_FP16, h, calibrate(h, SZ_DTYPE_FP16)});
    sets.push_back({"fp32", SZ_DTYPE_FP32, f, calibrate(f, SZ_DTYPE_FP32)});
  }
  for (const char* fp8 : {"e4m3", "e5m2"}) {
    std::vector<uint8_t> v = read_file(data_dir + "/kv_code_" + fp8 + ".bin");
    const std::vector<uint8_t> p = read_file(data_dir + "/kv_prose_" + fp8 + ".bin");
    v.insert(v.end(), p.begin(), p.end());
    const sz_dtype dt = fp8[1] == '4' ? SZ_DTYPE_FP8_E4M3 : SZ_DTYPE_FP8_E5M2;
    if (!v.empty()) sets.push_back({fp8, dt, v, calibrate(v, dt)});
  }
  sets.push_back({"bf16_esc1", SZ_DTYPE_BF16, with_escapes(bf16, sets[0].codebook, 0.01, 1), sets[0].codebook});
  sets.push_back({"bf16_esc5", SZ_DTYPE_BF16, with_escapes(bf16, sets[0].codebook, 0.05, 5), sets[0].codebook});

  FILE* csv = csv_path.empty() ? nullptr : fopen(csv_path.c_str(), "w");
  if (csv)
    fprintf(csv, "dataset,dtype,code_bits,bytes,frame_bytes,ratio,escape_rate,memcpy_GBps,roofline_GBps,"
                 "enc_GBps,enc_roof,dec_GBps,dec_roof,enc_cks_GBps,enc_cks_roof,dec_cks_GBps,dec_cks_roof\n");
  printf("\n| data | k | ratio | escapes | memcpy GB/s | roofline GB/s | encode GB/s | /roof | decode GB/s | /roof |"
         " encode+cks GB/s | /roof | decode+cks GB/s | /roof |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
         "---:|---:|---:|---:|\n");

  Timer timer;
  for (const Dataset& ds : sets) {
    if (!only.empty() && ds.name != only) continue;
    const size_t vb = sz_dtype_size(ds.dtype);
    const size_t tile = ds.bytes.size();
    const size_t tiles = (size_t)std::ceil(gib * (double)(1ull << 30) / (double)tile);
    const size_t bytes = tile * tiles;
    const uint64_t n = bytes / vb;
    uint8_t *d_in, *d_out, *d_frame, *d_work;
    uint64_t* d_fsize;
    int32_t* d_status;
    const size_t bound = sz_compress_bound(n, ds.dtype);
    CK(cudaMalloc(&d_in, bytes));
    CK(cudaMalloc(&d_out, bytes));
    CK(cudaMalloc(&d_frame, bound));
    CK(cudaMalloc(&d_fsize, 8));
    CK(cudaMalloc(&d_status, 4));
    for (size_t t = 0; t < tiles; ++t) CK(cudaMemcpy(d_in + t * tile, ds.bytes.data(), tile, cudaMemcpyHostToDevice));

    // Same-run memcpy.
    const double t_copy = timer.median_ms([&] { CK(cudaMemcpyAsync(d_out, d_in, bytes, cudaMemcpyDeviceToDevice)); },
                                          warmup, reps);
    const double memcpy_bw = 2.0 * bytes / (t_copy * 1e-3) / 1e9;

    double enc[2], dec[2];
    uint64_t fsize[2];
    double esc_rate = 0;
    for (int cks = 0; cks < 2; ++cks) {
      sz_params p = sz_params_default();
      p.flags = cks ? SZ_FLAG_CHECKSUMS : 0u;
      size_t ws = 0;
      SZ(sz_cuda_compress_workspace_size(n, ds.dtype, &p, &ws));
      CK(cudaMalloc(&d_work, ws));
      enc[cks] = timer.median_ms(
          [&] {
            SZ(sz_cuda_compress(d_in, n, ds.dtype, &ds.codebook, &p, d_frame, bound, d_work, ws, d_fsize, nullptr,
                                nullptr));
          },
          warmup, reps);
      CK(cudaMemcpy(&fsize[cks], d_fsize, 8, cudaMemcpyDeviceToHost));
      // The frame must equal the CPU codec's, byte for byte.
      std::vector<uint8_t> host_in(bytes), gpu_frame(fsize[cks]), cpu_frame(bound);
      CK(cudaMemcpy(host_in.data(), d_in, bytes, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(gpu_frame.data(), d_frame, fsize[cks], cudaMemcpyDeviceToHost));
      sz_params pc = p;
      pc.threads = 0;
      size_t cpu_size = 0;
      SZ(sz_compress(host_in.data(), n, ds.dtype, &ds.codebook, &pc, cpu_frame.data(), bound, &cpu_size));
      if (cpu_size != fsize[cks] || memcmp(cpu_frame.data(), gpu_frame.data(), cpu_size) != 0) {
        fprintf(stderr, "%s: GPU frame differs from the CPU frame (%zu vs %llu bytes)\n", ds.name.c_str(), cpu_size,
                (unsigned long long)fsize[cks]);
        return 1;
      }
      sz_frame_info info;
      SZ(sz_frame_info_get(gpu_frame.data(), gpu_frame.size(), &info));
      esc_rate = (double)info.escapes / (double)n;
      dec[cks] = timer.median_ms(
          [&] {
            SZ(sz_cuda_decompress(d_frame, fsize[cks], d_out, bytes, nullptr, 0, d_status, nullptr, nullptr));
          },
          warmup, reps);
      int32_t st = -1;
      CK(cudaMemcpy(&st, d_status, 4, cudaMemcpyDeviceToHost));
      std::vector<uint8_t> host_out(bytes);
      CK(cudaMemcpy(host_out.data(), d_out, bytes, cudaMemcpyDeviceToHost));
      if (st != SZ_OK || host_out != host_in) {
        fprintf(stderr, "%s: GPU decode wrong (status %s)\n", ds.name.c_str(), sz_status_name((sz_status)st));
        return 1;
      }
      CK(cudaFree(d_work));
    }
    const double ratio = (double)bytes / (double)fsize[0];
    const double roof = memcpy_bw * (double)bytes / (double)(bytes + fsize[0]);
    const double roof_c = memcpy_bw * (double)bytes / (double)(bytes + fsize[1]);
    auto gbps = [&](double ms) { return (double)bytes / (ms * 1e-3) / 1e9; };
    printf("| %s | %u | %.4f | %.3f%% | %.0f | %.0f | %.0f | %.3f | %.0f | %.3f | %.0f | %.3f | %.0f | %.3f |\n",
           ds.name.c_str(), ds.codebook.code_bits, ratio, 100 * esc_rate, memcpy_bw, roof, gbps(enc[0]),
           gbps(enc[0]) / roof, gbps(dec[0]), gbps(dec[0]) / roof, gbps(enc[1]), gbps(enc[1]) / roof_c,
           gbps(dec[1]), gbps(dec[1]) / roof_c);
    fflush(stdout);
    if (csv)
      fprintf(csv, "%s,%s,%u,%zu,%llu,%.5f,%.6f,%.1f,%.1f,%.1f,%.4f,%.1f,%.4f,%.1f,%.4f,%.1f,%.4f\n", ds.name.c_str(),
              sz_dtype_name(ds.dtype), ds.codebook.code_bits, bytes, (unsigned long long)fsize[0], ratio, esc_rate,
              memcpy_bw, roof, gbps(enc[0]), gbps(enc[0]) / roof, gbps(dec[0]), gbps(dec[0]) / roof, gbps(enc[1]),
              gbps(enc[1]) / roof_c, gbps(dec[1]), gbps(dec[1]) / roof_c);
    CK(cudaFree(d_in));
    CK(cudaFree(d_out));
    CK(cudaFree(d_frame));
    CK(cudaFree(d_fsize));
    CK(cudaFree(d_status));
  }
  if (csv) fclose(csv);
  return 0;
}
