// entropy_avx512.cpp — AVX-512 kernels of the entropy coder (docs/FORMAT.md §4.10): the 32-lane rANS decoder of
// §4.10.3 and the canonical encoder of §4.10.4. Compiled with AVX-512 F, BW and VBMI and only called after a run-time
// CPU check (entropy.cpp through selected_isa); the split and join of values stay AVX2's.
//
// rANS: the 32 lane states of a chunk live in two registers of sixteen lanes; lane l of register b codes value 16b + l
// of each step of 32 values. The decoder runs up to three chunks side by side (their steps independent), so that up
// to six gathers of sixteen are in flight at once (four measured slower: three chunks' states, entries and constants
// fill the 32 registers). It gathers each lane's symbol, frequency and offset in its slot as one u32 of the group's
// 4096-slot table, and takes the symbols out of the gathered entries with one byte permutation per step. One
// per-channel word gives both the row and the escape test: the index of the group's first escape slot, whose bits
// above the slot's are the row's, so that the gather's index is one bit select and an escape is an index at or past
// that word. The encoder gathers the symbols' frequencies and cumulative frequencies a step ahead, and with them the
// reciprocal of each frequency (an approximation refined by one Newton step), so that the division on the state's
// path is a multiply and a correction by one.
// Renormalisation has no branch: a compare gives a mask of the lanes that take (decoder) or give (encoder) a 16-bit
// word; expand puts the next words into the taking lanes in lane order, compress packs the giving lanes' words into
// consecutive places, and a popcount of the mask moves the word pointer. Escapes are rare and go through a scalar
// path. Kernels stop where a step could overrun the record; the driver finishes with scalar code.
//
// This TU deliberately includes no C++ library header and nothing with inline functions of external linkage.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VBMI__)

// GCC 12 warns about the deliberately undefined source operand inside its own AVX-512 intrinsic headers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include "entropy_kernels.h"
#include "entropy_lockstep.h"

