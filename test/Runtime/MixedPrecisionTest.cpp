//===- MixedPrecisionTest.cpp - bf16/f16 buffers on the CPU backend -------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The host's 16-bit formats (FloatConvert.h) against their definitions
// (round to nearest even, worked out bit by bit here), and the CPU
// backend's 16-bit instructions against the f32 kernel run by hand on the
// rounded inputs and rounded once at the end: the oracle for what a GPU's
// bf16 kernel with f32 accumulation computes.
//
//===----------------------------------------------------------------------===//

#include "PlanTestSupport.h"

#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/PlanIO.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

TEST(FloatConvert, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(-2.0f), 0xc000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even 1.
  EXPECT_EQ(floatToBf16(fromBits(0x3f808000)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(floatToBf16(fromBits(0x3f818000)), 0x3f82);
  // Just above halfway rounds up, just below rounds down.
  EXPECT_EQ(floatToBf16(fromBits(0x3f808001)), 0x3f81);
  EXPECT_EQ(floatToBf16(fromBits(0x3f807fff)), 0x3f80);
  // Overflow of the mantissa carries into the exponent; the largest
  // finite floats round to infinity.
  EXPECT_EQ(floatToBf16(fromBits(0x3fffffff)), 0x4000);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::nanf("")))));
  EXPECT_EQ(bf16ToFloat(0x3f81), 1.0f + 1.0f / 128);
}

TEST(FloatConvert, F16RoundTripsItsValues) {
  EXPECT_EQ(floatToF16(1.0f), 0x3c00);
  EXPECT_EQ(floatToF16(65504.0f), 0x7bff); // the largest half
  EXPECT_EQ(f16ToFloat(0x3555), 0.333251953125f);
  // Ties to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(floatToF16(1.0f + 1.0f / 2048), 0x3c00);
  for (uint16_t h : {0x0001, 0x03ff, 0x3c01, 0x7bff, 0xfbff})
    EXPECT_EQ(floatToF16(f16ToFloat(h)), h);
}

/// makeTinyPlan (f32) plus a program "mixed": a = cast(wte) to `low`,
/// c = a @ head16 in `low`, back = cast(c) to f32.
struct MixedPlan {
  Plan plan;
  uint32_t wte, head, head16, a, c, copied, back;
};

MixedPlan makeMixedPlan(DType low) {
  MixedPlan m;
  TinyShape s;
  m.plan = makeTinyPlan(DType::F32, s);
  Plan &plan = m.plan;
  m.wte = uint32_t(plan.findBuffer("wte.weight"));
  m.head = uint32_t(plan.findBuffer("head.weight"));
  m.head16 = addBuffer(plan, "head16", low, {s.hidden, s.vocab},
                       BufferRole::Temporary);
  m.a = addBuffer(plan, "a", low, {s.vocab, s.hidden}, BufferRole::Temporary);
  m.c = addBuffer(plan, "c", low, {s.vocab, s.vocab}, BufferRole::Temporary);
  m.copied = addBuffer(plan, "copied", low, {s.vocab * s.vocab},
                       BufferRole::Temporary);
  m.back = addBuffer(plan, "back", DType::F32, {s.vocab, s.vocab},
                     BufferRole::Temporary);
  Program mixed;
  mixed.name = "mixed";
  mixed.instructions = {
      makeInst(Opcode::Cast, {m.wte}, {m.a}, "cast.wte"),
      makeInst(Opcode::Cast, {m.head}, {m.head16}, "cast.head"),
      makeInst(Opcode::Matmul, {m.a, m.head16}, {m.c}, "mm",
               {1, s.vocab, s.vocab, s.hidden, 0, 0, 0, 0}),
      makeInst(Opcode::Cast, {m.c}, {m.back}, "cast.back"),
      // A reshape's copy moves the 16-bit bytes as they are.
      makeInst(Opcode::Copy, {m.c}, {m.copied}, "reshape"),
  };
  plan.programs.push_back(mixed);
  return m;
}

class MixedPrecision : public ::testing::TestWithParam<DType> {};

TEST_P(MixedPrecision, MatmulIsTheF32KernelOnRoundedInputsRoundedOnce) {
  const DType low = GetParam();
  MixedPlan m = makeMixedPlan(low);
  validatePlan(m.plan);
  Executor ex(m.plan, 11);
  ex.runProgram("mixed");

  TinyShape s;
  auto round = [&](double v) {
    return low == DType::BF16 ? bf16ToFloat(floatToBf16(float(v)))
                              : f16ToFloat(floatToF16(float(v)));
  };
  std::vector<double> wte = ex.read("wte.weight"), head = ex.read("head.weight");
  std::vector<float> a(wte.size()), b(head.size()), c(size_t(s.vocab * s.vocab));
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = round(wte[i]);
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = round(head[i]);
  MatmulShape shape;
  shape.m = s.vocab;
  shape.n = s.vocab;
  shape.k = s.hidden;
  matmulForward(a.data(), b.data(), c.data(), shape, false);
  std::vector<double> got16 = ex.read("c"), got = ex.read("back");
  EXPECT_EQ(ex.read("copied"), got16);
  ASSERT_EQ(got.size(), c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(got16[i], double(round(c[i]))) << i;
    EXPECT_EQ(got[i], double(round(c[i]))) << i; // widening is exact
  }
  // And the casts really rounded: some weight differs from its 16-bit copy.
  std::vector<double> a16 = ex.read("a");
  size_t differs = 0;
  for (size_t i = 0; i < wte.size(); ++i) {
    EXPECT_EQ(a16[i], double(round(wte[i])));
    differs += a16[i] != wte[i];
  }
  EXPECT_GT(differs, wte.size() / 2);
}

INSTANTIATE_TEST_SUITE_P(Formats, MixedPrecision,
                         ::testing::Values(DType::BF16, DType::F16),
                         [](const auto &info) {
                           return std::string(dtypeName(info.param));
                         });

TEST(MixedPrecisionPlan, ACastThatChangesTheElementCountIsRefused) {
  MixedPlan m = makeMixedPlan(DType::BF16);
  m.plan.programs.back().instructions[3].outputs = {m.a};
  try {
    validatePlan(m.plan);
    FAIL() << "validated";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("a cast keeps the element count"),
              std::string::npos)
        << e.what();
  }
}

TEST(MixedPrecisionPlan, OtherInstructionsStillShareOneDType) {
  MixedPlan m = makeMixedPlan(DType::BF16);
  // The matmul's right operand f32 while its left is bf16.
  m.plan.programs.back().instructions[2].inputs[1] = m.head;
  try {
    validatePlan(m.plan);
    FAIL() << "validated";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("share one dtype"), std::string::npos)
        << e.what();
  }
}

} // namespace
