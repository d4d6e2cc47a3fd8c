//===- LossScaler.h - Dynamic loss scaling for fp16 -------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// DeepSpeed's DynamicLossScaler state machine on the host: the executor
// (or the CUDA benchmark) reports whether the step's gradients overflowed,
// this decides the next scale. Header-only, on every backend.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_LOSSSCALER_H
#define DSC_RUNTIME_LOSSSCALER_H

#include <algorithm>
#include <cstdint>

namespace dsc::rt {

/// DeepSpeed's defaults (deepspeed/runtime/fp16/loss_scaler.py and the
/// `fp16` config: initial_scale_power 16, loss_scale_window 1000,
/// hysteresis 2, min_loss_scale 1).
struct LossScalerConfig {
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
  SkippedKept,   // overflow absorbed by hysteresis: skip, scale kept
  SkippedShrunk, // overflow: skip the step, scale /= factor
  SkippedAtMin,  // overflow at the minimum scale: DeepSpeed raises here;
                 // the caller decides (dsc-run reports an error)
};

/// A scaler's state between steps, for checkpoints.
struct LossScalerState {
  double scale = 0;
  int hysteresisLeft = 0;
  int64_t iteration = 0, lastOverflowIteration = -1, skippedSteps = 0;
};

/// Call update(overflow) once per optimizer step, after the gradients'
/// finiteness is known and before applying the step: a Skipped* event
/// means the step must not be applied. Same transitions as DeepSpeed's
/// DynamicLossScaler.update_scale, including its iteration counting (the
/// first growth happens after scaleWindow clean steps).
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

  LossScaleEvent update(bool overflow) {
    LossScaleEvent event = LossScaleEvent::Ok;
    if (overflow) {
      ++skipped;
      if (cfg.hysteresis == 1 || curHysteresis == 1) {
        if (curScale <= cfg.minScale) {
          event = LossScaleEvent::SkippedAtMin;
        } else {
          curScale = std::max(curScale / cfg.scaleFactor, cfg.minScale);
          event = LossScaleEvent::SkippedShrunk;
        }
      } else {
        --curHysteresis;
        event = LossScaleEvent::SkippedKept;
      }
      lastOverflowIter = curIter;
    } else {
      if (cfg.consecutiveHysteresis)
        curHysteresis = cfg.hysteresis;
      if ((curIter - lastOverflowIter) % cfg.scaleWindow == 0) {
        if (!cfg.consecutiveHysteresis)
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
  /// from this configuration: a scale that is not finite or below the
  /// minimum, a hysteresis outside [1, cfg.hysteresis], counters out of
  /// order.
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
