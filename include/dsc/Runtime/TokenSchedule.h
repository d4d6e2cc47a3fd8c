//===- TokenSchedule.h - learning rate by tokens consumed -------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Megatron-DeepSpeed's token-based schedule (--lr-decay-tokens,
// --lr-warmup-tokens; megatron/optimizer_param_scheduler.py get_lr): the
// LearningRate instruction's warm-up and decay evaluated on the tokens the
// run has consumed instead of its steps, for runs whose tokens per step
// vary (curriculum learning, docs/curriculum.md).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_TOKENSCHEDULE_H
#define DSC_RUNTIME_TOKENSCHEDULE_H

#include <cstdint>
#include <optional>

namespace dsc::rt {

struct Plan;

namespace ops {
struct LearningRate;
} // namespace ops

/// What the user asked for: decay over `decayTokens` (lr_decay_tokens),
/// warm-up over `warmupTokens` (lr_warmup_tokens) or, when not given, over
/// the plan's warm-up steps.
struct TokenSchedule {
  int64_t decayTokens = 0;
  std::optional<int64_t> warmupTokens;
};

/// The counters a token schedule reads, saved in checkpoints. Megatron-
/// DeepSpeed steps its scheduler inside the training step, before the
/// step's tokens are added to args.consumed_train_tokens, so the rate of
/// step k reads the tokens consumed by steps 1..k-2.
struct TokenCounts {
  /// args.consumed_train_tokens: every finished step's tokens.
  int64_t consumed = 0;
  /// The scheduler's num_tokens: `consumed` as it was at its last step().
  int64_t scheduler = 0;
  /// Without lr_warmup_tokens, get_lr sets lr_warmup_tokens to num_tokens
  /// when num_steps reaches the warm-up steps; -1 until then.
  int64_t warmupEnd = -1;
};

/// Megatron-DeepSpeed's get_lr with lr_decay_tokens set, for the
/// LearningRate instruction `lr` (an annealing linear or cosine schedule:
/// its base, min and warm-up steps W) at 1-based optimizer step `step`
/// (num_steps = step - 1, in steps: Megatron-DeepSpeed counts samples, a
/// constant multiple of both):
///   warm-up by steps (no lr_warmup_tokens, not yet past W steps):
///     base * n / W while W > 0 and n <= W;
///   warm-up by tokens (WT given, or latched at n = W): base * N / WT while
///     WT > 0 and N <= WT;
///   min once N > D; else with r = (N - WT) / (D - WT):
///     min + (base - min) (1 - r) (linear) or (1 + cos(pi r)) / 2 (cosine).
/// N = counts.scheduler, D = decayTokens. Megatron-DeepSpeed fails on a
/// step warm-up of 0 without lr_warmup_tokens (WT stays None); dsc takes
/// WT = 0 there.
double tokenLearningRate(const ops::LearningRate &lr,
                         const TokenSchedule &schedule,
                         const TokenCounts &counts, int64_t step);

/// Checks `schedule` against every LearningRate instruction of `plan`;
/// throws Error naming the key (lr_decay_tokens, lr_warmup_tokens) when
/// it does not apply: a schedule that does not decay, a DeepSpeed or
/// cyclic scheduler (step-based), GPT-NeoX's exponential decay (Megatron-
/// DeepSpeed has none), the delayed parameter update, values out of range.
/// Returns the plan's warm-up steps.
int64_t checkTokenSchedule(const Plan &plan, const TokenSchedule &schedule);

/// After a step that consumed `tokens` (the step's sequence length x
/// micro-batch x micro-batches x data-parallel ranks): the scheduler
/// steps first when the optimizer ran (`stepped`; a step fp16 scaling
/// skipped does not step DeepSpeed's scheduler), reading the tokens before
/// this step's, then the step's tokens are counted. `stepsDone` is the
/// scheduler's num_steps after it (optimizer steps done), `warmupSteps`
/// checkTokenSchedule's.
void countStepTokens(TokenCounts &counts, const TokenSchedule *schedule,
                     int64_t warmupSteps, int64_t tokens, bool stepped,
                     int64_t stepsDone);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOKENSCHEDULE_H
