// entropy_avx2.cpp — AVX2 + BMI2 kernels of the entropy coder (docs/FORMAT.md §4.10): the 32-lane rANS decoder of
// §4.10.3 and the canonical encoder of §4.10.4, and the split of values into symbols and raw parts (§4.10.2).
// Compiled with -mavx2 -mbmi2 and only called after a run-time CPU check (entropy.cpp through selected_isa).
//
// rANS: the 32 lane states live in four registers of eight lanes; lane l of register b codes value 8b + l of each
// step of 32 values, so a step is four independent 8-lane updates. The decoder runs up to kDecodeWays chunks side by
// side (their steps independent), so that up to eight or twelve gathers are in flight at once. It gathers each
// lane's symbol, frequency and offset in its slot as one u32 of the group's 4096-slot table, the row and the escape
// test from one per-channel word (the index of the group's first escape slot: its bits above the slot's are the
// row's); the encoder gathers the symbol's frequency and cumulative frequency from the group's entry table, indexed
// by the channels' words (group and first escape slot): one gather per register and step. The registers go through
// each stage together, so that their gathers are in flight at the same time.
// Renormalisation has no branch: a compare gives the lanes that take (decoder) or give (encoder) a 16-bit word, its
// movemask indexes a permutation that expands the next words into those lanes or compresses those lanes' words into
// consecutive places, and a popcount moves the word pointer. The encoder divides by the frequency in single precision
// and corrects the quotient by one (see there), which makes it exact. Escapes are rare and go through a scalar path.
// Kernels stop where a step could overrun the record; the driver finishes with scalar code.
//
// This TU deliberately includes no C++ library header and nothing with inline functions of external linkage.
#if defined(__AVX2__) && defined(__BMI2__)

#include <immintrin.h>
#include <string.h>

#include "bf16_avx2.h"
#include "entropy_kernels.h"
#include "entropy_lockstep.h"

