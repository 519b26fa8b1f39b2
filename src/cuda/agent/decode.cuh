// agent/decode.cuh — the decoder of docs/FORMAT.md §4 on a GPU: one warp (or, for few chunks, a team of warps)
// decodes one chunk, in one pass, and validates everything it reads.
//
// The host does not read the frame: every CTA parses and checks the header itself (§4.1, in the spec's order) and
// dispatches on its dtype and code width. Chunks are dealt to warps statically (warp w: chunks w, w + all warps,
// ...), so a warp knows its next chunk and streams the rounds of all its chunks through one ring of DecodePolicy::
// kRing shared-memory slots: while it decodes a round, the next rounds' rest fields and codes (and, with a chunk's
// first round, its escape lists) are in flight by cp.async, across chunk boundaries. Per chunk: the index entries
// (§4.3) and record size (§4.5) are checked when the chunk is staged, the escape lists (positions strictly
// increasing and inside the chunk, exponents outside the codebook) before its first round. Per round, lane l decodes
// its 64 bytes of output (dtype.cuh) into a shared stage, the round's escapes are patched there (each must have
// code 0), and the round goes out as coalesced 16-byte pieces, which also feed the chunk checksum (§4.6). A CTA keeps
// its first error in shared memory and hands it on with its ticket (ws_finish); the last CTA to finish writes the
// call's status and output size.
// Nothing outside [src, src + src_size) is read and nothing outside the output is written, whatever the frame says.
#pragma once

#include "cuda/agent/encode.cuh"  // SpanFetch, lane_pieces, chunk_checksum

