// fast_avx2.cpp — AVX2 + BMI2 kernels of the fast CPU codec for BF16, FP16 and FP8 (docs/FORMAT.md §2, §3, §4.5), and
// XXH3 built for AVX2. Compiled with -mavx2 -mbmi2 and only called after a run-time CPU check (fast.cpp).
//
// Encode, 32 values per step: the exponent byte (x >> 7) and the rest byte are narrowed with packus; the exponent
// is mapped to code + 1 with one pshufb per distinct high nibble of the codebook (lookup by the low nibble, masked by
// a compare of the high nibble), so 0 marks an escape: a movemask finds those (rare) lanes and a scalar loop lists
// them. Codes (escapes give 0) are packed to k bits each with pext, 8 codes into k bytes.
// Decode, 32 values per step: pdep spreads 8 codes from k bytes into 8 bytes, one pshufb maps code -> exponent, and
// two byte blends rebuild the high and low byte of each value. Escapes are patched afterwards by the driver.
//
// This TU deliberately includes no C++ library header and nothing with inline functions of external linkage.
#if defined(__AVX2__) && defined(__BMI2__)

#include <immintrin.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "bf16_avx2.h"
#include "kernels.h"
#include "lanehash.h"

namespace splitzip {
namespace kernels {
namespace avx2 {

namespace {

constexpr uint64_t kPextMask[5] = {0, 0x0101010101010101ull, 0x0303030303030303ull, 0x0707070707070707ull,
                                   0x0F0F0F0F0F0F0F0Full};

// The exponent -> code + 1 lookup's registers (lookup_codes_plus1): each high nibble's 16-entry table and its value;
// returns how many (NN, or the tables' count when NN is 0).
template <unsigned NN>
inline unsigned load_nibble_luts(const CodeTables& t, __m256i* luts, __m256i* nibs) {
  const unsigned n_nib = NN != 0 ? NN : t.n_nibbles;
  for (unsigned h = 0; h < n_nib; ++h) {
    luts[h] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)t.nibble_lut[h]));
    nibs[h] = _mm256_set1_epi8((char)t.nibbles[h]);
  }
  return n_nib;
}

// Code + 1 of each of the 32 exponent bytes in e, or 0 where the exponent is not in the codebook: one byte shuffle
// over the low nibble per high nibble present in the codebook. NN: the number of those high nibbles when it is 1 or 2
// (unrolled), 0 for any number (n_nib).
template <unsigned NN>
inline __m256i lookup_codes_plus1(__m256i e, const __m256i* luts, const __m256i* nibs, unsigned n_nib) {
  const __m256i m0f = _mm256_set1_epi8(0x0F);
  const __m256i lo = _mm256_and_si256(e, m0f);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(e, 4), m0f);
  if (NN == 1) return _mm256_and_si256(_mm256_cmpeq_epi8(hi, nibs[0]), _mm256_shuffle_epi8(luts[0], lo));
  if (NN == 2)
    return _mm256_or_si256(_mm256_and_si256(_mm256_cmpeq_epi8(hi, nibs[0]), _mm256_shuffle_epi8(luts[0], lo)),
                           _mm256_and_si256(_mm256_cmpeq_epi8(hi, nibs[1]), _mm256_shuffle_epi8(luts[1], lo)));
  __m256i c1 = _mm256_setzero_si256();
  for (unsigned h = 0; h < n_nib; ++h)
    c1 = _mm256_or_si256(c1, _mm256_and_si256(_mm256_cmpeq_epi8(hi, nibs[h]), _mm256_shuffle_epi8(luts[h], lo)));
  return c1;
}

// Appends the escapes of up to 64 lanes to a chunk's escape lists: bit j of esc marks lane j, whose exponent is
// e_bytes[j] and whose position in the chunk is first + j. Returns the new number of escapes.
inline size_t append_escapes(uint64_t esc, const uint8_t* e_bytes, uint64_t first, uint16_t* pos, uint8_t* exps,
                             size_t x) {
  for (; esc != 0; esc &= esc - 1) {
    const unsigned j = (unsigned)__builtin_ctzll(esc);
    pos[x] = (uint16_t)(first + j);
    exps[x] = e_bytes[j];
    ++x;
  }
  return x;
}

