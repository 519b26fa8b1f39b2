// decode.cu — the one-pass GPU decoder of format v1 (docs/FORMAT.md §4).
//
// The host does not read the frame: a persistent grid is launched and every CTA parses and checks the header
// itself (§4.1, in the spec's order), then walks chunks c = blockIdx.x, + gridDim.x, ... For a chunk it checks the
// index entries and the record size (§4.3, §4.5), checks the escape lists, decodes the exponents of up to 4096
// values into shared memory (codes through the codebook, or raw fields), patches the escapes there, and joins
// exponent and rest fields into the output, written once with 16-byte stores where aligned. With the CHECKSUMS
// flag one warp hashes the chunk's output and compares. The first error found is stored into *status with an
// atomicCAS from SZ_OK; nothing outside [src, src + src_size) is read and nothing outside the output is written,
// whatever the frame says. Below the general per-chunk path: the tile decoder of chunk size 4096 (v6), and the
// warp-per-chunk BF16 decoder (v7, its own kernel launched after this one), which takes the chunks of a qualifying
// frame that warp_chunk_fast accepts; decode_kernel then decodes only the others.
#include <cuda_runtime.h>

#include "cuda/codec.cuh"
#include "cuda/kernels.h"
#include "cuda/chunk_hash.cuh"
#include "cuda/xxh3.cuh"

