// chunk_hash.cuh — the chunk checksum of FORMAT.md §4.6 (H32 = low 32 bits of XXH3-64) on the device, hashed
// by one warp, from a chunk in global memory (contiguous or paged) or staged in shared memory. Shared by the
// encoder and the decoder.
#pragma once

#include "cuda/codec.cuh"
#include "cuda/xxh3.cuh"

namespace splitzip {
namespace cuda {

template <int W, bool PAGED>
__device__ __noinline__ uint32_t chunk_hash(const Values<W, PAGED>& vals, uint64_t first, uint64_t len) {
  const ByteFetch<W, PAGED> f{vals, first * (uint64_t)(W / 8)};
  return (uint32_t)xxh3::xxh3_64_warp(f, (size_t)len);
}

// Reads bytes of a chunk staged in shared memory, for the warp hash.
struct SmemFetch {
  const uint8_t* p;
  __device__ __forceinline__ uint8_t byte(uint64_t o) const { return p[o]; }
  __device__ __forceinline__ uint64_t word(uint64_t o) const {
    if ((o & 7) == 0) return *reinterpret_cast<const uint64_t*>(p + o);
    return layout::load_u64(p + o);
  }
};
inline __device__ __noinline__ uint32_t stage_hash(const uint8_t* stage, uint64_t len) {
  return (uint32_t)xxh3::xxh3_64_warp(SmemFetch{stage}, (size_t)len);
}

// The whole CTA hashes a chunk staged in shared memory (xxh3_64_cta): all threads call it and get the checksum. Out
// of line, so that the hash's registers do not add to those of the kernels' main loops.
inline __device__ __noinline__ uint32_t cta_hash(const uint8_t* buf, uint32_t len, uint64_t* scratch) {
  return (uint32_t)xxh3::xxh3_64_cta<kThreads>(buf, len, scratch);
}

}  // namespace cuda
}  // namespace splitzip
