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
// That is the general kernel; below it, the tile kernels of chunk size 4096 (v6) and the warp-per-chunk BF16
// kernel (v7), which launch_typed picks first where they apply (bench/NOTES.md has why each exists).
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

// ---- the pipelined encoder of chunk size 4096 (chunk_log2 = 12, the default) --------------------------------------
// Tiles of kTile chunks (16 KiB of input for every dtype) are dealt out statically, tile t = blockIdx.x + j * grid,
// and the kernel is launched cooperatively so every CTA is resident and a look-back never waits on a CTA that has
// not started. The input of tile j + 1 is copied into shared memory (cp.async) while tile j is encoded from shared
// memory, so the loads of the next tile are always in flight; the look-back runs over kThreads predecessors at a
// time (one state word per thread), so even when all CTAs publish at the same moment it ends within two round trips.
// Per tile: encode each chunk from shared memory (rest fields straight to the rest section; codes, positions and
// escape exponents into the chunk's record in shared memory; raw exponents re-read from shared memory when the chunk
// falls back), publish the tile's size, hash the chunks (whole CTA), look back, publish the inclusive prefix, and
// copy the records out. The bytes written are the same as the general kernel's (and the CPU reference's).
constexpr uint32_t kFastLog2 = 12;
constexpr uint32_t kFastValues = 1u << kFastLog2;
constexpr uint32_t kFastGroups = kFastValues / 8;
static_assert(kFastGroups == (uint32_t)kRoundGroups, "one round of the CTA is one chunk");

template <int W>
constexpr int fast_tile_chunks() { return W == 32 ? 1 : (W == 16 ? 2 : 4); }
template <int W>
constexpr uint32_t fast_stage_bytes() { return fast_tile_chunks<W>() * kFastValues * (W / 8) + 32; }
template <int DT>
constexpr uint32_t fast_record_bytes() { return kFastGroups * Traits<DT>::E; }
constexpr int kDepth = 2;  // tiles in shared memory: the one being encoded and the next (3 measured slower)
template <int DT>
constexpr size_t fast_smem_bytes() {
  return (size_t)kDepth * fast_stage_bytes<Traits<DT>::W>() +
         2 * (size_t)fast_tile_chunks<Traits<DT>::W>() * fast_record_bytes<DT>() +
         8 * xxh3::cta_scratch_words<kThreads>();
}

// Exclusive prefix of tile t's size over tiles 0..t-1 (t >= 1). first_word: this thread's word of the first window
// (tile t - 1 - threadIdx.x, or an inclusive 0 before tile 0), read by the caller whenever it liked: a state word only
// moves from unpublished to aggregate to inclusive, and any of them is a correct reading. Every thread reads one
// predecessor's state word once, without waiting: if the nearest inclusive word is nearer than the nearest unpublished one, the walk ends
// there; otherwise the aggregates up to the unpublished tile are taken, one thread waits for that tile to publish,
// and the walk goes on from it. So a tile waits only on the predecessors whose sizes it needs, in order, never on
// a slower CTA further back. All threads call it and get the prefix.
__device__ __forceinline__ unsigned long long cta_look_back(volatile unsigned long long* state, uint64_t t,
                                                            unsigned long long first_word, uint32_t* s_ball,
                                                            unsigned long long* s_red) {
  const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
  __shared__ unsigned long long s_word;
  unsigned long long prefix = 0;
  long long end = (long long)t - 1;  // the nearest tile not yet summed
  bool first = true;
  for (;;) {
    const long long idx = end - (long long)tid;
    unsigned long long w = kFlagInclusive;  // before tile 0: an inclusive prefix of 0
    if (first) w = first_word;  // the caller's early read of the first window (words only ever move forward)
    else if (idx >= 0) w = state[idx];
    first = false;
    const unsigned inc = __ballot_sync(0xFFFFFFFFu, (w >> 62) == 2);
    const unsigned none = __ballot_sync(0xFFFFFFFFu, (w >> 62) == 0);
    if (lane == 0) {
      s_ball[warp] = inc;
      s_ball[kThreads / 32 + warp] = none;
    }
    __syncthreads();
    unsigned stop_inc = kThreads, stop_none = kThreads;
    for (int i = kThreads / 32 - 1; i >= 0; --i) {
      if (s_ball[i]) stop_inc = 32 * i + (unsigned)(__ffs(s_ball[i]) - 1);
      if (s_ball[kThreads / 32 + i]) stop_none = 32 * i + (unsigned)(__ffs(s_ball[kThreads / 32 + i]) - 1);
    }
    if (stop_inc < stop_none) {
      prefix += block_sum_u64(tid <= stop_inc ? (w & kValueMask) : 0ull, s_red);
      return prefix;
    }
    // Aggregates of the tiles before the first unpublished one (all of the window when every word is published).
    prefix += block_sum_u64(tid < stop_none ? (w & kValueMask) : 0ull, s_red);
    if (stop_none == (unsigned)kThreads) {
      end -= kThreads;
      continue;
    }
    end -= (long long)stop_none;  // tile `end` is unpublished: wait for it, then take it like any other word
    if (tid == 0) {
      unsigned long long v;
      do {
        v = state[end];
      } while ((v >> 62) == 0);
      s_word = v;
    }
    __syncthreads();
    const unsigned long long v = s_word;
    __syncthreads();
    prefix += v & kValueMask;
    if ((v >> 62) == 2) return prefix;
    --end;
  }
}

