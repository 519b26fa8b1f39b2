// agent/entropy_encode.cuh — the encoder of entropy-coded frames (docs/FORMAT.md §4.10, version 3) on a GPU: one warp
// encodes one chunk, its 32 lanes being the chunk's 32 rANS lanes (value j of the chunk is lane j mod 32's), so a
// step codes 32 values in one pass of straight-line code, stepping backwards from the chunk's end (§4.10.4).
//
// Per CTA: the device image of the table (entropy_image.h) is checked against the call (dtype, symbol bits, tensor,
// its sections inside image_size) and the encoder entries of the groups that the call's tensor uses are copied
// into shared memory with the channel -> group map, when they fit (else they are read from the image in global
// memory, the same code through generic pointers). An entry holds 2^12 - F_g[s], Cum_g[s] and a multiplier and a
// shift that divide a state by F_g[s] exactly (eimg::enc_div), an escaped symbol's the escape's, marked, so a step
// is one table lookup, a multiply-high and a few integer operations per lane, no division.
//
// Per chunk (warps take chunks in order from the workspace's ticket, warp/workspace.cuh): the chunk's input goes
// through shared memory in blocks of kBlockValues values (cp.async, double-buffered, the last block first); per
// block the lanes pack its raw parts (§4.10.2) into a small stage that goes out to their fixed place in the raw
// section, add its 512-byte rows to LH32 (§4.6.1; sums, so the order of the blocks does not matter), and run its
// steps from the last to the first. Within a step the emission order is lane 31 down to lane 0, so the lanes that
// renormalise write their 16-bit words, in lane order, just below those of the step after (a ballot and a count of
// the higher lanes), filling the warp's staging slot of the workspace from its end: the words end up in the order
// the decoder reads them. Escaped symbols (F_g = 0) are listed from the slot's front in the order they are met
// (decreasing j) and reversed when copied out. Once the coded record is known to exceed the raw size (§4.10.4: the
// chunk is then stored raw) the steps stop; the raw parts and the checksum still see every block. Then the warp
// publishes its record size, looks back over its predecessors for its offset in the symbol section, publishes its
// end and copies the record out: states, escape count, escapes and words (or, for a raw chunk, its symbols packed
// from the input), followed by its index entry, its checksum (LH32 from the blocks; H32 by hashing the chunk's input
// afterwards) and, for the last chunk, the header and the frame size.
//
// Workspace: the look-back words of warp/workspace.cuh, then one staging slot per warp of the launch (a chunk's
// raw symbol bytes and slack: the largest record a chunk can have), so a call needs at most kMaxSlots slots
// whatever its size. A warp uses the slot of its index in the grid; the launcher runs no more warps than slots.
#pragma once

#include "cuda/agent/entropy_decode.cuh"  // ESplit, EFlag, hash_span, Span, LH32 rows, workspace, io
#include "cuda/policy.cuh"
#include "entropy_image.h"
#include "internal.h"  // resolve_entropy_params

