// agent/encode.cuh — the encoder of docs/FORMAT.md §4 on a GPU: one warp encodes one chunk, in one pass.
//
// A warp takes a chunk id from the workspace's ticket counter (chunks are taken in order, so every chunk a warp
// waits for is held by a running warp) and streams the chunk's input through a ring of 2 KiB rounds in shared memory
// (a bulk copy per round, or cp.async pieces where the input is not whole aligned rounds; EncodePolicy::kRing rounds
// in flight). Per round, lane l owns 64 consecutive bytes (dtype.cuh): it
// splits them into rest fields, written through a small stage to their fixed place in the rest section (§4.4), and
// codes plus an escape mask; codes and escapes (in position order, from a warp scan of the lanes' counts) go to the
// warp's record in shared memory; the round also feeds the chunk checksum (warp/xxh3_rounds.cuh) from the same
// shared-memory copy. Then the warp publishes its record size and goes on with its next chunk, into its other
// record area; after that chunk's rounds it looks back over the previous chunk's predecessors for that record's
// offset (warp/workspace.cuh: they have had a chunk's time to publish, so the warp seldom waits) and copies the
// record out (§4.5), followed by its index entry (§4.3), its checksum (§4.6) and, for the last chunk, the header. A
// chunk whose record is raw (§4.7), or whose coded record does not fit a shared-memory record area (more than
// EncodePolicy::kStagedValues values, or more escapes than the area holds besides the codes), is finished at once,
// by a second pass over its input after the look-back. A call with few chunks runs a kernel of its own in which a
// team of warps takes each chunk, each warp some of its rounds (encode_teams).
#pragma once

#include "cuda/agent/header.cuh"
#include "cuda/dtype.cuh"
#include "cuda/policy.cuh"
#include "cuda/warp/io.cuh"
#include "cuda/warp/workspace.cuh"
#include "cuda/warp/lh32_rounds.cuh"
#include "cuda/warp/xxh3_rounds.cuh"

namespace splitzip {
namespace cuda {

// Everything the encoder needs, resolved and checked on the host.
struct EncodeArgs {
  Span src;
  uint8_t* dst;
  uint64_t n, n_chunks;
  uint64_t index_off, checksum_off, rest_off, exp_off;
  uint32_t dtype, k, count, chunk_log2, flags;
  uint32_t team;  // warps per chunk (encode_team): 1, or a team kernel's team size
  uint8_t codebook[16];
  Channels ch;  // channel windows (a version 2 frame, §4.9) when ch.bases is set; then the book reference:
  uint64_t book_id;
  uint32_t tensor;
  WsHeader* ws;
  uint64_t* frame_size;
};

// The header of the frame an EncodeArgs describes (version 1, or version 2 with channel windows).
SZ_DEV void write_frame_header(const EncodeArgs& a, uint64_t n, uint64_t exp_size) {
  write_header(a.dst, a.dtype, a.k, a.chunk_log2, a.flags, a.count, a.codebook, n, exp_size,
               a.ch.bases != nullptr, a.book_id, a.tensor, a.ch.period);
}

// A lane's codes and escapes by the frame's mapping: the per-slot tables of its codebook, or (kCh) its channel
// windows (c0: the channel of the lane's first value). kCh is a template flag through the encoder, so that codebook
// frames run code with no trace of the windows' forms (their registers and schedule are their own).
template <int DT, int K, bool kCh>
SZ_DEV void lane_encode(const EncodeArgs& a, const uint32_t w[16], const uint8_t* tab, uint32_t c0,
                        uint32_t rest[Lane<DT>::kRestWords], uint32_t codes[Lane<DT>::kGroups], uint64_t* esc) {
  if constexpr (kCh) {
    if constexpr (DT == 1) encode_lane_bf16_ch<K>(w, a.ch, c0, rest, codes, esc);
    else encode_lane_ch<DT, K>(w, a.ch, c0, rest, codes, esc);
  } else {
    if constexpr (Fp8Form<DT, K>::kOn)
      encode_lane_fp8<DT, K>(w, reinterpret_cast<const uint32_t*>(tab), rest, codes, esc);
    else
      encode_lane<DT, K>(w, tab, rest, codes, esc);
  }
}

template <int DT>
struct EncodeShape {
  using P = EncodePolicy;
  static constexpr uint32_t kRestStage = Lane<DT>::kRoundValues / 8 * Dt<DT>::R + 16;
  static constexpr uint32_t kBarBytes = (P::kRing * 8 + 15) / 16 * 16;  // the ring slots' mbarriers
  static constexpr uint32_t kRecordsOff = P::kRing * kRoundBytes + kRestStage;
  static constexpr uint32_t kWarpBytes = kRecordsOff + P::kRecords * P::kRecordBytes + kBarBytes;
  static_assert(kWarpBytes % 16 == 0 && P::kRecordBytes % 16 == 0, "warp areas and records stay 16-byte aligned");
};
template <int DT, int K>
constexpr size_t encode_smem_bytes() {
  return EncEntry<DT, K>::kTableBytes + (size_t)EncodePolicy::kWarps * EncodeShape<DT>::kWarpBytes;
}

// Reads bytes of a Span for xxh3_64_warp.
struct SpanFetch {
  const Span* span;
  uint64_t base;
  SZ_DEV uint8_t byte(uint64_t o) const { return span->byte_at(base + o); }
  SZ_DEV uint64_t word(uint64_t o) const {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= (uint64_t)span->byte_at(base + o + i) << (8 * i);
    return v;
  }
};

// N words to shared memory at p (4-byte aligned; 16-byte stores where the offset allows, which N tells).
template <int N>
SZ_DEV void store_words(uint8_t* p, const uint32_t w[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i)
      reinterpret_cast<uint4*>(p)[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
  } else if constexpr (N % 2 == 0) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) reinterpret_cast<uint2*>(p)[i] = make_uint2(w[2 * i], w[2 * i + 1]);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) reinterpret_cast<uint32_t*>(p)[i] = w[i];
  }
}

