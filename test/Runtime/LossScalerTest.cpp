//===- LossScalerTest.cpp - DeepSpeed-style dynamic loss scaling ----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The loss scaler's transitions against DeepSpeed's DynamicLossScaler
// (defaults 2^16, window 1000, hysteresis 2, min 1). Host only: runs on
// every machine, GPU or not.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/LossScaler.h"

#include <gtest/gtest.h>

#include <limits>

using namespace dsc::rt;

namespace {
TEST(LossScaler, DeepSpeedDefaults) {
  DynamicLossScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.hysteresisLeft(), 2);
  EXPECT_EQ(s.skippedSteps(), 0);
}

TEST(LossScaler, GrowsAfterAWindowOfCleanSteps) {
  DynamicLossScaler s;
  // DeepSpeed grows when (iter - last_overflow) % window == 0 with
  // last_overflow = -1 at the start: on the 1000th clean step.
  for (int i = 0; i < 999; ++i)
    EXPECT_EQ(s.update(false), LossScaleEvent::Ok) << i;
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.update(false), LossScaleEvent::Grew);
  EXPECT_EQ(s.scale(), 131072.0);
  for (int i = 0; i < 999; ++i)
    s.update(false);
  EXPECT_EQ(s.update(false), LossScaleEvent::Grew);
  EXPECT_EQ(s.scale(), 262144.0);
}

TEST(LossScaler, HysteresisAbsorbsOneOverflow) {
  DynamicLossScaler s;
  EXPECT_EQ(s.update(true), LossScaleEvent::SkippedKept);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.hysteresisLeft(), 1);
  EXPECT_EQ(s.update(true), LossScaleEvent::SkippedShrunk);
  EXPECT_EQ(s.scale(), 32768.0);
  // Without consecutive_hysteresis the budget stays spent: the next
  // overflow shrinks at once.
  EXPECT_EQ(s.update(false), LossScaleEvent::Ok);
  EXPECT_EQ(s.update(true), LossScaleEvent::SkippedShrunk);
  EXPECT_EQ(s.scale(), 16384.0);
  EXPECT_EQ(s.skippedSteps(), 3);
}

TEST(LossScaler, WindowRestartsAtTheLastOverflow) {
  DynamicLossScaler s;
  for (int i = 0; i < 500; ++i)
    s.update(false);
  s.update(true); // iteration 500 overflows (hysteresis absorbs it)
  EXPECT_EQ(s.scale(), 65536.0);
  for (int i = 0; i < 999; ++i)
    EXPECT_NE(s.update(false), LossScaleEvent::Grew) << i;
  EXPECT_EQ(s.update(false), LossScaleEvent::Grew);
  EXPECT_EQ(s.scale(), 131072.0);
  // Growth refills the hysteresis budget.
  EXPECT_EQ(s.hysteresisLeft(), 2);
}

TEST(LossScaler, NeverBelowMinimum) {
  LossScalerConfig cfg;
  cfg.initialScale = 4.0;
  cfg.hysteresis = 1;
  DynamicLossScaler s(cfg);
  EXPECT_EQ(s.update(true), LossScaleEvent::SkippedShrunk);
  EXPECT_EQ(s.update(true), LossScaleEvent::SkippedShrunk);
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_EQ(s.update(true), LossScaleEvent::SkippedAtMin);
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_EQ(s.inverseScale(), 1.0);
}

TEST(LossScaler, ConsecutiveHysteresisRefillsOnCleanSteps) {
  LossScalerConfig cfg;
  cfg.consecutiveHysteresis = true;
  DynamicLossScaler s(cfg);
  EXPECT_EQ(s.update(true), LossScaleEvent::SkippedKept);
  EXPECT_EQ(s.update(false), LossScaleEvent::Ok);
  EXPECT_EQ(s.hysteresisLeft(), 2);
  EXPECT_EQ(s.update(true), LossScaleEvent::SkippedKept);
  EXPECT_EQ(s.scale(), 65536.0);
}
TEST(LossScaler, StateRoundTripsAndImpossibleStatesAreRefused) {
  DynamicLossScaler a;
  a.update(true);
  a.update(true); // shrunk to 2^15
  a.update(false);
  DynamicLossScaler b;
  ASSERT_TRUE(b.restore(a.state()));
  EXPECT_EQ(b.scale(), 32768.0);
  EXPECT_EQ(b.skippedSteps(), 2);
  EXPECT_EQ(b.iteration(), 3);
  // From here on both decide alike.
  for (bool overflow : {false, true, true, false})
    EXPECT_EQ(a.update(overflow), b.update(overflow));
  EXPECT_EQ(a.scale(), b.scale());

  LossScalerState bad = a.state();
  bad.scale = 0.5; // below the minimum of 1
  EXPECT_FALSE(b.restore(bad));
  bad = a.state();
  bad.hysteresisLeft = 3; // DeepSpeed's hysteresis is 2
  EXPECT_FALSE(b.restore(bad));
  bad = a.state();
  bad.skippedSteps = bad.iteration + 1;
  EXPECT_FALSE(b.restore(bad));
  bad = a.state();
  bad.scale = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(b.restore(bad));
  EXPECT_EQ(b.scale(), a.scale()); // a refused state changes nothing
}

} // namespace
