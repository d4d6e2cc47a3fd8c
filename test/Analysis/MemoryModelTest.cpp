//===- MemoryModelTest.cpp - ZeRO and Korthikanti memory formulas ---------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// Holds the memory model to the papers: the ZeRO formulas of Rajbhandari et
// al. (and their Figure 1 numbers) and Korthikanti et al.'s activation forms.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/MemoryModel.h"

#include "gtest/gtest.h"

using namespace mlir::dsc::analysis;

namespace {

const double kPsis[] = {7.5e9, 1.3e9 + 7, 175e9, 1e12};
const int64_t kNds[] = {1, 2, 8, 64, 1000, 3072};

TEST(ZeroModelStates, StageZeroIs2Psi2Psi12Psi) {
  for (double psi : kPsis)
    for (int64_t nd : kNds) {
      ModelStateBytes m = zeroModelStateBytes(psi, 0, nd);
      EXPECT_EQ(m.params, 2 * psi);
      EXPECT_EQ(m.grads, 2 * psi);
      EXPECT_EQ(m.optimizer, 12 * psi);
      EXPECT_DOUBLE_EQ(m.total(), 16 * psi);
    }
}

TEST(ZeroModelStates, StageOneIsPos) {
  for (double psi : kPsis)
    for (int64_t nd : kNds) {
      ModelStateBytes m = zeroModelStateBytes(psi, 1, nd);
      EXPECT_EQ(m.optimizer, 12 * psi / nd);
      EXPECT_DOUBLE_EQ(m.total(), 4 * psi + 12 * psi / nd);
    }
}

TEST(ZeroModelStates, StageTwoIsPosG) {
  for (double psi : kPsis)
    for (int64_t nd : kNds) {
      ModelStateBytes m = zeroModelStateBytes(psi, 2, nd);
      EXPECT_EQ(m.params, 2 * psi);
      EXPECT_DOUBLE_EQ(m.total(), 2 * psi + 14 * psi / nd);
    }
}

TEST(ZeroModelStates, StageThreeIsPosGP) {
  for (double psi : kPsis)
    for (int64_t nd : kNds)
      EXPECT_DOUBLE_EQ(zeroModelStateBytes(psi, 3, nd).total(), 16 * psi / nd);
}

// ZeRO paper, Figure 1: Psi = 7.5B, Nd = 64 gives 120 GB, 31.4 GB, 16.6 GB
// and 1.9 GB per device.
TEST(ZeroModelStates, PaperFigureOneNumbers) {
  double psi = 7.5e9;
  EXPECT_NEAR(zeroModelStateBytes(psi, 0, 64).total() / 1e9, 120.0, 0.05);
  EXPECT_NEAR(zeroModelStateBytes(psi, 1, 64).total() / 1e9, 31.4, 0.05);
  EXPECT_NEAR(zeroModelStateBytes(psi, 2, 64).total() / 1e9, 16.6, 0.05);
  EXPECT_NEAR(zeroModelStateBytes(psi, 3, 64).total() / 1e9, 1.9, 0.05);
}

TEST(ZeroModelStates, HigherStagesNeverNeedMore) {
  for (double psi : kPsis)
    for (int64_t nd : kNds)
      for (int stage = 1; stage <= 3; ++stage)
        EXPECT_LE(zeroModelStateBytes(psi, stage, nd).total(),
                  zeroModelStateBytes(psi, stage - 1, nd).total());
}

struct Shape {
  int64_t s, b, h, a;
};
const Shape kShapes[] = {
    {2048, 1, 12288, 96},  // GPT-3 175B
    {2048, 4, 6144, 64},   // Korthikanti's 22B
    {2048, 1, 25600, 160}, // 1T
    {1024, 3, 768, 12},    // GPT-2 small
};

ModelShape modelOf(const Shape &sh) {
  return ModelShape::gpt("t", 1, sh.h, sh.a, sh.s, 51200);
}

TEST(Activations, NoParallelismIsSbh34Plus5asOverH) {
  for (const Shape &sh : kShapes) {
    double s = sh.s, b = sh.b, h = sh.h, a = sh.a;
    EXPECT_DOUBLE_EQ(
        activationBytesPerLayer(modelOf(sh), sh.b, 1, false, false),
        s * b * h * (34 + 5 * a * s / h));
  }
}

TEST(Activations, TensorParallelForm) {
  for (const Shape &sh : kShapes)
    for (int64_t t : {2, 4, 8}) {
      double s = sh.s, b = sh.b, h = sh.h, a = sh.a, td = t;
      EXPECT_DOUBLE_EQ(
          activationBytesPerLayer(modelOf(sh), sh.b, t, false, false),
          s * b * h * (10 + 24 / td + 5 * a * s / (h * td)));
    }
}

TEST(Activations, TensorAndSequenceParallelForm) {
  for (const Shape &sh : kShapes)
    for (int64_t t : {2, 4, 8}) {
      double s = sh.s, b = sh.b, h = sh.h, a = sh.a, td = t;
      EXPECT_DOUBLE_EQ(
          activationBytesPerLayer(modelOf(sh), sh.b, t, true, false),
          s * b * h / td * (34 + 5 * a * s / h));
    }
}

TEST(Activations, FullRecomputeKeepsOnlyTheLayerInput) {
  for (const Shape &sh : kShapes) {
    double sbh = double(sh.s) * sh.b * sh.h;
    EXPECT_DOUBLE_EQ(activationBytesPerLayer(modelOf(sh), sh.b, 1, false, true),
                     2 * sbh);
    EXPECT_DOUBLE_EQ(activationBytesPerLayer(modelOf(sh), sh.b, 8, false, true),
                     2 * sbh);
    EXPECT_DOUBLE_EQ(activationBytesPerLayer(modelOf(sh), sh.b, 8, true, true),
                     2 * sbh / 8);
  }
}

// GPT-3 175B, one sequence: 34 + 5*96*2048/12288 = 114 bytes per s*b*h
// element, 2.87 GB per layer; 8-way tp: 23 per element (10 + 3 + 10).
TEST(Activations, Gpt3Numbers) {
  ModelShape m = ModelShape::gpt3_175B();
  double sbh = 2048.0 * 12288.0;
  EXPECT_EQ(activationBytesPerLayer(m, 1, 1, false, false), sbh * 114);
  EXPECT_EQ(activationBytesPerLayer(m, 1, 8, false, false), sbh * 23);
  EXPECT_EQ(activationBytesPerLayer(m, 1, 8, true, false), sbh * 114 / 8);
}

TEST(Activations, ParallelFormsAgreeWithoutParallelism) {
  for (const Shape &sh : kShapes) {
    double none = activationBytesPerLayer(modelOf(sh), sh.b, 1, false, false);
    EXPECT_DOUBLE_EQ(activationBytesPerLayer(modelOf(sh), sh.b, 1, true, false),
                     none);
    // Sequence parallelism divides everything by t; tp alone cannot.
    for (int64_t t : {2, 8}) {
      double tpOnly =
          activationBytesPerLayer(modelOf(sh), sh.b, t, false, false);
      double tpSp = activationBytesPerLayer(modelOf(sh), sh.b, t, true, false);
      EXPECT_DOUBLE_EQ(tpSp, none / t);
      EXPECT_GT(tpOnly, tpSp);
      EXPECT_LT(tpOnly, none);
    }
  }
}

} // namespace