// The XXH3-64 of bytes [base, base + len) of a Span, by the warp (a frame's short or partial last chunk: the cold
// path, out of line).
SZ_NOINLINE uint64_t hash_span(const Span& s, uint64_t base, uint64_t len) {
  return xxh3::xxh3_64_warp(SpanFetch{&s, base}, len);
}

// Whether a chunk of CB bytes is hashed round by round as it passes (XXH3's long hash); shorter ones are hashed
// from memory by hash_span.
SZ_DEV bool hashed_in_rounds(uint32_t CB) { return CB > 240; }

// The checksum of a chunk of CB bytes at `base` of s: from the rounds' state (only the final stripe of a chunk
// that is not whole stripes is read again, one load per lane) or, for a short chunk, by hash_span.
SZ_DEV uint64_t chunk_hash(XxhState hs, const XxhKeys& keys, const Span& s, uint64_t base, uint32_t CB) {
  if (!hashed_in_rounds(CB)) return hash_span(s, base, CB);
  if (CB % 64 != 0) xxh_final_stripe(hs, keys, SpanFetch{&s, base}, CB);
  return xxh_finish(hs, keys, CB);
}

// Whether a frame's chunk checksums are LH32 (§4.6.1) rather than H32.
SZ_DEV bool lane_hash(uint32_t flags) { return (flags & layout::kFlagLaneHash) != 0; }
// Whether a chunk's checksum is computed from its rounds as they pass: always for LH32, above 240 bytes for H32.
SZ_DEV bool hash_in_rounds(bool lane, uint32_t CB) { return lane || hashed_in_rounds(CB); }

// A chunk's checksum entry from the state its rounds left: LH32 from the lanes' accumulators (acc, acc1), or H32
// from XXH3's (acc; chunk_hash).
SZ_DEV uint32_t chunk_checksum(bool lane, uint64_t acc, uint64_t acc1, const ChunkKeys& keys, const Span& s,
                               uint64_t base, uint32_t CB) {
  if (lane) return lh_finish(LhState{acc, acc1}, CB);
  return (uint32_t)chunk_hash(XxhState{acc}, keys.x, s, base, CB);
}

SZ_DEV void cp_wait_pending(uint32_t pending) {
  switch (pending) {
    case 0: simt::cp_async_wait<0>(); break;
    case 1: simt::cp_async_wait<1>(); break;
    case 2: simt::cp_async_wait<2>(); break;
    default: simt::cp_async_wait<3>(); break;
  }
}

// The lane's 16 words from its 64 bytes of a round slot (linear: staged by bulk copies).
SZ_DEV void lane_words(const uint8_t* slot, uint32_t w[16]) {
  const unsigned lane = simt::lane_id();
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint4 q = *reinterpret_cast<const uint4*>(slot + 64u * lane + 16u * i);
    w[4 * i] = q.x;
    w[4 * i + 1] = q.y;
    w[4 * i + 2] = q.z;
    w[4 * i + 3] = q.w;
  }
}
// The lane's coalesced pieces l + 32 t of a round as two words each (for the checksum), from a linear round slot
// or (kSwizzled) a stage laid out by swz.
template <bool kSwizzled>
SZ_DEV void lane_pieces(const uint8_t* slot, uint64_t lo[4], uint64_t hi[4]) {
  const unsigned lane = simt::lane_id();
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const uint32_t u = lane + 32 * t;
    const uint4 q = *reinterpret_cast<const uint4*>(slot + (kSwizzled ? swz(u) : 16u * u));
    lo[t] = (uint64_t)q.x | ((uint64_t)q.y << 32);
    hi[t] = (uint64_t)q.z | ((uint64_t)q.w << 32);
  }
}

// Keeps the codes and escapes of the first nv values of a lane (the end of the last chunk).
template <int DT, int K>
SZ_DEV void mask_lane(uint32_t nv, uint32_t codes[Lane<DT>::kGroups], uint64_t* esc) {
  constexpr int NG = Lane<DT>::kGroups;
#pragma unroll
  for (int g = 0; g < NG; ++g) {
    const int v = (int)nv - 8 * g;
    if (v <= 0) codes[g] = 0;
    else if (v < 8) codes[g] &= (1u << (K * v)) - 1u;
  }
  if (nv < 64) *esc &= (1ull << nv) - 1ull;
}

