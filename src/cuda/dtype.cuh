// dtype.cuh — the thread level of the CUDA codec: one lane's share of a round, for every dtype of
// docs/FORMAT.md §2. A round is 2 KiB of uncompressed data and a lane owns 64 consecutive bytes of it (one XXH3
// stripe): 32 BF16/FP16 values, 16 FP32 values or 64 FP8 values, i.e. kGroups groups of 8 values (§3).
//
//   encode_lane: the lane's 16 input words -> its rest fields packed with b = R (rest_words words), its codes
//                packed with b = k (one word of 8k bits per group) and its escape mask (bit j: value j escapes);
//   decode_lane: codes (or raw exponent fields) and rest fields -> the lane's 16 output words.
// Exponent -> code goes through per-slot tables in shared memory (EncodeTables) whose entries for slot j hold
// code << (k j) and the escape bit j, so adding a group's 8 entries packs its codes and its escape mask at once;
// code -> exponent goes through a table of code pairs (DecodeTables). BF16 has its own forms of both with the code
// width as a template parameter: they are the hot path of KV transfer.
#pragma once

#include "cuda/simt.cuh"

namespace splitzip {
namespace cuda {

constexpr uint32_t kRoundBytes = 2048;  // uncompressed bytes a warp handles per round
constexpr uint32_t kLaneBytes = 64;     // per lane and round: one XXH3 stripe

template <int DT>
struct Dt;
template <>
struct Dt<1> { static constexpr int W = 16, E = 8, R = 8, M = 7; };
template <>
struct Dt<2> { static constexpr int W = 16, E = 5, R = 11, M = 10; };
template <>
struct Dt<3> { static constexpr int W = 32, E = 8, R = 24, M = 23; };
template <>
struct Dt<4> { static constexpr int W = 8, E = 4, R = 4, M = 3; };
template <>
struct Dt<5> { static constexpr int W = 8, E = 5, R = 3, M = 2; };

template <int DT>
struct Lane {
  using T = Dt<DT>;
  static constexpr int kValueBytes = T::W / 8;
  static constexpr int kValues = (int)kLaneBytes / kValueBytes;     // per lane and round
  static constexpr int kGroups = kValues / 8;
  static constexpr int kRestBytes = kGroups * T::R;                 // 32, 44, 48, 32, 24: whole words
  static constexpr int kRestWords = kRestBytes / 4;
  static constexpr uint32_t kRoundValues = kRoundBytes / kValueBytes;
  static_assert(kRestBytes % 4 == 0, "a lane's rest fields are whole words");
};

template <int DT>
SZ_HD uint32_t exp_of(uint32_t x) {
  return (x >> Dt<DT>::M) & ((1u << Dt<DT>::E) - 1u);
}
template <int DT>
SZ_HD uint32_t rest_of(uint32_t x) {
  using T = Dt<DT>;
  return (((x >> (T::W - 1)) & 1u) << T::M) | (x & ((1u << T::M) - 1u));
}
template <int DT>
SZ_HD uint32_t join(uint32_t e, uint32_t r) {
  using T = Dt<DT>;
  return (((r >> T::M) & 1u) << (T::W - 1)) | (e << T::M) | (r & ((1u << T::M) - 1u));
}

// Value j (0 .. kValues-1) of a lane's 16 words.
template <int DT>
SZ_DEV uint32_t value_at(const uint32_t w[16], int j) {
  constexpr int VB = Dt<DT>::W / 8;
  if constexpr (VB == 4) return w[j];
  else if constexpr (VB == 2) return (w[j / 2] >> (16 * (j & 1))) & 0xFFFFu;
  else return (w[j / 4] >> (8 * (j & 3))) & 0xFFu;
}
// Puts value j into the lane's 16 words (which start zeroed).
template <int DT>
SZ_DEV void value_put(uint32_t w[16], int j, uint32_t x) {
  constexpr int VB = Dt<DT>::W / 8;
  if constexpr (VB == 4) w[j] = x;
  else if constexpr (VB == 2) w[j / 2] |= x << (16 * (j & 1));
  else w[j / 4] |= x << (8 * (j & 3));
}

// ORs field f (B bits) into a word string at bit offset `bit` (compile-time after unrolling) / reads it back.
template <int B>
SZ_DEV void put_bits(uint32_t* w, int bit, uint32_t f) {
  const int wi = bit / 32, sh = bit % 32;
  w[wi] |= f << sh;
  if (sh + B > 32) w[wi + 1] |= f >> (32 - sh);
}
template <int B>
SZ_DEV uint32_t get_bits(const uint32_t* w, int bit) {
  const int wi = bit / 32, sh = bit % 32;
  uint32_t v = w[wi] >> sh;
  if (sh + B > 32) v |= w[wi + 1] << (32 - sh);
  return B == 32 ? v : v & ((1u << B) - 1u);
}

// ---- FP8 forms (codes of at most 3 bits) -------------------------------------------------------------------------
// A value is one byte, so four go through a byte permute at a time. Code -> exponent: a table of 8 bytes in two
// words (byte c: the exponent of code c in place, e << M, or bit 7 for a code outside the codebook) and one prmt per
// 4 values, its selector nibbles the codes spread from K bits. Exponent -> code: the 2^E exponents' entries (code,
// or bit 6 for an escape) in 2^E / 4 words; prmt reads 8 of them by the low 3 bits of a nibble, and with bit 3 set it
// returns 0 (the sign of an entry < 0x80), so two permutes, one with the selectors' bit 3 flipped, cover 16.
template <int DT, int K>
struct Fp8Form {
  static constexpr bool kOn = (DT == 4 || DT == 5) && K >= 1 && K <= 3;
  static constexpr uint32_t kEscFlag = 0x40u;
};

// The decode table from the header's codebook.
template <int DT>
SZ_DEV uint2 fp8_decode_lut(const uint8_t* codebook, uint32_t count) {
  uint32_t t[2] = {0, 0};
  for (uint32_t c = 0; c < 8; ++c)
    t[c / 4] |= (c < count ? (uint32_t)codebook[c] << Dt<DT>::M : 0x80u) << (8 * (c % 4));
  return make_uint2(t[0], t[1]);
}

// A group's code word (8 codes of K bits) -> 8 nibbles: each step moves the upper half of every field pair up.
template <int K>
SZ_DEV uint32_t spread_codes(uint32_t x) {
  x += (x & (((1u << (4 * K)) - 1u) << (4 * K))) * ((1u << (16 - 4 * K)) - 1u);
  x += (x & ((((1u << (2 * K)) - 1u) << (2 * K)) * 0x00010001u)) * ((1u << (8 - 2 * K)) - 1u);
  x += (x & ((((1u << K) - 1u) << K) * 0x01010101u)) * ((1u << (4 - K)) - 1u);
  return x;
}
// The inverse for the low K bits of bytes a0..a3 of one word (higher bits ignored): a0 | a1 << K | a2 << 2K | a3 << 3K.
template <int K>
SZ_DEV uint32_t gather_fields(uint32_t a) {
  a &= ((1u << K) - 1u) * 0x01010101u;
  const uint32_t u = (a | (a >> (8 - K))) & (((1u << (2 * K)) - 1u) * 0x00010001u);
  return (u | (u >> (16 - 2 * K))) & ((1u << (4 * K)) - 1u);
}
// Bit 6 of each byte of x -> bits 0..3.
SZ_DEV uint32_t byte_flags(uint32_t x) { return (((x >> 6) & 0x01010101u) * 0x10204080u) >> 28; }
// Nibbles 4h .. 4h + 3 of x, one a byte (in its low 4 bits; the high 4 bits are the next nibble's).
SZ_DEV uint32_t nibble_bytes(uint32_t x, int h) { return simt::prmt(x, x >> 4, h ? 0x7362u : 0x5140u); }

// decode_lane for FP8 frames with codes of K <= 3 bits (no channel windows, coded records).
template <int DT, int K, class Put>
SZ_DEV bool decode_lane_fp8(const uint32_t cw[8], const uint32_t rest[Lane<DT>::kRestWords], uint2 lut,
                            const Put& put) {
  constexpr int M = Dt<DT>::M;
  constexpr uint32_t kMant = ((1u << M) - 1u) * 0x01010101u;
  uint32_t flags = 0;
  // Four values' rest fields, one a byte (bits 0..M - 1 mantissa, bit M sign, higher bits ignored) and their
  // exponent bytes -> four output bytes.
  auto join4 = [](uint32_t v, uint32_t e) {
    return ((v << (7 - M)) & 0x80808080u) | (((v & kMant) | e) & 0x7F7F7F7Fu);
  };
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    uint32_t w[4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int g = 2 * t + h;
      const uint32_t sel = spread_codes<K>(cw[g]);
      const uint32_t e0 = simt::prmt(lut.x, lut.y, sel), e1 = simt::prmt(lut.x, lut.y, sel >> 16);
      flags |= e0 | e1;
      uint32_t v0, v1;
      if constexpr (DT == 4) {  // rest nibbles: bytes n0 n1 n2 n3 (and n4 .. n7) from the word and its shift by 4
        v0 = nibble_bytes(rest[g], 0);
        v1 = nibble_bytes(rest[g], 1);
      } else {  // 3-bit rest fields: the group's 24 bits, then 4 x 3 bits -> 4 bytes
        const int bit = 24 * g, i = bit / 32, s = bit % 32;
        uint32_t r = rest[i] >> s;
        if (s > 8) r |= rest[i + 1] << (32 - s);
        auto spread3 = [](uint32_t x) {
          x += (x & 0xFC0u) * 1023u;
          return x + (x & 0x00380038u) * 31u;
        };
        v0 = spread3(r & 0xFFFu);
        v1 = spread3((r >> 12) & 0xFFFu);
      }
      w[2 * h] = join4(v0, e0);
      w[2 * h + 1] = join4(v1, e1);
    }
    put(t, make_uint4(w[0], w[1], w[2], w[3]));
  }
  return (flags & 0x80808080u) != 0;
}

// encode_lane for FP8 with codes of K <= 3 bits from the encode table (build_encode_tables: 2^E entries, 4 a word).
template <int DT, int K>
SZ_DEV void encode_lane_fp8(const uint32_t w[16], const uint32_t* lut, uint32_t rest[Lane<DT>::kRestWords],
                            uint32_t codes[8], uint64_t* esc) {
  constexpr int M = Dt<DT>::M;
  uint64_t m = 0;
  if constexpr (DT == 5) {
#pragma unroll
    for (int i = 0; i < 6; ++i) rest[i] = 0;
  }
#pragma unroll
  for (int g = 0; g < 8; ++g) {
    const uint32_t x0 = w[2 * g], x1 = w[2 * g + 1];
    // Selector nibbles: the low 4 exponent bits of the 8 values (values 0..3 in bits 0..15, 4..7 in 16..31).
    auto nib = [](uint32_t x) {
      const uint32_t y = (x >> M) & 0x0F0F0F0Fu;
      return y | (y >> 4);
    };
    const uint32_t sel = simt::prmt(nib(x0), nib(x1), 0x6420u), sel8 = sel ^ 0x88888888u;
    auto look = [&](uint32_t x, uint32_t s, uint32_t s8) {
      uint32_t c = simt::prmt(lut[0], lut[1], s) | simt::prmt(lut[2], lut[3], s8);
      if constexpr (DT == 5) {  // exponents 16..31: the same from the upper table, chosen by exponent bit 4
        const uint32_t hc = simt::prmt(lut[4], lut[5], s) | simt::prmt(lut[6], lut[7], s8);
        const uint32_t up = simt::prmt(x << 1, 0, 0xBA98u);  // bit 6 of each byte, replicated
        c = (hc & up) | (c & ~up);
      }
      return c;
    };
    const uint32_t c0 = look(x0, sel, sel8), c1 = look(x1, sel >> 16, sel8 >> 16);
    codes[g] = gather_fields<K>(c0) | (gather_fields<K>(c1) << (4 * K));
    m |= (uint64_t)(byte_flags(c0) | (byte_flags(c1) << 4)) << (8 * g);
    // Rest fields: sign -> bit M, mantissa below it, one a byte, then packed R bits each.
    constexpr uint32_t kMant = ((1u << M) - 1u) * 0x01010101u, kSign = (1u << M) * 0x01010101u;
    auto rf = [&](uint32_t x) { return (x & kMant) | ((x >> (7 - M)) & kSign); };
    if constexpr (DT == 4) {
      auto pack = [&](uint32_t x) {
        const uint32_t r = rf(x);
        return r | (r >> 4);
      };
      rest[g] = simt::prmt(pack(x0), pack(x1), 0x6420u);
    } else {
      const uint32_t r24 = gather_fields<3>(rf(x0)) | (gather_fields<3>(rf(x1)) << 12);
      const int bit = 24 * g, i = bit / 32, s = bit % 32;
      rest[i] |= r24 << s;
      if (s > 8) rest[i + 1] |= r24 >> (32 - s);
    }
  }
  *esc = m;
}

// ---- BF16 rest fields ----------------------------------------------------------------------------------------------
// A rest byte is the value's sign (bit 15 -> bit 7) and mantissa (bits 0..6): its low byte, with the high byte's
// top bit.
// Group of 8 values (words q[0..3], two values each) -> its two rest words.
SZ_DEV void bf16_rest_group(const uint32_t q[4], uint32_t rest2[2]) {
  const uint32_t l0 = simt::prmt(q[0], q[1], 0x6420), h0 = simt::prmt(q[0], q[1], 0x7531);
  const uint32_t l1 = simt::prmt(q[2], q[3], 0x6420), h1 = simt::prmt(q[2], q[3], 0x7531);
  rest2[0] = (l0 & 0x7F7F7F7Fu) | (h0 & 0x80808080u);
  rest2[1] = (l1 & 0x7F7F7F7Fu) | (h1 & 0x80808080u);
}
// Output word m (values 2m, 2m + 1 of a group) from the group's rest word m / 2 and the two exponents in place
// (bits 7..14 and 23..30, nothing else set).
SZ_DEV uint32_t bf16_join2(uint32_t rest_word, int m, uint32_t exps) {
  return (simt::prmt(rest_word, 0, (m & 1) ? 0x3322u : 0x1100u) & 0x807F807Fu) | exps;
}

// ---- encode tables -------------------------------------------------------------------------------------------------
// The index of exponent e in the codebook, or `none`.
SZ_DEV uint32_t codebook_index(const uint8_t* codebook, uint32_t count, uint32_t e, uint32_t none) {
  uint32_t c = none;
  for (uint32_t q = 0; q < count; ++q)
    if (codebook[q] == e) c = q;
  return c;
}
// Slot tables for exponent -> code: entry (j, e) is {code(e) << (k j), 0} or, when e escapes, {0, 1 << j}. BF16 with
// k <= 3 keeps both in one word (codes in bits 0..23, escape bit 24 + j) for all 8 slots; the two-word form has
// tables for slots 0..3 only, and slot j + 4 is slot j's entry shifted by 4k (codes) and 4 (escape bits).
template <int DT, int K>
struct EncEntry {
  static constexpr bool kOneWord = DT == 1 && K >= 1 && K <= 3;
  static constexpr uint32_t kBytes = kOneWord ? 4 : 8;
  static constexpr uint32_t kSlots = kOneWord ? 8 : 4;
  static constexpr uint32_t kTableBytes = kSlots * (1u << Dt<DT>::E) * kBytes;
};

// Fills the tables from the codebook (all threads of the CTA call it, then barrier); every thread reads the same
// codebook entry at a time.
template <int DT, int K>
SZ_DEV void build_encode_tables(uint8_t* tab, const uint8_t* codebook, uint32_t count, uint32_t k) {
  constexpr uint32_t NE = 1u << Dt<DT>::E;
  if constexpr (Fp8Form<DT, K>::kOn) {  // the permute tables of encode_lane_fp8: byte e is exponent e's entry
    for (uint32_t e = simt::thread_id(); e < NE; e += simt::block_threads()) {
      tab[e] = (uint8_t)codebook_index(codebook, count, e, Fp8Form<DT, K>::kEscFlag);
    }
  } else {
    for (uint32_t i = simt::thread_id(); i < EncEntry<DT, K>::kSlots * NE; i += simt::block_threads()) {
      const uint32_t j = i / NE, e = i % NE;
      const uint32_t c = codebook_index(codebook, count, e, 0xFFu);
      if constexpr (EncEntry<DT, K>::kOneWord) {
        reinterpret_cast<uint32_t*>(tab)[i] = c == 0xFFu ? 1u << (24 + j) : c << (K * j);
      } else {
        reinterpret_cast<uint2*>(tab)[i] = c == 0xFFu ? make_uint2(0u, 1u << j) : make_uint2(c << (k * j), 0u);
      }
    }
  }
}

// One lane's round: rest fields, codes (word g = group g's 8 codes) and escape mask, from its 16 input words.
// K: the code width (the table entries are already shifted by k j; the two-word forms shift slots 4..7 by 4 K).
// tab: the tables in shared memory at a 1 KiB-aligned address.
template <int DT, int K>
SZ_DEV void encode_lane(const uint32_t w[16], const uint8_t* tab, uint32_t rest[Lane<DT>::kRestWords],
                        uint32_t codes[Lane<DT>::kGroups], uint64_t* esc) {
  using T = Dt<DT>;
  using L = Lane<DT>;
  constexpr uint32_t NE = 1u << T::E;
  uint64_t m = 0;
  if constexpr (DT == 1) {
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      const uint32_t q[4] = {w[4 * g], w[4 * g + 1], w[4 * g + 2], w[4 * g + 3]};
      bf16_rest_group(q, rest + 2 * g);
      if constexpr (EncEntry<DT, K>::kOneWord) {
        uint32_t acc = 0;
        const uint32_t tb = simt::smem_addr(tab);  // 1 KiB-aligned: slot j's entry e at (tb | e << 2) + 1024 j
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // byte offsets of the two exponents of word i: e << 2
          const uint32_t lo = (q[i] >> 5) & 0x3FCu, hi = (q[i] >> 21) & 0x3FCu;
          acc += simt::lds_u32((tb | lo) + (2 * i) * 1024) + simt::lds_u32((tb | hi) + (2 * i + 1) * 1024);
        }
        codes[g] = acc & 0xFFFFFFu;
        m |= (uint64_t)(acc >> 24) << (8 * g);
      } else {
        uint32_t cx[2] = {0, 0}, ex[2] = {0, 0};  // slots 0..3 and 4..7
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint32_t lo = (q[i] >> 4) & 0x7F8u, hi = (q[i] >> 20) & 0x7F8u;
          const uint2 u = *reinterpret_cast<const uint2*>(tab + (2 * (i & 1)) * 2048 + lo);
          const uint2 v = *reinterpret_cast<const uint2*>(tab + (2 * (i & 1) + 1) * 2048 + hi);
          cx[i / 2] += u.x + v.x;
          ex[i / 2] += u.y + v.y;
        }
        codes[g] = cx[0] + (cx[1] << (4 * K));
        m |= (uint64_t)(ex[0] | (ex[1] << 4)) << (8 * g);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < L::kRestWords; ++i) rest[i] = 0;
#pragma unroll
    for (int g = 0; g < L::kGroups; ++g) {
      uint32_t cx[2] = {0, 0}, ex[2] = {0, 0};  // slots 0..3 and 4..7
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const uint32_t x = value_at<DT>(w, 8 * g + j);
        put_bits<T::R>(rest, (8 * g + j) * T::R, rest_of<DT>(x));
        const uint2 u = reinterpret_cast<const uint2*>(tab)[(j & 3) * NE + exp_of<DT>(x)];
        cx[j / 4] += u.x;
        ex[j / 4] += u.y;
      }
      codes[g] = cx[0] + (cx[1] << (4 * K));
      m |= (uint64_t)(ex[0] | (ex[1] << 4)) << (8 * g);
    }
  }
  *esc = m;
}

