// bench_gpu.cpp — GPU encode / decode throughput of the CUDA codec at the message sizes serving engines use, next to
// cudaMemcpy of the same sizes measured in the same run, on real KV.
//
// For every dataset and message size S (MiB per call, --sizes): R distinct input buffers of S bytes (R * S >= --pool
// MiB, so that consecutive calls never find their data in the 60 MB L2), each a different rotation of the dataset's
// tile. One timed batch enqueues one call per buffer back to back on one stream between two CUDA events; the time per
// call is the batch time / R, median of --reps batches after a warm-up batch. The baseline is the same batch of
// cudaMemcpyAsync D2D calls of S bytes, counted as bytes read + written (B). A codec call's roofline is
// B * raw / (raw + frame) GB/s of uncompressed data, each way; "/roof" is speed over it. Each (dataset, size, flags,
// layout) runs encode and decode without checksums, with H32 and with LH32 ones (--checksums), contiguous and paged
// (--page-values values per page, pages in shuffled order), and every first frame is compared byte for byte with the
// CPU codec and every first decode with its input. Also per call: the GPU time of one isolated call (events around
// it, idle GPU before: launch and kernel) for memcpy, encode and decode, warm (the same buffers call after call, so
// that data and machine code sit in L2) and cold (L2 overwritten by a 256 MiB memset before each call, as a serving
// engine's codec call finds it after the model's kernels).
//
// Datasets (from --data, the files carried into .devdata/ for the GPU machine):
//   d512_*    trained-d512 KV (kv_{code,prose}_{bf16,e4m3,e5m2}.bin), codebook calibrated on the data itself; fp16 /
//             fp32 are the BF16 values rounded to binary16 / widened to binary32
//   smol_*    SmolLM2-135M KV (smollm2/{prose,code}_{bf16,fp16,e4m3,e5m2}.bin from bench/models/smollm2_kv.py):
//             codebook calibrated on the code text, measured on the prose text (held out)
//   smol_*_ch the same with a channel book (version 2 frames, per-channel windows, k picked by sz_channel_calibrate)
//             calibrated on all 60 tensors of the code text, measured on prose tensor 30 (layer 15 K); message sizes
//             and pages rounded down to whole tokens (192 values)
// Output: one row per measurement on stdout (markdown), CSV rows to --csv; a short summary table last. Medians,
// roofline and CSV: the benchmark harness (bench/harness/harness.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
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
  if (absx >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);
  if (absx < 0x38800000u) {
    const float a = fabsf(f) * 16777216.0f;
    return (uint16_t)(sign | (uint32_t)nearbyintf(a));
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
  std::vector<uint8_t> tile;  // measured data, repeated (rotated) to fill the buffers
  sz_codebook codebook;
  // Channel-window sets (version 2 frames): the tile is one tensor of the book; rotations and pages keep its
  // token boundaries (multiples of book.period values). book.bases is the host copy, d_bases the device copy.
  bool channels = false;
  std::vector<uint8_t> bases;
  sz_channel_book book{};
  uint32_t tensor = 0;
};

sz_codebook calibrate(const std::vector<uint8_t>& bytes, sz_dtype dtype) {
  sz_histogram h;
  SZ(sz_histogram_init(&h, dtype));
  SZ(sz_histogram_add(&h, bytes.data(), bytes.size() / sz_dtype_size(dtype)));
  sz_codebook cb;
  SZ(sz_calibrate(&h, &cb, nullptr));
  return cb;
}