// The same for the 32 lanes of one register of exponent bytes.
inline size_t append_escapes_32(uint32_t esc, __m256i e, uint64_t first, uint16_t* pos, uint8_t* exps, size_t x) {
  if (esc == 0) return x;
  alignas(32) uint8_t etmp[32];
  _mm256_store_si256((__m256i*)etmp, e);
  return append_escapes(esc, etmp, first, pos, exps, x);
}

// Packs the B low bits of each of the 32 bytes of v into 4·B bytes at dst (FORMAT.md §3 order): pext gathers the
// fields of 8 bytes, the four 8B-bit groups are joined in a register (no store-to-load forwarding stalls).
template <unsigned B>
inline void pack_low_bits_32(__m256i v, uint8_t* dst) {
  const uint64_t mask = kPextMask[B];
  const uint64_t p0 = _pext_u64((uint64_t)_mm256_extract_epi64(v, 0), mask);
  const uint64_t p1 = _pext_u64((uint64_t)_mm256_extract_epi64(v, 1), mask);
  const uint64_t p2 = _pext_u64((uint64_t)_mm256_extract_epi64(v, 2), mask);
  const uint64_t p3 = _pext_u64((uint64_t)_mm256_extract_epi64(v, 3), mask);
  const unsigned __int128 joined = (unsigned __int128)p0 | ((unsigned __int128)p1 << (8 * B)) |
                                   ((unsigned __int128)p2 << (16 * B)) | ((unsigned __int128)p3 << (24 * B));
  memcpy(dst, &joined, 4 * B);
}

// Encodes 32 BF16 values at src: rest bytes to rest, 4K code bytes to codes; returns the escape lanes as a bit mask
// and the exponent bytes in *e. NN: number of distinct high nibbles in the codebook when it is 1 or 2 (unrolled),
// 0 for any number.
template <unsigned K, unsigned NN>
inline uint32_t encode_bf16_32(const uint8_t* src, uint8_t* rest, uint8_t* codes, const __m256i* luts,
                               const __m256i* nibs, unsigned n_nib, __m256i* e_out) {
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i zero = _mm256_setzero_si256();
  __m256i e, r;
  split_bf16_32(src, &e, &r);
  _mm256_storeu_si256((__m256i*)rest, r);

  const __m256i c1 = lookup_codes_plus1<NN>(e, luts, nibs, n_nib);  // code + 1, or 0 for an escape
  const uint32_t esc = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(c1, zero));
  const __m256i code = _mm256_subs_epu8(c1, one);

  // pext gathers the K low bits of 8 codes; the four 8K-bit groups are joined in a register (no store-to-load
  // forwarding stalls) and stored as 4K bytes.
  pack_low_bits_32<K>(code, codes);
  *e_out = e;
  return esc;
}

template <unsigned K, unsigned NN>
size_t encode_bf16_k(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                     uint16_t* pos, uint8_t* exps, uint32_t pos_base) {
  __m256i luts[16], nibs[16];
  const unsigned n_nib = load_nibble_luts<NN>(t, luts, nibs);
  size_t x = 0;
  size_t i = 0;
  // 64 values per step: one (well predicted) escape test per 64 values instead of one (poorly predicted) per 32.
  for (; i + 64 <= len; i += 64) {
    __m256i e0, e1;
    const uint64_t m0 = encode_bf16_32<K, NN>(src + 2 * i, rest + i, codes + i / 8 * K, luts, nibs, n_nib, &e0);
    const uint64_t m1 =
        encode_bf16_32<K, NN>(src + 2 * i + 64, rest + i + 32, codes + i / 8 * K + 4 * K, luts, nibs, n_nib, &e1);
    uint64_t esc = m0 | (m1 << 32);
    if (esc != 0) {
      alignas(32) uint8_t etmp[64];
      _mm256_store_si256((__m256i*)etmp, e0);
      _mm256_store_si256((__m256i*)(etmp + 32), e1);
      x = append_escapes(esc, etmp, pos_base + i, pos, exps, x);
    }
  }
  for (; i < len; i += 32) {
    __m256i e0;
    uint32_t esc = encode_bf16_32<K, NN>(src + 2 * i, rest + i, codes + i / 8 * K, luts, nibs, n_nib, &e0);
    x = append_escapes_32(esc, e0, pos_base + i, pos, exps, x);
  }
  return x;
}

