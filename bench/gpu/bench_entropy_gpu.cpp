// bench_entropy_gpu.cpp — GPU encode and decode throughput of entropy-coded frames (the max mode, version 3) next
// to cudaMemcpy of the same size in the same run, on real KV, with the ratio and the CPU decoder's speed.
//
// Per dataset: a symbol table (64 groups) calibrated on the code text's KV, applied to one tensor of the prose text
// (layer 15's K), whose tokens are tiled to S MiB per call (--sizes): the CPU encodes one frame per chunk size
// (--chunk-log2, default 16 and 14; LH32 checksums unless --checksums off|on), the GPU encodes the same input
// --reps times (median; the first frame is compared with the CPU's, byte for byte) and decodes the frame --reps
// times (median; the first decode is compared with the input), and the same-size cudaMemcpyAsync D2D gives the
// baseline: roofline = memcpy bytes/s x raw / (raw + frame), as in bench_gpu (GB/s are of uncompressed bytes). The frames are one buffer, so at 16-64 MiB they
// sit partly in the 60 MB L2 (read the larger sizes for DRAM speed).
//
// Datasets (--data, default .devdata): smollm2/{code,prose}_{bf16,fp16,e4m3,e5m2,fp32}.bin ([30 layers][K, V][tokens]
// [3 kv_heads][64]) from bench/models/smollm2_kv.py; trained-d512 kv_{code,prose}_{bf16,e4m3,e5m2}.bin ([8][2]
// [tokens][4][64] as bench/gpu/slice_kv.py cuts them; without the prose file the code file is both calibration and
// measurement, said in the row). Output: a markdown table, and CSV rows to --csv.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_util.h"
#include "harness/harness.h"
#include "splitzip/splitzip.h"
#include "splitzip/splitzip_cuda.h"

