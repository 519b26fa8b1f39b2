// entropy_lockstep.h — scalar helpers that the vector rANS kernels (entropy_avx2.cpp, entropy_avx512.cpp) share. Each
// TU is compiled for its own instruction set, so everything here has internal linkage: every TU gets its own copy,
// and the linker can never hand one ISA's code to the other (see kernels.h).
#pragma once

#include <stdint.h>

#include "entropy_kernels.h"

namespace splitzip {
namespace kernels {
namespace {

inline uint32_t wrap_add(uint32_t ch, uint32_t add, uint32_t period) {  // (ch + add) mod period, add < period
  ch += add;
  return ch >= period ? ch - period : ch;
}

// The escaped symbols of a step's lanes m (bit l: value l of the step, of channel ch + l) into out, in value order as
// they are listed; false at an invalid one (none left, one >= A, or one of a symbol that has slots).
inline bool take_escapes(const RansTables& t, uint32_t A, const RansDecodeState* s, uint32_t m, uint32_t ch,
                         uint64_t* q, uint8_t* out) {
  for (; m != 0; m &= m - 1) {
    const unsigned l = (unsigned)__builtin_ctz(m);
    const uint32_t v = *q < s->n_esc ? s->esc[*q] : A;
    const uint32_t group = t.chan[(ch + l) % t.period] & 0xFFFFu;
    if (v >= A || (t.enc[(uint64_t)group * t.a1 + v] & 0xFFFFu) != 0) return false;
    ++*q;
    out[l] = (uint8_t)v;
  }
  return true;
}

// The scalar side of N chunks decoded in lockstep (their lanes' states stay in the kernel's vector registers): the
// word pointers, symbol outputs, escapes taken and channels, and how many steps every chunk can take before the
// next check. The kernels unroll every loop over the chunks, so that these arrays live in registers.
template <unsigned N>
struct Lockstep {
  const uint8_t* wp[N];
  const uint8_t* wend[N];
  uint8_t* out[N];
  uint64_t left[N], q[N];  // whole steps left; escapes taken
  uint32_t ch[N];
  uint64_t steps = 0;  // steps every chunk can take without a check (a step takes at most 32 words)

  explicit Lockstep(RansDecodeState* const* st) {
#pragma GCC unroll 4
    for (unsigned k = 0; k < N; ++k) {
      wp[k] = st[k]->wp;
      wend[k] = st[k]->wend;
      out[k] = st[k]->sym + st[k]->j;
      left[k] = (st[k]->len - st[k]->j) / 32;
      q[k] = st[k]->q;
      ch[k] = st[k]->ch;
    }
  }
  // Whether every chunk can take one more step now.
  bool next() {
    if (steps == 0) {
      steps = ~(uint64_t)0;
#pragma GCC unroll 4
      for (unsigned k = 0; k < N; ++k) {
        const uint64_t room = (uint64_t)(wend[k] - wp[k]) / 64;
        steps = left[k] < steps ? left[k] : steps;
        steps = room < steps ? room : steps;
      }
      if (steps == 0) return false;
#pragma GCC unroll 4
      for (unsigned k = 0; k < N; ++k) left[k] -= steps;
    }
    --steps;
    return true;
  }
  // Chunk k's escapes of the step (mask m), then its output and channel past the step; false at an invalid escape.
  bool finish_step(const RansTables& t, uint32_t A, uint32_t add32, RansDecodeState* const* st, unsigned k,
                   uint32_t m) {
    const bool ok = __builtin_expect(m == 0, 1) || take_escapes(t, A, st[k], m, ch[k], &q[k], out[k]);
    out[k] += 32;
    ch[k] = wrap_add(ch[k], add32, t.period);
    return ok;
  }
  void store(RansDecodeState* const* st) const {
#pragma GCC unroll 4
    for (unsigned k = 0; k < N; ++k) {
      st[k]->wp = wp[k];
      st[k]->j = (uint64_t)(out[k] - st[k]->sym);
      st[k]->q = q[k];
      st[k]->ch = ch[k];
    }
  }
};

}  // namespace
}  // namespace kernels
}  // namespace splitzip
