// warp/lh32_rounds.cuh — LH32 (docs/FORMAT.md §4.6.1, lanehash.h) computed by a warp while a chunk passes through
// it, round by round, from the registers that carry the data.
//
// Lane l holds the coalesced 16-byte pieces l + 32 t (t = 0..3) of each 2 KiB round: words 2 (l + 32 t) and
// 2 (l + 32 t) + 1, which LH32 gives to accumulators 2l and 2l + 1 in row t. So lane l owns those two accumulators
// outright: a round is 8 word steps (two xors, a 32 x 32 -> 64 multiply-add and a 64-bit add each) with no shuffle
// and no scramble, and rounds only add, so the warps of a team each sum their own rounds and add up at the end.
// Only the finish (a mix per lane, a warp sum, the fold) crosses lanes, once per chunk.
#pragma once

#include "cuda/simt.cuh"
#include "cuda/warp/xxh3_rounds.cuh"
#include "lanehash.h"

namespace splitzip {
namespace cuda {

// A lane's LH32 keys: K_2l, K_2l+1 and the initial values I_2l, I_2l+1.
struct LhKeys {
  uint64_t k0, k1, i0, i1;
};
// The keys of whichever checksum a frame has, in the same registers (or shared-memory entry): a frame has one kind.
union ChunkKeys {
  XxhKeys x;
  LhKeys l;
};
static_assert(sizeof(LhKeys) <= sizeof(XxhKeys), "the LH32 keys fit in the XXH3 keys' place");

constexpr LhKeys lh_lane_keys(unsigned l) {
  return LhKeys{lh32::key(2 * l), lh32::key(2 * l + 1), lh32::init(2 * l), lh32::init(2 * l + 1)};
}
#define SZ_LH_K4(l) lh_lane_keys(l), lh_lane_keys(l + 1), lh_lane_keys(l + 2), lh_lane_keys(l + 3)
#if defined(SZ_SIMT_EMU)
static const LhKeys kLhKeys[32] = {SZ_LH_K4(0),  SZ_LH_K4(4),  SZ_LH_K4(8),  SZ_LH_K4(12),
                                   SZ_LH_K4(16), SZ_LH_K4(20), SZ_LH_K4(24), SZ_LH_K4(28)};
#else
static __device__ const LhKeys kLhKeys[32] = {SZ_LH_K4(0),  SZ_LH_K4(4),  SZ_LH_K4(8),  SZ_LH_K4(12),
                                              SZ_LH_K4(16), SZ_LH_K4(20), SZ_LH_K4(24), SZ_LH_K4(28)};
#endif
#undef SZ_LH_K4

// This lane's keys for a frame's checksum kind (lane: LH32, else XXH3).
SZ_DEV ChunkKeys chunk_keys(bool lane) {
  ChunkKeys k;
  if (lane) k.l = kLhKeys[simt::lane_id()];
  else k.x = xxh_keys();
  return k;
}

// A lane's two accumulators (of a whole chunk, or the sums of some of its rounds).
struct LhState {
  uint64_t a0, a1;
};
SZ_DEV LhState lh_begin(const LhKeys& k) { return LhState{k.i0, k.i1}; }
SZ_DEV LhState lh_zero() { return LhState{0, 0}; }

// Round r of a chunk of chunk_bytes from the lane's pieces (piece t: bytes [16 (l + 32 t), +16) of the round, as
// words lo[t] and hi[t]). kEdge: a round that the chunk's end cuts, where pieces at or past the end add nothing and
// the one that straddles it counts its bytes past the end as zeros (what the buffer holds there is never read).
template <bool kEdge>
SZ_DEV void lh_round(LhState& st, const uint64_t lo[4], const uint64_t hi[4], const LhKeys& k, uint32_t r,
                     uint32_t chunk_bytes) {
  const unsigned lane = simt::lane_id();
  const uint32_t u = r * (uint32_t)lh32::kRoundStep;  // U_r's 32 bits (warp-uniform)
  // The step xors word, lane key and row key T_t ^ U_r: with U_r taken into the lane keys once a round, each half's
  // xor is one three-input LOP3 with T_t as its immediate.
  const uint64_t uu = (uint64_t)u << 32 | u, k0 = k.k0 ^ uu, k1 = k.k1 ^ uu;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    uint64_t w0 = lo[t], w1 = hi[t];
    if (kEdge) {
      const uint32_t o = r * lh32::kRoundBytes + 16u * (lane + 32u * t), left = o < chunk_bytes ? chunk_bytes - o : 0;
      if (left == 0) continue;
      if (left < 16) {
        if (left <= 8) {
          w1 = 0;
          if (left < 8) w0 &= (1ull << (8 * left)) - 1ull;
        } else {
          w1 &= (1ull << (8 * (left - 8))) - 1ull;
        }
      }
    }
    constexpr uint64_t kT[4] = {lh32::row_key(0), lh32::row_key(1), lh32::row_key(2), lh32::row_key(3)};
    st.a0 += lh32::step(w0, w1, k0, kT[t]);
    st.a1 += lh32::step(w1, w0, k1, kT[t]);
  }
}
// Round r of a chunk: the edge logic only where the chunk's end cuts the round.
SZ_DEV void lh_add_round(LhState& st, const uint64_t lo[4], const uint64_t hi[4], const LhKeys& k, uint32_t r,
                         uint32_t chunk_bytes) {
  if ((r + 1) * lh32::kRoundBytes <= chunk_bytes) lh_round<false>(st, lo, hi, k, r, chunk_bytes);
  else lh_round<true>(st, lo, hi, k, r, chunk_bytes);
}
// One row of a chunk (row = 4 r + t: row t of round r, 512 bytes) from the lane's piece (bytes [16 l, 16 l + 16) of
// the row, as words w0 and w1), for a warp that has a chunk's rows one at a time; the edge as in lh_round.
SZ_DEV void lh_add_row(LhState& st, uint64_t w0, uint64_t w1, const LhKeys& k, uint32_t row, uint32_t chunk_bytes) {
  const unsigned lane = simt::lane_id();
  const uint32_t o = row * (lh32::kRoundBytes / 4) + 16u * lane;
  if (o >= chunk_bytes) return;
  const uint32_t left = chunk_bytes - o;
  if (left < 16) {
    if (left <= 8) {
      w1 = 0;
      if (left < 8) w0 &= (1ull << (8 * left)) - 1ull;
    } else {
      w1 &= (1ull << (8 * (left - 8))) - 1ull;
    }
  }
  const uint32_t t = row % 4, u = (row / 4) * (uint32_t)lh32::kRoundStep;
  const uint64_t T = t == 0   ? lh32::row_key(0)
                     : t == 1 ? lh32::row_key(1)
                     : t == 2 ? lh32::row_key(2)
                              : lh32::row_key(3);
  const uint64_t rk = ((uint64_t)((uint32_t)(T >> 32) ^ u) << 32) | ((uint32_t)T ^ u);
  st.a0 += lh32::step(w0, w1, k.k0, rk);
  st.a1 += lh32::step(w1, w0, k.k1, rk);
}
SZ_DEV void lh_add(LhState& st, const LhState& o) {
  st.a0 += o.a0;
  st.a1 += o.a1;
}

// LH32 of the chunk from its lanes' states, in every lane.
SZ_DEV uint32_t lh_finish(const LhState& st, uint32_t chunk_bytes) {
  uint64_t m = lh32::lane_mix(st.a0, st.a1);
#pragma unroll
  for (int d = 16; d >= 1; d /= 2) m += simt::shfl_xor(m, d);
  return lh32::fold(m, chunk_bytes);
}

}  // namespace cuda
}  // namespace splitzip
