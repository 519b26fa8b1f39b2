// xxh3.cuh — XXH3_64bits (seed 0, default secret) for host and device, written from the public xxHash
// specification (doc/xxhash_spec.md of the xxHash project, XXH3 section). docs/FORMAT.md §1 uses it for the header,
// index-free chunk checksums (§4.6) and the codebook file.
//
// Two forms here, a third in warp/xxh3_rounds.cuh:
//   xxh3_64(p, len)            scalar, any length, host or device (a plain byte reader).
//   xxh3_64_warp(fetch, len)   one warp hashes one buffer read through a fetch object: the 16 stripes of a 1 KiB
//                              block are split over 4 groups of 8 lanes (lane i owns accumulator i), summed with
//                              shuffles, then every lane scrambles its accumulator. Lengths <= 240 fall back to the
//                              scalar form in every lane.
//   xxh_add_round / xxh_finish (warp/xxh3_rounds.cuh) a warp hashes a chunk while it passes through the codec.
// tests/cuda/test_xxh3_host.cpp checks the scalar form against libxxhash for every length 0..4096; the emulated
// kernel tests (tests/cuda/test_kernels_emu.cpp) check the warp forms against libxxhash.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#if defined(__CUDACC__) || defined(SZ_SIMT_EMU)
#include "cuda/simt.cuh"
#endif

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
constexpr uint8_t kSecretCx[kSecretSize] = SZ_XXH3_SECRET_BYTES;
// The 8 secret bytes at off, little-endian, at compile time (tables of keys: warp/xxh3_rounds.cuh).
constexpr uint64_t sec64_cx(size_t off) {
  uint64_t v = 0;
  for (int b = 7; b >= 0; --b) v = (v << 8) | kSecretCx[off + (size_t)b];
  return v;
}
#if defined(__CUDACC__)
static __constant__ uint8_t kSecretDev[kSecretSize] = SZ_XXH3_SECRET_BYTES;
#endif

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

#if defined(__CUDACC__) || defined(SZ_SIMT_EMU)
// One warp hashes a buffer whose 8-byte words it reads through fetch.word(offset) (offset in bytes, any alignment)
// and fetch.byte(offset). All 32 lanes must call it; all return the hash. Buffers of up to 240 bytes are copied byte
// by byte into a local array and hashed by the scalar code. The codec uses it for a frame's short last chunk; full
// chunks are hashed on the fly (warp/xxh3_rounds.cuh).
template <class Fetch>
SZ_DEV uint64_t xxh3_64_warp(const Fetch& fetch, size_t len) {
  const unsigned lane = cuda::simt::lane_id();
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
    uint64_t sum = 0;
    for (unsigned q = 0; q < 4; ++q) {
      const size_t so = base + (g + 4 * q) * kStripe;
      sum += lane_step(fetch.word(so + 8 * i), fetch.word(so + 8 * (i ^ 1)), key[q]);
    }
    sum += cuda::simt::shfl_xor(sum, 8);
    sum += cuda::simt::shfl_xor(sum, 16);
    acc = scramble(acc + sum, key_scramble);
  }
  const size_t tail_stripes = ((len - 1) - kBlock * blocks) / kStripe;
  uint64_t sum = 0;
  for (unsigned q = 0; q < 4; ++q) {
    const size_t s = g + 4 * q;
    if (s < tail_stripes) {
      const size_t so = blocks * kBlock + s * kStripe;
      sum += lane_step(fetch.word(so + 8 * i), fetch.word(so + 8 * (i ^ 1)), key[q]);
    }
  }
  sum += cuda::simt::shfl_xor(sum, 8);
  sum += cuda::simt::shfl_xor(sum, 16);
  acc += sum;
  acc += lane_step(fetch.word(len - kStripe + 8 * i), fetch.word(len - kStripe + 8 * (i ^ 1)), key_last);
  uint64_t all[8];
  for (unsigned j = 0; j < 8; ++j) all[j] = cuda::simt::shfl(acc, (int)j);
  return merge(all, len);
}
#endif

}  // namespace xxh3
}  // namespace splitzip
