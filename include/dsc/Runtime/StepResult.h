//===- StepResult.h - What one training step reports ------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The numbers Executor::trainStep returns for one step: the log line's loss,
// norms and rates, the bytes the step's collectives moved, and what dynamic
// loss scaling did. Its own header so the parts that fill it need no executor.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_STEPRESULT_H
#define DSC_RUNTIME_STEPRESULT_H

#include <cmath>
#include <cstdint>

namespace dsc::rt {

struct StepResult {
  double loss = 0; // mean over the micro-batches
  /// False on a pipeline stage other than the last, which computes no loss
  /// (then `loss` is 0).
  bool hasLoss = true;
  double gradNorm = 0;     // NaN when the plan computes none
  double learningRate = 0; // NaN when the plan has no lr buffer
  /// The step's scheduled beta1 (Plan::beta1); NaN when it is constant.
  double beta1 = std::nan("");
  /// Bytes this rank sent in the plan's collectives during the step (the
  /// communicators' counters: measured under threads, the ring model under
  /// MPI); compare with PlanSummary::collectiveBytesPerStep.
  uint64_t collectiveBytesSent = 0;
  /// Dynamic loss scaling (plans computing in f16): the scale this step's
  /// backward used (NaN without scaling), whether its gradients overflowed
  /// and the step was skipped (then gradNorm is NaN: no optimizer ran), and
  /// the steps skipped so far.
  double lossScale = std::nan("");
  bool skipped = false;
  int64_t skippedSteps = 0;
  /// Wall milliseconds of the step's update: the overflow check, the
  /// optimizer program and reading its norm (the rest of the step is the
  /// forward and backward), for DeepSpeed's wall_clock_breakdown.
  double optimizerMs = 0;
  /// MoE models: over this rank's routers and micro-batches of the step,
  /// the largest expert load over its router's mean load before dropping
  /// (1 is perfect balance); NaN without MoE layers.
  double expertLoadImbalance = std::nan("");
  /// The sequence length the step trained at (a curriculum's length, else
  /// the plan's), and the rows of each micro-batch (the plan's micro-batch
  /// size, or the rows seqlen_reshape cut its samples into).
  int64_t sequenceLength = 0;
  int64_t rows = 0;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_STEPRESULT_H