std::vector<uint8_t> cat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<Dataset> load_datasets(const std::string& dir) {
  std::vector<Dataset> sets;
  const std::vector<uint8_t> bf16 = cat(read_file(dir + "/kv_code_bf16.bin"), read_file(dir + "/kv_prose_bf16.bin"));
  if (!bf16.empty()) {
    sets.push_back({"d512_bf16", SZ_DTYPE_BF16, bf16, calibrate(bf16, SZ_DTYPE_BF16)});
    std::vector<uint8_t> h(bf16.size()), f(bf16.size() * 2);
    for (size_t i = 0; i < bf16.size() / 2; ++i) {
      uint16_t b;
      memcpy(&b, &bf16[2 * i], 2);
      const uint16_t hv = float_to_half(bf16_to_float(b));
      memcpy(&h[2 * i], &hv, 2);
      const uint32_t fv = (uint32_t)b << 16;
      memcpy(&f[4 * i], &fv, 4);
    }
    sets.push_back({"d512_fp16", SZ_DTYPE_FP16, h, calibrate(h, SZ_DTYPE_FP16)});
    sets.push_back({"d512_fp32", SZ_DTYPE_FP32, f, calibrate(f, SZ_DTYPE_FP32)});
  }
  for (const char* fp8 : {"e4m3", "e5m2"}) {
    const std::vector<uint8_t> v =
        cat(read_file(dir + "/kv_code_" + fp8 + ".bin"), read_file(dir + "/kv_prose_" + fp8 + ".bin"));
    const sz_dtype dt = fp8[1] == '4' ? SZ_DTYPE_FP8_E4M3 : SZ_DTYPE_FP8_E5M2;
    if (!v.empty()) sets.push_back({std::string("d512_") + fp8, dt, v, calibrate(v, dt)});
  }
  const struct {
    const char* suffix;
    sz_dtype dtype;
  } smol[] = {{"bf16", SZ_DTYPE_BF16}, {"fp16", SZ_DTYPE_FP16}, {"e4m3", SZ_DTYPE_FP8_E4M3}, {"e5m2", SZ_DTYPE_FP8_E5M2}};
  for (const auto& s : smol) {
    const std::vector<uint8_t> calib = read_file(dir + "/smollm2/code_" + s.suffix + ".bin");
    const std::vector<uint8_t> data = read_file(dir + "/smollm2/prose_" + s.suffix + ".bin");
    if (!calib.empty() && !data.empty())
      sets.push_back({std::string("smol_") + s.suffix, s.dtype, data, calibrate(calib, s.dtype)});
  }
  // SmolLM2 with channel windows: book calibrated on the code text, measured on one tensor of the prose text
  // (bench/models/smollm2_kv.py: [30 layers][K, V][2048 tokens][3 kv_heads][64 dims]).
  for (const auto& s : smol) {
    if (s.dtype != SZ_DTYPE_BF16 && s.dtype != SZ_DTYPE_FP16) continue;
    const std::vector<uint8_t> calib = read_file(dir + "/smollm2/code_" + s.suffix + ".bin");
    const std::vector<uint8_t> data = read_file(dir + "/smollm2/prose_" + s.suffix + ".bin");
    const uint32_t tensors = 60, period = 192, tensor = 30;  // layer 15, K
    const size_t vb = sz_dtype_size(s.dtype), token_bytes = (size_t)tensors * period * vb;
    if (calib.empty() || data.empty() || calib.size() % token_bytes || data.size() % token_bytes) continue;
    const uint64_t tokens = calib.size() / token_bytes, tensor_bytes = data.size() / tensors;
    Dataset d{std::string("smol_") + s.suffix + "_ch", s.dtype,
              std::vector<uint8_t>(data.begin() + tensor * tensor_bytes, data.begin() + (tensor + 1) * tensor_bytes),
              calibrate(calib, s.dtype)};
    std::vector<uint32_t> counts(sz_channel_histogram_size(s.dtype, tensors, period) / 4, 0u);
    SZ(sz_channel_histogram_add(counts.data(), s.dtype, tensors, period, calib.data(), tokens));
    d.bases.resize((size_t)tensors * period);
    unsigned k = 0;
    SZ(sz_channel_calibrate(counts.data(), s.dtype, tensors, period, 0, d.bases.data(), &k, nullptr));
    SZ(sz_channel_book_init(&d.book, s.dtype, k, period, tensors, d.bases.data()));
    d.channels = true;
    d.tensor = tensor;
    sets.push_back(std::move(d));
  }
  return sets;
}

struct Events {
  cudaEvent_t a, b;
  Events() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  ~Events() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  // Median over reps of the GPU time of f(stream) (after one warm-up), in ms; before each, before() on the stream
  // outside the timed part.
  template <class F, class G>
  double median_ms(cudaStream_t s, int reps, F&& f, G&& before) {
    return szbench::median_of((unsigned)std::max(reps, 0), [&] {
      before();
      CK(cudaEventRecord(a, s));
      f();
      CK(cudaEventRecord(b, s));
      CK(cudaEventSynchronize(b));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      return (double)ms;
    });
  }
  template <class F>
  double median_ms(cudaStream_t s, int reps, F&& f) {
    return median_ms(s, reps, f, [] {});
  }
};