namespace splitzip {
namespace kernels {
namespace avx512 {

namespace {

constexpr unsigned kLanes = 32;

// Sixteen entries of a per-channel array (t.chan, t.chan_dec or t.chan_enc) from channel ch on: where they wrap
// around the period, two masked loads (the lanes past the period's end read from its start), or lane by lane for a
// period below 16.
inline __m512i load_chan16(const uint32_t* a, uint32_t P, uint32_t ch) {
  if (ch + 16 <= P) return _mm512_loadu_si512((const void*)(a + ch));
  if (P >= 16) {
    const __mmask16 head = (__mmask16)((1u << (P - ch)) - 1);
    const __m512i lo = _mm512_maskz_loadu_epi32(head, (const void*)(a + ch));
    return _mm512_mask_loadu_epi32(lo, (__mmask16)~head, (const void*)(a + ch - P));
  }
  alignas(64) uint32_t v[16];
  for (unsigned i = 0; i < 16; ++i) {
    v[i] = a[ch];
    ch = ch + 1 == P ? 0 : ch + 1;
  }
  return _mm512_load_si512((const void*)v);
}

// The entries of the 32 values of a step from channel ch on, sixteen per register (add16 = 16 mod P).
inline void load_chans(const uint32_t* a, uint32_t P, uint32_t ch, uint32_t add16, __m512i* cw) {
  cw[0] = load_chan16(a, P, ch);
  cw[1] = load_chan16(a, P, wrap_add(ch, add16, P));
}

// Steps of N chunks side by side while every one of them has room and none has failed; returns a mask of the chunks
// with an invalid escape (bit k: chunk k; its state is then meaningless, the others' are whole). Every loop over the
// chunks or registers is unrolled, so that the arrays below are registers: with a rolled loop (or a call) in the
// step, GCC keeps them in memory and stores and reloads every state each step.
template <unsigned N>
unsigned decode_lockstep(const RansTables& t, unsigned symbol_bits, RansDecodeState* const* st) {
  const uint32_t A = 1u << symbol_bits, P = t.period;
  const uint32_t add16 = 16 % P, add32 = 32 % P;
  const __m512i m12 = _mm512_set1_epi32(0xFFF);
  // Byte 0 of each u32 of two registers (the symbols of the gathered entries), in lane order.
  const __m512i bytes0 = _mm512_set_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                         0, 0, 0, 0, 0, 0, 124, 120, 116, 112, 108, 104, 100, 96, 92, 88, 84, 80, 76,
                                         72, 68, 64, 60, 56, 52, 48, 44, 40, 36, 32, 28, 24, 20, 16, 12, 8, 4, 0);
  const __m512i low = _mm512_set1_epi32(1 << 16);
  const int* dec = (const int*)t.dec;
  __m512i x[2 * N];
#pragma GCC unroll 8
  for (unsigned b = 0; b < 2 * N; ++b) x[b] = _mm512_loadu_si512((const void*)(st[b / 2]->x + 16 * (b % 2)));
  Lockstep<N> ls(st);  // the states' scalar fields in locals (the symbol stores could alias them otherwise)
  unsigned failed = 0;
  while (ls.next()) {
    // In stages over the 2N registers, so that their gathers are in flight together. The gather's index is the
    // slot (the state's low 12 bits) in its group's row: the bits of the channel's escape entry above the slot's
    // (the escape's first slot is below 4096); an index at or past the escape entry is an escape.
    __m512i e[2 * N];
    __mmask16 esc[2 * N], need[2 * N];
    __m512i ee[2 * N];
    // The channel words: plain loads unless some chunk's 32 channels wrap around the period (never when the period
    // is a multiple of 32, as a KV cache's heads times head size is).
    bool wraps = false;
#pragma GCC unroll 4
    for (unsigned k = 0; k < N; ++k) wraps |= ls.ch[k] + kLanes > P;
    if (__builtin_expect(wraps, 0)) {
#pragma GCC unroll 4
      for (unsigned k = 0; k < N; ++k) load_chans(t.chan_dec, P, ls.ch[k], add16, ee + 2 * k);
    } else {
#pragma GCC unroll 4
      for (unsigned k = 0; k < N; ++k) {
        ee[2 * k] = _mm512_loadu_si512((const void*)(t.chan_dec + ls.ch[k]));
        ee[2 * k + 1] = _mm512_loadu_si512((const void*)(t.chan_dec + ls.ch[k] + 16));
      }
    }
#pragma GCC unroll 8
    for (unsigned b = 0; b < 2 * N; ++b) {
      e[b] = _mm512_ternarylogic_epi32(x[b], ee[b], m12, 0xE4);  // m12 ? x : ee
      esc[b] = _mm512_cmpge_epu32_mask(e[b], ee[b]);
    }
#pragma GCC unroll 8
    for (unsigned b = 0; b < 2 * N; ++b) e[b] = _mm512_i32gather_epi32(e[b], dec, 4);
#pragma GCC unroll 4
    for (unsigned k = 0; k < N; ++k)
      _mm256_storeu_si256((__m256i*)ls.out[k],
                          _mm512_castsi512_si256(_mm512_permutex2var_epi8(e[2 * k], bytes0, e[2 * k + 1])));
#pragma GCC unroll 8
    for (unsigned b = 0; b < 2 * N; ++b) {
      const __m512i hi = _mm512_srli_epi32(x[b], 12);  // x' = (F - 1) (x >> 12) + (x >> 12) + slot - Cum
      x[b] = _mm512_add_epi32(
          _mm512_add_epi32(_mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(e[b], 8), m12), hi), hi),
          _mm512_srli_epi32(e[b], 20));
      need[b] = _mm512_cmplt_epu32_mask(x[b], low);
    }
#pragma GCC unroll 8
    for (unsigned b = 0; b < 2 * N; ++b) {
      const unsigned k = b / 2;
      const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)ls.wp[k]));
      ls.wp[k] += 2 * (unsigned)__builtin_popcount((unsigned)need[b]);
      x[b] = _mm512_mask_or_epi32(x[b], need[b], _mm512_slli_epi32(x[b], 16), _mm512_maskz_expand_epi32(need[b], w));
    }