// Spreads four groups of B bytes (8 fields of B bits each, FORMAT.md §3) at p into the low bits of 32 bytes with
// pdep. pdep uses only the low 8B bits of its source, so a whole 8-byte load is fine where the buffer extends far
// enough (whole_loads), else each group is copied byte by byte.
template <unsigned B>
inline __m256i spread_groups(const uint8_t* p, bool whole_loads, uint64_t mask) {
  uint64_t g0, g1, g2, g3;
  if (whole_loads) {
    memcpy(&g0, p, 8);
    memcpy(&g1, p + B, 8);
    memcpy(&g2, p + 2 * B, 8);
    memcpy(&g3, p + 3 * B, 8);
  } else {
    g0 = g1 = g2 = g3 = 0;
    memcpy(&g0, p, B);
    memcpy(&g1, p + B, B);
    memcpy(&g2, p + 2 * B, B);
    memcpy(&g3, p + 3 * B, B);
  }
  return _mm256_set_epi64x((long long)_pdep_u64(g3, mask), (long long)_pdep_u64(g2, mask),
                           (long long)_pdep_u64(g1, mask), (long long)_pdep_u64(g0, mask));
}

template <unsigned K>
bool decode_bf16_k(const uint8_t* rest, const uint8_t* codes, size_t readable, size_t len, const CodeTables& t,
                   uint8_t* out) {
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)t.exp_of));
  const __m256i m7f = _mm256_set1_epi8(0x7F);
  const __m256i m80 = _mm256_set1_epi8((char)0x80);
  const __m256i max_code = _mm256_set1_epi8((char)(t.count - 1));
  __m256i bad = _mm256_setzero_si256();
  for (size_t i = 0; i < len; i += 32) {
    const __m256i code = spread_groups<K>(codes + i / 8 * K, i / 8 * K + 3 * K + 8 <= readable, kPextMask[K]);
    bad = _mm256_or_si256(bad, _mm256_cmpgt_epi8(code, max_code));
    const __m256i e = _mm256_shuffle_epi8(lut, code);
    const __m256i r = _mm256_loadu_si256((const __m256i*)(rest + i));
    const __m256i lo = _mm256_or_si256(_mm256_and_si256(r, m7f), _mm256_and_si256(_mm256_slli_epi16(e, 7), m80));
    const __m256i hi = _mm256_or_si256(_mm256_and_si256(r, m80), _mm256_and_si256(_mm256_srli_epi16(e, 1), m7f));
    const __m256i u0 = _mm256_unpacklo_epi8(lo, hi);  // values 0..7 | 16..23
    const __m256i u1 = _mm256_unpackhi_epi8(lo, hi);  // values 8..15 | 24..31
    _mm256_storeu_si256((__m256i*)(out + 2 * i), _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256((__m256i*)(out + 2 * i + 32), _mm256_permute2x128_si256(u0, u1, 0x31));
  }
  return _mm256_testz_si256(bad, bad) != 0;
}


