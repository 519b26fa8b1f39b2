// xxh3.cuh — XXH3_64bits (seed 0, default secret) for host and device, written from the public xxHash
// specification (doc/xxhash_spec.md of the xxHash project, XXH3 section). docs/FORMAT.md §1 uses it for the header,
// index-free chunk checksums (§4.6) and the codebook file.
//
// Three forms:
//   xxh3_64(p, len)            scalar, any length, host or device (a plain byte reader).
//   xxh3_64_warp(fetch, len)   device, one warp hashes one buffer of more than 240 bytes: the 16 stripes of a
//                              1 KiB block are split over 4 groups of 8 lanes (lane i owns accumulator i), summed with
//                              shuffles, then every lane scrambles its accumulator. Other lengths fall back to the
//                              scalar form in every lane.
//   xxh3_64_cta<kThreads>(buf, len, scratch)
//                              device, all threads of a CTA hash one buffer in shared memory: the stripe sums of
//                              all 1 KiB blocks are computed at once, only the short scramble chain is sequential
//                              (see the comment above it).
// The host unit test (tests/cuda/test_xxh3_host.cpp) checks the scalar form against libxxhash for every length
// 0..4096, and the CTA form by running its per-lane helpers for every emulated thread; the GPU tests check the warp
// form through chunk checksums that the CPU reference computes with libxxhash, and the CTA form directly
// (tests/cuda/test_xxh3_cta.cu).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "layout.h"

#if defined(__CUDACC__)
#define SZ_XXH_HD __host__ __device__ __forceinline__
#define SZ_XXH_CX __host__ __device__ constexpr
#define SZ_XXH_UNROLL _Pragma("unroll")
#else
#define SZ_XXH_HD inline
#define SZ_XXH_CX constexpr
#define SZ_XXH_UNROLL
#endif