// Stores the codes of a lane's first `groups` groups (K bytes each) at s.
template <int DT, int K>
SZ_DEV void store_codes(uint8_t* s, const uint32_t codes[Lane<DT>::kGroups], uint32_t groups) {
  constexpr int NG = Lane<DT>::kGroups;
  if (NG % 4 == 0 && groups == (uint32_t)NG && ((uintptr_t)s & 3u) == 0) {
#pragma unroll
    for (int q = 0; q < NG / 4; ++q) {
      const uint32_t* c = codes + 4 * q;
      uint32_t* w = reinterpret_cast<uint32_t*>(s + 4 * K * q);
      if constexpr (K == 4) {
        w[0] = c[0]; w[1] = c[1]; w[2] = c[2]; w[3] = c[3];
      } else if constexpr (K == 3) {
        w[0] = simt::prmt(c[0], c[1], 0x4210);
        w[1] = simt::prmt(c[1], c[2], 0x5421);
        w[2] = simt::prmt(c[2], c[3], 0x6542);
      } else if constexpr (K == 2) {
        w[0] = simt::prmt(c[0], c[1], 0x5410);
        w[1] = simt::prmt(c[2], c[3], 0x5410);
      } else {
        w[0] = simt::prmt(simt::prmt(c[0], c[1], 0x0040), simt::prmt(c[2], c[3], 0x0040), 0x5410);
      }
    }
    return;
  }
  for (uint32_t g = 0; g < groups; ++g)
    for (int b = 0; b < K; ++b) s[g * K + b] = (uint8_t)(codes[g] >> (8 * b));
}

// Value j of the lane's 64 bytes, read back from the round slot (escapes need their exponent).
template <int DT>
SZ_DEV uint32_t slot_value(const uint8_t* slot, unsigned lane, uint32_t j) {
  constexpr uint32_t VB = Dt<DT>::W / 8;
  const uint32_t o = j * VB;
  const uint8_t* p = slot + 64u * lane + o;
  if constexpr (VB == 4) return *reinterpret_cast<const uint32_t*>(p);
  else if constexpr (VB == 2) return *reinterpret_cast<const uint16_t*>(p);
  else return *p;
}

// The record of a chunk whose coded record is not in shared memory (raw, or a chunk too large to stage): a second
// pass over its input, round by round, into the record area as each round's codes (and escapes, straight to the
// frame) or raw exponent fields. Out of line: rare, and large.
template <int DT, int K, bool kCh>
SZ_NOINLINE void emit_record(const EncodeArgs& a, uint8_t* ring, uint8_t* rec, const uint8_t* tab, uint64_t in0,
                             uint32_t Lc, uint8_t* out, uint32_t G, uint32_t X, bool raw, uint32_t cs) {
  using T = Dt<DT>;
  using L = Lane<DT>;
  constexpr uint32_t VL = L::kValues, NG = L::kGroups, VR = L::kRoundValues, VB = T::W / 8;
  const unsigned lane = simt::lane_id();
  const uint32_t CB = Lc * VB, NR = (CB + kRoundBytes - 1) / kRoundBytes;
  // Second pass: the input again, round by round, into the record area as this round's codes or raw exponents.
  uint32_t xi = 0;
  for (uint32_t r = 0; r < NR; ++r) {
    const uint32_t rb = CB - r * kRoundBytes < kRoundBytes ? CB - r * kRoundBytes : kRoundBytes;
    stage_round(ring, a.src, in0 + (uint64_t)r * kRoundBytes, rb, nullptr);
    simt::cp_async_commit();
    simt::cp_async_wait<0>();
    simt::syncwarp();
    const uint32_t v0 = r * VR + lane * VL;
    const uint32_t nv = v0 >= Lc ? 0 : (Lc - v0 < VL ? Lc - v0 : VL);
    const uint32_t rvals = Lc - r * VR < VR ? Lc - r * VR : VR;
    uint32_t w[16];
    lane_words(ring, w);
    uint64_t esc = 0;
    if (raw) {
      if (nv > 0) {  // values past the chunk's end were staged as zeros: their fields are 0
        uint32_t ew[VL * T::E / 32];
#pragma unroll
        for (uint32_t i = 0; i < VL * T::E / 32; ++i) ew[i] = 0;
#pragma unroll
        for (uint32_t j = 0; j < VL; ++j) put_bits<T::E>(ew, (int)(j * T::E), exp_of<DT>(value_at<DT>(w, (int)j)));
        uint32_t* d = reinterpret_cast<uint32_t*>(rec + lane * (VL * T::E / 8));
#pragma unroll
        for (uint32_t i = 0; i < VL * T::E / 32; ++i) d[i] = ew[i];
      }
      simt::syncwarp();
      copy_out(out + (uint64_t)r * (VR / 8) * T::E, rec, (rvals + 7) / 8 * T::E);
    } else {
      if (nv > 0) {
        uint32_t rest[L::kRestWords], codes[NG];
        lane_encode<DT, K, kCh>(a, w, tab, kCh ? (cs + v0) % a.ch.period : 0, rest, codes, &esc);
        if (nv < VL) mask_lane<DT, K>(nv, codes, &esc);
        for (uint32_t g = 0; g < (nv + 7) / 8; ++g)
          for (int b = 0; b < K; ++b) rec[(lane * NG + g) * K + b] = (uint8_t)(codes[g] >> (8 * b));
      }
      simt::syncwarp();
      copy_out(out + (uint64_t)r * (VR / 8) * K, rec, (rvals + 7) / 8 * K);
      const uint32_t cnt = (uint32_t)simt::popc64(esc);
      const uint32_t incl = simt::warp_inclusive_sum(cnt);
      uint32_t idx = xi + incl - cnt;
      while (esc) {
        const uint32_t j = (uint32_t)(simt::ffs64(esc) - 1);
        esc &= esc - 1;
        const uint32_t pos = v0 + j;
        out[G + 2 * idx] = (uint8_t)pos;
        out[G + 2 * idx + 1] = (uint8_t)(pos >> 8);
        out[G + 2 * X + idx] = (uint8_t)exp_of<DT>(value_at<DT>(w, (int)j));
        ++idx;
      }
      xi += simt::shfl(incl, 31);
    }
    simt::syncwarp();  // the slot and the record area are reused by the next round
  }
}