template <int DT, bool PAGED>
__device__ __forceinline__ void encode_issue(const EncodeArgs& a, uint8_t* ring, uint64_t j, uint64_t n_tiles) {
  constexpr int WB = Traits<DT>::W / 8;
  constexpr uint32_t kTileBytes = fast_tile_chunks<Traits<DT>::W>() * kFastValues * WB;
  const uint64_t t = blockIdx.x + j * gridDim.x;
  if (t < n_tiles) {
    uint8_t* slot = ring + (j % kDepth) * fast_stage_bytes<Traits<DT>::W>();
    const uint64_t o = t * kTileBytes, all = a.n * WB;
    const uint32_t len = (uint32_t)(all - o < kTileBytes ? all - o : kTileBytes);
    if constexpr (PAGED) {
      stage_pages_async(slot, a.pages, a.page_values * WB, o, len);
    } else {
      stage_async(slot, a.src + o, len, a.src, a.src + all);
    }
  }
  __pipeline_commit();
}

// K > 0: the code width as a compile-time constant (BF16), for the packed-form path of full groups.
template <int DT, bool PAGED, int K>
__global__ void __launch_bounds__(kThreads, 4) encode_fast_kernel(const __grid_constant__ EncodeArgs a) {
  using T = Traits<DT>;
  constexpr int WB = T::W / 8;
  constexpr int kTile = fast_tile_chunks<T::W>();
  constexpr uint32_t kStage = fast_stage_bytes<T::W>();
  constexpr uint32_t kRec = fast_record_bytes<DT>();
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* const ring = smem;
  uint8_t* const recs = smem + kDepth * kStage;
  uint64_t* const hscratch = reinterpret_cast<uint64_t*>(recs + 2 * kTile * kRec);
  __shared__ uint8_t s_table[256];
  __shared__ uint32_t s_warp[2 * (kThreads / 32)];
  __shared__ unsigned long long s_red[kThreads / 32];
  __shared__ uint32_t s_size[2][kTile], s_raw[2][kTile], s_hash[2][kTile];

  const unsigned tid = threadIdx.x;
  for (unsigned i = tid; i < 256; i += kThreads) s_table[i] = a.table[i];
  const uint32_t k = a.code_bits;
  const bool checksums = (a.flags & layout::kFlagChecksums) != 0;
  volatile unsigned long long* state = a.tile_state + 1;
  const uint64_t n_tiles = (a.n_chunks + kTile - 1) / kTile;
  const uint64_t grid = gridDim.x;
  const uint32_t shift = PAGED ? 0u : (uint32_t)((uintptr_t)a.src & 15u);

  for (int d = 0; d + 1 < kDepth; ++d) encode_issue<DT, PAGED>(a, ring, (uint64_t)d, n_tiles);
  // Iteration j encodes tile j (records into buffer j & 1, size published at once) and then finishes tile j - 1:
  // its look-back (first window read before tile j's work, so the round trip hides behind it, and the predecessors
  // have had a whole tile's time to publish), inclusive prefix, record copy-out. A slow CTA thus delays the others
  // by at most its lag beyond one tile, and no CTA idles on a look-back while it has input to encode.
  for (uint64_t j = 0;; ++j) {
    const uint64_t t = blockIdx.x + j * grid;
    const bool cur = t < n_tiles;
    if (!cur && j == 0) break;
    if (cur) __pipeline_wait_prior(kDepth - 2);
    __syncthreads();  // tile j is in shared memory; the input slot of j - 1 and records of j - 2 are free
    const uint64_t tp = t - grid;  // the tile to finish (j > 0)
    unsigned long long first_word = kFlagInclusive;
    if (j > 0 && tp > 0) {
      const long long idx = (long long)tp - 1 - (long long)tid;
      if (idx >= 0) first_word = state[idx];
    }
    const int buf = (int)(j & 1);
    uint8_t* const recs_cur = recs + buf * kTile * kRec;
    if (cur) {
    encode_issue<DT, PAGED>(a, ring, j + kDepth - 1, n_tiles);
    const uint8_t* in = ring + (j % kDepth) * kStage + shift;
    const uint64_t c0 = t * kTile;
    const int nci = (int)(a.n_chunks - c0 < (uint64_t)kTile ? a.n_chunks - c0 : (uint64_t)kTile);

    // ---- encode the chunks of the tile from shared memory ----
#pragma unroll 1
    for (int ci = 0; ci < nci; ++ci) {
      const uint64_t first = (c0 + ci) * kFastValues;
      const uint32_t L = (uint32_t)(a.n - first < kFastValues ? a.n - first : kFastValues);
      const uint32_t Gn = (L + 7) / 8, G = Gn * k;
      const uint8_t* cin = in + (size_t)ci * kFastValues * WB;
      uint8_t* rec = recs_cur + ci * kRec;
      uint8_t* rest_out = a.dst + a.rest_off + (first / 8) * T::R;
      uint32_t esc[kGroupsPerThread];
#pragma unroll
      for (int q = 0; q < kGroupsPerThread; ++q) {
        const uint32_t gl = q * kThreads + tid;
        esc[q] = 0;
        if (gl >= Gn) continue;
        const uint32_t v = L - 8 * gl < 8 ? L - 8 * gl : 8;
        if constexpr (DT == 1 && K > 0) {
          if (v == 8 && ((uintptr_t)(cin + gl * 16) & 15) == 0) {  // packed form: two values per word
            const uint4 qv = *reinterpret_cast<const uint4*>(cin + gl * 16);
            const uint32_t r0 = __byte_perm(bf16_rest2(qv.x), bf16_rest2(qv.y), 0x6420u);
            const uint32_t r1 = __byte_perm(bf16_rest2(qv.z), bf16_rest2(qv.w), 0x6420u);
            const uint32_t e0 = __byte_perm(bf16_exp2(qv.x), bf16_exp2(qv.y), 0x6420u);
            const uint32_t e1 = __byte_perm(bf16_exp2(qv.z), bf16_exp2(qv.w), 0x6420u);
            uint32_t codes = 0, m = 0;
#pragma unroll
            for (int jj = 0; jj < 8; ++jj) {
              const uint32_t tc = s_table[((jj < 4 ? e0 : e1) >> (8 * (jj & 3))) & 0xFFu];
              m |= (uint32_t)(tc == 0xFFu) << jj;
              codes |= (tc == 0xFFu ? 0u : tc) << (jj * K);
            }
            esc[q] = m;
#pragma unroll
            for (int b = 0; b < K; ++b) rec[gl * K + b] = (uint8_t)(codes >> (8 * b));
            uint8_t* ro = rest_out + (uint64_t)gl * 8;
            if (((uintptr_t)ro & 7) == 0) {
              __stcs(reinterpret_cast<uint2*>(ro), make_uint2(r0, r1));
            } else {
              Packed<8> rp;
              rp.w[0] = r0;
              rp.w[1] = r1;
              store_packed<8>(ro, rp);
            }
            continue;
          }
        }
        uint32_t x[8], r[8], codes = 0;
        load_group_at<T::W, false>(cin + gl * T::W, v, x);
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
          const bool real = (unsigned)jj < v;
          r[jj] = rest_of<DT>(x[jj]);  // padding values read as 0
          const uint32_t tc = s_table[exp_of<DT>(x[jj])];
          const bool is_esc = real && tc == 0xFFu;
          esc[q] |= (uint32_t)is_esc << jj;
          codes |= ((real && !is_esc) ? tc : 0u) << (jj * k);
        }
        for (uint32_t b = 0; b < k; ++b) rec[gl * k + b] = (uint8_t)(codes >> (8 * b));
        store_packed<T::R>(rest_out + (uint64_t)gl * T::R, pack8<T::R>(r));
      }
      uint32_t total;
      const uint32_t excl = block_exclusive_scan((uint32_t)__popc(esc[0]) | ((uint32_t)__popc(esc[1]) << 16), s_warp,
                                                 &total);
      const uint32_t X = (total & 0xFFFFu) + (total >> 16);
      const uint32_t raw_size = Gn * T::E, coded_size = G + 3 * X;
      const bool raw = coded_size > raw_size;
      if (!raw) {
#pragma unroll
        for (int q = 0; q < kGroupsPerThread; ++q) {
          uint32_t idx = ((excl >> (16 * q)) & 0xFFFFu) + (q ? (total & 0xFFFFu) : 0u);
          const uint32_t gl = q * kThreads + tid;
          uint32_t m = esc[q];
          while (m) {
            const int jj = __ffs(m) - 1;
            m &= m - 1;
            const uint32_t pos = gl * 8 + jj;
            uint32_t val = 0;
            for (int b = 0; b < WB; ++b) val |= (uint32_t)cin[pos * WB + b] << (8 * b);
            rec[G + 2 * idx] = (uint8_t)pos;
            rec[G + 2 * idx + 1] = (uint8_t)(pos >> 8);
            rec[G + 2 * X + idx] = (uint8_t)exp_of<DT>(val);
            ++idx;
          }
        }
      } else {
#pragma unroll
        for (int q = 0; q < kGroupsPerThread; ++q) {
          const uint32_t gl = q * kThreads + tid;
          if (gl >= Gn) continue;
          const uint32_t v = L - 8 * gl < 8 ? L - 8 * gl : 8;
          uint32_t x[8], e[8];
          load_group_at<T::W, false>(cin + gl * T::W, v, x);
#pragma unroll
          for (int jj = 0; jj < 8; ++jj) e[jj] = exp_of<DT>(x[jj]);  // padding values read as 0
          const Packed<T::E> p = pack8<T::E>(e);
#pragma unroll
          for (int b = 0; b < T::E; ++b) rec[gl * T::E + b] = packed_byte<T::E>(p, b);
        }
      }
      if (tid == 0) {
        s_size[buf][ci] = raw ? raw_size : coded_size;
        s_raw[buf][ci] = raw;
      }
    }
    __syncthreads();  // records and sizes complete

    // ---- publish, hash ----
    uint32_t tile_size = 0;
    for (int ci = 0; ci < nci; ++ci) tile_size += s_size[buf][ci];
    if (tid == 0) state[t] = (t == 0 ? kFlagInclusive : kFlagAggregate) | tile_size;
    if (checksums) {
#pragma unroll 1
      for (int ci = 0; ci < nci; ++ci) {
        const uint64_t first = (c0 + ci) * kFastValues;
        const uint32_t L = (uint32_t)(a.n - first < kFastValues ? a.n - first : kFastValues);
        const uint32_t h = cta_hash(in + (size_t)ci * kFastValues * WB, L * WB, hscratch);
        if (tid == 0) s_hash[buf][ci] = h;
      }
    }
    }  // cur

    // ---- finish tile j - 1: look back, records, index entries, checksums, header ----
    if (j > 0) {
      const int pb = buf ^ 1;
      const uint64_t c0 = tp * kTile;
      const int nci = (int)(a.n_chunks - c0 < (uint64_t)kTile ? a.n_chunks - c0 : (uint64_t)kTile);
      uint32_t tile_size = 0;
      for (int ci = 0; ci < nci; ++ci) tile_size += s_size[pb][ci];
      unsigned long long prefix = 0;
      if (tp > 0) {
        prefix = cta_look_back(state, tp, first_word, s_warp, s_red);
        if (tid == 0) state[tp] = kFlagInclusive | (prefix + tile_size);
      }
#pragma unroll 1
      for (int ci = 0; ci < nci; ++ci) {
        const uint64_t c = c0 + ci;
        const uint32_t size = s_size[pb][ci];
        copy_out(a.dst + a.exp_off + prefix, recs + pb * kTile * kRec + ci * kRec, size);
        if (tid == 0) {
          const uint64_t entry = (prefix + size) | ((uint64_t)(s_raw[pb][ci] ? layout::kModeRaw : layout::kModeCoded)
                                                    << layout::kIndexModeShift);
          layout::store_u64(a.dst + a.index_off + 8 * c, entry);
          if (checksums) layout::store_u32(a.dst + a.checksum_off + 4 * c, s_hash[pb][ci]);
          if (c == a.n_chunks - 1) {
            write_header(a, prefix + size);
            *a.frame_size = a.exp_off + prefix + size;
          }
        }
        prefix += size;
      }
    }
    if (!cur) break;
  }
  __pipeline_wait_prior(0);  // no copy may still land in shared memory when the CTA exits
}