// The channel bases of a frame with channel windows (§4.9): value i of the frame belongs to channel i mod period.
struct Channels {
  const uint8_t* bases;  // the frame's tensor's `period` bases (device memory); nullptr: a codebook frame
  uint32_t period;
  SZ_DEV uint32_t base(uint32_t c) const {
#if defined(SZ_SIMT_EMU)
    return bases[c];
#else
    return __ldg(bases + c);
#endif
  }
  // The bases of channels c .. c + 7 (mod period), byte j of the pair for channel c + j: one 8-byte load where
  // they neither wrap nor straddle an 8-byte boundary (every KV shape whose period is a multiple of 8), else 8.
  SZ_DEV uint2 base8(uint32_t c) const {
    const uint8_t* p = bases + c;
    if (c + 8 <= period && (reinterpret_cast<uintptr_t>(p) & 7u) == 0) {
#if defined(SZ_SIMT_EMU)
      uint2 v;
      memcpy(&v, p, 8);
      return v;
#else
      return __ldg(reinterpret_cast<const uint2*>(p));
#endif
    }
    uint32_t w[2] = {0, 0};
    for (int j = 0; j < 8; ++j) {
      w[j / 4] |= base(c) << (8 * (j % 4));
      if (++c == period) c = 0;
    }
    return make_uint2(w[0], w[1]);
  }
  // The channel 8 values after channel c.
  SZ_DEV uint32_t next8(uint32_t c) const { return c + 8 < period ? c + 8 : (c + 8) % period; }
};

