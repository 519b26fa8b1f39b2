// warp/xxh3_rounds.cuh — the chunk checksum of docs/FORMAT.md §4.6 (H32 of XXH3-64) computed by a warp while a
// full chunk passes through it, round by round, from the registers that carry the data anyway: no second pass,
// no staging for the hash.
//
// XXH3's long hash (xxh3.cuh, hash_long) adds, for every 64-byte stripe s, lane_step(word i, word i^1, key) to
// accumulator i, scrambles the 8 accumulators after each full 1 KiB block but the last, and handles the final
// stripe with its own key (secret offset 121). What a stripe adds does not depend on the accumulators, so a round's
// contributions are summed first and only the scramble chain is sequential. A round is 2 KiB = 32 stripes = blocks
// 2r and 2r + 1; lane l holds the coalesced pieces l + 32 t (t = 0..3), i.e. words 2p, 2p+1 (p = l % 4) of stripe
// l / 4 + 8 t. So it computes two accumulator contributions per piece, sums t = 0, 1 (block 2r) and t = 2, 3
// (block 2r + 1), and three shuffle steps reduce-scatter the 8 lanes of each p: afterwards lane l holds the block
// sum of accumulator i(l) = 2 p + bit 3 of l, for block 2r (l < 16) or 2r + 1 (l >= 16). Every lane then runs the
// chain for its accumulator i(l) (lanes l and l ^ 4, l ^ 16, ... hold copies). Cost per lane and round: 8
// multiply-adds, 8 shuffles, a few adds and selects: about 1.5 instructions per input byte.
#pragma once

#include "cuda/simt.cuh"
#include "cuda/xxh3.cuh"