// ---- the warp-per-chunk BF16 encoder (chunk 4096, no checksums, contiguous input) --------------------------------
// The common case of KV transfer, built for the fewest instructions per value (bench/NOTES.md v7): each warp takes
// a whole chunk from the counter and encodes it in 4 rounds of 1024 values, lane l taking the 32 consecutive values
// 1024 r + 32 l .. + 31 (four 16-byte loads). Exponent -> code is one shared-memory load per value from a table per
// slot j of the group that holds code << (k j) and, for an escape, bit 24 + j (k <= 3; k = 4 keeps the flags in a
// second word), so summing a group's 8 entries packs its codes and its escape mask at once. Rest fields are written
// straight to the rest section, codes and escapes into the warp's record in shared memory (escape order from a warp
// scan per round); then the warp publishes its record size, looks back over its predecessors (32 at a time) and
// copies the record out with 16-byte stores. No CTA barrier anywhere after the table set-up. A chunk that falls
// back to raw exponents re-reads its input (rare by construction). The next round's input is loaded during each round.
constexpr int kWarpEncWarps = 8;
// A warp's record area: a coded record never exceeds the raw one (4096 bytes for BF16, §4.7), so codes (G bytes),
// positions (2 per escape) and exponents (1 per escape) of every coded chunk fit: positions at G, exponents at
// G + 2 cap rounded up to 4, cap = the most escapes a coded chunk can have; slack for warp_copy_out's reads.
constexpr uint32_t kWarpEncRec = 4096 + 64;
constexpr uint32_t kWarpEncStage = 2048;  // the round's input, for the escapes' exponents
static_assert(kWarpEncRec % 16 == 0, "each warp's area stays 16-byte aligned");