namespace splitzip {
namespace xxh3 {

constexpr uint64_t kP32_1 = 0x9E3779B1u;
constexpr uint64_t kP32_2 = 0x85EBCA77u;
constexpr uint64_t kP32_3 = 0xC2B2AE3Du;
constexpr uint64_t kP64_1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kP64_2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kP64_3 = 0x165667B19E3779F9ull;
constexpr uint64_t kP64_4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kP64_5 = 0x27D4EB2F165667C5ull;
constexpr uint64_t kPMx1 = 0x165667919E3779F9ull;
constexpr uint64_t kPMx2 = 0x9FB21C651E98DF25ull;

constexpr size_t kSecretSize = 192;
constexpr size_t kStripe = 64;
constexpr size_t kStripesPerBlock = (kSecretSize - kStripe) / 8;  // 16
constexpr size_t kBlock = kStripe * kStripesPerBlock;             // 1024

// The default secret (kSecret of the specification), one copy for the host and one in device constant memory.
#define SZ_XXH3_SECRET_BYTES                                                                                        \
  {0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, 0xde, 0xd4, 0x6d, \
   0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, \
   0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, \
   0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, \
   0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, \
   0xd8, 0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51, \
   0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, 0xea, 0xc5, 0xac, 0x83, 0x34, \
   0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, 0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, \
   0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, \
   0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, \
   0x40, 0x7e}

static const uint8_t kSecretHost[kSecretSize] = SZ_XXH3_SECRET_BYTES;
#if defined(__CUDACC__)
static __constant__ uint8_t kSecretDev[kSecretSize] = SZ_XXH3_SECRET_BYTES;
#endif

// The secret as 24 little-endian u64 words (word k = bytes 8k..8k+7), for the CTA form: lane k of a warp loads word k
// once and the other lanes take their keys from it by shuffles (a divergent constant-memory load serialises per
// distinct address, so one load of 24 words beats 8 byte loads per key).
constexpr int kSecretWords = (int)(kSecretSize / 8);
constexpr uint8_t kSecretCx[kSecretSize] = SZ_XXH3_SECRET_BYTES;
constexpr uint64_t secret_word_cx(int k) {
  uint64_t v = 0;
  for (int b = 7; b >= 0; --b) v = (v << 8) | kSecretCx[8 * k + b];
  return v;
}
#define SZ_XXH3_W4(k) secret_word_cx(k), secret_word_cx(k + 1), secret_word_cx(k + 2), secret_word_cx(k + 3)
#if defined(__CUDACC__)
static __constant__ uint64_t kSecretWordsDev[kSecretWords] = {SZ_XXH3_W4(0),  SZ_XXH3_W4(4),  SZ_XXH3_W4(8),
                                                              SZ_XXH3_W4(12), SZ_XXH3_W4(16), SZ_XXH3_W4(20)};
#endif
#undef SZ_XXH3_W4

SZ_XXH_HD const uint8_t* secret() {
#if defined(__CUDA_ARCH__)
  return kSecretDev;
#else
  return kSecretHost;
#endif
}

SZ_XXH_HD uint64_t sec64(size_t off) { return layout::load_u64(secret() + off); }
SZ_XXH_HD uint32_t sec32(size_t off) { return layout::load_u32(secret() + off); }

SZ_XXH_HD uint64_t rotl64(uint64_t x, unsigned r) { return (x << r) | (x >> (64 - r)); }
SZ_XXH_HD uint32_t swap32(uint32_t x) {
  return ((x & 0xFFu) << 24) | ((x & 0xFF00u) << 8) | ((x >> 8) & 0xFF00u) | (x >> 24);
}
SZ_XXH_HD uint64_t swap64(uint64_t x) {
  return ((uint64_t)swap32((uint32_t)x) << 32) | (uint64_t)swap32((uint32_t)(x >> 32));
}

// 64x64 -> 128-bit product, folded by xor of its halves.
SZ_XXH_HD uint64_t mul128_fold64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#else
  const unsigned __int128 p = (unsigned __int128)a * b;
  return (uint64_t)p ^ (uint64_t)(p >> 64);
#endif
}

SZ_XXH_HD uint64_t xxh64_avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kP64_2;
  h ^= h >> 29;
  h *= kP64_3;
  h ^= h >> 32;
  return h;
}
SZ_XXH_HD uint64_t avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= kPMx1;
  h ^= h >> 32;
  return h;
}
SZ_XXH_HD uint64_t rrmxmx(uint64_t h, uint64_t len) {
  h ^= rotl64(h, 49) ^ rotl64(h, 24);
  h *= kPMx2;
  h ^= (h >> 35) + len;
  h *= kPMx2;
  h ^= h >> 28;
  return h;
}
SZ_XXH_HD uint64_t mix16(const uint8_t* p, size_t sec_off) {
  return mul128_fold64(layout::load_u64(p) ^ sec64(sec_off), layout::load_u64(p + 8) ^ sec64(sec_off + 8));
}

// One lane's share of a stripe: accumulator i takes the neighbour's data word plus a 32x32 product of its own
// data word keyed by the secret.
SZ_XXH_HD uint64_t lane_step(uint64_t data_own, uint64_t data_neighbour, uint64_t key) {
  const uint64_t k = data_own ^ key;
  return data_neighbour + (k & 0xFFFFFFFFull) * (k >> 32);
}
SZ_XXH_HD uint64_t scramble(uint64_t acc, uint64_t key) {
  acc ^= acc >> 47;
  acc ^= key;
  return acc * kP32_1;
}
SZ_XXH_HD uint64_t acc_init(unsigned i) {
  switch (i) {
    case 0: return kP32_3;
    case 1: return kP64_1;
    case 2: return kP64_2;
    case 3: return kP64_3;
    case 4: return kP64_4;
    case 5: return kP32_2;
    case 6: return kP64_5;
    default: return kP32_1;
  }
}
SZ_XXH_HD uint64_t merge(const uint64_t acc[8], uint64_t len) {
  uint64_t r = len * kP64_1;
  for (unsigned j = 0; j < 4; ++j)
    r += mul128_fold64(acc[2 * j] ^ sec64(11 + 16 * j), acc[2 * j + 1] ^ sec64(11 + 16 * j + 8));
  return avalanche(r);
}

