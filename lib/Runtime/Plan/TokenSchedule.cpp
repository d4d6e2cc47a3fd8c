//===- TokenSchedule.cpp - learning rate by tokens consumed ---------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Megatron-DeepSpeed's OptimizerParamScheduler.get_lr with lr_decay_tokens
// (megatron/optimizer_param_scheduler.py), the checks that a plan's schedule
// can be evaluated on tokens, and the counters' advance after each step
// (megatron/training.py's train loop). docs/curriculum.md has the formulas.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/TokenSchedule.h"

#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Instructions.h"
#include "dsc/Runtime/Plan.h"

#include <cmath>
#include <string>

using namespace dsc::rt;

double dsc::rt::tokenLearningRate(const ops::LearningRate &lr,
                                  const TokenSchedule &schedule,
                                  const TokenCounts &counts, int64_t step) {
  const double base = lr.base, minLr = lr.decayEnd;
  const double n = double(step > 1 ? step - 1 : 0);
  const double N = double(counts.scheduler);
  // lr_warmup_tokens as get_lr holds it: given, latched, or not yet.
  std::optional<int64_t> warmupTokens = schedule.warmupTokens;
  if (!warmupTokens && counts.warmupEnd >= 0)
    warmupTokens = counts.warmupEnd;
  if (!warmupTokens) {
    if (lr.warmup > 0 && n <= double(lr.warmup))
      return base * n / double(lr.warmup);
    if (lr.warmup <= 0)
      warmupTokens = 0;
    else // countStepTokens latches it when the steps reach W.
      throw Error("lr_decay_tokens: step " + std::to_string(step) +
                  " is past the warm-up's " + std::to_string(lr.warmup) +
                  " steps but the tokens at its end were not recorded");
  } else if (*warmupTokens > 0 && N <= double(*warmupTokens)) {
    return base * N / double(*warmupTokens);
  }
  const double D = double(schedule.decayTokens);
  if (N > D)
    return minLr;
  const double WT = double(*warmupTokens);
  const double ratio = (N - WT) / (D - WT);
  const double coeff =
      LrScheduleKind(lr.kind) == LrScheduleKind::AnnealingCosine
          ? 0.5 * (std::cos(M_PI * ratio) + 1.0)
          : 1.0 - ratio;
  return minLr + coeff * (base - minLr);
}

namespace {

const char *scheduleName(LrScheduleKind kind) {
  switch (kind) {
  case LrScheduleKind::Constant:
    return "constant";
  case LrScheduleKind::WarmupConstant:
    return "DeepSpeed's WarmupLR";
  case LrScheduleKind::WarmupLinearDecay:
    return "DeepSpeed's WarmupDecayLR";
  case LrScheduleKind::WarmupCosineDecay:
    return "DeepSpeed's WarmupCosineLR";
  case LrScheduleKind::AnnealingConstant:
    return "lr_decay_style constant";
  case LrScheduleKind::AnnealingLinear:
    return "lr_decay_style linear";
  case LrScheduleKind::AnnealingCosine:
    return "lr_decay_style cosine";
  case LrScheduleKind::AnnealingExponential:
    return "lr_decay_style exponential";
  }
  return "unknown";
}

} // namespace

int64_t dsc::rt::checkTokenSchedule(const Plan &plan,
                                    const TokenSchedule &schedule) {
  if (schedule.decayTokens <= 0)
    throw Error("lr_decay_tokens: must be > 0, got " +
                std::to_string(schedule.decayTokens));
  if (schedule.warmupTokens && *schedule.warmupTokens < 0)
    throw Error("lr_warmup_tokens: must be >= 0, got " +
                std::to_string(*schedule.warmupTokens));
  if (schedule.warmupTokens && *schedule.warmupTokens >= schedule.decayTokens)
    throw Error("lr_warmup_tokens: " + std::to_string(*schedule.warmupTokens) +
                " is not below lr_decay_tokens " +
                std::to_string(schedule.decayTokens) +
                " (the decay runs from the end of the warm-up to "
                "lr_decay_tokens)");
  int64_t warmup = -1;
  for (const Program &prog : plan.programs)
    for (const Instruction &inst : prog.instructions) {
      if (inst.opcode == Opcode::OverlapNextStep)
        throw Error("lr_decay_tokens with the delayed parameter update "
                    "(dpu=1) is not built: its optimizer runs beside the "
                    "next step, after that step's tokens are counted");
      if (inst.opcode == Opcode::CyclicLearningRate)
        throw Error("lr_decay_tokens: the plan's learning rate is "
                    "DeepSpeed's OneCycle or LRRangeTest, which count "
                    "steps; token-based decay is Megatron-DeepSpeed's "
                    "lr_decay_style linear or cosine "
                    "(--compile \"lr-schedule=annealing_cosine\")");
      if (inst.opcode != Opcode::LearningRate)
        continue;
      const ops::LearningRate lr = ops::LearningRate::decode(inst);
      const LrScheduleKind kind = LrScheduleKind(lr.kind);
      if (kind != LrScheduleKind::AnnealingLinear &&
          kind != LrScheduleKind::AnnealingCosine)
        throw Error(
            std::string("lr_decay_tokens: the plan's learning-rate schedule "
                        "is ") +
            scheduleName(kind) +
            (kind == LrScheduleKind::Constant ||
                     kind == LrScheduleKind::WarmupConstant ||
                     kind == LrScheduleKind::AnnealingConstant
                 ? ", which has no decay"
             : kind == LrScheduleKind::AnnealingExponential
                 ? ", which Megatron-DeepSpeed's scheduler does not have"
                 : ", which counts steps") +
            "; token-based decay is Megatron-DeepSpeed's lr_decay_style "
            "linear or cosine (--compile "
            "\"lr-schedule=annealing_cosine\")");
      if (warmup >= 0 && lr.warmup != warmup)
        throw Error("lr_decay_tokens: the plan's LearningRate instructions "
                    "warm up over different steps");
      warmup = lr.warmup;
    }
  if (warmup < 0)
    throw Error("lr_decay_tokens: the plan has no learning-rate schedule");
  return warmup;
}

void dsc::rt::countStepTokens(TokenCounts &counts,
                              const TokenSchedule *schedule,
                              int64_t warmupSteps, int64_t tokens, bool stepped,
                              int64_t stepsDone) {
  if (stepped) {
    counts.scheduler = counts.consumed;
    // get_lr's "step-wise warmup + token-wise decay" latch.
    if (schedule && !schedule->warmupTokens && warmupSteps > 0 &&
        stepsDone == warmupSteps && counts.warmupEnd < 0)
      counts.warmupEnd = counts.scheduler;
  }
  counts.consumed += tokens;
}
