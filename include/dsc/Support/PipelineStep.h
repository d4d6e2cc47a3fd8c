//===- PipelineStep.h - a pipeline stage's step, in order -------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The order of one pipeline stage's step under a schedule: its forwards and
// backwards per micro-batch and its messages to the neighbouring stages.
// --dsc-pipeline-schedule writes this as the stage's pipeline_step program
// and PipelineSimulation.h runs it on a clock, so the IR, the bubble the
// compiler reports and the documentation's pictures come from this one
// definition. Header-only, no LLVM and no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_SUPPORT_PIPELINESTEP_H
#define DSC_SUPPORT_PIPELINESTEP_H

#include "dsc/Support/PipelineScheduleKind.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dsc {

/// One instruction of a stage's step. A message to or from a higher stage
/// is an activation, one to or from a lower stage a gradient.
struct PipelineStepOp {
  enum class Kind { Forward, Backward, Send, Recv };
  Kind kind = Kind::Forward;
  int64_t microBatch = 0;
  /// Send and Recv: the other stage.
  int64_t peer = 0;
};

/// Stage `stage` of `stages`' step over `microBatches` micro-batches:
///
/// - GPipe: every forward, then every backward (in forward order);
/// - 1F1B (PipeDream-flush, Megatron-LM's default): min(P-k-1, M) warm-up
///   forwards, then one forward and one backward in turn, then the
///   remaining backwards.
///
/// Megatron-LM's combined exchanges with one neighbour
/// (send_forward_recv_backward, send_backward_recv_forward) are a blocking
/// send and a receive; of the two stages the even one sends first and the
/// odd one receives first, so under rendezvous each waits for what the
/// other does next.
inline std::vector<PipelineStepOp> pipelineStageStep(PipelineScheduleKind kind,
                                                     int64_t stages,
                                                     int64_t stage,
                                                     int64_t microBatches) {
  using Kind = PipelineStepOp::Kind;
  std::vector<PipelineStepOp> ops;
  const bool first = stage == 0, last = stage == stages - 1;
  auto forward = [&](int64_t m) { ops.push_back({Kind::Forward, m, 0}); };
  auto backward = [&](int64_t m) { ops.push_back({Kind::Backward, m, 0}); };
  auto recvActivation = [&](int64_t m) {
    if (!first)
      ops.push_back({Kind::Recv, m, stage - 1});
  };
  auto sendActivation = [&](int64_t m) {
    if (!last)
      ops.push_back({Kind::Send, m, stage + 1});
  };
  auto recvGradient = [&](int64_t m) {
    if (!last)
      ops.push_back({Kind::Recv, m, stage + 1});
  };
  auto sendGradient = [&](int64_t m) {
    if (!first)
      ops.push_back({Kind::Send, m, stage - 1});
  };
  // One send and one receive with the next (or the previous) stage.
  auto exchange = [&](bool withNext, int64_t sent, int64_t received) {
    if (withNext ? last : first)
      return;
    auto sendIt = [&] { withNext ? sendActivation(sent) : sendGradient(sent); };
    auto recvIt = [&] {
      withNext ? recvGradient(received) : recvActivation(received);
    };
    if (stage % 2 == 0) {
      sendIt();
      recvIt();
    } else {
      recvIt();
      sendIt();
    }
  };

  const int64_t m = microBatches;
  // GPipe runs every forward first; 1F1B only as many as the stages after
  // this one need to fill the pipeline.
  const int64_t warmup =
      kind == PipelineScheduleKind::GPipe ? m : std::min(stages - stage - 1, m);
  const int64_t steady = m - warmup;
  int64_t forwards = 0, backwards = 0;
  for (int64_t i = 0; i < warmup; ++i) {
    recvActivation(forwards);
    forward(forwards);
    sendActivation(forwards++);
  }
  if (steady > 0)
    recvActivation(forwards);
  for (int64_t i = 0; i < steady; ++i) {
    forward(forwards);
    exchange(/*withNext=*/true, forwards++, backwards);
    backward(backwards);
    if (i == steady - 1)
      sendGradient(backwards++);
    else
      exchange(/*withNext=*/false, backwards++, forwards);
  }
  for (int64_t i = 0; i < warmup; ++i) {
    recvGradient(backwards);
    backward(backwards);
    sendGradient(backwards++);
  }
  return ops;
}

} // namespace dsc

#endif // DSC_SUPPORT_PIPELINESTEP_H