SZ_XXH_HD uint64_t hash_0to16(const uint8_t* p, size_t len) {
  if (len > 8) {
    const uint64_t lo = layout::load_u64(p) ^ (sec64(24) ^ sec64(32));
    const uint64_t hi = layout::load_u64(p + len - 8) ^ (sec64(40) ^ sec64(48));
    const uint64_t acc = (uint64_t)len + swap64(lo) + hi + mul128_fold64(lo, hi);
    return avalanche(acc);
  }
  if (len >= 4) {
    const uint32_t a = layout::load_u32(p);
    const uint32_t b = layout::load_u32(p + len - 4);
    const uint64_t flip = sec64(8) ^ sec64(16);
    const uint64_t v = (uint64_t)b + ((uint64_t)a << 32);
    return rrmxmx(v ^ flip, len);
  }
  if (len > 0) {
    const uint32_t c1 = p[0], c2 = p[len >> 1], c3 = p[len - 1];
    const uint32_t combined = (c1 << 16) | (c2 << 24) | c3 | ((uint32_t)len << 8);
    const uint64_t flip = (uint64_t)(sec32(0) ^ sec32(4));
    return xxh64_avalanche((uint64_t)combined ^ flip);
  }
  return xxh64_avalanche(sec64(56) ^ sec64(64));
}

SZ_XXH_HD uint64_t hash_17to128(const uint8_t* p, size_t len) {
  uint64_t acc = (uint64_t)len * kP64_1;
  if (len > 32) {
    if (len > 64) {
      if (len > 96) {
        acc += mix16(p + 48, 96);
        acc += mix16(p + len - 64, 112);
      }
      acc += mix16(p + 32, 64);
      acc += mix16(p + len - 48, 80);
    }
    acc += mix16(p + 16, 32);
    acc += mix16(p + len - 32, 48);
  }
  acc += mix16(p, 0);
  acc += mix16(p + len - 16, 16);
  return avalanche(acc);
}

SZ_XXH_HD uint64_t hash_129to240(const uint8_t* p, size_t len) {
  uint64_t acc = (uint64_t)len * kP64_1;
  const unsigned rounds = (unsigned)(len / 16);
  for (unsigned i = 0; i < 8; ++i) acc += mix16(p + 16 * i, 16 * i);
  acc = avalanche(acc);
  for (unsigned i = 8; i < rounds; ++i) acc += mix16(p + 16 * i, 16 * (i - 8) + 3);
  acc += mix16(p + len - 16, 136 - 17);
  return avalanche(acc);
}

SZ_XXH_HD void stripe(uint64_t acc[8], const uint8_t* p, size_t sec_off) {
  uint64_t d[8];
  for (unsigned i = 0; i < 8; ++i) d[i] = layout::load_u64(p + 8 * i);
  for (unsigned i = 0; i < 8; ++i) acc[i] += lane_step(d[i], d[i ^ 1], sec64(sec_off + 8 * i));
}

SZ_XXH_HD uint64_t hash_long(const uint8_t* p, size_t len) {
  uint64_t acc[8];
  for (unsigned i = 0; i < 8; ++i) acc[i] = acc_init(i);
  const size_t blocks = (len - 1) / kBlock;
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t s = 0; s < kStripesPerBlock; ++s) stripe(acc, p + b * kBlock + s * kStripe, 8 * s);
    for (unsigned i = 0; i < 8; ++i) acc[i] = scramble(acc[i], sec64(kSecretSize - kStripe + 8 * i));
  }
  const size_t tail_stripes = ((len - 1) - kBlock * blocks) / kStripe;
  for (size_t s = 0; s < tail_stripes; ++s) stripe(acc, p + blocks * kBlock + s * kStripe, 8 * s);
  stripe(acc, p + len - kStripe, kSecretSize - kStripe - 7);
  return merge(acc, len);
}

// XXH3_64bits(p, len), seed 0, default secret.
SZ_XXH_HD uint64_t xxh3_64(const void* data, size_t len) {
  const uint8_t* p = (const uint8_t*)data;
  if (len <= 16) return hash_0to16(p, len);
  if (len <= 128) return hash_17to128(p, len);
  if (len <= 240) return hash_129to240(p, len);
  return hash_long(p, len);
}
SZ_XXH_HD uint32_t h32(const void* data, size_t len) { return (uint32_t)xxh3_64(data, len); }

