// encode.cu — the one-pass GPU encoder of format v1 (docs/FORMAT.md §4).
//
// A persistent grid; each CTA takes the next chunk from a counter in the workspace (so chunks start in order and
// the look-back below always waits on CTAs that are already running), and for its chunk:
//   1. loads the values once (16-byte loads where aligned), writes the packed rest fields straight to their fixed
//      place in the rest section, builds the k-bit codes and the escape lists in shared memory (escape order from a
//      CTA-wide scan, so positions come out increasing);
//   2. chooses coded or raw (§4.7), publishes its record size, and finds where its record starts in the exponent
//      section by a decoupled look-back over the predecessors' published sizes / inclusive prefixes;
//   3. one warp hashes the chunk (XXH3, 8 lanes per accumulator group) when checksums are asked for;
//   4. writes its record, index entry and checksum; the CTA of the last chunk writes the header and the frame size.
// Nothing is read twice except the values of a chunk that falls back to raw exponents (rare by construction).
#include <cuda_runtime.h>

#include "cuda/codec.cuh"
#include "cuda/kernels.h"
#include "cuda/chunk_hash.cuh"
#include "cuda/xxh3.cuh"

namespace splitzip {
namespace cuda {
namespace {

constexpr unsigned long long kFlagAggregate = 1ull << 62;
constexpr unsigned long long kFlagInclusive = 2ull << 62;
constexpr unsigned long long kValueMask = (1ull << 62) - 1;

// Copies len bytes from shared memory to global memory at any alignment: byte stores up to a 4-byte boundary,
// then 4-byte stores, then the tail. All threads of the CTA call it.
__device__ __forceinline__ void copy_out(uint8_t* g, const uint8_t* s, uint32_t len) {
  const uint32_t mis = (uint32_t)((uintptr_t)g & 3u);
  uint32_t head = (4u - mis) & 3u;
  if (head > len) head = len;
  const uint32_t words = (len - head) / 4;
  for (uint32_t i = threadIdx.x; i < head; i += kThreads) g[i] = s[i];
  for (uint32_t w = threadIdx.x; w < words; w += kThreads) {
    const uint32_t o = head + 4 * w;
    const uint32_t v = (uint32_t)s[o] | ((uint32_t)s[o + 1] << 8) | ((uint32_t)s[o + 2] << 16) |
                       ((uint32_t)s[o + 3] << 24);
    *reinterpret_cast<uint32_t*>(g + o) = v;
  }
  for (uint32_t i = head + 4 * words + threadIdx.x; i < len; i += kThreads) g[i] = s[i];
}

__device__ __noinline__ void write_header(const EncodeArgs& a, uint64_t exp_size) {
  uint8_t h[64];
  for (int i = 0; i < 64; ++i) h[i] = 0;
  layout::store_u32(h + layout::kOffMagic, layout::kFrameMagic);
  h[layout::kOffVersion] = layout::kFormatVersion;
  h[layout::kOffDtype] = (uint8_t)a.dtype;
  h[layout::kOffCodeBits] = (uint8_t)a.code_bits;
  h[layout::kOffChunkLog2] = (uint8_t)a.chunk_log2;
  layout::store_u32(h + layout::kOffFlags, a.flags);
  h[layout::kOffCodebookCount] = (uint8_t)a.count;
  layout::store_u64(h + layout::kOffNValues, a.n);
  layout::store_u64(h + layout::kOffExpSectionSize, exp_size);
  for (unsigned i = 0; i < a.count; ++i) h[layout::kOffCodebook + i] = a.codebook[i];
  layout::store_u32(h + layout::kOffHeaderChecksum, xxh3::h32(h, layout::kHeaderChecksummed));
  for (int i = 0; i < 64; ++i) a.dst[i] = h[i];
}

// n == 0: a frame of just the header.
__global__ void encode_empty_kernel(EncodeArgs a) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    write_header(a, 0);
    *a.frame_size = layout::kHeaderSize;
  }
}


template <int DT, bool PAGED>
__global__ void __launch_bounds__(kThreads, 4) encode_kernel(const __grid_constant__ EncodeArgs a) {
  using T = Traits<DT>;
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ uint8_t s_table[256];
  __shared__ uint32_t s_warp[kThreads / 32];
  __shared__ unsigned long long s_chunk;
  __shared__ unsigned long long s_prefix;
  __shared__ uint32_t s_hash;

  uint8_t* rec = smem;                                  // the chunk's record, built in place
  uint8_t* esc_exp = smem + ((a.raw_rec_max + 15) & ~15u);  // escape exponents until X is known
  uint8_t* stage = esc_exp + ((a.esc_cap_max + 15) & ~15u);  // the chunk's input, for the hash (a.stage_bytes)

  const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
  for (unsigned i = tid; i < 256; i += kThreads) s_table[i] = a.table[i];

  const Values<T::W, PAGED> vals{const_cast<uint8_t*>(a.src), const_cast<void* const*>(a.pages), a.page_values,
                                 a.page_values * (uint64_t)(T::W / 8)};
  const uint64_t S = 1ull << a.chunk_log2;
  const uint32_t k = a.code_bits;
  const bool checksums = (a.flags & layout::kFlagChecksums) != 0;
  volatile unsigned long long* state = a.tile_state + 1;

  // Chunk ids come from a counter at the start of each chunk, so a CTA's look-back only waits on chunks that other
  // CTAs are already working on. (Taking the next id one chunk ahead made a chunk's predecessor wait for a whole
  // chunk of its CTA's earlier work before it could publish: v2 in bench/NOTES.md, 2.3x slower.)
  for (;;) {
    if (tid == 0) s_chunk = atomicAdd(a.tile_state, 1ull);
    __syncthreads();
    const uint64_t c = s_chunk;
    if (c >= a.n_chunks) break;

    const uint64_t first = c * S;
    const uint64_t L = (a.n - first < S) ? (a.n - first) : S;
    const uint32_t Gn = (uint32_t)((L + 7) / 8);
    const uint32_t G = Gn * k;
    const uint32_t cap = Gn * (uint32_t)(T::E - (int)k) / 3;
    const uint64_t g0 = first / 8;
    const bool use_stage = checksums && L * (T::W / 8) <= a.stage_bytes;
    uint8_t* rest_out = a.dst + a.rest_off + g0 * T::R;

    // ---- 1. one pass over the values ----
    uint32_t running = 0;
    for (uint32_t base = 0; base < Gn; base += kRoundGroups) {
      uint32_t x[kGroupsPerThread][8];
      unsigned nv[kGroupsPerThread];
#pragma unroll
      for (int q = 0; q < kGroupsPerThread; ++q) {
        const uint32_t gl = base + q * kThreads + tid;
        nv[q] = 0;
        if (gl < Gn) {
          const uint64_t left = L - 8ull * gl;
          nv[q] = left < 8 ? (unsigned)left : 8u;
          vals.load_group(g0 + gl, nv[q], x[q]);
        }
      }
      uint32_t esc[kGroupsPerThread];
#pragma unroll
      for (int q = 0; q < kGroupsPerThread; ++q) {
        const uint32_t gl = base + q * kThreads + tid;
        esc[q] = 0;
        if (nv[q] == 0) continue;
        uint32_t r[8];
        uint32_t codes = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const bool real = (unsigned)j < nv[q];
          const uint32_t v = real ? x[q][j] : 0u;
          r[j] = rest_of<DT>(v);
          const uint32_t t = s_table[exp_of<DT>(v)];
          const bool is_esc = real && t == 0xFFu;
          esc[q] |= (uint32_t)is_esc << j;
          codes |= ((real && !is_esc) ? t : 0u) << (j * k);
        }
        for (uint32_t b = 0; b < k; ++b) rec[gl * k + b] = (uint8_t)(codes >> (8 * b));
        if (use_stage) {
          if (nv[q] == 8) {
            store_group_at<T::W, false>(stage + gl * T::W, 8, x[q]);
          } else {
            for (unsigned j = 0; j < nv[q]; ++j)
              for (int b = 0; b < T::W / 8; ++b) stage[gl * T::W + j * (T::W / 8) + b] = (uint8_t)(x[q][j] >> (8 * b));
          }
        }
        store_packed<T::R>(rest_out + (uint64_t)gl * T::R, pack8<T::R>(r));
      }
      uint32_t packed = 0;
#pragma unroll
      for (int q = 0; q < kGroupsPerThread; ++q) packed |= (uint32_t)__popc(esc[q]) << (16 * q);
      uint32_t total;
      const uint32_t excl = block_exclusive_scan(packed, s_warp, &total);
      uint32_t before = running;
#pragma unroll
      for (int q = 0; q < kGroupsPerThread; ++q) {
        uint32_t idx = before + ((excl >> (16 * q)) & 0xFFFFu);
        const uint32_t gl = base + q * kThreads + tid;
        uint32_t m = esc[q];
        while (m) {
          const int j = __ffs(m) - 1;
          m &= m - 1;
          if (idx < cap) {
            const uint32_t pos = gl * 8 + j;
            rec[G + 2 * idx] = (uint8_t)pos;
            rec[G + 2 * idx + 1] = (uint8_t)(pos >> 8);
            esc_exp[idx] = (uint8_t)exp_of<DT>(x[q][j]);
          }
          ++idx;
        }
        before += (total >> (16 * q)) & 0xFFFFu;
      }
      running = before;
    }

    // ---- 2. mode, size, publish ----
    const uint32_t X = running;
    const uint32_t raw_size = Gn * T::E;
    const uint32_t coded_size = G + 3 * X;  // X <= 8 * Gn, no overflow
    const bool raw = coded_size > raw_size;
    const uint32_t size = raw ? raw_size : coded_size;
    if (tid == 0) state[c] = (c == 0 ? kFlagInclusive : kFlagAggregate) | size;
    __syncthreads();  // codes, positions and escape exponents are in shared memory

    if (!raw) {
      for (uint32_t i = tid; i < X; i += kThreads) rec[G + 2 * X + i] = esc_exp[i];
    } else {
      for (uint32_t gl = tid; gl < Gn; gl += kThreads) {
        const uint64_t left = L - 8ull * gl;
        const unsigned v = left < 8 ? (unsigned)left : 8u;
        uint32_t xx[8], ee[8];
        vals.load_group(g0 + gl, v, xx);
#pragma unroll
        for (int j = 0; j < 8; ++j) ee[j] = (unsigned)j < v ? exp_of<DT>(xx[j]) : 0u;
        const Packed<T::E> p = pack8<T::E>(ee);
#pragma unroll
        for (int b = 0; b < T::E; ++b) rec[gl * T::E + b] = packed_byte<T::E>(p, b);
      }
    }

    // ---- look-back (warp 0) and checksum (warp 1) ----
    if (warp == 0) {
      unsigned long long excl_prefix = 0;
      if (c > 0) {
        long long end = (long long)c - 1;
        for (;;) {
          const long long idx = end - (long long)lane;
          unsigned long long w = kFlagInclusive;
          if (idx >= 0) {
            do {
              w = state[idx];
            } while ((w >> 62) == 0);
          }
          const unsigned inc = __ballot_sync(0xFFFFFFFFu, (w >> 62) == 2);
          const unsigned stop = inc ? (unsigned)(__ffs(inc) - 1) : 31u;
          unsigned long long part = lane <= stop ? (w & kValueMask) : 0ull;
#pragma unroll
          for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xFFFFFFFFu, part, o);
          excl_prefix += part;
          if (inc) break;
          end -= 32;
        }
        if (lane == 0) state[c] = kFlagInclusive | (excl_prefix + size);
      }
      if (lane == 0) s_prefix = excl_prefix;
    } else if (warp == 1 && checksums) {
      const uint32_t h = use_stage ? stage_hash(stage, L * (T::W / 8)) : chunk_hash<T::W, PAGED>(vals, first, L * (T::W / 8));
      if (lane == 0) s_hash = h;
    }
    __syncthreads();