// A chunk whose rounds are done and whose record size is published, but whose record is not placed yet.
struct Pending {
  uint64_t c;
  uint64_t acc, acc1;  // the lane's checksum accumulators after the chunk's rounds (XXH3: acc; LH32: both)
  uint32_t X;    // escapes
  uint32_t rec;  // its record area (0 or 1)
};

// The chunk shape that encode_rounds and finish_chunk both derive from the chunk id.
template <int DT, int K>
struct ChunkShape {
  uint64_t first, in0;
  uint32_t Lc, CB, NR, Gn, G, cap, scap, ch0;  // ch0: the channel of the chunk's value 0 (channel windows)
  bool staged;
  SZ_DEV ChunkShape(const EncodeArgs& a, uint64_t c) {
    using T = Dt<DT>;
    const uint32_t S = 1u << a.chunk_log2;
    first = c * S;
    Lc = (uint32_t)(a.n - first < S ? a.n - first : S);
    CB = Lc * (T::W / 8);
    NR = (CB + kRoundBytes - 1) / kRoundBytes;
    Gn = (Lc + 7) / 8;
    G = Gn * K;
    cap = Gn * (T::E - K) / 3;
    staged = S <= EncodePolicy::kStagedValues;
    // Escapes a record area holds: the codes take G of its bytes, so a smaller k leaves room for more.
    const uint32_t room = staged ? (EncodePolicy::kRecordBytes - 64u - G) / 3u : 0u;
    scap = cap < room ? cap : room;
    in0 = first * (T::W / 8);
    ch0 = a.ch.bases ? (uint32_t)(first % a.ch.period) : 0;
  }
  // Whether the record is the raw one (§4.7: same as G + 3 X > Gn E), and whether the coded record is complete in a
  // record area (else the second pass emits it).
  SZ_DEV bool raw(uint32_t X) const { return X > cap; }
  SZ_DEV bool in_area(uint32_t X) const { return !raw(X) && staged && X <= scap; }
  SZ_DEV uint32_t size(uint32_t X) const { return raw(X) ? Gn * Dt<DT>::E : G + 3 * X; }
  // Record area i of a warp's area: the codes, then the escape positions; the escapes' exponents at exps(rec).
  SZ_DEV static uint8_t* record(uint8_t* area, uint32_t i) {
    return area + EncodeShape<DT>::kRecordsOff + i * EncodePolicy::kRecordBytes;
  }
  SZ_DEV uint8_t* exps(uint8_t* rec) const { return rec + ((G + 2 * scap + 3) & ~3u); }
};

// Where a chunk's rest fields go, and whether a lane's go straight to the frame as whole 16-byte pieces (the usual
// case) rather than through the warp's rest stage.
struct RestOut {
  uint8_t* dst;
  bool direct16;
};
template <int DT, int K>
SZ_DEV RestOut rest_out(const EncodeArgs& a, const ChunkShape<DT, K>& shape) {
  uint8_t* const d = a.dst + a.rest_off + shape.first / 8 * Dt<DT>::R;
  return RestOut{d, Lane<DT>::kRestBytes % 16 == 0 && (((uintptr_t)d & 15u) == 0)};
}

// Round r of a chunk from its ring slot: the lane's rest fields to the frame (straight, or through rstage for any
// alignment or a partial round), its codes into the record area rec (staged chunks); returns its escape mask.
template <int DT, int K, bool kCh>
SZ_DEV uint64_t encode_round(const EncodeArgs& a, const ChunkShape<DT, K>& shape, const uint8_t* slot, uint32_t r,
                             uint8_t* rec, uint8_t* rstage, RestOut ro, const uint8_t* tab) {
  using T = Dt<DT>;
  using L = Lane<DT>;
  constexpr uint32_t VL = L::kValues, NG = L::kGroups, VR = L::kRoundValues;
  const unsigned lane = simt::lane_id();
  const uint32_t Lc = shape.Lc;
  const uint32_t v0 = r * VR + lane * VL;
  const uint32_t nv = v0 >= Lc ? 0 : (Lc - v0 < VL ? Lc - v0 : VL);
  const uint32_t rvals = Lc - r * VR < VR ? Lc - r * VR : VR;
  const bool direct = ro.direct16 && rvals == VR;
  uint64_t esc = 0;
  if (nv > 0) {
    uint32_t w[16], rest[L::kRestWords], codes[NG];
    lane_words(slot, w);
    lane_encode<DT, K, kCh>(a, w, tab, kCh ? (shape.ch0 + v0) % a.ch.period : 0, rest, codes, &esc);
    if (nv < VL) mask_lane<DT, K>(nv, codes, &esc);
    if (direct) {  // straight to the rest section, 16 bytes at a time
      uint4* o = reinterpret_cast<uint4*>(ro.dst + (uint64_t)r * (VR / 8) * T::R + lane * L::kRestBytes);
#pragma unroll
      for (int i = 0; i < L::kRestWords / 4; ++i)
        simt::st_stream16(o + i, make_uint4(rest[4 * i], rest[4 * i + 1], rest[4 * i + 2], rest[4 * i + 3]));
    } else {
      store_words<L::kRestWords>(rstage + lane * L::kRestBytes, rest);
    }
    if (shape.staged) store_codes<DT, K>(rec + v0 / 8 * K, codes, (nv + 7) / 8);
  }
  simt::syncwarp();
  if (!direct)  // through the stage: any alignment, or a partial round
    copy_out(ro.dst + (uint64_t)r * (VR / 8) * T::R, rstage, (rvals + 7) / 8 * T::R);
  return esc;
}

