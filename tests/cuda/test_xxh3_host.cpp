// test_xxh3_host.cpp — the host side of the device XXH3 (src/cuda/xxh3.cuh) against libxxhash, on the CPU.
// Runs in every build (no GPU needed): every length 0..4096 over random data, several seeds of data, and a few long
// buffers that cross many 1 KiB blocks. The CTA form (xxh3_64_cta) is checked by emulating its threads one after the
// other with the same per-lane helpers, in the same order and grouping as the device code.
#include <gtest/gtest.h>

#include <stdint.h>
#include <string.h>

#include <array>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cuda/xxh3.cuh"
#include "test_util.h"

namespace {

using sztest::random_bytes;

TEST(CudaXxh3Host, EveryLengthUpTo4096) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const std::vector<uint8_t> data = random_bytes(4096 + 7, seed);
    for (size_t len = 0; len <= 4096; ++len) {
      // Also at an odd offset, so that no path depends on alignment.
      const uint8_t* p = data.data() + (seed & 7);
      ASSERT_EQ(splitzip::xxh3::xxh3_64(p, len), (uint64_t)XXH3_64bits(p, len)) << "len " << len << " seed " << seed;
    }
  }
}

TEST(CudaXxh3Host, LongBuffers) {
  const std::vector<uint8_t> data = random_bytes(1 << 20, 99);
  for (size_t len : {4097u, 8192u, 8191u, 65536u, 65600u, 131072u, 262144u, 1048576u}) {
    ASSERT_EQ(splitzip::xxh3::xxh3_64(data.data(), len), (uint64_t)XXH3_64bits(data.data(), len)) << "len " << len;
  }
}

TEST(CudaXxh3Host, H32IsLowHalf) {
  const std::vector<uint8_t> data = random_bytes(60, 5);
  EXPECT_EQ(splitzip::xxh3::h32(data.data(), 60), (uint32_t)XXH3_64bits(data.data(), 60));
}

// ---- The CTA form, emulated ------------------------------------------------------------------------------------

namespace x = splitzip::xxh3;
using Lanes = std::array<uint64_t, 32>;

// The device's __shfl_xor_sync(v, d) followed by v += that: every lane adds the value of lane ^ d.
Lanes add_xor(const Lanes& v, unsigned d) {
  Lanes r;
  for (unsigned l = 0; l < 32; ++l) r[l] = v[l] + v[l ^ d];
  return r;
}

// An aligned 8-byte load from host memory (the emulated ld.shared.u64).
struct HostLd {
  uint64_t operator()(uintptr_t a) const {
    EXPECT_EQ(a & 7u, 0u) << "unaligned word load";
    uint64_t v;
    memcpy(&v, reinterpret_cast<const void*>(a), 8);
    return v;
  }
};

// Secret word k as lane k of the device loads it (lanes 24..31 load word 0 and are never asked).
struct HostWord {
  uint64_t operator()(int k) const {
    EXPECT_TRUE(k >= 0 && k < x::kSecretWords) << "secret word " << k;
    return x::secret_word_cx(k);
  }
};

// xxh3_64_cta<kThreads>, thread by thread. For len > 240, the hash of every one of the 32 lanes of a warp is checked
// to be the same (all warps run the same sequential part on the same scratch, so one warp stands for all).
// scratch starts filled with garbage, so that a read of a slot that the round did not write shows.
template <int kThreads, bool kAligned>
uint64_t emulate_long(const uint8_t* buf, uint32_t len) {
  constexpr int kWarps = x::cta_warps<kThreads>(), kPerWarp = x::cta_groups_per_warp<kThreads>();
  constexpr uint32_t kRound = (uint32_t)x::cta_round_groups<kThreads>();
  constexpr uint32_t kHalf = 8u * (uint32_t)x::cta_half_slots<kThreads>();
  std::vector<uint64_t> scratch(x::cta_scratch_words<kThreads>());
  for (size_t w = 0; w < scratch.size(); ++w) scratch[w] = 0x5A5A5A5A5A5A5A5Aull * (w + 1);
  const uintptr_t base = reinterpret_cast<uintptr_t>(buf);
  EXPECT_EQ((base & 7u) == 0, kAligned);
  const x::CtaReader<HostLd, uintptr_t, kAligned> rd{HostLd{}, base, (unsigned)(base & 7u)};
  const x::CtaPlan plan = x::cta_plan(len);
  std::array<x::CtaLaneKeys, 32> keys;
  Lanes last, acc;
  for (unsigned l = 0; l < 32; ++l) {
    keys[l] = x::cta_lane_keys(HostWord{}, l);
    last[l] = x::cta_lane_last(rd, len, l, keys[l]);
    acc[l] = x::acc_init(l & 7u);
  }
  uint32_t parity = 0;
  for (uint32_t first = 0; first < plan.groups; first += kRound, parity ^= 1u) {
    uint64_t* half = scratch.data() + parity * kHalf;
    for (int warp = 0; warp < kWarps; ++warp) {
      for (int k = 0; k < kPerWarp; ++k) {
        const uint32_t slot = (uint32_t)(warp + kWarps * k);
        if (first + slot >= plan.groups) continue;
        Lanes p;
        for (unsigned l = 0; l < 32; ++l) p[l] = x::cta_lane_partial(rd, plan, first + slot, l, keys[l]);
        p = add_xor(add_xor(p, 8), 16);
        for (unsigned l = 0; l < 8; ++l) half[8u * slot + l] = p[l];
      }
    }
    // __syncthreads()
    const uint32_t n = plan.groups - first < kRound ? plan.groups - first : kRound;
    for (uint32_t j0 = 0; j0 < n; j0 += 4) {
      for (unsigned l = 0; l < 32; ++l) {
        uint64_t s[4];
        for (uint32_t u = 0; u < 4; ++u) {
          const size_t at = 8u * (j0 + u) + (l & 7u);
          EXPECT_LT(at, (size_t)kHalf);
          s[u] = half[at];
        }
        for (uint32_t u = 0; u < 4; ++u)
          if (j0 + u < n) acc[l] = x::cta_chain(acc[l], s[u], first + j0 + u, plan, keys[l]);
      }
    }
  }
  Lanes xs, t;
  for (unsigned l = 0; l < 32; ++l) xs[l] = (acc[l] + last[l]) ^ keys[l].merge;
  for (unsigned l = 0; l < 32; ++l) t[l] = x::cta_merge_term(xs[l], xs[l ^ 1u], l);
  t = add_xor(add_xor(add_xor(t, 1), 2), 4);
  Lanes h;
  for (unsigned l = 0; l < 32; ++l) h[l] = x::cta_merge_finish(t[l], len);
  for (unsigned l = 1; l < 32; ++l) EXPECT_EQ(h[l], h[0]) << "lane " << l << " len " << len;
  return h[0];
}

