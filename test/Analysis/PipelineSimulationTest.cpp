//===- PipelineSimulationTest.cpp - the schedules on a clock --------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The steps --dsc-pipeline-schedule writes (PipelineStep.h), run on a clock
// (PipelineSimulation.h): with equal stages the bubble is the papers'
// (p-1)/m for GPipe and 1F1B, 1F1B keeps at most P-k micro-batches in
// flight on stage k where GPipe keeps M, every message meets its match,
// and a broken step is reported, not hung.
//
//===----------------------------------------------------------------------===//

#include "dsc/Support/PipelineSimulation.h"

#include <gtest/gtest.h>

#include <set>

namespace {

using dsc::PipelineScheduleKind;
using dsc::PipelineStepOp;

std::vector<std::vector<PipelineStepOp>>
stepsOf(PipelineScheduleKind kind, int64_t stages, int64_t microBatches) {
  std::vector<std::vector<PipelineStepOp>> steps;
  for (int64_t k = 0; k < stages; ++k)
    steps.push_back(dsc::pipelineStageStep(kind, stages, k, microBatches));
  return steps;
}

/// The most micro-batches stage `ops` has forwarded and not yet run the
/// backward of.
int64_t peakInFlight(const std::vector<PipelineStepOp> &ops) {
  int64_t inFlight = 0, peak = 0;
  for (const PipelineStepOp &op : ops) {
    if (op.kind == PipelineStepOp::Kind::Forward)
      peak = std::max(peak, ++inFlight);
    else if (op.kind == PipelineStepOp::Kind::Backward)
      --inFlight;
  }
  return peak;
}

TEST(PipelineSimulation, EqualStagesHaveTheBubbleOfThePapers) {
  for (PipelineScheduleKind kind :
       {PipelineScheduleKind::GPipe, PipelineScheduleKind::OneFOneB})
    for (int64_t p : {2, 3, 4, 8})
      for (int64_t m : {1, 2, 4, 7, 16}) {
        std::string error;
        std::vector<dsc::PipelineStageTimes> times(size_t(p), {1.0, 2.0});
        auto sim = dsc::simulatePipeline(stepsOf(kind, p, m), times, error);
        ASSERT_TRUE(sim) << error;
        EXPECT_NEAR(sim->bubble, double(p - 1) / double(m), 1e-12)
            << dsc::pipelineScheduleName(kind) << " p=" << p << " m=" << m;
        EXPECT_NEAR(sim->makespan, double(m + p - 1) * 3.0, 1e-12);
      }
}

TEST(PipelineSimulation, OneFOneBKeepsFewerMicroBatchesInFlight) {
  const int64_t p = 4, m = 8;
  auto gpipe = stepsOf(PipelineScheduleKind::GPipe, p, m);
  auto onef = stepsOf(PipelineScheduleKind::OneFOneB, p, m);
  for (int64_t k = 0; k < p; ++k) {
    EXPECT_EQ(peakInFlight(gpipe[size_t(k)]), m);
    EXPECT_EQ(peakInFlight(onef[size_t(k)]), p - k);
  }
}

TEST(PipelineSimulation, EveryStageRunsEachMicroBatchOnceInOrder) {
  for (PipelineScheduleKind kind :
       {PipelineScheduleKind::GPipe, PipelineScheduleKind::OneFOneB}) {
    auto steps = stepsOf(kind, 3, 5);
    for (size_t k = 0; k < steps.size(); ++k) {
      int64_t forwards = 0, backwards = 0, sends = 0;
      for (const PipelineStepOp &op : steps[k]) {
        if (op.kind == PipelineStepOp::Kind::Forward)
          EXPECT_EQ(op.microBatch, forwards++);
        if (op.kind == PipelineStepOp::Kind::Backward) {
          EXPECT_EQ(op.microBatch, backwards++);
          EXPECT_LE(backwards, forwards);
        }
        sends += op.kind == PipelineStepOp::Kind::Send;
      }
      EXPECT_EQ(forwards, 5);
      EXPECT_EQ(backwards, 5);
      // An activation up and a gradient down per micro-batch and
      // neighbour.
      EXPECT_EQ(sends, 5 * ((k > 0) + (k + 1 < steps.size())));
    }
  }
}

TEST(PipelineSimulation, UnequalStagesWaitForTheSlowest) {
  // Stage 1 twice as slow: the step takes at least its M busy units, and
  // the bubble is measured against it.
  std::string error;
  std::vector<dsc::PipelineStageTimes> times = {{1, 2}, {2, 4}};
  auto sim = dsc::simulatePipeline(
      stepsOf(PipelineScheduleKind::OneFOneB, 2, 4), times, error);
  ASSERT_TRUE(sim) << error;
  EXPECT_DOUBLE_EQ(sim->busy[1], 4 * 6.0);
  EXPECT_GE(sim->makespan, sim->busy[1]);
  EXPECT_NEAR(sim->bubble, (sim->makespan - 24.0) / 24.0, 1e-12);
}

TEST(PipelineSimulation, AStepThatCannotFinishIsReported) {
  // Stage 0 never sends micro-batch 1's activation: stage 1 waits for it
  // and stage 0 for the gradient stage 1 sends after it.
  auto steps = stepsOf(PipelineScheduleKind::OneFOneB, 2, 2);
  auto &first = steps[0];
  for (auto it = first.begin(); it != first.end(); ++it)
    if (it->kind == PipelineStepOp::Kind::Send && it->microBatch == 1) {
      first.erase(it);
      break;
    }
  std::string error;
  std::vector<dsc::PipelineStageTimes> times(2, {1.0, 2.0});
  EXPECT_FALSE(dsc::simulatePipeline(steps, times, error));
  EXPECT_NE(error.find("stage 0 cannot complete its receive from stage 1 "
                       "of micro-batch 0"),
            std::string::npos)
      << error;
}

TEST(PipelineSimulation, AMessageNobodyReceivesIsReported) {
  auto steps = stepsOf(PipelineScheduleKind::OneFOneB, 2, 2);
  auto &last = steps[1];
  for (auto it = last.begin(); it != last.end(); ++it)
    if (it->kind == PipelineStepOp::Kind::Recv && it->microBatch == 1) {
      last.erase(it);
      break;
    }
  std::string error;
  std::vector<dsc::PipelineStageTimes> times(2, {1.0, 2.0});
  EXPECT_FALSE(dsc::simulatePipeline(steps, times, error));
  EXPECT_NE(error.find("stage 0's activation of micro-batch 1 is sent and "
                       "never received"),
            std::string::npos)
      << error;
}

/// Runs `steps` with blocking sends (a send and its receive complete
/// together): whether the message order cannot deadlock, what
/// --dsc-verify-collectives proves of the compiled steps.
bool runsWithBlockingSends(
    const std::vector<std::vector<PipelineStepOp>> &steps,
    int64_t virtualStages) {
  using Kind = PipelineStepOp::Kind;
  const int64_t p = int64_t(steps.size());
  std::vector<size_t> next(steps.size(), 0);
  auto isMessage = [](const PipelineStepOp &op) {
    return op.kind == Kind::Send || op.kind == Kind::Recv;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int64_t r = 0; r < p; ++r) {
      auto &n = next[size_t(r)];
      while (n < steps[size_t(r)].size() && !isMessage(steps[size_t(r)][n])) {
        ++n;
        moved = true;
      }
      if (n == steps[size_t(r)].size())
        continue;
      const PipelineStepOp &op = steps[size_t(r)][n];
      auto &m = next[size_t(op.peer)];
      if (m == steps[size_t(op.peer)].size())
        continue;
      const PipelineStepOp &other = steps[size_t(op.peer)][m];
      // The same message seen from its two ends: the peer's chunk is the
      // next or previous stage's.
      const int64_t stage = op.chunk * p + r;
      const int64_t otherStage = other.chunk * p + op.peer;
      const int64_t sender = op.kind == Kind::Send ? stage : otherStage;
      const int64_t receiver = op.kind == Kind::Send ? otherStage : stage;
      if (isMessage(other) && other.kind != op.kind && other.peer == r &&
          other.gradient == op.gradient && other.microBatch == op.microBatch &&
          receiver == sender + (op.gradient ? -1 : 1) &&
          receiver < p * virtualStages) {
        ++n;
        ++m;
        moved = true;
      }
    }
  }
  for (size_t r = 0; r < steps.size(); ++r)
    if (next[r] != steps[r].size())
      return false;
  return true;
}