// A round's escapes into the record area, in position order: the lane's cnt escapes (mask esc over its values from
// its v0) from index idx on. Only those below the area's capacity scap are written: a chunk with more takes the
// second pass. A step is one find-first-set, three byte stores and the value's reread; lanes of at most 32 values
// keep their mask in one word.
template <int DT>
SZ_DEV void put_escapes(uint64_t esc, uint32_t cnt, uint32_t idx, uint32_t r, const uint8_t* slot, uint8_t* rec,
                        uint32_t G, uint8_t* sexp, uint32_t scap) {
  const unsigned lane = simt::lane_id();
  const uint32_t v0 = r * Lane<DT>::kRoundValues + lane * Lane<DT>::kValues;
  const uint32_t room = idx < scap ? scap - idx : 0;
  const uint32_t n = cnt < room ? cnt : room;
  uint8_t* const pos_at = rec + G + 2 * idx;
  uint8_t* const exp_at = sexp + idx;
  uint32_t lo = (uint32_t)esc, hi = (uint32_t)(esc >> 32);
#pragma unroll 1  // lanes differ in their counts: an unrolled body would run for the largest remainder too
  for (uint32_t q = 0; q < n; ++q) {
    uint32_t j;
    if constexpr (Lane<DT>::kValues <= 32) {
      j = (uint32_t)simt::ffs(lo) - 1;
      lo &= lo - 1;
    } else {  // 64 values: the low word's escapes first
      const bool in_lo = lo != 0;
      const uint32_t w = in_lo ? lo : hi;
      j = (uint32_t)simt::ffs(w) - 1 + (in_lo ? 0u : 32u);
      if (in_lo) lo = w & (w - 1);
      else hi = w & (w - 1);
    }
    const uint32_t pos = v0 + j;
    pos_at[2 * q] = (uint8_t)pos;
    pos_at[2 * q + 1] = (uint8_t)(pos >> 8);
    exp_at[q] = (uint8_t)exp_of<DT>(slot_value<DT>(slot, lane, j));
  }
}

// The rounds of chunk c: rest fields to the frame, codes and escapes into record area rec_i, the checksum's
// accumulator; then the record size is published (chunk 0: its inclusive prefix at once).
// bars: the ring slots' mbarriers; bit s of *parity: the parity of slot s's next phase (kept across chunks).
template <int DT, int K, bool kCh>
SZ_DEV Pending encode_rounds(const EncodeArgs& a, uint64_t c, uint64_t tag, uint8_t* area, uint32_t rec_i,
                             const uint8_t* tab, const ChunkKeys& keys, uint64_t* bars, uint32_t* parity) {
  using P = EncodePolicy;
  const ChunkShape<DT, K> shape(a, c);
  const uint64_t in0 = shape.in0;
  const uint32_t CB = shape.CB, NR = shape.NR, G = shape.G, scap = shape.scap;
  const bool staged = shape.staged;
  const bool lh = lane_hash(a.flags);
  const bool cks = (a.flags & layout::kFlagChecksums) != 0, hash_rounds = cks && hash_in_rounds(lh, CB);
  uint8_t* const ring = area;
  uint8_t* const rstage = ring + P::kRing * kRoundBytes;
  uint8_t* const rec = shape.record(area, rec_i);
  uint8_t* const sexp = shape.exps(rec);
  const RestOut ro = rest_out(a, shape);
  simt::Word128* const state = ws_states(a.ws);

  const uint32_t pre = NR < (uint32_t)P::kRing ? NR : (uint32_t)P::kRing;
  for (uint32_t r = 0; r < pre; ++r) {
    const uint32_t rb = CB - r * kRoundBytes < kRoundBytes ? CB - r * kRoundBytes : kRoundBytes;
    stage_round(ring + r * kRoundBytes, a.src, in0 + (uint64_t)r * kRoundBytes, rb, bars + r);
    simt::cp_async_commit();
  }

  uint32_t X = 0;
  XxhState hs = xxh_begin(cks && !lh);
  LhState ls = lh ? lh_begin(keys.l) : lh_zero();
  for (uint32_t r = 0; r < NR; ++r) {
    const uint32_t left = NR - 1 - r;
    const uint32_t si = r % P::kRing;
    cp_wait_pending(left < (uint32_t)P::kRing - 1 ? left : (uint32_t)P::kRing - 1);
    simt::mbar_wait(bars + si, (*parity >> si) & 1u);
    *parity ^= 1u << si;
    simt::syncwarp();
    uint8_t* const slot = ring + si * kRoundBytes;
    if (hash_rounds) {
      uint64_t lo[4], hi[4];
      lane_pieces<false>(slot, lo, hi);
      if (lh) lh_add_round(ls, lo, hi, keys.l, r, CB);
      else xxh_add_round(hs, lo, hi, keys.x, r, NR, CB);
    }
    const uint64_t esc = encode_round<DT, K, kCh>(a, shape, slot, r, rec, rstage, ro, tab);
    // Escapes of the round in position order: a warp scan of the lanes' counts. Past cap the chunk is raw.
    const uint32_t cnt = (uint32_t)simt::popc64(esc);
    const uint32_t incl = simt::warp_inclusive_sum(cnt);
    if (staged) put_escapes<DT>(esc, cnt, X + incl - cnt, r, slot, rec, G, sexp, scap);
    X += simt::shfl(incl, 31);
    simt::syncwarp();  // the slot and the rest stage are free again
    if (r + P::kRing < NR) {
      const uint32_t nr = r + P::kRing;
      const uint32_t rb = CB - nr * kRoundBytes < kRoundBytes ? CB - nr * kRoundBytes : kRoundBytes;
      stage_round(slot, a.src, in0 + (uint64_t)nr * kRoundBytes, rb, bars + si);
      simt::cp_async_commit();
    }
  }

  // ---- mode, size, publish ----
  publish(state, c, tag, c == 0 ? kFlagInclusive : kFlagAggregate, shape.size(X));
  return Pending{c, lh ? ls.a0 : hs.acc, ls.a1, X, rec_i};
}