namespace splitzip {
namespace kernels {
namespace avx2 {

namespace {

constexpr unsigned kLanes = 32;
constexpr uint32_t kLow = 1u << 16;

// For a movemask m of eight lanes: expand[m][i] = the number of set bits of m below bit i (lane i takes that word),
// compress[m][8 - c + k] = the k-th set bit of m (c set bits; the words end up right-aligned, the others are 0).
struct PermTables {
  uint32_t expand[256][8];
  uint32_t compress[256][8];
  constexpr PermTables() : expand(), compress() {
    for (unsigned m = 0; m < 256; ++m) {
      unsigned c = 0;
      for (unsigned i = 0; i < 8; ++i) {
        expand[m][i] = c;
        if (m & (1u << i)) ++c;
      }
      unsigned k = 0;
      for (unsigned i = 0; i < 8; ++i)
        if (m & (1u << i)) compress[m][8 - c + k++] = i;
    }
  }
};
alignas(32) constexpr PermTables kPerm{};

// Eight consecutive entries of a per-channel array (t.chan or t.chan_dec) from channel ch on.
inline __m256i load_chan(const uint32_t* a, uint32_t P, uint32_t ch) {
  if (ch + 8 <= P) return _mm256_loadu_si256((const __m256i*)(a + ch));
  alignas(32) uint32_t v[8];
  for (unsigned i = 0; i < 8; ++i) {
    v[i] = a[ch];
    ch = ch + 1 == P ? 0 : ch + 1;
  }
  return _mm256_load_si256((const __m256i*)v);
}

// The entries of the 32 values of a step from channel ch on, eight per register.
inline void load_chans(const uint32_t* a, uint32_t P, uint32_t ch, uint32_t add8, __m256i* cw) {
  if (ch + 32 <= P) {
    for (unsigned b = 0; b < 4; ++b) cw[b] = _mm256_loadu_si256((const __m256i*)(a + ch + 8 * b));
    return;
  }
  for (unsigned b = 0; b < 4; ++b) {
    cw[b] = load_chan(a, P, ch);
    ch = wrap_add(ch, add8, P);
  }
}

// Steps of N chunks side by side while every one of them has room and none has failed; returns a mask of the chunks
// with an invalid escape (bit k: chunk k; its state is then meaningless, the others' are whole). The 4N registers
// go through each stage together, so that their gathers are in flight at once; every loop over them is unrolled, so
// that the arrays are registers.
template <unsigned N>
unsigned decode_lockstep(const RansTables& t, unsigned symbol_bits, RansDecodeState* const* st) {
  const uint32_t A = 1u << symbol_bits, P = t.period;
  const uint32_t add8 = 8 % P, add32 = 32 % P;
  const __m256i m12 = _mm256_set1_epi32(0xFFF), mff = _mm256_set1_epi32(0xFF), one = _mm256_set1_epi32(1);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const int* dec = (const int*)t.dec;
  __m256i x[4 * N];
#pragma GCC unroll 12
  for (unsigned b = 0; b < 4 * N; ++b) x[b] = _mm256_loadu_si256((const __m256i*)(st[b / 4]->x + 8 * (b % 4)));
  Lockstep<N> ls(st);
  unsigned failed = 0;
  while (ls.next()) {
    // The gather's index is the slot (the state's low 12 bits) in its group's row: the bits of the channel's
    // escape entry (t.chan_dec) above the slot's; an index at or past the escape entry is an escape.
    __m256i ee[4 * N], e[4 * N], esc[4 * N];
#pragma GCC unroll 4
    for (unsigned k = 0; k < N; ++k) load_chans(t.chan_dec, P, ls.ch[k], add8, ee + 4 * k);
#pragma GCC unroll 12
    for (unsigned b = 0; b < 4 * N; ++b) {
      e[b] = _mm256_or_si256(_mm256_and_si256(x[b], m12), _mm256_andnot_si256(m12, ee[b]));
      esc[b] = _mm256_cmpgt_epi32(_mm256_add_epi32(e[b], one), ee[b]);  // e >= ee (both below 2^31)
    }
#pragma GCC unroll 12
    for (unsigned b = 0; b < 4 * N; ++b) e[b] = _mm256_i32gather_epi32(dec, e[b], 4);
#pragma GCC unroll 4
    for (unsigned k = 0; k < N; ++k) {
      const __m256i* ek = e + 4 * k;
      const __m256i packed = _mm256_packus_epi16(
          _mm256_packus_epi32(_mm256_and_si256(ek[0], mff), _mm256_and_si256(ek[1], mff)),
          _mm256_packus_epi32(_mm256_and_si256(ek[2], mff), _mm256_and_si256(ek[3], mff)));
      _mm256_storeu_si256((__m256i*)ls.out[k], _mm256_permutevar8x32_epi32(packed, order));
    }
#pragma GCC unroll 12
    for (unsigned b = 0; b < 4 * N; ++b) {
      const unsigned k = b / 4;
      const __m256i hi = _mm256_srli_epi32(x[b], 12);  // x' = (F - 1) (x >> 12) + (x >> 12) + slot - Cum
      const __m256i xb = _mm256_add_epi32(
          _mm256_add_epi32(_mm256_mullo_epi32(_mm256_and_si256(_mm256_srli_epi32(e[b], 8), m12), hi), hi),
          _mm256_srli_epi32(e[b], 20));
      const __m256i need = _mm256_cmpeq_epi32(_mm256_srli_epi32(xb, 16), _mm256_setzero_si256());
      const unsigned m = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(need));
      const __m256i w = _mm256_permutevar8x32_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)ls.wp[k])),
                                                    _mm256_load_si256((const __m256i*)kPerm.expand[m]));
      ls.wp[k] += 2 * (unsigned)__builtin_popcount(m);
      x[b] = _mm256_blendv_epi8(xb, _mm256_or_si256(_mm256_slli_epi32(xb, 16), w), need);
    }
#pragma GCC unroll 4
    for (unsigned k = 0; k < N; ++k) {
      uint32_t m = 0;
#pragma GCC unroll 4
      for (unsigned b = 0; b < 4; ++b)
        m |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(esc[4 * k + b])) << (8 * b);
      if (!ls.finish_step(t, A, add32, st, k, m)) failed |= 1u << k;
    }
    if (failed != 0) break;
  }
#pragma GCC unroll 12
  for (unsigned b = 0; b < 4 * N; ++b) _mm256_storeu_si256((__m256i*)(st[b / 4]->x + 8 * (b % 4)), x[b]);
  ls.store(st);
  return failed;
}

}  // namespace

unsigned rans_decode_steps_n(const RansTables& t, unsigned symbol_bits, RansDecodeState* const* st, unsigned n) {
  static_assert(kDecodeWays == 2, "one instance per number of ways");
  return n == 2 ? decode_lockstep<2>(t, symbol_bits, st) : decode_lockstep<1>(t, symbol_bits, st);
}