namespace splitzip {
namespace cuda {
namespace {

constexpr uint32_t kSegValues = kRoundGroups * 8;  // values decoded per step through shared memory

struct Header {
  uint32_t dtype, k, chunk_log2, flags, count;
  uint8_t codebook[16];
  uint64_t n, exp_size, n_chunks;
  uint64_t index_off, checksum_off, rest_off, exp_off;
};

__device__ __forceinline__ void report(int32_t* status, sz_status s) {
  atomicCAS(reinterpret_cast<int*>(status), (int)SZ_OK, (int)s);
}

// §4.1 steps 1-7, reading only [src, src + src_size).
__device__ __noinline__ sz_status parse_header(const uint8_t* src, size_t src_size, Header* h) {
  if (src_size < layout::kHeaderSize) return SZ_ERROR_SRC_TRUNCATED;
  uint8_t b[64];
  for (int i = 0; i < 64; ++i) b[i] = src[i];
  if (layout::load_u32(b) != layout::kFrameMagic) return SZ_ERROR_BAD_MAGIC;
  if (b[layout::kOffVersion] != layout::kFormatVersion) return SZ_ERROR_UNSUPPORTED_VERSION;
  if (xxh3::h32(b, layout::kHeaderChecksummed) != layout::load_u32(b + layout::kOffHeaderChecksum))
    return SZ_ERROR_CHECKSUM;
  const uint32_t dtype = b[layout::kOffDtype];
  if (!layout::dtype_known(dtype)) return SZ_ERROR_UNSUPPORTED_DTYPE;
  const layout::DtypeTraits t = layout::dtype_traits(dtype);
  h->dtype = dtype;
  h->k = b[layout::kOffCodeBits];
  h->chunk_log2 = b[layout::kOffChunkLog2];
  h->flags = layout::load_u32(b + layout::kOffFlags);
  h->count = b[layout::kOffCodebookCount];
  h->n = layout::load_u64(b + layout::kOffNValues);
  h->exp_size = layout::load_u64(b + layout::kOffExpSectionSize);
  if (h->k < 1 || h->k > 4 || h->k >= t.exponent_bits) return SZ_ERROR_CORRUPT;
  if (h->chunk_log2 < layout::kMinChunkLog2 || h->chunk_log2 > layout::kMaxChunkLog2) return SZ_ERROR_CORRUPT;
  if (h->flags & ~layout::kKnownFlags) return SZ_ERROR_CORRUPT;
  if (h->count < 1 || h->count > (1u << h->k)) return SZ_ERROR_CORRUPT;
  if (b[13] | b[14] | b[15]) return SZ_ERROR_CORRUPT;
  if (h->n >= layout::kMaxValues) return SZ_ERROR_CORRUPT;
  uint32_t seen[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (uint32_t i = 0; i < 16; ++i) {
    const uint32_t v = b[layout::kOffCodebook + i];
    h->codebook[i] = (uint8_t)v;
    if (i < h->count) {
      if (v >= (1u << t.exponent_bits)) return SZ_ERROR_CORRUPT;
      if (seen[v >> 5] & (1u << (v & 31))) return SZ_ERROR_CORRUPT;
      seen[v >> 5] |= 1u << (v & 31);
    } else if (v != 0) {
      return SZ_ERROR_CORRUPT;
    }
  }
  for (int i = 48; i < 60; ++i)
    if (b[i]) return SZ_ERROR_CORRUPT;
  const bool checksums = (h->flags & layout::kFlagChecksums) != 0;
  const layout::FrameOffsets o = layout::frame_offsets(h->n, h->chunk_log2, checksums, t, 0);
  h->n_chunks = layout::n_chunks(h->n, h->chunk_log2);
  h->index_off = o.index;
  h->checksum_off = o.checksums;
  h->rest_off = o.rest;
  h->exp_off = o.exponents;
  if (o.exponents > src_size || h->exp_size > src_size - o.exponents) return SZ_ERROR_SRC_TRUNCATED;
  return SZ_OK;
}


// The 8 exponent fields of group gl of a chunk record (raw fields, or codes through the codebook) with the checks
// of §3 / §4.5 / §4.7 on them and on the group's packed rest fields rp: padding fields zero, codes below the
// codebook size. v: real values in the group (1..8). Returns true when the group is bad.
template <int DT>
__device__ __forceinline__ bool group_exponents(const uint8_t* rec, uint32_t gl, bool raw, const Header& h, uint32_t v,
                                                const Packed<Traits<DT>::R>& rp, uint32_t ex[8]) {
  using T = Traits<DT>;
  const uint32_t k = h.k, code_mask = (1u << k) - 1u;
  bool bad = false;
  if (raw) {
    unpack8<T::E>(load_packed<T::E>(rec + (uint64_t)gl * T::E), ex);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if ((unsigned)j >= v && ex[j] != 0) bad = true;
  } else {
    uint32_t cw = 0;
    for (uint32_t b = 0; b < k; ++b) cw |= (uint32_t)rec[gl * k + b] << (8 * b);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t code = (cw >> (j * k)) & code_mask;
      if ((unsigned)j < v) {
        if (code >= h.count) bad = true;
        ex[j] = h.codebook[code & 15u];
      } else {
        if (code != 0) bad = true;
        ex[j] = 0;
      }
    }
  }
  if (v < 8) {  // padding rest fields must be zero (§3)
    uint32_t r[8];
    unpack8<T::R>(rp, r);
    for (unsigned j = v; j < 8; ++j)
      if (r[j] != 0) bad = true;
  }
  return bad;
}

// Escape i of a coded record (codes G bytes, then X u16 positions, then X exponents) against §4.5: positions strictly
// increasing and below L, exponents below 2^E and not in the codebook, and code 0 at the escape's position.
template <int DT>
__device__ __forceinline__ bool escape_bad(const uint8_t* rec, uint32_t G, uint32_t X, uint32_t i, uint32_t L,
                                           uint32_t k, const uint8_t* s_in_codebook) {
  const uint8_t* pos_list = rec + G;
  const uint32_t p = layout::load_u16(pos_list + 2 * i);
  const uint32_t e = rec[G + 2 * X + i];
  if (p >= L || (i > 0 && layout::load_u16(pos_list + 2 * (i - 1)) >= p)) return true;
  if (e >= (1u << Traits<DT>::E) || s_in_codebook[e]) return true;
  const uint32_t bit = p * k;
  uint32_t w = rec[bit >> 3];
  if ((bit & 7) + k > 8) w |= (uint32_t)rec[(bit >> 3) + 1] << 8;
  return ((w >> (bit & 7)) & ((1u << k) - 1u)) != 0;
}

constexpr uint32_t kStageBytes = 16384;  // chunks of up to 16 KiB are hashed from a copy in shared memory

struct ChunkShared {
  uint64_t begin;
  uint32_t X;
  uint32_t raw;
  int32_t err;
};

template <int DT, bool PAGED>
__device__ __noinline__ void decode_chunk(const DecodeArgs& a, const Header& h, uint64_t c, const uint8_t* s_in_codebook,
                             uint8_t* s_exp, uint8_t* s_stage, ChunkShared* s_chunk) {
  using T = Traits<DT>;
  const unsigned tid = threadIdx.x;
  const uint64_t S = 1ull << h.chunk_log2;
  const uint64_t first = c * S;
  const uint64_t L = (h.n - first < S) ? (h.n - first) : S;
  const uint32_t Gn = (uint32_t)((L + 7) / 8);
  const uint32_t k = h.k;
  const uint32_t G = Gn * k;
  const uint64_t g0 = first / 8;
  const bool stage = (h.flags & layout::kFlagChecksums) != 0 && L * (T::W / 8) <= kStageBytes;

  if (tid == 0) {
    int32_t err = SZ_OK;
    const uint64_t entry = layout::load_u64(a.src + h.index_off + 8 * c);
    const uint64_t mode = entry >> layout::kIndexModeShift;
    const uint64_t end = entry & layout::kIndexEndMask;
    const uint64_t begin = c ? (layout::load_u64(a.src + h.index_off + 8 * (c - 1)) & layout::kIndexEndMask) : 0;
    uint32_t X = 0;
    if (mode > layout::kModeRaw || end < begin || end > h.exp_size || (c == h.n_chunks - 1 && end != h.exp_size)) {
      err = SZ_ERROR_CORRUPT;
    } else {
      const uint64_t size = end - begin;
      if (mode == layout::kModeRaw) {
        if (size != (uint64_t)Gn * T::E) err = SZ_ERROR_CORRUPT;
      } else if (size < G || (size - G) % 3 != 0 || (size - G) / 3 > L) {
        err = SZ_ERROR_CORRUPT;
      } else {
        X = (uint32_t)((size - G) / 3);
      }
    }
    s_chunk->begin = begin;
    s_chunk->X = X;
    s_chunk->raw = mode == layout::kModeRaw;
    s_chunk->err = err;
  }
  __syncthreads();
  if (s_chunk->err != SZ_OK) {
    if (tid == 0) report(a.status, (sz_status)s_chunk->err);
    __syncthreads();
    return;
  }
  const uint8_t* rec = a.src + h.exp_off + s_chunk->begin;
  const uint32_t X = s_chunk->X;
  const bool raw = s_chunk->raw != 0;
  const uint8_t* pos_list = rec + G;
  const uint8_t* exp_list = rec + G + 2 * X;

  // Escape lists (§4.5): positions strictly increasing and < L, exponents not in the codebook and < 2^E, code 0.
  if (!raw && X > 0) {
    bool bad = false;
    for (uint32_t i = tid; i < X; i += kThreads) bad |= escape_bad<DT>(rec, G, X, i, (uint32_t)L, k, s_in_codebook);
    if (__syncthreads_or(bad)) {
      if (tid == 0) report(a.status, SZ_ERROR_CORRUPT);
      return;
    }
  }

  const Values<T::W, PAGED> out{a.dst, a.pages, a.page_values, a.page_values * (uint64_t)(T::W / 8)};
  const uint8_t* rest_in = a.src + h.rest_off + g0 * T::R;
  for (uint32_t seg = 0; seg < Gn; seg += kRoundGroups) {
    bool bad = false;
    Packed<T::R> rp[kGroupsPerThread];
    unsigned nv[kGroupsPerThread];
#pragma unroll
    for (int q = 0; q < kGroupsPerThread; ++q) {
      const uint32_t gl = seg + q * kThreads + tid;
      nv[q] = 0;
      if (gl >= Gn) continue;
      const uint64_t left = L - 8ull * gl;
      const unsigned v = left < 8 ? (unsigned)left : 8u;
      nv[q] = v;
      rp[q] = load_packed<T::R>(rest_in + (uint64_t)gl * T::R);
      uint32_t ex[8];
      bad |= group_exponents<DT>(rec, gl, raw, h, v, rp[q], ex);
      const uint32_t o = (gl - seg) * 8;
      *reinterpret_cast<uint2*>(s_exp + o) =
          make_uint2(ex[0] | (ex[1] << 8) | (ex[2] << 16) | (ex[3] << 24), ex[4] | (ex[5] << 8) | (ex[6] << 16) |
                                                                               (ex[7] << 24));
    }
    if (__syncthreads_or(bad)) {
      if (tid == 0) report(a.status, SZ_ERROR_CORRUPT);
      return;
    }
    if (!raw && X > 0) {
      const uint32_t lo = seg * 8, hi = lo + kSegValues;
      for (uint32_t i = tid; i < X; i += kThreads) {
        const uint32_t p = layout::load_u16(pos_list + 2 * i);
        if (p >= lo && p < hi) s_exp[p - lo] = exp_list[i];
      }
      __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < kGroupsPerThread; ++q) {
      const uint32_t gl = seg + q * kThreads + tid;
      if (nv[q] == 0) continue;
      const uint2 ew = *reinterpret_cast<const uint2*>(s_exp + (gl - seg) * 8);
      uint32_t r[8], x[8];
      unpack8<T::R>(rp[q], r);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const uint32_t e = ((j < 4 ? ew.x : ew.y) >> (8 * (j & 3))) & 0xFFu;
        x[j] = join<DT>(e, r[j]);
      }
      out.store_group(g0 + gl, nv[q], x);
      if (stage) {
        if (nv[q] == 8) {
          store_group_at<T::W, false>(s_stage + gl * T::W, 8, x);
        } else {
          for (unsigned j = 0; j < nv[q]; ++j)
            for (int b = 0; b < T::W / 8; ++b) s_stage[gl * T::W + j * (T::W / 8) + b] = (uint8_t)(x[j] >> (8 * b));
        }
      }
    }
    __syncthreads();  // s_exp is reused by the next step; output visible to the hash below
  }

