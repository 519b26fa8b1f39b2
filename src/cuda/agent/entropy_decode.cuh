// agent/entropy_decode.cuh — the decoder of entropy-coded frames (docs/FORMAT.md §4.10, version 3) on a GPU: one
// warp decodes one chunk, its 32 lanes being the chunk's 32 rANS lanes (value j of the chunk is lane j mod 32's), so
// a step decodes 32 values in one pass of straight-line code.
//
// Per CTA: the header is parsed and checked (§4.1 with §4.10.1, in the spec's order), the frame's table reference
// is checked against the device image (entropy_image.h), and the probability tables of the groups that the frame's
// tensor uses are copied into shared memory (with the channel -> group map, when they fit; else they are read from
// the image in global memory, the same code through generic pointers). Per chunk: its index entries and record are
// checked as §4.10.3 and check_frame_index do; per step, lane l finds its symbol from its state's slot (a
// 4-slot bucket table gives the symbol at the bucket's start, a step forward past the next symbol's Cum when the
// slot lies beyond it), updates its state, and the lanes that renormalise take consecutive 16-bit words in lane
// order (a ballot and a prefix count) from a window of the record's words staged in shared memory; escapes come
// from the record's list the same way. Values are joined with their raw parts (read a quad of steps ahead) in a
// 512-byte row stage, which goes out as coalesced 16-byte pieces, the pieces that LH32 (§4.6.1) gives each lane; H32
// chunks are hashed from the output afterwards. The first error of the call is kept in the workspace; the last CTA
// to finish writes the status and the output size. Nothing outside [src, src + src_size) or the image is read, and
// nothing outside the output is written, whatever the frame or the image says.
#pragma once

#include "cuda/agent/decode.cuh"  // report, load_entry, hash_span, LH32 rounds
#include "cuda/policy.cuh"
#include "entropy_image.h"