#if defined(__CUDACC__)
// One warp hashes a buffer whose 8-byte words it reads through fetch(offset) (offset in bytes, any alignment).
// All 32 lanes must call it; all return the hash. Buffers of up to 240 bytes (only a frame's short last chunk) are
// copied byte by byte into a local array and hashed by the scalar code.
template <class Fetch>
__device__ uint64_t xxh3_64_warp(const Fetch& fetch, size_t len) {
  const unsigned lane = threadIdx.x & 31u;
  if (len <= 240) {
    uint8_t buf[240];
    for (size_t o = 0; o < len; ++o) buf[o] = fetch.byte(o);
    return xxh3_64(buf, len);
  }
  const unsigned i = lane & 7u, g = lane >> 3;
  uint64_t key[4];
  for (unsigned q = 0; q < 4; ++q) key[q] = sec64(8 * (g + 4 * q) + 8 * i);
  const uint64_t key_scramble = sec64(kSecretSize - kStripe + 8 * i);
  const uint64_t key_last = sec64(kSecretSize - kStripe - 7 + 8 * i);
  uint64_t acc = acc_init(i);
  const size_t blocks = (len - 1) / kBlock;
  for (size_t b = 0; b < blocks; ++b) {
    const size_t base = b * kBlock;
    uint64_t own[4], nb[4];
#pragma unroll
    for (unsigned q = 0; q < 4; ++q) {
      const size_t so = base + (g + 4 * q) * kStripe;
      own[q] = fetch.word(so + 8 * i);
      nb[q] = fetch.word(so + 8 * (i ^ 1));
    }
    uint64_t sum = 0;
#pragma unroll
    for (unsigned q = 0; q < 4; ++q) sum += lane_step(own[q], nb[q], key[q]);
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 8);
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 16);
    acc = scramble(acc + sum, key_scramble);
  }
  const size_t tail_stripes = ((len - 1) - kBlock * blocks) / kStripe;
  uint64_t sum = 0;
#pragma unroll
  for (unsigned q = 0; q < 4; ++q) {
    const size_t s = g + 4 * q;
    if (s < tail_stripes) {
      const size_t so = blocks * kBlock + s * kStripe;
      sum += lane_step(fetch.word(so + 8 * i), fetch.word(so + 8 * (i ^ 1)), key[q]);
    }
  }
  sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 8);
  sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 16);
  acc += sum;
  acc += lane_step(fetch.word(len - kStripe + 8 * i), fetch.word(len - kStripe + 8 * (i ^ 1)), key_last);
  uint64_t all[8];
#pragma unroll
  for (unsigned j = 0; j < 8; ++j) all[j] = __shfl_sync(0xFFFFFFFFu, acc, j);
  return merge(all, len);
}
#endif

// ---------------------------------------------------------------------------------------------------------------
// CTA form: xxh3_64_cta<kThreads>(buf, len, scratch), all threads of a CTA hash one buffer in shared memory.
//
// For len > 240 (hash_long): what a stripe adds to accumulator i, lane_step(word i, word i^1, key), does not depend on
// the accumulator. So the sums S[G][i] over the stripes of each group G (group G < blocks: the 16 stripes of 1 KiB
// block G; group `blocks`, if any: the tail stripes after the last full block) are computed for all groups at once,
// and only the short chain acc_i = scramble(acc_i + S[G][i]) stays sequential. Groups are taken in rounds of
// cta_round_groups<kThreads>():
//   1. warp w takes groups w, w + kWarps, ... of the round. Lane (g = lane / 8, i = lane % 8) adds the contributions
//      of stripes g, g+4, g+8, g+12 of the group to accumulator i; two xor-shuffles sum the 4 lanes of each i
//      ((p0 + p1) + (p2 + p3)); lanes 0..7 write S[G][i] into the round's half of scratch.
//   2. __syncthreads().
//   3. EVERY warp runs the chain over the round's groups itself (lane i, and its copies i+8, i+16, i+24), so that no
//      result has to be broadcast: that saves a barrier and costs the same latency as one warp doing it.
// Rounds alternate between the two halves of scratch, so that round r+1 may write while slow warps still read round
// r: one barrier per round, plus the final one. The last stripe (at len - 64, secret offset kSecretSize - 64 - 7) adds
// its lane_step; the merge pairs accumulators 2j, 2j+1 with one shuffle and sums the 4 products with a butterfly over
// the 8 lanes. Lengths <= 240 are hashed by every thread with the scalar form (warp-wide broadcast reads of buf), for
// the same reason: no broadcast, one barrier.
//
// The per-lane steps are the __host__ __device__ helpers below (cta_plan, cta_lane_keys, cta_lane_partial,
// cta_chain, cta_lane_last, cta_merge_*); the host test runs them for every emulated lane of every warp in the
// device's order and grouping and compares with libxxhash.