// encode_lane for channel windows: value j of the lane is in channel c0 + j (mod period). The code is the offset of
// the exponent in its channel's window, or an escape.
template <int DT, int K>
SZ_DEV void encode_lane_ch(const uint32_t w[16], const Channels& ch, uint32_t c0, uint32_t rest[Lane<DT>::kRestWords],
                           uint32_t codes[Lane<DT>::kGroups], uint64_t* esc) {
  using T = Dt<DT>;
  using L = Lane<DT>;
  uint64_t m = 0;
  uint32_t c = c0;
#pragma unroll
  for (int i = 0; i < L::kRestWords; ++i) rest[i] = 0;
#pragma unroll
  for (int g = 0; g < L::kGroups; ++g) {
    uint32_t cx = 0, ex = 0;
    const uint2 b = ch.base8(c);
    c = ch.next8(c);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t x = value_at<DT>(w, 8 * g + j);
      put_bits<T::R>(rest, (8 * g + j) * T::R, rest_of<DT>(x));
      const uint32_t d = exp_of<DT>(x) - (((j < 4 ? b.x : b.y) >> (8 * (j % 4))) & 0xFFu);  // wraps below the window
      if (d < (1u << K)) cx |= d << (K * j);
      else ex |= 1u << j;
    }
    codes[g] = cx;
    m |= (uint64_t)ex << (8 * g);
  }
  *esc = m;
}