namespace splitzip {
namespace cuda {

struct EntropyDecodeArgs {
  const uint8_t* src;
  uint64_t src_size;
  const uint8_t* image;  // the table's device image (16-byte aligned)
  uint64_t image_size;
  uint8_t* dst;
  uint64_t dst_capacity;
  int32_t* status;
  uint64_t* dst_size;  // may be null
  WsHeader* ws;
};

// A version 3 frame's header fields and section offsets.
struct EHeader {
  uint32_t dtype, vb, B, raw_bits, chunk_log2, flags, tensor, period;
  uint64_t n, sym_size, n_chunks, table_id;
  uint64_t index_off, checksum_off, raw_off, sym_off;
};

// §4.1 steps 1-7 with §4.10.1 for a version 3 frame (b: its first 64 bytes, copied by the caller); a frame of
// another version is SZ_ERROR_INVALID_ARGUMENT after step 5, as sz_decompress_entropy answers. One thread.
SZ_NOINLINE sz_status parse_entropy_header(const uint8_t* b, uint64_t src_size, EHeader* h) {
  uint32_t version = 0;
  const sz_status s0 = parse_header_start(b, src_size, &version);
  if (s0 != SZ_OK) return s0;
  const uint32_t dtype = b[layout::kOffDtype];
  if (!layout::dtype_known(dtype)) return SZ_ERROR_UNSUPPORTED_DTYPE;
  if (version != layout::kFormatVersionEntropy) return SZ_ERROR_INVALID_ARGUMENT;
  const layout::DtypeTraits t = layout::dtype_traits(dtype);
  const layout::SymbolSplit sp = layout::symbol_split(dtype);
  const uint32_t chunk_log2 = b[layout::kOffChunkLog2], flags = layout::load_u32(b + layout::kOffFlags);
  if (chunk_log2 < layout::kMinChunkLog2 || chunk_log2 > layout::kMaxChunkLog2 || !layout::flags_consistent(flags))
    return SZ_ERROR_CORRUPT;
  if (b[layout::kOffCodeBits] != 0 || b[layout::kOffCodebookCount] != 0 ||
      (flags & ~(layout::kKnownFlags | layout::kFlagEntropy | layout::kFlagPaired)) || !(flags & layout::kFlagEntropy))
    return SZ_ERROR_CORRUPT;
  const bool paired = (flags & layout::kFlagPaired) != 0;
  if (paired && t.value_bits != 8) return SZ_ERROR_CORRUPT;
  if (b[13] | b[14] | b[15]) return SZ_ERROR_CORRUPT;
  const uint64_t n = layout::load_u64(b + layout::kOffNValues);
  const uint64_t sym_size = layout::load_u64(b + layout::kOffExpSectionSize);
  if (n >= layout::kMaxValues) return SZ_ERROR_CORRUPT;
  const uint32_t period = layout::load_u32(b + layout::kOffBookPeriod);
  const uint32_t tensor = layout::load_u32(b + layout::kOffBookTensor);
  if (period < 1 || period > layout::kMaxPeriod || tensor >= layout::kMaxTensors) return SZ_ERROR_CORRUPT;
  for (int i = paired ? 56 : 48; i < 60; ++i)  // a paired frame's row map identifier at 48 (§4.10.6)
    if (b[i]) return SZ_ERROR_CORRUPT;
  if (sym_size > layout::packed_bytes(n, sp.symbol_bits)) return SZ_ERROR_CORRUPT;
  const bool checksums = (flags & layout::kFlagChecksums) != 0;
  const layout::FrameOffsets o = layout::entropy_frame_offsets(n, chunk_log2, checksums, sp.raw_bits, sym_size);
  if (src_size < o.end) return SZ_ERROR_SRC_TRUNCATED;
  // Step 8: the kernels take no row map (paired frames are decoded on the CPU), so a paired frame lacks its map.
  if (paired) return SZ_ERROR_BOOK_MISMATCH;
  h->dtype = dtype;
  h->vb = t.value_bits / 8;
  h->B = sp.symbol_bits;
  h->raw_bits = sp.raw_bits;
  h->chunk_log2 = chunk_log2;
  h->flags = flags;
  h->tensor = tensor;
  h->period = period;
  h->n = n;
  h->sym_size = sym_size;
  h->n_chunks = layout::n_chunks(n, chunk_log2);
  h->table_id = layout::load_u64(b + layout::kOffBookId);
  h->index_off = o.index;
  h->checksum_off = o.checksums;
  h->raw_off = o.rest;
  h->sym_off = o.exponents;
  return SZ_OK;
}

// What the CTA's warps read: the header, and where the frame's tensor's tables are (shared or global memory).
struct EntropyShared {
  EHeader h;
  int32_t err;
  uint64_t first_err;  // the CTA's first chunk error (report), 0: none
  uint32_t stride;        // sym entries per group (A + 2)
  uint64_t ctas;          // the CTAs that take part
  const uint32_t* fc;     // the image's [group][stride]: the group's symbols, Cum | s << 16, then sentinels
  const uint8_t* used;    // the image's [group][32]: which symbols have slots (for the escapes' check)
  const uint8_t* bucket;  // the image's [group][1024]
  const uint32_t* cmap_g; // the image's map of the tensor (local | global << 16)
  // The CTA's plan, by thread 0: whether the tensor's group map and tables fit in shared memory (then they are
  // there: the map as each channel's block's shared address, each local group's bucket table and symbols in
  // one block of ent_group_bytes), where
  // they go, the warps' area size, the tensor's local groups and first list entry; the call's workspace tag.
  bool fast, bad_image;
  uint32_t warp_bytes, cmap_at, tables_at, local, list_first;
  uint64_t tag;
  uint8_t hdr[layout::kHeaderSize];
};
constexpr uint32_t kEntSharedBytes = (sizeof(EntropyShared) + 15) / 16 * 16;
constexpr uint32_t kEntRowBytes = 512;  // a row: 32 lanes x 16 bytes
constexpr uint32_t kEntRawBlock = 512;  // values whose raw parts a warp stages at a time (16 steps)
constexpr uint32_t kEntGroupMax = 8;    // steps in a group (at most)
// The group map in shared memory runs kEntMapTail entries past the period (entry c is channel c mod P's), so that
// a group's steps read their channels at constant offsets from the group's first channel, which wraps once a group.
constexpr uint32_t kEntMapTail = 32 * (kEntGroupMax - 1);
// A warp's area: the window of words (with room for a group's words past it, and 32 bytes of slack), the row stage,
// and two raw-part blocks (each with 16 bytes for its phase and 16 of slack): 2 * (kEntRawBlock * raw bits / 8 + 32)
// bytes, none for FP8.
constexpr uint32_t kEntWindowBytes = 2 * (EntropyDecodePolicy::kWindowWords + 32 * kEntGroupMax) + 32;
constexpr uint32_t ent_raw_block_bytes(uint32_t raw_bits) { return raw_bits ? kEntRawBlock * raw_bits / 8 + 32 : 0; }
constexpr uint32_t ent_warp_bytes(uint32_t raw_bits) {
  return (kEntWindowBytes + kEntRowBytes + 2 * ent_raw_block_bytes(raw_bits) + 15) / 16 * 16;
}
// A local group's block in shared memory: its bucket table, then its symbol entries.
constexpr uint32_t ent_group_bytes(uint32_t stride) { return (eimg::kBuckets + 4 * stride + 15) / 16 * 16; }
constexpr size_t entropy_decode_smem_bytes() { return EntropyDecodePolicy::kSmemBytes; }
static_assert(kEntSharedBytes + EntropyDecodePolicy::kWarps * ent_warp_bytes(24) +
                      4 * (EntropyDecodePolicy::kCmapCap + kEntMapTail) <
                  EntropyDecodePolicy::kSmemBytes,
              "the warps' areas (FP32's raw parts the largest) and a group map leave room for tables");

// The 16 bytes at p, of which those at or past frame_end read as zero (the cold end of a frame).
SZ_NOINLINE uint4 load_piece_tail(const uint8_t* p, const uint8_t* frame_end) {
  uint32_t w[4] = {0, 0, 0, 0};
  for (uint32_t k = 0; k < 16; ++k)
    if (p + k < frame_end) w[k / 4] |= (uint32_t)p[k] << (8 * (k % 4));
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Frame bytes [from, from + len) into the window, window byte k = frame byte from + k (by the warp: 16-byte loads
// of the aligned pieces that hold them, stored a byte at a time at their place; a piece that the frame's end cuts
// is read byte by byte). The window is refilled every few hundred steps, so its reads are 2-byte aligned instead.
SZ_DEV void load_window(uint8_t* win, const uint8_t* from, uint32_t len, const uint8_t* frame_end) {
  const unsigned lane = simt::lane_id();
  const uint8_t* a0 = (const uint8_t*)((uintptr_t)from & ~(uintptr_t)15);
  const uint32_t ofs = (uint32_t)((uintptr_t)from - (uintptr_t)a0);
  const uint32_t pieces = (ofs + len + 15) / 16;
  for (uint32_t i = lane; i < pieces; i += 32) {
    const uint8_t* p = a0 + 16 * i;
    const uint4 v = p + 16 <= frame_end ? *reinterpret_cast<const uint4*>(p) : load_piece_tail(p, frame_end);
#pragma unroll
    for (uint32_t k = 0; k < 16; ++k) {
      const uint32_t at = 16 * i + k, word = k < 4 ? v.x : k < 8 ? v.y : k < 12 ? v.z : v.w;
      if (at >= ofs && at - ofs < len) win[at - ofs] = (uint8_t)(word >> (8 * (k % 4)));
    }
  }
}

// The row stage's 16 bytes of this lane out to [out, out + left) (left < 16: a chunk's end cuts the piece).
SZ_DEV void store_piece(uint8_t* out, uint4 v, uint32_t left) {
  if (left >= 16 && ((uintptr_t)out & 15u) == 0) {
    *reinterpret_cast<uint4*>(out) = v;
    return;
  }
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  const uint32_t m = left < 16 ? left : 16;
  for (uint32_t k = 0; k < m; ++k) out[k] = (uint8_t)(w[k / 4] >> (8 * (k % 4)));
}

template <bool kOn>
struct EFlag {
  static constexpr bool value = kOn;
};

// The split of a dtype's values for version 3 frames (§4.10.2) as constants: value bytes, symbol bits, raw bits.
template <int DT>
struct ESplit {
  static constexpr uint32_t VB = DT == 3 ? 4 : (DT >= 4 ? 1 : 2);
  static constexpr uint32_t B = DT == 2 ? 5 : 8;
  static constexpr uint32_t RB = DT == 1 ? 8 : DT == 2 ? 11 : DT == 3 ? 24 : 0;
  static constexpr uint32_t A = 1u << B;  // the escape's symbol index
  static constexpr uint32_t kStride = A + 2;
};

// Chunk c of the frame by the warp: SZ_OK, or the chunk's error. kFast: the tables and the group map are in shared
// memory (the CTA's plan), addressed as such; else every table is read through the pointers in sh.
template <int DT, bool kFast>
SZ_DEV sz_status entropy_chunk(const EntropyDecodeArgs& a, const EntropyShared& sh, uint8_t* area, uint64_t c) {
  using E = ESplit<DT>;
  constexpr uint32_t VB = E::VB, A = E::A;
  const EHeader h = sh.h;  // a copy: the fields it uses stay in registers across the rows' barriers
  const unsigned lane = simt::lane_id();
  const uint32_t lt = simt::lanes_below(lane);
  const uint8_t* const src = a.src;
  const uint8_t* const frame_end = a.src + a.src_size;
  const uint64_t S = 1ull << h.chunk_log2, first = c * S;
  const uint32_t L = (uint32_t)(h.n - first < S ? h.n - first : S);
  const uint64_t cur = load_entry(src + h.index_off + 8 * c);
  const uint64_t begin = c ? load_entry(src + h.index_off + 8 * (c - 1)) & layout::kIndexEndMask : 0;
  const uint64_t end = cur & layout::kIndexEndMask, mode = cur >> layout::kIndexModeShift;
  // §4.10.3 / check_frame_index: the entry, the record's size, the last chunk's end.
  if (mode > layout::kModeRaw || end < begin || end > h.sym_size || (c + 1 == h.n_chunks && end != h.sym_size))
    return SZ_ERROR_CORRUPT;
  const uint64_t size = end - begin, raw_size = layout::packed_bytes(L, E::B);
  const uint8_t* const rec = src + h.sym_off + begin;
  const uint8_t* const rawsec = src + h.raw_off;
  const uint32_t P = h.period;
  const bool raw_mode = mode == layout::kModeRaw;
  uint32_t X = 0, w = 0;
  uint32_t x = 0;
  if (raw_mode) {
    if (size != raw_size) return SZ_ERROR_CORRUPT;
    bool bad = false;  // the last group's padding fields
    for (uint32_t j = L + lane; j % 8 != 0 && j < (L + 7) / 8 * 8; j += 32)
      if (layout::load_field(rec, j, E::B) != 0) bad = true;
    if (simt::any(bad)) return SZ_ERROR_CORRUPT;
  } else {
    if (size > raw_size || size < layout::kRansRecordHeader) return SZ_ERROR_CORRUPT;
    const uint64_t x_count = layout::load_u32(rec + layout::kRansStatesBytes);
    if (x_count > L || x_count > size - layout::kRansRecordHeader ||
        (size - layout::kRansRecordHeader - x_count) % 2 != 0)
      return SZ_ERROR_CORRUPT;
    X = (uint32_t)x_count;
    w = (uint32_t)((size - layout::kRansRecordHeader - X) / 2);
    x = layout::load_u32(rec + 4 * lane);
    if (simt::any(x < layout::kRansLow)) return SZ_ERROR_CORRUPT;
  }
  // Raw parts (§4.10.2) for the raw-bits dtypes; the padding of the raw section is checked by the last chunk.
  if (E::RB && c + 1 == h.n_chunks) {
    bool bad = false;
    for (uint64_t j = h.n + lane; j % 8 != 0 && j < (h.n + 7) / 8 * 8; j += 32)
      if (layout::load_field(rawsec, j, E::RB) != 0) bad = true;
    if (simt::any(bad)) return SZ_ERROR_CORRUPT;
  }
  const uint8_t* const esc = rec + layout::kRansRecordHeader;
  const uint8_t* const words = esc + X;
  uint8_t* const win = area;
  uint8_t* const stage = area + kEntWindowBytes;
  uint8_t* const rawbuf = stage + kEntRowBytes;  // two blocks of ent_raw_block_bytes(RB)
  // The window holds words [wb, wb + kWindowWords) (those below w): word i at window byte 2 (i - wb).
  constexpr uint32_t kWin = EntropyDecodePolicy::kWindowWords;
  uint32_t wb = 0;
  auto fill = [&](uint32_t from) {
    wb = from;
    const uint32_t left = from < w ? w - from : 0;
    const uint32_t cnt = left < kWin ? left : kWin;
    simt::syncwarp();
    if (cnt) load_window(win, words + 2ull * from, 2 * cnt, frame_end);
    simt::syncwarp();
  };
  if (!raw_mode) fill(0);
  // The tables: in shared memory at the CTA's plan's offsets (the map gives each channel its local group's block:
  // the bucket table, then the symbols), or the image's in global memory.
  uint8_t* const sm = simt::dyn_smem();
  const uint32_t* const cmap_s = reinterpret_cast<const uint32_t*>(sm + sh.cmap_at);
  const uint32_t* const cmap_g = sh.cmap_g;
  const uint32_t* const fc_g = sh.fc;
  const uint8_t* const bucket_g = sh.bucket;
  uint32_t ch = (uint32_t)((first + lane) % P);  // this lane's channel at step 0 (of the current group, below)
  const uint32_t adv = 32 % P;
  // Raw parts: block k (values [512 k, 512 k + 512) of the chunk) is staged into rawbuf[k & 1] by cp.async a block
  // ahead; the raw section's phase is the same for every block (chunks and blocks start at multiples of 16 bytes).
  constexpr uint32_t kRawBytes = kEntRawBlock * E::RB / 8, kRawBuf = E::RB ? kRawBytes + 32 : 0;
  const uint8_t* const raw0 = rawsec + first * E::RB / 8;
  const uint32_t rph = (uint32_t)((uintptr_t)raw0 & 15u);
  auto stage_raw = [&](uint32_t k) {  // issue block k's copy (if it exists) and commit a group either way
    if (E::RB == 0) return;
    if (kEntRawBlock * k < L) {
      const uint32_t vals = L - kEntRawBlock * k < kEntRawBlock ? L - kEntRawBlock * k : kEntRawBlock;
      const uint8_t* const from = raw0 + (uint64_t)k * kRawBytes;
      const uint8_t* const a0 = from - rph;
      const uint32_t pieces = (rph + (vals * E::RB + 7) / 8 + 15) / 16;
      uint8_t* const dst = rawbuf + (k & 1) * kRawBuf;
      for (uint32_t i = lane; i < pieces; i += 32) {
        const uint8_t* const q = a0 + 16 * i;
        if (q + 16 <= frame_end) {
          simt::cp_async16(dst + 16 * i, q);
        } else {
          for (uint32_t b = 0; b < 16; ++b) dst[16 * i + b] = q + b < frame_end ? q[b] : 0;
        }
      }
    }
    simt::cp_async_commit();
  };
  // The raw part of value u of a staged block at b (u < kEntRawBlock), and of value j of the chunk (j < L).
  auto raw_in = [&](const uint8_t* b, uint32_t u) -> uint32_t {
    if (E::RB == 0) return 0;
    if (E::RB == 8) return b[u];
    if (E::RB == 24) return (uint32_t)b[3 * u] | ((uint32_t)b[3 * u + 1] << 8) | ((uint32_t)b[3 * u + 2] << 16);
    const uint32_t bit = u * E::RB, o = bit >> 3, sh8 = bit & 7;
    const uint32_t v = (uint32_t)b[o] | ((uint32_t)b[o + 1] << 8) | ((uint32_t)b[o + 2] << 16);
    return (v >> sh8) & ((1u << E::RB) - 1u);
  };
  auto raw_at = [&](uint32_t j) -> uint32_t {
    return raw_in(rawbuf + ((j / kEntRawBlock) & 1) * kRawBuf + rph, j % kEntRawBlock);
  };
  const layout::DtypeTraits t = layout::dtype_traits(DT);
  const layout::SymbolSplit sp = layout::symbol_split(DT);
  const bool cks = (h.flags & layout::kFlagChecksums) != 0, lh = lane_hash(h.flags);
  const LhKeys keys = lh ? kLhKeys[lane] : LhKeys{0, 0, 0, 0};
  LhState ls = lh ? lh_begin(keys) : lh_zero();
  const uint32_t CB = L * VB;
  constexpr uint32_t kRowSteps = kEntRowBytes / (32 * VB);
  const uint32_t steps = (L + 31) / 32, full = L / 32;
  uint8_t* const out = a.dst + first * VB;
  uint32_t q = 0;
  // Row `row` of the stage out to the output (and into LH32).
  auto emit_row = [&](uint32_t row) {
    simt::syncwarp();
    const uint32_t o = row * kEntRowBytes + 16 * lane;
    const uint4 piece = *reinterpret_cast<const uint4*>(stage + 16 * lane);
    if (o < CB) store_piece(out + o, piece, CB - o);
    if (lh)
      lh_add_row(ls, (uint64_t)piece.x | ((uint64_t)piece.y << 32), (uint64_t)piece.z | ((uint64_t)piece.w << 32),
                 keys, row, CB);
    simt::syncwarp();
  };
  auto put = [&](uint32_t s, uint32_t v) {
    set_stage_value<VB>(stage + ((s % kRowSteps) * 32 + lane) * VB, v);
    if (s % kRowSteps == kRowSteps - 1 || s + 1 == steps) emit_row(s / kRowSteps);
  };
  // Raw blocks 0 and 1 in flight; at block k's first step, block k has landed (wait for all but the newest group)
  // and after its last step the buffer takes block k + 2.
  stage_raw(0);
  stage_raw(1);
  auto block_begin = [&](uint32_t s) {
    if (E::RB != 0 && s % (kEntRawBlock / 32) == 0) {
      simt::cp_async_wait<1>();
      simt::syncwarp();
    }
  };
  auto block_end = [&](uint32_t s) {  // after step s
    if (E::RB != 0 && (s + 1) % (kEntRawBlock / 32) == 0) {
      simt::syncwarp();
      stage_raw((s + 1) / (kEntRawBlock / 32) + 1);
    }
  };
  if (raw_mode) {  // symbols stored as fields of B bits (a chunk that coding would not shrink: rare)
    for (uint32_t s = 0; s < steps; ++s) {
      block_begin(s);
      const uint32_t j = 32 * s + lane;
      put(s, j < L ? layout::join_symbol(layout::load_field(rec, j, E::B), raw_at(j), t, sp) : 0u);
      block_end(s);
    }
  } else {
    // Steps go in groups of U (a group lies in one stage row and one raw block, so its stage slots and raw parts
    // are at fixed offsets from the group's bases). A step's escape is only noted (bit i of escm); after the group,
    // the lanes' escapes take the record's list in step order, then lane order (§4.10.4), and patch the stage.
    constexpr uint32_t U = kRowSteps < kEntGroupMax ? kRowSteps : kEntGroupMax;
    static_assert(kRowSteps % U == 0 && (kEntRawBlock / 32) % U == 0, "a group lies in one row and one raw block");
    constexpr uint32_t kSlotStride = 32 * VB;  // stage bytes from one step's slot to the next
    uint32_t pr = 0;  // words taken since the window's base: p - wb
    auto join = [&](uint32_t sym, uint32_t rawv) -> uint32_t {
      if constexpr (DT == 1) return ((rawv * 0x101u) & 0x807Fu) | (sym << 7);  // sign to bit 15, mantissa, exponent
      return layout::join_symbol(sym, rawv, t, sp);
    };
    const uint32_t advU = (32 * U) % P;
    auto next_ch = [&](uint32_t c, uint32_t by) {  // c + by mod P, for c, by < P
      const uint32_t n = c + by;
      const uint32_t m = n - P;
      return m < n ? m : n;  // (n - P wraps past n when n < P)
    };
    // The entry e whose range holds slot and the next one nx, from the bucket's entry si (a byte), stepping forward
    // past symbols that start inside the bucket (rare); entry(k) reads the group's entry k (there are A + 2).
    auto find_entry = [&](uint32_t slot, uint32_t si, auto entry, uint32_t& e, uint32_t& nx) {
      if constexpr (A < 256) si = si < A ? si : A;  // (any image must not send the steps out of the row)
      e = entry(si);
      nx = entry(si + 1);
      if (slot >= (nx & 0xFFFFu) && (A == 256 || si < A)) {  // (a byte is below A = 256)
        do {
          ++si;
          e = nx;
          nx = entry(si + 1);
        } while (si < A && slot >= (nx & 0xFFFFu));
      }
    };
    // The group of steps s .. s + U - 1 (kTail: the chunk's last group, where steps and lanes may have no value).
    auto group = [&](auto tail, uint32_t s) -> bool {
      constexpr bool kTail = decltype(tail)::value;
      if (pr + 32 * U > kWin && wb + kWin < w) {
        fill(wb + pr);
        pr = 0;
      }
      block_begin(s);
      uint8_t* const st0 = stage + ((s % kRowSteps) * 32 + lane) * VB;
      const uint8_t* const rb = rawbuf + ((s / (kEntRawBlock / 32)) & 1) * kRawBuf + rph;
      const uint32_t u0 = (32 * s) % kEntRawBlock + lane;
      // (11- and 24-bit raw parts) step i's raw part from the two aligned words that hold it: a step's values are
      // 32 on, 4 RB bytes, so the words step by RB and the shift stays (the block buffer's slack covers the second
      // word).
      const uint32_t rbit = u0 * E::RB;
      const uint8_t* const rp = rb + (rbit >> 3);
      const uint32_t rmis = (uint32_t)((uintptr_t)rp & 3u);  // (the pointer stays one into shared memory)
      [[maybe_unused]] const uint32_t* const rw = reinterpret_cast<const uint32_t*>(rp - rmis);
      [[maybe_unused]] const uint32_t rsh = rmis * 8 + (rbit & 7u);
      auto raw_step = [&](uint32_t i) -> uint32_t {  // bits above the raw part are left for join to drop
        if constexpr (E::RB == 11 || E::RB == 24) return simt::funnel_r(rw[E::RB * i], rw[E::RB * i + 1], rsh);
        return raw_in(rb, u0 + 32 * i);
      };
      const uint32_t* const cm0 = cmap_s + ch;  // (shared tables) step i's channel entry: cm0[32 i]
      uint32_t chg = ch;                        // (global tables) step i's channel
      uint32_t escm = 0;
      const uint32_t wq0 = simt::smem_addr(win) + 2 * pr;
      uint32_t wq = wq0;  // the next word's shared address: a step adds its words, its lanes read one add off it
      uint32_t ga_next = kFast ? cm0[0] : 0;  // (shared tables) the next step's group block, read a step ahead
#pragma unroll
      for (uint32_t i = 0; i < U; ++i) {
        if (kTail && s + i >= steps) break;
        const bool act = !kTail || 32 * (s + i) + lane < L;
        const uint32_t slot = x & (layout::kRansProbTotal - 1);
        uint32_t e, nx;
        if (kFast) {  // the group's block at shared address ga: its bucket table, then its entries
          const uint32_t ga = ga_next;
          if (i + 1 < U) ga_next = cm0[32 * (i + 1)];
          find_entry(slot, simt::lds_table_u8(ga + (slot >> eimg::kBucketShift)),
                     [&](uint32_t k) { return simt::lds_table_u32<eimg::kBuckets>(ga + 4 * k); }, e, nx);
        } else {
          const uint32_t g = cmap_g[chg] >> 16;
          const uint8_t* const bk = bucket_g + (uint64_t)g * eimg::kBuckets;
          const uint32_t* const f = fc_g + (uint64_t)g * E::kStride;
          chg = next_ch(chg, adv);
          find_entry(slot, bk[slot >> eimg::kBucketShift], [&](uint32_t k) { return f[k]; }, e, nx);
        }
        // F q + slot - Cum with x = 2^12 q + slot, as (F - 2^12) q + x - Cum: one operation fewer
        const uint32_t cum = e & 0xFFFFu;
        const uint32_t xs = ((nx & 0xFFFFu) - cum - layout::kRansProbTotal) * (x >> layout::kRansProbBits) + (x - cum);
        if (act) x = xs;
        const bool need = act && x < layout::kRansLow;
        const uint32_t m = simt::ballot(need);
        // The word read is below kWin + 32 U: a group starts with pr + 32 U <= kWin, or with the record's last word
        // inside the window (pr <= w - wb <= kWin); a lane past that word reads the window's room past it and makes
        // p exceed w, which the group's check and the chunk's end reject.
        const uint32_t wd = simt::lds_u16_at(wq, simt::popc(m & lt));
        if (need) x = (x << layout::kRansWordBits) | wd;
        wq += 2 * simt::popc(m);
        const uint32_t sym = e >> 16;
        if (act && sym == A) escm |= 1u << i;
        set_stage_value<VB>(st0 + i * kSlotStride, act ? join(sym, raw_step(i)) : 0u);
      }
      pr += (wq - wq0) / 2;
      if (simt::any(escm != 0)) {  // rare: the group's escapes, in step order, then lane order
        uint32_t c = ch;
        bool bad = false;
        for (uint32_t i = 0; i < U; ++i, c = next_ch(c, adv)) {
          const bool mine = (escm >> i) & 1u;
          const uint32_t em = simt::ballot(mine);
          if (!em) continue;
          if (mine) {
            const uint32_t qp = q + (uint32_t)simt::popc(em & lt);
            const uint32_t sym = qp < X ? esc[qp] : 0u;
            if (qp >= X || sym >= A || (sh.used[(uint64_t)(cmap_g[c] >> 16) * 32 + sym / 8] >> (sym % 8) & 1u))
              bad = true;
            set_stage_value<VB>(st0 + i * kSlotStride, join(sym, raw_in(rb, u0 + 32 * i)));
          }
          q += (uint32_t)simt::popc(em);
        }
        if (simt::any(bad)) return false;
      }
      if (!kTail) ch = next_ch(ch, advU);
      const uint32_t last = kTail ? (steps - 1 < s + U - 1 ? steps - 1 : s + U - 1) : s + U - 1;
      if ((last + 1) % kRowSteps == 0 || last + 1 == steps) emit_row(last / kRowSteps);
      block_end(last);
      return wb + pr <= w;
    };
    using Full = EFlag<false>;
    using Tail = EFlag<true>;
    uint32_t s = 0;
    for (; s + U <= full; s += U)
      if (!group(Full{}, s)) return SZ_ERROR_CORRUPT;
    if (s < steps && !group(Tail{}, s)) return SZ_ERROR_CORRUPT;
    if (wb + pr != w || q != X || simt::any(x != layout::kRansLow)) return SZ_ERROR_CORRUPT;
  }

  if (cks) {
    const uint32_t want = layout::load_u32(src + h.checksum_off + 4 * c);
    uint32_t got;
    if (lh) {
      got = lh_finish(ls, CB);
    } else {
      simt::syncwarp();  // the warp's stores, before its lanes read them back
      Span span{};
      span.base = a.dst;
      got = (uint32_t)hash_span(span, first * VB, CB);
    }
    if (got != want) return SZ_ERROR_CHECKSUM;
  }
  return SZ_OK;
}

// The warp's chunks: dealt to the CTAs in turn (warp w of CTA b takes chunks b + ctas w, then every ctas x warps
// on), so that a call with fewer chunks than warps still spreads them over every SM.
template <int DT, bool kFast>
SZ_NOINLINE void entropy_chunks(const EntropyDecodeArgs& a, EntropyShared& sh, uint8_t* area) {
  const uint64_t warps = sh.ctas * (simt::block_threads() / 32);
  for (uint64_t c = (uint64_t)simt::warp_id() * sh.ctas + simt::block_id(); c < sh.h.n_chunks; c += warps) {
    const sz_status s = entropy_chunk<DT, kFast>(a, sh, area, c);
    simt::cp_async_wait<0>();  // raw blocks staged ahead of the chunk's end (or of its error) land before reuse
    simt::syncwarp();
    if (s != SZ_OK) {
      report(&sh.first_err, s);
      return;
    }
  }
}

// The image's header and the frame's tensor against the frame (§4.10.1 step 8); where its tables are.
SZ_NOINLINE sz_status open_image(const EntropyDecodeArgs& a, EntropyShared& sh, uint32_t* local, uint32_t* list_first) {
  const EHeader& h = sh.h;
  if (!a.image || a.image_size < sizeof(eimg::Header)) return SZ_ERROR_BOOK_MISMATCH;
  const eimg::Header im = *reinterpret_cast<const eimg::Header*>(a.image);
  if (im.magic != eimg::kMagic || im.id != h.table_id || im.dtype != h.dtype || im.period != h.period ||
      im.symbol_bits != h.B || h.tensor >= im.tensors || im.groups < 1 || im.groups > layout::kMaxGroups ||
      im.sym_stride != (1u << h.B) + 2)
    return SZ_ERROR_BOOK_MISMATCH;
  const uint64_t fc_end = im.sym_off + 4ull * im.sym_stride * im.groups;
  const uint64_t used_end = im.used_off + 32ull * im.groups;
  const uint64_t bucket_end = im.bucket_off + (uint64_t)eimg::kBuckets * im.groups;
  const uint64_t tens_end = im.tensor_off + sizeof(eimg::TensorEntry) * (uint64_t)im.tensors;
  const uint64_t cmap_end = im.cmap_off + 4ull * im.period * im.tensors;
  if ((im.sym_off | im.bucket_off | im.used_off | im.tensor_off | im.cmap_off) & 15u || fc_end > a.image_size ||
      used_end > a.image_size ||
      bucket_end > a.image_size || tens_end > a.image_size || cmap_end > a.image_size)
    return SZ_ERROR_BOOK_MISMATCH;
  eimg::TensorEntry te;
  if (!eimg::tensor_entry(a.image, a.image_size, im.tensor_off, tens_end, im.groups, h.tensor, &te))
    return SZ_ERROR_BOOK_MISMATCH;
  *local = te.local_groups;
  *list_first = te.list_first;
  sh.stride = im.sym_stride;
  sh.fc = reinterpret_cast<const uint32_t*>(a.image + im.sym_off);
  sh.used = a.image + im.used_off;
  sh.bucket = a.image + im.bucket_off;
  sh.cmap_g = reinterpret_cast<const uint32_t*>(a.image + im.cmap_off) + (uint64_t)h.tensor * h.period;
  return SZ_OK;
}

SZ_DEV void entropy_decode_warps(const EntropyDecodeArgs& a) {
  uint8_t* const smem = simt::dyn_smem();
  EntropyShared& sh = *reinterpret_cast<EntropyShared*>(smem);
  WsHeader* const ws = a.ws;
  simt::launch_dependents();
  simt::grid_dependency_wait();  // the frame may be the stream's previous kernel's output
  const WsWords wsw = simt::thread_id() == 0 ? ws_read(ws) : WsWords{0, 0};
  if (simt::thread_id() < 32) {  // the header's bytes, two a lane (fewer where the frame is shorter)
    const unsigned l = simt::thread_id();
    for (unsigned k = 2 * l; k < 2 * l + 2; ++k) sh.hdr[k] = k < a.src_size ? a.src[k] : 0;
  }
  simt::syncthreads();
  uint32_t local = 0, list_first = 0;
  if (simt::thread_id() == 0) {
    sz_status st = parse_entropy_header(sh.hdr, a.src_size, &sh.h);
    if (st == SZ_OK) st = open_image(a, sh, &local, &list_first);
    if (st == SZ_OK && sh.h.n * sh.h.vb > a.dst_capacity) st = SZ_ERROR_DST_TOO_SMALL;
    if (st == SZ_OK && sh.h.n_chunks == 0 && sh.h.sym_size != 0) st = SZ_ERROR_CORRUPT;
    sh.err = st;
    sh.first_err = 0;
    sh.bad_image = false;
    const uint64_t per_cta = simt::block_threads() / 32;
    uint64_t ctas = st == SZ_OK ? sh.h.n_chunks : 1;  // a CTA for each chunk, up to the grid
    if (ctas > simt::grid_blocks()) ctas = simt::grid_blocks();
    if (ctas == 0) ctas = 1;
    sh.ctas = ctas;
    // Shared memory after the warps' areas: the group map, then the tables, if both fit.
    sh.fast = false;
    if (st == SZ_OK) {
      sh.warp_bytes = ent_warp_bytes(sh.h.raw_bits);
      const uint32_t areas = kEntSharedBytes + (uint32_t)per_cta * sh.warp_bytes;
      const uint64_t at = areas + (4ull * (sh.h.period + kEntMapTail) + 15) / 16 * 16;
      const uint64_t tb = (uint64_t)ent_group_bytes(sh.stride) * local;
      sh.fast = sh.h.period <= EntropyDecodePolicy::kCmapCap && at + tb <= EntropyDecodePolicy::kSmemBytes;
      sh.cmap_at = areas;
      sh.tables_at = (uint32_t)at;
      sh.local = local;
      sh.list_first = list_first;
    }
    sh.tag = ws_tag(wsw);  // 0: a workspace that was never zero-filled
  }
  simt::syncthreads();
  const uint64_t ctas = sh.ctas;
  if (simt::block_id() >= ctas) return;
  if (sh.err == SZ_OK) {
    const bool fast = sh.fast;
    const uint32_t nl = sh.local, lf = sh.list_first;
    const eimg::Header& im = *reinterpret_cast<const eimg::Header*>(a.image);
    const uint16_t* const lists =
        reinterpret_cast<const uint16_t*>(a.image + im.tensor_off + sizeof(eimg::TensorEntry) * (uint64_t)im.tensors);
    const uint32_t P = sh.h.period, stride = sh.stride, gbytes = ent_group_bytes(stride);
    uint32_t* const cm = reinterpret_cast<uint32_t*>(smem + sh.cmap_at);
    uint8_t* const tb = smem + sh.tables_at;
    const uint32_t tsa = simt::smem_addr(tb);  // the map holds each channel's group block as a shared address
    bool bad = false;  // a map entry or list entry out of range: the image is not a valid one
    const unsigned tid = simt::thread_id(), nt = simt::block_threads();
    for (uint32_t c = tid; c < P; c += nt) {
      const uint32_t e = sh.cmap_g[c], lo = e & 0xFFFFu, gl = e >> 16;
      if (lo >= nl || gl >= im.groups || lists[lf + lo] != gl) bad = true;
      if (fast) cm[c] = tsa + (lo < nl ? lo : 0) * gbytes;  // (a bad entry fails the call below)
    }
    if (fast)  // the map's tail: entry c is channel c mod P's
      for (uint32_t c = P + tid; c < P + kEntMapTail; c += nt) {
        const uint32_t lo = sh.cmap_g[c % P] & 0xFFFFu;
        cm[c] = tsa + (lo < nl ? lo : 0) * gbytes;
      }
    if (fast) {  // each local group's block: its bucket table, then its symbols (copies in flight together)
      const uint32_t q16 = eimg::kBuckets / 16;
      for (uint32_t i = tid; i < nl * q16; i += nt) {
        const uint32_t li = i / q16, k = i % q16, g = lists[lf + li];
        uint8_t* const d = tb + li * gbytes + 16 * k;
        if (g < im.groups) simt::cp_async16(d, sh.bucket + (uint64_t)g * eimg::kBuckets + 16 * k);
        else *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
      }
      for (uint32_t i = tid; i < nl * stride; i += nt) {
        const uint32_t li = i / stride, k = i % stride, g = lists[lf + li];
        uint32_t* const d = reinterpret_cast<uint32_t*>(tb + li * gbytes + eimg::kBuckets) + k;
        if (g < im.groups) simt::cp_async4(d, sh.fc + (uint64_t)g * stride + k);
        else *d = eimg::kSentinel;
      }
    }
    simt::cp_async_commit();
    simt::cp_async_wait<0>();
    if (bad) sh.bad_image = true;  // (every thread that sees it stores the same value)
    simt::syncthreads();
    if (tid == 0 && sh.bad_image) sh.err = SZ_ERROR_BOOK_MISMATCH;  // every CTA reads the same entries: all see it
  }
  simt::syncthreads();
  const uint64_t tag = sh.tag;
  if (tag == 0) {  // the workspace was never zero-filled: report, change nothing
    if (simt::block_id() == 0 && simt::thread_id() == 0) {
      *a.status = SZ_ERROR_INVALID_ARGUMENT;
      if (a.dst_size) *a.dst_size = 0;
    }
    return;
  }
  simt::fence();
  if (sh.err == SZ_OK) {
    uint8_t* const area = smem + kEntSharedBytes + simt::warp_id() * sh.warp_bytes;
    const bool fast = sh.fast;
    switch (sh.h.dtype) {
      case 1: fast ? entropy_chunks<1, true>(a, sh, area) : entropy_chunks<1, false>(a, sh, area); break;
      case 2: fast ? entropy_chunks<2, true>(a, sh, area) : entropy_chunks<2, false>(a, sh, area); break;
      case 3: fast ? entropy_chunks<3, true>(a, sh, area) : entropy_chunks<3, false>(a, sh, area); break;
      case 4: fast ? entropy_chunks<4, true>(a, sh, area) : entropy_chunks<4, false>(a, sh, area); break;
      default: fast ? entropy_chunks<5, true>(a, sh, area) : entropy_chunks<5, false>(a, sh, area); break;
    }
  }
  // The last CTA to finish writes the call's status and output size.
  simt::syncthreads();
  if (simt::thread_id() == 0) finish_call(ws, tag, ctas, sh.err, sh.first_err, sh.h.n * sh.h.vb, a.status, a.dst_size);
}

// Resolves a decompress call of a version 3 frame with its table's device image.
inline sz_status make_entropy_decode_args(const void* d_src, size_t src_size, const void* d_image, size_t image_size,
                                          void* d_dst, size_t dst_capacity, void* d_workspace, size_t ws_size,
                                          int32_t* d_status, uint64_t* d_dst_size, EntropyDecodeArgs* a) {
  if (!d_src || !d_status || !d_image) return SZ_ERROR_INVALID_ARGUMENT;
  if (((uintptr_t)d_image & 15u) != 0) return SZ_ERROR_INVALID_ARGUMENT;
  if (d_dst == nullptr && dst_capacity > 0) return SZ_ERROR_INVALID_ARGUMENT;
  if (ws_size < kDecodeWorkspaceBytes) return SZ_ERROR_WORKSPACE_TOO_SMALL;
  if (!d_workspace) return SZ_ERROR_INVALID_ARGUMENT;
  *a = EntropyDecodeArgs{};
  a->src = (const uint8_t*)d_src;
  a->src_size = src_size;
  a->image = (const uint8_t*)d_image;
  a->image_size = image_size;
  a->dst = (uint8_t*)d_dst;
  a->dst_capacity = dst_capacity;
  a->status = d_status;
  a->dst_size = d_dst_size;
  a->ws = (WsHeader*)d_workspace;
  return SZ_OK;
}
// The CTAs a version 3 frame of src_size bytes can use (one per chunk, and a chunk takes at least its 8-byte index
// entry); the launch caps them at the resident CTAs.
inline uint64_t entropy_grid_of(size_t src_size) { return src_size / 8 + 1; }

}  // namespace cuda
}  // namespace splitzip