// fp32 plans as dsc compiles them: AdamW without a master copy, 4 + 4 + 8
// bytes per parameter, each part divided over dp from the ZeRO stage that
// shards it.
TEST(Fp32ModelStates, FourFourEightDividedByStage) {
  const double psi = 1e6;
  for (int64_t nd : {1, 2, 8}) {
    const double n = double(nd);
    ModelStateBytes s0 = fp32ModelStateBytes(psi, 0, nd);
    EXPECT_DOUBLE_EQ(s0.total(), 16 * psi);
    ModelStateBytes s1 = fp32ModelStateBytes(psi, 1, nd);
    EXPECT_DOUBLE_EQ(s1.total(), 8 * psi + 8 * psi / n);
    ModelStateBytes s2 = fp32ModelStateBytes(psi, 2, nd);
    EXPECT_DOUBLE_EQ(s2.total(), 4 * psi + 12 * psi / n);
    ModelStateBytes s3 = fp32ModelStateBytes(psi, 3, nd);
    EXPECT_DOUBLE_EQ(s3.total(), 16 * psi / n);
  }
}

// What dsc's kernels keep per layer in fp32 (docs/recompute.md): no
// dropout masks, no s x s scores.
TEST(Fp32Activations, DscKernelsForms) {
  for (const Shape &sh : kShapes)
    for (int64_t t : {1, 2, 4, 8}) {
      const double sbh = double(sh.s) * sh.b * sh.h, td = double(t);
      EXPECT_DOUBLE_EQ(
          fp32ActivationBytesPerLayer(modelOf(sh), sh.b, t, false, false),
          sbh * (16 + 48 / td));
      EXPECT_DOUBLE_EQ(
          fp32ActivationBytesPerLayer(modelOf(sh), sh.b, t, true, false),
          64 * sbh / td);
      EXPECT_DOUBLE_EQ(
          fp32ActivationBytesPerLayer(modelOf(sh), sh.b, t, false, true),
          4 * sbh);
      EXPECT_DOUBLE_EQ(
          fp32ActivationBytesPerLayer(modelOf(sh), sh.b, t, true, true),
          4 * sbh / td);
    }
}