namespace {

using szbench::read_file;

struct Set {
  std::string name, note;
  sz_dtype dtype;
  uint32_t tensors, period, tensor;
  std::vector<uint8_t> calib, data;  // [tensors][tokens][period] values each
};

std::vector<Set> load_sets(const std::string& dir) {
  std::vector<Set> sets;
  const struct {
    const char* suffix;
    sz_dtype dtype;
  } smol[] = {
      {"bf16", SZ_DTYPE_BF16}, {"fp16", SZ_DTYPE_FP16}, {"e4m3", SZ_DTYPE_FP8_E4M3}, {"e5m2", SZ_DTYPE_FP8_E5M2},
      {"fp32", SZ_DTYPE_FP32}};
  for (const auto& s : smol) {
    Set x{std::string("smol_") + s.suffix, "calibrated on code, measured on prose", s.dtype, 60, 192, 30,
          read_file(dir + "/smollm2/code_" + s.suffix + ".bin"), read_file(dir + "/smollm2/prose_" + s.suffix + ".bin")};
    if (!x.calib.empty() && !x.data.empty()) sets.push_back(std::move(x));
  }
  for (const auto& s : {smol[0], smol[2], smol[3]}) {
    Set x{std::string("d512_") + s.suffix, "calibrated on code, measured on prose", s.dtype, 16, 256, 8,
          read_file(dir + "/kv_code_" + s.suffix + ".bin"), read_file(dir + "/kv_prose_" + s.suffix + ".bin")};
    if (x.data.empty()) {
      x.data = x.calib;
      x.note = "in-sample (code text only)";
    }
    if (!x.calib.empty()) sets.push_back(std::move(x));
  }
  return sets;
}

struct Table {
  std::vector<uint8_t> file, work;
  sz_symbol_table t{};
};

void calibrate(const Set& s, Table* tb) {
  const size_t vb = sz_dtype_size(s.dtype);
  const uint64_t tokens = s.calib.size() / ((size_t)s.tensors * s.period * vb);
  std::vector<uint32_t> counts(sz_symbol_histogram_size(s.dtype, s.tensors, s.period) / 4, 0);
  SZ(sz_symbol_histogram_add(counts.data(), s.dtype, s.tensors, s.period, s.calib.data(), tokens));
  tb->file.resize(sz_symbol_table_file_size(s.dtype, s.tensors, s.period, 64));
  size_t size = 0;
  SZ(sz_symbol_calibrate(counts.data(), s.dtype, s.tensors, s.period, 64, tb->file.data(), tb->file.size(), &size,
                         nullptr));
  tb->file.resize(size);
  SZ(sz_symbol_table_parse(tb->file.data(), tb->file.size(), &tb->t));
  tb->work.resize(sz_symbol_table_workspace_size(&tb->t));
  SZ(sz_symbol_table_prepare(&tb->t, tb->work.data(), tb->work.size()));
}

double ms_between(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = ".devdata", csv_path, only, sizes_arg = "16,64,256", logs_arg = "16,14";
  int reps = 9;
  uint32_t flags = SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--data") dir = next();
    else if (a == "--sizes") sizes_arg = next();
    else if (a == "--chunk-log2") logs_arg = next();
    else if (a == "--reps") reps = atoi(next().c_str());
    else if (a == "--csv") csv_path = next();
    else if (a == "--only") only = next();
    else if (a == "--checksums") {
      const std::string v = next();
      flags = v == "off" ? 0u : v == "on" ? SZ_FLAG_CHECKSUMS : SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH;
    } else {
      fprintf(stderr,
              "usage: %s [--data DIR] [--sizes MiB,...] [--chunk-log2 L,...] [--reps N] [--only NAME,...] "
              "[--checksums off|on|lh32] [--csv FILE]\n",
              argv[0]);
      return 2;
    }
  }
  auto list = [](const std::string& s) {
    std::vector<unsigned> v;
    for (size_t p = 0; p < s.size();) {
      const size_t q = s.find(',', p);
      v.push_back((unsigned)atoi(s.substr(p, q - p).c_str()));
      p = q == std::string::npos ? s.size() : q + 1;
    }
    return v;
  };
  const std::vector<unsigned> sizes = list(sizes_arg), logs = list(logs_arg);
  std::vector<Set> sets = load_sets(dir);
  if (sets.empty()) {
    printf("bench_entropy_gpu: no data in %s (smollm2/*.bin or kv_*.bin): skipped\n", dir.c_str());
    return 0;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  FILE* csv = csv_path.empty() ? nullptr : fopen(csv_path.c_str(), "w");
  if (csv)
    fprintf(csv,
            "data,dtype,mib,chunk_log2,flags,ratio,memcpy_gbps,roof_gbps,enc_gbps,enc_roof,dec_gbps,dec_roof,"
            "cpu_dec_gbps,note\n");
  printf("card: %s, %d SMs; encode and decode of version 3 frames, LH32 %s\n\n", prop.name,
         prop.multiProcessorCount,
         flags == 0 ? "off (no checksums)" : (flags & SZ_FLAG_LANE_HASH) ? "on" : "off (H32 checksums)");
  printf("| data | MiB | chunk | ratio | memcpy GB/s | roofline GB/s | GPU encode GB/s | /roof | GPU decode GB/s | /roof "
         "| CPU decode GB/s (1 thread) |\n");
  printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Set& s : sets) {
    if (!only.empty() && ("," + only + ",").find("," + s.name + ",") == std::string::npos) continue;
    Table tb;
    calibrate(s, &tb);
    std::vector<uint8_t> image(sz_cuda_symbol_table_image_size(&tb.t));
    SZ(sz_cuda_symbol_table_image(&tb.t, image.data(), image.size(), nullptr));
    void* d_image = nullptr;
    CK(cudaMalloc(&d_image, image.size()));
    CK(cudaMemcpy(d_image, image.data(), image.size(), cudaMemcpyHostToDevice));
    const size_t vb = sz_dtype_size(s.dtype), token = (size_t)s.period * vb;
    const size_t tensor_bytes = s.data.size() / s.tensors;
    const uint8_t* tens = s.data.data() + (size_t)s.tensor * tensor_bytes;
    for (unsigned mib : sizes) {
      const size_t bytes = ((size_t)mib << 20) / token * token, n = bytes / vb;
      std::vector<uint8_t> host(bytes);
      for (size_t o = 0; o < bytes; o += tensor_bytes) memcpy(host.data() + o, tens, std::min(tensor_bytes, bytes - o));
      void *d_raw = nullptr, *d_out = nullptr, *d_frame = nullptr, *d_ws = nullptr;
      int32_t* d_status = nullptr;
      CK(cudaMalloc(&d_raw, bytes));
      CK(cudaMalloc(&d_out, bytes));
      CK(cudaMalloc(&d_frame, sz_compress_bound(n, s.dtype)));
      CK(cudaMalloc(&d_ws, 256));
      CK(cudaMemset(d_ws, 0, 256));
      CK(cudaMalloc(&d_status, 4));
      CK(cudaMemcpy(d_raw, host.data(), bytes, cudaMemcpyHostToDevice));
      // memcpy baseline (bytes read + written)
      for (int w = 0; w < 2; ++w) CK(cudaMemcpyAsync(d_out, d_raw, bytes, cudaMemcpyDeviceToDevice, st));
      std::vector<double> mt;
      for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(e0, st));
        CK(cudaMemcpyAsync(d_out, d_raw, bytes, cudaMemcpyDeviceToDevice, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        mt.push_back(ms_between(e0, e1));
      }
      const double memcpy_gbps = 2.0 * bytes / (szbench::median(mt) * 1e-3) / 1e9;
      for (unsigned log2 : logs) {
        std::vector<uint8_t> frame(sz_compress_bound(n, s.dtype));
        sz_params p = sz_params_default();
        p.chunk_log2 = log2;
        p.flags = flags;
        size_t fsize = 0;
        SZ(sz_compress_entropy(host.data(), n, s.dtype, &tb.t, s.tensor, &p, frame.data(), frame.size(), &fsize));
        // CPU decode, one thread, for reference
        std::vector<uint8_t> back(bytes);
        size_t got = 0;
        const szbench::Timer cpu_timer;
        SZ(sz_decompress_entropy(frame.data(), fsize, &tb.t, back.data(), back.size(), &got, 1));
        const double cpu_s = cpu_timer.seconds();
        // GPU encode of the same input: its frame must be the CPU's, byte for byte.
        size_t ews = 0;
        SZ(sz_cuda_compress_entropy_workspace_size(n, s.dtype, &p, &ews));
        void* d_ews = nullptr;
        uint64_t* d_fsize = nullptr;
        CK(cudaMalloc(&d_ews, ews));
        CK(cudaMemset(d_ews, 0, ews));
        CK(cudaMalloc(&d_fsize, 8));
        CK(cudaMemset(d_frame, 0, sz_compress_bound(n, s.dtype)));
        auto encode = [&] {
          SZ(sz_cuda_compress_entropy(d_raw, n, s.dtype, d_image, image.size(), s.tensor, &p, d_frame,
                                      sz_compress_bound(n, s.dtype), d_ews, ews, d_fsize, nullptr, st));
        };
        encode();
        uint64_t gsize = 0;
        CK(cudaMemcpyAsync(&gsize, d_fsize, 8, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        std::vector<uint8_t> gframe(gsize);
        if (gsize) CK(cudaMemcpy(gframe.data(), d_frame, gsize, cudaMemcpyDeviceToHost));
        if (gsize != fsize || memcmp(gframe.data(), frame.data(), fsize) != 0) {
          fprintf(stderr, "%s %u MiB 2^%u: GPU frame (%llu bytes) differs from the CPU's (%zu bytes)\n",
                  s.name.c_str(), mib, log2, (unsigned long long)gsize, fsize);
          return 1;
        }
        std::vector<double> et;
        for (int r = 0; r < reps; ++r) {
          CK(cudaEventRecord(e0, st));
          encode();
          CK(cudaEventRecord(e1, st));
          CK(cudaEventSynchronize(e1));
          et.push_back(ms_between(e0, e1));
        }
        const double enc_gbps = bytes / (szbench::median(et) * 1e-3) / 1e9;
        CK(cudaFree(d_ews));
        CK(cudaFree(d_fsize));
        CK(cudaMemcpy(d_frame, frame.data(), fsize, cudaMemcpyHostToDevice));
        CK(cudaMemset(d_out, 0, bytes));
        auto decode = [&] {
          SZ(sz_cuda_decompress_entropy(d_frame, fsize, d_image, image.size(), d_out, bytes, d_ws, 256, d_status,
                                        nullptr, st));
        };
        decode();
        int32_t status = -1;
        CK(cudaMemcpyAsync(&status, d_status, 4, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        if (status != SZ_OK) {
          fprintf(stderr, "%s %u MiB 2^%u: GPU decode status %s\n", s.name.c_str(), mib, log2,
                  sz_status_name((sz_status)status));
          return 1;
        }
        std::vector<uint8_t> check(bytes);
        CK(cudaMemcpy(check.data(), d_out, bytes, cudaMemcpyDeviceToHost));
        if (check != host) {
          fprintf(stderr, "%s %u MiB 2^%u: GPU decode differs from the input\n", s.name.c_str(), mib, log2);
          return 1;
        }
        std::vector<double> dt;
        for (int r = 0; r < reps; ++r) {
          CK(cudaEventRecord(e0, st));
          decode();
          CK(cudaEventRecord(e1, st));
          CK(cudaEventSynchronize(e1));
          dt.push_back(ms_between(e0, e1));
        }
        const double dec_gbps = bytes / (szbench::median(dt) * 1e-3) / 1e9;
        const double roof = szbench::roofline_gbps(memcpy_gbps, bytes, fsize);
        const double ratio = (double)bytes / fsize, cpu_gbps = bytes / cpu_s / 1e9;
        printf("| %s | %u | 2^%u | %.3f | %.0f | %.0f | %.0f | %.2f | %.0f | %.2f | %.2f |\n", s.name.c_str(), mib,
               log2, ratio, memcpy_gbps, roof, enc_gbps, enc_gbps / roof, dec_gbps, dec_gbps / roof, cpu_gbps);
        fflush(stdout);
        if (csv)
          fprintf(csv, "%s,%u,%u,%u,%u,%.4f,%.1f,%.1f,%.1f,%.3f,%.1f,%.3f,%.3f,\"%s\"\n", s.name.c_str(),
                  (unsigned)s.dtype, mib, log2, flags, ratio, memcpy_gbps, roof, enc_gbps, enc_gbps / roof, dec_gbps,
                  dec_gbps / roof, cpu_gbps, s.note.c_str());
      }
      CK(cudaFree(d_raw));
      CK(cudaFree(d_out));
      CK(cudaFree(d_frame));
      CK(cudaFree(d_ws));
      CK(cudaFree(d_status));
    }
    CK(cudaFree(d_image));
  }
  if (csv) fclose(csv);
  return 0;
}
