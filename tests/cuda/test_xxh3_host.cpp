// test_xxh3_host.cpp — the host side of the device XXH3 (src/cuda/xxh3.cuh) against libxxhash, on the CPU.
// Runs in every build (no GPU needed): every length 0..4096 over random data, several seeds of data, and a few long
// buffers that cross many 1 KiB blocks. The warp forms are checked on the SIMT emulator (test_kernels_emu.cpp).
#include <gtest/gtest.h>

#include <stdint.h>
#include <string.h>

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

}  // namespace
