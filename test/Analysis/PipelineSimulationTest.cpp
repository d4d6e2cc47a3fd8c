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
  auto steps = stepsOf(PipelineScheduleKind::OneFOneB, 2, 2);
  // Stage 1 never receives micro-batch 1's activation.
  auto &last = steps[1];
  for (auto it = last.begin(); it != last.end(); ++it)
    if (it->kind == PipelineStepOp::Kind::Recv && it->microBatch == 1) {
      last.erase(it);
      break;
    }
  std::string error;
  std::vector<dsc::PipelineStageTimes> times(2, {1.0, 2.0});
  EXPECT_FALSE(dsc::simulatePipeline(steps, times, error));
  EXPECT_NE(error.find("cannot complete"), std::string::npos) << error;
}

} // namespace