namespace splitzip {
namespace cuda {

struct DecodeArgs {
  const uint8_t* src;
  uint64_t src_size;
  uint8_t* dst;           // contiguous output (pages == nullptr)
  uint64_t dst_capacity;  // its bytes
  void* const* pages;     // paged output: n_pages pages of page_values values, which the frame must hold exactly
  uint64_t page_values;
  uint32_t n_pages;
  int32_t* status;
  uint64_t* dst_size;  // may be null
  WsHeader* ws;
  // The channel book for version 2 frames (bases in device memory), if the caller gave one.
  const uint8_t* book_bases;
  uint64_t book_id;
  uint32_t book_period, book_tensors;
  uint8_t book_dtype, book_k;
};

constexpr uint32_t kFp8Lut = 64;  // DecodeShared::pair index of the FP8 permute table
struct DecodeShared {
  // The code pair table (2^2k entries); FP8 frames with k <= 3 (at most 64 entries) keep their permute table
  // (fp8_decode_lut) in the two entries after it. First, so that it lies at the 1 KiB-aligned start of the dynamic
  // shared memory (decode_lane reads it as such).
  uint32_t pair[256];
  Header h;
  // The frame buffer (the call's src, src_size): the round loop reads it from here, a short shared-memory load, where
  // the call's arguments behind a reference are a global-memory load.
  const uint8_t* src;
  uint64_t src_size;
  Span dst;     // the output as a Span (page sizes in bytes need the frame's dtype)
  Channels ch;  // version 2: the frame's tensor's bases; bases == nullptr for version 1
  int32_t err;  // frame-level status (header, sizes, book): the same in every CTA
  uint64_t first_err;  // the CTA's first chunk error (report), 0: none
  uint32_t team;  // warps per chunk (1, 2 or 4; DecodePolicy::kMaxTeam), the same in every CTA
  uint64_t ctas;  // the CTAs that take part: the first ceil(chunks x team / warps per CTA) of the grid
  uint8_t in_cb[256];
  // The lanes' checksum keys: read from here in each round rather than held in registers for the whole call (14
  // registers a lane that the decoder's round loop needs; 56-byte entries, so a warp's 8-byte reads are conflict-free).
  ChunkKeys keys[32];
  // A team's checksum sums of its chunk's rounds, combined once the team has met: XXH3's by chunk parity, team of the
  // CTA, round and accumulator (then chained); LH32's by chunk parity, warp and lane (then added).
  union {
    XxhSums sums[2][DecodePolicy::kWarps / 2][DecodePolicy::kTeamRounds][8];
    LhState lh[2][DecodePolicy::kWarps][32];
    uint8_t hdr[layout::kHeaderSize];  // before the chunks: the frame's header bytes, which warp 0 loads at once
  };
};
static_assert(offsetof(DecodeShared, pair) == 0, "the pair table starts the decoder's shared state");

// A ring slot: a round's rest fields, then its codes or raw exponent fields, each at the phase of its source, with
// 32 bytes of slack each for the phase and the word reads past the end. The same 2112 bytes for every dtype.
template <int DT>
struct DecSlot {
  static constexpr uint32_t kGroups = Lane<DT>::kRoundValues / 8;
  static constexpr uint32_t kRestBytes = kGroups * Dt<DT>::R + 32;
  static constexpr uint32_t kCodeBytes = kGroups * (Dt<DT>::E > 4 ? Dt<DT>::E : 4) + 32;
  static_assert(kRestBytes + kCodeBytes <= 2112, "a round fits a slot");
  static_assert(kRestBytes % 16 == 0, "the codes' part of a slot starts at a 16-byte boundary (bulk copies)");
};
constexpr uint32_t kDecSlot = 2112;
constexpr uint32_t kDecEscBytes = 3 * DecodePolicy::kEscapeCap + 32;
static_assert(kDecSlot % 16 == 0 && kDecEscBytes % 16 == 0, "slots and escape buffers at 16-byte boundaries");
constexpr uint32_t kDecSharedBytes = (sizeof(DecodeShared) + 15) / 16 * 16;
// A warp's area: the ring slots, two escape-list buffers (this chunk's and the next one's), the output stage, the
// producer's chunk infos (two) and stage sources (StageSrc), and the ring's mbarriers.
constexpr uint32_t kDecInfoBytes = 80, kDecBarBytes = (DecodePolicy::kRing * 8 + 15) / 16 * 16;
constexpr uint32_t kDecWarpBytes =
    DecodePolicy::kRing * kDecSlot + 2 * kDecEscBytes + kRoundBytes + kDecInfoBytes + kDecBarBytes;
static_assert(kDecWarpBytes % 16 == 0, "warp areas stay 16-byte aligned");
constexpr size_t decode_smem_bytes() { return kDecSharedBytes + (size_t)DecodePolicy::kWarps * kDecWarpBytes; }
static_assert(decode_smem_bytes() <= DecodePolicy::kCtaSmemLimit, "kMinBlocks decoder CTAs fit an SM");

// A warp's error, kept in its CTA's first_err if it is the CTA's first (ws_finish hands it on).
SZ_DEV void report(uint64_t* first_err, sz_status s) {
  if (simt::lane_id() == 0) simt::atomic_cas(first_err, 0, (uint64_t)s);
}

// A decoder CTA's end, by thread 0 after the CTA's last barrier: its ticket with its first chunk error (ws_finish);
// the last CTA writes the call's status (the frame's error if any, else the first chunk error) and output size
// (bytes on success) and readies the workspace for the next call.
SZ_DEV void finish_call(WsHeader* ws, uint64_t tag, uint64_t ctas, int32_t frame_err, uint64_t first_err,
                        uint64_t bytes, int32_t* status, uint64_t* dst_size) {
  uint32_t e = 0;
  if (!ws_finish(ws, ctas, (uint32_t)first_err, &e)) return;
  const int32_t st = frame_err != SZ_OK ? frame_err : (int32_t)e;
  *status = st;
  if (dst_size) *dst_size = st == SZ_OK ? bytes : 0;
  ws_end(ws, tag);
}

SZ_DEV uint64_t load_entry(const uint8_t* p) {
  if (((uintptr_t)p & 7u) == 0) return *reinterpret_cast<const uint64_t*>(p);
  return layout::load_u64(p);
}

struct ChunkInfo {
  uint64_t c, begin;
  uint32_t L, NR, X;
  bool raw, ok;
};

// Where the producer's chunk lies in the frame: its rest fields, and its codes (or raw fields) followed by its escape
// lists. Written and read by lane 0, which issues the bulk copies.
struct StageSrc {
  const uint8_t* rest;
  const uint8_t* codes;
};

// Chunk c from its index entries (prev: chunk c - 1's, 0 for c = 0) against §4.3 and §4.5.
template <int DT, int K>
SZ_DEV ChunkInfo chunk_info(const Header& h, uint64_t c, uint64_t prev, uint64_t cur) {
  ChunkInfo ci;
  const uint64_t S = 1ull << h.chunk_log2, first = c * S;
  ci.c = c;
  ci.L = (uint32_t)(h.n - first < S ? h.n - first : S);
  ci.NR = (ci.L * (uint32_t)(Dt<DT>::W / 8) + kRoundBytes - 1) / kRoundBytes;
  const uint64_t mode = cur >> layout::kIndexModeShift, end = cur & layout::kIndexEndMask;
  const uint64_t begin = c ? (prev & layout::kIndexEndMask) : 0;
  const uint64_t Gn = (ci.L + 7) / 8, G = Gn * K, size = end - begin;
  ci.begin = begin;
  ci.raw = mode == layout::kModeRaw;
  ci.X = 0;
  ci.ok = mode <= layout::kModeRaw && end >= begin && end <= h.exp_size && (c + 1 < h.n_chunks || end == h.exp_size);
  if (ci.ok) {
    if (ci.raw) {
      ci.ok = size == Gn * Dt<DT>::E;
    } else {
      // Whole 3-byte escapes, at most one a value: past the 64-bit bound, a 32-bit division by 3 (a multiply).
      ci.ok = size >= G && size - G <= 3ull * ci.L;
      if (ci.ok) {
        const uint32_t e = (uint32_t)(size - G), x = e / 3;
        if (e == 3 * x) ci.X = x;
        else ci.ok = false;
      }
    }
  }
  return ci;
}

// What code 0 decodes to at value p of a chunk whose value 0 is in channel cs (channel-window frames only).
SZ_NOINLINE uint32_t channel_base_at(const Channels& ch, uint32_t cs, uint32_t p) {
  return ch.base((cs + p) % ch.period);
}

// A byte of the frame, out of line: escape lists too long to stage are read in place by this, so that the loops
// over staged lists know that they read shared memory.
SZ_NOINLINE uint32_t frame_byte(const uint8_t* p) { return *p; }

// A value of VB bytes in the output stage, at a multiple of VB.
template <uint32_t VB>
SZ_DEV uint32_t stage_value(const uint8_t* v) {
  if constexpr (VB == 4) return *reinterpret_cast<const uint32_t*>(v);
  else if constexpr (VB == 2) return *reinterpret_cast<const uint16_t*>(v);
  else return *v;
}
template <uint32_t VB>
SZ_DEV void set_stage_value(uint8_t* v, uint32_t x) {
  if constexpr (VB == 4) *reinterpret_cast<uint32_t*>(v) = x;
  else if constexpr (VB == 2) *reinterpret_cast<uint16_t*>(v) = (uint16_t)x;
  else *v = (uint8_t)x;
}

// Bits [bit, bit + width) of a little-endian byte string in shared memory (width <= 24; the cold padding checks
// read the staged bytes, so that no register array is indexed at run time).
SZ_DEV uint32_t bits_at(const uint8_t* p, uint32_t bit, uint32_t width) {
  uint32_t v = 0;
  for (uint32_t b = 0; b < 4; ++b) v |= (uint32_t)p[bit / 8 + b] << (8 * b);
  return (v >> (bit % 8)) & ((1u << width) - 1u);
}

// Out of line: each (dtype, k) gets its own register allocation rather than the union of all of them. kTeams: the
// call gives chunks teams of warps (sh.team > 1); the other instance is the one-warp-per-chunk code of large calls,
// with no trace of the teams. kCh: the frame maps exponents by channel windows (sh.ch.bases is set); likewise an
// instance of its own, so that codebook frames run code with no trace of the windows' forms.
template <int DT, int K, bool kTeams, bool kCh>
SZ_NOINLINE void decode_chunks(const DecodeArgs& a, uint8_t* area) {
  // The CTA's shared state at its fixed place, the start of dynamic shared memory: its fields' addresses are
  // constants the compiler can fold into an LDS's immediate offset, where through a reference argument each is
  // that register plus an offset.
  DecodeShared& sh = *reinterpret_cast<DecodeShared*>(simt::dyn_smem());
  using T = Dt<DT>;
  using L = Lane<DT>;
  using P = DecodePolicy;
  constexpr uint32_t VB = T::W / 8, VL = L::kValues, NG = L::kGroups, VR = L::kRoundValues;
  constexpr uint32_t kCodeWords = (NG * K + 3) / 4 + 1, kRawWords = VL * T::E / 32;
  const Header& h = sh.h;
  const unsigned lane = simt::lane_id();
  // Teams of NT warps of a CTA (decode_warps chose NT): team tm takes chunks tm, tm + teams, ...; its warp m takes
  // rounds m, m + NT, ... of each. With NT = 1 a warp takes whole chunks and chains their checksums as it goes.
  const uint64_t per_cta = simt::block_threads() / 32;
  const uint32_t NT = kTeams ? sh.team : 1u;
  const uint64_t teams = sh.ctas * per_cta / NT, gw = (uint64_t)simt::block_id() * per_cta + simt::warp_id();
  const uint64_t tm = gw / NT;
  const uint32_t m = (uint32_t)(gw % NT), tl = simt::warp_id() / NT;  // tl: the team's index in its CTA
  if (tm >= h.n_chunks) return;
  uint8_t* const ring = area;
  uint8_t* const escb = ring + P::kRing * kDecSlot;
  uint8_t* const ostage = escb + 2 * kDecEscBytes;
  // Addresses from the call's arguments and the header in shared memory, re-read where used rather than held in
  // registers through the loop.
  auto lo = [&] { return sh.src; };
  auto hi = [&] { return sh.src + sh.src_size; };
  auto rest_base = [&] { return sh.src + h.rest_off; };
  auto exp_base = [&] { return sh.src + h.exp_off; };
  auto idx_base = [&] { return sh.src + h.index_off; };
  const uint32_t S = 1u << h.chunk_log2;
  const bool cks = (h.flags & layout::kFlagChecksums) != 0, lh = lane_hash(h.flags);
  const uint32_t cb0 = h.codebook[0];
  const Channels ch = sh.ch;
  const uint32_t NC = kCh ? ch.period : 1;  // channels
  const uint8_t* const pair = reinterpret_cast<const uint8_t*>(sh.pair);
  const ChunkKeys& keys = sh.keys[lane];
  ChunkInfo* const infos = reinterpret_cast<ChunkInfo*>(ostage + kRoundBytes);  // of the producer's chunks j, by j & 1
  StageSrc* const psrc = reinterpret_cast<StageSrc*>(ostage + kRoundBytes + 2 * sizeof(ChunkInfo));
  static_assert(2 * sizeof(ChunkInfo) + sizeof(StageSrc) <= kDecInfoBytes, "two chunk infos and a source fit");
  uint64_t* const bars = reinterpret_cast<uint64_t*>(ostage + kRoundBytes + kDecInfoBytes);  // one per ring slot
  init_ring_bars(bars, P::kRing);

  // ---- producer: stages rounds of this warp's chunks, at most one chunk ahead of the consumer ----
  auto entries = [&](uint64_t c, uint64_t* prev, uint64_t* cur) {
    *cur = load_entry(idx_base() + 8 * c);
    *prev = c ? load_entry(idx_base() + 8 * (c - 1)) : 0;
  };
  // A new producer chunk: its StageSrc, and whether all it stages lies inside the frame buffer (the common case:
  // then each round is bulk copies from the StageSrc addresses, with no per-range checks).
  auto begin_chunk = [&](const ChunkInfo& ci) {
    const uint32_t Gn = (ci.L + 7) / 8, B = ci.raw ? (uint32_t)T::E : (uint32_t)K;
    const uint32_t lists = !ci.raw && ci.X <= P::kEscapeCap ? 3 * ci.X : 0;
    const uint8_t* const rest = rest_base() + ci.c * S / 8 * T::R;
    const uint8_t* const codes = exp_base() + ci.begin;
    if (lane == 0) *psrc = StageSrc{rest, codes};
    return ci.ok && hull_inside(rest, (uint64_t)Gn * T::R, lo(), hi()) &&
           hull_inside(codes, (uint64_t)Gn * B + lists, lo(), hi());
  };
  uint64_t e_prev, e_cur, n_prev = 0, n_cur = 0;
  entries(tm, &e_prev, &e_cur);
  ChunkInfo pinfo = chunk_info<DT, K>(h, tm, e_prev, e_cur);
  bool pinside = begin_chunk(pinfo);
  if (lane == 0) infos[0] = pinfo;
  if (tm + teams < h.n_chunks) entries(tm + teams, &n_prev, &n_cur);  // in flight until the producer gets there
  uint64_t pj = 0;
  uint32_t pr = m, staged = 0, consumed = 0, pslot = 0, cslot = 0, cphase = 0;
  auto consume = [&] {  // the consumer is done with slot cslot
    ++consumed;
    if (++cslot == (uint32_t)P::kRing) {
      cslot = 0;
      cphase ^= 1u;
    }
  };
  // Round r of chunk ci into ring slot si (and, with the warp's first round of it, the chunk's escape lists into
  // ebuf): what lies inside the frame buffer by bulk copies completing on the slot's mbarrier, the rest by the lanes.
  auto stage = [&](const ChunkInfo& ci, uint32_t r, uint32_t si, uint8_t* ebuf) {
    uint8_t* const slot = ring + si * kDecSlot;
    const uint32_t rvals = ci.L - r * VR < VR ? ci.L - r * VR : VR, groups = (rvals + 7) / 8;
    const uint32_t B = ci.raw ? (uint32_t)T::E : (uint32_t)K;
    const bool esc = r == m && !ci.raw && ci.X > 0 && ci.X <= P::kEscapeCap;
    if (pinside) {
      if (lane == 0) {
        const StageSrc src = *psrc;
        const BulkRange q[3] = {
            hull_copy(slot, src.rest + r * (VR / 8) * T::R, groups * T::R),
            hull_copy(slot + DecSlot<DT>::kRestBytes, src.codes + r * (VR / 8) * B, groups * B),
            hull_copy(ebuf, src.codes + (ci.L + 7) / 8 * K, esc ? 3 * ci.X : 0)};
        issue_bulk(bars + si, q, 3);
      }
      return;
    }
    const uint64_t first = ci.c * S;
    const BulkRange q0 = stage_frame(slot, rest_base() + first / 8 * T::R + (uint64_t)r * (VR / 8) * T::R,
                                     groups * T::R, lo(), hi());
    const BulkRange q1 = stage_frame(slot + DecSlot<DT>::kRestBytes,
                                     exp_base() + ci.begin + (uint64_t)r * (VR / 8) * B, groups * B, lo(), hi());
    const BulkRange q2 =
        stage_frame(ebuf, exp_base() + ci.begin + (uint64_t)((ci.L + 7) / 8) * K, esc ? 3 * ci.X : 0, lo(), hi());
    if (lane == 0) {
      const BulkRange q[3] = {q0, q1, q2};
      issue_bulk(bars + si, q, 3);
    }
  };
  auto produce = [&](uint64_t cj) {
    while (staged - consumed < (uint32_t)P::kRing && pinfo.ok) {
      if (pr >= pinfo.NR) {  // a team's warp may have no round in a short last chunk
        const uint64_t nc = tm + (pj + 1) * teams;
        if (pj >= cj + 1 || nc >= h.n_chunks) break;
        pinfo = chunk_info<DT, K>(h, nc, n_prev, n_cur);
        pinside = begin_chunk(pinfo);
        ++pj;
        pr = m;
        if (lane == 0) infos[pj & 1] = pinfo;
        if (nc + teams < h.n_chunks) entries(nc + teams, &n_prev, &n_cur);
        if (!pinfo.ok || pr >= pinfo.NR) continue;
      }
      stage(pinfo, pr, pslot, escb + (pj & 1) * kDecEscBytes);
      pslot = pslot + 1 == (uint32_t)P::kRing ? 0 : pslot + 1;
      ++staged;
      pr += NT;
    }
  };
  produce(0);

  // ---- consumer ----
  for (uint64_t cj = 0;; ++cj) {
    const uint64_t c = tm + cj * teams;
    if (c >= h.n_chunks) break;
    if (kTeams) produce(cj);  // a warp without a round in the previous chunk has not staged this one yet
    simt::syncwarp();  // infos[] written by lane 0
    const ChunkInfo ci = infos[cj & 1];
    if (!ci.ok) {
      report(&sh.first_err, SZ_ERROR_CORRUPT);
      break;
    }
    const uint64_t first = c * S;
    // The chunk's checksum entry, loaded now so that it is in a register when the last round is done: read after
    // the rounds' stores it would be a dependent round trip to memory per chunk.
    const uint8_t* const ckp = sh.src + h.checksum_off + 4 * c;
    const uint32_t want = !cks ? 0u : ((uintptr_t)ckp & 3u) == 0 ? *reinterpret_cast<const uint32_t*>(ckp)
                                                                    : layout::load_u32(ckp);
    const uint32_t CB = ci.L * VB, Gn = (ci.L + 7) / 8, G = Gn * K, X = ci.raw ? 0 : ci.X;
    const uint8_t* const eg = exp_base() + ci.begin + G;  // the escape lists in the frame
    // The lists as staged in shared memory (up to kEscapeCap escapes), else read in place by an out-of-line load:
    // the loops below are instantiated for each, so that the common one reads shared memory by 32-bit addresses.
    const bool staged_lists = X <= P::kEscapeCap;
    const uint8_t* const es = escb + (cj & 1) * kDecEscBytes + ((uintptr_t)eg & 15u);
    auto in_smem = [&](uint32_t i) { return (uint32_t)es[i]; };
    auto in_frame = [&](uint32_t i) { return frame_byte(eg + i); };
    const uint32_t B = ci.raw ? (uint32_t)T::E : (uint32_t)K;
    const uint32_t cs = kCh ? (uint32_t)(first % NC) : 0;  // the channel of the chunk's value 0
    bool bad = false;
    uint32_t cursor = 0;
    XxhState hs = xxh_begin(cks && !lh);
    LhState ls = lh && NT == 1 ? lh_begin(keys.l) : lh_zero();  // a team adds its warps' sums to the initial values
    const bool hash_rounds = cks && hash_in_rounds(lh, CB);
    XxhSums(*const sums)[8] = sh.sums[cj & 1][NT > 1 ? tl : 0];
    for (uint32_t r = m; r < ci.NR; r += NT) {
      simt::mbar_wait(bars + cslot, cphase);
      simt::syncwarp();  // and the lanes' own staging
      const uint8_t* const slot = ring + cslot * kDecSlot;
      // §4.5 on the lists (the code-0 check is in the patch below)
      auto check_lists = [&](const auto& list) {
        uint32_t carry = 0;
        for (uint32_t b0 = 0; b0 < X; b0 += 32) {
          const uint32_t i = b0 + lane;
          const bool valid = i < X;
          uint32_t p = 0, e = 0;
          if (valid) {
            p = list(2 * i) | (list(2 * i + 1) << 8);
            e = list(2 * X + i);
          }
          uint32_t pp = simt::shfl_up(p, 1);
          if (lane == 0) pp = carry;
          const bool in_book = kCh ? valid && p < ci.L && e - ch.base((cs + p) % NC) < (1u << K) : sh.in_cb[e];
          if (valid && (p >= ci.L || (i > 0 && pp >= p) || e >= (1u << T::E) || in_book)) bad = true;
          carry = simt::shfl(p, 31);
        }
      };
      if (r == m && X > 0) {  // every warp of a team checks the lists it patches from
        if (staged_lists) check_lists(in_smem);
        else check_lists(in_frame);
        if (simt::any(bad)) {
          bad = true;
          break;
        }
      }
      const uint32_t rvals = ci.L - r * VR < VR ? ci.L - r * VR : VR, rb = rvals * VB;
      const uint8_t* rest_p =
          slot + (((uintptr_t)(rest_base() + first / 8 * T::R + (uint64_t)r * (VR / 8) * T::R)) & 15u);
      const uint8_t* code_p =
          slot + DecSlot<DT>::kRestBytes + (((uintptr_t)(exp_base() + ci.begin + (uint64_t)r * (VR / 8) * B)) & 15u);
      const uint32_t v0 = r * VR + lane * VL;
      const uint32_t nv = v0 >= ci.L ? 0 : (ci.L - v0 < VL ? ci.L - v0 : VL);
      auto put = [&](int t, uint4 v) { *reinterpret_cast<uint4*>(ostage + swz(4 * lane + t)) = v; };
      if (nv > 0) {
        uint32_t rest[L::kRestWords];
        smem_words<L::kRestWords>(rest_p + lane * L::kRestBytes, rest);
        const uint32_t gl = (nv + 7) / 8;  // groups of the lane inside the chunk
        if (ci.raw) {
          uint32_t ew[kRawWords];
          smem_words<kRawWords>(code_p + lane * (VL * T::E / 8), ew);
          if (nv < VL) {  // keep the fields of the lane's groups inside the chunk, clear the others
            const uint32_t lim = gl * 8 * T::E;
#pragma unroll
            for (uint32_t i = 0; i < kRawWords; ++i)
              if (32 * i >= lim) ew[i] = 0;
              else if (32 * (i + 1) > lim) ew[i] &= (1u << (lim - 32 * i)) - 1u;
            const uint8_t* cp = code_p + lane * (VL * T::E / 8);
            const uint8_t* rp = rest_p + lane * L::kRestBytes;
            for (uint32_t j = nv; j < gl * 8; ++j)
              if (bits_at(cp, j * T::E, T::E) != 0 || bits_at(rp, j * T::R, T::R) != 0) bad = true;
          }
          decode_lane<DT, true>(ew, rest, pair, K, put);
        } else {
          uint32_t cwb[kCodeWords], cw[NG];
          smem_words<kCodeWords>(code_p + lane * NG * K, cwb);
#pragma unroll
          for (uint32_t g = 0; g < NG; ++g) {
            const uint32_t bit = 8 * K * g, i = bit / 32, s = bit % 32;
            uint32_t v = cwb[i] >> s;
            if (s + 8 * K > 32) v |= cwb[i + 1] << (32 - s);
            cw[g] = K == 4 ? v : v & ((1u << (8 * K)) - 1u);
          }
          if (nv < VL) {
#pragma unroll
            for (uint32_t g = 0; g < NG; ++g)
              if (g >= gl) cw[g] = 0;
            const uint8_t* cp = code_p + lane * NG * K;
            const uint8_t* rp = rest_p + lane * L::kRestBytes;
            for (uint32_t j = nv; j < gl * 8; ++j)
              if (bits_at(cp, j * K, K) != 0 || bits_at(rp, j * T::R, T::R) != 0) bad = true;
          }
          if constexpr (kCh) {
            if constexpr (DT == 1) {
              if (decode_lane_bf16_ch<K>(cw, rest, ch, (cs + v0) % NC, put)) bad = true;
            } else if (decode_lane<DT, false, decltype(put), true>(cw, rest, pair, K, put, &ch, (cs + v0) % NC)) {
              bad = true;
            }
          } else if constexpr (Fp8Form<DT, K>::kOn) {
            if (decode_lane_fp8<DT, K>(cw, rest, make_uint2(sh.pair[kFp8Lut], sh.pair[kFp8Lut + 1]), put)) bad = true;
          } else if (decode_lane<DT, false>(cw, rest, pair, K, put)) {
            bad = true;
          }
        }
      }
      simt::syncwarp();
      // The round's escapes: a prefix of the remaining list (positions are sorted), 32 at a time, after those of the
      // rounds that other warps of the team take.
      auto patch = [&](const auto& list) {
        if (NT > 1) {
          for (;;) {
            const uint32_t i = cursor + lane;
            const bool before = i < X && (list(2 * i) | (list(2 * i + 1) << 8)) < r * VR;
            const unsigned sk = simt::ballot(before);
            cursor += (uint32_t)simt::popc(sk);
            if (sk != simt::kFull) break;
          }
        }
        const uint32_t bound = r * VR + rvals;
        for (;;) {
          const uint32_t i = cursor + lane;
          uint32_t p = 0;
          if (i < X) p = list(2 * i) | (list(2 * i + 1) << 8);
          const bool in = i < X && p < bound;
          const unsigned m = simt::ballot(in);
          if (in) {
            const uint32_t o = (p - r * VR) * VB;
            uint8_t* const v = ostage + swz(o / 16) + o % 16;  // value-aligned: pieces are whole values
            uint32_t x = stage_value<VB>(v);
            const uint32_t e0 = kCh ? channel_base_at(ch, cs, p) : cb0;  // what code 0 decodes to there
            if (exp_of<DT>(x) != e0) bad = true;  // the escape's code was not 0
            x = (x & ~(((1u << T::E) - 1u) << T::M)) | (list(2 * X + i) << T::M);
            set_stage_value<VB>(v, x);
          }
          cursor += (uint32_t)simt::popc(m);
          if (m != simt::kFull) break;
        }
      };
      if (X > 0) {
        if (staged_lists) patch(in_smem);
        else patch(in_frame);
        simt::syncwarp();
      }
      uint64_t plo[4], phi[4];
      lane_pieces<true>(ostage, plo, phi);
      if (hash_rounds) {
        if (lh) {
          lh_add_round(ls, plo, phi, keys.l, r, CB);
        } else if (NT == 1) {
          xxh_add_round(hs, plo, phi, keys.x, r, ci.NR, CB);
        } else {
          const XxhSums su = xxh_sums(plo, phi, keys.x, r, ci.NR, CB);
          if ((lane & 0x14u) == 0) sums[r][xxh_acc_index(lane)] = su;  // one lane per accumulator
        }
      }
      const uint64_t ob = first * VB + (uint64_t)r * kRoundBytes;
      uint8_t* g;
      bool whole = rb == kRoundBytes;
      if (sh.dst.pages == nullptr) {  // read from shared memory each round: registers are the scarce resource
        g = sh.dst.base + ob;
      } else {
        uint64_t room;
        g = sh.dst.locate(ob, &room);
        whole = whole && room >= kRoundBytes;
      }
      uint4 pc[4];
#pragma unroll
      for (int t = 0; t < 4; ++t)
        pc[t] = make_uint4((uint32_t)plo[t], (uint32_t)(plo[t] >> 32), (uint32_t)phi[t], (uint32_t)(phi[t] >> 32));
      if (whole && ((uintptr_t)g & 15u) == 0) {
#pragma unroll
        for (int t = 0; t < 4; ++t) simt::st_stream16(g + 16u * (lane + 32 * t), pc[t]);
      } else {
        store_round_pieces(sh.dst, ob, rb, pc[0], pc[1], pc[2], pc[3]);
      }
      simt::syncwarp();  // the stage and the slot are free again
      consume();
      produce(cj);
    }
    // A team meets: its warps' outcomes, and their rounds' output and checksum sums visible to each other.
    if (NT > 1 && lh && hash_rounds) sh.lh[cj & 1][simt::warp_id()][lane] = ls;
    bad = NT == 1 ? simt::any(bad) : simt::barrier_or(1 + tl, 32 * NT, bad);
    if (bad) {
      report(&sh.first_err, SZ_ERROR_CORRUPT);
      break;
    }
    if (cks) {
      // Every warp of a team combines the sums, so that all reach the same verdict.
      if (NT > 1 && hash_rounds && lh) {
        ls = lh_begin(keys.l);
        for (uint32_t q = 0; q < NT; ++q) lh_add(ls, sh.lh[cj & 1][tl * NT + q][lane]);
      } else if (NT > 1 && hash_rounds) {
        for (uint32_t r = 0; r < ci.NR; ++r) xxh_chain(hs, sums[r][xxh_acc_index(lane)], keys.x, r, CB);
      }
      const uint32_t hv = chunk_checksum(lh, lh ? ls.a0 : hs.acc, ls.a1, keys, sh.dst, first * VB, CB);
      if (hv != want) {
        report(&sh.first_err, SZ_ERROR_CHECKSUM);
        break;
      }
    }
  }
  while (consumed < staged) {  // no copy may still land in shared memory when the warp leaves
    simt::mbar_wait(bars + cslot, cphase);
    consume();
  }
  simt::syncwarp();
}

template <int DT, bool kTeams, bool kCh>
SZ_DEV void decode_width(const DecodeArgs& a, DecodeShared& sh, uint8_t* area) {
  switch (sh.h.k) {
    case 1: decode_chunks<DT, 1, kTeams, kCh>(a, area); break;
    case 2: decode_chunks<DT, 2, kTeams, kCh>(a, area); break;
    case 3: decode_chunks<DT, 3, kTeams, kCh>(a, area); break;
    default:
      if constexpr (Dt<DT>::E > 4) decode_chunks<DT, 4, kTeams, kCh>(a, area);
      break;
  }
}
template <int DT>
SZ_DEV void decode_dtype(const DecodeArgs& a, DecodeShared& sh, uint8_t* area) {
  if (sh.ch.bases) {
    if (sh.team > 1) decode_width<DT, true, true>(a, sh, area);
    else decode_width<DT, false, true>(a, sh, area);
  } else {
    if (sh.team > 1) decode_width<DT, true, false>(a, sh, area);
    else decode_width<DT, false, false>(a, sh, area);
  }
}

SZ_DEV void decode_warps(const DecodeArgs& a) {
  uint8_t* smem = simt::dyn_smem();
  DecodeShared& sh = *reinterpret_cast<DecodeShared*>(smem);
  uint8_t* area = smem + kDecSharedBytes + simt::warp_id() * kDecWarpBytes;
  simt::launch_dependents();
  simt::grid_dependency_wait();  // the frame may be the stream's previous kernel's output
  // Warp 0 loads the header, two bytes a lane, while every warp's lane 0 reads the workspace words: one round trip
  // for both, before thread 0 parses and checks the header from shared memory.
  WsWords ws{0, 0};
  if (simt::lane_id() == 0) ws = ws_read(a.ws);
  if (simt::warp_id() == 0) {
    const unsigned l = simt::lane_id();
    static_assert(layout::kHeaderSize == 64, "a warp loads the header two bytes a lane");
    if (a.src_size >= layout::kHeaderSize) {
      const uint8_t b0 = a.src[2 * l], b1 = a.src[2 * l + 1];
      sh.hdr[2 * l] = b0;
      sh.hdr[2 * l + 1] = b1;
    }
    simt::syncwarp();
  }
  if (simt::thread_id() == 0) {
    sz_status st = parse_header(sh.hdr, a.src_size, &sh.h);
    sh.src = a.src;
    sh.src_size = a.src_size;
    sh.ch = Channels{nullptr, 1};
    if (st == SZ_OK && sh.h.channels) {  // §4.1 step 8, before the output's size as on the CPU
      if (!a.book_bases || a.book_id != sh.h.book_id || a.book_dtype != sh.h.dtype || a.book_k != sh.h.k ||
          a.book_period != sh.h.period || sh.h.tensor >= a.book_tensors)
        st = SZ_ERROR_BOOK_MISMATCH;
      else
        sh.ch = Channels{a.book_bases + (uint64_t)sh.h.tensor * sh.h.period, sh.h.period};
    }
    if (st == SZ_OK) {
      const uint64_t vb = layout::dtype_traits(sh.h.dtype).value_bits / 8, bytes = sh.h.n * vb;
      sh.dst = Span{};
      sh.dst.base = a.dst;
      if (a.pages) {
        const uint64_t have = (uint64_t)a.n_pages * a.page_values;
        if (sh.h.n > have) st = SZ_ERROR_DST_TOO_SMALL;
        else if (sh.h.n < have) st = SZ_ERROR_INVALID_ARGUMENT;
        else if (have > 0) sh.dst.set_pages(a.pages, a.page_values * vb);
      } else if (bytes > a.dst_capacity) {
        st = SZ_ERROR_DST_TOO_SMALL;
      }
      if (st == SZ_OK && sh.h.n_chunks == 0 && sh.h.exp_size != 0) st = SZ_ERROR_CORRUPT;
    }
    sh.err = st;
    sh.first_err = 0;
    // The host sizes the grid for the most chunks the buffer could hold; only the CTAs that have chunks take part
    // (one, to report, when the header is bad), the others leave at once. Few chunks get teams of warps: the
    // largest team (at most a full chunk's rounds) that still leaves a warp for every round of a team.
    const uint64_t per_cta = simt::block_threads() / 32, warps = (uint64_t)simt::grid_blocks() * per_cta;
    uint32_t team = 1;
    if (st == SZ_OK) {
      const uint64_t vb = layout::dtype_traits(sh.h.dtype).value_bits / 8;
      const uint64_t nr = ((1ull << sh.h.chunk_log2) * vb + kRoundBytes - 1) / kRoundBytes;  // a full chunk's rounds
      for (uint32_t t = DecodePolicy::kMaxTeam; t > 1 && team == 1; t /= 2)
        if (t <= nr && nr >= DecodePolicy::kTeamMinRounds && nr <= DecodePolicy::kTeamRounds &&
            sh.h.n_chunks * t <= warps && per_cta % t == 0)
          team = t;
    }
    uint64_t ctas = st == SZ_OK ? (sh.h.n_chunks * team + per_cta - 1) / per_cta : 1;
    if (ctas > simt::grid_blocks()) ctas = simt::grid_blocks();
    if (ctas == 0) ctas = 1;
    sh.team = team;
    sh.ctas = ctas;
  }
  simt::syncthreads();
  const uint64_t ctas = sh.ctas;
  if (simt::block_id() >= ctas) return;
  if (sh.err == SZ_OK) {
    for (unsigned i = simt::thread_id(); i < 256; i += simt::block_threads()) {
      bool in = false;
      for (uint32_t j = 0; j < sh.h.count; ++j) in |= sh.h.codebook[j] == i;
      sh.in_cb[i] = in;
    }
    if (simt::thread_id() < 32) sh.keys[simt::thread_id()] = chunk_keys(lane_hash(sh.h.flags));
    if ((sh.h.dtype == 4 || sh.h.dtype == 5) && sh.h.k <= 3 && simt::thread_id() == 0) {
      const uint2 l = sh.h.dtype == 4 ? fp8_decode_lut<4>(sh.h.codebook, sh.h.count)
                                      : fp8_decode_lut<5>(sh.h.codebook, sh.h.count);
      sh.pair[kFp8Lut] = l.x;
      sh.pair[kFp8Lut + 1] = l.y;
    }
    if (sh.h.dtype == 1) build_decode_tables<1>(sh.pair, sh.h.codebook, sh.h.k, sh.h.count);
    else build_decode_tables<2>(sh.pair, sh.h.codebook, sh.h.k, sh.h.count);
  }
  simt::syncthreads();
  const uint64_t tag = ws_begin(ws);
  if (tag == 0) {  // the workspace was never zero-filled: report, change nothing
    if (simt::block_id() == 0 && simt::thread_id() == 0) {
      *a.status = SZ_ERROR_INVALID_ARGUMENT;
      if (a.dst_size) *a.dst_size = 0;
    }
    return;
  }
  if (sh.err == SZ_OK) {
    switch (sh.h.dtype) {
      case 1: decode_dtype<1>(a, sh, area); break;
      case 2: decode_dtype<2>(a, sh, area); break;
      case 3: decode_dtype<3>(a, sh, area); break;
      case 4: decode_dtype<4>(a, sh, area); break;
      default: decode_dtype<5>(a, sh, area); break;
    }
  }
  // The last CTA to finish writes the call's status and output size.
  simt::syncthreads();
  if (simt::thread_id() == 0)
    finish_call(a.ws, tag, ctas, sh.err, sh.first_err, sh.h.n * (layout::dtype_traits(sh.h.dtype).value_bits / 8),
                a.status, a.dst_size);
}

}  // namespace cuda
}  // namespace splitzip