// ---- FP8 (E4M3: M = 3, E5M2: M = 2): 32 one-byte values per step ------------------------------------------------
// The rest field (R = 7 - M + 1 bits: sign and mantissa) of 8 values is gathered with pext into R bytes; decode
// spreads it back with pdep.
template <unsigned M, unsigned K, unsigned NN>
size_t encode_fp8_k(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                    uint16_t* pos, uint8_t* exps, uint32_t pos_base) {
  constexpr unsigned E = 7 - M, R = M + 1;
  const __m256i emask = _mm256_set1_epi8((char)((1u << E) - 1));
  const __m256i mmask = _mm256_set1_epi8((char)((1u << M) - 1));
  const __m256i smask = _mm256_set1_epi8((char)(1u << M));
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i zero = _mm256_setzero_si256();
  __m256i luts[16], nibs[16];
  const unsigned n_nib = load_nibble_luts<NN>(t, luts, nibs);
  size_t x = 0;
  for (size_t i = 0; i < len; i += 32) {
    const __m256i v = _mm256_loadu_si256((const __m256i*)(src + i));
    const __m256i e = _mm256_and_si256(_mm256_srli_epi16(v, M), emask);
    const __m256i r = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 7 - M), smask), _mm256_and_si256(v, mmask));
    const __m256i c1 = lookup_codes_plus1<NN>(e, luts, nibs, n_nib);  // code + 1, or 0 for an escape
    uint32_t esc = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(c1, zero));
    const __m256i code = _mm256_subs_epu8(c1, one);
    pack_low_bits_32<K>(code, codes + i / 8 * K);
    pack_low_bits_32<R>(r, rest + i / 8 * R);
    x = append_escapes_32(esc, e, pos_base + i, pos, exps, x);
  }
  return x;
}

template <unsigned M, unsigned K>
bool decode_fp8_k(const uint8_t* rest, size_t rest_readable, const uint8_t* codes, size_t readable, size_t len,
                  const CodeTables& t, uint8_t* out) {
  constexpr unsigned E = 7 - M, R = M + 1;
  constexpr uint64_t kRestMask = R == 4 ? 0x0F0F0F0F0F0F0F0Full : 0x0707070707070707ull;
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)t.exp_of));
  const __m256i max_code = _mm256_set1_epi8((char)(t.count - 1));
  const __m256i mmask = _mm256_set1_epi8((char)((1u << M) - 1));
  const __m256i emask = _mm256_set1_epi8((char)(((1u << E) - 1) << M));
  const __m256i m80 = _mm256_set1_epi8((char)0x80);
  __m256i bad = _mm256_setzero_si256();
  for (size_t i = 0; i < len; i += 32) {
    const __m256i code = spread_groups<K>(codes + i / 8 * K, i / 8 * K + 3 * K + 8 <= readable, kPextMask[K]);
    const __m256i r = spread_groups<R>(rest + i / 8 * R, i / 8 * R + 3 * R + 8 <= rest_readable, kRestMask);
    bad = _mm256_or_si256(bad, _mm256_cmpgt_epi8(code, max_code));
    const __m256i e = _mm256_shuffle_epi8(lut, code);
    const __m256i v = _mm256_or_si256(
        _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi16(r, 7 - M), m80), _mm256_and_si256(r, mmask)),
        _mm256_and_si256(_mm256_slli_epi16(e, M), emask));
    _mm256_storeu_si256((__m256i*)(out + i), v);
  }
  return _mm256_testz_si256(bad, bad) != 0;
}

template <unsigned M, unsigned K>
size_t encode_fp8_nn(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                     uint16_t* pos, uint8_t* exps, uint32_t pos_base) {
  switch (t.n_nibbles) {
    case 1: return encode_fp8_k<M, K, 1>(src, len, rest, codes, t, pos, exps, pos_base);
    case 2: return encode_fp8_k<M, K, 2>(src, len, rest, codes, t, pos, exps, pos_base);
    default: return encode_fp8_k<M, K, 0>(src, len, rest, codes, t, pos, exps, pos_base);
  }
}

