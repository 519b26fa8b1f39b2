// test_cuda_codec.cpp — the CUDA codec (splitzip_cuda.h) against the scalar reference codec (the oracle).
//
// Every test skips with a message when no CUDA device is visible (the CPU-only CI builds this file but cannot run
// it). Run on the GPU machine, also under compute-sanitizer --tool memcheck / racecheck.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "codec_cases.h"
#include "entropy_cases.h"
#include "splitzip/splitzip.h"
#include "splitzip/splitzip_cuda.h"

namespace {

using sztest::entropy_frame;
using sztest::Rng;
using sztest::test_values;

#define SZ_SKIP_WITHOUT_GPU()                                                                 \
  do {                                                                                        \
    if (!sz_cuda_available()) GTEST_SKIP() << "no CUDA device visible: CUDA codec tests skipped"; \
  } while (0)

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// A device buffer owned by the test (the library itself never allocates).
struct DevBuf {
  uint8_t* p = nullptr;
  size_t size = 0;
  explicit DevBuf(size_t n, bool zero = false) : size(n) {
    if (cudaMalloc(&p, n ? n : 1) != cudaSuccess) p = nullptr;
    if (p && zero) cudaMemset(p, 0, n ? n : 1);  // a workspace is zero-filled once, before its first use
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

std::vector<uint8_t> cpu_compress(const std::vector<uint8_t>& data, uint64_t n, sz_dtype dtype,
                                  const sz_codebook& cb, const sz_params& p) {
  std::vector<uint8_t> out(sz_compress_bound(n, dtype));
  size_t size = 0;
  const sz_status s = sz_compress_reference(data.data(), n, dtype, &cb, &p, out.data(), out.size(), &size);
  EXPECT_EQ(s, SZ_OK) << sz_status_name(s);
  out.resize(size);
  return out;
}

// GPU frame of n values; returns the frame (resized to its size), or empty with *status set.
std::vector<uint8_t> gpu_compress(const std::vector<uint8_t>& data, uint64_t n, sz_dtype dtype, const sz_codebook* cb,
                                  const sz_params* p, sz_status* status) {
  const size_t bound = sz_compress_bound(n, dtype);
  size_t ws = 0;
  *status = sz_cuda_compress_workspace_size(n, dtype, p, &ws);
  if (*status != SZ_OK) return {};
  DevBuf src(data.size()), dst(bound), work(ws, true), fsize(8);
  cudaMemcpy(src.p, data.data(), data.size(), cudaMemcpyHostToDevice);
  cudaMemset(dst.p, 0xA5, bound);  // poison: every byte of the frame must be written
  uint64_t* h_size = nullptr;
  cudaMallocHost(&h_size, 8);
  *h_size = ~0ull;
  *status = sz_cuda_compress(src.p, n, dtype, cb, p, dst.p, bound, work.p, ws, (uint64_t*)fsize.p, h_size, nullptr);
  std::vector<uint8_t> out;
  if (*status == SZ_OK) {
    if (cudaStreamSynchronize(nullptr) != cudaSuccess) {
      *status = SZ_ERROR_CUDA;
    } else {
      uint64_t size = 0;
      cudaMemcpy(&size, fsize.p, 8, cudaMemcpyDeviceToHost);
      EXPECT_EQ(size, *h_size) << "pinned copy of the frame size";
      EXPECT_LE(size, bound);
      out.resize(size);
      cudaMemcpy(out.data(), dst.p, size, cudaMemcpyDeviceToHost);
    }
  }
  cudaFreeHost(h_size);
  return out;
}

struct GpuDecoded {
  sz_status launch = SZ_OK;
  int32_t status = -1;
  uint64_t size = ~0ull;
  std::vector<uint8_t> out;
  bool guard_ok = true;
};

// Decodes on the GPU into a buffer of dst_capacity bytes followed by a guard zone that must stay untouched.
GpuDecoded gpu_decompress(const std::vector<uint8_t>& frame, size_t dst_capacity) {
  GpuDecoded r;
  constexpr size_t kGuard = 4096;
  DevBuf src(frame.size()), dst(dst_capacity + kGuard), st(4), sz(8);
  cudaMemcpy(src.p, frame.data(), frame.size(), cudaMemcpyHostToDevice);
  cudaMemset(dst.p, 0x5A, dst_capacity + kGuard);
  size_t ws = 0;
  EXPECT_EQ(sz_cuda_decompress_workspace_size(frame.size(), dst_capacity, &ws), SZ_OK);
  DevBuf work(ws, true);
  r.launch = sz_cuda_decompress(src.p, frame.size(), dst.p, dst_capacity, work.p, ws, (int32_t*)st.p,
                                (uint64_t*)sz.p, nullptr);
  if (r.launch != SZ_OK) return r;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemcpy(&r.status, st.p, 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(&r.size, sz.p, 8, cudaMemcpyDeviceToHost);
  std::vector<uint8_t> all(dst_capacity + kGuard);
  cudaMemcpy(all.data(), dst.p, all.size(), cudaMemcpyDeviceToHost);
  for (size_t i = dst_capacity; i < all.size(); ++i)
    if (all[i] != 0x5A) r.guard_ok = false;
  all.resize(std::min<uint64_t>(r.size == ~0ull ? 0 : r.size, dst_capacity));
  r.out = std::move(all);
  return r;
}

// ---- byte equality with the reference encoder --------------------------------------------------------------------

TEST(CudaCodec, FramesEqualReferenceEveryDtypeSizeWidthFlags) {
  SZ_SKIP_WITHOUT_GPU();
  const size_t sizes[] = {0, 1, 7, 8, 9, 255, 256, 257, 4095, 4096, 4097, 3 * 4096 + 5, 70001, 200000};
  int cases = 0;
  for (sz_dtype dtype : sztest::kAllDtypes) {
    const sztest::DtypeFacts f = sztest::dtype_facts(dtype);
    for (size_t n : sizes) {
      unsigned center = 0;
      const std::vector<uint8_t> data = test_values(dtype, n, 1000 + n + dtype, &center);
      for (unsigned chunk_log2 : {8u, 12u, 16u}) {
        for (uint32_t flags : sztest::kFlagSets) {
          for (unsigned k = 1; k <= 4 && k < f.E; ++k) {
            const unsigned count = (k == 3) ? 7 : (1u << k);  // one width with an unused code
            const sz_codebook cb = sztest::centered_codebook(dtype, k, count, center);
            sz_params p = sz_params_default();
            p.chunk_log2 = chunk_log2;
            p.flags = flags;
            const std::vector<uint8_t> ref = cpu_compress(data, n, dtype, cb, p);
            sz_status s;
            const std::vector<uint8_t> got = gpu_compress(data, n, dtype, &cb, &p, &s);
            ASSERT_EQ(s, SZ_OK) << sz_status_name(s);
            ASSERT_EQ(got.size(), ref.size()) << "dtype " << dtype << " n " << n << " chunk_log2 " << chunk_log2
                                              << " flags " << flags << " k " << k;
            ASSERT_TRUE(got == ref) << "frames differ: dtype " << dtype << " n " << n << " chunk_log2 "
                                    << chunk_log2 << " flags " << flags << " k " << k;
            // CPU frame decoded on the GPU.
            const GpuDecoded d = gpu_decompress(ref, n * (f.W / 8));
            ASSERT_EQ(d.launch, SZ_OK);
            ASSERT_EQ(d.status, SZ_OK) << sz_status_name((sz_status)d.status) << " dtype " << dtype << " n " << n;
            ASSERT_EQ(d.size, n * (f.W / 8));
            ASSERT_TRUE(d.out == data) << "GPU decode differs: dtype " << dtype << " n " << n;
            ASSERT_TRUE(d.guard_ok);
            ++cases;
          }
        }
      }
    }
  }
  printf("[ info ] %d (dtype, size, chunk, flags, width) cases byte-identical and decoded\n", cases);
}

TEST(CudaCodec, GpuFrameDecodesOnCpuAndDefaultCodebook) {
  SZ_SKIP_WITHOUT_GPU();
  for (sz_dtype dtype : sztest::kAllDtypes) {
    const sztest::DtypeFacts f = sztest::dtype_facts(dtype);
    const size_t n = 123457;
    unsigned center = 0;
    const std::vector<uint8_t> data = test_values(dtype, n, 77 + dtype, &center);
    sz_status s;
    const std::vector<uint8_t> frame = gpu_compress(data, n, dtype, nullptr, nullptr, &s);  // defaults
    ASSERT_EQ(s, SZ_OK);
    std::vector<uint8_t> out(n * (f.W / 8));
    size_t got = 0;
    ASSERT_EQ(sz_decompress_reference(frame.data(), frame.size(), out.data(), out.size(), &got), SZ_OK);
    ASSERT_EQ(got, out.size());
    ASSERT_TRUE(out == data);
    sz_codebook cb;
    ASSERT_EQ(sz_default_codebook(dtype, SZ_KIND_GENERIC, &cb), SZ_OK);
    const sz_params p = sz_params_default();
    ASSERT_TRUE(frame == cpu_compress(data, n, dtype, cb, p));
  }
}

TEST(CudaCodec, RealKvSliceEqualsReference) {
  SZ_SKIP_WITHOUT_GPU();
  std::vector<uint8_t> data;
  ASSERT_TRUE(sztest::read_file(sztest::repo_path("data/kv_code_bf16_slice.bin"), &data));
  const uint64_t n = data.size() / 2;
  sz_histogram hist;
  ASSERT_EQ(sz_histogram_init(&hist, SZ_DTYPE_BF16), SZ_OK);
  ASSERT_EQ(sz_histogram_add(&hist, data.data(), n), SZ_OK);
  sz_codebook cb;
  ASSERT_EQ(sz_calibrate(&hist, &cb, nullptr), SZ_OK);
  for (uint32_t flags : sztest::kFlagSets) {
    sz_params p = sz_params_default();
    p.flags = flags;
    sz_status s;
    const std::vector<uint8_t> got = gpu_compress(data, n, SZ_DTYPE_BF16, &cb, &p, &s);
    ASSERT_EQ(s, SZ_OK);
    ASSERT_TRUE(got == cpu_compress(data, n, SZ_DTYPE_BF16, cb, p));
    const GpuDecoded d = gpu_decompress(got, data.size());
    ASSERT_EQ(d.status, SZ_OK);
    ASSERT_TRUE(d.out == data);
    printf("[ info ] real KV slice: %zu -> %zu bytes (ratio %.4f), flags %u\n", data.size(), got.size(),
           (double)data.size() / got.size(), flags);
  }
}

// Input, frame and output at odd addresses: the byte-wise load / store paths of the kernels.
TEST(CudaCodec, UnalignedBuffers) {
  SZ_SKIP_WITHOUT_GPU();
  for (sz_dtype dtype : sztest::kAllDtypes) {
    const size_t vb = sztest::value_bytes(dtype);
    const size_t n = 3 * 4096 + 77;
    unsigned center = 0;
    const std::vector<uint8_t> data = test_values(dtype, n, 31 + dtype, &center);
    sz_params p = sz_params_default();
    p.flags = SZ_FLAG_CHECKSUMS;
    sz_codebook cb;
    ASSERT_EQ(sz_default_codebook(dtype, SZ_KIND_GENERIC, &cb), SZ_OK);
    const std::vector<uint8_t> ref = cpu_compress(data, n, dtype, cb, p);
    const size_t bound = sz_compress_bound(n, dtype);
    size_t ws = 0;
    ASSERT_EQ(sz_cuda_compress_workspace_size(n, dtype, &p, &ws), SZ_OK);
    size_t dws = 0;
    ASSERT_EQ(sz_cuda_decompress_workspace_size(bound, data.size(), &dws), SZ_OK);
    DevBuf src(data.size() + 16), dst(bound + 16), out(data.size() + 16), work(ws, true), dwork(dws, true), fsize(8),
        st(4);
    const size_t so = vb == 1 ? 1 : vb, fo = 3, oo = 1;  // odd offsets (a whole value for the input)
    CUDA_OK(cudaMemcpy(src.p + so, data.data(), data.size(), cudaMemcpyHostToDevice));
    ASSERT_EQ(sz_cuda_compress(src.p + so, n, dtype, &cb, &p, dst.p + fo, bound, work.p, ws, (uint64_t*)fsize.p,
                               nullptr, nullptr),
              SZ_OK);
    CUDA_OK(cudaDeviceSynchronize());
    uint64_t size = 0;
    CUDA_OK(cudaMemcpy(&size, fsize.p, 8, cudaMemcpyDeviceToHost));
    ASSERT_EQ(size, ref.size());
    std::vector<uint8_t> frame(size);
    CUDA_OK(cudaMemcpy(frame.data(), dst.p + fo, size, cudaMemcpyDeviceToHost));
    ASSERT_TRUE(frame == ref) << "dtype " << dtype;
    ASSERT_EQ(sz_cuda_decompress(dst.p + fo, size, out.p + oo, data.size(), dwork.p, dws, (int32_t*)st.p, nullptr,
                                 nullptr),
              SZ_OK);
    CUDA_OK(cudaDeviceSynchronize());
    int32_t status = -1;
    CUDA_OK(cudaMemcpy(&status, st.p, 4, cudaMemcpyDeviceToHost));
    ASSERT_EQ(status, SZ_OK);
    std::vector<uint8_t> back(data.size());
    CUDA_OK(cudaMemcpy(back.data(), out.p + oo, back.size(), cudaMemcpyDeviceToHost));
    ASSERT_TRUE(back == data) << "dtype " << dtype;
  }
}

// ---- paged API ---------------------------------------------------------------------------------------------------

TEST(CudaCodec, PagesEqualSingleFrame) {
  SZ_SKIP_WITHOUT_GPU();
  for (sz_dtype dtype : {SZ_DTYPE_BF16, SZ_DTYPE_FP16, SZ_DTYPE_FP32, SZ_DTYPE_FP8_E4M3, SZ_DTYPE_FP8_E5M2}) {
    const sztest::DtypeFacts f = sztest::dtype_facts(dtype);
    const size_t vb = f.W / 8;
    for (uint64_t page_values : {1000ull, 4096ull, 16ull * 8 * 64, 5ull}) {
      for (size_t misalign : {0u, 1u}) {
        const uint32_t n_pages = page_values == 5 ? 301 : 13;
        const uint64_t n = n_pages * page_values;
        unsigned center = 0;
        const std::vector<uint8_t> data = test_values(dtype, n, 4242 + page_values, &center);
        sz_params p = sz_params_default();
        p.flags = SZ_FLAG_CHECKSUMS;
        sz_status s;
        const std::vector<uint8_t> single = gpu_compress(data, n, dtype, nullptr, &p, &s);
        ASSERT_EQ(s, SZ_OK);
        // Pages scattered in one big allocation, in reverse order, each at an offset of misalign * value size.
        const size_t page_bytes = page_values * vb, stride = page_bytes + 64;
        DevBuf pool(stride * n_pages + 64), ptrs(sizeof(void*) * n_pages);
        std::vector<void*> hp(n_pages);
        for (uint32_t i = 0; i < n_pages; ++i) {
          hp[i] = pool.p + (size_t)(n_pages - 1 - i) * stride + misalign * vb;
          cudaMemcpy(hp[i], data.data() + i * page_bytes, page_bytes, cudaMemcpyHostToDevice);
        }
        cudaMemcpy(ptrs.p, hp.data(), sizeof(void*) * n_pages, cudaMemcpyHostToDevice);
        size_t ws = 0;
        ASSERT_EQ(sz_cuda_compress_pages_workspace_size(n_pages, page_values, dtype, &p, &ws), SZ_OK);
        const size_t bound = sz_compress_bound(n, dtype);
        size_t dws = 0;
        ASSERT_EQ(sz_cuda_decompress_workspace_size(bound, n * vb, &dws), SZ_OK);
        DevBuf dst(bound), work(ws, true), dwork(dws, true), fsize(8);
        ASSERT_EQ(sz_cuda_compress_pages((const void* const*)ptrs.p, n_pages, page_values, dtype, nullptr, &p, dst.p,
                                         bound, work.p, ws, (uint64_t*)fsize.p, nullptr, nullptr),
                  SZ_OK);
        CUDA_OK(cudaDeviceSynchronize());
        uint64_t size = 0;
        cudaMemcpy(&size, fsize.p, 8, cudaMemcpyDeviceToHost);
        ASSERT_EQ(size, single.size());
        std::vector<uint8_t> frame(size);
        cudaMemcpy(frame.data(), dst.p, size, cudaMemcpyDeviceToHost);
        ASSERT_TRUE(frame == single) << "paged frame differs: dtype " << dtype << " page_values " << page_values;

        // Scatter back into fresh pages.
        cudaMemset(pool.p, 0, pool.size);
        DevBuf src(size), st(4);
        cudaMemcpy(src.p, frame.data(), size, cudaMemcpyHostToDevice);
        ASSERT_EQ(sz_cuda_decompress_pages(src.p, size, (void* const*)ptrs.p, n_pages, page_values, dwork.p, dws,
                                           (int32_t*)st.p, nullptr),
                  SZ_OK);
        CUDA_OK(cudaDeviceSynchronize());
        int32_t status = -1;
        cudaMemcpy(&status, st.p, 4, cudaMemcpyDeviceToHost);
        ASSERT_EQ(status, SZ_OK);
        std::vector<uint8_t> back(n * vb);
        for (uint32_t i = 0; i < n_pages; ++i)
          cudaMemcpy(back.data() + i * page_bytes, hp[i], page_bytes, cudaMemcpyDeviceToHost);
        ASSERT_TRUE(back == data);
        // The frame must hold exactly n_pages * page_values values.
        ASSERT_EQ(sz_cuda_decompress_pages(src.p, size, (void* const*)ptrs.p, n_pages - 1, page_values, dwork.p, dws,
                                           (int32_t*)st.p, nullptr),
                  SZ_OK);
        CUDA_OK(cudaDeviceSynchronize());
        cudaMemcpy(&status, st.p, 4, cudaMemcpyDeviceToHost);
        ASSERT_EQ(status, SZ_ERROR_DST_TOO_SMALL);
      }
    }
  }
}

// ---- corrupt frames ----------------------------------------------------------------------------------------------

// Decodes the frame with the reference and on the GPU and checks that they agree; the two statuses go to
// *ref_status / *gpu_status when given, for callers that check more of them.
void check_corrupt_like_reference(const std::vector<uint8_t>& frame, size_t out_bytes, const char* what,
                                  sz_status* ref_status = nullptr, int32_t* gpu_status = nullptr) {
  std::vector<uint8_t> ref_out(out_bytes + 1);
  size_t ref_size = 0;
  const sz_status ref = sz_decompress_reference(frame.data(), frame.size(), ref_out.data(), out_bytes, &ref_size);
  const GpuDecoded d = gpu_decompress(frame, out_bytes);
  if (ref_status) *ref_status = ref;
  if (gpu_status) *gpu_status = d.status;
  ASSERT_EQ(d.launch, SZ_OK);
  ASSERT_TRUE(d.guard_ok) << what << ": wrote past the output";
  if (ref == SZ_OK) {
    ASSERT_EQ(d.status, SZ_OK) << what << ": GPU rejects (" << sz_status_name((sz_status)d.status)
                               << ") a frame the reference accepts";
    ref_out.resize(ref_size);
    ASSERT_TRUE(d.out == ref_out) << what;
  } else {
    ASSERT_NE(d.status, SZ_OK) << what << ": GPU accepts a frame the reference rejects with " << sz_status_name(ref);
    ASSERT_EQ(d.size, 0u) << what;
  }
}

TEST(CudaCodec, CorruptFramesRejectedLikeReference) {
  SZ_SKIP_WITHOUT_GPU();
  // Chunks of 256 (the general kernel) and 4096 (the pipelined one), 4 chunks with a short last one.
  for (unsigned chunk_log2 : {8u, 12u})
  for (sz_dtype dtype : {SZ_DTYPE_BF16, SZ_DTYPE_FP16, SZ_DTYPE_FP8_E4M3}) {
    for (uint32_t flags : sztest::kFlagSets) {
      const sztest::DtypeFacts f = sztest::dtype_facts(dtype);
      const size_t n = 3 * ((size_t)1 << chunk_log2) + 9;
      unsigned center = 0;
      const std::vector<uint8_t> data = test_values(dtype, n, 9 + dtype, &center);
      const sz_codebook cb = sztest::centered_codebook(dtype, 2, 4, center);
      sz_params p = sz_params_default();
      p.chunk_log2 = chunk_log2;
      p.flags = flags;
      const std::vector<uint8_t> frame = cpu_compress(data, n, dtype, cb, p);
      const size_t out_bytes = n * (f.W / 8);
      // Truncations.
      for (size_t len : {(size_t)0, (size_t)10, (size_t)63, (size_t)64, (size_t)100, frame.size() / 2,
                         frame.size() - 1}) {
        std::vector<uint8_t> t(frame.begin(), frame.begin() + len);
        sz_status ref = SZ_OK;
        int32_t got = -1;
        check_corrupt_like_reference(t, out_bytes, ("truncated to " + std::to_string(len)).c_str(), &ref, &got);
        if (len > 0 && len < 64) {  // header-level errors follow §4.1's order: same status as the reference
          EXPECT_EQ(got, (int32_t)ref);
        }
      }
      // Every single-bit flip of the first 64 + index bytes, and a sample elsewhere.
      Rng rng(flags + dtype);
      const unsigned sample = chunk_log2 == 8 ? 8 : 64;
      for (size_t byte = 0; byte < frame.size(); ++byte) {
        const bool dense = byte < 64 + 8 * 4 + 4 * 4;
        if (!dense && rng.below(sample) != 0) continue;
        std::vector<uint8_t> t = frame;
        t[byte] ^= (uint8_t)(1u << rng.below(8));
        sz_status ref = SZ_OK;
        int32_t got = -1;
        check_corrupt_like_reference(t, out_bytes, ("flip at byte " + std::to_string(byte)).c_str(), &ref, &got);
        if (byte < 64) EXPECT_EQ(got, (int32_t)ref) << "header flip at byte " << byte;
      }
      // Output one byte too small.
      const GpuDecoded small = gpu_decompress(frame, out_bytes - 1);
      EXPECT_EQ(small.status, SZ_ERROR_DST_TOO_SMALL);
      EXPECT_TRUE(small.guard_ok);
    }
  }
}

TEST(CudaCodec, RandomGarbageNeverCrashes) {
  SZ_SKIP_WITHOUT_GPU();
  // Valid header, random body: exercises the index / record checks with arbitrary values, for both kernels.
  for (unsigned chunk_log2 : {8u, 12u}) {
    const size_t n = chunk_log2 == 8 ? 5000 : 5 * 4096 + 100;
    unsigned center = 0;
    const std::vector<uint8_t> data = test_values(SZ_DTYPE_BF16, n, 5, &center);
    sz_params p = sz_params_default();
    p.chunk_log2 = chunk_log2;
    p.flags = 0;
    const sz_codebook cb = sztest::centered_codebook(SZ_DTYPE_BF16, 4, 16, center);
    const std::vector<uint8_t> frame = cpu_compress(data, n, SZ_DTYPE_BF16, cb, p);
    Rng rng(1234 + chunk_log2);
    for (int iter = 0; iter < 200; ++iter) {
      std::vector<uint8_t> t = frame;
      const int flips = 1 + (int)rng.below(20);
      // Half of the time only the index (sizes and modes), the rest anywhere after the header.
      const size_t lo = 64, span = (iter & 1) ? t.size() - 64 : 8 * ((n + (1u << chunk_log2) - 1) >> chunk_log2);
      for (int i = 0; i < flips; ++i) t[lo + rng.below(span)] = (uint8_t)rng.next();
      check_corrupt_like_reference(t, n * 2, "random bytes");
    }
  }
}

TEST(CudaCodec, OversizeCodedRecordDecodesLikeReference) {
  SZ_SKIP_WITHOUT_GPU();
  for (sz_dtype dtype : sztest::kAllDtypes) {
    for (uint32_t flags : sztest::kFlagSets) {
      const size_t n = 5 * 4096 + 3;
      unsigned center = 0;
      const std::vector<uint8_t> data = test_values(dtype, n, 71 + dtype, &center);
      const sz_codebook cb = sztest::centered_codebook(dtype, 2, 4, center);
      const sz_params p = sztest::make_params(12, flags);
      const std::vector<uint8_t> frame = cpu_compress(data, n, dtype, cb, p);
      uint64_t chunk = 0;
      const std::vector<uint8_t> big = sztest::recode_raw_chunk_as_coded(frame, &chunk);
      ASSERT_FALSE(big.empty()) << "the test data has no raw chunk (dtype " << dtype << ")";
      ASSERT_GT(big.size(), frame.size());
      std::vector<uint8_t> ref(data.size());
      size_t got = 0;
      ASSERT_EQ(sz_decompress_reference(big.data(), big.size(), ref.data(), ref.size(), &got), SZ_OK);
      ASSERT_TRUE(ref == data);
      const GpuDecoded d = gpu_decompress(big, data.size());
      ASSERT_EQ(d.status, SZ_OK) << sz_status_name((sz_status)d.status) << " dtype " << dtype << " chunk " << chunk;
      ASSERT_TRUE(d.out == data) << "dtype " << dtype;
      ASSERT_TRUE(d.guard_ok);
    }
  }
}

// The decoder checks a chunk's escape lists before its first round: flip bits in every byte of chunk 1's escape
// positions and exponents and in its codes, and every bit of its first positions; each frame must decode exactly as
// the reference does (same bytes, or rejected by both).
TEST(CudaCodec, EscapeListChecksLikeReference) {
  SZ_SKIP_WITHOUT_GPU();
  const uint64_t n = 4 * 4096;
  unsigned center = 0;
  std::vector<uint8_t> data = test_values(SZ_DTYPE_BF16, n, 123, &center);
  const std::vector<uint8_t> calm = sztest::skewed_values(SZ_DTYPE_BF16, n, 5, center, 0.45, 0.05);
  std::copy(calm.begin(), calm.begin() + 2 * 8192, data.begin());  // chunks 0 and 1 coded, with escapes
  const sz_codebook cb = sztest::centered_codebook(SZ_DTYPE_BF16, 3, 8, center);
  const sz_params p = sztest::make_params(12, 0);
  const std::vector<uint8_t> frame = cpu_compress(data, n, SZ_DTYPE_BF16, cb, p);
  sz_status s;
  ASSERT_TRUE(gpu_compress(data, n, SZ_DTYPE_BF16, &cb, &p, &s) == frame);
  namespace lay = splitzip::layout;
  const lay::FrameOffsets o = lay::frame_offsets(n, 12, false, lay::dtype_traits(SZ_DTYPE_BF16), 0);
  const uint64_t begin = lay::load_u64(frame.data() + o.index) & lay::kIndexEndMask;
  const uint64_t entry = lay::load_u64(frame.data() + o.index + 8);
  ASSERT_EQ(entry >> lay::kIndexModeShift, lay::kModeCoded);
  const uint64_t G = 512 * 3, size = (entry & lay::kIndexEndMask) - begin, X = (size - G) / 3;
  ASSERT_GT(X, 40u) << "chunk 1 needs escapes";
  const size_t rec = o.exponents + begin;
  Rng rng(17);
  unsigned rejected = 0, accepted = 0;
  for (size_t i = 0; i < size; ++i) {
    const bool lists = i >= G;
    if (!lists && rng.below(8) != 0) continue;  // codes: a sample
    for (unsigned bit = 0; bit < 8; ++bit) {
      if (!(lists && i < G + 8) && bit != rng.below(8)) continue;  // all bits of the first 4 positions
      std::vector<uint8_t> t = frame;
      t[rec + i] ^= (uint8_t)(1u << bit);
      sz_status ref = SZ_OK;
      check_corrupt_like_reference(t, n * 2, ("flip at record byte " + std::to_string(i)).c_str(), &ref);
      (ref == SZ_OK ? accepted : rejected)++;
    }
  }
  EXPECT_GT(rejected, 100u);
  EXPECT_GT(accepted, 10u);
  std::printf("[ info ] escape lists: %u corrupted records rejected, %u accepted, all like the reference\n", rejected,
              accepted);
}

// More chunks than the grid has warps many times over: the encoder's look-back across waves and the decoder's ring
// across chunks are exercised, on real KV tiled with a perturbation so no two tiles agree.
TEST(CudaCodec, LargeFrameEqualsFastCpuCodec) {
  SZ_SKIP_WITHOUT_GPU();
  std::vector<uint8_t> slice;
  ASSERT_TRUE(sztest::read_file(sztest::repo_path("data/kv_code_bf16_slice.bin"), &slice));
  const uint64_t n = 80ull << 20;  // 160 MiB of BF16: 20480 chunks, several per warp in both kernels
  std::vector<uint8_t> data(n * 2);
  Rng rng(99);
  for (size_t o = 0; o < data.size(); o += slice.size()) {
    const size_t len = std::min(slice.size(), data.size() - o);
    std::copy(slice.begin(), slice.begin() + (ptrdiff_t)len, data.begin() + (ptrdiff_t)o);
    data[o + rng.below(len)] ^= 0x40;  // a different exponent somewhere in every tile
  }
  for (uint32_t flags : sztest::kFlagSets) {
    sz_params p = sztest::make_params(12, flags, 8);
    std::vector<uint8_t> ref(sz_compress_bound(n, SZ_DTYPE_BF16));
    size_t ref_size = 0;
    ASSERT_EQ(sz_compress(data.data(), n, SZ_DTYPE_BF16, nullptr, &p, ref.data(), ref.size(), &ref_size), SZ_OK);
    ref.resize(ref_size);
    sz_status s;
    const std::vector<uint8_t> got = gpu_compress(data, n, SZ_DTYPE_BF16, nullptr, &p, &s);
    ASSERT_EQ(s, SZ_OK);
    ASSERT_EQ(got.size(), ref.size());
    ASSERT_TRUE(got == ref) << "flags " << flags;
    const GpuDecoded d = gpu_decompress(ref, data.size());
    ASSERT_EQ(d.status, SZ_OK) << sz_status_name((sz_status)d.status);
    ASSERT_TRUE(d.out == data);
  }
}

// ---- host-side argument checks -----------------------------------------------------------------------------------

TEST(CudaCodec, HostArgumentChecks) {
  SZ_SKIP_WITHOUT_GPU();
  const uint64_t n = 10000;
  DevBuf src(n * 2), dst(sz_compress_bound(n, SZ_DTYPE_BF16)), fsize(8);
  size_t ws = 0;
  ASSERT_EQ(sz_cuda_compress_workspace_size(n, SZ_DTYPE_BF16, nullptr, &ws), SZ_OK);
  DevBuf work(ws);
  EXPECT_EQ(sz_cuda_compress_workspace_size(n, (sz_dtype)9, nullptr, &ws), SZ_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(sz_cuda_compress_workspace_size(n, SZ_DTYPE_BF16, nullptr, &ws), SZ_OK);
  EXPECT_EQ(sz_cuda_compress(src.p, n, SZ_DTYPE_BF16, nullptr, nullptr, dst.p, dst.size - 1, work.p, ws,
                             (uint64_t*)fsize.p, nullptr, nullptr),
            SZ_ERROR_DST_TOO_SMALL);
  EXPECT_EQ(sz_cuda_compress(src.p, n, SZ_DTYPE_BF16, nullptr, nullptr, dst.p, dst.size, work.p, ws - 1,
                             (uint64_t*)fsize.p, nullptr, nullptr),
            SZ_ERROR_WORKSPACE_TOO_SMALL);
  EXPECT_EQ(sz_cuda_compress(nullptr, n, SZ_DTYPE_BF16, nullptr, nullptr, dst.p, dst.size, work.p, ws,
                             (uint64_t*)fsize.p, nullptr, nullptr),
            SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_cuda_compress(src.p, n, SZ_DTYPE_BF16, nullptr, nullptr, dst.p, dst.size, work.p, ws, nullptr, nullptr,
                             nullptr),
            SZ_ERROR_INVALID_ARGUMENT);
  sz_codebook bad = sztest::centered_codebook(SZ_DTYPE_FP16, 2, 4, 10);
  EXPECT_EQ(sz_cuda_compress(src.p, n, SZ_DTYPE_BF16, &bad, nullptr, dst.p, dst.size, work.p, ws, (uint64_t*)fsize.p,
                             nullptr, nullptr),
            SZ_ERROR_BAD_CODEBOOK);
  sz_params p = sz_params_default();
  p.chunk_log2 = 17;
  EXPECT_EQ(sz_cuda_compress(src.p, n, SZ_DTYPE_BF16, nullptr, &p, dst.p, dst.size, work.p, ws, (uint64_t*)fsize.p,
                             nullptr, nullptr),
            SZ_ERROR_INVALID_ARGUMENT);
  size_t dws = 0;
  ASSERT_EQ(sz_cuda_decompress_workspace_size(100, 10, &dws), SZ_OK);
  DevBuf dwork(dws, true);
  EXPECT_EQ(sz_cuda_decompress(nullptr, 100, dst.p, 10, dwork.p, dws, (int32_t*)fsize.p, nullptr, nullptr),
            SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_cuda_decompress(dst.p, 100, dst.p, 10, dwork.p, dws - 1, (int32_t*)fsize.p, nullptr, nullptr),
            SZ_ERROR_WORKSPACE_TOO_SMALL);
  EXPECT_EQ(sz_cuda_decompress(dst.p, 100, dst.p, 10, nullptr, dws, (int32_t*)fsize.p, nullptr, nullptr),
            SZ_ERROR_INVALID_ARGUMENT);
  CUDA_OK(cudaDeviceSynchronize());
}

// ---- serving-engine use: graphs, small messages back to back, workspaces ---------------------------------------------

// A BF16 call of n values as these tests make it: chunks of 2^12 with checksums, the shipped generic codebook, the
// frame bound and both workspaces' sizes.
struct Bf16Call {
  sz_params p;
  sz_codebook cb;
  size_t bound = 0, ews = 0, dws = 0;
};
void make_bf16_call(uint64_t n, Bf16Call* c) {
  c->p = sztest::make_params(12, SZ_FLAG_CHECKSUMS);
  ASSERT_EQ(sz_default_codebook(SZ_DTYPE_BF16, SZ_KIND_GENERIC, &c->cb), SZ_OK);
  c->bound = sz_compress_bound(n, SZ_DTYPE_BF16);
  ASSERT_EQ(sz_cuda_compress_workspace_size(n, SZ_DTYPE_BF16, &c->p, &c->ews), SZ_OK);
  ASSERT_EQ(sz_cuda_decompress_workspace_size(c->bound, n * 2, &c->dws), SZ_OK);
}

// Compress and decompress captured in one CUDA graph and replayed, with new input between replays: one launch per
// direction, no memset, no host work; every replay's frame equals the reference and decodes to its input.
// One compress and one decompress call captured into a CUDA graph by enqueue(stream) (outputs: the frame and its
// size, the decoder's status and output size, the decoded values), which must hold one kernel per direction; then
// four replays, each on input(replay) (at least raw_bytes bytes, copied into src first), checked against the CPU's
// frame reference(data) and against the input itself.
struct GraphIo {
  DevBuf &src, &frame, &out, &fsize, &st, &osize;
  size_t raw_bytes;
};
template <class Enqueue, class Input, class Reference>
void check_graph_replays(const GraphIo& io, Enqueue enqueue, Input input, Reference reference) {
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  enqueue(stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  size_t nodes = 0;
  CUDA_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
  EXPECT_EQ(nodes, 2u) << "one kernel per direction";
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 4; ++replay) {
    const std::vector<uint8_t> data = input(replay);
    ASSERT_GE(data.size(), io.raw_bytes);
    CUDA_OK(cudaMemcpy(io.src.p, data.data(), io.raw_bytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    uint64_t size = 0, got_size = 0;
    int32_t status = -1;
    CUDA_OK(cudaMemcpy(&size, io.fsize.p, 8, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&status, io.st.p, 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&got_size, io.osize.p, 8, cudaMemcpyDeviceToHost));
    const std::vector<uint8_t> ref = reference(data);
    ASSERT_EQ(size, ref.size()) << "replay " << replay;
    std::vector<uint8_t> f(size), back(io.raw_bytes);
    CUDA_OK(cudaMemcpy(f.data(), io.frame.p, size, cudaMemcpyDeviceToHost));
    ASSERT_TRUE(f == ref) << "replay " << replay;
    ASSERT_EQ(status, SZ_OK) << "replay " << replay;
    ASSERT_EQ(got_size, io.raw_bytes);
    CUDA_OK(cudaMemcpy(back.data(), io.out.p, back.size(), cudaMemcpyDeviceToHost));
    ASSERT_TRUE(std::equal(back.begin(), back.end(), data.begin())) << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(CudaCodec, GraphCaptureAndReplay) {
  SZ_SKIP_WITHOUT_GPU();
  const uint64_t n = 3 * 4096 + 1000;
  Bf16Call c;
  ASSERT_NO_FATAL_FAILURE(make_bf16_call(n, &c));
  const sz_params& p = c.p;
  const sz_codebook& cb = c.cb;
  const size_t bound = c.bound, ews = c.ews, dws = c.dws;
  DevBuf src(n * 2), frame(bound), out(n * 2), ework(ews, true), dwork(dws, true), fsize(8), st(4), osize(8);
  check_graph_replays(
      GraphIo{src, frame, out, fsize, st, osize, n * 2},
      [&](cudaStream_t stream) {
        ASSERT_EQ(sz_cuda_compress(src.p, n, SZ_DTYPE_BF16, &cb, &p, frame.p, bound, ework.p, ews, (uint64_t*)fsize.p,
                                   nullptr, stream),
                  SZ_OK);
        // The decoder reads the frame size from the frame itself; it is given the bound as the buffer size.
        ASSERT_EQ(sz_cuda_decompress(frame.p, bound, out.p, n * 2, dwork.p, dws, (int32_t*)st.p, (uint64_t*)osize.p,
                                     stream),
                  SZ_OK);
      },
      [&](int replay) {
        unsigned center = 0;
        return test_values(SZ_DTYPE_BF16, n, 500 + replay, &center);
      },
      [&](const std::vector<uint8_t>& data) { return cpu_compress(data, n, SZ_DTYPE_BF16, cb, p); });
}

// Many calls of serving sizes (1 KiB .. 2 MiB, every dtype) enqueued back to back on one stream with one pair of
// workspaces and no synchronisation between them, then checked: each call leaves the workspaces ready for the next.
TEST(CudaCodec, SmallMessagesBackToBack) {
  SZ_SKIP_WITHOUT_GPU();
  const size_t kMaxBytes = 2 << 20;
  const sz_params p = sztest::make_params(12, SZ_FLAG_CHECKSUMS);
  size_t ews = 0, dws = 0;
  ASSERT_EQ(sz_cuda_compress_workspace_size(kMaxBytes, SZ_DTYPE_FP8_E4M3, &p, &ews), SZ_OK);
  ASSERT_EQ(sz_cuda_decompress_workspace_size(0, 0, &dws), SZ_OK);
  DevBuf ework(ews, true), dwork(dws, true);
  struct Call {
    sz_dtype dtype;
    uint64_t n;
    std::vector<uint8_t> data;
    sz_codebook cb;
    DevBuf *src, *frame, *out, *fsize, *st;
  };
  std::vector<Call> calls;
  Rng rng(8);
  for (int i = 0; i < 40; ++i) {
    Call c;
    c.dtype = sztest::kAllDtypes[i % 5];
    const size_t vb = sztest::value_bytes(c.dtype);
    c.n = (1024 + rng.below(kMaxBytes - 1024)) / vb;
    if (i < 5) c.n = (1024u << (2 * i)) / vb;  // 1 KiB, 4 KiB, ... 256 KiB exactly
    unsigned center = 0;
    c.data = test_values(c.dtype, c.n, 900 + i, &center);
    ASSERT_EQ(sz_default_codebook(c.dtype, SZ_KIND_GENERIC, &c.cb), SZ_OK);
    const size_t bound = sz_compress_bound(c.n, c.dtype);
    c.src = new DevBuf(c.data.size());
    c.frame = new DevBuf(bound);
    c.out = new DevBuf(c.data.size());
    c.fsize = new DevBuf(8);
    c.st = new DevBuf(4);
    CUDA_OK(cudaMemcpy(c.src->p, c.data.data(), c.data.size(), cudaMemcpyHostToDevice));
    calls.push_back(std::move(c));
  }
  CUDA_OK(cudaDeviceSynchronize());
  for (Call& c : calls) {
    const size_t bound = sz_compress_bound(c.n, c.dtype);
    ASSERT_EQ(sz_cuda_compress(c.src->p, c.n, c.dtype, &c.cb, &p, c.frame->p, bound, ework.p, ews,
                               (uint64_t*)c.fsize->p, nullptr, nullptr),
              SZ_OK);
    ASSERT_EQ(sz_cuda_decompress(c.frame->p, bound, c.out->p, c.data.size(), dwork.p, dws, (int32_t*)c.st->p,
                                 nullptr, nullptr),
              SZ_OK);
  }
  CUDA_OK(cudaDeviceSynchronize());
  for (Call& c : calls) {
    uint64_t size = 0;
    int32_t status = -1;
    CUDA_OK(cudaMemcpy(&size, c.fsize->p, 8, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&status, c.st->p, 4, cudaMemcpyDeviceToHost));
    const std::vector<uint8_t> ref = cpu_compress(c.data, c.n, c.dtype, c.cb, p);
    ASSERT_EQ(size, ref.size()) << "dtype " << c.dtype << " n " << c.n;
    std::vector<uint8_t> f(size), back(c.data.size());
    CUDA_OK(cudaMemcpy(f.data(), c.frame->p, size, cudaMemcpyDeviceToHost));
    ASSERT_TRUE(f == ref) << "dtype " << c.dtype << " n " << c.n;
    ASSERT_EQ(status, SZ_OK) << "dtype " << c.dtype << " n " << c.n;
    CUDA_OK(cudaMemcpy(back.data(), c.out->p, back.size(), cudaMemcpyDeviceToHost));
    ASSERT_TRUE(back == c.data) << "dtype " << c.dtype << " n " << c.n;
  }
  for (Call& c : calls) {
    delete c.src;
    delete c.frame;
    delete c.out;
    delete c.fsize;
    delete c.st;
  }
}

// A workspace that was never zero-filled is refused on the device (frame size 0, status INVALID_ARGUMENT) and
// left as it was.
TEST(CudaCodec, UninitialisedWorkspaceRefused) {
  SZ_SKIP_WITHOUT_GPU();
  const uint64_t n = 50000;
  const sz_params p = sztest::make_params(12, 0);
  size_t ws = 0, dws = 0;
  ASSERT_EQ(sz_cuda_compress_workspace_size(n, SZ_DTYPE_BF16, &p, &ws), SZ_OK);
  ASSERT_EQ(sz_cuda_decompress_workspace_size(0, 0, &dws), SZ_OK);
  const std::vector<uint8_t> junk = sztest::random_bytes(ws, 3), djunk = sztest::random_bytes(dws, 4);
  DevBuf src(n * 2), dst(sz_compress_bound(n, SZ_DTYPE_BF16)), work(ws), dwork(dws), fsize(8), st(4);
  CUDA_OK(cudaMemcpy(work.p, junk.data(), ws, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dwork.p, djunk.data(), dws, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(fsize.p, 0x77, 8));
  ASSERT_EQ(sz_cuda_compress(src.p, n, SZ_DTYPE_BF16, nullptr, &p, dst.p, dst.size, work.p, ws, (uint64_t*)fsize.p,
                             nullptr, nullptr),
            SZ_OK);
  ASSERT_EQ(sz_cuda_decompress(dst.p, dst.size, src.p, n * 2, dwork.p, dws, (int32_t*)st.p, nullptr, nullptr), SZ_OK);
  CUDA_OK(cudaDeviceSynchronize());
  uint64_t size = 1;
  int32_t status = 0;
  CUDA_OK(cudaMemcpy(&size, fsize.p, 8, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(&status, st.p, 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(size, 0u);
  EXPECT_EQ(status, SZ_ERROR_INVALID_ARGUMENT);
  std::vector<uint8_t> after(ws), dafter(dws);
  CUDA_OK(cudaMemcpy(after.data(), work.p, ws, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(dafter.data(), dwork.p, dws, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(after == junk);
  EXPECT_TRUE(dafter == djunk);
}

// ---- channel windows (version 2) ------------------------------------------------------------------------------------

// Frames with channel windows: the GPU's equal the CPU reference's byte for byte, and decode (CPU frames on the
// GPU, with the book's bases in device memory), contiguous and with one-token pages.
TEST(CudaCodec, ChannelFramesEqualReference) {
  SZ_SKIP_WITHOUT_GPU();
  int cases = 0;
  for (sz_dtype dtype : sztest::kAllDtypes) {
    const sztest::DtypeFacts f = sztest::dtype_facts(dtype);
    const size_t vb = f.W / 8;
    const uint32_t period = 192, tensors = 4;
    const uint64_t tokens = 300;
    const std::vector<uint8_t> all = sztest::channel_values(dtype, tensors, tokens, period, 50 + dtype);
    std::vector<uint32_t> counts(sz_channel_histogram_size(dtype, tensors, period) / 4, 0);
    ASSERT_EQ(sz_channel_histogram_add(counts.data(), dtype, tensors, period, all.data(), tokens), SZ_OK);
    std::vector<uint8_t> bases((size_t)tensors * period);
    unsigned k = 0;
    ASSERT_EQ(sz_channel_calibrate(counts.data(), dtype, tensors, period, 0, bases.data(), &k, nullptr), SZ_OK);
    sz_channel_book book;
    ASSERT_EQ(sz_channel_book_init(&book, dtype, k, period, tensors, bases.data()), SZ_OK);
    DevBuf d_bases(bases.size());
    CUDA_OK(cudaMemcpy(d_bases.p, bases.data(), bases.size(), cudaMemcpyHostToDevice));
    sz_channel_book dbook = book;
    dbook.bases = d_bases.p;
    for (uint32_t tensor = 0; tensor < tensors; tensor += 3) {
      for (uint32_t flags : sztest::kFlagSets) {
        const uint64_t n = tokens * period - (flags ? 0 : 77);
        const sz_params p = sztest::make_params(12, flags);
        const uint8_t* src = all.data() + (size_t)tensor * tokens * period * vb;
        std::vector<uint8_t> ref(sz_compress_bound(n, dtype));
        size_t rs = 0;
        ASSERT_EQ(sz_compress_channels_reference(src, n, dtype, &book, tensor, &p, ref.data(), ref.size(), &rs), SZ_OK);
        ref.resize(rs);
        size_t ews = 0, dws = 0;
        ASSERT_EQ(sz_cuda_compress_workspace_size(n, dtype, &p, &ews), SZ_OK);
        ASSERT_EQ(sz_cuda_decompress_workspace_size(rs, n * vb, &dws), SZ_OK);
        DevBuf d_src(n * vb), d_frame(sz_compress_bound(n, dtype)), ework(ews, true), dwork(dws, true), fsize(8),
            d_out(n * vb), st(4);
        CUDA_OK(cudaMemcpy(d_src.p, src, n * vb, cudaMemcpyHostToDevice));
        ASSERT_EQ(sz_cuda_compress_channels(d_src.p, n, dtype, &dbook, tensor, &p, d_frame.p, d_frame.size, ework.p,
                                            ews, (uint64_t*)fsize.p, nullptr, nullptr),
                  SZ_OK);
        CUDA_OK(cudaDeviceSynchronize());
        uint64_t size = 0;
        CUDA_OK(cudaMemcpy(&size, fsize.p, 8, cudaMemcpyDeviceToHost));
        ASSERT_EQ(size, ref.size()) << "dtype " << dtype;
        std::vector<uint8_t> got(size);
        CUDA_OK(cudaMemcpy(got.data(), d_frame.p, size, cudaMemcpyDeviceToHost));
        ASSERT_TRUE(got == ref) << "dtype " << dtype << " tensor " << tensor << " flags " << flags;
        DevBuf d_ref(rs);
        CUDA_OK(cudaMemcpy(d_ref.p, ref.data(), rs, cudaMemcpyHostToDevice));
        ASSERT_EQ(sz_cuda_decompress_book(d_ref.p, rs, &dbook, d_out.p, n * vb, dwork.p, dws, (int32_t*)st.p, nullptr,
                                          nullptr),
                  SZ_OK);
        CUDA_OK(cudaDeviceSynchronize());
        int32_t status = -1;
        CUDA_OK(cudaMemcpy(&status, st.p, 4, cudaMemcpyDeviceToHost));
        ASSERT_EQ(status, SZ_OK) << sz_status_name((sz_status)status);
        std::vector<uint8_t> back(n * vb);
        CUDA_OK(cudaMemcpy(back.data(), d_out.p, back.size(), cudaMemcpyDeviceToHost));
        ASSERT_EQ(memcmp(back.data(), src, back.size()), 0) << "dtype " << dtype;
        ASSERT_EQ(sz_cuda_decompress(d_ref.p, rs, d_out.p, n * vb, dwork.p, dws, (int32_t*)st.p, nullptr, nullptr),
                  SZ_OK);
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(&status, st.p, 4, cudaMemcpyDeviceToHost));
        ASSERT_EQ(status, SZ_ERROR_BOOK_MISMATCH) << "a version 2 frame without its book";
        ++cases;
      }
    }
    // One-token pages (SGLang's layout), in reverse order.
    const uint64_t n = tokens * period;
    const sz_params p = sztest::make_params(12, SZ_FLAG_CHECKSUMS);
    std::vector<uint8_t> ref(sz_compress_bound(n, dtype));
    size_t rs = 0;
    ASSERT_EQ(sz_compress_channels_reference(all.data(), n, dtype, &book, 0, &p, ref.data(), ref.size(), &rs), SZ_OK);
    ref.resize(rs);
    DevBuf pool(n * vb), ptrs(sizeof(void*) * tokens);
    std::vector<void*> hp(tokens);
    for (uint64_t t = 0; t < tokens; ++t) {
      hp[t] = pool.p + (tokens - 1 - t) * period * vb;
      CUDA_OK(cudaMemcpy(hp[t], all.data() + t * period * vb, period * vb, cudaMemcpyHostToDevice));
    }
    CUDA_OK(cudaMemcpy(ptrs.p, hp.data(), sizeof(void*) * tokens, cudaMemcpyHostToDevice));
    size_t ews = 0, dws = 0;
    ASSERT_EQ(sz_cuda_compress_pages_workspace_size((uint32_t)tokens, period, dtype, &p, &ews), SZ_OK);
    ASSERT_EQ(sz_cuda_decompress_workspace_size(rs, n * vb, &dws), SZ_OK);
    DevBuf d_frame(sz_compress_bound(n, dtype)), ework(ews, true), dwork(dws, true), fsize(8), st(4);
    ASSERT_EQ(sz_cuda_compress_pages_channels((const void* const*)ptrs.p, (uint32_t)tokens, period, dtype, &dbook, 0,
                                              &p, d_frame.p, d_frame.size, ework.p, ews, (uint64_t*)fsize.p, nullptr,
                                              nullptr),
              SZ_OK);
    CUDA_OK(cudaDeviceSynchronize());
    uint64_t size = 0;
    CUDA_OK(cudaMemcpy(&size, fsize.p, 8, cudaMemcpyDeviceToHost));
    std::vector<uint8_t> got(size);
    CUDA_OK(cudaMemcpy(got.data(), d_frame.p, size, cudaMemcpyDeviceToHost));
    ASSERT_TRUE(got == ref) << "paged, dtype " << dtype;
    CUDA_OK(cudaMemset(pool.p, 0, pool.size));
    ASSERT_EQ(sz_cuda_decompress_pages_book(d_frame.p, size, &dbook, (void* const*)ptrs.p, (uint32_t)tokens, period,
                                            dwork.p, dws, (int32_t*)st.p, nullptr),
              SZ_OK);
    CUDA_OK(cudaDeviceSynchronize());
    int32_t status = -1;
    CUDA_OK(cudaMemcpy(&status, st.p, 4, cudaMemcpyDeviceToHost));
    ASSERT_EQ(status, SZ_OK);
    std::vector<uint8_t> back(n * vb);
    for (uint64_t t = 0; t < tokens; ++t)
      CUDA_OK(cudaMemcpy(back.data() + t * period * vb, hp[t], period * vb, cudaMemcpyDeviceToHost));
    ASSERT_EQ(memcmp(back.data(), all.data(), back.size()), 0) << "paged, dtype " << dtype;
  }
  printf("[ info ] %d version 2 (channel window) frames on the GPU equal the reference and decode\n", cases);
}

// ---- entropy-coded frames (version 3) ---------------------------------------------------------------------------

// A CPU-encoded version 3 frame decoded on the GPU with the table's device image, into dst_capacity bytes at
// dst_offset of a guarded buffer.
GpuDecoded gpu_decompress_entropy(const std::vector<uint8_t>& frame, const sz_symbol_table& table,
                                  size_t dst_capacity, size_t dst_offset = 0) {
  GpuDecoded r;
  constexpr size_t kGuard = 4096;
  std::vector<uint8_t> image(sz_cuda_symbol_table_image_size(&table));
  EXPECT_EQ(sz_cuda_symbol_table_image(&table, image.data(), image.size(), nullptr), SZ_OK);
  DevBuf src(frame.size()), dst(dst_offset + dst_capacity + kGuard), st(4), sz(8), img(image.size()),
      work(256, true);
  cudaMemcpy(src.p, frame.data(), frame.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(img.p, image.data(), image.size(), cudaMemcpyHostToDevice);
  cudaMemset(dst.p, 0x5A, dst.size);
  r.launch = sz_cuda_decompress_entropy(src.p, frame.size(), img.p, image.size(), dst.p + dst_offset, dst_capacity,
                                        work.p, 256, (int32_t*)st.p, (uint64_t*)sz.p, nullptr);
  if (r.launch != SZ_OK) return r;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemcpy(&r.status, st.p, 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(&r.size, sz.p, 8, cudaMemcpyDeviceToHost);
  std::vector<uint8_t> all(dst.size);
  cudaMemcpy(all.data(), dst.p, all.size(), cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < all.size(); ++i)
    if ((i < dst_offset || i >= dst_offset + dst_capacity) && all[i] != 0x5A) r.guard_ok = false;
  const uint64_t got = std::min<uint64_t>(r.size == ~0ull ? 0 : r.size, dst_capacity);
  r.out.assign(all.begin() + dst_offset, all.begin() + dst_offset + got);
  return r;
}


// CPU-encoded version 3 frames decode on the GPU to the input: every dtype, checksum kind, chunk sizes from 2^8 to
// the recommended 2^16 (whole and partial chunks, more chunks than warps), coded and raw chunks, unaligned output.
TEST(CudaCodec, EntropyFramesDecodeToTheInput) {
  SZ_SKIP_WITHOUT_GPU();
  const sz_dtype dtypes[] = {SZ_DTYPE_BF16, SZ_DTYPE_FP16, SZ_DTYPE_FP32, SZ_DTYPE_FP8_E4M3, SZ_DTYPE_FP8_E5M2};
  const uint32_t flag_sets[] = {0, SZ_FLAG_CHECKSUMS, SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH};
  int cases = 0;
  for (sz_dtype dt : dtypes) {
    constexpr uint32_t kTensors = 4, kPeriod = 192;
    const uint64_t tokens = 1500;  // 288000 values a tensor
    const std::vector<uint8_t> kv = sztest::channel_values(dt, kTensors, tokens, kPeriod, 70 + dt);
    auto tb = sztest::calibrated_table(kv, dt, kTensors, tokens, kPeriod, 16);
    const size_t per = (size_t)tokens * kPeriod * sz_dtype_size(dt);
    const std::vector<uint8_t> t2(kv.begin() + 2 * per, kv.begin() + 3 * per), noise = sztest::random_bytes(per / 3, 9);
    for (unsigned log2 : {8u, 12u, 16u})
      for (uint32_t flags : flag_sets)
        for (const auto* data : {&t2, &noise}) {
          const std::vector<uint8_t> frame = entropy_frame(*data, dt, tb->t, 2, log2, flags);
          for (size_t off : {(size_t)0, (size_t)5}) {
            SCOPED_TRACE("dtype " + std::to_string(dt) + " chunk 2^" + std::to_string(log2) + " flags " +
                         std::to_string(flags) + (data == &noise ? " noise" : " kv") + " offset " +
                         std::to_string(off));
            const GpuDecoded d = gpu_decompress_entropy(frame, tb->t, data->size(), off);
            ASSERT_EQ(d.launch, SZ_OK);
            EXPECT_EQ(d.status, SZ_OK) << sz_status_name((sz_status)d.status);
            EXPECT_EQ(d.size, data->size());
            EXPECT_TRUE(d.guard_ok);
            EXPECT_TRUE(d.out == *data);
            ++cases;
          }
        }
  }
  printf("[ info ] %d version 3 frames decoded on the GPU to their input\n", cases);
}

// Paired FP8 frames (a row map, §4.10.6) are the CPU's: the GPU decoder, which takes no map, answers
// SZ_ERROR_BOOK_MISMATCH without writing output, as the CPU decoder does without the map.
TEST(CudaCodec, EntropyPairedFramesNeedTheirRowMap) {
  SZ_SKIP_WITHOUT_GPU();
  constexpr uint32_t kPeriod = 64, kTokens = 512;
  const sz_dtype dt = SZ_DTYPE_FP8_E5M2;
  const std::vector<uint8_t> kv = sztest::channel_values(dt, 1, kTokens, kPeriod, 12);
  std::vector<uint32_t> tokens(kTokens);
  for (uint32_t r = 0; r < kTokens; ++r) tokens[r] = r % 9;
  auto rm = sztest::row_map_from_tokens(tokens);
  size_t size = 0;
  auto tb = sztest::calibrated_table(kv, dt, 1, kTokens, kPeriod, 4);
  std::vector<uint8_t> frame(sz_compress_bound(kv.size(), dt));
  ASSERT_EQ(sz_compress_entropy_paired(kv.data(), kv.size(), dt, &tb->t, 0, &rm->m, nullptr, frame.data(), frame.size(),
                                       &size),
            SZ_OK);
  frame.resize(size);
  const GpuDecoded d = gpu_decompress_entropy(frame, tb->t, kv.size(), 0);
  ASSERT_EQ(d.launch, SZ_OK);
  EXPECT_EQ(d.status, SZ_ERROR_BOOK_MISMATCH) << sz_status_name((sz_status)d.status);
  EXPECT_TRUE(d.guard_ok);
}

// Damaged and truncated version 3 frames fail on the GPU exactly where they fail on the CPU; where both decode (a
// damaged raw part without checksums), they give the same values; a wrong table's image is refused.
TEST(CudaCodec, EntropyCorruptFramesLikeCpu) {
  SZ_SKIP_WITHOUT_GPU();
  for (sz_dtype dt : {SZ_DTYPE_BF16, SZ_DTYPE_FP8_E4M3}) {
    const std::vector<uint8_t> kv = sztest::channel_values(dt, 1, 300, 128, 3 + dt);
    auto tb = sztest::calibrated_table(kv, dt, 1, 300, 128, 8);
    auto other = sztest::calibrated_table(sztest::channel_values(dt, 1, 300, 128, 4 + dt), dt, 1, 300, 128, 8);
    for (uint32_t flags : {0u, (uint32_t)SZ_FLAG_CHECKSUMS, (uint32_t)(SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH)}) {
      const std::vector<uint8_t> frame = entropy_frame(kv, dt, tb->t, 0, 10, flags);
      EXPECT_EQ(gpu_decompress_entropy(frame, other->t, kv.size()).status, SZ_ERROR_BOOK_MISMATCH);
      Rng rng(31 + flags + dt);
      int failed = 0;
      for (int trial = 0; trial < 150; ++trial) {
        std::vector<uint8_t> bad = frame;
        if (trial % 4 == 3) {
          bad.resize((size_t)rng.below(bad.size()));
        } else {
          for (int k = 0; k <= trial % 3; ++k) bad[(size_t)rng.below(bad.size())] ^= (uint8_t)(1u << rng.below(8));
        }
        std::vector<uint8_t> cpu(kv.size());
        size_t cpu_size = 0;
        const sz_status cs =
            sz_decompress_entropy(bad.data(), bad.size(), &tb->t, cpu.data(), cpu.size(), &cpu_size, 1);
        const GpuDecoded d = gpu_decompress_entropy(bad, tb->t, kv.size());
        ASSERT_EQ(d.launch, SZ_OK);
        EXPECT_EQ(cs == SZ_OK, d.status == SZ_OK)
            << "trial " << trial << " cpu " << sz_status_name(cs) << " gpu " << sz_status_name((sz_status)d.status);
        EXPECT_TRUE(d.guard_ok);
        if (cs == SZ_OK && d.status == SZ_OK) EXPECT_TRUE(d.out == cpu);
        failed += cs != SZ_OK;
      }
      EXPECT_GT(failed, 50);
    }
  }
}

// Hand-made tables at the coder's corners and the layouts off the fast path (entropy_cases.h).
TEST(CudaCodec, EntropyHandTablesEveryDtypeAndLayout) {
  SZ_SKIP_WITHOUT_GPU();
  const int cases = sztest::entropy_hand_table_cases(
      [](const std::vector<uint8_t>& frame, const sz_symbol_table& t, size_t capacity) {
        return gpu_decompress_entropy(frame, t, capacity);
      });
  printf("[ info ] %d version 3 frames of hand-made tables decoded to their input\n", cases);
}

}  // namespace

// ---- the encoder of entropy-coded frames ------------------------------------------------------------------------

namespace {

// The GPU encoder: values at src[off..] on the device (off makes the input unaligned), the frame into a poisoned
// buffer of the bound's size followed by a guard; the workspace fresh (zero-filled) for each call.
sztest::EncodedFrame gpu_compress_entropy(const std::vector<uint8_t>& src, size_t off, uint64_t n, sz_dtype dt,
                                          const sz_symbol_table& t, uint32_t tensor, const sz_params& p) {
  sztest::EncodedFrame r;
  std::vector<uint8_t> image(sz_cuda_symbol_table_image_size(&t));
  EXPECT_EQ(sz_cuda_symbol_table_image(&t, image.data(), image.size(), nullptr), SZ_OK);
  size_t ws = 0;
  EXPECT_EQ(sz_cuda_compress_entropy_workspace_size(n, dt, &p, &ws), SZ_OK);
  const size_t bound = sz_compress_bound(n, dt);
  constexpr size_t kGuard = 4096;
  DevBuf in(src.size()), img(image.size()), dst(bound + kGuard), work(ws, true), fsize(8);
  cudaMemcpy(in.p, src.data(), src.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(img.p, image.data(), image.size(), cudaMemcpyHostToDevice);
  cudaMemset(dst.p, 0xA5, dst.size);
  uint64_t* h_size = nullptr;
  cudaMallocHost(&h_size, 8);
  *h_size = ~0ull;
  r.launch = sz_cuda_compress_entropy(in.p + off, n, dt, img.p, image.size(), tensor, &p, dst.p, bound, work.p, ws,
                                      (uint64_t*)fsize.p, h_size, nullptr);
  if (r.launch == SZ_OK) {
    EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
    cudaMemcpy(&r.frame_size, fsize.p, 8, cudaMemcpyDeviceToHost);
    EXPECT_EQ(r.frame_size, *h_size) << "pinned copy of the frame size";
    std::vector<uint8_t> all(dst.size);
    cudaMemcpy(all.data(), dst.p, all.size(), cudaMemcpyDeviceToHost);
    if (r.frame_size > bound) {
      r.guard_ok = false;
    } else {
      for (size_t i = r.frame_size; i < all.size(); ++i)
        if (all[i] != 0xA5) r.guard_ok = false;
      all.resize(r.frame_size);
      r.frame = std::move(all);
    }
  }
  cudaFreeHost(h_size);
  return r;
}

}  // namespace

// GPU-encoded version 3 frames equal the reference coder's byte for byte and decode on the GPU to their input
// (entropy_cases.h: every dtype, checksum kind, chunk sizes 2^8, 2^11, 2^16, tiny and partial chunks, raw chunks,
// unaligned inputs, hand-made tables incl. the layouts read from the image).
TEST(CudaCodec, EntropyEncoderFramesEqualReference) {
  SZ_SKIP_WITHOUT_GPU();
  const int cases = sztest::entropy_encoder_cases(gpu_compress_entropy,
                                                  [](const std::vector<uint8_t>& frame, const sz_symbol_table& t,
                                                     size_t capacity) {
                                                    return gpu_decompress_entropy(frame, t, capacity, 1);
                                                  });
  printf("[ info ] %d version 3 frames encoded on the GPU equal the reference's\n", cases);
}

// A large call with more chunks than the workspace has slots (warps take several chunks each) on real-size chunks,
// against the fast CPU coder; bad images and a never-zeroed workspace give no frame.
TEST(CudaCodec, EntropyEncoderLargeCallAndRefusals) {
  SZ_SKIP_WITHOUT_GPU();
  const sz_dtype dt = SZ_DTYPE_BF16;
  constexpr uint32_t kPeriod = 192, kTokens = 600;
  const std::vector<uint8_t> kv = sztest::channel_values(dt, 1, kTokens, kPeriod, 77);
  auto tb = sztest::calibrated_table(kv, dt, 1, kTokens, kPeriod, 16);
  const uint64_t n = 2500ull * 4096 + 123;  // 2501 chunks of 2^12: more than kMaxSlots
  std::vector<uint8_t> big(n * 2);
  for (size_t o = 0; o < big.size(); o += kv.size()) memcpy(big.data() + o, kv.data(), std::min(kv.size(), big.size() - o));
  const sz_params p = sztest::make_params(12, SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH);
  std::vector<uint8_t> want(sz_compress_bound(n, dt));
  size_t want_size = 0;
  ASSERT_EQ(sz_compress_entropy(big.data(), n, dt, &tb->t, 0, &p, want.data(), want.size(), &want_size), SZ_OK);
  want.resize(want_size);
  const sztest::EncodedFrame e = gpu_compress_entropy(big, 0, n, dt, tb->t, 0, p);
  ASSERT_EQ(e.launch, SZ_OK);
  EXPECT_TRUE(e.guard_ok);
  EXPECT_TRUE(e.frame == want);
  // Refusals on the device: an image of another dtype, a tensor past the table's; and on the host.
  EXPECT_EQ(gpu_compress_entropy(big, 0, 5000, dt, tb->t, 1, p).frame_size, 0u);
  std::vector<uint8_t> image(sz_cuda_symbol_table_image_size(&tb->t));
  ASSERT_EQ(sz_cuda_symbol_table_image(&tb->t, image.data(), image.size(), nullptr), SZ_OK);
  // One workspace for both calls below: the larger of the two dtypes' (BF16's 8-bit symbols need larger slots).
  size_t ws = 0, bws = 0;
  ASSERT_EQ(sz_cuda_compress_entropy_workspace_size(5000, SZ_DTYPE_FP16, &p, &ws), SZ_OK);
  ASSERT_EQ(sz_cuda_compress_entropy_workspace_size(5000, dt, &p, &bws), SZ_OK);
  ws = std::max(ws, bws);
  DevBuf in(10000 * 2), img(image.size()), dst(sz_compress_bound(5000, SZ_DTYPE_FP16)), work(ws, true), junk(ws),
      fsize(8);
  cudaMemcpy(in.p, big.data(), in.size, cudaMemcpyHostToDevice);
  cudaMemcpy(img.p, image.data(), image.size(), cudaMemcpyHostToDevice);
  cudaMemset(junk.p, 0x3C, ws);
  uint64_t got = ~0ull;
  ASSERT_EQ(sz_cuda_compress_entropy(in.p, 5000, SZ_DTYPE_FP16, img.p, image.size(), 0, &p, dst.p, dst.size, work.p,
                                     ws, (uint64_t*)fsize.p, nullptr, nullptr),
            SZ_OK);
  CUDA_OK(cudaMemcpy(&got, fsize.p, 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got, 0u) << "an image of another dtype";
  ASSERT_EQ(sz_cuda_compress_entropy(in.p, 5000, dt, img.p, image.size(), 0, &p, dst.p, dst.size, junk.p, ws,
                                     (uint64_t*)fsize.p, nullptr, nullptr),
            SZ_OK);
  CUDA_OK(cudaMemcpy(&got, fsize.p, 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got, 0u) << "a workspace that was never zero-filled";
  EXPECT_EQ(sz_cuda_compress_entropy(in.p, 5000, dt, img.p, image.size(), 0, &p, dst.p, sz_compress_bound(5000, dt) - 1,
                                     work.p, ws, (uint64_t*)fsize.p, nullptr, nullptr),
            SZ_ERROR_DST_TOO_SMALL);
  EXPECT_EQ(sz_cuda_compress_entropy(in.p, 5000, dt, img.p, image.size(), 0, &p, dst.p, dst.size, work.p, bws - 1,
                                     (uint64_t*)fsize.p, nullptr, nullptr),
            SZ_ERROR_WORKSPACE_TOO_SMALL);
  EXPECT_EQ(sz_cuda_compress_entropy(in.p, 5000, dt, img.p + 8, image.size() - 8, 0, &p, dst.p, dst.size, work.p, ws,
                                     (uint64_t*)fsize.p, nullptr, nullptr),
            SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_cuda_compress_entropy(in.p, 5000, dt, img.p, image.size(), 0, &p, dst.p, dst.size, work.p, ws, nullptr,
                                     nullptr, nullptr),
            SZ_ERROR_INVALID_ARGUMENT);
  CUDA_OK(cudaDeviceSynchronize());
}

// Entropy compress and decompress captured in one CUDA graph and replayed with new input between replays, with
// one pair of workspaces: every replay's frame equals the reference and decodes to its input.
TEST(CudaCodec, EntropyGraphCaptureAndReplay) {
  SZ_SKIP_WITHOUT_GPU();
  const sz_dtype dt = SZ_DTYPE_BF16;
  constexpr uint32_t kPeriod = 64, kTokens = 300;
  const std::vector<uint8_t> calib = sztest::channel_values(dt, 1, kTokens, kPeriod, 5);
  auto tb = sztest::calibrated_table(calib, dt, 1, kTokens, kPeriod, 8);
  const uint64_t n = 5 * 4096 + 999;
  const sz_params p = sztest::make_params(12, SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH);
  std::vector<uint8_t> image(sz_cuda_symbol_table_image_size(&tb->t));
  ASSERT_EQ(sz_cuda_symbol_table_image(&tb->t, image.data(), image.size(), nullptr), SZ_OK);
  const size_t bound = sz_compress_bound(n, dt);
  size_t ews = 0;
  ASSERT_EQ(sz_cuda_compress_entropy_workspace_size(n, dt, &p, &ews), SZ_OK);
  DevBuf src(n * 2), img(image.size()), frame(bound), out(n * 2), ework(ews, true), dwork(256, true), fsize(8), st(4),
      osize(8);
  CUDA_OK(cudaMemcpy(img.p, image.data(), image.size(), cudaMemcpyHostToDevice));
  check_graph_replays(
      GraphIo{src, frame, out, fsize, st, osize, n * 2},
      [&](cudaStream_t stream) {
        ASSERT_EQ(sz_cuda_compress_entropy(src.p, n, dt, img.p, image.size(), 0, &p, frame.p, bound, ework.p, ews,
                                           (uint64_t*)fsize.p, nullptr, stream),
                  SZ_OK);
        ASSERT_EQ(sz_cuda_decompress_entropy(frame.p, bound, img.p, image.size(), out.p, n * 2, dwork.p, 256,
                                             (int32_t*)st.p, (uint64_t*)osize.p, stream),
                  SZ_OK);
      },
      [&](int replay) { return sztest::channel_values(dt, 1, n / kPeriod + 1, kPeriod, 100 + replay); },
      [&](const std::vector<uint8_t>& data) {
        std::vector<uint8_t> ref(bound);
        size_t ref_size = 0;
        EXPECT_EQ(sz_compress_entropy_reference(data.data(), n, dt, &tb->t, 0, &p, ref.data(), ref.size(), &ref_size),
                  SZ_OK);
        ref.resize(ref_size);
        return ref;
      });
}

// ---- GPU-to-GPU hand-off: sz_cuda_signal / sz_cuda_wait (the stream-ordered flags of splitzip.p2p's IPC path) -------

namespace {

TEST(CudaHandoff, ArgumentChecks) {
  SZ_SKIP_WITHOUT_GPU();
  DevBuf flag(16, true);
  uint64_t* f = reinterpret_cast<uint64_t*>(flag.p);
  EXPECT_EQ(sz_cuda_signal(nullptr, 1, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_cuda_wait(nullptr, 1, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_cuda_signal(reinterpret_cast<uint64_t*>(flag.p + 4), 1, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_cuda_wait(reinterpret_cast<const uint64_t*>(flag.p + 4), 1, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_cuda_wait(f, 0, nullptr), SZ_OK);  // 0 >= 0: passes at once
  EXPECT_EQ(sz_cuda_signal(f, 7, nullptr), SZ_OK);
  EXPECT_EQ(sz_cuda_wait(f, 7, nullptr), SZ_OK);
  EXPECT_EQ(sz_cuda_wait(f, 3, nullptr), SZ_OK);  // an older value is satisfied by a later signal
  CUDA_OK(cudaDeviceSynchronize());
  uint64_t v = 0;
  CUDA_OK(cudaMemcpy(&v, f, 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(v, 7u);
  int dev = 0, count = 0;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaGetDeviceCount(&count));
  EXPECT_EQ(sz_cuda_enable_peer_access(dev), SZ_OK);
  EXPECT_EQ(sz_cuda_enable_peer_access(-1), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_cuda_enable_peer_access(count), SZ_ERROR_INVALID_ARGUMENT);
}

// A wait holds everything after it in its stream until the flag reaches the value, here a flag in mapped pinned host
// memory that the host writes: the stream's later signal (and event) must not run before, and must run after.
TEST(CudaHandoff, WaitHoldsTheStreamUntilTheFlagArrives) {
  SZ_SKIP_WITHOUT_GPU();
  uint64_t* h = nullptr;
  CUDA_OK(cudaHostAlloc(reinterpret_cast<void**>(&h), 8, cudaHostAllocMapped));
  __atomic_store_n(h, 0, __ATOMIC_SEQ_CST);
  uint64_t* d = nullptr;
  CUDA_OK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d), h, 0));
  DevBuf mark(8, true);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t ev;
  CUDA_OK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  ASSERT_EQ(sz_cuda_wait(d, 2, s), SZ_OK);
  ASSERT_EQ(sz_cuda_signal(reinterpret_cast<uint64_t*>(mark.p), 1, s), SZ_OK);
  CUDA_OK(cudaEventRecord(ev, s));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(cudaEventQuery(ev), cudaErrorNotReady) << "the wait let the stream go on before the flag came";
  __atomic_store_n(h, 1, __ATOMIC_SEQ_CST);  // below the value: still waiting
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(cudaEventQuery(ev), cudaErrorNotReady) << "the wait let the stream go on at a smaller value";
  (void)cudaGetLastError();
  __atomic_store_n(h, 3, __ATOMIC_SEQ_CST);  // past the value: satisfies a wait for 2
  CUDA_OK(cudaEventSynchronize(ev));
  uint64_t v = 0;
  CUDA_OK(cudaMemcpy(&v, mark.p, 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(v, 1u);
  cudaEventDestroy(ev);
  cudaStreamDestroy(s);
  cudaFreeHost(h);
}

// The hand-off of splitzip.p2p's IPC path, in one process: a ring of `depth` slots of sz_compress_bound bytes and
// its flags (full[s]: frames written into slot s so far; free[s]: frames of slot s decoded so far) in the consumer
// device's memory. A producer stream on the producer device encodes message k straight into slot k % depth and
// signals full; a consumer stream, enqueued FIRST (so only the flags order it after the producer), waits for full,
// decodes from the slot with the slot's capacity as src_size (the frame's size never leaves the producer's
// device), copies the slot aside for the frame check and signals free, which the producer waits for before it
// reuses the slot. Every message decodes bit for bit and every frame equals the reference encoder's.
void check_ring_handoff(int producer, int consumer, int depth) {
  const uint64_t sizes[] = {300000, 3 * 65536 + 5, 1000, 250000, 4096, 299999, 77777, 1};
  const int messages = (int)(sizeof(sizes) / sizeof(sizes[0]));
  const uint64_t n_max = 300000;
  Bf16Call c;
  ASSERT_NO_FATAL_FAILURE(make_bf16_call(n_max, &c));
  const sz_params& p = c.p;
  const sz_codebook& cb = c.cb;
  const size_t slot = c.bound, ews = c.ews, dws = c.dws;

  std::vector<std::vector<uint8_t>> data(messages);
  for (int k = 0; k < messages; ++k) {
    unsigned center = 0;
    data[k] = test_values(SZ_DTYPE_BF16, sizes[k], 4000 + k, &center);
  }
  // Consumer side: the ring (poisoned: a decode that ran early would fail), flags, outputs.
  CUDA_OK(cudaSetDevice(consumer));
  DevBuf slots(slot * depth), flags(16 * depth, true), dwork(dws, true);
  CUDA_OK(cudaMemset(slots.p, 0xA5, slot * depth));
  uint64_t* full = reinterpret_cast<uint64_t*>(flags.p);
  uint64_t* freed = full + depth;
  std::vector<DevBuf*> outs, seen, st;
  for (int k = 0; k < messages; ++k) {
    outs.push_back(new DevBuf(sizes[k] * 2));
    CUDA_OK(cudaMemset(outs[k]->p, 0x5A, sizes[k] * 2));
    seen.push_back(new DevBuf(slot));
    st.push_back(new DevBuf(4));
  }
  cudaStream_t cs;
  CUDA_OK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  // Producer side: inputs, workspace, frame sizes (device words that never cross).
  CUDA_OK(cudaSetDevice(producer));
  if (producer != consumer) ASSERT_EQ(sz_cuda_enable_peer_access(consumer), SZ_OK);
  DevBuf ework(ews, true);
  std::vector<DevBuf*> srcs, fsizes;
  for (int k = 0; k < messages; ++k) {
    srcs.push_back(new DevBuf(data[k].size()));
    CUDA_OK(cudaMemcpy(srcs[k]->p, data[k].data(), data[k].size(), cudaMemcpyHostToDevice));
    fsizes.push_back(new DevBuf(8));
  }
  cudaStream_t ps;
  CUDA_OK(cudaStreamCreateWithFlags(&ps, cudaStreamNonBlocking));
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaSetDevice(consumer));
  CUDA_OK(cudaDeviceSynchronize());

  CUDA_OK(cudaSetDevice(consumer));
  for (int k = 0; k < messages; ++k) {
    const int s = k % depth;
    const uint64_t round = (uint64_t)(k / depth);
    uint8_t* sp = slots.p + s * slot;
    ASSERT_EQ(sz_cuda_wait(full + s, round + 1, cs), SZ_OK);
    ASSERT_EQ(sz_cuda_decompress(sp, slot, outs[k]->p, sizes[k] * 2, dwork.p, dws, (int32_t*)st[k]->p, nullptr, cs),
              SZ_OK);
    CUDA_OK(cudaMemcpyAsync(seen[k]->p, sp, slot, cudaMemcpyDeviceToDevice, cs));
    ASSERT_EQ(sz_cuda_signal(freed + s, round + 1, cs), SZ_OK);
  }
  CUDA_OK(cudaSetDevice(producer));
  for (int k = 0; k < messages; ++k) {
    const int s = k % depth;
    const uint64_t round = (uint64_t)(k / depth);
    if (round > 0) ASSERT_EQ(sz_cuda_wait(freed + s, round, ps), SZ_OK);
    ASSERT_EQ(sz_cuda_compress(srcs[k]->p, sizes[k], SZ_DTYPE_BF16, &cb, &p, slots.p + s * slot, slot, ework.p, ews,
                               (uint64_t*)fsizes[k]->p, nullptr, ps),
              SZ_OK);
    ASSERT_EQ(sz_cuda_signal(full + s, round + 1, ps), SZ_OK);
  }
  CUDA_OK(cudaStreamSynchronize(ps));
  CUDA_OK(cudaSetDevice(consumer));
  CUDA_OK(cudaStreamSynchronize(cs));

  for (int k = 0; k < messages; ++k) {
    int32_t status = -1;
    uint64_t size = 0;
    CUDA_OK(cudaMemcpy(&status, st[k]->p, 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&size, fsizes[k]->p, 8, cudaMemcpyDeviceToHost));
    ASSERT_EQ(status, SZ_OK) << "message " << k << ": " << sz_status_name((sz_status)status);
    std::vector<uint8_t> back(sizes[k] * 2), frame(slot);
    CUDA_OK(cudaMemcpy(back.data(), outs[k]->p, back.size(), cudaMemcpyDeviceToHost));
    ASSERT_TRUE(back == data[k]) << "message " << k << " decoded differently";
    CUDA_OK(cudaMemcpy(frame.data(), seen[k]->p, slot, cudaMemcpyDeviceToHost));
    const std::vector<uint8_t> ref = cpu_compress(data[k], sizes[k], SZ_DTYPE_BF16, cb, p);
    ASSERT_EQ(size, ref.size()) << "message " << k;
    ASSERT_TRUE(std::equal(ref.begin(), ref.end(), frame.begin())) << "message " << k << ": frame differs";
  }
  uint64_t fl[2 * 8] = {};
  CUDA_OK(cudaMemcpy(fl, flags.p, 16 * depth, cudaMemcpyDeviceToHost));
  for (int s = 0; s < depth; ++s) {
    const uint64_t uses = (uint64_t)((messages - s + depth - 1) / depth);
    EXPECT_EQ(fl[s], uses) << "full[" << s << "]";
    EXPECT_EQ(fl[depth + s], uses) << "free[" << s << "]";
  }
  for (int k = 0; k < messages; ++k) {
    delete outs[k];
    delete seen[k];
    delete st[k];
  }
  cudaStreamDestroy(cs);
  CUDA_OK(cudaSetDevice(producer));
  for (int k = 0; k < messages; ++k) {
    delete srcs[k];
    delete fsizes[k];
  }
  cudaStreamDestroy(ps);
}

TEST(CudaHandoff, RingOfSlotsTwoStreamsOneDevice) {
  SZ_SKIP_WITHOUT_GPU();
  int dev = 0;
  CUDA_OK(cudaGetDevice(&dev));
  for (int depth : {1, 2, 3}) {
    check_ring_handoff(dev, dev, depth);
    if (HasFatalFailure()) return;
  }
}

// The same across two devices: the producer's encoder writes into the consumer device's memory by peer access.
TEST(CudaHandoff, RingOfSlotsAcrossTwoDevices) {
  SZ_SKIP_WITHOUT_GPU();
  int count = 0, can = 0;
  CUDA_OK(cudaGetDeviceCount(&count));
  if (count < 2) GTEST_SKIP() << "one CUDA device visible: the two-device hand-off needs two";
  CUDA_OK(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (!can) GTEST_SKIP() << "devices 0 and 1 cannot access each other's memory";
  check_ring_handoff(0, 1, 2);
  CUDA_OK(cudaSetDevice(0));
}

// encode -> signal and wait -> decode each captured into a CUDA graph (two kernel nodes each) and replayed with new
// input, the consumer's graph launched first each time; the flag is reset between replays, since a captured call
// replays its value.
TEST(CudaHandoff, GraphCaptureOfEncodeSignalAndWaitDecode) {
  SZ_SKIP_WITHOUT_GPU();
  const uint64_t n = 5 * 4096 + 321;
  Bf16Call c;
  ASSERT_NO_FATAL_FAILURE(make_bf16_call(n, &c));
  const sz_params& p = c.p;
  const sz_codebook& cb = c.cb;
  const size_t bound = c.bound, ews = c.ews, dws = c.dws;
  DevBuf src(n * 2), slot(bound), out(n * 2), ework(ews, true), dwork(dws, true), fsize(8), st(4), flag(8, true);
  uint64_t* f = reinterpret_cast<uint64_t*>(flag.p);
  cudaStream_t ps, cs;
  CUDA_OK(cudaStreamCreateWithFlags(&ps, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  cudaGraph_t pg, cg;
  CUDA_OK(cudaStreamBeginCapture(ps, cudaStreamCaptureModeThreadLocal));
  ASSERT_EQ(sz_cuda_compress(src.p, n, SZ_DTYPE_BF16, &cb, &p, slot.p, bound, ework.p, ews, (uint64_t*)fsize.p,
                             nullptr, ps),
            SZ_OK);
  ASSERT_EQ(sz_cuda_signal(f, 1, ps), SZ_OK);
  CUDA_OK(cudaStreamEndCapture(ps, &pg));
  CUDA_OK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
  ASSERT_EQ(sz_cuda_wait(f, 1, cs), SZ_OK);
  ASSERT_EQ(sz_cuda_decompress(slot.p, bound, out.p, n * 2, dwork.p, dws, (int32_t*)st.p, nullptr, cs), SZ_OK);
  CUDA_OK(cudaStreamEndCapture(cs, &cg));
  size_t pn = 0, cn = 0;
  CUDA_OK(cudaGraphGetNodes(pg, nullptr, &pn));
  CUDA_OK(cudaGraphGetNodes(cg, nullptr, &cn));
  EXPECT_EQ(pn, 2u) << "encode and signal: one kernel each";
  EXPECT_EQ(cn, 2u) << "wait and decode: one kernel each";
  cudaGraphExec_t pe, ce;
  CUDA_OK(cudaGraphInstantiate(&pe, pg, 0));
  CUDA_OK(cudaGraphInstantiate(&ce, cg, 0));
  for (int replay = 0; replay < 3; ++replay) {
    unsigned center = 0;
    const std::vector<uint8_t> data = test_values(SZ_DTYPE_BF16, n, 700 + replay, &center);
    CUDA_OK(cudaMemcpy(src.p, data.data(), data.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(slot.p, 0xA5, bound));
    CUDA_OK(cudaMemset(out.p, 0x5A, n * 2));
    CUDA_OK(cudaMemset(flag.p, 0, 8));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaGraphLaunch(ce, cs));
    CUDA_OK(cudaGraphLaunch(pe, ps));
    CUDA_OK(cudaStreamSynchronize(ps));
    CUDA_OK(cudaStreamSynchronize(cs));
    int32_t status = -1;
    CUDA_OK(cudaMemcpy(&status, st.p, 4, cudaMemcpyDeviceToHost));
    ASSERT_EQ(status, SZ_OK) << "replay " << replay;
    std::vector<uint8_t> back(n * 2);
    CUDA_OK(cudaMemcpy(back.data(), out.p, back.size(), cudaMemcpyDeviceToHost));
    ASSERT_TRUE(back == data) << "replay " << replay;
  }
  cudaGraphExecDestroy(pe);
  cudaGraphExecDestroy(ce);
  cudaGraphDestroy(pg);
  cudaGraphDestroy(cg);
  cudaStreamDestroy(ps);
  cudaStreamDestroy(cs);
}

}  // namespace
