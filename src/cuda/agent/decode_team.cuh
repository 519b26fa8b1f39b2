// agent/decode_team.cuh — the decoder's team agent, for frames of up to DecodeTeamPolicy::kMaxSrcBytes: the messages
// of a serving engine (a layer, a request). What both agents share (header, tables, the steps of a round, the status)
// is in agent/decode.cuh.
//
// The stream agent makes a small call one warp's way through a chunk behind a ring's set-up. Here a team of up to
// four warps of a CTA takes a chunk (warp m: rounds m, m + team, ...), each warp loading its rounds' rest fields and
// codes straight into registers and its own copy of the chunk's escape lists into shared memory, so that every round
// of a small call is in flight at once and a round is two dependent loads from the kernel's start (index entries, then
// data). The warps of a team check a share of the lists each, meet once per chunk at a named barrier (their outcomes
// OR-ed, LH32 sums added in shared memory), and the team's first warp checks the chunk's checksum. Frames with H32
// checksums, whose rounds chain in order, take one warp per chunk.
#pragma once

#include "cuda/agent/decode.cuh"

namespace splitzip {
namespace cuda {

// decode_frame's fields (as in DecodeShared) and the teams' LH32 sums.
struct TeamShared {
  Header h;
  const uint8_t* src;
  uint64_t src_size;
  Span dst;
  Channels ch;
  int32_t err;
  uint32_t team;  // warps per chunk: 1, 2 or 4
  uint64_t ctas;
  uint8_t in_cb[256];
  uint32_t pair[256];
  ChunkKeys keys[32];
  LhState lh[2][DecodeTeamPolicy::kWarps][32];  // by chunk parity, warp and lane: the warp's sums of its rounds
  uint8_t hdr[layout::kHeaderSize];
};
constexpr uint32_t kTeamSharedBytes = (sizeof(TeamShared) + 15) / 16 * 16;
constexpr uint32_t kTeamEscBytes = 3 * DecodeTeamPolicy::kEscapeCap + 32;
// A warp's area: its copy of a chunk's escape lists, then the round's output stage.
constexpr uint32_t kTeamWarpBytes = kTeamEscBytes + kRoundBytes;
static_assert(kTeamEscBytes % 16 == 0 && kTeamWarpBytes % 16 == 0, "warp areas stay 16-byte aligned");
constexpr size_t decode_team_smem_bytes() {
  return kTeamSharedBytes + (size_t)DecodeTeamPolicy::kWarps * kTeamWarpBytes;
}
static_assert(decode_team_smem_bytes() <= DecodeTeamPolicy::kCtaSmemLimit, "kMinBlocks team CTAs fit an SM");

// N words of the bytes at p (any alignment), by streaming loads of the aligned words around them: 16-byte loads when
// p is 16-byte aligned, else N or N + 1 word loads and funnel shifts. The caller knows that the aligned words lie
// inside the frame buffer (up to 4 bytes past p + 4 N).
template <int N>
SZ_DEV void load_words(const uint8_t* p, uint32_t (&w)[N]) {
  const uintptr_t a = (uintptr_t)p;
  if constexpr (N % 4 == 0) {
    if ((a & 15u) == 0) {
#pragma unroll
      for (int i = 0; i < N / 4; ++i) {
        const uint4 v = simt::ld_stream16(p + 16 * i);
        w[4 * i] = v.x;
        w[4 * i + 1] = v.y;
        w[4 * i + 2] = v.z;
        w[4 * i + 3] = v.w;
      }
      return;
    }
  }
  const uint8_t* const q = p - (a & 3u);
  const uint32_t sh = (uint32_t)(a & 3u) * 8u;
  if (sh == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = simt::ld_stream4(q + 4 * i);
    return;
  }
  uint32_t prev = simt::ld_stream4(q);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t next = simt::ld_stream4(q + 4 * (i + 1));
    w[i] = simt::funnel_r(prev, next, sh);
    prev = next;
  }
}

// A lane's rest words and code (or raw exponent field) words, and whether its padding fields are not zero.
template <int RW, int CW>
struct LaneWords {
  uint32_t rest[RW];
  uint32_t codes[CW];
  bool bad;
};
// A lane that the fast path does not take (the chunk's last lane when it is partial, or one near the frame buffer's
// edges), out of line: its rn valid rest bytes and cn valid code bytes (B bits a field) read byte by byte, the words
// past them zero, and §3's padding check on the fields of values nv .. 8 gl - 1 (the lane's last group past the end).
template <int R, int RW, int CW>
SZ_NOINLINE LaneWords<RW, CW> lane_words_cold(const uint8_t* rp, uint32_t rn, const uint8_t* cp, uint32_t cn,
                                              uint32_t B, uint32_t nv, uint32_t gl) {
  uint8_t rb[4 * RW + 4], cb[4 * CW + 4];
  for (uint32_t i = 0; i < sizeof(rb); ++i) rb[i] = i < rn ? rp[i] : 0;
  for (uint32_t i = 0; i < sizeof(cb); ++i) cb[i] = i < cn ? cp[i] : 0;
  LaneWords<RW, CW> w;
  w.bad = false;
  for (uint32_t j = nv; j < gl * 8; ++j)
    if (bits_at(cb, j * B, B) != 0 || bits_at(rb, j * R, R) != 0) w.bad = true;
  for (int i = 0; i < RW; ++i) w.rest[i] = layout::load_u32(rb + 4 * i);
  for (int i = 0; i < CW; ++i) w.codes[i] = layout::load_u32(cb + 4 * i);
  return w;
}

// Whether the aligned words around [p, p + len) and 8 bytes after lie inside [lo, hi): load_words may then read any
// lane's share of the range.
SZ_DEV bool words_inside(const uint8_t* p, uint64_t len, const uint8_t* lo, const uint8_t* hi) {
  const uintptr_t a = (uintptr_t)p & ~(uintptr_t)3;
  return a >= (uintptr_t)lo && (uintptr_t)hi >= (uintptr_t)p && (uintptr_t)hi - (uintptr_t)p >= len + 8;
}

// The end of a chunk, by every warp of its team: the warps' outcomes OR-ed at the team's barrier (their LH32 sums
// left in shared memory before it), then the team's first warp checks the chunk's checksum (want: its entry) while
// the others go on, since their next meeting waits for it. hacc: the H32 accumulator of a one-warp team. Whether the
// team stops, every warp of it on the same chunk.
SZ_DEV bool team_meet(const DecodeArgs& a, TeamShared& sh, uint64_t ob, uint32_t CB, uint32_t parity, bool bad,
                      LhState ls, uint64_t hacc, bool hash_rounds, uint32_t want) {
  const unsigned lane = simt::lane_id(), warp = simt::warp_id();
  const uint32_t NT = sh.team, m = warp % NT, tl = warp / NT;
  const uint32_t flags = sh.h.flags;
  const bool cks = (flags & layout::kFlagChecksums) != 0, lh = lane_hash(flags);
  if (NT > 1) {
    if (lh && hash_rounds) sh.lh[parity][warp][lane] = ls;
    bad = simt::barrier_or(1 + tl, 32 * NT, bad);
  } else {
    bad = simt::any(bad);
  }
  if (bad) {
    if (m == 0) report(a.ws, SZ_ERROR_CORRUPT);
    return true;
  }
  if (cks && m == 0) {
    const ChunkKeys& keys = sh.keys[lane];
    if (NT > 1 && lh && hash_rounds) {
      ls = lh_begin(keys.l);
      for (uint32_t q = 0; q < NT; ++q) lh_add(ls, sh.lh[parity][tl * NT + q][lane]);
    }
    const uint32_t hv = chunk_checksum(lh, lh ? ls.a0 : hacc, ls.a1, keys, sh.dst, ob, CB);
    if (hv != want) report(a.ws, SZ_ERROR_CHECKSUM);
  }
  return false;
}

// Where a chunk's parts lie in the frame.
template <int DT, int K>
struct TeamChunkAt {
  const uint8_t* rest;  // its rest fields
  const uint8_t* rec;   // its record: codes (or raw exponent fields), then the escape lists
  const uint8_t* lists;
  uint64_t first;       // its first value
  SZ_DEV TeamChunkAt(const TeamShared& sh, uint64_t c, const ChunkInfo& ci) {
    const Header& h = sh.h;
    first = c << h.chunk_log2;
    rest = sh.src + h.rest_off + first / 8 * Dt<DT>::R;
    rec = sh.src + h.exp_off + ci.begin;
    lists = rec + (uint64_t)((ci.L + 7) / 8) * (ci.raw ? (uint32_t)Dt<DT>::E : (uint32_t)K);
  }
};

// Whether chunk ci is plain, so that team_chunk_plain decodes it: valid, whole, of whole rounds, its escape lists
// short enough to stage, every load of its lanes (the aligned words around each lane's fields, the 16-byte blocks
// around its lists) inside the frame buffer, and no H32 checksum (whose rounds chain in order). The same in every
// warp of the team.
template <int DT, int K>
SZ_DEV bool chunk_is_plain(const TeamShared& sh, const ChunkInfo& ci, const TeamChunkAt<DT, K>& at) {
  using T = Dt<DT>;
  const Header& h = sh.h;
  const uint32_t S = 1u << h.chunk_log2;
  if (!ci.ok || ci.L != S || (S * (T::W / 8)) % kRoundBytes != 0 || ci.X > DecodeTeamPolicy::kEscapeCap) return false;
  if ((h.flags & layout::kFlagChecksums) != 0 && !lane_hash(h.flags)) return false;
  const uint8_t* const lo = sh.src;
  const uint8_t* const hi = sh.src + sh.src_size;
  const uint32_t Gn = S / 8, B = ci.raw ? (uint32_t)T::E : (uint32_t)K;
  if (!words_inside(at.rest, (uint64_t)Gn * T::R, lo, hi) || !words_inside(at.rec, (uint64_t)Gn * B, lo, hi))
    return false;
  if (ci.X == 0) return true;
  const uintptr_t a0 = (uintptr_t)at.lists & ~(uintptr_t)15, a1 = ((uintptr_t)at.lists + 3 * ci.X + 15) & ~(uintptr_t)15;
  return a0 >= (uintptr_t)lo && a1 <= (uintptr_t)hi;
}

// A plain chunk (chunk_is_plain) by the warps of its team: straight-line code over whole rounds, with the least state
// a warp keeps across them, so that the loop stays in registers. Whether the team stops.
template <int DT, int K, bool kCh>
SZ_DEV bool team_chunk_plain(const DecodeArgs& a, TeamShared& sh, uint8_t* area, const ChunkInfo& ci,
                             const TeamChunkAt<DT, K>& at, uint32_t parity, uint32_t want) {
  using T = Dt<DT>;
  using L = Lane<DT>;
  constexpr uint32_t VB = T::W / 8, NG = L::kGroups, VR = L::kRoundValues, VL = L::kValues;
  constexpr int kRestWords = L::kRestWords, kCodeWords = (NG * K + 3) / 4, kRawWords = VL * T::E / 32;
  const unsigned lane = simt::lane_id();
  const uint32_t NT = sh.team, m = simt::warp_id() % NT;
  const uint32_t CB = ci.L * VB, X = ci.X;
  const bool lh = (sh.h.flags & layout::kFlagChecksums) != 0;  // LH32: chunk_is_plain excludes H32
  uint8_t* const escb = area;
  uint8_t* const ostage = area + kTeamEscBytes;
  const uint32_t cs = kCh ? (uint32_t)(at.first % sh.ch.period) : 0;  // the channel of the chunk's value 0
  LhState ls = lh && NT == 1 ? lh_begin(sh.keys[lane].l) : lh_zero();  // a team adds its sums to the initial values
  bool bad = false;
  const uint8_t* const es = escb + ((uintptr_t)at.lists & 15u);
  auto list = [&](uint32_t i) { return (uint32_t)es[i]; };
  if (X > 0) {  // the lists' 16-byte blocks into this warp's buffer, then §4.5 on this warp's share of them
    const uintptr_t a0 = (uintptr_t)at.lists & ~(uintptr_t)15;
    const uint32_t nb = (uint32_t)((((uintptr_t)at.lists + 3 * X + 15) & ~(uintptr_t)15) - a0) / 16;
    for (uint32_t i = lane; i < nb; i += 32)
      reinterpret_cast<uint4*>(escb)[i] = *reinterpret_cast<const uint4*>(a0 + 16 * (uintptr_t)i);
    simt::syncwarp();
    const uint32_t per = (X + NT - 1) / NT, i0 = m * per < X ? m * per : X, i1 = i0 + per < X ? i0 + per : X;
    bad = lists_bad<DT, K, kCh>(list, X, i0, i1, ci.L, sh.in_cb, sh.ch, cs);
  }
  uint32_t cursor = 0;
  for (uint32_t r = m; r < ci.NR && !bad; r += NT) {
    auto put = [&](int t, uint4 v) { *reinterpret_cast<uint4*>(ostage + swz(4 * lane + t)) = v; };
    uint32_t rest[kRestWords];
    load_words(at.rest + r * (VR / 8) * T::R + lane * L::kRestBytes, rest);
    if (ci.raw) {
      uint32_t ew[kRawWords];
      load_words(at.rec + r * (VR / 8) * T::E + lane * NG * T::E, ew);
      decode_lane<DT, true>(ew, rest, reinterpret_cast<const uint8_t*>(sh.pair), K, put);
    } else {
      uint32_t cwb[kCodeWords], cw[NG];
      load_words(at.rec + r * (VR / 8) * K + lane * NG * K, cwb);
      code_words<K>(cwb, cw);
      const uint32_t c0 = kCh ? (cs + r * VR + lane * VL) % sh.ch.period : 0;
      if (decode_coded_lane<DT, K, kCh>(cw, rest, sh.pair, sh.ch, c0, put)) bad = true;
    }
    simt::syncwarp();
    if (X > 0) {
      patch_round<DT, kCh>(list, X, &cursor, r, VR, NT, ostage, sh.h.codebook[0], sh.ch, cs, &bad);
      simt::syncwarp();
    }
    uint64_t plo[4], phi[4];
    lane_pieces<true>(ostage, plo, phi);
    if (lh) lh_round<false>(ls, plo, phi, sh.keys[lane].l, r, CB);
    store_round(sh.dst, at.first * VB + (uint64_t)r * kRoundBytes, kRoundBytes, plo, phi);
    simt::syncwarp();  // the stage is free again
    bad = simt::any(bad);
  }
  return team_meet(a, sh, at.first * VB, CB, parity, bad, ls, 0, lh, want);
}

// Any other chunk (partial, near the frame buffer's edges, long escape lists, H32, or damaged) by the warps of its
// team, every check of §4 made: out of line, so that its state stays out of the plain path's registers. Whether the
// team stops.
template <int DT, int K, bool kCh>
SZ_NOINLINE bool team_chunk_general(const DecodeArgs& a, TeamShared& sh, uint8_t* area, uint64_t c, uint64_t prev,
                                    uint64_t cur, uint32_t parity, uint32_t want) {
  using T = Dt<DT>;
  using L = Lane<DT>;
  using P = DecodeTeamPolicy;
  constexpr uint32_t VB = T::W / 8, VL = L::kValues, NG = L::kGroups, VR = L::kRoundValues;
  constexpr int kRestWords = L::kRestWords, kCodeWords = (NG * K + 3) / 4, kRawWords = VL * T::E / 32;
  constexpr int kColdWords = kCodeWords > kRawWords ? kCodeWords : kRawWords;
  const Header& h = sh.h;
  const unsigned lane = simt::lane_id();
  const uint32_t NT = sh.team, m = simt::warp_id() % NT;
  uint8_t* const escb = area;
  uint8_t* const ostage = area + kTeamEscBytes;
  const uint8_t* const lo = sh.src;
  const uint8_t* const hi = sh.src + sh.src_size;
  const bool cks = (h.flags & layout::kFlagChecksums) != 0, lh = lane_hash(h.flags);
  const Channels ch = sh.ch;
  const uint32_t NC = kCh ? ch.period : 1;
  const ChunkKeys& keys = sh.keys[lane];
  const ChunkInfo ci = chunk_info<DT, K>(h, c, prev, cur);
  const uint64_t first = c << h.chunk_log2;
  const uint32_t CB = ci.L * VB, X = ci.raw ? 0 : ci.X;
  const bool hash_rounds = cks && hash_in_rounds(lh, CB);
  XxhState hs = xxh_begin();
  LhState ls = lh && NT == 1 ? lh_begin(keys.l) : lh_zero();
  bool bad = !ci.ok;
  if (ci.ok) {
    const uint32_t Gn = (ci.L + 7) / 8, G = Gn * K, B = ci.raw ? (uint32_t)T::E : (uint32_t)K;
    const uint8_t* const rest_c = sh.src + h.rest_off + first / 8 * T::R;
    const uint8_t* const rec = sh.src + h.exp_off + ci.begin;
    const uint8_t* const eg = rec + G;  // the escape lists in the frame
    const bool fast =
        words_inside(rest_c, (uint64_t)Gn * T::R, lo, hi) && words_inside(rec, (uint64_t)Gn * B, lo, hi);
    const bool staged_lists = X <= P::kEscapeCap;
    if (X > 0 && staged_lists) stage_frame_lanes(escb, eg, 3 * X, lo, hi);
    const uint8_t* const es = escb + ((uintptr_t)eg & 15u);
    auto in_smem = [&](uint32_t i) { return (uint32_t)es[i]; };
    auto in_frame = [&](uint32_t i) { return frame_byte(eg + i); };
    const uint32_t cs = kCh ? (uint32_t)(first % NC) : 0;  // the channel of the chunk's value 0
    simt::syncwarp();  // the lists' copy
    if (X > 0) {  // §4.5 on this warp's share of the lists (the code-0 check is in the patch)
      const uint32_t per = (X + NT - 1) / NT, i0 = m * per < X ? m * per : X, i1 = i0 + per < X ? i0 + per : X;
      if (staged_lists ? lists_bad<DT, K, kCh>(in_smem, X, i0, i1, ci.L, sh.in_cb, ch, cs)
                       : lists_bad<DT, K, kCh>(in_frame, X, i0, i1, ci.L, sh.in_cb, ch, cs))
        bad = true;
    }
    uint32_t cursor = 0;
    for (uint32_t r = m; r < ci.NR && !bad; r += NT) {
      const uint32_t rvals = ci.L - r * VR < VR ? ci.L - r * VR : VR, rb = rvals * VB;
      const uint32_t v0 = r * VR + lane * VL;
      const uint32_t nv = v0 >= ci.L ? 0 : (ci.L - v0 < VL ? ci.L - v0 : VL);
      auto put = [&](int t, uint4 v) { *reinterpret_cast<uint4*>(ostage + swz(4 * lane + t)) = v; };
      if (nv > 0) {
        const uint8_t* const rp = rest_c + r * (VR / 8) * T::R + lane * L::kRestBytes;
        const uint8_t* const cp = rec + r * (VR / 8) * B + lane * NG * B;
        const uint32_t gl = (nv + 7) / 8;  // groups of the lane inside the chunk
        uint32_t rest[kRestWords];
        if (ci.raw) {
          uint32_t ew[kRawWords];
          if (fast && nv == VL) {
            load_words(rp, rest);
            load_words(cp, ew);
          } else {
            const LaneWords<kRestWords, kColdWords> w =
                lane_words_cold<T::R, kRestWords, kColdWords>(rp, gl * T::R, cp, gl * T::E, T::E, nv, gl);
            if (w.bad) bad = true;
#pragma unroll
            for (int i = 0; i < kRestWords; ++i) rest[i] = w.rest[i];
#pragma unroll
            for (int i = 0; i < kRawWords; ++i) ew[i] = w.codes[i];
          }
          decode_lane<DT, true>(ew, rest, reinterpret_cast<const uint8_t*>(sh.pair), K, put);
        } else {
          uint32_t cwb[kCodeWords], cw[NG];
          if (fast && nv == VL) {
            load_words(rp, rest);
            load_words(cp, cwb);
          } else {
            const LaneWords<kRestWords, kColdWords> w =
                lane_words_cold<T::R, kRestWords, kColdWords>(rp, gl * T::R, cp, gl * K, K, nv, gl);
            if (w.bad) bad = true;
#pragma unroll
            for (int i = 0; i < kRestWords; ++i) rest[i] = w.rest[i];
#pragma unroll
            for (int i = 0; i < kCodeWords; ++i) cwb[i] = w.codes[i];
          }
          code_words<K>(cwb, cw);
          if (decode_coded_lane<DT, K, kCh>(cw, rest, sh.pair, ch, kCh ? (cs + v0) % NC : 0, put)) bad = true;
        }
      }
      simt::syncwarp();
      if (X > 0) {
        if (staged_lists) patch_round<DT, kCh>(in_smem, X, &cursor, r, rvals, NT, ostage, h.codebook[0], ch, cs, &bad);
        else patch_round<DT, kCh>(in_frame, X, &cursor, r, rvals, NT, ostage, h.codebook[0], ch, cs, &bad);
        simt::syncwarp();
      }
      uint64_t plo[4], phi[4];
      lane_pieces<true>(ostage, plo, phi);
      if (hash_rounds) {
        if (lh) lh_add_round(ls, plo, phi, keys.l, r, CB);
        else xxh_add_round(hs, plo, phi, keys.x, r, ci.NR, CB);
      }
      store_round(sh.dst, first * VB + (uint64_t)r * kRoundBytes, rb, plo, phi);
      simt::syncwarp();  // the stage is free again
      bad = simt::any(bad);
    }
  }
  return team_meet(a, sh, first * VB, CB, parity, bad, ls, hs.acc, hash_rounds, want);
}

// The chunks of a team: chunk c = the team's index, + all teams, ...; warp m of the team takes rounds m, m + NT, ...
// Each chunk is plain (team_chunk_plain) or not (team_chunk_general), the same in every warp of the team.
template <int DT, int K, bool kCh>
SZ_NOINLINE void decode_team_chunks(const DecodeArgs& a, TeamShared& sh, uint8_t* area) {
  using P = DecodeTeamPolicy;
  const Header& h = sh.h;
  const uint32_t NT = sh.team, per_cta = (uint32_t)P::kWarps / NT;  // teams in a CTA
  const uint32_t m = simt::warp_id() % NT;
  const uint64_t teams = sh.ctas * per_cta;
  const bool cks = (h.flags & layout::kFlagChecksums) != 0;
  // The plain chunks in an inner loop with no call in it, so that what the loop keeps stays in registers; a chunk
  // that is not plain leaves it for team_chunk_general.
  uint64_t c = (uint64_t)simt::block_id() * per_cta + simt::warp_id() / NT;
  uint32_t parity = 0;
  while (c < h.n_chunks) {
    uint64_t prev, cur;
    uint32_t want;
    for (;; c += teams, parity ^= 1u) {
      if (c >= h.n_chunks) return;
      const uint8_t* const idx = sh.src + h.index_off;
      prev = c ? load_entry(idx + 8 * (c - 1)) : 0;
      cur = load_entry(idx + 8 * c);
      const uint8_t* const ckp = sh.src + h.checksum_off + 4 * c;
      want = !cks || m != 0                ? 0u
             : ((uintptr_t)ckp & 3u) == 0 ? *reinterpret_cast<const uint32_t*>(ckp)
                                          : layout::load_u32(ckp);
      const ChunkInfo ci = chunk_info<DT, K>(h, c, prev, cur);
      const TeamChunkAt<DT, K> at(sh, c, ci);
      if (!chunk_is_plain<DT, K>(sh, ci, at)) break;
      if (team_chunk_plain<DT, K, kCh>(a, sh, area, ci, at, parity, want)) return;
    }
    if (team_chunk_general<DT, K, kCh>(a, sh, area, c, prev, cur, parity, want)) return;
    c += teams;
    parity ^= 1u;
  }
}

// The team agent as decode_frame sees it.
struct TeamAgent {
  using Shared = TeamShared;
  static constexpr uint32_t kSharedBytes = kTeamSharedBytes, kWarpBytes = kTeamWarpBytes;
  // Warps per chunk: as many as a full chunk has rounds, up to kMaxTeam (and 1 for H32 checksums).
  SZ_DEV static uint32_t team(const Header& h, uint64_t /*warps*/, uint64_t per_cta) {
    if ((h.flags & layout::kFlagChecksums) != 0 && !lane_hash(h.flags)) return 1;
    const uint64_t vb = layout::dtype_traits(h.dtype).value_bits / 8;
    const uint64_t nr = ((1ull << h.chunk_log2) * vb + kRoundBytes - 1) / kRoundBytes;  // a full chunk's rounds
    uint32_t t = DecodeTeamPolicy::kMaxTeam;
    while (t > 1 && (t > nr || per_cta % t != 0)) t /= 2;
    return t;
  }
  template <int DT, int K, bool kCh>
  SZ_DEV static void chunks(const DecodeArgs& a, Shared& sh, uint8_t* area) {
    decode_team_chunks<DT, K, kCh>(a, sh, area);
  }
};

}  // namespace cuda
}  // namespace splitzip
