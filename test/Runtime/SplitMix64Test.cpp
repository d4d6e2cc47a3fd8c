//===- SplitMix64Test.cpp - Pins the runtime's counter-based RNG ----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The bits of splitmix64 and of the dropout masks derived from it, against
// values computed outside this code base: a changed constant would silently
// change every committed loss, and the CPU and CUDA masks must stay equal.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/SplitMix64.h"

#include <gtest/gtest.h>

#include <string>

using namespace dsc::rt;

namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

// Usable in constant expressions, as the CUDA kernels' host side needs.
static_assert(splitmix64(0) == 0xE220A8397B1DCDAFull);
static_assert(dropoutThreshold(0.5f) == (1u << 23));

TEST(SplitMix64, MatchesTheReferenceGenerator) {
  // Vigna's splitmix64.c seeded with 1234567: the generator adds the golden
  // gamma and then finalizes, so output k is splitmix64(seed + k * gamma).
  const uint64_t expected[] = {6457827717110365317ull, 3203168211198807973ull,
                               9817491932198370423ull, 4593380528125082431ull,
                               16408922859458223821ull};
  uint64_t state = 1234567;
  for (uint64_t want : expected) {
    EXPECT_EQ(splitmix64(state), want);
    state += kGamma;
  }
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(splitmix64(~uint64_t(0)), 0xE4D971771B652C20ull);
}

TEST(SplitMix64, DropoutThresholdRoundsTheTop24Bits) {
  EXPECT_EQ(dropoutThreshold(0.0f), 0u);
  EXPECT_EQ(dropoutThreshold(-1.0f), 0u);
  EXPECT_EQ(dropoutThreshold(0.1f), 1677722u); // 0.1f * 2^24 = 1677721.6
  EXPECT_EQ(dropoutThreshold(0.5f), 8388608u);
  EXPECT_EQ(dropoutThreshold(1.0f), 1u << 24);
  EXPECT_EQ(dropoutThreshold(2.0f), 1u << 24);
}

// Element i is kept iff splitmix64(splitmix64(99) + i) >> 40 >= threshold,
// computed in Python:
//   key = sm(99); [sm(key + i) >> 40 >= thr(p) for i in range(32)]
TEST(SplitMix64, DropoutMaskOfSeed99) {
  const std::string half = "10110110001001101001011011010011";
  const std::string tenth = "11110111101111111111011111011111";
  for (size_t i = 0; i < half.size(); ++i) {
    EXPECT_EQ(dropoutKeep(99, i, 0.5f), half[i] == '1') << i;
    EXPECT_EQ(dropoutKeep(99, i, 0.1f), tenth[i] == '1') << i;
    EXPECT_EQ(dropoutKeepBit(dropoutKey(99), i, dropoutThreshold(0.5f)),
              half[i] == '1')
        << i;
  }
}

TEST(SplitMix64, DropoutStreamSeedMixesStepAndMicroBatch) {
  // sm(inst ^ sm(run ^ sm(step * 1024 + microBatch))), computed in Python.
  EXPECT_EQ(dropoutStreamSeed(1234, 3, 1, 7), 0xEB42DCDE0B76A4CAull);
  EXPECT_EQ(dropoutStreamSeed(0, 1, 0, 0), 0xACD9F793AEF66E11ull);
  EXPECT_NE(dropoutStreamSeed(1234, 3, 1, 7), dropoutStreamSeed(1234, 3, 2, 7));
  EXPECT_NE(dropoutStreamSeed(1234, 3, 1, 7), dropoutStreamSeed(1234, 4, 1, 7));
}

} // namespace