namespace splitzip {
namespace cuda {

struct EntropyEncodeArgs {
  const uint8_t* src;  // n values, any alignment
  uint64_t n, n_chunks;
  const uint8_t* image;  // the table's device image (16-byte aligned)
  uint64_t image_size;
  uint8_t* dst;
  uint64_t index_off, checksum_off, raw_off, sym_off;
  uint32_t dtype, chunk_log2, flags, tensor;
  WsHeader* ws;
  uint8_t* slots;  // the workspace's staging slots (16-byte aligned), slot_bytes each
  uint64_t slot_bytes;
  uint64_t* frame_size;
};

// ---- the workspace ---------------------------------------------------------------------------------------------

// A staging slot: the raw symbol bytes of a whole chunk (the largest coded record that a chunk keeps) and 16 bytes
// of slack for the copy-out's aligned reads and for the words' 2-byte alignment (an odd raw size is rounded up).
SZ_HD uint64_t entropy_slot_bytes(uint32_t chunk_log2, uint32_t symbol_bits) {
  return (((uint64_t)1 << chunk_log2) * symbol_bits / 8 + 15) / 16 * 16 + 16;
}
// The staging slots of a call of n_chunks chunks: one per warp that the call can use (whole CTAs).
SZ_HD uint64_t entropy_slots(uint64_t n_chunks) {
  using P = EntropyEncodePolicy;
  const uint64_t w = (n_chunks + P::kWarps - 1) / P::kWarps * P::kWarps;
  return w < P::kMaxSlots ? w : P::kMaxSlots;
}
SZ_HD uint64_t entropy_encode_workspace_bytes(uint64_t n_chunks, uint32_t chunk_log2, uint32_t symbol_bits) {
  return encode_workspace_bytes(n_chunks) + entropy_slots(n_chunks) * entropy_slot_bytes(chunk_log2, symbol_bits);
}

// ---- per-dtype value split (§2, §4.10.2) -------------------------------------------------------------------------

template <int DT>
SZ_DEV uint32_t e_symbol(uint32_t v) {
  if constexpr (DT == 1) return (v >> 7) & 0xFFu;
  else if constexpr (DT == 2) return (v >> 10) & 0x1Fu;
  else if constexpr (DT == 3) return (v >> 23) & 0xFFu;
  else return v;
}
template <int DT>
SZ_DEV uint32_t e_raw(uint32_t v) {
  if constexpr (DT == 1) return ((v >> 8) & 0x80u) | (v & 0x7Fu);
  else if constexpr (DT == 2) return ((v >> 5) & 0x400u) | (v & 0x3FFu);
  else if constexpr (DT == 3) return ((v >> 8) & 0x800000u) | (v & 0x7FFFFFu);
  else return 0;
}
// A value of VB bytes at p of any alignment, a byte at a time (the cold paths).
template <uint32_t VB>
SZ_DEV uint32_t load_value_bytes(const uint8_t* p) {
  uint32_t v = 0;
#pragma unroll
  for (uint32_t b = 0; b < VB; ++b) v |= (uint32_t)p[b] << (8 * b);
  return v;
}

// ---- what the CTA's warps share ----------------------------------------------------------------------------------

struct EntropyEncodeShared {
  int32_t err;
  bool bad_image;
  bool fast;           // the map and the entries are in shared memory (the CTA's plan)
  uint32_t period, local, list_first, groups;
  uint32_t warp_bytes, cmap_at, tables_at;
  uint64_t table_id;
  const uint2* enc;        // the image's enc[groups][A + 1]
  const uint32_t* cmap_g;  // the image's map of the call's tensor (local | global << 16)
  const uint16_t* lists;   // the image's group lists
};
constexpr uint32_t kEncSharedBytes = (sizeof(EntropyEncodeShared) + 15) / 16 * 16;

// A warp's area: two input blocks (each with 32 bytes for its phase and slack) and the raw parts' stage.
template <int DT>
struct EncArea {
  using E = ESplit<DT>;
  static constexpr uint32_t kBlock = EntropyEncodePolicy::kBlockValues;
  static constexpr uint32_t kBuf = kBlock * E::VB + 32;
  static constexpr uint32_t kRawStage = E::RB ? kBlock / 8 * E::RB + 16 : 0;
  static constexpr uint32_t kBytes = (2 * kBuf + kRawStage + 15) / 16 * 16;
  static_assert(kBlock % 512 == 0, "a block is whole 512-byte rows of LH32 and whole steps");
};
constexpr size_t entropy_encode_smem_bytes() { return EntropyEncodePolicy::kSmemBytes; }
static_assert(kEncSharedBytes + EntropyEncodePolicy::kWarps * EncArea<3>::kBytes + 4 * EntropyEncodePolicy::kCmapCap <
                  EntropyEncodePolicy::kSmemBytes,
              "the warps' areas (FP32's the largest) and a group map leave room for entries");

// The image against the call (dtype, symbol bits, tensor) and its sections inside image_size; where the tensor's
// map and lists are. One thread.
SZ_NOINLINE sz_status open_encode_image(const EntropyEncodeArgs& a, EntropyEncodeShared& sh) {
  if (!a.image || a.image_size < sizeof(eimg::Header)) return SZ_ERROR_BOOK_MISMATCH;
  const eimg::Header im = *reinterpret_cast<const eimg::Header*>(a.image);
  const uint32_t B = layout::symbol_split(a.dtype).symbol_bits, A1 = (1u << B) + 1;
  if (im.magic != eimg::kMagic || im.dtype != a.dtype || im.symbol_bits != B || im.period < 1 ||
      im.period > layout::kMaxPeriod || a.tensor >= im.tensors || im.groups < 1 || im.groups > layout::kMaxGroups ||
      im.sym_stride != A1 + 1)
    return SZ_ERROR_BOOK_MISMATCH;
  const uint64_t tens_end = im.tensor_off + sizeof(eimg::TensorEntry) * (uint64_t)im.tensors;
  const uint64_t cmap_end = im.cmap_off + 4ull * im.period * im.tensors;
  const uint64_t enc_end = im.enc_off + 8ull * A1 * im.groups;
  if ((im.tensor_off | im.cmap_off | im.enc_off) & 15u || tens_end > a.image_size || cmap_end > a.image_size ||
      enc_end > a.image_size)
    return SZ_ERROR_BOOK_MISMATCH;
  eimg::TensorEntry te;
  if (!eimg::tensor_entry(a.image, a.image_size, im.tensor_off, tens_end, im.groups, a.tensor, &te))
    return SZ_ERROR_BOOK_MISMATCH;
  sh.period = im.period;
  sh.groups = im.groups;
  sh.local = te.local_groups;
  sh.list_first = te.list_first;
  sh.table_id = im.id;
  sh.enc = reinterpret_cast<const uint2*>(a.image + im.enc_off);
  sh.cmap_g = reinterpret_cast<const uint32_t*>(a.image + im.cmap_off) + (uint64_t)a.tensor * im.period;
  sh.lists = reinterpret_cast<const uint16_t*>(a.image + tens_end);
  return SZ_OK;
}

// The 64-byte header of a version 3 frame (§4.10.1), as the CPU coder writes it. One thread.
SZ_NOINLINE void write_entropy_header(uint8_t* dst, uint32_t dtype, uint32_t chunk_log2, uint32_t flags, uint64_t n,
                                      uint64_t sym_size, uint64_t table_id, uint32_t tensor, uint32_t period) {
  uint8_t h[64];
  for (int i = 0; i < 64; ++i) h[i] = 0;
  layout::store_u32(h + layout::kOffMagic, layout::kFrameMagic);
  h[layout::kOffVersion] = layout::kFormatVersionEntropy;
  h[layout::kOffDtype] = (uint8_t)dtype;
  h[layout::kOffChunkLog2] = (uint8_t)chunk_log2;
  layout::store_u32(h + layout::kOffFlags, flags | layout::kFlagEntropy);
  layout::store_u64(h + layout::kOffNValues, n);
  layout::store_u64(h + layout::kOffExpSectionSize, sym_size);
  layout::store_u64(h + layout::kOffBookId, table_id);
  layout::store_u32(h + layout::kOffBookTensor, tensor);
  layout::store_u32(h + layout::kOffBookPeriod, period);
  layout::store_u32(h + layout::kOffHeaderChecksum, xxh3::h32(h, layout::kHeaderChecksummed));
  for (int i = 0; i < 64; ++i) dst[i] = h[i];
}

// A raw chunk's record (§4.10.3 mode 1): its L symbols packed with B bits, from the input (the rare path: the
// lanes take groups of 8 values, a byte at a time).
template <int DT>
SZ_NOINLINE void emit_raw_symbols(uint8_t* out, const uint8_t* in, uint32_t L) {
  using E = ESplit<DT>;
  const uint32_t groups = (L + 7) / 8;
  for (uint32_t g = simt::lane_id(); g < groups; g += 32) {
    uint64_t acc = 0;
    for (uint32_t i = 0; i < 8; ++i) {
      const uint32_t j = 8 * g + i;
      const uint32_t s = j < L ? e_symbol<DT>(load_value_bytes<E::VB>(in + (uint64_t)j * E::VB)) : 0u;
      acc |= (uint64_t)s << (E::B * i);
    }
    for (uint32_t b = 0; b < E::B; ++b) out[g * E::B + b] = (uint8_t)(acc >> (8 * b));
  }
}

// Chunk c by the warp, into its staging slot, then out to its place in the frame. kFast: the entries and the map
// are in shared memory (the CTA's plan); else they are read from the image.
template <int DT, bool kFast>
SZ_DEV void entropy_encode_chunk(const EntropyEncodeArgs& a, const EntropyEncodeShared& sh, uint8_t* area,
                                 uint8_t* slot, uint64_t c, uint64_t tag, const LhKeys& keys) {
  using E = ESplit<DT>;
  using Ar = EncArea<DT>;
  constexpr uint32_t VB = E::VB, A = E::A, A1 = A + 1, RB = E::RB, kBlock = Ar::kBlock;
  constexpr uint32_t kBlockSteps = kBlock / 32;
  const unsigned lane = simt::lane_id();
  const uint64_t S = 1ull << a.chunk_log2, first = c * S;
  const uint32_t L = (uint32_t)(a.n - first < S ? a.n - first : S);
  const uint32_t raw = (uint32_t)layout::packed_bytes(L, E::B);
  const uint32_t CB = L * VB;
  const bool cks = (a.flags & layout::kFlagChecksums) != 0, lh = lane_hash(a.flags);
  LhState ls = lh ? lh_begin(keys) : lh_zero();

  // ---- input blocks: block k (values [kBlock k, kBlock k + kBlock) of the chunk) into buffer k & 1 ----
  uint8_t* const bufs = area;
  uint8_t* const rstage = area + 2 * Ar::kBuf;
  const uint8_t* const in0 = a.src + first * VB;
  const uintptr_t src_lo = (uintptr_t)a.src, src_hi = (uintptr_t)a.src + a.n * VB;
  const uint32_t ph = (uint32_t)((uintptr_t)in0 & 15u);  // the same for every block of every chunk
  const bool aligned = ph % VB == 0;
  const uint32_t nb = (L + kBlock - 1) / kBlock;
  auto stage = [&](int k) {  // issues block k's copy (if it exists) and commits a group either way
    if (k >= 0) {
      const uint32_t vals = L - kBlock * (uint32_t)k < kBlock ? L - kBlock * (uint32_t)k : kBlock;
      const uintptr_t a0 = (uintptr_t)in0 + (uintptr_t)kBlock * VB * (uint32_t)k - ph;
      const uint32_t pieces = (ph + vals * VB + 15) / 16;
      uint8_t* const d = bufs + (k & 1) * Ar::kBuf;
      if (a0 >= src_lo && a0 + 16 * (uintptr_t)pieces <= src_hi) {  // every piece inside the input (the rule)
        for (uint32_t i = lane; i < pieces; i += 32)
          simt::cp_async16(d + 16 * i, reinterpret_cast<const void*>(a0 + 16 * (uintptr_t)i));
      } else {
        for (uint32_t i = lane; i < pieces; i += 32) {
          const uintptr_t q = a0 + 16 * (uintptr_t)i;
          if (q >= src_lo && q + 16 <= src_hi) {
            simt::cp_async16(d + 16 * i, reinterpret_cast<const void*>(q));
          } else {
            for (uint32_t b = 0; b < 16; ++b)
              d[16 * i + b] = q + b >= src_lo && q + b < src_hi ? *reinterpret_cast<const uint8_t*>(q + b) : 0;
          }
        }
      }
    }
    simt::cp_async_commit();
  };
  // Value u of a staged block; known (an EFlag<true>) to be whole words of shared memory, or tested at run time.
  auto value = [&](auto words, const uint8_t* b, uint32_t u) -> uint32_t {
    const uint8_t* const p = b + ph + u * VB;
    if constexpr (VB == 1) return *p;
    if (!decltype(words)::value && !aligned) return load_value_bytes<VB>(p);
    if constexpr (VB == 2) return *reinterpret_cast<const uint16_t*>(p);
    else return *reinterpret_cast<const uint32_t*>(p);
  };

  // ---- the coder's state ----
  uint32_t x = layout::kRansLow;
  uint32_t X = 0;                // escapes so far
  // The words fill the slot down from wtop, raw rounded up to even so that they are 2-byte aligned (FP16's 5-bit
  // symbols can make raw odd; the slot's slack holds the extra byte). pad counts it against the raw size.
  const int32_t wtop = (int32_t)((raw + 1) & ~1u), pad = wtop - (int32_t)raw;
  int32_t wend = wtop;           // the slot offset below which the next step's words go
  bool over = false;             // the coded record exceeds the raw size: the chunk is stored raw
  const uint32_t P = sh.period, adv = 32 % P;
  const uint32_t steps = (L + 31) / 32;
  uint32_t ch = (uint32_t)((first + 32ull * (steps - 1) + lane) % P);  // this lane's channel at the last step
  const uint32_t cm0 = simt::smem_addr(simt::dyn_smem() + sh.cmap_at);  // the map: each channel's entries' address
  const uint32_t* const cmap_g = sh.cmap_g;
  const uint2* const enc_g = sh.enc;

  // One step: value 32 u + lane of the block at b (the chunk's step s), the block's i-th step. kTail: the chunk's
  // last step, where lanes may have none; al: whether the values are known to be whole words (see value). An escaped
  // symbol's entry is the escape's, marked (eimg::kEncEscaped): the step codes it as the escape and sets bit i of
  // escm; the block's escapes are listed after its steps (list_escapes).
  auto step = [&](auto tail, auto al, const uint8_t* b, uint32_t s, uint32_t u, uint32_t i, uint32_t& escm) {
    constexpr bool kTail = decltype(tail)::value;
    const bool act = !kTail || 32 * s + lane < L;
    const uint32_t sym = e_symbol<DT>(value(al, b, 32 * u + lane));
    const uint2 e = kFast ? simt::lds_v2_u32(simt::lds_u32(cm0 + 4 * ch) + 8 * sym)
                          : enc_g[(uint64_t)(cmap_g[ch] >> 16) * A1 + sym];
    if (act && (e.x & eimg::kEncEscaped)) escm |= 1u << i;
    const bool need = act && eimg::enc_renorm(x, e.x);
    const uint32_t m = simt::ballot(need);
    // The step's words in lane order, just below the next step's (a predicated store, no branch: the lanes that
    // renormalise change at random).
    const int32_t pos = wend - 2 * simt::popc(m >> lane);
    if (need && pos >= 0) *reinterpret_cast<uint16_t*>(slot + pos) = (uint16_t)x;
    x = need ? x >> layout::kRansWordBits : x;
    wend -= 2 * simt::popc(m);
    if (act) x = eimg::enc_push(x, e.x, e.y);
    const uint32_t cl = ch - adv, ch2 = cl + P;
    ch = cl < ch2 ? cl : ch2;  // (ch - adv wraps past ch - adv + P when ch < adv)
  };
  // The escapes of the block's steps s_hi - 1 down to s_hi - n (escm: step i's bit i, i = s_hi - 1 - s), listed in
  // the order met: step by step, higher lanes first.
  auto list_escapes = [&](const uint8_t* b, uint32_t s_hi, uint32_t n, uint32_t escm) {
    for (uint32_t i = 0; i < n; ++i) {
      const bool mine = (escm >> i) & 1u;
      const uint32_t em = simt::ballot(mine);
      if (!em) continue;
      if (mine) {
        const uint32_t sym = e_symbol<DT>(value(EFlag<false>{}, b, 32 * ((s_hi - 1 - i) % kBlockSteps) + lane));
        const uint32_t at = (uint32_t)layout::kRansRecordHeader + X + (uint32_t)simt::popc((em >> lane) >> 1);
        if (at < raw) slot[at] = (uint8_t)sym;
      }
      X += (uint32_t)simt::popc(em);
    }
  };

  stage((int)nb - 1);
  stage((int)nb - 2);
  for (int k = (int)nb - 1; k >= 0; --k) {
    simt::cp_async_wait<1>();  // block k has landed (block k - 1 may still be in flight)
    simt::syncwarp();
    const uint8_t* const b = bufs + (k & 1) * Ar::kBuf;
    const uint32_t vals = L - kBlock * (uint32_t)k < kBlock ? L - kBlock * (uint32_t)k : kBlock;
    const bool whole_bf16 = DT == 1 && vals == kBlock;
    // Raw parts: groups of 8 values packed into the stage, then out to their fixed place (§4.10.2); BF16's whole
    // blocks go there straight from the lanes where the place is 4-byte aligned (the raw section starts 4-byte
    // aligned in the frame, so wherever the frame is).
    if constexpr (RB != 0) {
      uint8_t* const rdst = a.dst + a.raw_off + (first + (uint64_t)kBlock * k) * RB / 8;
      const bool direct = whole_bf16 && ((uintptr_t)rdst & 3u) == 0;
      if (whole_bf16) {
        // BF16's whole blocks: the lane's 16 bytes of each 512-byte row are 8 values, whose raw parts (sign |
        // mantissa: the low byte's 7 bits and the high byte's top bit) byte permutes gather into 8 bytes; the same
        // words go into LH32.
#pragma unroll
        for (uint32_t r = 0; r < kBlock / 256; ++r) {
          const uint32_t g = lane + 32 * r;
          uint32_t w[4];
          smem_words<4>(b + ph + 16 * g, w);
          const uint32_t lo0 = simt::prmt(w[0], w[1], 0x6420), hi0 = simt::prmt(w[0], w[1], 0x7531);
          const uint32_t lo1 = simt::prmt(w[2], w[3], 0x6420), hi1 = simt::prmt(w[2], w[3], 0x7531);
          const uint32_t r0 = (lo0 & 0x7F7F7F7Fu) | (hi0 & 0x80808080u), r1 = (lo1 & 0x7F7F7F7Fu) | (hi1 & 0x80808080u);
          uint32_t* const o = reinterpret_cast<uint32_t*>((direct ? rdst : rstage) + 8 * g);
          o[0] = r0;
          o[1] = r1;
          if (lh)
            lh_add_row(ls, (uint64_t)w[0] | (uint64_t)w[1] << 32, (uint64_t)w[2] | (uint64_t)w[3] << 32, keys,
                       (uint32_t)k * (kBlock / 256) + r, CB);
        }
      } else {
        // Groups of 8 values; a whole block of aligned values (kWords) reads them as words, with no bound check.
        auto pack = [&](auto words) {
          constexpr bool kWords = decltype(words)::value;
          const uint32_t groups = (vals + 7) / 8;
          for (uint32_t g = lane; g < groups; g += 32) {
            uint32_t r[8];
#pragma unroll
            for (uint32_t i = 0; i < 8; ++i) {
              r[i] = kWords || 8 * g + i < vals ? e_raw<DT>(value(words, b, 8 * g + i)) : 0u;
            }
            uint8_t* const o = rstage + g * RB;
            if constexpr (RB == 8) {
              *reinterpret_cast<uint2*>(o) = make_uint2(r[0] | r[1] << 8 | r[2] << 16 | r[3] << 24,
                                                        r[4] | r[5] << 8 | r[6] << 16 | r[7] << 24);
            } else if constexpr (RB == 24) {
              uint32_t* const w = reinterpret_cast<uint32_t*>(o);
              w[0] = r[0] | r[1] << 24;
              w[1] = r[1] >> 8 | r[2] << 16;
              w[2] = r[2] >> 16 | r[3] << 8;
              w[3] = r[4] | r[5] << 24;
              w[4] = r[5] >> 8 | r[6] << 16;
              w[5] = r[6] >> 16 | r[7] << 8;
            } else {  // 11 bits: 88 bits of 8 fields
              uint64_t lo = 0, hi = 0;
#pragma unroll
              for (uint32_t i = 0; i < 8; ++i) {
                const uint32_t at = RB * i;
                if (at < 64) lo |= (uint64_t)r[i] << at;
                if (at + RB > 64) hi |= at >= 64 ? (uint64_t)r[i] << (at - 64) : (uint64_t)r[i] >> (64 - at);
              }
#pragma unroll
              for (uint32_t i = 0; i < RB; ++i) o[i] = (uint8_t)(i < 8 ? lo >> (8 * i) : hi >> (8 * (i - 8)));
            }
          }
        };
        if (vals == kBlock && aligned) pack(EFlag<true>{});
        else pack(EFlag<false>{});
      }
      if (!direct) {
        simt::syncwarp();
        copy_out(rdst, rstage, (uint32_t)layout::packed_bytes(vals, RB));
        simt::syncwarp();  // the stage is read before the next block's groups go in
      }
    }
    // LH32: the block's 512-byte rows (the sums do not depend on their order; BF16's whole blocks above).
    if (lh && !whole_bf16) {
#pragma unroll
      for (uint32_t r = 0; r < VB * kBlock / 512; ++r) {
        uint32_t w[4];
        smem_words<4>(b + ph + 512 * r + 16 * lane, w);
        lh_add_row(ls, (uint64_t)w[0] | (uint64_t)w[1] << 32, (uint64_t)w[2] | (uint64_t)w[3] << 32, keys,
                   (uint32_t)k * (VB * kBlock / 512) + r, CB);
      }
    }
    // The block's steps, last to first, while the record may still be coded.
    if (!over) {
      const uint32_t s_hi = (kBlock * (uint32_t)k + vals + 31) / 32;  // one past the block's last step
      const uint32_t s0 = kBlockSteps * (uint32_t)k;
      uint32_t escm = 0;
      if (s_hi - s0 == kBlockSteps && 32 * s_hi <= L) {  // a block of whole steps
        auto steps_of_block = [&](auto al) {
#pragma unroll
          for (uint32_t i = 0; i < kBlockSteps; ++i)
            step(EFlag<false>{}, al, b, s_hi - 1 - i, kBlockSteps - 1 - i, i, escm);
        };
        if (aligned) steps_of_block(EFlag<true>{});
        else steps_of_block(EFlag<false>{});
      } else {
        uint32_t s = s_hi, i = 0;
        if (s == steps && L % 32 != 0) {
          --s;
          step(EFlag<true>{}, EFlag<false>{}, b, s, s - s0, i++, escm);
        }
        while (s > s0) {
          --s;
          step(EFlag<false>{}, EFlag<false>{}, b, s, s - s0, i++, escm);
        }
      }
      if (simt::any(escm != 0)) list_escapes(b, s_hi, s_hi - s0, escm);
      over = (int32_t)(layout::kRansRecordHeader + X) + pad > wend;
    }
    simt::syncwarp();  // every lane is done with buffer k & 1
    stage(k - 2);
  }
  simt::cp_async_wait<0>();
  simt::syncwarp();  // the slot's words and escapes, written by the lanes, are read by others below

  // ---- mode, size, offset ----
  const bool coded = !over && (int32_t)(layout::kRansRecordHeader + X) + pad <= wend;
  const uint32_t size = coded ? (uint32_t)layout::kRansRecordHeader + X + (uint32_t)(wtop - wend) : raw;
  simt::Word128* const state = ws_states(a.ws);
  publish(state, c, tag, c == 0 ? kFlagInclusive : kFlagAggregate, size);
  uint64_t prefix = 0;
  if (c > 0) {
    prefix = look_back(state, c, tag);
    publish(state, c, tag, kFlagInclusive, prefix + size);
  }

  // ---- the record ----
  uint8_t* const out = a.dst + a.sym_off + prefix;
  if (coded) {
    put_u32(out + 4 * lane, x);
    if (lane == 0) put_u32(out + layout::kRansStatesBytes, X);
    for (uint32_t i = lane; i < X; i += 32)
      out[layout::kRansRecordHeader + i] = slot[layout::kRansRecordHeader + X - 1 - i];
    copy_out(out + layout::kRansRecordHeader + X, slot + wend, (uint32_t)(wtop - wend));
  } else {
    emit_raw_symbols<DT>(out, in0, L);
  }

  // ---- index entry, checksum, header ----
  if (lane == 0) {
    const uint64_t mode = coded ? layout::kModeCoded : layout::kModeRaw;
    put_u64(a.dst + a.index_off + 8 * c, (prefix + size) | (mode << layout::kIndexModeShift));
  }
  if (cks) {
    uint32_t h;
    if (lh) {
      h = lh_finish(ls, CB);
    } else {
      Span span{};
      span.base = const_cast<uint8_t*>(a.src);
      h = (uint32_t)hash_span(span, first * VB, CB);
    }
    if (lane == 0) put_u32(a.dst + a.checksum_off + 4 * c, h);
  }
  if (c + 1 == a.n_chunks && lane == 0) {
    write_entropy_header(a.dst, a.dtype, a.chunk_log2, a.flags, a.n, prefix + size, sh.table_id, a.tensor,
                         sh.period);
    *a.frame_size = a.sym_off + prefix + size;
  }
  simt::syncwarp();  // the slot is reused by the warp's next chunk
}

// The warp's chunks, taken from the ticket until one past the chunks comes, which is returned.
template <int DT, bool kFast>
SZ_NOINLINE uint64_t entropy_encode_chunks(const EntropyEncodeArgs& a, const EntropyEncodeShared& sh, uint8_t* area,
                                           uint8_t* slot, uint64_t tag) {
  const LhKeys keys = lane_hash(a.flags) ? kLhKeys[simt::lane_id()] : LhKeys{0, 0, 0, 0};
  for (;;) {
    const uint64_t t = ws_ticket(a.ws);
    if (t >= a.n_chunks) return t;
    entropy_encode_chunk<DT, kFast>(a, sh, area, slot, t, tag, keys);
  }
}

// The kernel of dtype DT: a persistent grid of at most as many warps as the workspace has slots; every warp takes
// chunks until the tickets run out.
template <int DT>
SZ_DEV void entropy_encode_warps(const EntropyEncodeArgs& a) {
  using E = ESplit<DT>;
  constexpr uint32_t A1 = E::A + 1;
  uint8_t* const smem = simt::dyn_smem();
  EntropyEncodeShared& sh = *reinterpret_cast<EntropyEncodeShared*>(smem);
  const unsigned tid = simt::thread_id(), nt = simt::block_threads();
  simt::launch_dependents();
  simt::grid_dependency_wait();  // the input may be the stream's previous kernel's output
  WsWords wsw{0, 0};
  if (simt::lane_id() == 0) wsw = ws_read(a.ws);  // in flight while the tables are built
  if (tid == 0) {
    sh.err = open_encode_image(a, sh);
    sh.bad_image = false;
    sh.fast = false;
    if (sh.err == SZ_OK) {  // shared memory after the warps' areas: the group map, then the entries, if both fit
      sh.warp_bytes = EncArea<DT>::kBytes;
      const uint32_t areas = kEncSharedBytes + (nt / 32) * sh.warp_bytes;
      const uint64_t at = areas + (4ull * sh.period + 15) / 16 * 16;
      sh.fast = sh.period <= EntropyEncodePolicy::kCmapCap &&
                at + 8ull * A1 * sh.local <= EntropyEncodePolicy::kSmemBytes;
      sh.cmap_at = areas;
      sh.tables_at = (uint32_t)at;
    }
  }
  simt::syncthreads();
  if (sh.err == SZ_OK) {
    const bool fast = sh.fast;
    const uint32_t nl = sh.local, lf = sh.list_first, P = sh.period, G = sh.groups;
    uint32_t* const cm = reinterpret_cast<uint32_t*>(smem + sh.cmap_at);
    uint2* const tb = reinterpret_cast<uint2*>(smem + sh.tables_at);
    bool bad = false;  // a map entry or list entry out of range: not a valid image
    for (uint32_t c = tid; c < P; c += nt) {
      const uint32_t e = sh.cmap_g[c], lo = e & 0xFFFFu, gl = e >> 16;
      if (lo >= nl || gl >= G || sh.lists[lf + lo] != gl) bad = true;
      if (fast) cm[c] = simt::smem_addr(tb) + 8 * A1 * (lo < nl ? lo : 0);  // (a bad entry fails the call below)
    }
    if (fast) {
      for (uint32_t i = tid; i < nl * A1; i += nt) {
        const uint32_t g = sh.lists[lf + i / A1];
        if (g >= G) bad = true;
        if (g < G) simt::cp_async8(tb + i, sh.enc + (uint64_t)g * A1 + i % A1);  // (in flight together)
        else tb[i] = make_uint2(0, 0);
      }
    }
    simt::cp_async_commit();
    simt::cp_async_wait<0>();
    if (bad) sh.bad_image = true;  // (every thread that sees it stores the same value)
  }
  simt::syncthreads();
  if (tid == 0 && sh.bad_image) sh.err = SZ_ERROR_BOOK_MISMATCH;  // every CTA reads the same entries: all see it
  simt::syncthreads();
  if (sh.err != SZ_OK) {  // not a valid image of a table for this call: no frame
    if (simt::block_id() == 0 && tid == 0) *a.frame_size = 0;
    return;
  }
  if (a.n_chunks == 0) {  // the header is the whole frame
    if (simt::block_id() == 0 && tid == 0) {
      write_entropy_header(a.dst, a.dtype, a.chunk_log2, a.flags, 0, 0, sh.table_id, a.tensor, sh.period);
      *a.frame_size = layout::kHeaderSize;
    }
    return;
  }
  const uint64_t tag = ws_begin(wsw);
  if (tag == 0) {  // the workspace was never zero-filled: report through the frame size, change nothing
    if (simt::block_id() == 0 && tid == 0) *a.frame_size = 0;
    return;
  }
  const uint64_t warp = (uint64_t)simt::block_id() * (nt / 32) + simt::warp_id();
  uint8_t* const area = smem + kEncSharedBytes + simt::warp_id() * sh.warp_bytes;
  uint8_t* const slot = a.slots + warp * a.slot_bytes;
  const uint64_t u = sh.fast ? entropy_encode_chunks<DT, true>(a, sh, area, slot, tag)
                             : entropy_encode_chunks<DT, false>(a, sh, area, slot, tag);
  // Every warp draws one ticket past the chunks, after its last record is out: the warp that draws the call's last
  // ticket knows that no warp still uses the workspace, and resets it.
  const uint64_t warps = (uint64_t)simt::grid_blocks() * (nt / 32);
  if (u == a.n_chunks + warps - 1 && simt::lane_id() == 0) ws_end(a.ws, tag);
}

// ---- host side -----------------------------------------------------------------------------------------------

// What sz_cuda_compress_entropy_workspace_size answers.
inline sz_status entropy_encode_workspace_query(uint64_t n, sz_dtype dtype, const sz_params* params, size_t* ws) {
  if (!ws) return SZ_ERROR_INVALID_ARGUMENT;
  *ws = 0;
  if (!layout::dtype_known((unsigned)dtype) || n >= layout::kMaxValues) return SZ_ERROR_INVALID_ARGUMENT;
  sz_params p;
  const sz_status s = detail::resolve_entropy_params(params, n, &p);
  if (s != SZ_OK) return s;
  *ws = (size_t)entropy_encode_workspace_bytes(layout::n_chunks(n, p.chunk_log2), p.chunk_log2,
                                               layout::symbol_split((unsigned)dtype).symbol_bits);
  return SZ_OK;
}

// Resolves a compress call of a version 3 frame. Host checks only (the image lives in device memory: the kernel
// checks it); nothing is enqueued.
inline sz_status make_entropy_encode_args(const void* d_src, uint64_t n, sz_dtype dtype, const void* d_image,
                                          size_t image_size, uint32_t tensor, const sz_params* params, void* d_dst,
                                          size_t dst_capacity, void* d_workspace, size_t ws_size,
                                          uint64_t* d_frame_size, EntropyEncodeArgs* a) {
  if ((!d_src && n != 0) || !d_dst || !d_frame_size || !d_image) return SZ_ERROR_INVALID_ARGUMENT;
  if (!layout::dtype_known((unsigned)dtype) || n >= layout::kMaxValues) return SZ_ERROR_INVALID_ARGUMENT;
  if (((uintptr_t)d_image & 15u) != 0 || tensor >= layout::kMaxTensors) return SZ_ERROR_INVALID_ARGUMENT;
  if (image_size < sizeof(eimg::Header)) return SZ_ERROR_BAD_CODEBOOK;
  sz_params p;
  sz_status s = detail::resolve_entropy_params(params, n, &p);
  if (s != SZ_OK) return s;
  if (dst_capacity < sz_compress_bound(n, dtype)) return SZ_ERROR_DST_TOO_SMALL;
  size_t need = 0;
  if ((s = entropy_encode_workspace_query(n, dtype, &p, &need)) != SZ_OK) return s;
  if (ws_size < need) return SZ_ERROR_WORKSPACE_TOO_SMALL;
  if (!d_workspace || ((uintptr_t)d_workspace & 15u) != 0) return SZ_ERROR_INVALID_ARGUMENT;
  const layout::SymbolSplit sp = layout::symbol_split((unsigned)dtype);
  const bool checksums = (p.flags & layout::kFlagChecksums) != 0;
  const uint64_t chunks = layout::n_chunks(n, p.chunk_log2);
  const layout::FrameOffsets o = layout::entropy_frame_offsets(n, p.chunk_log2, checksums, sp.raw_bits, 0);
  *a = EntropyEncodeArgs{};
  a->src = (const uint8_t*)d_src;
  a->n = n;
  a->n_chunks = chunks;
  a->image = (const uint8_t*)d_image;
  a->image_size = image_size;
  a->dst = (uint8_t*)d_dst;
  a->index_off = o.index;
  a->checksum_off = o.checksums;
  a->raw_off = o.rest;
  a->sym_off = o.exponents;
  a->dtype = (uint32_t)dtype;
  a->chunk_log2 = p.chunk_log2;
  a->flags = p.flags;
  a->tensor = tensor;
  a->ws = (WsHeader*)d_workspace;
  a->slots = (uint8_t*)d_workspace + encode_workspace_bytes(chunks);
  a->slot_bytes = entropy_slot_bytes(p.chunk_log2, sp.symbol_bits);
  a->frame_size = d_frame_size;
  return SZ_OK;
}
// The CTAs of an encode call: no more warps than the workspace has slots.
inline uint64_t entropy_encode_grid(const EntropyEncodeArgs& a) {
  return entropy_slots(a.n_chunks) / EntropyEncodePolicy::kWarps;
}

}  // namespace cuda
}  // namespace splitzip