template <int K>
struct WarpEntry {
  using type = uint32_t;
  static constexpr uint32_t kBytes = 4;
};
template <>
struct WarpEntry<4> {
  using type = uint2;
  static constexpr uint32_t kBytes = 8;
};

template <int K>
constexpr size_t warp_enc_smem() {
  return 8 * 256 * WarpEntry<K>::kBytes + (size_t)kWarpEncWarps * (kWarpEncRec + kWarpEncStage);
}

// Copies len bytes from shared memory s (4-byte aligned, readable up to 4 bytes past len) to global g at any
// alignment: the head up to a 16-byte boundary and the tail by bytes, one per lane; the body by 16-byte stores,
// each assembled from 5 shared words with funnel shifts. All lanes of the warp call it.
__device__ __forceinline__ void warp_copy_out(uint8_t* g, const uint8_t* s, uint32_t len, unsigned lane) {
  uint32_t head = (uint32_t)((16u - ((uintptr_t)g & 15u)) & 15u);
  if (head > len) head = len;
  if (lane < head) g[lane] = s[lane];
  const uint32_t body = (len - head) >> 4;
  const uint32_t sh = (head & 3u) * 8u;
  const uint32_t* sw = reinterpret_cast<const uint32_t*>(s + (head & ~3u));
  uint4* gb = reinterpret_cast<uint4*>(g + head);
  for (uint32_t b = lane; b < body; b += 32) {
    const uint32_t* p = sw + 4 * b;
    const uint32_t w0 = p[0], w1 = p[1], w2 = p[2], w3 = p[3], w4 = p[4];
    gb[b] = make_uint4(__funnelshift_r(w0, w1, sh), __funnelshift_r(w1, w2, sh), __funnelshift_r(w2, w3, sh),
                       __funnelshift_r(w3, w4, sh));
  }
  const uint32_t done = head + 16 * body;
  if (done + lane < len) g[done + lane] = s[done + lane];
}

