//===- PipelineSimulation.h - a pipeline step on a clock --------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Runs the stages' steps (PipelineStep.h, what --dsc-pipeline-schedule
// writes as IR) on a clock: each forward and backward takes its stage's
// time, a send is posted and a receive waits for it (messages take no
// time; --dsc-verify-collectives separately proves the order free of
// deadlock under blocking sends), and the step ends when the last rank
// finishes. The compiler reports the bubble it finds
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
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace dsc {

/// When one forward or backward ran.
struct PipelineSpan {
  /// The rank (the stage, without virtual stages) and its model chunk.
  int64_t stage = 0;
  PipelineStepOp::Kind kind = PipelineStepOp::Kind::Forward;
  int64_t microBatch = 0;
  double start = 0, end = 0;
  int64_t chunk = 0;
};

struct PipelineSimulation {
  std::vector<PipelineSpan> spans;
  /// When the last rank finished.
  double makespan = 0;
  /// Each rank's busy time (its forwards and backwards).
  std::vector<double> busy;
  /// The idle fraction of the step: (makespan - B) / B with B the busiest
  /// rank's busy time, Megatron-LM's bubble time fraction ((p-1)/m for
  /// GPipe and 1F1B, (1/v)(p-1)/m interleaved, when the stages cost the
  /// same).
  double bubble = 0;
};

/// Simulates `steps` (one per rank, in order, P ranks) with `times` (one
/// per stage, stage c*P + r for rank r's chunk c). A send is posted and the
/// rank goes on (a message on the communication lane, as NCCL's
/// point-to-point and Megatron-LM's batched isend/irecv run beside
/// compute); a receive waits until its message was sent. Returns nullopt
/// with `error` naming the rank and instruction when the steps cannot
/// finish (a receive without its send, a send nobody receives).
inline std::optional<PipelineSimulation>
simulatePipeline(const std::vector<std::vector<PipelineStepOp>> &steps,
                 const std::vector<PipelineStageTimes> &times,
                 std::string &error) {
  using Kind = PipelineStepOp::Kind;
  const size_t ranks = steps.size();
  if (ranks == 0 || times.size() % ranks != 0) {
    error = "the simulation needs one time per stage";
    return std::nullopt;
  }
  const int64_t p = int64_t(ranks);
  PipelineSimulation sim;
  sim.busy.assign(ranks, 0.0);
  std::vector<size_t> next(ranks, 0);
  std::vector<double> clock(ranks, 0.0);
  // Posted messages: (sending stage, gradient, micro-batch) -> when.
  std::map<std::tuple<int64_t, bool, int64_t>, double> posted;
  auto stageOf = [&](size_t r, const PipelineStepOp &op) {
    return op.chunk * p + int64_t(r);
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < ranks; ++r) {
      while (next[r] < steps[r].size()) {
        const PipelineStepOp &op = steps[r][next[r]];
        const int64_t stage = stageOf(r, op);
        if (op.peer < 0 || op.peer >= p || stage < 0 ||
            size_t(stage) >= times.size()) {
          error = "rank " + std::to_string(r) + " instruction " +
                  std::to_string(next[r]) + " names rank " +
                  std::to_string(op.peer) + " chunk " +
                  std::to_string(op.chunk) + ", outside the pipeline";
          return std::nullopt;
        }
        if (op.kind == Kind::Send) {
          posted[{stage, op.gradient, op.microBatch}] = clock[r];
        } else if (op.kind == Kind::Recv) {
          auto it = posted.find({op.gradient ? stage + 1 : stage - 1,
                                 op.gradient, op.microBatch});
          if (it == posted.end())
            break;
          clock[r] = std::max(clock[r], it->second);
          posted.erase(it);
        } else {
          const PipelineStageTimes &t = times[size_t(stage)];
          const double d = op.kind == Kind::Forward    ? t.forward
                           : op.kind == Kind::Backward ? t.backward
                                                       : t.weight;
          sim.spans.push_back({int64_t(r), op.kind, op.microBatch, clock[r],
                               clock[r] + d, op.chunk});
          clock[r] += d;
          sim.busy[r] += d;
        }
        ++next[r];
        moved = true;
      }
    }
  }
  for (size_t r = 0; r < ranks; ++r)
    if (next[r] < steps[r].size()) {
      const PipelineStepOp &op = steps[r][next[r]];
      error = "stage " + std::to_string(r) +
              " cannot complete its receive from stage " +
              std::to_string(op.peer) + " of micro-batch " +
              std::to_string(op.microBatch) + " (instruction " +
              std::to_string(next[r]) + ")";
      return std::nullopt;
    }
  if (!posted.empty()) {
    const auto &[key, when] = *posted.begin();
    error = "stage " + std::to_string(std::get<0>(key) % p) + "'s " +
            (std::get<1>(key) ? "gradient" : "activation") +
            " of micro-batch " + std::to_string(std::get<2>(key)) +
            " is sent and never received";
    return std::nullopt;
  }
  sim.makespan = *std::max_element(clock.begin(), clock.end());
  const double busiest = *std::max_element(sim.busy.begin(), sim.busy.end());
  sim.bubble = busiest > 0 ? (sim.makespan - busiest) / busiest : 0.0;
  return sim;
}

/// The simulated step as text, one row per rank (per rank and chunk with
/// virtual stages), `columns` characters for the step: digits are forwards
/// (micro-batch mod 10), lower-case letters backwards (a = micro-batch 0),
/// upper-case letters weight-gradient parts (A = micro-batch 0), dots idle.
inline std::vector<std::string>
renderPipelineTimeline(const PipelineSimulation &sim, int64_t ranks,
                       int64_t virtualStages, int columns = 100) {
  using Kind = PipelineStepOp::Kind;
  const int64_t rows = ranks * virtualStages;
  std::vector<std::string> lines(size_t(rows),
                                 std::string(size_t(columns), '.'));
  for (const PipelineSpan &span : sim.spans) {
    if (sim.makespan <= 0 || span.end <= span.start)
      continue;
    const char mark =
        span.kind == Kind::Forward    ? char('0' + span.microBatch % 10)
        : span.kind == Kind::Backward ? char('a' + span.microBatch % 26)
                                      : char('A' + span.microBatch % 26);
    const int from = int(span.start / sim.makespan * columns + 0.5);
    const int to = int(span.end / sim.makespan * columns + 0.5);
    const size_t row = size_t(span.stage * virtualStages + span.chunk);
    for (int c = from; c < std::min(to, columns); ++c)
      lines[row][size_t(c)] = mark;
  }
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t c = 0; c < virtualStages; ++c) {
      std::string label = "stage " + std::to_string(r);
      if (virtualStages > 1)
        label = "rank " + std::to_string(r) + " chunk " + std::to_string(c) +
                " (stage " + std::to_string(c * ranks + r) + ")";
      lines[size_t(r * virtualStages + c)] =
          label + " |" + lines[size_t(r * virtualStages + c)] + "|";
    }
  return lines;
}

} // namespace dsc

#endif // DSC_SUPPORT_PIPELINESIMULATION_H
