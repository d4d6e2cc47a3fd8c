//===- PipelineStep.h - a pipeline stage's step, in order -------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The order of one pipeline rank's step under a schedule: its forwards and
// backwards per micro-batch (and model chunk) and its messages to the
// neighbouring ranks.
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
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace dsc {

/// One instruction of a pipeline rank's step. Without virtual stages a
/// rank is a stage and its `chunk` is 0; with v (interleaved 1F1B) rank r
/// holds the model chunks c = 0 .. v-1, stages c*P + r.
struct PipelineStepOp {
  /// Backward is the whole backward of a stage, except under a zero-bubble
  /// schedule, where it is the activation-gradient part (B) and
  /// BackwardWeight the weight-gradient part (W).
  enum class Kind { Forward, Backward, Send, Recv, BackwardWeight };
  Kind kind = Kind::Forward;
  int64_t microBatch = 0;
  /// Send and Recv: the other rank.
  int64_t peer = 0;
  /// Send and Recv: a gradient (down the pipeline) rather than an
  /// activation (up it).
  bool gradient = false;
  /// The rank's model chunk that computes or whose boundary value moves.
  int64_t chunk = 0;
};

/// A stage's time for one micro-batch's forward and backward (the backward
/// as the stage runs it: dsc's recomputes the forward first) and, under a
/// zero-bubble schedule, its weight-gradient part (then `backward` is the
/// activation-gradient part alone).
struct PipelineStageTimes {
  double forward = 0, backward = 0, weight = 0;
};

/// Why P ranks with v model chunks each cannot run `kind` over M
/// micro-batches, or none. Megatron-LM's rules for the interleaved
/// schedule: at least two chunks and two ranks, and M a multiple of P (the
/// micro-batches go through the chunks in groups of P).
inline std::optional<std::string> pipelineShapeError(PipelineScheduleKind kind,
                                                     int64_t ranks,
                                                     int64_t virtualStages,
                                                     int64_t microBatches) {
  const std::string name = pipelineScheduleName(kind);
  if (ranks < 1 || microBatches < 1 || virtualStages < 1)
    return name + " needs pp >= 1, micro-batches >= 1 and virtual-stages " +
           ">= 1, got pp=" + std::to_string(ranks) + ", " +
           std::to_string(microBatches) +
           " micro-batches, virtual-stages=" + std::to_string(virtualStages);
  if (kind != PipelineScheduleKind::InterleavedOneFOneB) {
    if (virtualStages != 1)
      return "virtual-stages=" + std::to_string(virtualStages) +
             " needs pipeline-schedule=interleaved-1f1b, not " + name;
    return std::nullopt;
  }
  if (virtualStages < 2)
    return "interleaved-1f1b needs virtual-stages >= 2 model chunks per "
           "rank, got " +
           std::to_string(virtualStages);
  if (ranks < 2)
    return "interleaved-1f1b needs pp >= 2, got pp=" + std::to_string(ranks);
  if (microBatches % ranks != 0)
    return "interleaved-1f1b runs the micro-batches in groups of pp: " +
           std::to_string(microBatches) +
           " micro-batches is not a multiple of pp=" + std::to_string(ranks);
  return std::nullopt;
}

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
      ops.push_back({Kind::Recv, m, stage - 1, false});
  };
  auto sendActivation = [&](int64_t m) {
    if (!last)
      ops.push_back({Kind::Send, m, stage + 1, false});
  };
  auto recvGradient = [&](int64_t m) {
    if (!last)
      ops.push_back({Kind::Recv, m, stage + 1, true});
  };
  auto sendGradient = [&](int64_t m) {
    if (!first)
      ops.push_back({Kind::Send, m, stage - 1, true});
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

/// The forwards and backwards (and, zero-bubble, the weight-gradient
/// parts) of rank `rank` of `ranks` in order, without messages, for the
/// interleaved and zero-bubble schedules (GPipe's and 1F1B's steps are
/// pipelineStageStep's, messages included).
inline std::vector<PipelineStepOp>
pipelineComputeOrder(PipelineScheduleKind kind, int64_t ranks,
                     int64_t virtualStages, int64_t rank,
                     int64_t microBatches) {
  using Kind = PipelineStepOp::Kind;
  std::vector<PipelineStepOp> ops;
  const int64_t p = ranks, v = virtualStages, m = microBatches;
  if (kind == PipelineScheduleKind::InterleavedOneFOneB) {
    // Megatron-LM's forward_backward_pipelining_with_interleaving: the
    // rank's v*M forwards run the chunks in turn over groups of P
    // micro-batches; the backwards the chunks in reverse. Warm-up:
    // 2(P-r-1) + (v-1)P forwards (all of them when M = P).
    const int64_t total = m * v;
    const int64_t warmup =
        m == p ? total : std::min((p - rank - 1) * 2 + (v - 1) * p, total);
    auto chunkOf = [&](int64_t k, bool forward) {
      const int64_t c = (k % (p * v)) / p;
      return forward ? c : v - 1 - c;
    };
    auto microBatchOf = [&](int64_t k) { return k / (p * v) * p + k % p; };
    auto forward = [&](int64_t k) {
      ops.push_back(
          {Kind::Forward, microBatchOf(k), 0, false, chunkOf(k, true)});
    };
    auto backward = [&](int64_t k) {
      ops.push_back(
          {Kind::Backward, microBatchOf(k), 0, false, chunkOf(k, false)});
    };
    for (int64_t k = 0; k < warmup; ++k)
      forward(k);
    for (int64_t k = 0; k < total - warmup; ++k) {
      forward(warmup + k);
      backward(k);
    }
    for (int64_t k = total - warmup; k < total; ++k)
      backward(k);
    return ops;
  }
  // ZB-H1 (one chunk per rank): 1F1B's warm-up and order of F and B.
  const int64_t warmup = std::min(p - rank - 1, m);
  int64_t forwards = 0, backwards = 0, weights = 0;
  auto forward = [&] { ops.push_back({Kind::Forward, forwards++}); };
  // ZB-H1 keeps rank r's first r weight-gradient parts back (1F1B's stage
  // r holds P-r micro-batches, so it holds P at most, stage 0's count) and
  // in the cool-down runs one after each B, where the gradient from the
  // next stage is still on its way.
  auto backward = [&](bool coolDown) {
    ops.push_back({Kind::Backward, backwards++});
    if (backwards - weights > rank || coolDown)
      ops.push_back({Kind::BackwardWeight, weights++});
  };
  for (int64_t i = 0; i < warmup; ++i)
    forward();
  for (int64_t i = 0; i < m - warmup; ++i) {
    forward();
    backward(false);
  }
  for (int64_t i = 0; i < warmup; ++i)
    backward(true);
  while (weights < m)
    ops.push_back({Kind::BackwardWeight, weights++});
  return ops;
}

/// Places the messages of the ranks' compute orders (P ranks, v chunks,
/// stage c*P + r) so that blocking sends and receives cannot deadlock:
/// the step runs once on a clock with `times` (one per stage) and
/// messages that arrive when they are sent; each rank then issues its
/// messages and computes in the order of that clock (a message at its
/// send time, before a compute starting then; ties in the order of the
/// messages), one order for all ranks, so the earliest message still to
/// run always has both ends at it. Returns the ranks' steps.
inline std::vector<std::vector<PipelineStepOp>>
placePipelineMessages(const std::vector<std::vector<PipelineStepOp>> &orders,
                      int64_t virtualStages,
                      const std::vector<PipelineStageTimes> &times) {
  using Kind = PipelineStepOp::Kind;
  const int64_t p = int64_t(orders.size()), stages = p * virtualStages;
  // (stage that sent it, gradient, micro-batch) -> arrival, message index.
  std::map<std::tuple<int64_t, bool, int64_t>, std::pair<double, int64_t>>
      arrived;
  struct Event {
    double time;
    int order; // 0 message, 1 compute
    int64_t index;
    PipelineStepOp op;
  };
  std::vector<std::vector<Event>> events(static_cast<size_t>(p));
  std::vector<size_t> next(size_t(p), 0);
  std::vector<double> clock(size_t(p), 0.0);
  int64_t messages = 0;
  // A compute that takes no time (the last stage's forward, which runs
  // inside its backward) still ends after it starts, so that what it sends
  // comes after it: a millionth of the longest compute (1 when all are 0).
  double longest = 0;
  for (const PipelineStageTimes &t : times)
    longest = std::max({longest, t.forward, t.backward, t.weight});
  const double least = longest > 0 ? longest * 1e-6 : 1.0;
  auto timeOf = [&](int64_t stage, Kind kind) {
    const PipelineStageTimes &t = times[size_t(stage)];
    const double d = kind == Kind::Forward    ? t.forward
                     : kind == Kind::Backward ? t.backward
                                              : t.weight;
    return std::max(d, least);
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int64_t r = 0; r < p; ++r) {
      while (next[size_t(r)] < orders[size_t(r)].size()) {
        const PipelineStepOp &op = orders[size_t(r)][next[size_t(r)]];
        const int64_t stage = op.chunk * p + r;
        double start = clock[size_t(r)];
        const bool needs = (op.kind == Kind::Forward && stage > 0) ||
                           (op.kind == Kind::Backward && stage < stages - 1);
        if (needs) {
          const bool gradient = op.kind == Kind::Backward;
          auto it = arrived.find(
              {gradient ? stage + 1 : stage - 1, gradient, op.microBatch});
          if (it == arrived.end())
            break;
          start = std::max(start, it->second.first);
        }
        const double end = start + timeOf(stage, op.kind);
        events[size_t(r)].push_back(
            {start, 1, int64_t(events[size_t(r)].size()), op});
        clock[size_t(r)] = end;
        ++next[size_t(r)];
        moved = true;
        const bool sends = (op.kind == Kind::Forward && stage < stages - 1) ||
                           (op.kind == Kind::Backward && stage > 0);
        if (!sends)
          continue;
        const bool gradient = op.kind == Kind::Backward;
        const int64_t to = gradient ? stage - 1 : stage + 1;
        const int64_t peer = to % p;
        arrived[{stage, gradient, op.microBatch}] = {end, messages};
        if (peer == r)
          continue; // P = 1: the value stays on the rank.
        events[size_t(r)].push_back(
            {end,
             0,
             messages,
             {Kind::Send, op.microBatch, peer, gradient, op.chunk}});
        events[size_t(peer)].push_back(
            {end,
             0,
             messages,
             {Kind::Recv, op.microBatch, r, gradient, to / p}});
        ++messages;
      }
    }
  }
  std::vector<std::vector<PipelineStepOp>> steps(static_cast<size_t>(p));
  for (int64_t r = 0; r < p; ++r) {
    std::vector<Event> &e = events[size_t(r)];
    std::stable_sort(e.begin(), e.end(), [](const Event &a, const Event &b) {
      return std::tie(a.time, a.order, a.index) <
             std::tie(b.time, b.order, b.index);
    });
    for (const Event &event : e)
      steps[size_t(r)].push_back(event.op);
  }
  return steps;
}

/// Every rank's step: P ranks (one per stage unless interleaved), v model
/// chunks each. `times` (one per stage, c*P + r) decide where the messages
/// of the interleaved and zero-bubble schedules go; GPipe's and 1F1B's
/// are pipelineStageStep's. pipelineShapeError must have accepted the
/// shape.
inline std::vector<std::vector<PipelineStepOp>>
pipelineSteps(PipelineScheduleKind kind, int64_t ranks, int64_t virtualStages,
              int64_t microBatches,
              const std::vector<PipelineStageTimes> &times) {
  std::vector<std::vector<PipelineStepOp>> steps;
  if (kind == PipelineScheduleKind::GPipe ||
      kind == PipelineScheduleKind::OneFOneB) {
    for (int64_t r = 0; r < ranks; ++r)
      steps.push_back(pipelineStageStep(kind, ranks, r, microBatches));
    return steps;
  }
  for (int64_t r = 0; r < ranks; ++r)
    steps.push_back(
        pipelineComputeOrder(kind, ranks, virtualStages, r, microBatches));
  return placePipelineMessages(steps, virtualStages, times);
}

} // namespace dsc

#endif // DSC_SUPPORT_PIPELINESTEP_H