// Exclusive prefix of chunk c's record size over chunks 0..c-1, by the whole warp: lane i reads chunk c-1-i's
// state word once; the walk stops at the nearest inclusive word if no unpublished word is nearer, else it takes the
// aggregates up to the unpublished one and reads again from there (spinning only on words it needs).
// State words are read and written relaxed at GPU scope: each carries its flag and value in one 64-bit word and
// nothing else is ordered by it (a volatile access would be system scope).
__device__ __forceinline__ unsigned long long ld_state(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_state(unsigned long long* p, unsigned long long v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ unsigned long long warp_look_back(const unsigned long long* state, uint64_t c,
                                                             unsigned lane) {
  unsigned long long prefix = 0;
  long long end = (long long)c - 1;
  for (;;) {
    const long long idx = end - (long long)lane;
    const unsigned long long w = idx >= 0 ? ld_state(state + idx) : kFlagInclusive;
    const unsigned inc = __ballot_sync(0xFFFFFFFFu, (w >> 62) == 2);
    const unsigned none = __ballot_sync(0xFFFFFFFFu, (w >> 62) == 0);
    const unsigned stop_inc = inc ? (unsigned)(__ffs(inc) - 1) : 32u;
    const unsigned stop_none = none ? (unsigned)(__ffs(none) - 1) : 32u;
    const unsigned take = stop_inc < stop_none ? stop_inc + 1 : stop_none;  // lanes [0, take) are summed
    unsigned long long part = lane < take ? (w & kValueMask) : 0ull;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xFFFFFFFFu, part, o);
    prefix += part;
    if (stop_inc < stop_none) return prefix;
    end -= (long long)take;
    if (stop_none < 32) __nanosleep(64);  // a predecessor has not published yet
  }
}

// Rest fields of the 8 values of a group (one 16-byte load) as 8 bytes.
__device__ __forceinline__ uint2 bf16_rest8(const uint4 q) {
  const uint32_t l0 = __byte_perm(q.x, q.y, 0x6420), h0 = __byte_perm(q.x, q.y, 0x7531);
  const uint32_t l1 = __byte_perm(q.z, q.w, 0x6420), h1 = __byte_perm(q.z, q.w, 0x7531);
  return make_uint2((l0 & 0x7F7F7F7Fu) | (h0 & 0x80808080u), (l1 & 0x7F7F7F7Fu) | (h1 & 0x80808080u));
}

// Sum of the 8 slot-table entries of a group: codes packed (§3) in the low 8k bits, escape mask above (k <= 3: bits
// 24..31; k = 4: the second word).
template <int K>
__device__ __forceinline__ typename WarpEntry<K>::type bf16_codes8(const uint4 q, const uint8_t* tab) {
  using E = typename WarpEntry<K>::type;
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
  if constexpr (K < 4) {
    uint32_t acc = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t lo = (w[i] >> 5) & 0x3FCu, hi = (w[i] >> 21) & 0x3FCu;
      acc += *reinterpret_cast<const uint32_t*>(tab + (2 * i) * 1024 + lo) +
             *reinterpret_cast<const uint32_t*>(tab + (2 * i + 1) * 1024 + hi);
    }
    return acc;
  } else {
    E acc = make_uint2(0, 0);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t lo = (w[i] >> 4) & 0x7F8u, hi = (w[i] >> 20) & 0x7F8u;
      const uint2 a = *reinterpret_cast<const uint2*>(tab + (2 * i) * 2048 + lo);
      const uint2 b = *reinterpret_cast<const uint2*>(tab + (2 * i + 1) * 2048 + hi);
      acc.x += a.x + b.x;
      acc.y += a.y + b.y;
    }
    return acc;
  }
}
template <int K>
__device__ __forceinline__ uint32_t entry_codes(uint32_t e) { return e & (K == 3 ? 0xFFFFFFu : (1u << (8 * K)) - 1u); }
template <int K>
__device__ __forceinline__ uint32_t entry_codes(uint2 e) { return e.x; }
template <int K>
__device__ __forceinline__ uint32_t entry_esc(uint32_t e) { return e >> 24; }
template <int K>
__device__ __forceinline__ uint32_t entry_esc(uint2 e) { return e.y; }

