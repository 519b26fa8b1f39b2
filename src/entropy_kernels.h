// entropy_kernels.h — the interface between the entropy coder's driver (entropy.cpp) and its instruction-set
// specific kernels (entropy_avx2.cpp, entropy_avx512.cpp): the 32-lane rANS coder of docs/FORMAT.md §4.10.3 /
// §4.10.4 over a chunk's symbols, one byte each. Plain declarations and POD structs only, for the reason given in
// kernels.h.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace splitzip {
namespace kernels {

// The lookup tables sz_symbol_table_prepare derives (in the caller's workspace), seen from one frame's tensor.
struct RansTables {
  const uint32_t* dec;   // [g * 4096 + slot]: s | (F_g[s] - 1) << 8 | (slot - Cum_g[s]) << 20 for the symbol index s
                         // whose range holds the slot (escape slots: s = 0 with the escape's F and Cum)
  const uint32_t* enc;   // [g * a1 + s], s = 0..A (A: the escape): F_g[s] | Cum_g[s] << 16
  const uint32_t* chan;  // [c] for the tensor's channels c < period: g | (4096 - F_g[A]) << 16, the group and the
                         // first slot of the escape's range
  const uint32_t* chan_dec;  // [c]: g * 4096 + 4096 - F_g[A], the entry of dec of the first escape slot of the
                             // channel's group (below (g + 1) * 4096: F_g[A] >= 1)
  const uint32_t* chan_enc;  // [c]: g * a1, the channel's group's first entry of enc
  uint32_t a1;           // A + 1
  uint32_t period;       // P
};

// A chunk's decoder between kernel calls: value j comes next, of channel ch; sym[j] receives its symbol.
struct RansDecodeState {
  uint32_t x[32];
  const uint8_t* wp;    // the next renormalisation word
  const uint8_t* wend;  // the end of the words
  const uint8_t* esc;   // the escaped symbols
  uint64_t n_esc, q;    // X, and how many of them are taken
  uint64_t j, len;
  uint32_t ch;
  uint8_t* sym;
};

// A chunk's encoder between kernel calls: values j-1 down to 0 are still to code; value j-1 has channel ch (when
// j > 0). The record is built in buf[0, raw): escapes grow up from epos (in coding order), words down from wpos.
struct RansEncodeState {
  uint32_t x[32];
  uint8_t* buf;
  size_t epos, wpos;
  uint64_t j;
  uint32_t ch;
  const uint8_t* sym;
};

namespace avx2 {
// Decodes whole steps of 32 values of n chunks (1 <= n <= kDecodeWays) of the same tables side by side while every
// one can take one (j + 32 <= len and at least 32 words left, so no step can run out; j a multiple of 32) and none
// has failed. Returns a mask of the chunks with an invalid escape (bit k: st[k]; no escaped symbol left, one >= A or
// one of a coded symbol): such a chunk is corrupt; a chunk without its bit can go on. The driver finishes each chunk
// and makes the final checks.
constexpr unsigned kDecodeWays = 2;
unsigned rans_decode_steps_n(const RansTables& t, unsigned symbol_bits, RansDecodeState* const* st, unsigned n);
// Encodes whole steps of 32 values while j >= 32 and the record has room for any step, j a multiple of 32.
void rans_encode_steps(const RansTables& t, unsigned symbol_bits, RansEncodeState* s);

// The symbols and raw parts of len values of a dtype (§4.10.2; len a multiple of 8, raw part of value 0 at a byte
// boundary of raw): split writes them, join rebuilds the values. FP8 has no raw part and is not handled here. The
// joins may read their symbols from the last len bytes of out: each step loads its symbols before it stores, and its
// stores end below the symbols of the steps after it.
void split_bf16(const uint8_t* src, size_t len, uint8_t* sym, uint8_t* raw);
void join_bf16(const uint8_t* sym, const uint8_t* raw, size_t len, uint8_t* out);
void split_fp16(const uint8_t* src, size_t len, uint8_t* sym, uint8_t* raw);
void join_fp16(const uint8_t* sym, const uint8_t* raw, size_t len, uint8_t* out);
void split_fp32(const uint8_t* src, size_t len, uint8_t* sym, uint8_t* raw);
void join_fp32(const uint8_t* sym, const uint8_t* raw, size_t len, uint8_t* out);
}  // namespace avx2

namespace avx512 {
// AVX-512 F/BW/VBMI forms of avx2's rANS kernels (three chunks side by side: up to six gathers of sixteen).
void rans_encode_steps(const RansTables& t, unsigned symbol_bits, RansEncodeState* s);
constexpr unsigned kDecodeWays = 3;
unsigned rans_decode_steps_n(const RansTables& t, unsigned symbol_bits, RansDecodeState* const* st, unsigned n);
}  // namespace avx512

}  // namespace kernels
}  // namespace splitzip
