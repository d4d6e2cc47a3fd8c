//===- LearningRate.cpp - DeepSpeed's warmup/decay schedules --------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The `LearningRate` instruction's formula: WarmupLR, WarmupDecayLR and
// WarmupCosineLR as deepspeed/runtime/lr_schedules.py computes them, and
// GPT-NeoX's AnnealingLR as megatron/learning_rates.py does, and `--lr`'s
// rewrite of a plan's base rates.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Instructions.h"
#include "dsc/Runtime/Plan.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace dsc::rt;

namespace {

/// GPT-NeoX's AnnealingLR.get_lr at num_iters = step - 1 (its scheduler is
/// built at 0 and stepped after each optimizer step).
double annealingLearningRate(LrScheduleKind kind, int64_t warmup, int64_t total,
                             double base, double minLr, int64_t step) {
  const double n = double(std::max<int64_t>(step - 1, 0));
  const double w = double(warmup);
  if (w > 0 && n <= w)
    return base * std::max(1.0, n) / w;
  const double m = n - w, e = double(total) - w;
  double lr = base;
  switch (kind) {
  case LrScheduleKind::AnnealingLinear:
    lr = base * (e - m) / e;
    break;
  case LrScheduleKind::AnnealingCosine:
    lr = minLr + (base - minLr) / 2.0 * (std::cos(M_PI * m / e) + 1);
    break;
  case LrScheduleKind::AnnealingExponential:
    lr = base * std::exp(-0.693 * m / e);
    break;
  default:
    break;
  }
  return std::max(lr, minLr);
}

} // namespace

double dsc::rt::scheduledLearningRate(LrScheduleKind kind, int64_t warmup,
                                      int64_t total, bool warmupLog,
                                      double base, double warmupStart,
                                      double decayEnd, int64_t step) {
  if (kind == LrScheduleKind::Constant)
    return base;
  if (kind >= LrScheduleKind::AnnealingConstant)
    return annealingLearningRate(kind, warmup, total, base, decayEnd, step);
  // DeepSpeed's engine builds the scheduler at last_batch_iteration = -1,
  // which sets the rate step 1 uses, and steps it after each optimizer
  // step: step k >= 2 runs at last_batch_iteration = k - 2 (DeepSpeed
  // 0.19.8's engine, scripts/ds-reference/lr-goldens.py). At -1 WarmupLR
  // and WarmupDecayLR set warmup_min_lr, the value at 0 as well, and
  // WarmupCosineLR sets 0. DeepSpeed never warms up over fewer than two
  // steps; warmup 0 (no warm-up) is dsc's, and starts the decay at 0.
  const double w = warmup > 0 ? double(std::max<int64_t>(warmup, 2)) : 0.0;
  if (step < 2 && w > 0 && kind == LrScheduleKind::WarmupCosineDecay)
    return 0.0;
  const double i = double(std::max<int64_t>(step - 2, 0));
  if (i < w) {
    double g = warmupLog ? std::log(i + 1) / std::log(w) : i / w;
    return warmupStart + (base - warmupStart) * g;
  }
  const double t = double(total);
  switch (kind) {
  case LrScheduleKind::Constant:
  case LrScheduleKind::WarmupConstant:
  case LrScheduleKind::AnnealingConstant:
  case LrScheduleKind::AnnealingLinear:
  case LrScheduleKind::AnnealingCosine:
  case LrScheduleKind::AnnealingExponential:
    return base;
  case LrScheduleKind::WarmupLinearDecay: {
    double g = std::max(0.0, (t - i) / std::max(1.0, t - w));
    return decayEnd + (base - decayEnd) * g;
  }
  case LrScheduleKind::WarmupCosineDecay: {
    // DeepSpeed lets the cosine rise again past total_num_steps; clamp.
    double r = t > w ? std::min(1.0, (i - w + 1) / (t - w)) : 1.0;
    return decayEnd + (base - decayEnd) * (1 + std::cos(M_PI * r)) / 2;
  }
  }
  return base;
}