template <int kThreads>
uint64_t emulate_cta(const uint8_t* buf, uint32_t len) {
  if (len <= 240) return x::xxh3_64(buf, len);
  if ((reinterpret_cast<uintptr_t>(buf) & 7u) == 0) return emulate_long<kThreads, true>(buf, len);
  return emulate_long<kThreads, false>(buf, len);
}

// A buffer whose first byte sits at `offset` past an 8-byte boundary, followed by 8 spare bytes so that an aligned
// word load that holds the last byte stays inside the allocation (as it does in shared memory).
struct Placed {
  std::vector<uint64_t> store;
  uint8_t* p;
  Placed(const std::vector<uint8_t>& data, size_t len, unsigned offset) : store(len / 8 + 3) {
    p = reinterpret_cast<uint8_t*>(store.data()) + offset;
    memcpy(p, data.data(), len);
  }
};

TEST(CudaXxh3Cta, SecretWordsAreTheSecretBytes) {
  for (int k = 0; k < x::kSecretWords; ++k)
    EXPECT_EQ(x::secret_word_cx(k), splitzip::layout::load_u64(x::kSecretHost + 8 * k)) << "word " << k;
}

TEST(CudaXxh3Cta, PlanMatchesTheSpecification) {
  // blocks = (len - 1) / 1024, tail = ((len - 1) - 1024 blocks) / 64: a length of 1024 k + 1 ends on a full block.
  const x::CtaPlan a = x::cta_plan(1025);
  EXPECT_EQ(a.blocks, 1u);
  EXPECT_EQ(a.tail_stripes, 0u);
  EXPECT_EQ(a.groups, 1u);
  const x::CtaPlan b = x::cta_plan(1024);
  EXPECT_EQ(b.blocks, 0u);
  EXPECT_EQ(b.tail_stripes, 15u);
  EXPECT_EQ(b.groups, 1u);
  const x::CtaPlan c = x::cta_plan(8192);
  EXPECT_EQ(c.blocks, 7u);
  EXPECT_EQ(c.tail_stripes, 15u);
  EXPECT_EQ(c.groups, 8u);
  EXPECT_EQ(x::cta_scratch_words<256>(), 256);
  EXPECT_EQ(x::cta_round_groups<256>(), 16);
}

TEST(CudaXxh3Cta, EveryLengthUpTo4096EveryOffset) {
  const std::vector<uint8_t> data = random_bytes(4096, 11);
  for (unsigned offset = 0; offset < 8; ++offset) {
    for (uint32_t len = 0; len <= 4096; ++len) {
      const Placed b(data, len, offset);
      ASSERT_EQ(emulate_cta<256>(b.p, len), (uint64_t)XXH3_64bits(b.p, len)) << "len " << len << " offset " << offset;
    }
  }
}

TEST(CudaXxh3Cta, RoundBoundariesAndRandomLongLengths) {
  const std::vector<uint8_t> data = random_bytes(300000, 12);
  std::vector<uint32_t> lens;
  // Around the round size (16 groups of 1 KiB at 256 threads) and its multiples, and the largest chunk (256 KiB).
  for (uint32_t r : {1u, 2u, 3u, 16u, 17u, 32u, 33u, 256u})
    for (int d : {-65, -64, -63, -1, 0, 1, 2, 63, 64, 65}) lens.push_back((uint32_t)((int)(1024 * r) + d));
  uint64_t s = 77;
  for (int k = 0; k < 300; ++k) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    lens.push_back(241 + (uint32_t)((s >> 20) % (300000 - 241)));
  }
  for (size_t k = 0; k < lens.size(); ++k) {
    const uint32_t len = lens[k];
    const unsigned offset = (unsigned)(k % 8);
    const Placed b(data, len, offset);
    const uint64_t want = XXH3_64bits(b.p, len);
    ASSERT_EQ(emulate_cta<256>(b.p, len), want) << "len " << len << " offset " << offset;
    // Other CTA sizes: a round of 16 groups over 1, 3 (6 each) or 32 warps.
    if (k % 4 == 0) {
      ASSERT_EQ(emulate_cta<32>(b.p, len), want) << "32 threads, len " << len;
      ASSERT_EQ(emulate_cta<96>(b.p, len), want) << "96 threads, len " << len;
      ASSERT_EQ(emulate_cta<1024>(b.p, len), want) << "1024 threads, len " << len;
    }
  }
}

}  // namespace