TEST(PipelineSimulation, InterleavedHasMegatronsBubble) {
  for (int64_t p : {2, 3, 4, 8})
    for (int64_t v : {2, 3, 4})
      for (int64_t m : {p, 2 * p, 4 * p}) {
        ASSERT_FALSE(dsc::pipelineShapeError(
            PipelineScheduleKind::InterleavedOneFOneB, p, v, m));
        std::vector<dsc::PipelineStageTimes> times(size_t(p * v), {1.0, 2.0});
        auto steps = dsc::pipelineSteps(
            PipelineScheduleKind::InterleavedOneFOneB, p, v, m, times);
        std::string error;
        auto sim = dsc::simulatePipeline(steps, times, error);
        ASSERT_TRUE(sim) << error;
        EXPECT_NEAR(sim->bubble, double(p - 1) / double(v * m), 1e-12)
            << "p=" << p << " v=" << v << " m=" << m;
        EXPECT_TRUE(runsWithBlockingSends(steps, v))
            << "p=" << p << " v=" << v << " m=" << m;
      }
}

TEST(PipelineSimulation, CompiledStageTimesGiveThePapersBubbles) {
  // As --dsc-pipeline-schedule times the compiled stages: a split stage's
  // forward F and backward 2F (--dsc-stage-backward), the last stage's
  // forward inside its backward (0 and 3F). Equal layers give the papers'
  // bubbles once the micro-batches outnumber the ranks.
  for (int64_t p : {2, 4})
    for (int64_t v : {1, 2}) {
      const int64_t m = 2 * p, stages = p * v;
      std::vector<dsc::PipelineStageTimes> times(size_t(stages), {1.0, 2.0});
      times.back() = {0.0, 3.0};
      const PipelineScheduleKind kind =
          v == 1 ? PipelineScheduleKind::OneFOneB
                 : PipelineScheduleKind::InterleavedOneFOneB;
      std::string error;
      auto sim = dsc::simulatePipeline(dsc::pipelineSteps(kind, p, v, m, times),
                                       times, error);
      ASSERT_TRUE(sim) << error;
      EXPECT_NEAR(sim->bubble, double(p - 1) / double(v * m), 1e-12)
          << "p=" << p << " v=" << v;
    }
}