struct Row {
  std::string data, layout;
  sz_dtype dtype;
  unsigned k;
  double mib;
  int cks;
  double ratio, memcpy_gbps, roof_gbps, enc_gbps, dec_gbps, memcpy_us, enc_us, dec_us, host_us;
  double memcpy_cold_us, enc_cold_us, dec_cold_us;
  // Speed over the same-run roofline.
  double enc_roof() const { return szbench::fraction_of(enc_gbps, roof_gbps); }
  double dec_roof() const { return szbench::fraction_of(dec_gbps, roof_gbps); }
};

}  // namespace

int main(int argc, char** argv) {
  std::string data_dir = ".devdata", csv_path, only, sizes_arg = "1,4,16,64,256,1024";
  int reps = 9;
  double pool_mib = 768;
  uint64_t page_values = 4096;
  unsigned chunk_log2 = 12;
  bool paged = true;
  // Checksum kinds, column "checksums": 0 none, 1 H32 (XXH3), 2 LH32 (SZ_FLAG_LANE_HASH).
  // --checksums off|on (H32)|lh32|both (none, H32)|all (default)
  int cks_lo = 0, cks_hi = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--data") data_dir = next();
    else if (a == "--sizes") sizes_arg = next();
    else if (a == "--reps") reps = atoi(next().c_str());
    else if (a == "--pool") pool_mib = atof(next().c_str());
    else if (a == "--csv") csv_path = next();
    else if (a == "--only") only = next();
    else if (a == "--page-values") page_values = strtoull(next().c_str(), nullptr, 10);
    else if (a == "--no-paged") paged = false;
    else if (a == "--chunk-log2") chunk_log2 = (unsigned)atoi(next().c_str());
    else if (a == "--checksums") {
      const std::string v = next();
      cks_lo = v == "on" ? 1 : v == "lh32" ? 2 : 0;
      cks_hi = v == "off" ? 0 : v == "on" || v == "both" ? 1 : 2;
    } else {
      fprintf(stderr,
              "usage: %s [--data DIR] [--sizes MiB,...] [--reps N] [--pool MiB] [--csv FILE] [--only NAME[,NAME]]"
              " [--page-values N] [--no-paged] [--chunk-log2 L] [--checksums off|on|lh32|both|all]\n",
              argv[0]);
      return 2;
    }
  }
  if (!sz_cuda_available()) {
    fprintf(stderr, "no CUDA device: nothing to measure\n");
    return 77;
  }
  std::vector<double> sizes;
  for (size_t p = 0; p < sizes_arg.size();) {
    const size_t q = sizes_arg.find(',', p);
    sizes.push_back(atof(sizes_arg.substr(p, q - p).c_str()));
    p = q == std::string::npos ? sizes_arg.size() : q + 1;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  std::vector<Dataset> sets = load_datasets(data_dir);
  if (sets.empty()) {
    fprintf(stderr, "no datasets in %s\n", data_dir.c_str());
    return 1;
  }
  szbench::CsvWriter csv(csv_path, {"data", "dtype", "k", "MiB", "checksums", "layout", "ratio", "memcpy_GBps",
                                    "roofline_GBps", "enc_GBps", "enc_roof", "dec_GBps", "dec_roof", "memcpy_us",
                                    "enc_us", "dec_us", "host_enc_us", "memcpy_cold_us", "enc_cold_us",
                                    "dec_cold_us"});
  if (!csv_path.empty() && !csv.ok()) {
    fprintf(stderr, "cannot write %s\n", csv_path.c_str());
    return 1;
  }
  printf("\n| data | MiB | cks | layout | k | ratio | memcpy GB/s | roof GB/s | enc GB/s | /roof | dec GB/s | /roof |"
         " memcpy us | enc us | dec us | host us | cold: memcpy us | enc us | dec us |\n"
         "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<Row> rows;
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const sz_cuda_stream zs = reinterpret_cast<sz_cuda_stream>(stream);
  Events ev;
  const size_t flush_bytes = (size_t)256 << 20;  // > the 60 MB L2 of an H200 several times over
  uint8_t* d_flush;
  CK(cudaMalloc(&d_flush, flush_bytes));
  unsigned flushes = 0;
  auto flush_l2 = [&] {  // and idle again before the call, as for the warm one: its launch is part of its time
    CK(cudaMemsetAsync(d_flush, (int)(++flushes & 0xFF), flush_bytes, stream));
    CK(cudaStreamSynchronize(stream));
  };
  for (const Dataset& ds : sets) {
    if (!only.empty() && ("," + only + ",").find("," + ds.name + ",") == std::string::npos) continue;
    const size_t vb = sz_dtype_size(ds.dtype);
    for (double mib : sizes) {
      const uint64_t unit = ds.channels ? ds.book.period : 1;  // whole tokens of a channel-window tensor
      const uint64_t n = (uint64_t)(mib * 1048576.0) / vb / unit * unit;
      const size_t bytes = n * vb;
      const size_t R = std::max<size_t>(2, (size_t)std::ceil(pool_mib * 1048576.0 / (double)bytes));
      const size_t bound = sz_compress_bound(n, ds.dtype);
      const size_t fstride = (bound + 255) / 256 * 256, bstride = (bytes + 255) / 256 * 256;
      sz_channel_book dbook = ds.book;  // the same book with its bases on the device
      uint8_t* d_bases = nullptr;
      if (ds.channels) {
        CK(cudaMalloc(&d_bases, ds.bases.size()));
        CK(cudaMemcpy(d_bases, ds.bases.data(), ds.bases.size(), cudaMemcpyHostToDevice));
        dbook.bases = d_bases;
      }
      uint8_t *d_in, *d_out, *d_frames;
      uint64_t* d_fsize;
      int32_t* d_status;
      CK(cudaMalloc(&d_in, R * bstride));
      CK(cudaMalloc(&d_out, R * bstride));
      CK(cudaMalloc(&d_frames, R * fstride));
      CK(cudaMalloc(&d_fsize, R * 8));
      CK(cudaMalloc(&d_status, R * 4));
      {  // buffer i: the tile repeated from rotation i, so no two buffers are equal
        std::vector<uint8_t> host(bytes);
        for (size_t i = 0; i < R; ++i) {
          const size_t unit = ds.channels ? ds.book.period * vb : vb;
          const size_t rot = (i * 7919 * unit) % ds.tile.size() / unit * unit;
          for (size_t o = 0; o < bytes;) {
            const size_t from = (rot + o) % ds.tile.size(), len = std::min(ds.tile.size() - from, bytes - o);
            memcpy(host.data() + o, ds.tile.data() + from, len);
            o += len;
          }
          CK(cudaMemcpy(d_in + i * bstride, host.data(), bytes, cudaMemcpyHostToDevice));
          if (i >= 63 && R > 64) {  // the rest: copies of the first 64 (still distinct from their neighbours)
            for (size_t j = i + 1; j < R; ++j)
              CK(cudaMemcpy(d_in + j * bstride, d_in + (j % 64) * bstride, bytes, cudaMemcpyDeviceToDevice));
            break;
          }
        }
      }
      const double memcpy_ms = ev.median_ms(stream, reps, [&] {
        for (size_t i = 0; i < R; ++i)
          CK(cudaMemcpyAsync(d_out + i * bstride, d_in + i * bstride, bytes, cudaMemcpyDeviceToDevice, stream));
      }) / (double)R;
      auto memcpy_one = [&] { CK(cudaMemcpyAsync(d_out, d_in, bytes, cudaMemcpyDeviceToDevice, stream)); };
      const double memcpy_us = 1e3 * ev.median_ms(stream, reps, memcpy_one);
      const double memcpy_cold_us = 1e3 * ev.median_ms(stream, reps, memcpy_one, flush_l2);
      const double memcpy_gbps = szbench::gbps(2 * bytes, memcpy_ms * 1e-3);  // bytes read + written
      // Page lists: every buffer split into pages of page_values values, listed in a shuffled order.
      const uint64_t pv = std::min<uint64_t>(page_values / unit * unit, n);
      const uint32_t n_pages = paged && n % pv == 0 ? (uint32_t)(n / pv) : 0;
      std::vector<uint32_t> perm(n_pages);
      for (uint32_t i = 0; i < n_pages; ++i) perm[i] = i;
      uint64_t st = 12345;
      for (uint32_t i = n_pages; i > 1; --i) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        std::swap(perm[i - 1], perm[(st >> 33) % i]);
      }
      void** d_in_pages = nullptr;
      void** d_out_pages = nullptr;
      if (n_pages) {
        std::vector<void*> hi((size_t)R * n_pages), ho((size_t)R * n_pages);
        for (size_t i = 0; i < R; ++i)
          for (uint32_t p = 0; p < n_pages; ++p) {
            hi[i * n_pages + p] = d_in + i * bstride + (uint64_t)perm[p] * pv * vb;
            ho[i * n_pages + p] = d_out + i * bstride + (uint64_t)perm[p] * pv * vb;
          }
        CK(cudaMalloc(&d_in_pages, hi.size() * sizeof(void*)));
        CK(cudaMalloc(&d_out_pages, ho.size() * sizeof(void*)));
        CK(cudaMemcpy(d_in_pages, hi.data(), hi.size() * sizeof(void*), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_out_pages, ho.data(), ho.size() * sizeof(void*), cudaMemcpyHostToDevice));
      }
      for (int cks = cks_lo; cks <= cks_hi; ++cks) {
        sz_params p = sz_params_default();
        p.flags = cks == 0 ? 0u : cks == 1 ? SZ_FLAG_CHECKSUMS : SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH;
        p.chunk_log2 = chunk_log2;
        size_t ws = 0, dws = 0;
        SZ(sz_cuda_compress_workspace_size(n, ds.dtype, &p, &ws));
        SZ(sz_cuda_decompress_workspace_size(bound, bytes, &dws));
        ws = std::max(ws, dws);
        uint8_t* d_ws;
        CK(cudaMalloc(&d_ws, ws));
        CK(cudaMemset(d_ws, 0, ws));  // once: every call leaves the workspace ready for the next
        for (int pg = 0; pg < (n_pages ? 2 : 1); ++pg) {
          std::vector<uint64_t> fsizes(R, bound);
          double host_us = 0;
          auto enc_one = [&](size_t i) {
            if (ds.channels && pg)
              SZ(sz_cuda_compress_pages_channels((const void* const*)(d_in_pages + i * n_pages), n_pages, pv,
                                                 ds.dtype, &dbook, ds.tensor, &p, d_frames + i * fstride, bound,
                                                 d_ws, ws, d_fsize + i, nullptr, zs));
            else if (ds.channels)
              SZ(sz_cuda_compress_channels(d_in + i * bstride, n, ds.dtype, &dbook, ds.tensor, &p,
                                           d_frames + i * fstride, bound, d_ws, ws, d_fsize + i, nullptr, zs));
            else if (pg)
              SZ(sz_cuda_compress_pages((const void* const*)(d_in_pages + i * n_pages), n_pages, pv, ds.dtype,
                                        &ds.codebook, &p, d_frames + i * fstride, bound, d_ws, ws, d_fsize + i,
                                        nullptr, zs));
            else
              SZ(sz_cuda_compress(d_in + i * bstride, n, ds.dtype, &ds.codebook, &p, d_frames + i * fstride, bound,
                                  d_ws, ws, d_fsize + i, nullptr, zs));
          };
          auto dec_one = [&](size_t i) {
            if (ds.channels && pg)
              SZ(sz_cuda_decompress_pages_book(d_frames + i * fstride, fsizes[i], &dbook, d_out_pages + i * n_pages,
                                               n_pages, pv, d_ws, ws, d_status + i, zs));
            else if (ds.channels)
              SZ(sz_cuda_decompress_book(d_frames + i * fstride, fsizes[i], &dbook, d_out + i * bstride, bytes, d_ws,
                                         ws, d_status + i, nullptr, zs));
            else if (pg)
              SZ(sz_cuda_decompress_pages(d_frames + i * fstride, fsizes[i], d_out_pages + i * n_pages, n_pages, pv, d_ws,
                                          ws, d_status + i, zs));
            else
              SZ(sz_cuda_decompress(d_frames + i * fstride, fsizes[i], d_out + i * bstride, bytes, d_ws, ws, d_status + i,
                                    nullptr, zs));
          };
          const double enc_ms = ev.median_ms(stream, reps, [&] {
            for (size_t i = 0; i < R; ++i) enc_one(i);
          }) / (double)R;
          const double enc_us = 1e3 * ev.median_ms(stream, reps, [&] { enc_one(0); });
          const double enc_cold_us = 1e3 * ev.median_ms(stream, reps, [&] { enc_one(0); }, flush_l2);
          {  // host time to enqueue one call (argument checks and the launch), over a batch
            CK(cudaStreamSynchronize(stream));
            const szbench::Timer timer;
            for (size_t i = 0; i < R; ++i) enc_one(i);
            host_us = 1e6 * timer.seconds() / (double)R;
            CK(cudaStreamSynchronize(stream));
          }
          // A receiver knows each frame's size (it came with the frame): the decoder is given exactly that.
          CK(cudaMemcpy(fsizes.data(), d_fsize, R * 8, cudaMemcpyDeviceToHost));
          CK(cudaMemsetAsync(d_out, 0xA5, R * bstride, stream));
          const double dec_ms = ev.median_ms(stream, reps, [&] {
            for (size_t i = 0; i < R; ++i) dec_one(i);
          }) / (double)R;
          const double dec_us = 1e3 * ev.median_ms(stream, reps, [&] { dec_one(0); });
          const double dec_cold_us = 1e3 * ev.median_ms(stream, reps, [&] { dec_one(0); }, flush_l2);
          CK(cudaStreamSynchronize(stream));
          // Check buffer 0 (and the last): frame = CPU frame of the values in list order, decode = input.
          uint64_t fsize = 0;
          for (size_t i : {(size_t)0, R - 1}) {
            std::vector<uint8_t> in(bytes), out(bytes), seq(bytes);
            CK(cudaMemcpy(&fsize, d_fsize + i, 8, cudaMemcpyDeviceToHost));
            std::vector<uint8_t> frame(fsize), cpu(bound);
            CK(cudaMemcpy(in.data(), d_in + i * bstride, bytes, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(out.data(), d_out + i * bstride, bytes, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(frame.data(), d_frames + i * fstride, fsize, cudaMemcpyDeviceToHost));
            int32_t status = -1;
            CK(cudaMemcpy(&status, d_status + i, 4, cudaMemcpyDeviceToHost));
            if (pg) {
              for (uint32_t q = 0; q < n_pages; ++q)
                memcpy(seq.data() + (uint64_t)q * pv * vb, in.data() + (uint64_t)perm[q] * pv * vb, pv * vb);
            } else {
              seq = in;
            }
            sz_params pc = p;
            pc.threads = 0;
            size_t cpu_size = 0;
            if (ds.channels)
              SZ(sz_compress_channels(seq.data(), n, ds.dtype, &ds.book, ds.tensor, &pc, cpu.data(), bound,
                                      &cpu_size));
            else
              SZ(sz_compress(seq.data(), n, ds.dtype, &ds.codebook, &pc, cpu.data(), bound, &cpu_size));
            if (cpu_size != fsize || memcmp(cpu.data(), frame.data(), fsize) != 0) {
              fprintf(stderr, "%s %.0f MiB cks %d paged %d: GPU frame %zu differs from the CPU frame\n",
                      ds.name.c_str(), mib, cks, pg, i);
              return 1;
            }
            if (status != SZ_OK || out != in) {
              fprintf(stderr, "%s %.0f MiB cks %d paged %d: decode of buffer %zu wrong (status %s)\n",
                      ds.name.c_str(), mib, cks, pg, i, sz_status_name((sz_status)status));
              return 1;
            }
          }
          Row r;
          r.data = ds.name;
          r.layout = pg ? "paged " + std::to_string(pv) : "contig";
          r.dtype = ds.dtype;
          r.k = ds.channels ? ds.book.code_bits : ds.codebook.code_bits;
          r.mib = mib;
          r.cks = cks;
          r.ratio = szbench::ratio(bytes, fsize);
          r.memcpy_gbps = memcpy_gbps;
          r.roof_gbps = szbench::roofline_gbps(memcpy_gbps, bytes, fsize);
          r.enc_gbps = szbench::gbps(bytes, enc_ms * 1e-3);
          r.dec_gbps = szbench::gbps(bytes, dec_ms * 1e-3);
          r.memcpy_us = memcpy_us;
          r.enc_us = enc_us;
          r.dec_us = dec_us;
          r.host_us = host_us;
          r.memcpy_cold_us = memcpy_cold_us;
          r.enc_cold_us = enc_cold_us;
          r.dec_cold_us = dec_cold_us;
          rows.push_back(r);
          printf("| %s | %.0f | %d | %s | %u | %.4f | %.0f | %.0f | %.0f | %.3f | %.0f | %.3f | %.1f | %.1f | %.1f | %.1f |"
                 " %.1f | %.1f | %.1f |\n",
                 r.data.c_str(), r.mib, r.cks, r.layout.c_str(), r.k, r.ratio, r.memcpy_gbps, r.roof_gbps, r.enc_gbps,
                 r.enc_roof(), r.dec_gbps, r.dec_roof(), r.memcpy_us, r.enc_us, r.dec_us, r.host_us, r.memcpy_cold_us,
                 r.enc_cold_us, r.dec_cold_us);
          fflush(stdout);
          using szbench::fixed;
          csv.row({r.data, sz_dtype_name(r.dtype), std::to_string(r.k), fixed(r.mib, 0), std::to_string(r.cks),
                   r.layout, fixed(r.ratio, 5), fixed(r.memcpy_gbps, 1), fixed(r.roof_gbps, 1), fixed(r.enc_gbps, 1),
                   fixed(r.enc_roof(), 4), fixed(r.dec_gbps, 1), fixed(r.dec_roof(), 4), fixed(r.memcpy_us, 2),
                   fixed(r.enc_us, 2), fixed(r.dec_us, 2), fixed(r.host_us, 2), fixed(r.memcpy_cold_us, 2),
                   fixed(r.enc_cold_us, 2), fixed(r.dec_cold_us, 2)});
        }
        CK(cudaFree(d_ws));
      }
      CK(cudaFree(d_in));
      CK(cudaFree(d_out));
      CK(cudaFree(d_frames));
      CK(cudaFree(d_fsize));
      CK(cudaFree(d_status));
      if (d_in_pages) CK(cudaFree(d_in_pages));
      if (d_out_pages) CK(cudaFree(d_out_pages));
      if (d_bases) CK(cudaFree(d_bases));
    }
  }
  CK(cudaFree(d_flush));
  if (!csv.close()) {
    fprintf(stderr, "cannot write %s\n", csv_path.c_str());
    return 1;
  }
  // Summary: encode / decode over the roofline, checksums on, contiguous (paged in brackets where measured).
  printf("\nsummary (checksums on; enc/roof dec/roof, contiguous [paged]):\n%-10s", "data");
  for (double mib : sizes) printf(" %14.0fMiB", mib);
  printf("\n");
  std::string last;
  for (const Row& r : rows) {
    if (r.cks != 1 || r.layout != "contig" || r.data == last) continue;
    last = r.data;
    printf("%-10s", r.data.c_str());
    for (double mib : sizes) {
      const Row* c = nullptr;
      const Row* pgr = nullptr;
      for (const Row& x : rows)
        if (x.data == r.data && x.cks == 1 && x.mib == mib) (x.layout == "contig" ? c : pgr) = &x;
      if (!c) {
        printf(" %17s", "-");
        continue;
      }
      char buf[64];
      if (pgr)
        snprintf(buf, sizeof buf, "%.2f/%.2f[%.2f/%.2f]", c->enc_roof(), c->dec_roof(), pgr->enc_roof(),
                 pgr->dec_roof());
      else
        snprintf(buf, sizeof buf, "%.2f/%.2f", c->enc_roof(), c->dec_roof());
      printf(" %17s", buf);
    }
    printf("\n");
  }
  return 0;
}