// How hash_long cuts a buffer of len > 240 bytes into groups.
struct CtaPlan {
  uint32_t blocks;        // full 1 KiB blocks, each followed by a scramble: (len - 1) / 1024
  uint32_t tail_stripes;  // stripes after them, before the last stripe: ((len - 1) % 1024) / 64, 0..15
  uint32_t groups;        // blocks, plus one group for the tail stripes when there are any
};
SZ_XXH_HD CtaPlan cta_plan(uint32_t len) {
  CtaPlan p;
  p.blocks = (len - 1) / (uint32_t)kBlock;
  p.tail_stripes = ((len - 1) - (uint32_t)kBlock * p.blocks) / (uint32_t)kStripe;
  p.groups = p.blocks + (p.tail_stripes != 0 ? 1u : 0u);
  return p;
}

template <int kThreads>
SZ_XXH_CX int cta_warps() {
  static_assert(kThreads > 0 && kThreads % 32 == 0 && kThreads <= 1024, "kThreads: a multiple of 32, at most 1024");
  return kThreads / 32;
}
// Groups a warp takes per round: a round covers at least 16 groups (16 KiB), so a typical 8 KiB chunk is one round.
template <int kThreads>
SZ_XXH_CX int cta_groups_per_warp() {
  return (16 + cta_warps<kThreads>() - 1) / cta_warps<kThreads>();
}
template <int kThreads>
SZ_XXH_CX int cta_round_groups() {
  return cta_warps<kThreads>() * cta_groups_per_warp<kThreads>();
}
// Slots of one half of scratch: the round's groups rounded up to 4 (the chain reads them 4 at a time).
template <int kThreads>
SZ_XXH_CX int cta_half_slots() {
  return (cta_round_groups<kThreads>() + 3) / 4 * 4;
}
// u64 words of shared scratch that xxh3_64_cta<kThreads> needs (256 for 256 threads: 2 KiB).
template <int kThreads>
SZ_XXH_CX int cta_scratch_words() {
  return 2 * 8 * cta_half_slots<kThreads>();
}

// The secret words one lane needs. word(k) returns secret word k (on the device, a shuffle from the lane that loaded
// it); every lane must call this (the shuffles are warp-wide).
struct CtaLaneKeys {
  uint64_t stripe[4];  // stripe g + 4q of a block, accumulator i: secret bytes 8 (g + 4q) + 8 i
  uint64_t scramble;   // secret bytes kSecretSize - 64 + 8 i
  uint64_t last;       // secret bytes kSecretSize - 64 - 7 + 8 i  (= 121 + 8 i)
  uint64_t merge;      // secret bytes 11 + 8 i
};
template <class WordAt>
SZ_XXH_HD CtaLaneKeys cta_lane_keys(const WordAt& word, unsigned lane) {
  const int i = (int)(lane & 7u), g = (int)((lane >> 3) & 3u);
  CtaLaneKeys k;
SZ_XXH_UNROLL
  for (int q = 0; q < 4; ++q) k.stripe[q] = word(g + 4 * q + i);
  const uint64_t w15 = word(15 + i), w16 = word(16 + i), w1 = word(1 + i), w2 = word(2 + i);
  k.scramble = w16;
  k.last = (w15 >> 8) | (w16 << 56);  // 121 + 8 i = 8 (15 + i) + 1
  k.merge = (w1 >> 24) | (w2 << 40);  // 11 + 8 i = 8 (1 + i) + 3
  return k;
}