TEST(PipelineSimulation, InterleavedRunsEveryChunkOfEveryMicroBatch) {
  const int64_t p = 4, v = 2, m = 8;
  std::vector<dsc::PipelineStageTimes> times(size_t(p * v), {1.0, 2.0});
  auto steps = dsc::pipelineSteps(PipelineScheduleKind::InterleavedOneFOneB, p,
                                  v, m, times);
  for (int64_t r = 0; r < p; ++r) {
    std::set<std::pair<int64_t, int64_t>> forwarded, backwarded;
    int64_t sends = 0;
    for (const PipelineStepOp &op : steps[size_t(r)]) {
      if (op.kind == PipelineStepOp::Kind::Forward) {
        EXPECT_TRUE(forwarded.insert({op.chunk, op.microBatch}).second);
      }
      if (op.kind == PipelineStepOp::Kind::Backward) {
        EXPECT_TRUE(forwarded.count({op.chunk, op.microBatch}));
        EXPECT_TRUE(backwarded.insert({op.chunk, op.microBatch}).second);
      }
      sends += op.kind == PipelineStepOp::Kind::Send;
    }
    EXPECT_EQ(forwarded.size(), size_t(v * m));
    EXPECT_EQ(backwarded.size(), size_t(v * m));
    // Each of the rank's v stages sends an activation up and a gradient
    // down per micro-batch, except at the two ends of the model.
    const int64_t ends = (r == 0) + (r == p - 1);
    EXPECT_EQ(sends, (2 * v - ends) * m) << "rank " << r;
  }
}