// Stores the codes of 4 consecutive groups (4k bytes) at s (4-byte aligned; 16-byte aligned for k = 4).
template <int K>
__device__ __forceinline__ void store_codes4(uint8_t* s, const uint32_t c[4]) {
  if constexpr (K == 4) {
    *reinterpret_cast<uint4*>(s) = make_uint4(c[0], c[1], c[2], c[3]);
  } else if constexpr (K == 3) {
    uint32_t* w = reinterpret_cast<uint32_t*>(s);
    w[0] = __byte_perm(c[0], c[1], 0x4210);
    w[1] = __byte_perm(c[1], c[2], 0x5421);
    w[2] = __byte_perm(c[2], c[3], 0x6542);
  } else if constexpr (K == 2) {
    *reinterpret_cast<uint2*>(s) = make_uint2(__byte_perm(c[0], c[1], 0x5410), __byte_perm(c[2], c[3], 0x5410));
  } else {
    *reinterpret_cast<uint32_t*>(s) =
        __byte_perm(__byte_perm(c[0], c[1], 0x0040), __byte_perm(c[2], c[3], 0x0040), 0x5410);
  }
}

// The 4 uint4 of the 32 values of a lane in a round, or zeros where they are not all inside the chunk.
__device__ __forceinline__ void warp_enc_load(const uint4* in, uint32_t v0, uint32_t L, uint4 q[4]) {
  if (v0 + 32 <= L) {
#pragma unroll
    for (int i = 0; i < 4; ++i) q[i] = __ldg(in + v0 / 8 + i);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) q[i] = make_uint4(0, 0, 0, 0);
  }
}

