// test_xxh3_cta.cu — the CTA-wide device XXH3 (xxh3_64_cta in src/cuda/xxh3.cuh) against libxxhash, on the GPU.
//
// Every CTA copies one buffer into shared memory at a chosen misalignment, hashes it, then at once overwrites the
// buffer with other bytes and the scratch with garbage and hashes again: the second hash catches a missing final
// barrier (a slow warp still reading) and any use of stale scratch. Every thread's result is checked. Lengths: every
// length 0..4096 (offset len % 8), the round boundaries, and random lengths up to 200000, for CTAs of 256 threads
// (the codec's) and of 32, 96 and 1024. Skips when no CUDA device is visible; run it also under
// compute-sanitizer --tool racecheck.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <stdint.h>
#include <stdio.h>

#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cuda/xxh3.cuh"
#include "test_util.h"

namespace {

namespace x = splitzip::xxh3;

// One CTA's job: len bytes from data + src[0] (first hash) and data + src[1] (second), at buf offset off.
struct Job {
  uint32_t len;
  uint32_t off;
  uint64_t src[2];
};

template <int kThreads>
__global__ void __launch_bounds__(kThreads) hash_jobs(const uint8_t* data, const Job* jobs, unsigned long long* out) {
  extern __shared__ __align__(16) uint8_t smem[];
  uint64_t* scratch = reinterpret_cast<uint64_t*>(smem);
  const Job job = jobs[blockIdx.x];
  uint8_t* buf = smem + 8 * x::cta_scratch_words<kThreads>() + job.off;
  for (int call = 0; call < 2; ++call) {
    for (int w = threadIdx.x; w < x::cta_scratch_words<kThreads>(); w += kThreads)
      scratch[w] = 0xDEADBEEF00000000ull + (uint64_t)(call * 4096 + w);
    for (uint32_t o = threadIdx.x; o < job.len; o += kThreads) buf[o] = data[job.src[call] + o];
    __syncthreads();
    const uint64_t h = x::xxh3_64_cta<kThreads>(buf, job.len, scratch);
    out[((uint64_t)blockIdx.x * 2 + call) * kThreads + threadIdx.x] = h;
  }
}

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

using sztest::random_bytes;

template <int kThreads>
void run_jobs(const std::vector<uint8_t>& data, const std::vector<Job>& jobs) {
  uint32_t max_len = 0;
  for (const Job& j : jobs) max_len = j.len > max_len ? j.len : max_len;
  const size_t smem = 8 * (size_t)x::cta_scratch_words<kThreads>() + 8 + max_len;
  CUDA_OK(cudaFuncSetAttribute(hash_jobs<kThreads>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  uint8_t* d_data = nullptr;
  Job* d_jobs = nullptr;
  unsigned long long* d_out = nullptr;
  const size_t out_n = jobs.size() * 2 * kThreads;
  CUDA_OK(cudaMalloc(&d_data, data.size()));
  CUDA_OK(cudaMalloc(&d_jobs, jobs.size() * sizeof(Job)));
  CUDA_OK(cudaMalloc(&d_out, out_n * 8));
  CUDA_OK(cudaMemcpy(d_data, data.data(), data.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_jobs, jobs.data(), jobs.size() * sizeof(Job), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d_out, 0, out_n * 8));
  hash_jobs<kThreads><<<(unsigned)jobs.size(), kThreads, smem>>>(d_data, d_jobs, d_out);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<unsigned long long> out(out_n);
  CUDA_OK(cudaMemcpy(out.data(), d_out, out_n * 8, cudaMemcpyDeviceToHost));
  cudaFree(d_data);
  cudaFree(d_jobs);
  cudaFree(d_out);
  for (size_t b = 0; b < jobs.size(); ++b) {
    for (int call = 0; call < 2; ++call) {
      const uint64_t want = XXH3_64bits(data.data() + jobs[b].src[call], jobs[b].len);
      for (int t = 0; t < kThreads; ++t)
        ASSERT_EQ(out[(b * 2 + call) * kThreads + t], want)
            << kThreads << " threads, len " << jobs[b].len << " offset " << jobs[b].off << " call " << call
            << " thread " << t;
    }
  }
}

std::vector<Job> short_jobs(size_t data_size) {
  std::vector<Job> jobs;
  for (uint32_t len = 0; len <= 4096; ++len)
    jobs.push_back(Job{len, len % 8, {(uint64_t)(len * 7) % (data_size - 4096), (uint64_t)(len * 13 + 1) % (data_size - 4096)}});
  return jobs;
}

std::vector<Job> long_jobs(size_t data_size, uint32_t max_len) {
  std::vector<uint32_t> lens;
  for (uint32_t r : {1u, 2u, 3u, 16u, 17u, 18u, 32u, 33u, 64u, 65u, 128u, 190u})
    for (int d : {-65, -64, -63, -1, 0, 1, 2, 63, 64, 65}) lens.push_back((uint32_t)((int)(1024 * r) + d));
  uint64_t s = 5;
  for (int k = 0; k < 200; ++k) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    lens.push_back(241 + (uint32_t)((s >> 20) % (max_len - 241)));
  }
  std::vector<Job> jobs;
  for (size_t k = 0; k < lens.size(); ++k) {
    const uint64_t room = data_size - lens[k];
    jobs.push_back(Job{lens[k], (uint32_t)(k % 8), {(k * 4099) % room, (k * 8191 + 3) % room}});
  }
  return jobs;
}

constexpr uint32_t kMaxLong = 200000;  // fits the 227 KiB of shared memory of an H100/H200 CTA with the scratch

// Cycles (clock64 of thread 0, last of 4 repetitions) for one CTA of 256 threads to hash len bytes of shared memory:
// with the warp form (one warp hashes, the others wait at the barrier that follows, as in the codec) and with the
// CTA form. Printed for the record; the test only checks that both give libxxhash's hash.
struct SmemBytes {
  const uint8_t* p;
  __device__ uint8_t byte(uint64_t o) const { return p[o]; }
  __device__ uint64_t word(uint64_t o) const {
    if ((o & 7) == 0) return *reinterpret_cast<const uint64_t*>(p + o);
    return splitzip::layout::load_u64(p + o);
  }
};

__global__ void __launch_bounds__(256) time_forms(const uint8_t* data, uint32_t len, long long* cycles,
                                                  unsigned long long* hashes) {
  extern __shared__ __align__(16) uint8_t smem[];
  uint64_t* scratch = reinterpret_cast<uint64_t*>(smem);
  uint8_t* buf = smem + 8 * x::cta_scratch_words<256>();
  __shared__ unsigned long long s_warp_hash;
  for (uint32_t o = threadIdx.x; o < len; o += 256) buf[o] = data[o];
  __syncthreads();
  for (int rep = 0; rep < 4; ++rep) {
    const long long t0 = clock64();
    if (threadIdx.x < 32) {
      const uint64_t h = x::xxh3_64_warp(SmemBytes{buf}, len);
      if (threadIdx.x == 0) s_warp_hash = h;
    }
    __syncthreads();
    const long long t1 = clock64();
    const uint64_t h = x::xxh3_64_cta<256>(buf, len, scratch);
    const long long t2 = clock64();
    if (threadIdx.x == 0 && rep == 3) {
      cycles[0] = t1 - t0;
      cycles[1] = t2 - t1;
      hashes[0] = s_warp_hash;
      hashes[1] = h;
    }
  }
}

TEST(CudaXxh3CtaGpu, CyclesWarpFormVersusCtaForm) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  const std::vector<uint8_t> data = random_bytes(65536, 6);
  uint8_t* d_data = nullptr;
  long long* d_cycles = nullptr;
  unsigned long long* d_hashes = nullptr;
  CUDA_OK(cudaMalloc(&d_data, data.size()));
  CUDA_OK(cudaMalloc(&d_cycles, 16));
  CUDA_OK(cudaMalloc(&d_hashes, 16));
  CUDA_OK(cudaMemcpy(d_data, data.data(), data.size(), cudaMemcpyHostToDevice));
  const size_t smem = 8 * (size_t)x::cta_scratch_words<256>() + data.size();
  CUDA_OK(cudaFuncSetAttribute(time_forms, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  for (uint32_t len : {1024u, 4096u, 8192u, 16384u, 65536u}) {
    time_forms<<<1, 256, smem>>>(d_data, len, d_cycles, d_hashes);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    long long cycles[2];
    unsigned long long hashes[2];
    CUDA_OK(cudaMemcpy(cycles, d_cycles, 16, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hashes, d_hashes, 16, cudaMemcpyDeviceToHost));
    const uint64_t want = XXH3_64bits(data.data(), len);
    EXPECT_EQ(hashes[0], want) << "warp form, len " << len;
    EXPECT_EQ(hashes[1], want) << "CTA form, len " << len;
    printf("xxh3 %6u bytes, 256 threads: warp form %6lld cycles, CTA form %6lld cycles\n", len, cycles[0], cycles[1]);
  }
  cudaFree(d_data);
  cudaFree(d_cycles);
  cudaFree(d_hashes);
}

// One short and one long test per CTA size, so that a slow tool (racecheck) can be pointed at one of them.
#define SZ_XXH3_CTA_TESTS(T)                                                      \
  TEST(CudaXxh3CtaGpu, EveryLengthUpTo4096Threads##T) {                           \
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";                    \
    const std::vector<uint8_t> data = random_bytes(1 << 16, 3);                   \
    run_jobs<T>(data, short_jobs(data.size()));                                   \
  }                                                                               \
  TEST(CudaXxh3CtaGpu, LongLengthsThreads##T) {                                   \
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";                    \
    const std::vector<uint8_t> data = random_bytes(1 << 19, 4);                   \
    run_jobs<T>(data, long_jobs(data.size(), kMaxLong));                          \
  }
SZ_XXH3_CTA_TESTS(256)
SZ_XXH3_CTA_TESTS(32)
SZ_XXH3_CTA_TESTS(96)
SZ_XXH3_CTA_TESTS(1024)

}  // namespace