void rans_encode_steps(const RansTables& t, unsigned symbol_bits, RansEncodeState* s) {
  const uint32_t A = 1u << symbol_bits, P = t.period, a1 = t.a1;
  const uint32_t add8 = 8 % P, sub31 = P - 31 % P, sub32 = P - 32 % P;  // sub: adding it subtracts mod P
  const __m256i m16 = _mm256_set1_epi32(0xFFFF), a1v = _mm256_set1_epi32((int)a1), escv = _mm256_set1_epi32((int)A);
  const __m256 two16 = _mm256_set1_ps(65536.0f), half = _mm256_set1_ps(0.5f);
  const __m256i one = _mm256_set1_epi32(1);
  const int* enc = (const int*)t.enc;
  __m256i x[4];
  for (unsigned b = 0; b < 4; ++b) x[b] = _mm256_loadu_si256((const __m256i*)(s->x + 8 * b));
  uint8_t* buf = s->buf;
  size_t wpos = s->wpos, epos = s->epos;
  uint64_t j = s->j;
  uint32_t ch = s->ch;
  // The entries of a step's symbols depend on the symbols and channels only: they are gathered a step ahead, so
  // that the gathers overlap the arithmetic of the step before.
  __m256i nv[4], nga[4], ne[4];
  auto gather_step = [&](uint64_t base, uint32_t c0) {  // c0: the channel of value base
    __m256i cw[4];
    load_chans(t.chan, P, c0, add8, cw);
#pragma GCC unroll 4
    for (unsigned b = 0; b < 4; ++b) {
      nv[b] = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(s->sym + base + 8 * b)));
      nga[b] = _mm256_mullo_epi32(_mm256_and_si256(cw[b], m16), a1v);
      ne[b] = _mm256_i32gather_epi32(enc, _mm256_add_epi32(nga[b], nv[b]), 4);
    }
  };
  uint32_t c0 = wrap_add(ch, sub31 == P ? 0 : sub31, P);  // the channel of value j - 32
  if (j >= kLanes) gather_step(j - kLanes, c0);
  // A step writes at most 32 words and 32 escapes, and each 16-byte word store reaches 16 bytes below wpos.
  while (j >= kLanes && wpos >= epos + 4 * kLanes + 16) {
    const uint64_t base = j - kLanes;
    // In stages over the four registers; the words and escapes in coding order (register 3 first, its lanes from
    // the highest).
    __m256i v[4], ga[4], e[4], f[4], escaped[4];
    for (unsigned b = 0; b < 4; ++b) {
      v[b] = nv[b];
      ga[b] = nga[b];
      e[b] = ne[b];
    }
    c0 = wrap_add(c0, sub32 == P ? 0 : sub32, P);
    if (base >= kLanes) gather_step(base - kLanes, c0);
    unsigned esc_any = 0;
#pragma GCC unroll 4
    for (unsigned b = 0; b < 4; ++b) {
      f[b] = _mm256_and_si256(e[b], m16);
      escaped[b] = _mm256_cmpeq_epi32(f[b], _mm256_setzero_si256());
      esc_any |= (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(escaped[b])) << (8 * b);
    }
    if (esc_any != 0) {
      for (unsigned bb = 4; bb-- > 0;) {
        const unsigned em = (esc_any >> (8 * bb)) & 0xFFu;
        if (em == 0) continue;
        alignas(32) uint32_t vs[8];
        _mm256_store_si256((__m256i*)vs, v[bb]);
        for (unsigned l = 8; l-- > 0;)
          if (em & (1u << l)) buf[epos++] = (uint8_t)vs[l];
        e[bb] = _mm256_blendv_epi8(e[bb], _mm256_i32gather_epi32(enc, _mm256_add_epi32(ga[bb], escv), 4), escaped[bb]);
        f[bb] = _mm256_and_si256(e[bb], m16);
      }
    }
#pragma GCC unroll 4
    for (unsigned bb = 4; bb-- > 0;) {
      __m256i xb = x[bb];
      // A word goes out when x >= f 2^20, that is x >> 20 >= f (f 2^20 itself overflows for f = 4096).
      const __m256i keep = _mm256_cmpgt_epi32(f[bb], _mm256_srli_epi32(xb, 20));
      const unsigned m = ~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(keep)) & 0xFFu;
      const __m256i words = _mm256_permutevar8x32_epi32(_mm256_and_si256(xb, m16),
                                                        _mm256_load_si256((const __m256i*)kPerm.compress[m]));
      _mm_storeu_si128((__m128i*)(buf + wpos - 16),
                       _mm_packus_epi32(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1)));
      wpos -= 2 * (unsigned)__builtin_popcount(m);
      x[bb] = _mm256_blendv_epi8(_mm256_srli_epi32(xb, 16), xb, keep);
    }
