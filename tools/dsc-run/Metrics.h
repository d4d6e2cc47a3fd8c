//===- Metrics.h - dsc-run's log line and JSON-lines metrics ----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// One training step's numbers, printed as the Megatron-LM log line people
// grep for and as one JSON object per line for scripts.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_DSCRUN_METRICS_H
#define DSC_TOOLS_DSCRUN_METRICS_H

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::run {

struct StepMetrics {
  int64_t iteration = 0, iterations = 0;
  int64_t consumedSamples = 0;
  double msPerIteration = 0;
  double tflops = 0; // achieved model TFLOP/s
  double learningRate = 0;
  /// The optimizer's beta1 when a schedule sets it each step (OneCycle's
  /// cycle_momentum); NaN (left out) otherwise.
  double beta1 = std::nan("");
  double loss = 0;
  double gradNorm = 0; // NaN when the plan computes none
  /// MoE models: the step's largest expert load over its router's mean
  /// (StepResult::expertLoadImbalance); NaN without MoE layers.
  double expertLoadImbalance = std::nan("");
  /// Curriculum learning: the step's sequence length and the tokens the
  /// step trained on over every data-parallel rank (0: no curriculum).
  int64_t curriculumSeqLength = 0, tokensPerStep = 0;
  /// Megatron-DeepSpeed's consumed tokens, every step's so far, when they
  /// matter (a curriculum, a token schedule, --train-tokens); -1 (left
  /// out) otherwise.
  int64_t consumedTokens = -1;
  /// Bytes this rank sent in the plan's collectives; -1 (left out of the
  /// JSON) for a plan without a mesh.
  int64_t collectiveBytes = -1;
  /// Dynamic loss scaling (f16 plans): the scale and the iterations skipped
  /// so far; NaN and -1 (left out) without it.
  double lossScale = std::nan("");
  int64_t skippedIterations = -1;
  /// Milliseconds this step's boundary spent on checkpoints (a save, an
  /// async snapshot, or committing one), outside msPerIteration (as
  /// Megatron's save-checkpoint timer); NaN (left out) when none.
  double checkpointMs = std::nan("");
  /// wall_clock_breakdown: the step's milliseconds in its forward and
  /// backward and in its update (averaged like msPerIteration); NaN (left
  /// out) without it.
  double forwardBackwardMs = std::nan(""), optimizerMs = std::nan("");
  /// Offload (--dsc-offload): this step's bytes and seconds per direction
  /// between tiers ("device_to_host", ...); empty (left out) without.
  struct Transfer {
    std::string direction;
    uint64_t bytes = 0;
    double seconds = 0;
  };
  std::vector<Transfer> transfers;
};

/// " iteration       10/     200 | consumed samples:          40 | elapsed
/// time per iteration (ms): 12.3 | throughput (TFLOP/s): 0.012 | learning
/// rate: 1.000000E-03 | lm loss: 4.123456E+00 | loss scale: 65536.0 |
/// grad norm: 1.234 | number of skipped iterations:   0 |" (Megatron's
/// field formats; the loss-scaling fields only for f16 plans; one line, no
/// newline).
std::string formatLogLine(const StepMetrics &m);

/// {"iteration": 10, "iterations": 200, "consumed_samples": 40,
/// "elapsed_time_per_iteration_ms": ..., "throughput_tflops": ...,
/// "learning_rate": ..., "lm_loss": ..., "grad_norm": ...[,
/// "collective_bytes": ...]} with doubles
/// printed exactly (%.17g) and NaN/Inf as null. No newline.
std::string formatJsonLine(const StepMetrics &m);

/// A JSON string literal (quotes, escapes) of `s`.
std::string jsonString(const std::string &s);

} // namespace dsc::run

#endif // DSC_TOOLS_DSCRUN_METRICS_H