// ---- BF16 with channel windows (§4.9) -----------------------------------------------------------------------------
// The hot form of channel-aware frames: code = exponent - the channel's base when that is below 2^K. Encode: two
// values a word, in 16-bit lanes (exponent + 256 - base never borrows across them), a window test by an add into bit
// 15; decode: four exponents a word as bytes (base + code, a carry out of a byte is an exponent >= 256: reported).
template <int K>
SZ_DEV void encode_lane_bf16_ch(const uint32_t w[16], const Channels& ch, uint32_t c0, uint32_t rest[8],
                                uint32_t codes[4], uint64_t* esc) {
  constexpr uint32_t kCode = ((1u << K) - 1u) * 0x00010001u, kOut = (0x1FFu & ~((1u << K) - 1u)) * 0x00010001u;
  uint64_t m = 0;
  uint32_t c = c0;
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    const uint32_t q[4] = {w[4 * g], w[4 * g + 1], w[4 * g + 2], w[4 * g + 3]};
    bf16_rest_group(q, rest + 2 * g);
    const uint2 b = ch.base8(c);
    c = ch.next8(c);
    uint32_t cw = 0, em = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // values 2i, 2i + 1 of the group: exponents and bases in bits 0..7 and 16..23
      const uint32_t e = (q[i] >> 7) & 0x00FF00FFu;
      const uint32_t base = simt::prmt(i < 2 ? b.x : b.y, 0, (i & 1) ? 0x4342u : 0x4140u);
      const uint32_t d = (e + 0x01000100u - base) ^ 0x01000100u;  // per lane: e - base if >= 0, else >= 257
      const uint32_t f = ((d & kOut) + 0x7FFF7FFFu) & 0x80008000u;  // bit 15 / 31: outside the window, escapes
      const uint32_t cd = d & kCode & ~((f >> 15) * 0xFFFFu);      // an escape's code is 0
      cw |= ((cd | (cd >> (16 - K))) & ((1u << (2 * K)) - 1u)) << (2 * K * i);
      em |= (((f >> 15) & 1u) | (f >> 30)) << (2 * i);
    }
    codes[g] = cw;
    m |= (uint64_t)em << (8 * g);
  }
  *esc = m;
}