  if (h.flags & layout::kFlagChecksums) {
    if (threadIdx.x < 32) {
      const uint64_t len = L * (T::W / 8);
      const uint32_t hv = stage ? stage_hash(s_stage, len) : chunk_hash<T::W, PAGED>(out, first, len);
      if (threadIdx.x == 0 && hv != layout::load_u32(a.src + h.checksum_off + 4 * c))
        report(a.status, SZ_ERROR_CHECKSUM);
    }
  }
}

// ---- the pipelined decoder of chunk size 4096 (chunk_log2 = 12, the default) --------------------------------------
// Chunks are dealt out statically (chunk blockIdx.x + j * grid). While chunk j is decoded from shared memory, the
// rest fields and records of the next D - 1 chunks are on their way into a ring of D shared-memory slots (cp.async),
// so every global load is issued well before it is needed and no chunk waits on a round trip. Index entries and
// checksums are read 32 chunks at a time, a batch ahead, by warp 0. The checks are those of decode_chunk (every
// check before any output of the chunk is written); the output is written once, from registers.
constexpr uint32_t kFastLog2 = 12;
constexpr uint32_t kFastValues = 1u << kFastLog2;
constexpr uint32_t kFastGroups = kFastValues / 8;
static_assert(kFastGroups == (uint32_t)kRoundGroups, "one round of the CTA is one chunk");
constexpr uint32_t kRingBytes = 33024;  // 4 BF16 / FP16 slots, 2 FP32 slots, 6 FP8 slots
constexpr int kMaxDepth = 6;
constexpr int kBatch = 32;              // index entries read at a time

// Dynamic shared memory of the decode kernel, used by both paths.
constexpr uint32_t kSmemRing = 0;
constexpr uint32_t kSmemExp = kSmemRing + kRingBytes;
constexpr uint32_t kSmemOut = kSmemExp + kSegValues;
constexpr uint32_t kSmemEnt = kSmemOut + kStageBytes;              // 2 batches x 32 chunks x 2 entries (u64)
constexpr uint32_t kSmemCks = kSmemEnt + 2 * kBatch * 2 * 8;       // 2 batches x 32 checksums (u32)
constexpr uint32_t kSmemHash = kSmemCks + 2 * kBatch * 4;          // xxh3_64_cta scratch
constexpr size_t kDecodeSmem = kSmemHash + 8 * (size_t)xxh3::cta_scratch_words<kThreads>();

struct SlotInfo {
  uint64_t c;
  uint32_t size, X, raw, cks, rest_at, rec_at;
  uint32_t big;  // a coded record larger than the slot (more escapes than a valid encoder writes): decode_chunk
  int32_t err;
};

__device__ __forceinline__ uint64_t ld_u64(const uint8_t* p) {
  if (((uintptr_t)p & 7) == 0) return *reinterpret_cast<const unsigned long long*>(p);
  return layout::load_u64(p);
}
__device__ __forceinline__ uint32_t ld_u32(const uint8_t* p) {
  if (((uintptr_t)p & 3) == 0) return *reinterpret_cast<const uint32_t*>(p);
  return layout::load_u32(p);
}

// Warp 0, lane i: the index entries (of chunks c - 1 and c) and the checksum of chunk c = blockIdx.x + j * grid for
// j = 32 B + i.
__device__ __forceinline__ void decode_load_batch(const DecodeArgs& a, const Header& h, uint64_t B,
                                                  unsigned long long* e0, unsigned long long* e1, uint32_t* ck) {
  const uint64_t c = blockIdx.x + (B * kBatch + (threadIdx.x & 31u)) * gridDim.x;
  *e0 = *e1 = 0;
  *ck = 0;
  if (c < h.n_chunks) {
    *e1 = ld_u64(a.src + h.index_off + 8 * c);
    if (c > 0) *e0 = ld_u64(a.src + h.index_off + 8 * (c - 1));
    if (h.flags & layout::kFlagChecksums) *ck = ld_u32(a.src + h.checksum_off + 4 * c);
  }
}
__device__ __forceinline__ void decode_store_batch(uint8_t* smem, uint64_t B, unsigned long long e0,
                                                   unsigned long long e1, uint32_t ck) {
  unsigned long long* s_ent = reinterpret_cast<unsigned long long*>(smem + kSmemEnt);
  uint32_t* s_cks = reinterpret_cast<uint32_t*>(smem + kSmemCks);
  const unsigned i = (unsigned)(B & 1) * kBatch + (threadIdx.x & 31u);
  s_ent[2 * i] = e0;
  s_ent[2 * i + 1] = e1;
  s_cks[i] = ck;
}

template <int DT>
struct FastSlot {
  static constexpr uint32_t kRestCap = (kFastGroups * Traits<DT>::R + 32 + 15) & ~15u;
  static constexpr uint32_t kRecCap = (kFastGroups * Traits<DT>::E + 32 + 15) & ~15u;
  static constexpr uint32_t kBytes = kRestCap + kRecCap;
  static constexpr int kDepth = (int)(kRingBytes / kBytes) < kMaxDepth ? (int)(kRingBytes / kBytes) : kMaxDepth;
  static_assert(kDepth >= 2, "at least one chunk in flight");
};

// Checks the index entries of chunk c = blockIdx.x + j * grid (§4.3, and the record size of §4.5 / §4.7), records
// what the decode step needs in s_slot[j % D], and copies the chunk's rest fields and record into slot j % D. All
// threads call it; it always commits a group (an empty one past the last chunk).
template <int DT>
__device__ __forceinline__ void decode_issue(const DecodeArgs& a, const Header& h, uint8_t* smem, SlotInfo* s_slot,
                                             uint64_t j) {
  using T = Traits<DT>;
  using S = FastSlot<DT>;
  const uint64_t c = blockIdx.x + j * gridDim.x;
  if (c < h.n_chunks) {
    const unsigned long long* s_ent = reinterpret_cast<const unsigned long long*>(smem + kSmemEnt);
    const uint32_t* s_cks = reinterpret_cast<const uint32_t*>(smem + kSmemCks);
    const unsigned i = (unsigned)((j / kBatch) & 1) * kBatch + (unsigned)(j % kBatch);
    const uint64_t e1 = s_ent[2 * i + 1];
    const uint64_t mode = e1 >> layout::kIndexModeShift, end = e1 & layout::kIndexEndMask;
    const uint64_t begin = c ? (s_ent[2 * i] & layout::kIndexEndMask) : 0;
    const uint64_t first = c * kFastValues;
    const uint32_t L = (uint32_t)(h.n - first < kFastValues ? h.n - first : kFastValues);
    const uint32_t Gn = (L + 7) / 8, G = Gn * h.k;
    int32_t err = SZ_OK;
    uint32_t X = 0, size = 0;
    if (mode > layout::kModeRaw || end < begin || end > h.exp_size || (c == h.n_chunks - 1 && end != h.exp_size)) {
      err = SZ_ERROR_CORRUPT;
    } else {
      const uint64_t sz = end - begin;
      if (mode == layout::kModeRaw) {
        if (sz != (uint64_t)Gn * T::E) err = SZ_ERROR_CORRUPT;
      } else if (sz < G || (sz - G) % 3 != 0 || (sz - G) / 3 > L) {
        err = SZ_ERROR_CORRUPT;
      } else {
        X = (uint32_t)((sz - G) / 3);
      }
      size = (uint32_t)sz;
    }
    uint8_t* slot = smem + kSmemRing + (j % S::kDepth) * S::kBytes;
    const uint8_t* rest_g = a.src + h.rest_off + first / 8 * T::R;
    const uint8_t* rec_g = a.src + h.exp_off + begin;
    const bool big = err == SZ_OK && size + 32 > S::kRecCap;
    stage_async(slot, rest_g, Gn * T::R, a.src, a.src + a.src_size);
    if (err == SZ_OK && !big) stage_async(slot + S::kRestCap, rec_g, size, a.src, a.src + a.src_size);
    if (threadIdx.x == 0) {
      SlotInfo& si = s_slot[j % S::kDepth];
      si.c = c;
      si.size = size;
      si.X = X;
      si.raw = mode == layout::kModeRaw;
      si.cks = s_cks[i];
      si.rest_at = (uint32_t)((uintptr_t)rest_g & 15u);
      si.rec_at = S::kRestCap + (uint32_t)((uintptr_t)rec_g & 15u);
      si.big = big;
      si.err = err;
    }
  }
  __pipeline_commit();
}

// K > 0: the frame's code width as a compile-time constant (BF16), for the packed-form paths of full groups.
template <int DT, bool PAGED, int K = 0>
__device__ __noinline__ void decode_fast(const DecodeArgs& a, const Header& h, const uint8_t* s_in_codebook,
                                         uint8_t* smem, SlotInfo* s_slot, ChunkShared* s_chunk) {
  using T = Traits<DT>;
  constexpr int WB = T::W / 8;
  constexpr uint32_t kSlot = FastSlot<DT>::kBytes;
  constexpr int D = FastSlot<DT>::kDepth;
  uint8_t* const ring = smem + kSmemRing;
  uint8_t* const s_exp = smem + kSmemExp;
  uint8_t* const s_out = smem + kSmemOut;
  uint64_t* const hscratch = reinterpret_cast<uint64_t*>(smem + kSmemHash);

  const unsigned tid = threadIdx.x, warp = tid >> 5;
  const uint64_t grid = gridDim.x;
  const bool checksums = (h.flags & layout::kFlagChecksums) != 0;
  const uint32_t k = h.k;
  const Values<T::W, PAGED> out{a.dst, a.pages, a.page_values, a.page_values * (uint64_t)WB};
  // Codebook and "code out of range" tables as four words each, for lut4.
  uint32_t cbw[4] = {0, 0, 0, 0}, badw[4] = {0, 0, 0, 0};
  if constexpr (K > 0) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      cbw[i / 4] |= (uint32_t)h.codebook[i] << (8 * (i % 4));
      badw[i / 4] |= (i >= (int)h.count ? 0xFFu : 0u) << (8 * (i % 4));
    }
  }
  const bool all_codes_used = h.count == (1u << k);