// Reads little-endian 8-byte words of a buffer with aligned 8-byte loads only, as shared memory requires.
// ld(a) returns the 8 bytes at address a (a multiple of 8) of the address space of base. kAligned: base is a
// multiple of 8, so word() is one load; otherwise sh = base % 8 (1..7) and word() funnels two loads.
template <class Ld, class Addr, bool kAligned>
struct CtaReader {
  Ld ld;
  Addr base;
  unsigned sh;
  // The 8 bytes at base + o, o a multiple of 8.
  SZ_XXH_HD uint64_t word(uint32_t o) const {
    if constexpr (kAligned) return ld(base + o);
    const Addr a = base - sh + o;
    return (ld(a) >> (8 * sh)) | (ld(a + 8) << (64 - 8 * sh));
  }
  // The 8 bytes at base + o, any o. Only the aligned words that hold those bytes are read.
  SZ_XXH_HD uint64_t any(uint32_t o) const {
    const Addr x = base + o;
    const unsigned s = (unsigned)(x & 7u);
    const uint64_t lo = ld(x - s);
    if (s == 0) return lo;
    return (lo >> (8 * s)) | (ld(x - s + 8) << (64 - 8 * s));
  }
};

// This lane's share of S[group][i] (i = lane % 8): stripes g, g+4, g+8, g+12 of the group (those that exist).
template <class Reader>
SZ_XXH_HD uint64_t cta_lane_partial(const Reader& rd, const CtaPlan& plan, uint32_t group, unsigned lane,
                                    const CtaLaneKeys& k) {
  const uint32_t i = lane & 7u, g = (lane >> 3) & 3u;
  const uint32_t stripes = group < plan.blocks ? (uint32_t)kStripesPerBlock : plan.tail_stripes;
  const uint32_t base = group * (uint32_t)kBlock + 8 * i;
  uint64_t sum = 0;
SZ_XXH_UNROLL
  for (uint32_t q = 0; q < 4; ++q) {
    const uint32_t s = g + 4 * q;
    if (s < stripes) {
      const uint32_t o = base + s * (uint32_t)kStripe;  // bit 3 of o is bit 0 of i: o ^ 8 is the neighbour word
      sum += lane_step(rd.word(o), rd.word(o ^ 8u), k.stripe[q]);
    }
  }
  return sum;
}

// One step of the sequential part: a full block adds its sum and scrambles; the tail group only adds.
SZ_XXH_HD uint64_t cta_chain(uint64_t acc, uint64_t s, uint32_t group, const CtaPlan& plan, const CtaLaneKeys& k) {
  return group < plan.blocks ? scramble(acc + s, k.scramble) : acc + s;
}

// What the last stripe (bytes len - 64 .. len - 1) adds to accumulator lane % 8.
template <class Reader>
SZ_XXH_HD uint64_t cta_lane_last(const Reader& rd, uint32_t len, unsigned lane, const CtaLaneKeys& k) {
  const uint32_t i = lane & 7u, o = len - (uint32_t)kStripe;
  return lane_step(rd.any(o + 8 * i), rd.any(o + 8 * (i ^ 1u)), k.last);
}

// Merge: lane i holds x_i = acc_i ^ secret(11 + 8 i); even lanes fold x_i with x_{i+1} (their xor-1 neighbour), odd
// lanes give 0; the sum of the 8 lanes' terms, plus len * P64_1, avalanched, is the hash.
SZ_XXH_HD uint64_t cta_merge_term(uint64_t x_own, uint64_t x_neighbour, unsigned lane) {
  return (lane & 1u) ? 0 : mul128_fold64(x_own, x_neighbour);
}
SZ_XXH_HD uint64_t cta_merge_finish(uint64_t terms, uint32_t len) {
  return avalanche((uint64_t)len * kP64_1 + terms);
}

