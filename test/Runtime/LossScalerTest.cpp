//===- LossScalerTest.cpp - DeepSpeed-style dynamic loss scaling ----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The loss scaler's transitions against DeepSpeed 0.19.8: hand-written
// cases under its defaults (2^16, window 1000, hysteresis 2, min 1), and
// every step of the goldens DeepSpeed's own FP16_Optimizer._update_scale
// and DynamicLossScaler.update_scale wrote (Inputs/loss-scale, made by
// scripts/ds-reference/loss-scale-goldens.py). Host only: runs on every
// machine, GPU or not.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/LossScaler.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

using namespace dsc::rt;

namespace {
TEST(LossScaler, DeepSpeedDefaults) {
  DynamicLossScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.hysteresisLeft(), 2);
  EXPECT_EQ(s.skippedSteps(), 0);
}

TEST(LossScaler, GrowsAfterAWindowOfCleanSteps) {
  for (LossScaleRule rule : {LossScaleRule::Fused, LossScaleRule::Dynamic}) {
    LossScalerConfig cfg;
    cfg.rule = rule;
    DynamicLossScaler s(cfg);
    // DeepSpeed 0.19.8 grows when stable = iter - last_overflow - 1 is
    // positive and a multiple of the window, with last_overflow = -1 at the
    // start: on the 1001st clean step, then every 1000th.
    for (int i = 0; i < 1000; ++i)
      EXPECT_EQ(s.update(false), LossScaleEvent::Ok) << i;
    EXPECT_EQ(s.scale(), 65536.0);
    EXPECT_EQ(s.update(false), LossScaleEvent::Grew);
    EXPECT_EQ(s.scale(), 131072.0);
    for (int i = 0; i < 999; ++i)
      EXPECT_EQ(s.update(false), LossScaleEvent::Ok) << i;
    EXPECT_EQ(s.update(false), LossScaleEvent::Grew);
    EXPECT_EQ(s.scale(), 262144.0);
  }
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
  for (int i = 0; i < 1000; ++i)
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

TEST(LossScaler, FusedHasNoHysteresisAndStaysAtTheMinimum) {
  LossScalerConfig cfg;
  cfg.rule = LossScaleRule::Fused;
  cfg.initialScale = 4.0;
  cfg.hysteresis = 3; // FP16_Optimizer never reads it
  cfg.consecutiveHysteresis = true;
  DynamicLossScaler s(cfg);
  EXPECT_EQ(s.update(true), LossScaleEvent::SkippedShrunk);
  EXPECT_EQ(s.update(true), LossScaleEvent::SkippedShrunk);
  EXPECT_EQ(s.scale(), 1.0);
  // FP16_Optimizer keeps max(scale / 2, min_loss_scale): no error.
  EXPECT_EQ(s.update(true), LossScaleEvent::SkippedKept);
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_EQ(s.skippedSteps(), 3);
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

  // The rule is not in the state: a ZeRO run's checkpoint resumes without
  // ZeRO (and an old checkpoint under either rule).
  LossScalerConfig fused;
  fused.rule = LossScaleRule::Fused;
  DynamicLossScaler c(fused);
  EXPECT_TRUE(c.restore(a.state()));
  EXPECT_EQ(c.scale(), a.scale());
}

//===----------------------------------------------------------------------===//
// DeepSpeed's own code's goldens
//===----------------------------------------------------------------------===//

/// Every case scripts/ds-reference/loss-scale-goldens.py writes: named
/// here, so a golden that goes missing fails rather than shrinks the test.
constexpr const char *kGoldenCases[] = {
    "clean-window5",
    "burst-window4-h2",
    "burst-window4-h3",
    "burst-window4-h2-consecutive",
    "burst-window4-h3-consecutive",
    "scattered-window3-h1",
    "scattered-window3-h2",
    "scattered-window3-h2-consecutive",
    "min-scale-h2",
    "min-scale-h1",
    "min-scale-recovers",
};

llvm::json::Value readGolden(const std::string &name) {
  auto buffer = llvm::MemoryBuffer::getFile(
      std::string(DSC_LOSS_SCALE_GOLDENS_DIR) + "/" + name + ".json");
  EXPECT_TRUE(bool(buffer)) << name;
  if (!buffer)
    return nullptr;
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  EXPECT_TRUE(bool(json)) << name << ": " << llvm::toString(json.takeError());
  return json ? std::move(*json) : llvm::json::Value(nullptr);
}

/// The ds_config "fp16" section as dsc reads it, DeepSpeed's defaults for
/// what it leaves out.
LossScalerConfig configOf(const llvm::json::Object &fp16, LossScaleRule rule) {
  LossScalerConfig cfg;
  cfg.rule = rule;
  cfg.initialScale =
      std::ldexp(1.0, int(fp16.getInteger("initial_scale_power").value_or(16)));
  cfg.scaleWindow = fp16.getInteger("loss_scale_window").value_or(1000);
  cfg.hysteresis = int(fp16.getInteger("hysteresis").value_or(2));
  cfg.minScale = fp16.getNumber("min_loss_scale").value_or(1.0);
  cfg.consecutiveHysteresis =
      fp16.getBoolean("consecutive_hysteresis").value_or(false);
  return cfg;
}

/// Runs the case's overflow sequence through dsc's scaler under `rule` and
/// compares every step with DeepSpeed's: the scale the step used, whether
/// it was skipped, and the step DeepSpeed raised at (overflow at the
/// minimum, Dynamic only). Returns the steps compared.
int64_t compareWithGolden(const std::string &name, const char *ruleKey,
                          LossScaleRule rule) {
  llvm::json::Value golden = readGolden(name);
  const llvm::json::Object *root = golden.getAsObject();
  if (!root) {
    ADD_FAILURE() << name << ": not a JSON object";
    return 0;
  }
  const llvm::json::Object *fp16 = root->getObject("fp16");
  const llvm::json::Array *overflowSteps = root->getArray("overflow_steps");
  const llvm::json::Object *expected = root->getObject(ruleKey);
  const llvm::json::Array *scales =
      expected ? expected->getArray("scale") : nullptr;
  const llvm::json::Array *skips =
      expected ? expected->getArray("skipped") : nullptr;
  if (!fp16 || !overflowSteps || !scales || !skips ||
      scales->size() != skips->size()) {
    ADD_FAILURE() << name << ": malformed golden";
    return 0;
  }
  const std::optional<int64_t> raisedAt = expected->getInteger("raised_at");
  std::vector<bool> overflows(scales->size() + 1, false);
  for (const llvm::json::Value &step : *overflowSteps)
    if (size_t k = size_t(*step.getAsInteger()); k < overflows.size())
      overflows[k] = true;

  DynamicLossScaler s(configOf(*fp16, rule));
  for (size_t i = 0; i < scales->size(); ++i) {
    const int64_t step = int64_t(i) + 1;
    const double want = *(*scales)[i].getAsNumber();
    EXPECT_LE(std::abs(s.scale() - want), 1e-9 * want)
        << name << " (" << ruleKey << "): the scale of step " << step << " is "
        << s.scale() << ", DeepSpeed's " << want;
    const LossScaleEvent event = s.update(overflows[step]);
    const bool skipped =
        event != LossScaleEvent::Ok && event != LossScaleEvent::Grew;
    EXPECT_EQ(skipped, *(*skips)[i].getAsBoolean())
        << name << " (" << ruleKey << "): step " << step;
    EXPECT_EQ(event == LossScaleEvent::SkippedAtMin, raisedAt == step)
        << name << " (" << ruleKey << "): step " << step
        << (raisedAt == step ? ": DeepSpeed raised at the minimum here"
                             : ": dsc reports an overflow at the minimum");
  }
  // DeepSpeed's run stops where it raised; without a raise it ran them all.
  if (!raisedAt) {
    EXPECT_EQ(int64_t(scales->size()), 60) << name;
  }
  return int64_t(scales->size());
}

TEST(LossScalerGoldens, FusedFollowsFP16Optimizer) {
  for (const char *name : kGoldenCases)
    EXPECT_GT(compareWithGolden(name, "fused", LossScaleRule::Fused), 0)
        << name;
}

TEST(LossScalerGoldens, DynamicFollowsDynamicLossScaler) {
  for (const char *name : kGoldenCases)
    EXPECT_GT(compareWithGolden(name, "dynamic", LossScaleRule::Dynamic), 0)
        << name;
}

} // namespace