// The rest of chunk p.c: its offset (the look-back), its record out (from its record area, or by the second pass,
// which reuses the ring), its index entry, checksum and, for the last chunk, the header.
template <int DT, int K, bool kCh>
SZ_DEV void finish_chunk(const EncodeArgs& a, const Pending& p, uint64_t tag, uint8_t* area, const uint8_t* tab,
                         const ChunkKeys& keys) {
  const unsigned lane = simt::lane_id();
  const uint64_t c = p.c;
  const uint32_t X = p.X;
  const ChunkShape<DT, K> shape(a, c);
  const uint32_t G = shape.G, CB = shape.CB;
  const bool raw = shape.raw(X);
  const uint32_t size = shape.size(X);
  const bool cks = (a.flags & layout::kFlagChecksums) != 0;
  uint8_t* const ring = area;
  uint8_t* const rec = shape.record(area, p.rec);
  simt::Word128* const state = ws_states(a.ws);
  uint64_t prefix = 0;
  if (c > 0) {
    prefix = look_back(state, c, tag);
    publish(state, c, tag, kFlagInclusive, prefix + size);
  }

  // ---- the record ----
  uint8_t* const out = a.dst + a.exp_off + prefix;
  if (shape.in_area(X)) {
    simt::syncwarp();  // the record in shared memory is complete
    copy_out(out, rec, G + 2 * X);
    copy_out(out + G + 2 * X, shape.exps(rec), X);
  } else {
    emit_record<DT, K, kCh>(a, ring, rec, tab, shape.in0, shape.Lc, out, G, X, raw, shape.ch0);
  }

  // ---- index entry, checksum, header ----
  if (lane == 0) {
    const uint64_t mode = raw ? layout::kModeRaw : layout::kModeCoded;
    put_u64(a.dst + a.index_off + 8 * c, (prefix + size) | (mode << layout::kIndexModeShift));
  }
  if (cks) {
    const uint32_t h = chunk_checksum(lane_hash(a.flags), p.acc, p.acc1, keys, a.src, shape.in0, CB);
    if (lane == 0) put_u32(a.dst + a.checksum_off + 4 * c, h);
  }
  if (c == a.n_chunks - 1 && lane == 0) {
    write_frame_header(a, a.n, prefix + size);
    *a.frame_size = a.exp_off + prefix + size;
  }
  simt::syncwarp();  // the record area (and, after a second pass, the ring) is reused
}

// Warps per chunk of an encode call of n_chunks chunks (2^chunk_log2 values of vb bytes) on `warps` resident warps
// (the launcher's choice, EncodeArgs::team): teams of 2 or 4 warps of a CTA when the chunks are few, each warp
// taking at most kRing rounds of a chunk of kTeamMinRounds to kTeamRounds rounds whose coded record a record area
// stages; else 1.
SZ_HD uint32_t encode_team(uint64_t n_chunks, uint32_t chunk_log2, uint32_t vb, uint64_t warps) {
  using P = EncodePolicy;
  const uint64_t S = 1ull << chunk_log2, nr = (S * vb + kRoundBytes - 1) / kRoundBytes;
  if (S > P::kStagedValues || nr > P::kTeamRounds || nr < P::kTeamMinRounds) return 1;
  for (uint32_t t = P::kMaxTeam; t > 1; t /= 2)
    if (t <= nr && (nr + t - 1) / t <= (uint64_t)P::kRing && n_chunks * t <= warps && P::kWarps % t == 0) return t;
  return 1;
}

