//===- LossScaler.h - Dynamic loss scaling for fp16 -------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// DeepSpeed 0.19.8's fp16 loss-scale state machines on the host: the
// executor reports whether the step's gradients overflowed, this decides
// the next scale. Two rules, as DeepSpeed's engine picks its optimizer
// wrapper (docs/training.md, "fp16"). Header-only, on every backend.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_LOSSSCALER_H
#define DSC_RUNTIME_LOSSSCALER_H

#include <algorithm>
#include <cstdint>

namespace dsc::rt {

/// Which of DeepSpeed 0.19.8's update rules the scaler follows. Both grow
/// the scale when the step is clean and `stable = iteration -
/// lastOverflowIteration - 1` is positive and a multiple of the window (the
/// first growth comes on the (window+1)-th clean step).
enum class LossScaleRule {
  /// fp16 without ZeRO: the engine wraps the optimizer in FP16_Optimizer
  /// (deepspeed/runtime/fp16/fused_optimizer.py; FP16_UnfusedOptimizer in
  /// unfused_optimizer.py has the same `_update_scale`). No hysteresis:
  /// every overflow divides the scale, floored at the minimum, where it
  /// stays (never an error); `hysteresis` and `consecutiveHysteresis` have
  /// no effect.
  Fused,
  /// ZeRO stages 1-3: DeepSpeedZeroOptimizer (zero/stage_1_and_2.py) and
  /// stage 3 (zero/stage3.py) build DynamicLossScaler through
  /// CreateLossScaler (fp16/loss_scaler.py): hysteresis, and an overflow
  /// with the hysteresis spent at exactly the minimum scale raises.
  Dynamic,
};

/// DeepSpeed's defaults (deepspeed/runtime/fp16/loss_scaler.py and the
/// `fp16` config: initial_scale_power 16, loss_scale_window 1000,
/// hysteresis 2, min_loss_scale 1).
struct LossScalerConfig {
  /// The executor sets it from the plan (LossScaling.cpp): Dynamic when
  /// the plan shards optimizer state over data-parallel ranks (ZeRO).
  LossScaleRule rule = LossScaleRule::Dynamic;
  double initialScale = 65536.0;
  double scaleFactor = 2.0;
  int64_t scaleWindow = 1000;
  int hysteresis = 2;
  double minScale = 1.0;
  /// DeepSpeed's consecutive_hysteresis: refill the hysteresis budget on
  /// every good step rather than only when the scale grows.
  bool consecutiveHysteresis = false;
};

/// What one update decided.
enum class LossScaleEvent {
  Ok,            // finite grads, scale unchanged: apply the step
  Grew,          // finite grads, window complete: scale *= factor
  SkippedKept,   // overflow absorbed by hysteresis (or, Fused, already at
                 // the minimum): skip, scale kept
  SkippedShrunk, // overflow: skip the step, scale /= factor (floored)
  SkippedAtMin,  // Dynamic: overflow at the minimum scale with the
                 // hysteresis spent: DeepSpeed raises here; the caller
                 // decides (dsc-run reports an error)
};

/// A scaler's state between steps, for checkpoints. The rule is not saved:
/// it follows the plan, and the counters mean the same under both.
struct LossScalerState {
  double scale = 0;
  int hysteresisLeft = 0;
  int64_t iteration = 0, lastOverflowIteration = -1, skippedSteps = 0;
};

/// Call update(overflow) once per optimizer step, after the gradients'
/// finiteness is known and before applying the step: a Skipped* event
/// means the step must not be applied. Same transitions as DeepSpeed
/// 0.19.8's FP16_Optimizer._update_scale (Fused) or
/// DynamicLossScaler.update_scale (Dynamic), including their iteration
/// counting; test/Runtime/LossScalerTest.cpp checks both against goldens
/// made by DeepSpeed's own code (scripts/ds-reference).
class DynamicLossScaler {
public:
  explicit DynamicLossScaler(const LossScalerConfig &cfg = LossScalerConfig())
      : cfg(cfg), curScale(cfg.initialScale), curHysteresis(cfg.hysteresis) {}

  double scale() const { return curScale; }
  /// Multiplier that turns scaled gradients back into true ones.
  double inverseScale() const { return 1.0 / curScale; }
  int64_t iteration() const { return curIter; }
  int64_t skippedSteps() const { return skipped; }
  int hysteresisLeft() const { return curHysteresis; }
  LossScaleRule rule() const { return cfg.rule; }

  LossScaleEvent update(bool overflow) {
    LossScaleEvent event = LossScaleEvent::Ok;
    const bool dynamic = cfg.rule == LossScaleRule::Dynamic;
    if (overflow) {
      ++skipped;
      if (!dynamic || cfg.hysteresis == 1 || curHysteresis == 1) {
        // DeepSpeed compares for equality; a scale below the minimum (an
        // initial scale under it) is raised to it by the max below.
        if (dynamic && curScale == cfg.minScale) {
          event = LossScaleEvent::SkippedAtMin;
        } else {
          const double next =
              std::max(curScale / cfg.scaleFactor, cfg.minScale);
          event = next == curScale ? LossScaleEvent::SkippedKept
                                   : LossScaleEvent::SkippedShrunk;
          curScale = next;
        }
      } else {
        --curHysteresis;
        event = LossScaleEvent::SkippedKept;
      }
      lastOverflowIter = curIter;
    } else {
      if (dynamic && cfg.consecutiveHysteresis)
        curHysteresis = cfg.hysteresis;
      const int64_t stable = curIter - lastOverflowIter - 1;
      if (stable > 0 && stable % cfg.scaleWindow == 0) {
        if (dynamic && !cfg.consecutiveHysteresis)
          curHysteresis = cfg.hysteresis;
        curScale *= cfg.scaleFactor;
        event = LossScaleEvent::Grew;
      }
    }
    ++curIter;
    return event;
  }

  LossScalerState state() const {
    return {curScale, curHysteresis, curIter, lastOverflowIter, skipped};
  }
  /// Takes a saved state; false (and no change) when it could not have come
  /// from this configuration (under either rule): a scale that is not
  /// finite or below the minimum, a hysteresis outside [1, cfg.hysteresis],
  /// counters out of order.
  bool restore(const LossScalerState &s) {
    const bool ok = s.scale >= cfg.minScale && s.scale < 1e300 &&
                    s.hysteresisLeft >= 1 &&
                    s.hysteresisLeft <= cfg.hysteresis && s.iteration >= 0 &&
                    s.lastOverflowIteration >= -1 &&
                    s.lastOverflowIteration < s.iteration + 1 &&
                    s.skippedSteps >= 0 && s.skippedSteps <= s.iteration;
    if (!ok)
      return false;
    curScale = s.scale;
    curHysteresis = s.hysteresisLeft;
    curIter = s.iteration;
    lastOverflowIter = s.lastOverflowIteration;
    skipped = s.skippedSteps;
    return true;
  }

private:
  LossScalerConfig cfg;
  double curScale;
  int curHysteresis;
  int64_t curIter = 0;
  int64_t lastOverflowIter = -1;
  int64_t skipped = 0;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_LOSSSCALER_H
