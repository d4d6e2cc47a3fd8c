//===- LossScaling.h - Dynamic loss scaling of an f16 plan ------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A plan computing in f16 (--dsc-compile precision=fp16), whose 5-bit
// exponent underflows small gradients, trains with DeepSpeed's dynamic loss
// scaling (LossScaler.h) under the rule of the DeepSpeed path the plan
// corresponds to (ZeRO or not, lossScaleRuleOf): the backward is seeded with
// scale/M, the gradients are checked for inf/nan over every rank, and the
// step is either skipped (gradients zeroed, the scale lowered, under ZeRO
// after the hysteresis) or its gradients unscaled before the optimizer runs.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_EXEC_LOSSSCALING_H
#define DSC_LIB_RUNTIME_EXEC_LOSSSCALING_H

#include "Arenas.h"

#include "dsc/Runtime/LossScaler.h"
#include "dsc/Runtime/StepResult.h"

#include <optional>

namespace dsc::rt {

class LossScaling {
public:
  /// On when any buffer of `plan` is f16; the rule is lossScaleRuleOf(plan).
  explicit LossScaling(const Plan &plan);

  bool enabled() const { return scaler.has_value(); }
  const DynamicLossScaler *current() const {
    return scaler ? &*scaler : nullptr;
  }
  /// The scaler's settings (a config's fp16 section): replaces the scaler
  /// when on; kept for a checkpoint's load either way. Their rule is
  /// replaced by the plan's.
  const LossScalerConfig &config() const { return settings; }
  void setConfig(const LossScalerConfig &cfg);
  /// The backward's seed for `microBatches`: 1/M, times the scale when on.
  double backwardSeed(int64_t microBatches) const;
  /// Before the optimizer of step `step`: checks the gradients (every rank
  /// of `world` agrees), updates the scaler, and unscales them (true) or
  /// zeroes them for a skipped step (false). Fills `r`'s scaling fields.
  bool unscaleOrSkip(const Plan &plan, const Arenas &arenas, Backend &backend,
                     Communicator *world, int64_t step, StepResult &r);
  /// Starts afresh from the settings, then from `saved` when given (a
  /// checkpoint's, checked against the settings before); no-op when off.
  void restart(const std::optional<LossScalerState> &saved);

private:
  std::optional<DynamicLossScaler> scaler;
  LossScalerConfig settings;
  LossScaleRule rule;
};

/// The rule DeepSpeed's engine would scale `plan`'s loss with: Dynamic
/// (DynamicLossScaler, ZeRO's) for a ZeRO plan, else Fused (FP16_Optimizer's,
/// stage 0). The plan records no ZeRO stage, so this reads it from what
/// ZeRO leaves in a plan, and a precompiled plan gets the same rule: an
/// optimizer state or parameter in chunks over data-parallel ranks
/// (ShardLayout::chunkAxes), or, on one data-parallel rank where nothing is
/// chunked, a flat-shard update (AdamWShard, OnebitAdamShard,
/// FrozenAdamShard: stages 1 and 2) or a GatherParameter (stage 3). An
/// optimizer without a shard instruction under ZeRO 1/2 on one rank looks
/// like stage 0 and gets Fused.
LossScaleRule lossScaleRuleOf(const Plan &plan);

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_EXEC_LOSSSCALING_H