#pragma GCC unroll 4
    for (unsigned k = 0; k < N; ++k)
      if (!ls.finish_step(t, A, add32, st, k, (uint32_t)esc[2 * k] | (uint32_t)esc[2 * k + 1] << 16))
        failed |= 1u << k;
    if (failed != 0) break;
  }
#pragma GCC unroll 8
  for (unsigned b = 0; b < 2 * N; ++b) _mm512_storeu_si512((void*)(st[b / 2]->x + 16 * (b % 2)), x[b]);
  ls.store(st);
  return failed;
}

}  // namespace

unsigned rans_decode_steps_n(const RansTables& t, unsigned symbol_bits, RansDecodeState* const* st, unsigned n) {
  static_assert(kDecodeWays == 3, "one instance per number of ways");
  switch (n) {
    case 3: return decode_lockstep<3>(t, symbol_bits, st);
    case 2: return decode_lockstep<2>(t, symbol_bits, st);
    default: return decode_lockstep<1>(t, symbol_bits, st);
  }
}

void rans_encode_steps(const RansTables& t, unsigned symbol_bits, RansEncodeState* s) {
  const uint32_t A = 1u << symbol_bits, P = t.period;
  const uint32_t add16 = 16 % P, sub31 = P - 31 % P, sub32 = P - 32 % P;  // sub: adding it subtracts mod P
  const __m512i m16 = _mm512_set1_epi32(0xFFFF), escv = _mm512_set1_epi32((int)A);
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
  const int* enc = (const int*)t.enc;
  __m512i x[2];
  for (unsigned b = 0; b < 2; ++b) x[b] = _mm512_loadu_si512((const void*)(s->x + 16 * b));
  uint8_t* buf = s->buf;
  const uint8_t* const sym = s->sym;
  size_t wpos = s->wpos, epos = s->epos;
  uint64_t j = s->j;
  uint32_t ch = s->ch;
  // The entries of a step's symbols depend on the symbols and channels only: they are gathered a step ahead (with
  // the frequencies' reciprocals), so that the gathers overlap the arithmetic of the step before.
  __m512i nv[2], nga[2], ne[2];
  __m512 nr[2];
  auto recip = [&](__m512i f) {  // 1/f to within 2^-23 relative: rcp14 and one Newton step (f = 0 gives garbage)
    const __m512 ff = _mm512_cvtepi32_ps(f);
    const __m512 r0 = _mm512_rcp14_ps(ff);
    return _mm512_fmadd_ps(r0, _mm512_fnmadd_ps(ff, r0, one), r0);
  };
  auto gather_step = [&](uint64_t base, uint32_t c0) {  // c0: the channel of value base
    load_chans(t.chan_enc, P, c0, add16, nga);  // g (A + 1)
#pragma GCC unroll 2
    for (unsigned b = 0; b < 2; ++b) {
      nv[b] = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(sym + base + 16 * b)));
      ne[b] = _mm512_i32gather_epi32(_mm512_add_epi32(nga[b], nv[b]), enc, 4);
      nr[b] = recip(_mm512_and_si512(ne[b], m16));
    }
  };
  uint32_t c0 = wrap_add(ch, sub31 == P ? 0 : sub31, P);  // the channel of value j - 32
  if (j >= kLanes) gather_step(j - kLanes, c0);
  // A step writes at most 32 words and 32 escapes, and each 32-byte word store reaches 32 bytes below wpos.
  while (j >= kLanes && wpos >= epos + 4 * kLanes + 32) {
    const uint64_t base = j - kLanes;
    // Words and escapes in coding order (register 1 first, its lanes from the highest).
    __m512i v[2], ga[2], e[2], f[2];
    __m512 r[2];
    for (unsigned b = 0; b < 2; ++b) {
      v[b] = nv[b];
      ga[b] = nga[b];
      e[b] = ne[b];
      r[b] = nr[b];
    }
    c0 = wrap_add(c0, sub32 == P ? 0 : sub32, P);
    if (base >= kLanes) gather_step(base - kLanes, c0);
    __mmask16 escaped[2];
    for (unsigned b = 0; b < 2; ++b) {
      f[b] = _mm512_and_si512(e[b], m16);
      escaped[b] = _mm512_testn_epi32_mask(e[b], m16);
    }
    if ((escaped[0] | escaped[1]) != 0) {
      for (unsigned bb = 2; bb-- > 0;) {
        const unsigned em = escaped[bb];
        if (em == 0) continue;
        alignas(64) uint32_t vs[16];
        _mm512_store_si512((void*)vs, v[bb]);
        for (unsigned l = 16; l-- > 0;)
          if (em & (1u << l)) buf[epos++] = (uint8_t)vs[l];
        e[bb] = _mm512_mask_i32gather_epi32(e[bb], escaped[bb], _mm512_add_epi32(ga[bb], escv), enc, 4);
        f[bb] = _mm512_and_si512(e[bb], m16);
        r[bb] = recip(f[bb]);
      }
    }
#pragma GCC unroll 2
    for (unsigned bb = 2; bb-- > 0;) {
      const __m512i xb = x[bb];
      // A word goes out when x >= f 2^20, that is x >> 20 >= f (f 2^20 itself overflows for f = 4096).
      const __mmask16 give = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(xb, 20), f[bb]);
      const unsigned c = (unsigned)__builtin_popcount((unsigned)give);
      // The giving lanes' words packed to the low places, rotated up to the top c places (the rest is 0; the
      // permutation reads the low 4 bits of each index) and stored as the 16 words below wpos (register forms only:
      // no masked or compressing store; the narrowing keeps each lane's low 16 bits).
      const __m512i packed = _mm512_maskz_compress_epi32(give, xb);
      const __m512i rot = _mm512_add_epi32(iota, _mm512_set1_epi32((int)c));
      _mm256_storeu_si256((__m256i*)(buf + wpos - 32), _mm512_cvtepi32_epi16(_mm512_permutexvar_epi32(rot, packed)));
      wpos -= 2 * c;
      x[bb] = _mm512_mask_srli_epi32(xb, give, xb, 16);
    }