template <int K>
__global__ void __launch_bounds__(kWarpEncWarps * 32, 3) encode_warp_kernel(const __grid_constant__ EncodeArgs a) {
  using Entry = typename WarpEntry<K>::type;
  constexpr uint32_t kEB = WarpEntry<K>::kBytes;
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* const tab = smem;  // 8 slots x 256 exponents x kEB
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  uint8_t* const rec = smem + 8 * 256 * kEB + warp * (kWarpEncRec + kWarpEncStage);
  uint8_t* const stage = rec + kWarpEncRec;

  for (unsigned i = threadIdx.x; i < 8 * 256; i += blockDim.x) {
    const unsigned j = i >> 8, e = i & 255u;
    const uint32_t t = a.table[e];
    if constexpr (K < 4) {
      *reinterpret_cast<uint32_t*>(tab + 4 * i) = t == 0xFFu ? 1u << (24 + j) : t << (K * j);
    } else {
      *reinterpret_cast<uint2*>(tab + 8 * i) = t == 0xFFu ? make_uint2(0u, 1u << j) : make_uint2(t << (4 * j), 0u);
    }
  }
  __syncthreads();

  unsigned long long* state = a.tile_state + 1;
  const uint16_t* src16 = reinterpret_cast<const uint16_t*>(a.src);
  const bool rest16 = (((uintptr_t)(a.dst + a.rest_off)) & 15u) == 0;
  for (;;) {
    uint64_t c = 0;
    if (lane == 0) c = atomicAdd(a.tile_state, 1ull);
    c = __shfl_sync(0xFFFFFFFFu, c, 0);
    if (c >= a.n_chunks) break;
    const uint64_t first = c * 4096;
    const uint32_t L = (uint32_t)(a.n - first < 4096 ? a.n - first : 4096);
    const uint32_t Gn = (L + 7) / 8, G = Gn * K;
    const uint32_t cap = Gn * (8 - K) / 3;  // most escapes of a coded record (§4.7)
    uint8_t* const sexp = rec + ((G + 2 * cap + 3) & ~3u);  // 4-byte aligned for warp_copy_out
    const uint4* in = reinterpret_cast<const uint4*>(a.src + 2 * first);
    uint8_t* const rest_out = a.dst + a.rest_off + first;
    uint32_t X = 0;

    uint4 q[4];
    warp_enc_load(in, 32 * lane, L, q);
#pragma unroll 1
    for (uint32_t r = 0; r < 4; ++r) {
      const uint32_t v0 = 1024 * r + 32 * lane;  // this lane's first value in the chunk
      const uint32_t g0 = v0 / 8;
      uint4 nq[4];
      warp_enc_load(in, v0 + 1024, r < 3 ? L : 0, nq);  // the next round's input, in flight during this one
      uint32_t codes[4], m = 0;
      if (v0 + 32 <= L) {
        uint2 rs[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          *reinterpret_cast<uint4*>(stage + stage_piece(4 * lane + i)) = q[i];
          const Entry e = bf16_codes8<K>(q[i], tab);
          codes[i] = entry_codes<K>(e);
          m |= entry_esc<K>(e) << (8 * i);
          rs[i] = bf16_rest8(q[i]);
        }
        if (rest16) {
          uint4* o = reinterpret_cast<uint4*>(rest_out + v0);
          o[0] = make_uint4(rs[0].x, rs[0].y, rs[1].x, rs[1].y);
          o[1] = make_uint4(rs[2].x, rs[2].y, rs[3].x, rs[3].y);
        } else {
          uint2* o = reinterpret_cast<uint2*>(rest_out + v0);
#pragma unroll
          for (int i = 0; i < 4; ++i) o[i] = rs[i];
        }
        store_codes4<K>(rec + g0 * K, codes);
      } else if (v0 < L) {  // the end of the last chunk: values past L read as 0 and are masked off
#pragma unroll 1
        for (int i = 0; i < 4; ++i) {
          const uint32_t vb = v0 + 8 * i;
          if (vb >= L) continue;
          const uint32_t nv = L - vb < 8 ? L - vb : 8;
          uint32_t x[4] = {0, 0, 0, 0};
#pragma unroll
          for (uint32_t j = 0; j < 8; ++j)
            if (j < nv) x[j / 2] |= (uint32_t)src16[first + vb + j] << (16 * (j & 1));
          const uint4 qq = make_uint4(x[0], x[1], x[2], x[3]);
          *reinterpret_cast<uint4*>(stage + stage_piece(4 * lane + i)) = qq;
          const Entry e = bf16_codes8<K>(qq, tab);
          const uint32_t keep = nv == 8 ? 0xFFFFFFFFu : (1u << (K * nv)) - 1u;
          const uint32_t cw = entry_codes<K>(e) & keep;
          m |= (entry_esc<K>(e) & ((1u << nv) - 1u)) << (8 * i);
          *reinterpret_cast<uint2*>(rest_out + vb) = bf16_rest8(qq);
          for (int b = 0; b < K; ++b) rec[(g0 + i) * K + b] = (uint8_t)(cw >> (8 * b));  // groups < Gn only
        }
      }
      // Escapes of the round, in position order: a warp scan of the lanes' counts. Past cap the chunk is raw.
      const uint32_t cnt = __popc(m);
      uint32_t incl = cnt;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const uint32_t o = __shfl_up_sync(0xFFFFFFFFu, incl, d);
        if (lane >= (unsigned)d) incl += o;
      }
      uint32_t idx = X + incl - cnt;
      while (m) {
        const uint32_t b = (uint32_t)(__ffs(m) - 1);
        m &= m - 1;
        if (idx < cap) {
          const uint32_t pos = v0 + b;
          rec[G + 2 * idx] = (uint8_t)pos;
          rec[G + 2 * idx + 1] = (uint8_t)(pos >> 8);
          const uint8_t* v = stage + stage_piece(4 * lane + b / 8) + 2 * (b & 7);  // value b of this lane
          sexp[idx] = (uint8_t)(*reinterpret_cast<const uint16_t*>(v) >> 7);
        }
        ++idx;
      }
      X += __shfl_sync(0xFFFFFFFFu, incl, 31);
#pragma unroll
      for (int i = 0; i < 4; ++i) q[i] = nq[i];
    }

    // ---- mode, size, publish, look back ----
    const uint32_t raw_size = Gn * 8;
    const bool raw = X > cap;  // same as G + 3 X > raw_size
    const uint32_t size = raw ? raw_size : G + 3 * X;
    if (lane == 0) st_state(state + c, (c == 0 ? kFlagInclusive : kFlagAggregate) | size);
    unsigned long long prefix = 0;
    if (c > 0) {
      prefix = warp_look_back(state, c, lane);
      if (lane == 0) st_state(state + c, kFlagInclusive | (prefix + size));
    }
    __syncwarp();  // the record in shared memory is complete

    // ---- record, index entry, header ----
    uint8_t* const out = a.dst + a.exp_off + prefix;
    if (raw) {
      for (uint32_t v = lane; v < raw_size; v += 32) out[v] = v < L ? (uint8_t)(src16[first + v] >> 7) : 0;
    } else {
      warp_copy_out(out, rec, G + 2 * X, lane);
      warp_copy_out(out + G + 2 * X, sexp, X, lane);
    }
    if (lane == 0) {
      const uint64_t entry = (prefix + size) | ((uint64_t)(raw ? layout::kModeRaw : layout::kModeCoded)
                                                << layout::kIndexModeShift);
      *reinterpret_cast<unsigned long long*>(a.dst + a.index_off + 8 * c) = entry;
      if (c == a.n_chunks - 1) {
        write_header(a, prefix + size);
        *a.frame_size = a.exp_off + prefix + size;
      }
    }
    __syncwarp();  // the record area is reused by the next chunk
  }
}