// A team's shared state, in its lead warp's second record area (a team finishes each chunk before the next, so it
// needs one record area): the chunk tickets (by chunk parity), the escape counts of the chunk's rounds and their
// checksum sums (XXH3: per round and accumulator; LH32: per warp and lane, of the warp's rounds).
struct TeamScratch {
  uint64_t ticket[2];
  uint32_t count[EncodePolicy::kTeamRounds];
  union {
    XxhSums sums[EncodePolicy::kTeamRounds][8];
    LhState lh[EncodePolicy::kMaxTeam][32];
  };
};
static_assert(sizeof(TeamScratch) <= EncodePolicy::kRecordBytes, "a team's scratch fits a record area");

// The kernel's loop for few chunks (encode_team > 1): a team of NT warps of a CTA takes each chunk; warp m stages
// and encodes rounds m, m + NT, ... (at most kRing: all stay in its ring), its rest fields and codes to their
// places. At a first meeting each warp learns the escape counts of the rounds before its own and then writes its
// escapes into the record; after a second the lead warp (m = 0) publishes the record size, chains the rounds'
// checksum sums and finishes the chunk (finish_chunk: look-back, copy-out, index, checksum, header) while the others
// wait for its next ticket.
template <int DT, int K, bool kCh>
SZ_DEV void encode_teams(const EncodeArgs& a, uint64_t tag, uint32_t NT, uint8_t* area, const uint8_t* tab,
                              const ChunkKeys& keys, uint64_t* bars) {
  using P = EncodePolicy;
  const unsigned lane = simt::lane_id();
  const uint32_t m = simt::warp_id() % NT, bar_id = 1 + simt::warp_id() / NT;
  uint8_t* const lead = area - (size_t)m * EncodeShape<DT>::kWarpBytes;
  TeamScratch* const ts = reinterpret_cast<TeamScratch*>(ChunkShape<DT, K>::record(lead, 1));
  uint8_t* const ring = area;
  uint8_t* const rstage = ring + P::kRing * kRoundBytes;
  const bool cks = (a.flags & layout::kFlagChecksums) != 0, lh = lane_hash(a.flags);
  uint32_t parity = 0;
  for (uint32_t cj = 0;; ++cj) {
    if (m == 0 && lane == 0) ts->ticket[cj & 1] = simt::atomic_add(&a.ws->tickets, 1);
    simt::barrier_or(bar_id, 32 * NT, false);  // the ticket; and the lead warp is done with the previous record
    const uint64_t c = ts->ticket[cj & 1];
    if (c >= a.n_chunks) break;
    const ChunkShape<DT, K> shape(a, c);
    const uint32_t CB = shape.CB, NR = shape.NR;
    const bool hash_rounds = cks && hash_in_rounds(lh, CB);
    uint8_t* const rec = shape.record(lead, 0);
    const RestOut ro = rest_out(a, shape);
    LhState ls = lh && m == 0 ? lh_begin(keys.l) : lh_zero();  // the lead's holds the initial values
    const uint32_t mine = m < NR ? (NR - m + NT - 1) / NT : 0;  // this warp's rounds: m + NT i, i < mine
    for (uint32_t i = 0; i < mine; ++i) {
      const uint32_t r = m + NT * i, rb = CB - r * kRoundBytes < kRoundBytes ? CB - r * kRoundBytes : kRoundBytes;
      stage_round(ring + i * kRoundBytes, a.src, shape.in0 + (uint64_t)r * kRoundBytes, rb, bars + i);
      simt::cp_async_commit();
    }
    uint64_t esc[P::kRing];
    uint32_t incl[P::kRing];
#pragma unroll
    for (uint32_t i = 0; i < (uint32_t)P::kRing; ++i) {
      esc[i] = 0;
      incl[i] = 0;
      if (i < mine) {
        const uint32_t r = m + NT * i;
        cp_wait_pending(mine - 1 - i);
        simt::mbar_wait(bars + i, (parity >> i) & 1u);
        parity ^= 1u << i;
        simt::syncwarp();
        const uint8_t* const slot = ring + i * kRoundBytes;
        if (hash_rounds) {
          uint64_t lo[4], hi[4];
          lane_pieces<false>(slot, lo, hi);
          if (lh) {
            lh_add_round(ls, lo, hi, keys.l, r, CB);
          } else {
            const XxhSums su = xxh_sums(lo, hi, keys.x, r, NR, CB);
            if ((lane & 0x14u) == 0) ts->sums[r][xxh_acc_index(lane)] = su;  // one lane per accumulator
          }
        }
        esc[i] = encode_round<DT, K, kCh>(a, shape, slot, r, rec, rstage, ro, tab);
        incl[i] = simt::warp_inclusive_sum((uint32_t)simt::popc64(esc[i]));
        if (lane == 31) ts->count[r] = incl[i];
      }
    }
    if (lh && hash_rounds && m > 0) ts->lh[m][lane] = ls;
    simt::barrier_or(bar_id, 32 * NT, false);  // every round's escape count
    uint32_t X = 0;
    for (uint32_t r = 0; r < NR; ++r) X += ts->count[r];
#pragma unroll
    for (uint32_t i = 0; i < (uint32_t)P::kRing; ++i) {
      if (i < mine) {
        const uint32_t r = m + NT * i;
        uint32_t before = 0;
        for (uint32_t q = 0; q < r; ++q) before += ts->count[q];
        const uint32_t cnt = (uint32_t)simt::popc64(esc[i]);
        put_escapes<DT>(esc[i], cnt, before + incl[i] - cnt, r, ring + i * kRoundBytes, rec, shape.G,
                        shape.exps(rec), shape.scap);
      }
    }
    simt::barrier_or(bar_id, 32 * NT, false);  // the record is complete
    if (m == 0) {
      publish(ws_states(a.ws), c, tag, c == 0 ? kFlagInclusive : kFlagAggregate, shape.size(X));
      XxhState hs = xxh_begin(cks && !lh);
      if (hash_rounds && lh)
        for (uint32_t q = 1; q < NT; ++q) lh_add(ls, ts->lh[q][lane]);
      else if (hash_rounds)
        for (uint32_t r = 0; r < NR; ++r) xxh_chain(hs, ts->sums[r][xxh_acc_index(lane)], keys.x, r, CB);
      finish_chunk<DT, K, kCh>(a, Pending{c, lh ? ls.a0 : hs.acc, ls.a1, X, 0}, tag, lead, tab, keys);
    }
  }
  // Each lead warp draws one ticket past the chunks to leave its loop and one more once its last record is out.
  if (m == 0) {
    const uint64_t teams = (uint64_t)simt::grid_blocks() * (simt::block_threads() / 32) / NT;
    const uint64_t u = ws_ticket(a.ws);
    if (u == a.n_chunks + 2 * teams - 1 && lane == 0) ws_end(a.ws, tag);
  }
}

