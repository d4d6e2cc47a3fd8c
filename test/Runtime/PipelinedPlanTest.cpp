//===- PipelinedPlanTest.cpp - a compiled interleaved plan, read and fuzzed
//===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Inputs/gpt-tiny-pp2-interleaved.plan is what the compiler makes of
// gpt-tiny on 2 pipeline ranks with 2 model chunks each
// (test/Integration/cuda-test-plans.test keeps it current): its stages,
// the rank's optimizer and step on the first two, the residuals each split
// backward reads. Random byte flips in it are refused or read as a valid
// plan, never a crash.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Fnv1a.h"
#include "dsc/Runtime/Instructions.h"
#include "dsc/Runtime/Plan.h"
#include "dsc/Runtime/PlanIO.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

using namespace dsc::rt;

namespace {

std::vector<uint8_t> planBytes() {
  std::ifstream in(std::string(DSC_TEST_INPUTS) +
                       "/gpt-tiny-pp2-interleaved.plan",
                   std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(PipelinedPlan, InterleavedStagesAndResiduals) {
  std::vector<uint8_t> bytes = planBytes();
  ASSERT_FALSE(bytes.empty());
  Plan plan = readPlan(bytes.data(), bytes.size());
  EXPECT_EQ(plan.schedule, PipelineSchedule::InterleavedOneFOneB);
  ASSERT_EQ(plan.stages.size(), 4u);
  EXPECT_EQ(plan.pipelineRanks(), 2);
  for (size_t k = 0; k < plan.stages.size(); ++k) {
    const PipelineStage &st = plan.stages[k];
    // One optimizer and one step per rank, on its first stage.
    EXPECT_EQ(st.optimizer.empty(), k >= 2) << "stage " << k;
    EXPECT_EQ(st.step.empty(), k >= 2) << "stage " << k;
    // Every stage but the last keeps what its backward reads.
    EXPECT_EQ(st.residualsOut.empty(), k == 3) << "stage " << k;
    EXPECT_EQ(st.residualsOut.size(), st.residualsIn.size());
  }
  // A rank's step runs only its own stages: rank 1 holds 1 and 3.
  const Program *step = plan.findProgram(plan.stages[1].step);
  ASSERT_NE(step, nullptr);
  for (const Instruction &inst : step->instructions) {
    if (inst.opcode == Opcode::PipelineForward) {
      EXPECT_EQ(ops::PipelineForward::decode(inst).stage % 2, 1);
    }
  }
}

TEST(PipelinedPlan, RandomByteFlipsNeverCrash) {
  const std::vector<uint8_t> good = planBytes();
  ASSERT_GT(good.size(), kPlanHeaderSize);
  std::mt19937 rng(11);
  int refused = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> bytes = good;
    for (int f = 1 + int(rng() % 4); f > 0; --f)
      bytes[kPlanHeaderSize + rng() % (bytes.size() - kPlanHeaderSize)] =
          uint8_t(rng());
    // Sealed again, so that the flips reach the reader past the checksum.
    const uint64_t length = bytes.size() - kPlanHeaderSize;
    const uint64_t sum = fnv1a64(bytes.data() + kPlanHeaderSize, length);
    std::memcpy(bytes.data() + 16, &length, 8);
    std::memcpy(bytes.data() + 24, &sum, 8);
    try {
      Plan p = readPlan(bytes.data(), bytes.size());
      validatePlan(p); // what is accepted is valid
    } catch (const Error &) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

} // namespace