    // ---- 4. record, index entry, checksum, header ----
    const uint64_t prefix = s_prefix;
    copy_out(a.dst + a.exp_off + prefix, rec, size);
    if (tid == 0) {
      const uint64_t entry = (prefix + size) | ((uint64_t)(raw ? layout::kModeRaw : layout::kModeCoded)
                                                << layout::kIndexModeShift);
      layout::store_u64(a.dst + a.index_off + 8 * c, entry);
      if (checksums) layout::store_u32(a.dst + a.checksum_off + 4 * c, s_hash);
      if (c == a.n_chunks - 1) {
        write_header(a, prefix + size);
        *a.frame_size = a.exp_off + prefix + size;
      }
    }
    __syncthreads();  // shared memory is reused by the next chunk
  }
}

template <int DT, bool PAGED>
sz_status launch_typed(const EncodeArgs& a, cudaStream_t stream) {
  auto kernel = encode_kernel<DT, PAGED>;
  const size_t smem = ((a.raw_rec_max + 15) & ~15u) + ((a.esc_cap_max + 15) & ~15u) + a.stage_bytes;
  if (smem > 48 * 1024) {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
      return SZ_ERROR_CUDA;
  }
  int dev = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return SZ_ERROR_CUDA;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return SZ_ERROR_CUDA;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem) != cudaSuccess)
    return SZ_ERROR_CUDA;
  if (per_sm < 1) per_sm = 1;
  uint64_t grid = (uint64_t)sms * (uint64_t)per_sm;
  if (grid > a.n_chunks) grid = a.n_chunks;
  if (cudaMemsetAsync(a.tile_state, 0, 8 * (a.n_chunks + 1), stream) != cudaSuccess) return SZ_ERROR_CUDA;
  kernel<<<(unsigned)grid, kThreads, smem, stream>>>(a);
  return cudaGetLastError() == cudaSuccess ? SZ_OK : SZ_ERROR_CUDA;
}

template <bool PAGED>
sz_status launch_paged(const EncodeArgs& a, cudaStream_t stream) {
  switch (a.dtype) {
    case 1: return launch_typed<1, PAGED>(a, stream);
    case 2: return launch_typed<2, PAGED>(a, stream);
    case 3: return launch_typed<3, PAGED>(a, stream);
    case 4: return launch_typed<4, PAGED>(a, stream);
    case 5: return launch_typed<5, PAGED>(a, stream);
    default: return SZ_ERROR_INVALID_ARGUMENT;
  }
}

}  // namespace

sz_status launch_encode(const EncodeArgs& a, cudaStream_t stream) {
  if (a.n == 0) {
    encode_empty_kernel<<<1, 32, 0, stream>>>(a);
    return cudaGetLastError() == cudaSuccess ? SZ_OK : SZ_ERROR_CUDA;
  }
  return a.pages ? launch_paged<true>(a, stream) : launch_paged<false>(a, stream);
}

}  // namespace cuda
}  // namespace splitzip