/// OneCycle's position in its cycle at b = step - 1, s in [0, 1]: up over
/// firstSize steps, down over secondSize, in flat stairs when > 0.
static double oneCycleScale(int64_t firstStairs, int64_t secondStairs,
                            double firstSize, double secondSize, double b) {
  const double total = firstSize + secondSize;
  // The position in the cycle, x in [0, 1): up over the first part, down
  // over the second.
  const double ratio = firstSize / total;
  const double x = b / total - std::floor(b / total);
  double scale = x <= ratio ? x / ratio : (x - 1) / (ratio - 1);
  const int64_t stairs = x <= ratio ? firstStairs : secondStairs;
  if (stairs > 0) {
    // Stairs from the step's offset in the cycle, not from `scale`: at a
    // half-cycle boundary the scale may fall just under a whole stair.
    const double offset = std::fmod(b, total);
    const double position =
        offset <= firstSize ? offset * double(stairs) / firstSize
                            : (total - offset) * double(stairs) / secondSize;
    scale = std::floor(position) / double(stairs);
  }
  return scale;
}

double dsc::rt::cyclicLearningRate(int64_t kind, int64_t firstStairs,
                                   int64_t secondStairs, bool staircase,
                                   double minLr, double maxLr, double firstSize,
                                   double secondSize, double decaySize,
                                   double rate, int64_t step) {
  const double b = double(std::max<int64_t>(step - 1, 0));
  if (kind == 0) {
    const double interval =
        staircase ? std::floor(b / firstSize) : b / firstSize;
    return minLr * (1 + rate * interval);
  }
  const double total = firstSize + secondSize;
  if (b - 1 >= total) {
    // DeepSpeed skips the decay when either is (close to) zero.
    if (std::abs(rate) < 1e-9 || std::abs(decaySize) < 1e-9)
      return minLr;
    return minLr / (1 + rate * (b - total) / decaySize);
  }
  return minLr + (maxLr - minLr) * oneCycleScale(firstStairs, secondStairs,
                                                 firstSize, secondSize, b);
}

double dsc::rt::cyclicMomentum(int64_t firstStairs, int64_t secondStairs,
                               double minMom, double maxMom, double firstSize,
                               double secondSize, double decaySize, double rate,
                               int64_t step) {
  // Built at last_batch_iteration = -1, the scheduler sets the betas to
  // (cycle_min_mom, 0.99): the first step's, before its first step().
  if (step <= 1)
    return minMom;
  const double b = double(step - 1);
  const double total = firstSize + secondSize;
  if (b - 1 >= total) {
    if (std::abs(rate) < 1e-9 || std::abs(decaySize) < 1e-9)
      return maxMom;
    return maxMom * (1 + rate * (b - total) / decaySize);
  }
  return maxMom - (maxMom - minMom) * oneCycleScale(firstStairs, secondStairs,
                                                    firstSize, secondSize, b);
}

void dsc::rt::rescaleLearningRates(Plan &plan, double lr) {
  if (!(lr >= 0) || !std::isfinite(lr))
    throw Error("learning rate " + std::to_string(lr) +
                " must be finite and >= 0");
  bool found = false;
  for (Program &prog : plan.programs)
    for (Instruction &inst : prog.instructions)
      if (inst.opcode == Opcode::LearningRate) {
        ops::LearningRate sched = ops::LearningRate::decode(inst);
        const double base = sched.base;
        const double ratio = base > 0 ? lr / base : 0.0;
        sched.base = lr;
        sched.warmupStart = base > 0 ? sched.warmupStart * ratio : 0.0;
        sched.decayEnd = base > 0 ? sched.decayEnd * ratio : 0.0;
        sched.encode(inst);
        found = true;
      } else if (inst.opcode == Opcode::CyclicLearningRate) {
        // The base is OneCycle's peak, LRRangeTest's start; the other
        // bound keeps its ratio to it.
        if (!(lr > 0))
          throw Error("a cyclic learning rate needs a base rate > 0, got " +
                      std::to_string(lr));
        ops::CyclicLearningRate sched = ops::CyclicLearningRate::decode(inst);
        const double base = sched.kind == 1 ? sched.maxLr : sched.minLr;
        const double ratio = lr / base;
        sched.minLr *= ratio;
        sched.maxLr *= ratio;
        sched.encode(inst);
        found = true;
      }
  if (!found)
    throw Error("the plan has no LearningRate instruction whose rate could "
                "be set");
}
