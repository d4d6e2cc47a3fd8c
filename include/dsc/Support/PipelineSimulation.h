//===- PipelineSimulation.h - a pipeline step on a clock --------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Runs the stages' steps (PipelineStep.h, what --dsc-pipeline-schedule
// writes as IR) on a clock: each forward and backward takes its stage's
// time, a send and its receive are a rendezvous that completes when the
// later of the two ranks gets there (messages take no time), and the step
// ends when the last stage finishes. The compiler reports the bubble it finds
// (the plan summary) and the documentation draws the per-rank timelines from
// the same spans, so the pictures are the compiler's schedule, not a drawing of
// one. Header-only, no LLVM and no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_SUPPORT_PIPELINESIMULATION_H
#define DSC_SUPPORT_PIPELINESIMULATION_H

#include "dsc/Support/PipelineStep.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dsc {

/// A stage's time for one micro-batch's forward and backward (the backward
/// as the stage runs it: dsc's recomputes the forward first).
struct PipelineStageTimes {
  double forward = 0, backward = 0;
};

/// When one forward or backward ran.
struct PipelineSpan {
  int64_t stage = 0;
  PipelineStepOp::Kind kind = PipelineStepOp::Kind::Forward;
  int64_t microBatch = 0;
  double start = 0, end = 0;
};

struct PipelineSimulation {
  std::vector<PipelineSpan> spans;
  /// When the last stage finished.
  double makespan = 0;
  /// Each stage's busy time (its forwards and backwards).
  std::vector<double> busy;
  /// The idle fraction of the step: (makespan - B) / B with B the busiest
  /// stage's busy time, Megatron-LM's bubble time fraction ((p-1)/m for
  /// GPipe and 1F1B when the stages cost the same).
  double bubble = 0;
};

/// Simulates `steps` (one per stage, in order) with `times` (one per
/// stage). Returns nullopt with `error` naming the stage and instruction
/// when the steps cannot finish (a message without its match).
inline std::optional<PipelineSimulation>
simulatePipeline(const std::vector<std::vector<PipelineStepOp>> &steps,
                 const std::vector<PipelineStageTimes> &times,
                 std::string &error) {
  using Kind = PipelineStepOp::Kind;
  const size_t stages = steps.size();
  if (times.size() != stages) {
    error = "the simulation needs one time per stage";
    return std::nullopt;
  }
  PipelineSimulation sim;
  sim.busy.assign(stages, 0.0);
  std::vector<size_t> next(stages, 0);
  std::vector<double> clock(stages, 0.0);
  auto head = [&](size_t k) -> const PipelineStepOp * {
    return next[k] < steps[k].size() ? &steps[k][next[k]] : nullptr;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t k = 0; k < stages; ++k) {
      // Compute runs on the stage's own clock.
      while (const PipelineStepOp *op = head(k)) {
        if (op->kind != Kind::Forward && op->kind != Kind::Backward)
          break;
        const double t =
            op->kind == Kind::Forward ? times[k].forward : times[k].backward;
        sim.spans.push_back(
            {int64_t(k), op->kind, op->microBatch, clock[k], clock[k] + t});
        clock[k] += t;
        sim.busy[k] += t;
        ++next[k];
        moved = true;
      }
      // A message completes with its match at the later of the two clocks.
      const PipelineStepOp *op = head(k);
      if (!op || op->peer < 0 || size_t(op->peer) >= stages)
        continue;
      const size_t peer = size_t(op->peer);
      const PipelineStepOp *other = head(peer);
      const Kind match = op->kind == Kind::Send ? Kind::Recv : Kind::Send;
      if (other && other->kind == match && size_t(other->peer) == k &&
          other->microBatch == op->microBatch) {
        const double t = std::max(clock[k], clock[peer]);
        clock[k] = clock[peer] = t;
        ++next[k];
        ++next[peer];
        moved = true;
      }
    }
  }
  for (size_t k = 0; k < stages; ++k)
    if (const PipelineStepOp *op = head(k)) {
      error = "stage " + std::to_string(k) + " cannot complete its " +
              (op->kind == Kind::Send ? "send to" : "receive from") +
              " stage " + std::to_string(op->peer) + " of micro-batch " +
              std::to_string(op->microBatch) + " (instruction " +
              std::to_string(next[k]) + ")";
      return std::nullopt;
    }
  sim.makespan = *std::max_element(clock.begin(), clock.end());
  const double busiest = *std::max_element(sim.busy.begin(), sim.busy.end());
  sim.bubble = busiest > 0 ? (sim.makespan - busiest) / busiest : 0.0;
  return sim;
}

} // namespace dsc

#endif // DSC_SUPPORT_PIPELINESIMULATION_H