namespace splitzip {
namespace cuda {

// The secret words a lane uses, the same in every warp and call: a table of 32 entries computed at compile time
// and read by each lane once (from global memory: a lane-indexed constant-memory read would serialise).
struct XxhKeys {
  uint64_t reg[4];   // stripe l/4 (t even) and l/4 + 8 (t odd): words 2p and 2p + 1 of their keys
  uint64_t last[2];  // the final stripe's keys (secret offset 121) for words 2p, 2p + 1
  uint64_t scr;      // scramble key of accumulator i(l)
  uint64_t merge;    // merge key of accumulator i(l)
};

SZ_HD constexpr uint32_t xxh_acc_index(unsigned lane) { return 2u * (lane & 3u) + ((lane >> 3) & 1u); }

constexpr XxhKeys xxh_lane_keys(unsigned l) {
  const unsigned p = l & 3u, s0 = l >> 2, s1 = s0 + 8, i = xxh_acc_index(l);
  return XxhKeys{{xxh3::sec64_cx(8 * s0 + 16 * p), xxh3::sec64_cx(8 * s0 + 16 * p + 8),
                  xxh3::sec64_cx(8 * s1 + 16 * p), xxh3::sec64_cx(8 * s1 + 16 * p + 8)},
                 {xxh3::sec64_cx(xxh3::kSecretSize - xxh3::kStripe - 7 + 16 * p),
                  xxh3::sec64_cx(xxh3::kSecretSize - xxh3::kStripe - 7 + 16 * p + 8)},
                 xxh3::sec64_cx(xxh3::kSecretSize - xxh3::kStripe + 8 * i),
                 xxh3::sec64_cx(11 + 8 * i)};
}
#define SZ_XXH_K4(l) xxh_lane_keys(l), xxh_lane_keys(l + 1), xxh_lane_keys(l + 2), xxh_lane_keys(l + 3)
#if defined(SZ_SIMT_EMU)
static const XxhKeys kXxhKeys[32] = {SZ_XXH_K4(0),  SZ_XXH_K4(4),  SZ_XXH_K4(8),  SZ_XXH_K4(12),
                                     SZ_XXH_K4(16), SZ_XXH_K4(20), SZ_XXH_K4(24), SZ_XXH_K4(28)};
#else
static __device__ const XxhKeys kXxhKeys[32] = {SZ_XXH_K4(0),  SZ_XXH_K4(4),  SZ_XXH_K4(8),  SZ_XXH_K4(12),
                                                SZ_XXH_K4(16), SZ_XXH_K4(20), SZ_XXH_K4(24), SZ_XXH_K4(28)};
#endif
#undef SZ_XXH_K4

// This lane's keys (held in registers by the callers: a global load in the round loop is a long-latency wait).
SZ_DEV XxhKeys xxh_keys() { return kXxhKeys[simt::lane_id()]; }

SZ_DEV uint64_t xxh_mul32(uint64_t x) { return (x & 0xFFFFFFFFull) * (x >> 32); }

struct XxhState {
  uint64_t acc;
};
// XXH3's initial value of this lane's accumulator for a frame with H32 checksums (h32); 0 otherwise, where the state
// is never read, so that other frames skip the per-lane select (a branch ladder) in every chunk.
SZ_DEV XxhState xxh_begin(bool h32) { return XxhState{h32 ? xxh3::acc_init(xxh_acc_index(simt::lane_id())) : 0}; }

// A round's contributions to the accumulators, before the scramble chain: round r of a chunk of chunk_bytes (over
// 240: XXH3's long hash) from the lane's 4 pieces: piece t is bytes [16 (l + 32 t), +16) of the round, as words lo[t]
// (bytes 0..7) and hi[t]. Stripes that are not whole inside the chunk are skipped (what they hold past its end is
// never read). When chunk_bytes is a multiple of 64 the final stripe is the chunk's last stripe and is added here
// with its own keys; otherwise xxh_final_stripe adds it. kEdge = false: the caller knows that round r is not the
// chunk's last (every stripe whole, none the final one); xxh_sums picks. The sums of different rounds are
// independent, so several warps can each take some of a chunk's rounds and one chain them (xxh_chain) in order.
struct XxhSums {
  uint64_t a, b;  // the sums of accumulator i(l) over block 2r and over block 2r + 1
};

template <bool kEdge>
SZ_DEV XxhSums xxh_round_sums(const uint64_t lo[4], const uint64_t hi[4], const XxhKeys& k, uint32_t r,
                              uint32_t chunk_bytes) {
  const unsigned lane = simt::lane_id();
  const uint32_t stripes = chunk_bytes / 64;
  const bool fold = chunk_bytes % 64 == 0;
  uint64_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const uint32_t s = 32 * r + (lane >> 2) + 8 * t;
    const bool last = kEdge && fold && s + 1 == stripes;
    const uint64_t k0 = last ? k.last[0] : k.reg[2 * (t & 1)];
    const uint64_t k1 = last ? k.last[1] : k.reg[2 * (t & 1) + 1];
    uint64_t c0 = hi[t] + xxh_mul32(lo[t] ^ k0);  // accumulator 2p takes word 2p+1 and the product of word 2p
    uint64_t c1 = lo[t] + xxh_mul32(hi[t] ^ k1);
    if (kEdge && s >= stripes) c0 = c1 = 0;
    if (t < 2) {
      a0 += c0;
      a1 += c1;
    } else {
      b0 += c0;
      b1 += c1;
    }
  }
  // Reduce-scatter over the 8 lanes with the same p: xor 16 splits the blocks, xor 8 the two words, xor 4 sums.
  const bool hi16 = lane >= 16, odd = ((lane >> 3) & 1u) != 0;
  uint64_t keep0 = hi16 ? b0 : a0, keep1 = hi16 ? b1 : a1;
  keep0 += simt::shfl_xor(hi16 ? a0 : b0, 16);
  keep1 += simt::shfl_xor(hi16 ? a1 : b1, 16);
  uint64_t v = odd ? keep1 : keep0;
  v += simt::shfl_xor(odd ? keep0 : keep1, 8);
  v += simt::shfl_xor(v, 4);
  const uint64_t other = simt::shfl_xor(v, 16);
  return XxhSums{hi16 ? other : v, hi16 ? v : other};
}

// Round r's sums into the accumulator: the sequential part (a scramble after each full block but the last).
SZ_DEV void xxh_chain(XxhState& st, XxhSums s, const XxhKeys& k, uint32_t r, uint32_t chunk_bytes) {
  const uint32_t scrambled = (chunk_bytes - 1) / 1024;  // blocks followed by a scramble
  st.acc += s.a;
  if (2 * r < scrambled) st.acc = xxh3::scramble(st.acc, k.scr);
  st.acc += s.b;
  if (2 * r + 1 < scrambled) st.acc = xxh3::scramble(st.acc, k.scr);
}

// Round r of a chunk of `rounds` rounds (its sums): the last-stripe and partial-stripe logic only in its last round.
SZ_DEV XxhSums xxh_sums(const uint64_t lo[4], const uint64_t hi[4], const XxhKeys& k, uint32_t r, uint32_t rounds,
                        uint32_t chunk_bytes) {
  if (r + 1 < rounds) return xxh_round_sums<false>(lo, hi, k, r, chunk_bytes);
  return xxh_round_sums<true>(lo, hi, k, r, chunk_bytes);
}
// Adds round r when the warp sees the chunk's rounds in order.
SZ_DEV void xxh_add_round(XxhState& st, const uint64_t lo[4], const uint64_t hi[4], const XxhKeys& k, uint32_t r,
                          uint32_t rounds, uint32_t chunk_bytes) {
  xxh_chain(st, xxh_sums(lo, hi, k, r, rounds, chunk_bytes), k, r, chunk_bytes);
}

// The final stripe, bytes [len - 64, len), of a chunk whose length is not a multiple of 64 (it straddles two
// stripes): fetch.word(o) reads bytes o .. o + 7 of the chunk. Every lane adds its accumulator's share.
template <class Fetch>
SZ_DEV void xxh_final_stripe(XxhState& st, const XxhKeys& k, const Fetch& fetch, uint32_t len) {
  const uint32_t i = xxh_acc_index(simt::lane_id());
  const uint64_t own = fetch.word(len - 64 + 8 * i), other = fetch.word(len - 64 + 8 * (i ^ 1u));
  st.acc += other + xxh_mul32(own ^ k.last[i & 1u]);
}

// The XXH3-64 of the chunk, in every lane.
SZ_DEV uint64_t xxh_finish(const XxhState& st, const XxhKeys& k, uint32_t chunk_bytes) {
  const unsigned lane = simt::lane_id();
  const uint64_t x = st.acc ^ k.merge;
  const uint64_t y = simt::shfl_xor(x, 8);  // lanes 0..3 hold accumulators 2p, lanes 8..11 accumulators 2p + 1
  uint64_t t = lane < 4 ? xxh3::mul128_fold64(x, y) : 0;
  t += simt::shfl_xor(t, 1);
  t += simt::shfl_xor(t, 2);
  return simt::shfl(xxh3::avalanche((uint64_t)chunk_bytes * xxh3::kP64_1 + t), 0);
}

}  // namespace cuda
}  // namespace splitzip