#pragma GCC unroll 4
    for (unsigned b = 0; b < 4; ++b) {
      // q = x / f: in single precision (the state converted with one rounding, a correctly rounded division) the
      // quotient, below 2^20, is within a quarter; less a half and truncated it is q or q - 1, which the remainder
      // tells apart.
      const __m256i xb = x[b], fb = f[b];
      const __m256 xf = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(xb, 16)), two16),
                                      _mm256_cvtepi32_ps(_mm256_and_si256(xb, m16)));
      __m256i qv = _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_div_ps(xf, _mm256_cvtepi32_ps(fb)), half));
      __m256i r = _mm256_sub_epi32(xb, _mm256_mullo_epi32(qv, fb));
      const __m256i high = _mm256_cmpgt_epi32(r, _mm256_sub_epi32(fb, one));
      qv = _mm256_sub_epi32(qv, high);  // high is -1 where r >= f
      r = _mm256_sub_epi32(r, _mm256_and_si256(high, fb));
      x[b] = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(qv, 12), r), _mm256_srli_epi32(e[b], 16));
    }
    j = base;
    ch = wrap_add(ch, sub32 == P ? 0 : sub32, P);
  }
  for (unsigned b = 0; b < 4; ++b) _mm256_storeu_si256((__m256i*)(s->x + 8 * b), x[b]);
  s->wpos = wpos;
  s->epos = epos;
  s->j = j;
  s->ch = ch;
}

// ---- symbols and raw parts ---------------------------------------------------------------------------------------

void split_bf16(const uint8_t* src, size_t len, uint8_t* sym, uint8_t* raw) {
  size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    __m256i e, r;
    split_bf16_32(src + 2 * i, &e, &r);
    _mm256_storeu_si256((__m256i*)(sym + i), e);
    _mm256_storeu_si256((__m256i*)(raw + i), r);
  }
  for (; i < len; ++i) {
    const uint32_t v = (uint32_t)src[2 * i] | (uint32_t)src[2 * i + 1] << 8;
    sym[i] = (uint8_t)(v >> 7);
    raw[i] = (uint8_t)(((v >> 8) & 0x80u) | (v & 0x7Fu));
  }
}

void join_bf16(const uint8_t* sym, const uint8_t* raw, size_t len, uint8_t* out) {
  const __m256i m7f = _mm256_set1_epi16(0x7F), m80 = _mm256_set1_epi16(0x80);
  size_t i = 0;
  for (; i + 16 <= len; i += 16) {
    const __m256i s = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(sym + i)));
    const __m256i r = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(raw + i)));
    const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(r, m80), 8);
    const __m256i v = _mm256_or_si256(_mm256_or_si256(hi, _mm256_slli_epi16(s, 7)), _mm256_and_si256(r, m7f));
    _mm256_storeu_si256((__m256i*)(out + 2 * i), v);
  }
  for (; i < len; ++i) {
    const uint32_t r = raw[i], v = ((r & 0x80u) << 8) | ((uint32_t)sym[i] << 7) | (r & 0x7Fu);
    out[2 * i] = (uint8_t)v;
    out[2 * i + 1] = (uint8_t)(v >> 8);
  }
}

// FP16: raw part = sign << 10 | mantissa, 11 bits: pext of four values at a time drops their exponents.
constexpr uint64_t kFp16Raw = 0x83FF83FF83FF83FFull, kFp16Exp = 0x7C007C007C007C00ull;

void split_fp16(const uint8_t* src, size_t len, uint8_t* sym, uint8_t* raw) {
  for (size_t i = 0; i + 8 <= len; i += 8, raw += 11) {
    uint64_t a, b;
    memcpy(&a, src + 2 * i, 8);
    memcpy(&b, src + 2 * i + 8, 8);
    const uint64_t ra = _pext_u64(a, kFp16Raw), rb = _pext_u64(b, kFp16Raw);
    const uint64_t lo = ra | rb << 44;
    const uint32_t hi = (uint32_t)(lo >> 56) | (uint32_t)(rb >> 20) << 8;  // bytes 7..10
    memcpy(raw, &lo, 8);
    memcpy(raw + 7, &hi, 4);
    const uint64_t ea = _pext_u64(a, kFp16Exp), eb = _pext_u64(b, kFp16Exp);
    const uint64_t e = _pdep_u64(ea | eb << 20, 0x1F1F1F1F1F1F1F1Full);
    memcpy(sym + i, &e, 8);
  }
}