template <unsigned M>
size_t encode_fp8_m(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                    uint16_t* pos, uint8_t* exps, uint32_t pos_base) {
  switch (t.k) {
    case 1: return encode_fp8_nn<M, 1>(src, len, rest, codes, t, pos, exps, pos_base);
    case 2: return encode_fp8_nn<M, 2>(src, len, rest, codes, t, pos, exps, pos_base);
    case 3: return encode_fp8_nn<M, 3>(src, len, rest, codes, t, pos, exps, pos_base);
    default: return encode_fp8_nn<M, 4>(src, len, rest, codes, t, pos, exps, pos_base);
  }
}

template <unsigned M>
bool decode_fp8_m(const uint8_t* rest, size_t rest_readable, const uint8_t* codes, size_t readable, size_t len,
                  const CodeTables& t, uint8_t* out) {
  switch (t.k) {
    case 1: return decode_fp8_k<M, 1>(rest, rest_readable, codes, readable, len, t, out);
    case 2: return decode_fp8_k<M, 2>(rest, rest_readable, codes, readable, len, t, out);
    case 3: return decode_fp8_k<M, 3>(rest, rest_readable, codes, readable, len, t, out);
    default: return decode_fp8_k<M, 4>(rest, rest_readable, codes, readable, len, t, out);
  }
}

// ---- FP16: 32 values per step. Rest fields are 11 bits: pext packs 4 of them (44 bits) from each 64-bit lane and two
// lanes make the 11 bytes of a group of 8; decode spreads them back with pdep. ----------------------------------------
constexpr uint64_t kRest11 = 0x07FF07FF07FF07FFull;

inline void store_group11(uint8_t* dst, uint64_t lo44, uint64_t hi44) {
  const unsigned __int128 g = (unsigned __int128)lo44 | ((unsigned __int128)hi44 << 44);
  memcpy(dst, &g, 11);
}

template <unsigned K, unsigned NN>
size_t encode_fp16_k(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                     uint16_t* pos, uint8_t* exps, uint32_t pos_base) {
  const __m256i m001f = _mm256_set1_epi16(0x001F);
  const __m256i m0400 = _mm256_set1_epi16(0x0400);
  const __m256i m03ff = _mm256_set1_epi16(0x03FF);
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i zero = _mm256_setzero_si256();
  __m256i luts[16], nibs[16];
  const unsigned n_nib = load_nibble_luts<NN>(t, luts, nibs);
  size_t x = 0;
  for (size_t i = 0; i < len; i += 32) {
    const __m256i a = _mm256_loadu_si256((const __m256i*)(src + 2 * i));
    const __m256i b = _mm256_loadu_si256((const __m256i*)(src + 2 * i + 32));
    const __m256i ea = _mm256_and_si256(_mm256_srli_epi16(a, 10), m001f);
    const __m256i eb = _mm256_and_si256(_mm256_srli_epi16(b, 10), m001f);
    const __m256i ra = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 5), m0400), _mm256_and_si256(a, m03ff));
    const __m256i rb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 5), m0400), _mm256_and_si256(b, m03ff));
    const __m256i e = _mm256_permute4x64_epi64(_mm256_packus_epi16(ea, eb), 0xD8);
    uint8_t* rp = rest + i / 8 * 11;
    store_group11(rp, _pext_u64((uint64_t)_mm256_extract_epi64(ra, 0), kRest11),
                  _pext_u64((uint64_t)_mm256_extract_epi64(ra, 1), kRest11));
    store_group11(rp + 11, _pext_u64((uint64_t)_mm256_extract_epi64(ra, 2), kRest11),
                  _pext_u64((uint64_t)_mm256_extract_epi64(ra, 3), kRest11));
    store_group11(rp + 22, _pext_u64((uint64_t)_mm256_extract_epi64(rb, 0), kRest11),
                  _pext_u64((uint64_t)_mm256_extract_epi64(rb, 1), kRest11));
    store_group11(rp + 33, _pext_u64((uint64_t)_mm256_extract_epi64(rb, 2), kRest11),
                  _pext_u64((uint64_t)_mm256_extract_epi64(rb, 3), kRest11));

    const __m256i c1 = lookup_codes_plus1<NN>(e, luts, nibs, n_nib);  // code + 1, or 0 for an escape
    uint32_t esc = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(c1, zero));
    const __m256i code = _mm256_subs_epu8(c1, one);
    pack_low_bits_32<K>(code, codes + i / 8 * K);
    x = append_escapes_32(esc, e, pos_base + i, pos, exps, x);
  }
  return x;
}

