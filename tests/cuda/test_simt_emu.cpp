// test_simt_emu.cpp — the SIMT emulator itself (tests/cuda/emu): what it must catch in kernel code, and that a launch
// it abandons leaves nothing behind for the next one.
#include <string>

#include <gtest/gtest.h>

#include "emu/simt_emu.h"

namespace {

// Lanes of one warp meet at collectives of different lines, `depth` calls deep (frames with arrays of their own).
__attribute__((noinline)) void diverge_deep(int depth) {
  volatile char frame[192];
  frame[depth % 192] = (char)depth;
  if (depth > 0) {
    diverge_deep(depth - 1);
    return;
  }
  uint64_t out[32];
  if (simt_emu::ctx().tid % 2) {
    simt_emu::warp_exchange(frame[0], __LINE__, out);
  } else {
    simt_emu::warp_exchange(frame[0], __LINE__, out);
  }
}

TEST(SimtEmu, DivergentCollectiveFailsTheLaunch) {
  const char* why = nullptr;
  EXPECT_FALSE(simt_emu::launch(1, 64, 0, [] { diverge_deep(0); }, 1, &why));
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::string(why).find("divergent warp collective"), std::string::npos) << why;
}

// The failed launch's fibers stop inside their deepest frames; their stacks serve the next launches, whose frames
// cover the same addresses. Under AddressSanitizer, the abandoned frames' redzones would read as a stack overflow
// there unless the emulator clears them.
TEST(SimtEmu, StacksOfAnAbandonedLaunchServeTheNextOnes) {
  const char* why = nullptr;
  ASSERT_FALSE(simt_emu::launch(2, 64, 0, [] { diverge_deep(60); }, 2, &why));
  for (uint64_t seed = 3; seed < 6; ++seed) {
    uint64_t sum = 0;
    ASSERT_TRUE(simt_emu::launch(2, 64, 0, [&] {
      volatile char big[12000];
      for (size_t i = 0; i < sizeof big; ++i) big[i] = (char)i;
      uint64_t out[32];
      simt_emu::warp_exchange((uint8_t)big[simt_emu::ctx().tid * 37], __LINE__, out);
      if (simt_emu::ctx().tid == 0) sum = out[31];
    }, seed, &why)) << why;
    EXPECT_EQ(sum, (uint8_t)(31 * 37));
  }
}

}  // namespace