  if (warp == 0) {
    unsigned long long e0, e1;
    uint32_t ck;
    decode_load_batch(a, h, 0, &e0, &e1, &ck);
    decode_store_batch(smem, 0, e0, e1, ck);
    decode_load_batch(a, h, 1, &e0, &e1, &ck);
    decode_store_batch(smem, 1, e0, e1, ck);
  }
  __syncthreads();
  for (int d = 0; d + 1 < D; ++d) decode_issue<DT>(a, h, smem, s_slot, (uint64_t)d);

  for (uint64_t j = 0;; ++j) {
    const uint64_t c = blockIdx.x + j * grid;
    if (c >= h.n_chunks) break;
    __pipeline_wait_prior(D - 2);
    __syncthreads();  // chunk j is in its slot; slot (j - 1) % D and the scratch of chunk j - 1 are free
    const uint64_t jn = j + D - 1;
    const bool refill = warp == 0 && jn % kBatch == 0 && jn >= kBatch;
    unsigned long long ne0 = 0, ne1 = 0;
    uint32_t nck = 0;
    if (refill) decode_load_batch(a, h, jn / kBatch + 1, &ne0, &ne1, &nck);
    decode_issue<DT>(a, h, smem, s_slot, jn);

    const SlotInfo info = s_slot[j % D];
    if (info.err != SZ_OK) {
      if (tid == 0) report(a.status, (sz_status)info.err);
    } else if (info.big) {
      decode_chunk<DT, PAGED>(a, h, c, s_in_codebook, s_exp, s_out, s_chunk);
    } else {
      const uint8_t* slot = ring + (j % D) * kSlot;
      const uint8_t* rs = slot + info.rest_at;
      const uint8_t* rc = slot + info.rec_at;
      const uint64_t first = c * kFastValues;
      const uint32_t L = (uint32_t)(h.n - first < kFastValues ? h.n - first : kFastValues);
      const uint32_t Gn = (L + 7) / 8, G = Gn * k, X = info.X;
      const bool raw = info.raw != 0;
      bool bad = false;
      // Exponent fields of every group into s_exp, with the checks of §3 / §4.5 / §4.7.
#pragma unroll
      for (int q = 0; q < kGroupsPerThread; ++q) {
        const uint32_t gl = q * kThreads + tid;
        if (gl >= Gn) continue;
        const uint32_t v = L - 8 * gl < 8 ? L - 8 * gl : 8;
        if constexpr (K > 0) {
          if (!raw && v == 8) {  // packed form: 4 codes per table lookup
            uint32_t cw = 0;
#pragma unroll
            for (int b = 0; b < K; ++b) cw |= (uint32_t)rc[gl * K + b] << (8 * b);
            const uint32_t s0 = spread4<K>(cw), s1 = spread4<K>(cw >> (4 * K));
            if (!all_codes_used && (lut4<K>(badw, s0) | lut4<K>(badw, s1))) bad = true;
            *reinterpret_cast<uint2*>(s_exp + gl * 8) = make_uint2(lut4<K>(cbw, s0), lut4<K>(cbw, s1));
            continue;
          }
        }
        uint32_t ex[8];
        bad |= group_exponents<DT>(rc, gl, raw, h, v, load_packed<T::R>(rs + gl * T::R), ex);
        *reinterpret_cast<uint2*>(s_exp + gl * 8) =
            make_uint2(ex[0] | (ex[1] << 8) | (ex[2] << 16) | (ex[3] << 24),
                       ex[4] | (ex[5] << 8) | (ex[6] << 16) | (ex[7] << 24));
      }
      const uint8_t* pos_list = rc + G;
      const uint8_t* exp_list = rc + G + 2 * X;
      if (!raw) {
        for (uint32_t i = tid; i < X; i += kThreads) bad |= escape_bad<DT>(rc, G, X, i, L, k, s_in_codebook);
      }
      if (__syncthreads_or(bad)) {
        if (tid == 0) report(a.status, SZ_ERROR_CORRUPT);
      } else {
        if (!raw && X > 0) {
          for (uint32_t i = tid; i < X; i += kThreads) s_exp[layout::load_u16(pos_list + 2 * i)] = exp_list[i];
          __syncthreads();
        }
#pragma unroll
        for (int q = 0; q < kGroupsPerThread; ++q) {
          const uint32_t gl = q * kThreads + tid;
          if (gl >= Gn) continue;
          const uint32_t v = L - 8 * gl < 8 ? L - 8 * gl : 8;
          const uint2 ew = *reinterpret_cast<const uint2*>(s_exp + gl * 8);
          if constexpr (DT == 1) {
            if (v == 8) {  // packed form: two values per word
              const Packed<8> rp = load_packed<8>(rs + gl * 8);
              const uint4 q = make_uint4(bf16_join2(rp.w[0], ew.x, 0x5140u), bf16_join2(rp.w[0], ew.x, 0x7362u),
                                         bf16_join2(rp.w[1], ew.y, 0x5140u), bf16_join2(rp.w[1], ew.y, 0x7362u));
              uint8_t* d = PAGED ? nullptr : a.dst + (first / 8 + gl) * 16;
              if (!PAGED && ((uintptr_t)d & 15) == 0) {
                __stcs(reinterpret_cast<uint4*>(d), q);
              } else {
                const uint32_t w4[4] = {q.x, q.y, q.z, q.w};
                uint32_t x[8];
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                  x[2 * i] = w4[i] & 0xFFFFu;
                  x[2 * i + 1] = w4[i] >> 16;
                }
                out.store_group(first / 8 + gl, 8, x);
              }
              if (checksums) *reinterpret_cast<uint4*>(s_out + gl * 16) = q;
              continue;
            }
          }
          uint32_t r[8], x[8];
          unpack8<T::R>(load_packed<T::R>(rs + gl * T::R), r);
#pragma unroll
          for (int jj = 0; jj < 8; ++jj) {
            const uint32_t e = ((jj < 4 ? ew.x : ew.y) >> (8 * (jj & 3))) & 0xFFu;
            x[jj] = join<DT>(e, r[jj]);
          }
          out.store_group(first / 8 + gl, v, x);
          if (checksums) {
            if (v == 8) {
              store_group_at<T::W, false>(s_out + gl * T::W, 8, x);
            } else {
              for (unsigned jj = 0; jj < v; ++jj)
                for (int b = 0; b < WB; ++b) s_out[gl * T::W + jj * WB + b] = (uint8_t)(x[jj] >> (8 * b));
            }
          }
        }
        if (checksums) {
          __syncthreads();
          const uint32_t hv = cta_hash(s_out, L * WB, hscratch);
          if (tid == 0 && hv != info.cks) report(a.status, SZ_ERROR_CHECKSUM);
        }
      }
    }
    if (refill) decode_store_batch(smem, jn / kBatch + 1, ne0, ne1, nck);
  }
  __pipeline_wait_prior(0);  // no copy may still land in shared memory when the CTA leaves
  __syncthreads();
}