// Spreads the 11-byte rest group at p into 8 u16 lanes (two u64 of 4 values each).
inline void load_group11(const uint8_t* p, bool whole_loads, uint64_t* lo, uint64_t* hi) {
  uint64_t a, b;
  if (whole_loads) {  // bits 0..63, and bits 40..103 shifted down to 44..
    memcpy(&a, p, 8);
    memcpy(&b, p + 5, 8);
    b >>= 4;
  } else {
    unsigned __int128 g = 0;
    memcpy(&g, p, 11);
    a = (uint64_t)g;
    b = (uint64_t)(g >> 44);
  }
  *lo = _pdep_u64(a, kRest11);
  *hi = _pdep_u64(b, kRest11);
}

template <unsigned K>
bool decode_fp16_k(const uint8_t* rest, size_t rest_readable, const uint8_t* codes, size_t readable, size_t len,
                   const CodeTables& t, uint8_t* out) {
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)t.exp_of));
  const __m256i max_code = _mm256_set1_epi8((char)(t.count - 1));
  const __m256i m0400 = _mm256_set1_epi16(0x0400);
  const __m256i m03ff = _mm256_set1_epi16(0x03FF);
  __m256i bad = _mm256_setzero_si256();
  for (size_t i = 0; i < len; i += 32) {
    const __m256i code = spread_groups<K>(codes + i / 8 * K, i / 8 * K + 3 * K + 8 <= readable, kPextMask[K]);
    bad = _mm256_or_si256(bad, _mm256_cmpgt_epi8(code, max_code));
    const __m256i e = _mm256_shuffle_epi8(lut, code);
    const uint8_t* rp = rest + i / 8 * 11;
    const bool whole = i / 8 * 11 + 33 + 13 <= rest_readable;
    uint64_t r[8];
    for (unsigned g = 0; g < 4; ++g) load_group11(rp + 11 * g, whole, &r[2 * g], &r[2 * g + 1]);
    const __m256i r0 = _mm256_set_epi64x((long long)r[3], (long long)r[2], (long long)r[1], (long long)r[0]);
    const __m256i r1 = _mm256_set_epi64x((long long)r[7], (long long)r[6], (long long)r[5], (long long)r[4]);
    const __m256i e0 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(e));
    const __m256i e1 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(e, 1));
    const __m256i v0 = _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(r0, m0400), 5),
                                                       _mm256_slli_epi16(e0, 10)),
                                       _mm256_and_si256(r0, m03ff));
    const __m256i v1 = _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(r1, m0400), 5),
                                                       _mm256_slli_epi16(e1, 10)),
                                       _mm256_and_si256(r1, m03ff));
    _mm256_storeu_si256((__m256i*)(out + 2 * i), v0);
    _mm256_storeu_si256((__m256i*)(out + 2 * i + 32), v1);
  }
  return _mm256_testz_si256(bad, bad) != 0;
}

template <unsigned K>
size_t encode_fp16_nn(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                      uint16_t* pos, uint8_t* exps, uint32_t pos_base) {
  switch (t.n_nibbles) {
    case 1: return encode_fp16_k<K, 1>(src, len, rest, codes, t, pos, exps, pos_base);
    case 2: return encode_fp16_k<K, 2>(src, len, rest, codes, t, pos, exps, pos_base);
    default: return encode_fp16_k<K, 0>(src, len, rest, codes, t, pos, exps, pos_base);
  }
}