#pragma GCC unroll 2
    for (unsigned b = 0; b < 2; ++b) {
      // q = x / f: x (converted with one rounding) times 1/f (within 2^-23) less a half, in one rounding, is within
      // 0.2 of x / f - 1/2 (x / f < 2^20); truncated it is q or q - 1, which the remainder tells apart.
      const __m512i xb = x[b], fb = f[b];
      __m512i qv = _mm512_cvttps_epi32(_mm512_fmsub_ps(_mm512_cvtepu32_ps(xb), r[b], half));
      __m512i rem = _mm512_sub_epi32(xb, _mm512_mullo_epi32(qv, fb));
      const __mmask16 high = _mm512_cmpge_epu32_mask(rem, fb);
      qv = _mm512_mask_add_epi32(qv, high, qv, _mm512_set1_epi32(1));
      rem = _mm512_mask_sub_epi32(rem, high, rem, fb);
      x[b] = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(qv, 12), rem), _mm512_srli_epi32(e[b], 16));
    }
    j = base;
    ch = wrap_add(ch, sub32 == P ? 0 : sub32, P);
  }
  for (unsigned b = 0; b < 2; ++b) _mm512_storeu_si512((void*)(s->x + 16 * b), x[b]);
  s->wpos = wpos;
  s->epos = epos;
  s->j = j;
  s->ch = ch;
}

}  // namespace avx512
}  // namespace kernels
}  // namespace splitzip

#endif  // __AVX512F__ && __AVX512BW__ && __AVX512VBMI__