// ---- the warp-per-chunk BF16 decoder (chunk 4096, no checksums, full codebook, contiguous output) ----------------
// The mirror of encode.cu's warp encoder (bench/NOTES.md v7). A frame qualifies (warp_frame) when it is BF16 with
// chunks of 4096 values, no checksums and a codebook of 2^k entries (so no code can be out of range); then every
// full coded chunk whose record is no larger than a raw one (warp_chunk_fast) is decoded by one warp of
// decode_warp_kernel, and decode_kernel, launched before it, decodes only the other chunks (raw records, the short
// last chunk, corrupt index entries, records larger than a raw one) with the general per-CTA path. A warp checks its
// chunk's escapes from a shared-memory copy of the lists, then decodes 4 rounds of 1024 values, lane l the 32 values
// 1024 r + 32 l ..: two codes at a time through a table of 2^2k words that hold both exponents in place, joined with
// the rest bytes by one byte permute and one mask each; the round goes through a swizzled shared-memory stage where
// the escapes are patched (one lane per escape; the value there must have decoded to codebook[0], i.e. code 0),
// and out with coalesced 16-byte stores, so the output is written once. During its last round a warp already loads
// its next chunk's first round (registers) and escape lists (cp.async into a second buffer).
constexpr int kWarpDecWarps = 8;
constexpr uint32_t kWarpDecEsc = (3 * ((kFastValues - kFastGroups) / 3) + 8 + 15) / 16 * 16;  // escape lists as words
constexpr uint32_t kWarpDecStage = 2048;                                     // one round of output
constexpr size_t kWarpDecSmem = (size_t)kWarpDecWarps * (2 * kWarpDecEsc + kWarpDecStage);
static_assert(kWarpDecEsc % 16 == 0, "each warp's area stays 16-byte aligned");

template <bool PAGED>
__device__ __forceinline__ bool warp_frame(const Header& h, const DecodeArgs& a) {
  return !PAGED && !a.general && !a.tile && h.dtype == 1 && h.chunk_log2 == kFastLog2 &&
         (h.flags & layout::kFlagChecksums) == 0 && h.count == (1u << h.k) && ((uintptr_t)a.src & 7u) == 0 &&
         ((uintptr_t)a.dst & 15u) == 0;
}

// The index entries of chunk c - 1 (0 for c = 0) and c of a qualifying frame (8-byte aligned); 0 past the end.
__device__ __forceinline__ void warp_entries(const Header& h, const uint8_t* src, uint64_t c, uint64_t* prev,
                                             uint64_t* cur) {
  const unsigned long long* idx = reinterpret_cast<const unsigned long long*>(src + h.index_off);
  *cur = c < h.n_chunks ? idx[c] : 0;
  *prev = (c > 0 && c < h.n_chunks) ? idx[c - 1] : 0;
}

// Whether chunk c of a qualifying frame goes to the warp decoder: a full chunk whose index entries are consistent
// (coded, record inside the exponent section, the last one ending it) and whose record is no larger than a raw one
// (at most (4096 - G) / 3 escapes: every record a valid encoder writes). Everything else, valid or not, is
// decode_kernel's, which checks and reports as for any frame.
__device__ __forceinline__ bool warp_chunk_fast(const Header& h, uint64_t c, uint64_t prev, uint64_t e,
                                                uint64_t* begin, uint32_t* X) {
  if ((c + 1) * kFastValues > h.n) return false;
  const uint64_t b = prev & layout::kIndexEndMask;
  const uint64_t end = e & layout::kIndexEndMask;
  if ((e >> layout::kIndexModeShift) != layout::kModeCoded || end < b || end > h.exp_size) return false;
  if (c == h.n_chunks - 1 && end != h.exp_size) return false;
  const uint64_t G = (uint64_t)kFastGroups * h.k;
  const uint64_t size = end - b;
  if (size < G || (size - G) % 3 != 0 || size > kFastValues) return false;
  *begin = b;
  *X = (uint32_t)((size - G) / 3);
  return true;
}