// The kernel: a persistent grid; every warp takes chunks until the tickets run out. kTeams: the call's chunks are
// few (a.team > 1, which the launcher chose with encode_team) and each is taken by a team of a.team warps; a kernel
// of its own, so that the one-warp-per-chunk kernel of large calls keeps its registers. kCh: the frame maps
// exponents by channel windows (a.ch.bases is set), likewise a kernel of its own.
template <int DT, int K, bool kTeams, bool kCh>
SZ_DEV void encode_warps(const EncodeArgs& a) {
  static_assert(encode_smem_bytes<DT, K>() <= EncodePolicy::kCtaSmemLimit, "kMinBlocks CTAs fit an SM");
  uint8_t* smem = simt::dyn_smem();
  uint8_t* tab = smem;
  uint8_t* area = smem + EncEntry<DT, K>::kTableBytes + simt::warp_id() * EncodeShape<DT>::kWarpBytes;
  simt::launch_dependents();
  // The tables come from the parameters: built while the stream's previous kernel may still run.
  if constexpr (!kCh) build_encode_tables<DT, K>(tab, a.codebook, a.count, a.k);
  simt::grid_dependency_wait();
  WsWords ws{0, 0};
  if (simt::lane_id() == 0) ws = ws_read(a.ws);
  simt::syncthreads();
  if (a.n_chunks == 0) {  // the header is the whole frame
    if (simt::block_id() == 0 && simt::thread_id() == 0) {
      write_frame_header(a, 0, 0);
      *a.frame_size = layout::kHeaderSize;
    }
    return;
  }
  const uint64_t tag = ws_begin(ws);
  if (tag == 0) {  // the workspace was never zero-filled: report through the frame size, change nothing
    if (simt::block_id() == 0 && simt::thread_id() == 0) *a.frame_size = 0;
    return;
  }
  const ChunkKeys my_keys = chunk_keys(lane_hash(a.flags));
  uint64_t* const bars = reinterpret_cast<uint64_t*>(area + EncodeShape<DT>::kWarpBytes - EncodeShape<DT>::kBarBytes);
  init_ring_bars(bars, EncodePolicy::kRing);
  if constexpr (kTeams) {
    encode_teams<DT, K, kCh>(a, tag, a.team, area, tab, my_keys, bars);
  } else {
    uint32_t parity = 0;
    // The previous chunk, when its record waits in its area for the look-back (done after this chunk's rounds).
    Pending pend{0, 0, 0, 0};
    bool pending = false;
    uint32_t next_rec = 0;
    for (;;) {
      const uint64_t t = ws_ticket(a.ws);
      if (t >= a.n_chunks) break;
      const Pending q = encode_rounds<DT, K, kCh>(a, t, tag, area, next_rec, tab, my_keys, bars, &parity);
      if (pending) finish_chunk<DT, K, kCh>(a, pend, tag, area, tab, my_keys);
      pending = ChunkShape<DT, K>(a, t).in_area(q.X);  // derived again: a flag held through the next chunk spills
      if (pending) {
        pend = q;
        next_rec ^= 1u;
      } else {  // the second pass needs the ring now
        finish_chunk<DT, K, kCh>(a, q, tag, area, tab, my_keys);
      }
    }
    if (pending) finish_chunk<DT, K, kCh>(a, pend, tag, area, tab, my_keys);
    // Every warp draws one ticket past the chunks to leave its loop and one more once its last record is out: the
    // warp that draws the call's last ticket knows that no warp still uses the workspace, and resets it.
    const uint64_t warps = (uint64_t)simt::grid_blocks() * (simt::block_threads() / 32);
    const uint64_t u = ws_ticket(a.ws);
    if (u == a.n_chunks + 2 * warps - 1 && simt::lane_id() == 0) ws_end(a.ws, tag);
  }
}

}  // namespace cuda
}  // namespace splitzip
