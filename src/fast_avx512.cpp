// fast_avx512.cpp — AVX-512 (BW + VBMI) kernels of the fast CPU codec for BF16 (docs/FORMAT.md §2, §3, §4.5), and
// XXH3 built for AVX-512. Compiled with -mavx512bw -mavx512vbmi and only called after a run-time CPU check.
//
// Encode, 64 values per step: vpermt2b splits the 128 input bytes into low and high bytes; the rest byte and the
// exponent byte are one bit-select / shift-or each; exponent -> code + 1 is two 128-entry vpermt2b lookups blended
// by the exponent's top bit (0 marks an escape, found with one mask test); codes are packed to k bits with
// maddubs/madd (4 codes in 4k bits), one 64-bit shift-or (8 codes in 8k bits) and one vpermb that keeps k bytes of
// every 64-bit lane, stored with a byte mask.
// Decode, 64 values per step: a masked load of 8k code bytes, vpermb puts each k-byte group in its own 64-bit lane,
// vpmultishiftqb cuts the 8 codes out of it, pshufb maps code -> exponent, two bit-selects rebuild the low and high
// bytes and two vpermt2b interleave them into values. Escapes are patched by the driver.
//
// Like fast_avx2.cpp, this TU includes no C++ library header.
#if defined(__AVX512BW__) && defined(__AVX512VBMI__)

// GCC 12 warns about the deliberately undefined source operand inside its own AVX-512 intrinsic headers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kernels.h"
#include "lanehash.h"