template <class Kernel>
sz_status grid_for(Kernel kernel, size_t smem, uint64_t work, uint64_t* grid) {
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
  *grid = (uint64_t)sms * (uint64_t)per_sm;
  if (*grid > work) *grid = work;
  return SZ_OK;
}

// The fast kernel, launched cooperatively (all CTAs resident: its static tile order needs it). Returns
// SZ_ERROR_NOT_SUPPORTED, with nothing enqueued, where a cooperative launch is refused; the caller falls back.
template <int DT, bool PAGED, int K>
sz_status launch_fast(const EncodeArgs& a, cudaStream_t stream) {
  auto kernel = encode_fast_kernel<DT, PAGED, K>;
  const size_t smem = fast_smem_bytes<DT>();
  const uint64_t tiles = (a.n_chunks + fast_tile_chunks<Traits<DT>::W>() - 1) / fast_tile_chunks<Traits<DT>::W>();
  uint64_t grid = 0;
  if (grid_for(kernel, smem, tiles, &grid) != SZ_OK) {
    (void)cudaGetLastError();
    return SZ_ERROR_NOT_SUPPORTED;
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)grid);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (cudaMemsetAsync(a.tile_state, 0, 8 * (tiles + 1), stream) != cudaSuccess) return SZ_ERROR_CUDA;
  if (cudaLaunchKernelEx(&cfg, kernel, a) != cudaSuccess) {
    (void)cudaGetLastError();
    return SZ_ERROR_NOT_SUPPORTED;
  }
  return SZ_OK;
}

// The warp encoder (BF16, chunk 4096, no checksums, contiguous 16-byte-aligned input, 8-byte-aligned frame).
template <int K>
sz_status launch_warp(const EncodeArgs& a, cudaStream_t stream) {
  auto kernel = encode_warp_kernel<K>;
  const size_t smem = warp_enc_smem<K>();
  uint64_t grid = 0;
  const sz_status s = grid_for(kernel, smem, (a.n_chunks + kWarpEncWarps - 1) / kWarpEncWarps, &grid);
  if (s != SZ_OK) return s;
  if (cudaMemsetAsync(a.tile_state, 0, 8 * (a.n_chunks + 1), stream) != cudaSuccess) return SZ_ERROR_CUDA;
  kernel<<<(unsigned)grid, kWarpEncWarps * 32, smem, stream>>>(a);
  return cudaGetLastError() == cudaSuccess ? SZ_OK : SZ_ERROR_CUDA;
}

bool warp_encodes(const EncodeArgs& a) {
  return a.dtype == 1 && !a.pages && a.chunk_log2 == kFastLog2 && (a.flags & layout::kFlagChecksums) == 0 &&
         ((uintptr_t)a.src & 15u) == 0 && ((uintptr_t)a.dst & 7u) == 0 && tune_kernel() == KernelChoice::kAuto;
}

template <int DT, bool PAGED>
sz_status launch_typed(const EncodeArgs& a, cudaStream_t stream) {
  if (DT == 1 && warp_encodes(a)) {
    switch (a.code_bits) {
      case 1: return launch_warp<1>(a, stream);
      case 2: return launch_warp<2>(a, stream);
      case 3: return launch_warp<3>(a, stream);
      default: return launch_warp<4>(a, stream);
    }
  }
  if (a.chunk_log2 == kFastLog2 && tune_kernel() != KernelChoice::kGeneral) {
    sz_status s;
    if constexpr (DT == 1) {
      switch (a.code_bits) {
        case 1: s = launch_fast<DT, PAGED, 1>(a, stream); break;
        case 2: s = launch_fast<DT, PAGED, 2>(a, stream); break;
        case 3: s = launch_fast<DT, PAGED, 3>(a, stream); break;
        default: s = launch_fast<DT, PAGED, 4>(a, stream); break;
      }
    } else {
      s = launch_fast<DT, PAGED, 0>(a, stream);
    }
    if (s != SZ_ERROR_NOT_SUPPORTED) return s;
  }
  auto kernel = encode_kernel<DT, PAGED>;
  const size_t smem = ((a.raw_rec_max + 15) & ~15u) + ((a.esc_cap_max + 15) & ~15u) + a.stage_bytes;
  uint64_t grid = 0;
  const sz_status s = grid_for(kernel, smem, a.n_chunks, &grid);
  if (s != SZ_OK) return s;
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