template <unsigned K>
size_t encode_bf16_nn(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                      uint16_t* pos, uint8_t* exps, uint32_t pos_base) {
  switch (t.n_nibbles) {
    case 1: return encode_bf16_k<K, 1>(src, len, rest, codes, t, pos, exps, pos_base);
    case 2: return encode_bf16_k<K, 2>(src, len, rest, codes, t, pos, exps, pos_base);
    default: return encode_bf16_k<K, 0>(src, len, rest, codes, t, pos, exps, pos_base);
  }
}

}  // namespace

size_t encode_bf16(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                   uint16_t* pos, uint8_t* exps, uint32_t pos_base) {
  switch (t.k) {
    case 1: return encode_bf16_nn<1>(src, len, rest, codes, t, pos, exps, pos_base);
    case 2: return encode_bf16_nn<2>(src, len, rest, codes, t, pos, exps, pos_base);
    case 3: return encode_bf16_nn<3>(src, len, rest, codes, t, pos, exps, pos_base);
    default: return encode_bf16_nn<4>(src, len, rest, codes, t, pos, exps, pos_base);
  }
}

bool decode_bf16(const uint8_t* rest, const uint8_t* codes, size_t readable, size_t len, const CodeTables& t,
                 uint8_t* out) {
  switch (t.k) {
    case 1: return decode_bf16_k<1>(rest, codes, readable, len, t, out);
    case 2: return decode_bf16_k<2>(rest, codes, readable, len, t, out);
    case 3: return decode_bf16_k<3>(rest, codes, readable, len, t, out);
    default: return decode_bf16_k<4>(rest, codes, readable, len, t, out);
  }
}

size_t encode_fp8(unsigned mantissa_bits, const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes,
                  const CodeTables& t, uint16_t* pos, uint8_t* exps, uint32_t pos_base) {
  return mantissa_bits == 3 ? encode_fp8_m<3>(src, len, rest, codes, t, pos, exps, pos_base)
                            : encode_fp8_m<2>(src, len, rest, codes, t, pos, exps, pos_base);
}

bool decode_fp8(unsigned mantissa_bits, const uint8_t* rest, size_t rest_readable, const uint8_t* codes,
                size_t readable, size_t len, const CodeTables& t, uint8_t* out) {
  return mantissa_bits == 3 ? decode_fp8_m<3>(rest, rest_readable, codes, readable, len, t, out)
                            : decode_fp8_m<2>(rest, rest_readable, codes, readable, len, t, out);
}

size_t encode_fp16(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                   uint16_t* pos, uint8_t* exps, uint32_t pos_base) {
  switch (t.k) {
    case 1: return encode_fp16_nn<1>(src, len, rest, codes, t, pos, exps, pos_base);
    case 2: return encode_fp16_nn<2>(src, len, rest, codes, t, pos, exps, pos_base);
    case 3: return encode_fp16_nn<3>(src, len, rest, codes, t, pos, exps, pos_base);
    default: return encode_fp16_nn<4>(src, len, rest, codes, t, pos, exps, pos_base);
  }
}

bool decode_fp16(const uint8_t* rest, size_t rest_readable, const uint8_t* codes, size_t readable, size_t len,
                 const CodeTables& t, uint8_t* out) {
  switch (t.k) {
    case 1: return decode_fp16_k<1>(rest, rest_readable, codes, readable, len, t, out);
    case 2: return decode_fp16_k<2>(rest, rest_readable, codes, readable, len, t, out);
    case 3: return decode_fp16_k<3>(rest, rest_readable, codes, readable, len, t, out);
    default: return decode_fp16_k<4>(rest, rest_readable, codes, readable, len, t, out);
  }
}

uint32_t h32(const void* data, size_t size) { return (uint32_t)XXH3_64bits(data, size); }
uint32_t lh32(const void* data, size_t size) { return splitzip::lh32::lh32(data, size); }

}  // namespace avx2
}  // namespace kernels
}  // namespace splitzip

#endif  // __AVX2__ && __BMI2__
