// lanehash.h — LH32, the lane hash of docs/FORMAT.md §4.6.1: a chunk checksum made of 64 independent
// multiply-accumulate lanes whose contributions only add, with no scramble between blocks and no exchange between
// lanes until the chunk's end. A GPU warp computes it from the registers that carry the data (lane l owns
// accumulators 2l and 2l + 1: the 16-byte pieces l, l + 32, l + 64, l + 96 of each 2 KiB round, exactly the pieces
// its loads and stores hold), a team of warps adds its members' sums, and a CPU runs it as straight vector code
// (vpmuludq + a word swap, XXH3's accumulate step without its per-1 KiB scramble, which is what forces a GPU warp
// into a cross-lane reduction every kilobyte).
//
// This header is the one statement of the algorithm in code: its constants, the word step and the finish that the
// CPU builds and the CUDA kernels share, and the scalar form over any byte string (lh32) that the CPU's ISA builds
// compile with their own flags.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "layout.h"
#if defined(__AVX2__) && !defined(__CUDA_ARCH__)
#include <immintrin.h>
#endif

namespace splitzip {
namespace lh32 {
// Internal linkage: the CPU's ISA builds compile these with their own target flags, and one TU's copy must never
// serve another's callers.
namespace {

constexpr uint32_t kAccs = 64;          // accumulators a_j
constexpr uint32_t kRoundBytes = 2048;  // a round: 256 words, 4 rows t of 64 words (512 bytes)
constexpr uint64_t kRoundStep = 0x9E3779B1ull;

// splitmix64's i-th output (seed 0): the constants' source.
SZ_HD constexpr uint64_t sm(uint64_t i) {
  uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
SZ_HD constexpr uint64_t key(uint32_t j) { return sm(j); }            // K_j
SZ_HD constexpr uint64_t init(uint32_t j) { return sm(64 + j); }      // I_j
SZ_HD constexpr uint64_t row_key(uint32_t t) { return sm(128 + t); }  // T_t
// U_r: round r's key, the same 32 bits in both halves.
SZ_HD constexpr uint64_t round_key(uint64_t r) { return ((r * kRoundStep) & 0xFFFFFFFFull) * 0x100000001ull; }
SZ_HD constexpr uint64_t rotl(uint64_t x, unsigned r) { return (x << r) | (x >> (64 - r)); }
SZ_HD constexpr uint64_t avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ull;
  return h ^ (h >> 32);
}

// What word w and its piece's other word add to accumulator j (k = K_j, rk = T_t ^ U_r). On 32-bit halves, so that
// a GPU forms each half's xor as one three-input LOP3 and the product and sum as one IMAD.WIDE and one 64-bit add.
SZ_HD constexpr uint64_t step(uint64_t w, uint64_t other, uint64_t k, uint64_t rk) {
  const uint32_t x_lo = (uint32_t)w ^ (uint32_t)k ^ (uint32_t)rk;
  const uint32_t x_hi = (uint32_t)(w >> 32) ^ (uint32_t)(k >> 32) ^ (uint32_t)(rk >> 32);
  return (uint64_t)x_lo * x_hi + other;
}
// The finish: lane l's mix of accumulators 2l and 2l + 1; the checksum folds their sum over the 32 lanes.
SZ_HD constexpr uint64_t lane_mix(uint64_t a0, uint64_t a1) { return avalanche(a0 ^ rotl(a1, 32)); }
SZ_HD constexpr uint32_t fold(uint64_t lanes_sum, uint64_t len) {
  return (uint32_t)avalanche(lanes_sum ^ (len * 0x9E3779B185EBCA87ull));
}

// K_j and I_j as tables (the CPU forms read them by index).
struct Keys {
  uint64_t k[kAccs];
};
constexpr Keys make_keys(uint32_t first) {
  Keys t{};
  for (uint32_t j = 0; j < kAccs; ++j) t.k[j] = sm(first + j);
  return t;
}
constexpr Keys kKeys = make_keys(0);   // K_j = key(j)
constexpr Keys kInit = make_keys(64);  // I_j = init(j)

// Row (64 words at p, row key rk = T_t ^ U_r) into the accumulators.
inline void add_row(uint64_t a[kAccs], const uint8_t* p, uint64_t rk) {
#if defined(__AVX2__) && !defined(__CUDA_ARCH__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // 4 accumulators a vector: the products of each word's halves (vpmuludq), plus the piece's other word.
  const __m256i r4 = _mm256_set1_epi64x((long long)rk);
  for (uint32_t j = 0; j < kAccs; j += 4) {
    const __m256i v = _mm256_loadu_si256((const __m256i*)(p + 8 * j));
    const __m256i x = _mm256_xor_si256(v, _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(kKeys.k + j)), r4));
    const __m256i m = _mm256_mul_epu32(x, _mm256_srli_epi64(x, 32));
    const __m256i o = _mm256_shuffle_epi32(v, 0x4E);  // each 128-bit piece's two words swapped
    _mm256_storeu_si256((__m256i*)(a + j),
                        _mm256_add_epi64(_mm256_loadu_si256((const __m256i*)(a + j)), _mm256_add_epi64(m, o)));
  }
#else
  for (uint32_t j = 0; j < kAccs; j += 2) {
    const uint64_t w0 = layout::load_u64(p + 8 * j), w1 = layout::load_u64(p + 8 * j + 8);
    a[j] += step(w0, w1, kKeys.k[j], rk);
    a[j + 1] += step(w1, w0, kKeys.k[j + 1], rk);
  }
#endif
}

// LH32 of len bytes at data (any alignment): whole rows by add_row, the last partial row from a zero-padded copy.
inline uint32_t lh32(const void* data, size_t len) {
  const uint8_t* p = (const uint8_t*)data;
  uint64_t a[kAccs];
  for (uint32_t j = 0; j < kAccs; ++j) a[j] = kInit.k[j];
  const size_t rows = len / (8 * kAccs);
  for (size_t i = 0; i < rows; ++i)
    add_row(a, p + i * 8 * kAccs, row_key((uint32_t)(i % 4)) ^ round_key(i / 4));
  const size_t done = rows * 8 * kAccs;
  if (done < len) {  // the pieces of the last row that hold input; the last of them zero-padded
    uint8_t tail[8 * kAccs] = {};
    memcpy(tail, p + done, len - done);
    const uint64_t rk = row_key((uint32_t)(rows % 4)) ^ round_key(rows / 4);
    const uint32_t nw = (uint32_t)((len - done + 15) / 16 * 2);
    for (uint32_t j = 0; j < nw; ++j)
      a[j] += step(layout::load_u64(tail + 8 * j), layout::load_u64(tail + 8 * (j ^ 1u)), kKeys.k[j], rk);
  }
  uint64_t sum = 0;
  for (uint32_t l = 0; l < kAccs / 2; ++l) sum += lane_mix(a[2 * l], a[2 * l + 1]);
  return fold(sum, len);
}

}  // namespace
}  // namespace lh32
}  // namespace splitzip