void join_fp16(const uint8_t* sym, const uint8_t* raw, size_t len, uint8_t* out) {
  for (size_t i = 0; i + 8 <= len; i += 8, raw += 11) {
    uint64_t lo, e;
    uint32_t b7;  // bytes 7..10
    memcpy(&lo, raw, 8);
    memcpy(&b7, raw + 7, 4);
    const uint64_t hi = b7 >> 8;
    memcpy(&e, sym + i, 8);
    const uint64_t ex = _pext_u64(e, 0x1F1F1F1F1F1F1F1Full);
    const uint64_t a = _pdep_u64(lo, kFp16Raw) | _pdep_u64(ex, kFp16Exp);
    const uint64_t b = _pdep_u64(lo >> 44 | hi << 20, kFp16Raw) | _pdep_u64(ex >> 20, kFp16Exp);
    memcpy(out + 2 * i, &a, 8);
    memcpy(out + 2 * i + 8, &b, 8);
  }
}

// FP32: raw part = sign << 23 | mantissa, 24 bits (3 bytes). Eight values a step: the sign moved from bit 31 to 23
// beside the mantissa, a byte shuffle keeps each lane's three raw bytes and its exponent byte, and a dword permute
// makes the 24 raw bytes and the 8 symbols contiguous.
void split_fp32(const uint8_t* src, size_t len, uint8_t* sym, uint8_t* raw) {
  const __m256i pack = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 3, 7, 11, 15,  //
                                        0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 3, 7, 11, 15);
  const __m256i order = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7);
  const __m256i mant = _mm256_set1_epi32(0x7FFFFF), sign = _mm256_set1_epi32(0x800000);
  for (size_t i = 0; i + 8 <= len; i += 8, raw += 24) {
    const __m256i v = _mm256_loadu_si256((const __m256i*)(src + 4 * i));
    // lane = raw part (bits 0-23) | exponent << 24
    const __m256i r = _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(v, mant),
                                                      _mm256_and_si256(_mm256_srli_epi32(v, 8), sign)),
                                      _mm256_slli_epi32(_mm256_srli_epi32(v, 23), 24));
    const __m256i p = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(r, pack), order);
    _mm_storeu_si128((__m128i*)raw, _mm256_castsi256_si128(p));
    const __m128i hi = _mm256_extracti128_si256(p, 1);
    _mm_storel_epi64((__m128i*)(raw + 16), hi);
    const uint64_t e = (uint64_t)_mm_extract_epi64(hi, 1);
    memcpy(sym + i, &e, 8);
  }
}

// Eight values a step: their 24 raw bytes as two overlapping 16-byte loads (bytes 0-15 and 8-23), one byte shuffle
// to a 32-bit lane each, the sign moved from bit 23 to 31 and the exponent put in. In place (sym the last len bytes
// of out), a step's 32-byte store ends before the symbols still to be read.
void join_fp32(const uint8_t* sym, const uint8_t* raw, size_t len, uint8_t* out) {
  const __m256i spread = _mm256_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1,  //
                                          4, 5, 6, -1, 7, 8, 9, -1, 10, 11, 12, -1, 13, 14, 15, -1);
  const __m256i mant = _mm256_set1_epi32(0x7FFFFF), sign = _mm256_set1_epi32(0x800000);
  for (size_t i = 0; i + 8 <= len; i += 8, raw += 24) {
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i*)raw)),
                                              _mm_loadu_si128((const __m128i*)(raw + 8)), 1);
    const __m256i r = _mm256_shuffle_epi8(b, spread);
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(sym + i)));
    const __m256i v = _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(r, mant), _mm256_slli_epi32(e, 23)),
                                      _mm256_slli_epi32(_mm256_and_si256(r, sign), 8));
    _mm256_storeu_si256((__m256i*)(out + 4 * i), v);
  }
}

}  // namespace avx2
}  // namespace kernels
}  // namespace splitzip

#endif  // __AVX2__ && __BMI2__