// N bytes at p (any alignment, all inside [.., end)) as N/4 words; the aligned words around them are read only
// where they stay inside the frame, else the bytes one by one.
template <int N>
__device__ __forceinline__ void load_words(const uint8_t* p, const uint8_t* end, uint32_t w[N / 4]) {
  const uint32_t sh = (uint32_t)((uintptr_t)p & 3u) * 8u;
  const uint32_t* q = reinterpret_cast<const uint32_t*>((uintptr_t)p & ~(uintptr_t)3);
  uint32_t raw[N / 4 + 1];
  if (reinterpret_cast<const uint8_t*>(q + N / 4 + 1) <= end) {
#pragma unroll
    for (int i = 0; i <= N / 4; ++i) raw[i] = q[i];
  } else {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) w[i] = layout::load_u32(p + 4 * i);
    return;
  }
#pragma unroll
  for (int i = 0; i < N / 4; ++i) w[i] = __funnelshift_r(raw[i], raw[i + 1], sh);
}

// Byte offset into the pair table of the 2k-bit field m of the code string w (little-endian, 32-bit words).
template <int K>
__device__ __forceinline__ uint32_t pair_off(const uint32_t* w, int m) {
  constexpr uint32_t kMask = ((1u << (2 * K)) - 1u) << 2;
  const int o = 2 * K * m, wi = o / 32, s = o % 32;
  if (s + 2 * K <= 32) return (s >= 2 ? (w[wi] >> (s - 2)) : (w[wi] << (2 - s))) & kMask;
  return __funnelshift_r(w[wi], w[wi + 1], s - 2) & kMask;
}

template <int K>
struct WarpRound {
  uint32_t cw[K];
  uint32_t rw[8];
};
template <int K>
__device__ __forceinline__ void warp_round_load(const uint8_t* rec, const uint8_t* rest_in, const uint8_t* frame_end,
                                                uint32_t v0, WarpRound<K>& d) {
  load_words<4 * K>(rec + (v0 / 8) * K, frame_end, d.cw);
  const uint2* rp = reinterpret_cast<const uint2*>(rest_in + v0);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint2 v = rp[i];
    d.rw[2 * i] = v.x;
    d.rw[2 * i + 1] = v.y;
  }
}

// Word i of the escape lists' aligned words (ea = the lists' start rounded down to 4 bytes); bytes past the frame
// read as 0.
__device__ __forceinline__ uint32_t esc_word(const uint8_t* ea, uint32_t i, const uint8_t* frame_end) {
  const uint8_t* p = ea + 4 * i;
  if (p + 4 <= frame_end) return *reinterpret_cast<const uint32_t*>(p);
  uint32_t w = 0;
  for (int b = 0; b < 4; ++b)
    if (p + b < frame_end) w |= (uint32_t)p[b] << (8 * b);
  return w;
}

template <int K>
__device__ __forceinline__ void decode_warp_chunks(const DecodeArgs& a, const Header& h, const uint8_t* tab,
                                                   const uint8_t* in_cb, uint8_t* esc_bufs, uint8_t* stage,
                                                   unsigned lane, uint64_t gw, uint64_t nw) {
  constexpr uint32_t G = kFastGroups * K;
  const uint8_t* const frame_end = a.src + h.exp_off + h.exp_size;
  const uint32_t cb0 = h.codebook[0];
  uint64_t e_prev, e_cur;
  warp_entries(h, a.src, gw, &e_prev, &e_cur);
  // A chunk's round-0 inputs and escape lists are loaded during round 3 of the warp's previous chunk (pf), so its
  // first round trip overlaps work; the lists alternate between two buffers.
  bool pf = false;
  uint32_t par = 0;
  WarpRound<K> cur;
  for (uint64_t c = gw; c < h.n_chunks; c += nw) {
    uint64_t begin = 0;
    uint32_t X = 0;
    const bool fast = warp_chunk_fast(h, c, e_prev, e_cur, &begin, &X);
    warp_entries(h, a.src, c + nw, &e_prev, &e_cur);  // the next chunk's entries, in flight during this one
    if (!fast) {  // decode_kernel's
      pf = false;
      continue;
    }
    const uint8_t* rec = a.src + h.exp_off + begin;
    const uint8_t* rest_in = a.src + h.rest_off + c * kFastValues;
    uint8_t* esc_buf = esc_bufs + par * kWarpDecEsc;
    const uint8_t* eg = rec + G;
    const uint32_t eoff = (uint32_t)((uintptr_t)eg & 3u);
    if (pf) {
      __pipeline_wait_prior(0);  // the lists loaded during the previous chunk
    } else {
      warp_round_load<K>(rec, rest_in, frame_end, 32 * lane, cur);
      const uint32_t enw = (eoff + 3 * X + 3) / 4;
      for (uint32_t i = lane; i < enw; i += 32)
        reinterpret_cast<uint32_t*>(esc_buf)[i] = esc_word(eg - eoff, i, frame_end);
    }
    pf = false;
    __syncwarp();
    const uint8_t* es = esc_buf + eoff;

    // §4.5 on the lists: positions strictly increasing and < 4096, exponents not in the codebook (the code-0 check
    // is in the patch below). Escapes per round from the sorted positions.
    bool bad = false;
    uint32_t hi0 = 0, hi1 = 0, hi2 = 0, carry = 0;
    for (uint32_t b0 = 0; b0 < X; b0 += 32) {
      const uint32_t i = b0 + lane;
      const bool valid = i < X;
      uint32_t p = 0, e = 0;
      if (valid) {
        p = (uint32_t)es[2 * i] | ((uint32_t)es[2 * i + 1] << 8);
        e = es[2 * X + i];
      }
      uint32_t pp = __shfl_up_sync(0xFFFFFFFFu, p, 1);
      if (lane == 0) pp = carry;
      if (valid && (p >= kFastValues || (i > 0 && pp >= p) || in_cb[e])) bad = true;
      hi0 += __popc(__ballot_sync(0xFFFFFFFFu, valid && p < 1024));
      hi1 += __popc(__ballot_sync(0xFFFFFFFFu, valid && p < 2048));
      hi2 += __popc(__ballot_sync(0xFFFFFFFFu, valid && p < 3072));
      carry = __shfl_sync(0xFFFFFFFFu, p, 31);
    }
    if (__any_sync(0xFFFFFFFFu, bad)) {
      if (lane == 0) report(a.status, SZ_ERROR_CORRUPT);
      continue;
    }

    uint8_t* out = a.dst + c * (2 * kFastValues);
    uint32_t lo = 0;
#pragma unroll 1
    for (uint32_t r = 0; r < 4; ++r) {
      const uint32_t hi = r == 0 ? hi0 : (r == 1 ? hi1 : (r == 2 ? hi2 : X));
      WarpRound<K> nxt;
      // Round 3: the next chunk of this warp, if it is the warp decoder's: its round-0 inputs into registers and its
      // escape lists into the other buffer (cp.async, waited for at the next chunk's start).
      if (r < 3) {
        warp_round_load<K>(rec, rest_in, frame_end, 1024 * (r + 1) + 32 * lane, nxt);
      } else {
        uint64_t nb = 0;
        uint32_t nX = 0;
        if (c + nw < h.n_chunks && warp_chunk_fast(h, c + nw, e_prev, e_cur, &nb, &nX)) {
          const uint8_t* nrec = a.src + h.exp_off + nb;
          warp_round_load<K>(nrec, a.src + h.rest_off + (c + nw) * kFastValues, frame_end, 32 * lane, nxt);
          const uint8_t* neg = nrec + G;
          const uint32_t noff = (uint32_t)((uintptr_t)neg & 3u);
          const uint32_t new_ = (noff + 3 * nX + 3) / 4;
          neg -= noff;
          uint32_t* nbuf = reinterpret_cast<uint32_t*>(esc_bufs + (par ^ 1u) * kWarpDecEsc);
          for (uint32_t i = lane; i < new_; i += 32) {
            if (neg + 4 * i + 4 <= frame_end) __pipeline_memcpy_async(nbuf + i, neg + 4 * i, 4);
            else nbuf[i] = esc_word(neg, i, frame_end);
          }
          __pipeline_commit();
          pf = true;
        }
      }
#pragma unroll
      for (int t = 0; t < 4; ++t) {  // group t of the lane: 8 values, 4 pairs
        uint32_t xw[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int m = 4 * t + j;
          const uint32_t ent = *reinterpret_cast<const uint32_t*>(tab + pair_off<K>(cur.cw, m));
          const uint32_t rs = __byte_perm(cur.rw[m / 2], 0, (m & 1) ? 0x3322u : 0x1100u);
          xw[j] = (rs & 0x807F807Fu) | ent;
        }
        *reinterpret_cast<uint4*>(stage + stage_piece(4 * lane + t)) = make_uint4(xw[0], xw[1], xw[2], xw[3]);
      }
      __syncwarp();
      for (uint32_t i = lo + lane; i < hi; i += 32) {
        const uint32_t p = ((uint32_t)es[2 * i] | ((uint32_t)es[2 * i + 1] << 8)) - 1024 * r;
        uint16_t* v = reinterpret_cast<uint16_t*>(stage + stage_piece(p >> 3) + 2 * (p & 7u));
        const uint32_t x = *v;
        if (((x >> 7) & 0xFFu) != cb0) bad = true;  // the escape's code was not 0
        *v = (uint16_t)((x & 0x807Fu) | ((uint32_t)es[2 * X + i] << 7));
      }
      __syncwarp();
#pragma unroll
      for (uint32_t s = 0; s < 4; ++s) {
        const uint32_t u = lane + 32 * s;
        reinterpret_cast<uint4*>(out + 2048 * r)[u] = *reinterpret_cast<const uint4*>(stage + stage_piece(u));
      }
      __syncwarp();
      lo = hi;
      cur = nxt;
    }
    if (pf) par ^= 1u;
    if (__any_sync(0xFFFFFFFFu, bad) && lane == 0) report(a.status, SZ_ERROR_CORRUPT);
  }
  __pipeline_wait_prior(0);  // no copy may still land in shared memory when the warp leaves
}