#if defined(__CUDACC__)
namespace cta_detail {

constexpr unsigned kFull = 0xFFFFFFFFu;

// An 8-byte load from shared memory by its shared-window address. volatile keeps it after the caller's barrier.
struct SmemLd {
  __device__ __forceinline__ uint64_t operator()(uint32_t a) const {
    uint64_t v;
    asm volatile("ld.shared.u64 %0, [%1];" : "=l"(v) : "r"(a));
    return v;
  }
};

// Secret word k, taken from lane k, which loaded it (every lane calls it: a warp-wide shuffle).
struct ShflWord {
  uint64_t mine;
  __host__ __device__ __forceinline__ uint64_t operator()(int k) const {
#if defined(__CUDA_ARCH__)
    return __shfl_sync(kFull, mine, k);
#else
    (void)k;
    return mine;  // never used on the host
#endif
  }
};

template <int kThreads, bool kAligned>
__device__ __forceinline__ uint64_t hash_long(uint32_t sbuf, uint32_t len, uint64_t* scratch) {
  constexpr int kWarps = cta_warps<kThreads>(), kPerWarp = cta_groups_per_warp<kThreads>();
  constexpr uint32_t kRound = (uint32_t)cta_round_groups<kThreads>();
  constexpr uint32_t kHalf = 8u * (uint32_t)cta_half_slots<kThreads>();
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, i = lane & 7u;
  const CtaPlan plan = cta_plan(len);
  const CtaReader<SmemLd, uint32_t, kAligned> rd{SmemLd{}, sbuf, sbuf & 7u};
  const CtaLaneKeys keys = cta_lane_keys(ShflWord{kSecretWordsDev[lane < (unsigned)kSecretWords ? lane : 0u]}, lane);
  const uint64_t last = cta_lane_last(rd, len, lane, keys);
  uint64_t acc = acc_init(i);
  uint32_t parity = 0;
  for (uint32_t first = 0; first < plan.groups; first += kRound, parity ^= 1u) {
    uint64_t* half = scratch + parity * kHalf;
#pragma unroll
    for (int k = 0; k < kPerWarp; ++k) {
      const uint32_t slot = warp + (uint32_t)(kWarps * k);
      if (first + slot < plan.groups) {  // warp-uniform
        uint64_t p = cta_lane_partial(rd, plan, first + slot, lane, keys);
        p += __shfl_xor_sync(kFull, p, 8);
        p += __shfl_xor_sync(kFull, p, 16);
        if (lane < 8u) half[8u * slot + lane] = p;
      }
    }
    __syncthreads();
    const uint32_t n = plan.groups - first < kRound ? plan.groups - first : kRound;
    for (uint32_t j0 = 0; j0 < n; j0 += 4) {
      uint64_t s[4];
#pragma unroll
      for (uint32_t u = 0; u < 4; ++u) s[u] = half[8u * (j0 + u) + i];  // within the half even past n
#pragma unroll
      for (uint32_t u = 0; u < 4; ++u)
        if (j0 + u < n) acc = cta_chain(acc, s[u], first + j0 + u, plan, keys);
    }
  }
  acc += last;
  const uint64_t x = acc ^ keys.merge;
  uint64_t t = cta_merge_term(x, __shfl_xor_sync(kFull, x, 1), lane);
  t += __shfl_xor_sync(kFull, t, 1);
  t += __shfl_xor_sync(kFull, t, 2);
  t += __shfl_xor_sync(kFull, t, 4);
  return cta_merge_finish(t, len);
}

}  // namespace cta_detail

// XXH3_64bits(buf, len) computed by all kThreads threads of a 1-D CTA (kThreads a multiple of 32, <= 1024), which
// all call it with the same arguments. buf: shared memory, any alignment (8-byte aligned is the fast path), bytes
// [0, len) written and made visible by the caller's barrier. scratch: cta_scratch_words<kThreads>() u64 of shared
// memory, 8-byte aligned. Returns the hash in every thread and ends with a barrier, after which buf and scratch may
// be reused. Barriers: 1 for len <= 240, else ceil(groups / cta_round_groups) + 1, where groups ~ len / 1 KiB
// (2 for len <= 16 KiB at 256 threads).
template <int kThreads>
__device__ __forceinline__ uint64_t xxh3_64_cta(const uint8_t* buf, uint32_t len, uint64_t* scratch) {
  uint64_t h;
  if (len <= 240) {
    h = xxh3_64(buf, len);
  } else {
    const uint32_t sbuf = (uint32_t)__cvta_generic_to_shared(buf);
    h = (sbuf & 7u) == 0 ? cta_detail::hash_long<kThreads, true>(sbuf, len, scratch)
                         : cta_detail::hash_long<kThreads, false>(sbuf, len, scratch);
  }
  __syncthreads();
  return h;
}
#endif

}  // namespace xxh3
}  // namespace splitzip
