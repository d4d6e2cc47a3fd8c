//===- CpuAdamTest.cpp - the CPU Adam step's paths ------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// cpuAdamW (CpuAdam.h) against the fp64 AdamW step (adamwStep<double>, the
// torch.optim.AdamW formulas) over several steps, its AVX-512, AVX2 and
// scalar paths against each other bit for bit (those this CPU runs), its
// bf16 copy against floatToBf16 of the result, and lengths that leave
// remainders after whole vectors and blocks.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuAdam.h"
#include "dsc/Runtime/FloatConvert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace dsc::rt;

namespace {

struct State {
  std::vector<float> p, g, m, v;
  std::vector<uint16_t> copy;
};

State randomState(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  State s{std::vector<float>(size_t(n)), std::vector<float>(size_t(n)),
          std::vector<float>(size_t(n)), std::vector<float>(size_t(n)),
          std::vector<uint16_t>(size_t(n))};
  for (int64_t i = 0; i < n; ++i) {
    s.p[size_t(i)] = normal(rng);
    s.g[size_t(i)] = 1e-2f * normal(rng);
    s.m[size_t(i)] = 1e-3f * normal(rng);
    s.v[size_t(i)] = 1e-5f * std::abs(normal(rng));
  }
  return s;
}

constexpr CpuIsa kIsas[] = {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512};

TEST(CpuAdam, PathsAgreeBitForBitAndWithFp64) {
  AdamWConfig cfg;
  cfg.lr = 3e-3;
  cfg.weightDecay = 0.1;
  // Whole blocks, a vector remainder and a scalar tail.
  for (int64_t n : {int64_t(1), int64_t(15), int64_t(16390), int64_t(40001)}) {
    State reference = randomState(n, 7);
    std::vector<double> p(reference.p.begin(), reference.p.end()),
        g(reference.g.begin(), reference.g.end()),
        m(reference.m.begin(), reference.m.end()),
        v(reference.v.begin(), reference.v.end());
    std::vector<State> runs;
    for (CpuIsa isa : kIsas) {
      if (!cpuSupports(isa))
        continue;
      State s = reference;
      for (int64_t step = 1; step <= 5; ++step)
        cpuAdamW(s.p.data(), s.g.data(), s.m.data(), s.v.data(), n, cfg, step,
                 /*decay=*/true, s.copy.data(), isa);
      runs.push_back(std::move(s));
    }
    for (int64_t step = 1; step <= 5; ++step)
      adamwStep(p.data(), g.data(), m.data(), v.data(), n, cfg, step, true);
    ASSERT_FALSE(runs.empty());
    const State &first = runs.front();
    for (const State &s : runs) {
      EXPECT_EQ(std::memcmp(s.p.data(), first.p.data(), size_t(n) * 4), 0);
      EXPECT_EQ(std::memcmp(s.m.data(), first.m.data(), size_t(n) * 4), 0);
      EXPECT_EQ(std::memcmp(s.v.data(), first.v.data(), size_t(n) * 4), 0);
      EXPECT_EQ(std::memcmp(s.copy.data(), first.copy.data(), size_t(n) * 2),
                0);
    }
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = size_t(i);
      // Relative to the value, or to the step's size (about lr) where the
      // value is near 0 and fp32 cannot do better than its rounding of it.
      worst = std::max(worst, std::abs(first.p[k] - p[k]) /
                                  std::max(std::abs(p[k]), cfg.lr));
      EXPECT_EQ(first.copy[k], floatToBf16(first.p[k])) << "element " << i;
    }
    EXPECT_LT(worst, 1e-6) << "n = " << n;
  }
}

TEST(CpuAdam, WithoutDecayOrCopyAndNaNStaysNaN) {
  AdamWConfig cfg;
  cfg.weightDecay = 0.5;
  for (CpuIsa isa : kIsas) {
    if (!cpuSupports(isa))
      continue;
    State s = randomState(32, 3);
    State plain = s;
    s.g[5] = std::numeric_limits<float>::quiet_NaN();
    cpuAdamW(s.p.data(), s.g.data(), s.m.data(), s.v.data(), 32, cfg, 1,
             /*decay=*/false, s.copy.data(), isa);
    EXPECT_TRUE(std::isnan(s.p[5])) << cpuIsaName(isa);
    // A NaN parameter's bf16 copy is a (quiet) NaN too.
    EXPECT_TRUE(std::isnan(bf16ToFloat(s.copy[5]))) << cpuIsaName(isa);
    // Without decay the other elements match fp64 AdamW with wd = 0.
    std::vector<double> p(plain.p.begin(), plain.p.end()),
        g(plain.g.begin(), plain.g.end()), m(plain.m.begin(), plain.m.end()),
        v(plain.v.begin(), plain.v.end());
    adamwStep(p.data(), g.data(), m.data(), v.data(), 32, cfg, 1, false);
    cpuAdamW(plain.p.data(), plain.g.data(), plain.m.data(), plain.v.data(), 32,
             cfg, 1, false, nullptr, isa);
    for (size_t i = 0; i < 32; ++i)
      EXPECT_NEAR(plain.p[i], p[i], 1e-6 * std::abs(p[i]) + 1e-12)
          << cpuIsaName(isa) << " element " << i;
  }
}

TEST(CpuAdam, IsaNamesRoundTripAndDetectionIsSupported) {
  for (CpuIsa isa : kIsas)
    EXPECT_EQ(parseCpuIsa(cpuIsaName(isa)), isa);
  EXPECT_FALSE(parseCpuIsa("sse9").has_value());
  EXPECT_TRUE(cpuSupports(detectCpuIsa()));
}

} // namespace