__global__ void __launch_bounds__(kWarpDecWarps * 32, 3) decode_warp_kernel(const __grid_constant__ DecodeArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ Header s_h;
  __shared__ int32_t s_go;
  __shared__ uint8_t s_in_cb[256];
  __shared__ __align__(16) uint32_t s_tab[256];  // pair of codes -> both exponents in place (2^2k entries)
  if (threadIdx.x == 0) {
    bool go = parse_header(a.src, a.src_size, &s_h) == SZ_OK && warp_frame<false>(s_h, a) &&
              s_h.n * 2 <= a.dst_capacity;
    s_go = go;
  }
  __syncthreads();
  if (!s_go) return;
  const Header& h = s_h;
  const uint32_t k = h.k, mask = (1u << k) - 1u;
  for (unsigned i = threadIdx.x; i < 256; i += blockDim.x) {
    bool in = false;
    for (uint32_t j = 0; j < h.count; ++j) in |= h.codebook[j] == i;
    s_in_cb[i] = in;
    if (i < (1u << (2 * k))) s_tab[i] = ((uint32_t)h.codebook[i & mask] << 7) | ((uint32_t)h.codebook[i >> k] << 23);
  }
  __syncthreads();
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  uint8_t* esc_buf = smem + warp * (2 * kWarpDecEsc + kWarpDecStage);  // two buffers of escape lists
  uint8_t* stage = esc_buf + 2 * kWarpDecEsc;
  const uint64_t gw = (uint64_t)blockIdx.x * kWarpDecWarps + warp, nw = (uint64_t)gridDim.x * kWarpDecWarps;
  const uint8_t* tab = reinterpret_cast<const uint8_t*>(s_tab);
  switch (k) {
    case 1: decode_warp_chunks<1>(a, h, tab, s_in_cb, esc_buf, stage, lane, gw, nw); break;
    case 2: decode_warp_chunks<2>(a, h, tab, s_in_cb, esc_buf, stage, lane, gw, nw); break;
    case 3: decode_warp_chunks<3>(a, h, tab, s_in_cb, esc_buf, stage, lane, gw, nw); break;
    default: decode_warp_chunks<4>(a, h, tab, s_in_cb, esc_buf, stage, lane, gw, nw); break;
  }
}