template <int K, class Put>
SZ_DEV bool decode_lane_bf16_ch(const uint32_t cw[4], const uint32_t rest[8], const Channels& ch, uint32_t c0,
                                const Put& put) {
  uint32_t carry = 0, c = c0;
  auto add = [&](uint32_t base, uint32_t code) {  // bytewise base + code (code < 16)
    const uint32_t s = (base & 0x7F7F7F7Fu) + code;
    carry |= base & s;
    return s ^ (base & 0x80808080u);
  };
#pragma unroll
  for (int t = 0; t < 4; ++t) {  // piece t = group t
    const uint2 b = ch.base8(c);
    c = ch.next8(c);
    const uint32_t n = spread_codes<K>(cw[t]);
    const uint32_t e0 = add(b.x, nibble_bytes(n, 0) & 0x0F0F0F0Fu), e1 = add(b.y, nibble_bytes(n, 1) & 0x0F0F0F0Fu);
    uint32_t v[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {  // values 8t + 2m, 8t + 2m + 1: one output word
      const uint32_t ent = simt::prmt(m < 2 ? e0 : e1, 0, (m & 1) ? 0x4342u : 0x4140u) << 7;
      v[m] = bf16_join2(rest[2 * t + m / 2], m, ent);
    }
    put(t, make_uint4(v[0], v[1], v[2], v[3]));
  }
  return (carry & 0x80808080u) != 0;
}

// ---- decode tables -------------------------------------------------------------------------------------------------
// Entry p of the pair table (p = code_a | code_b << k, 2^2k entries): the two exponents. BF16 keeps them in place
// (code_a's at bits 7..14, code_b's at bits 23..30), other dtypes as bytes 0 and 1. Bit 31, which neither form uses
// for an exponent, flags a pair with a code >= count; decode_lane keeps it out of the output and reports it.
constexpr uint32_t kPairBad = 0x80000000u;
template <int DT>
SZ_DEV void build_decode_tables(uint32_t* pair, const uint8_t* codebook, uint32_t k, uint32_t count) {
  const uint32_t n = 1u << (2 * k), mask = (1u << k) - 1u;
  for (uint32_t i = simt::thread_id(); i < n; i += simt::block_threads()) {
    const uint32_t ca = i & mask, cb = i >> k;
    const uint32_t ea = codebook[ca & 15u], eb = codebook[cb & 15u];
    const uint32_t bad = (ca >= count || cb >= count) ? kPairBad : 0u;
    pair[i] = (DT == 1 ? (ea << 7) | (eb << 23) : ea | (eb << 8)) | bad;
  }
}

// Byte offset into the pair table of pair m (codes 2m, 2m+1) of a group's code word (8k bits).
SZ_DEV uint32_t pair_offset(uint32_t cw, int m, uint32_t k) { return ((cw >> (2 * k * m)) & ((1u << (2 * k)) - 1u)) << 2; }

// One lane's round from its codes (word g = group g's 8k code bits) or raw exponent fields (RAW: cw holds the
// lane's exponent fields packed with b = E, a raw record, §4.5), and its rest words. Each 16-byte piece of output
// (pieces 0..3 of the lane's 64 bytes) goes to put(t, piece) as soon as it is complete, so no more than one piece
// is held. Returns whether a code was out of the codebook (pair table flag). The pair table is in shared memory at a
// 1 KiB-aligned address.
// CH (channel windows, §4.9): codes are offsets into the window of channel c0 + j of the lane's value j; a code
// whose exponent would be >= 2^E is reported like a code outside a codebook.
template <int DT, bool RAW, class Put, bool CH = false>
SZ_DEV bool decode_lane(const uint32_t* cw, const uint32_t rest[Lane<DT>::kRestWords], const uint8_t* pair,
                        uint32_t k, const Put& put, const Channels* ch = nullptr, uint32_t c0 = 0) {
  using T = Dt<DT>;
  constexpr int VP = 16 / (T::W / 8);  // values per piece: 8, 4 (FP32) or 16 (FP8)
  uint32_t flags = 0, c = c0;
  const uint32_t pb = simt::smem_addr(pair);  // 1 KiB-aligned: entry addresses are pb | offset
  uint2 b = make_uint2(0, 0);  // CH: the bases of values 8 * (j / 8) .. + 7
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    uint32_t w[4] = {0, 0, 0, 0};
    if constexpr (CH) {
#pragma unroll
      for (int q = 0; q < VP; ++q) {
        const int j = VP * t + q;
        if (j % 8 == 0) {
          b = ch->base8(c);
          c = ch->next8(c);
        }
        const uint32_t base = ((j % 8 < 4 ? b.x : b.y) >> (8 * (j % 4))) & 0xFFu;
        const uint32_t e = base + ((cw[j / 8] >> (k * (j % 8))) & ((1u << k) - 1u));
        flags |= e >> T::E;  // nonzero: no such exponent
        value_put<DT>(w, q, join<DT>(e & ((1u << T::E) - 1u), get_bits<T::R>(rest, j * T::R)));
      }
    } else if constexpr (DT == 1 && !RAW) {
#pragma unroll
      for (int m = 0; m < 4; ++m) {  // values 8t + 2m, 8t + 2m + 1: one output word
        const uint32_t ent = simt::lds_u32(pb | pair_offset(cw[t], m, k));
        flags |= ent;
        w[m] = bf16_join2(rest[2 * t + m / 2], m, ent & 0x7F807F80u);
      }
    } else {
#pragma unroll
      for (int q = 0; q < VP; q += 2) {  // values j, j + 1 of the lane
        const int j = VP * t + q;
        uint32_t ea, eb;
        if constexpr (RAW) {
          ea = get_bits<T::E>(cw, j * T::E);
          eb = get_bits<T::E>(cw, (j + 1) * T::E);
        } else {
          const uint32_t ent = simt::lds_u32(pb | pair_offset(cw[j / 8], (j % 8) / 2, k));
          flags |= ent;
          ea = ent & 0xFFu;
          eb = (ent >> 8) & 0xFFu;
        }
        value_put<DT>(w, q, join<DT>(ea, get_bits<T::R>(rest, j * T::R)));
        value_put<DT>(w, q + 1, join<DT>(eb, get_bits<T::R>(rest, (j + 1) * T::R)));
      }
    }
    put(t, make_uint4(w[0], w[1], w[2], w[3]));
  }
  return CH ? flags != 0 : (flags & kPairBad) != 0;
}

}  // namespace cuda
}  // namespace splitzip