namespace splitzip {
namespace kernels {
namespace avx512 {

namespace {

constexpr int kSelect = 0xCA;     // ternary logic: A ? B : C, bit by bit
constexpr int kAndThenOr = 0xEA;  // ternary logic: (A & B) | C

__m512i byte_index(unsigned (*f)(unsigned)) {
  alignas(64) uint8_t idx[64];
  for (unsigned j = 0; j < 64; ++j) idx[j] = (uint8_t)f(j);
  return _mm512_load_si512((const void*)idx);
}

template <unsigned K>
size_t encode_bf16_k(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                     uint16_t* pos, uint8_t* exps, uint32_t pos_base) {
  alignas(64) uint8_t table[256];  // exponent -> code + 1, 0 for an escape
  for (unsigned e = 0; e < 256; ++e) table[e] = t.code_of[e] == 0xFF ? 0 : (uint8_t)(t.code_of[e] + 1);
  const __m512i t0 = _mm512_load_si512((const void*)table), t1 = _mm512_load_si512((const void*)(table + 64));
  const __m512i t2 = _mm512_load_si512((const void*)(table + 128)), t3 = _mm512_load_si512((const void*)(table + 192));
  const __m512i idx_lo = byte_index([](unsigned j) { return 2 * j; });
  const __m512i idx_hi = byte_index([](unsigned j) { return 2 * j + 1; });
  alignas(64) uint8_t compact[64];  // keep bytes 0..K-1 of every 64-bit lane
  for (unsigned m = 0; m < 64; ++m) compact[m] = (uint8_t)(m < 8 * K ? (m / K) * 8 + m % K : 0);
  const __m512i idx_compact = _mm512_load_si512((const void*)compact);
  const __m512i m80 = _mm512_set1_epi8((char)0x80);
  const __m512i m01 = _mm512_set1_epi8(1);
  const __m512i w1 = _mm512_set1_epi16((short)(1 | (1 << (8 + K))));  // bytes: 1, 2^K
  const __m512i w2 = _mm512_set1_epi32(1 | (1 << (16 + 2 * K)));      // words: 1, 2^2K
  const __m512i lo32 = _mm512_set1_epi64(0xFFFFFFFFll);
  const __mmask64 store_mask = K == 8 ? ~0ull : ((1ull << (8 * K)) - 1);
  size_t x = 0;
  for (size_t i = 0; i < len; i += 64) {
    const __m512i a = _mm512_loadu_si512((const void*)(src + 2 * i));
    const __m512i b = _mm512_loadu_si512((const void*)(src + 2 * i + 64));
    const __m512i lo = _mm512_permutex2var_epi8(a, idx_lo, b);
    const __m512i hi = _mm512_permutex2var_epi8(a, idx_hi, b);
    _mm512_storeu_si512((void*)(rest + i), _mm512_ternarylogic_epi32(m80, hi, lo, kSelect));
    const __m512i e = _mm512_ternarylogic_epi32(m01, _mm512_srli_epi16(lo, 7), _mm512_add_epi8(hi, hi), kAndThenOr);
    const __m512i c_low = _mm512_permutex2var_epi8(t0, e, t1);
    const __m512i c_high = _mm512_permutex2var_epi8(t2, e, t3);
    const __m512i c1 = _mm512_mask_blend_epi8(_mm512_movepi8_mask(e), c_low, c_high);
    uint64_t esc = _mm512_testn_epi8_mask(c1, c1);
    const __m512i code = _mm512_subs_epu8(c1, m01);
    const __m512i t16 = _mm512_maddubs_epi16(code, w1);
    const __m512i t32 = _mm512_madd_epi16(t16, w2);
    const __m512i t64 = _mm512_ternarylogic_epi64(lo32, t32, _mm512_srli_epi64(t32, 32 - 4 * K), kAndThenOr);
    _mm512_mask_storeu_epi8(codes + i / 8 * K, store_mask, _mm512_permutexvar_epi8(idx_compact, t64));
    if (esc != 0) {
      alignas(64) uint8_t etmp[64];
      _mm512_store_si512((void*)etmp, e);
      do {
        const unsigned j = (unsigned)__builtin_ctzll(esc);
        pos[x] = (uint16_t)(pos_base + i + j);
        exps[x] = etmp[j];
        ++x;
        esc &= esc - 1;
      } while (esc != 0);
    }
  }
  return x;
}

template <unsigned K>
bool decode_bf16_k(const uint8_t* rest, const uint8_t* codes, size_t len, const CodeTables& t, uint8_t* out) {
  alignas(64) uint8_t spread[64], shifts[64], lut[64];
  for (unsigned m = 0; m < 64; ++m) {
    spread[m] = (uint8_t)((m / 8) * K + m % 8);  // lane g holds code bytes gK .. gK+7
    shifts[m] = (uint8_t)((m % 8) * K);          // bit offset of code m%8 within its lane
    lut[m] = t.exp_of[m % 16];
  }
  const __m512i idx_spread = _mm512_load_si512((const void*)spread);
  const __m512i ctrl = _mm512_load_si512((const void*)shifts);
  const __m512i exp_lut = _mm512_load_si512((const void*)lut);
  const __m512i idx_out0 = byte_index([](unsigned j) { return (j % 2 ? 64u : 0u) + j / 2; });
  const __m512i idx_out1 = byte_index([](unsigned j) { return (j % 2 ? 96u : 32u) + j / 2; });
  const __m512i code_mask = _mm512_set1_epi8((char)((1u << K) - 1));
  const __m512i max_code = _mm512_set1_epi8((char)(t.count - 1));
  const __m512i m7f = _mm512_set1_epi8(0x7F);
  const __m512i m80 = _mm512_set1_epi8((char)0x80);
  const __mmask64 load_mask = (1ull << (8 * K)) - 1;
  __mmask64 bad = 0;
  for (size_t i = 0; i < len; i += 64) {
    const __m512i packed = _mm512_maskz_loadu_epi8(load_mask, codes + i / 8 * K);
    const __m512i lanes = _mm512_permutexvar_epi8(idx_spread, packed);
    const __m512i code = _mm512_and_si512(_mm512_multishift_epi64_epi8(ctrl, lanes), code_mask);
    bad |= _mm512_cmpgt_epu8_mask(code, max_code);
    const __m512i e = _mm512_shuffle_epi8(exp_lut, code);
    const __m512i r = _mm512_loadu_si512((const void*)(rest + i));
    const __m512i lo = _mm512_ternarylogic_epi32(m7f, r, _mm512_slli_epi16(e, 7), kSelect);
    const __m512i hi = _mm512_ternarylogic_epi32(m80, r, _mm512_srli_epi16(e, 1), kSelect);
    _mm512_storeu_si512((void*)(out + 2 * i), _mm512_permutex2var_epi8(lo, idx_out0, hi));
    _mm512_storeu_si512((void*)(out + 2 * i + 64), _mm512_permutex2var_epi8(lo, idx_out1, hi));
  }
  return bad == 0;
}

}  // namespace

size_t encode_bf16(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                   uint16_t* pos, uint8_t* exps, uint32_t pos_base) {
  switch (t.k) {
    case 1: return encode_bf16_k<1>(src, len, rest, codes, t, pos, exps, pos_base);
    case 2: return encode_bf16_k<2>(src, len, rest, codes, t, pos, exps, pos_base);
    case 3: return encode_bf16_k<3>(src, len, rest, codes, t, pos, exps, pos_base);
    default: return encode_bf16_k<4>(src, len, rest, codes, t, pos, exps, pos_base);
  }
}

bool decode_bf16(const uint8_t* rest, const uint8_t* codes, size_t len, const CodeTables& t, uint8_t* out) {
  switch (t.k) {
    case 1: return decode_bf16_k<1>(rest, codes, len, t, out);
    case 2: return decode_bf16_k<2>(rest, codes, len, t, out);
    case 3: return decode_bf16_k<3>(rest, codes, len, t, out);
    default: return decode_bf16_k<4>(rest, codes, len, t, out);
  }
}

uint32_t h32(const void* data, size_t size) { return (uint32_t)XXH3_64bits(data, size); }
uint32_t lh32(const void* data, size_t size) { return splitzip::lh32::lh32(data, size); }

}  // namespace avx512
}  // namespace kernels
}  // namespace splitzip

#endif  // __AVX512BW__ && __AVX512VBMI__