template <bool PAGED>
__global__ void __launch_bounds__(kThreads, 3) decode_kernel(const __grid_constant__ DecodeArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ Header s_h;
  __shared__ int32_t s_err;
  __shared__ uint8_t s_in_codebook[256];
  __shared__ ChunkShared s_chunk;
  __shared__ SlotInfo s_slot[kMaxDepth];
  uint8_t* const s_exp = smem + kSmemExp;
  uint8_t* const s_stage = smem + kSmemOut;

  if (threadIdx.x == 0) {
    sz_status st = parse_header(a.src, a.src_size, &s_h);
    if (st == SZ_OK) {
      const uint64_t bytes = s_h.n * (layout::dtype_traits(s_h.dtype).value_bits / 8);
      if (PAGED) {
        const uint64_t have = (uint64_t)a.n_pages * a.page_values;
        if (s_h.n > have) st = SZ_ERROR_DST_TOO_SMALL;
        else if (s_h.n < have) st = SZ_ERROR_INVALID_ARGUMENT;
      } else if (bytes > a.dst_capacity) {
        st = SZ_ERROR_DST_TOO_SMALL;
      }
      if (st == SZ_OK && s_h.n_chunks == 0 && s_h.exp_size != 0) st = SZ_ERROR_CORRUPT;
    }
    s_err = st;
    if (st != SZ_OK && blockIdx.x == 0) report(a.status, st);
  }
  __syncthreads();
  if (s_err != SZ_OK) return;
  for (unsigned i = threadIdx.x; i < 256; i += kThreads) {
    bool in = false;
    for (uint32_t j = 0; j < s_h.count; ++j) in |= s_h.codebook[j] == i;
    s_in_codebook[i] = in;
  }
  __syncthreads();
  const Header& h = s_h;
  if constexpr (!PAGED) {
    if (warp_frame<PAGED>(h, a)) {
      // decode_warp_kernel (launched next) takes the chunks that pass warp_chunk_fast; this grid the others.
      __shared__ uint64_t s_list[kThreads];
      __shared__ uint32_t s_n;
      for (uint64_t base = (uint64_t)blockIdx.x * kThreads; base < h.n_chunks; base += (uint64_t)gridDim.x * kThreads) {
        if (threadIdx.x == 0) s_n = 0;
        __syncthreads();
        const uint64_t c = base + threadIdx.x;
        uint64_t b, e0, e1;
        uint32_t x;
        warp_entries(h, a.src, c, &e0, &e1);
        if (c < h.n_chunks && !warp_chunk_fast(h, c, e0, e1, &b, &x)) s_list[atomicAdd(&s_n, 1u)] = c;
        __syncthreads();
        const uint32_t n = s_n;
        for (uint32_t i = 0; i < n; ++i) {
          decode_chunk<1, PAGED>(a, h, s_list[i], s_in_codebook, s_exp, s_stage, &s_chunk);
          __syncthreads();
        }
      }
      return;
    }
  }
  if (h.chunk_log2 == kFastLog2 && !a.general) {
    switch (h.dtype) {
      case 1:
        switch (h.k) {
          case 1: decode_fast<1, PAGED, 1>(a, h, s_in_codebook, smem, s_slot, &s_chunk); break;
          case 2: decode_fast<1, PAGED, 2>(a, h, s_in_codebook, smem, s_slot, &s_chunk); break;
          case 3: decode_fast<1, PAGED, 3>(a, h, s_in_codebook, smem, s_slot, &s_chunk); break;
          default: decode_fast<1, PAGED, 4>(a, h, s_in_codebook, smem, s_slot, &s_chunk); break;
        }
        break;
      case 2: decode_fast<2, PAGED>(a, h, s_in_codebook, smem, s_slot, &s_chunk); break;
      case 3: decode_fast<3, PAGED>(a, h, s_in_codebook, smem, s_slot, &s_chunk); break;
      case 4: decode_fast<4, PAGED>(a, h, s_in_codebook, smem, s_slot, &s_chunk); break;
      default: decode_fast<5, PAGED>(a, h, s_in_codebook, smem, s_slot, &s_chunk); break;
    }
    return;
  }
  for (uint64_t c = blockIdx.x; c < h.n_chunks; c += gridDim.x) {
    switch (h.dtype) {
      case 1: decode_chunk<1, PAGED>(a, h, c, s_in_codebook, s_exp, s_stage, &s_chunk); break;
      case 2: decode_chunk<2, PAGED>(a, h, c, s_in_codebook, s_exp, s_stage, &s_chunk); break;
      case 3: decode_chunk<3, PAGED>(a, h, c, s_in_codebook, s_exp, s_stage, &s_chunk); break;
      case 4: decode_chunk<4, PAGED>(a, h, c, s_in_codebook, s_exp, s_stage, &s_chunk); break;
      default: decode_chunk<5, PAGED>(a, h, c, s_in_codebook, s_exp, s_stage, &s_chunk); break;
    }
    __syncthreads();
  }
}

// After the decode kernel: the number of bytes written, or 0 on error.
__global__ void decode_size_kernel(const __grid_constant__ DecodeArgs a) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  uint64_t bytes = 0;
  if (*a.status == SZ_OK) {
    Header h;
    if (parse_header(a.src, a.src_size, &h) == SZ_OK) bytes = h.n * (layout::dtype_traits(h.dtype).value_bits / 8);
  }
  *a.dst_size = bytes;
}

template <bool PAGED>
sz_status launch_typed(const DecodeArgs& a, cudaStream_t stream) {
  int dev = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return SZ_ERROR_CUDA;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return SZ_ERROR_CUDA;
  static_assert(kDecodeSmem > 48 * 1024, "the attribute below is needed");
  if (cudaFuncSetAttribute(decode_kernel<PAGED>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kDecodeSmem) !=
      cudaSuccess)
    return SZ_ERROR_CUDA;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, decode_kernel<PAGED>, kThreads, kDecodeSmem) !=
      cudaSuccess)
    return SZ_ERROR_CUDA;
  if (per_sm < 1) per_sm = 1;
  // The chunk count is in the frame, which the host does not read; the bound below keeps small frames from
  // launching idle CTAs: every chunk holds at least 256 values and so takes more than 256 * R / 8 frame bytes.
  uint64_t grid = (uint64_t)sms * (uint64_t)per_sm;
  const uint64_t most_chunks = a.src_size / 96 + 1;
  if (grid > most_chunks) grid = most_chunks;
  if (cudaMemsetAsync(a.status, 0, sizeof(int32_t), stream) != cudaSuccess) return SZ_ERROR_CUDA;
  decode_kernel<PAGED><<<(unsigned)grid, kThreads, kDecodeSmem, stream>>>(a);
  if (cudaGetLastError() != cudaSuccess) return SZ_ERROR_CUDA;
  if (!PAGED && !a.general && !a.tile) {  // exits at once unless the frame qualifies (warp_frame)
    if (cudaFuncSetAttribute(decode_warp_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kWarpDecSmem) !=
        cudaSuccess)
      return SZ_ERROR_CUDA;
    int per = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, decode_warp_kernel, kWarpDecWarps * 32, kWarpDecSmem) !=
        cudaSuccess)
      return SZ_ERROR_CUDA;
    if (per < 1) per = 1;
    uint64_t wgrid = (uint64_t)sms * (uint64_t)per;
    const uint64_t most_ctas = a.src_size / (96 * kWarpDecWarps) + 1;
    if (wgrid > most_ctas) wgrid = most_ctas;
    decode_warp_kernel<<<(unsigned)wgrid, kWarpDecWarps * 32, kWarpDecSmem, stream>>>(a);
    if (cudaGetLastError() != cudaSuccess) return SZ_ERROR_CUDA;
  }
  if (a.dst_size) {
    decode_size_kernel<<<1, 32, 0, stream>>>(a);
    if (cudaGetLastError() != cudaSuccess) return SZ_ERROR_CUDA;
  }
  return SZ_OK;
}

}  // namespace

sz_status launch_decode(const DecodeArgs& a, cudaStream_t stream) {
  return a.pages ? launch_typed<true>(a, stream) : launch_typed<false>(a, stream);
}

}  // namespace cuda
}  // namespace splitzip