TEST(PipelineSimulation, ZeroBubbleH1HasThePapersBubble) {
  // Qi et al. 2024: ZB-H1's step is M(F+B+W) + (P-1)(F+B-W) where 1F1B's
  // is (M+P-1)(F+B+W), for M >= P.
  const dsc::PipelineStageTimes shapes[] = {
      {1, 1, 1}, {1, 2, 1}, {1, 1.5, 0.8}, {2, 1, 1}, {1, 1, 0.5}};
  for (const dsc::PipelineStageTimes &t : shapes)
    for (int64_t p : {2, 3, 4, 8})
      for (int64_t m : {p, 2 * p, 3 * p + 1}) {
        std::vector<dsc::PipelineStageTimes> times(size_t(p), t);
        auto steps = dsc::pipelineSteps(PipelineScheduleKind::ZeroBubbleH1, p,
                                        1, m, times);
        std::string error;
        auto sim = dsc::simulatePipeline(steps, times, error);
        ASSERT_TRUE(sim) << error;
        const double step = t.forward + t.backward + t.weight;
        EXPECT_NEAR(sim->makespan,
                    double(m) * step +
                        double(p - 1) * (t.forward + t.backward - t.weight),
                    1e-9)
            << "p=" << p << " m=" << m << " F=" << t.forward
            << " B=" << t.backward << " W=" << t.weight;
        EXPECT_TRUE(runsWithBlockingSends(steps, 1)) << "p=" << p;
      }
}

TEST(PipelineSimulation, ZeroBubbleH1HoldsNoMoreThanOneFOneB) {
  // A micro-batch's activations live from its forward to its W; 1F1B's
  // stage 0 holds P of them, and no ZB-H1 rank holds more.
  for (int64_t p : {2, 4, 8})
    for (int64_t m : {int64_t(1), p, 3 * p}) {
      std::vector<dsc::PipelineStageTimes> times(size_t(p), {1, 1, 1});
      auto steps = dsc::pipelineSteps(PipelineScheduleKind::ZeroBubbleH1, p, 1,
                                      m, times);
      for (const auto &ops : steps) {
        int64_t held = 0, peak = 0, weights = 0, backwards = 0;
        for (const PipelineStepOp &op : ops) {
          if (op.kind == PipelineStepOp::Kind::Forward)
            peak = std::max(peak, ++held);
          if (op.kind == PipelineStepOp::Kind::Backward)
            ++backwards;
          if (op.kind == PipelineStepOp::Kind::BackwardWeight) {
            --held;
            // Each W follows its own B.
            EXPECT_LT(op.microBatch, backwards);
            EXPECT_EQ(op.microBatch, weights++);
          }
        }
        EXPECT_EQ(weights, m);
        EXPECT_LE(peak, std::min(p, m));
      }
    }
}

TEST(PipelineSimulation, ShapesTheInterleavedScheduleRefuses) {
  using K = PipelineScheduleKind;
  EXPECT_EQ(
      dsc::pipelineShapeError(K::InterleavedOneFOneB, 4, 2, 6).value_or(""),
      "interleaved-1f1b runs the micro-batches in groups of pp: 6 "
      "micro-batches is not a multiple of pp=4");
  EXPECT_EQ(
      dsc::pipelineShapeError(K::InterleavedOneFOneB, 4, 1, 8).value_or(""),
      "interleaved-1f1b needs virtual-stages >= 2 model chunks per "
      "rank, got 1");
  EXPECT_EQ(
      dsc::pipelineShapeError(K::InterleavedOneFOneB, 1, 2, 8).value_or(""),
      "interleaved-1f1b needs pp >= 2, got pp=1");
  EXPECT_EQ(dsc::pipelineShapeError(K::OneFOneB, 4, 2, 8).value_or(""),
            "virtual-stages=2 needs pipeline-schedule=interleaved-1f1b, not "
            "1f1b");
  EXPECT_FALSE(dsc::pipelineShapeError(K::ZeroBubbleH1, 4, 1, 3));
}

} // namespace
