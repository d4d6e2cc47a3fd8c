//===- ExecutorOverlapTest.cpp - Collectives beside compute ---------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Executor::setOverlapCommunication on the CPU backend's lane (a worker
// thread per rank). The oracle is the same plan with overlap off: each
// group's collectives keep their order and reduce the same bytes, so the
// losses and weights must be equal bit for bit; and the launch points must
// respect every byte an instruction between a launch and its place touches,
// checked here from the plan's buffers, not from the executor's tables.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Data.h"
#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/ThreadCommunicator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

using namespace dsc::rt;

namespace {

constexpr int kSteps = 4;

Plan zero3Plan() {
  return readPlanFile(std::string(DSC_TEST_INPUTS) +
                      "/gpt-tiny-dp2-zero3.plan");
}

Plan prefetchPlan() {
  return readPlanFile(std::string(DSC_TEST_INPUTS) +
                      "/gpt-tiny-dp2-zero3-prefetch.plan");
}

bool touchesSameBytes(const Plan &plan, const Instruction &a,
                      const Instruction &b) {
  auto ids = [](const Instruction &i) {
    std::vector<uint32_t> all = i.inputs;
    all.insert(all.end(), i.outputs.begin(), i.outputs.end());
    return all;
  };
  for (uint32_t x : ids(a))
    for (uint32_t y : ids(b)) {
      const Buffer &p = plan.buffers[x], &q = plan.buffers[y];
      if (p.arena == q.arena && p.bytes && q.bytes &&
          p.offset < q.offset + q.bytes && q.offset < p.offset + p.bytes)
        return true;
    }
  return false;
}

struct RankResult {
  std::vector<double> losses;
  std::vector<std::vector<double>> params;
};

/// kSteps steps of a dp=2 plan on two thread ranks.
std::vector<RankResult> train(const Plan &plan, bool overlap) {
  auto source = openTokenSource("", plan.vocabSize);
  BatchSampler sampler(*source, plan.microBatchSize, plan.seqLength, 1234,
                       plan.vocabSize);
  std::vector<RankResult> results(2);
  runRanks(2, [&](Communicator &world) {
    Executor ex(plan, 1234, &world);
    ex.setOverlapCommunication(overlap);
    EXPECT_EQ(ex.overlapsCommunication(), overlap);
    RankResult &r = results[size_t(world.rank())];
    const int64_t M = plan.microBatches, batch = plan.microBatchSize;
    for (int s = 0; s < kSteps; ++s) {
      auto fill = [&](int64_t m, int32_t *tokens, int32_t *targets) {
        sampler.sample(((int64_t(s) * 2 + world.rank()) * M + m) * batch, batch,
                       tokens, targets);
      };
      r.losses.push_back(ex.trainStep(fill, M).loss);
    }
    for (const Buffer &b : plan.buffers)
      if (b.role == BufferRole::Parameter)
        r.params.push_back(ex.read(b.name));
  });
  return results;
}

TEST(ExecutorOverlap, TrainsBitForBitLikeCollectivesInPlace) {
  for (const Plan &plan : {zero3Plan(), prefetchPlan()}) {
    std::vector<RankResult> inPlace = train(plan, false),
                            beside = train(plan, true);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(beside[r].losses, inPlace[r].losses) << "rank " << r;
      EXPECT_EQ(beside[r].params, inPlace[r].params) << "rank " << r;
    }
  }
  // Prefetch changes where bytes are, not what is computed.
  EXPECT_EQ(train(zero3Plan(), true)[0].losses,
            train(prefetchPlan(), true)[0].losses);
}

TEST(ExecutorOverlap, ChunksFetchedFromNvmeTrainLikeZero3OnTheDevice) {
  // ZeRO-Infinity (gpt-tiny-dp2-zero3-params-nvme.plan: the chunks, masters
  // and moments on NVMe): every gather reads a chunk the NVMe lane fetched,
  // with the gathers launched early on the collectives' lane, which must
  // wait for the fetch's bytes. The update is the CPU Adam's (the last
  // bits of the device kernel's differ): the losses within 1e-6.
  Plan plan = readPlanFile(std::string(DSC_TEST_INPUTS) +
                           "/gpt-tiny-dp2-zero3-params-nvme.plan");
  const std::string dir = ::testing::TempDir() + "/dsc-params-nvme";
  std::filesystem::create_directories(dir);
  plan.nvmePath = dir;
  const std::vector<RankResult> device = train(zero3Plan(), false);
  for (bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "collectives beside compute" : "in place");
    const std::vector<RankResult> offloaded = train(plan, overlap);
    for (int r = 0; r < 2; ++r)
      for (int s = 0; s < kSteps; ++s)
        EXPECT_NEAR(offloaded[r].losses[s], device[r].losses[s],
                    1e-6 * std::abs(device[r].losses[s]))
            << "rank " << r << " step " << s;
  }
  std::filesystem::remove_all(dir);
}

/// Checks `plan`'s forward_backward launch points on two ranks against the
/// plan's buffers and stores them in `points`.
void checkLaunchPoints(const Plan &plan,
                       std::vector<std::pair<size_t, size_t>> &points) {
  std::vector<std::vector<std::pair<size_t, size_t>>> ofRank(2);
  runRanks(2, [&](Communicator &world) {
    Executor ex(plan, 1234, &world);
    ex.setOverlapCommunication(true);
    ofRank[size_t(world.rank())] =
        ex.collectiveLaunchPoints("forward_backward");
  });
  EXPECT_EQ(ofRank[0], ofRank[1]) << "ranks launch at different points";
  points = ofRank[0];
  const Program *prog = plan.findProgram("forward_backward");
  ASSERT_NE(prog, nullptr);
  size_t hoisted = 0, previous = 0, collectives = 0, distance = 0;
  for (const Instruction &inst : prog->instructions)
    collectives += isCollective(inst.opcode);
  ASSERT_EQ(points.size(), collectives);
  size_t lastIndex = 0;
  for (auto [j, at] : points) {
    ASSERT_LE(at, j);
    // Launched in program order, none before the one before it.
    EXPECT_GE(j, lastIndex);
    EXPECT_GE(at, previous);
    lastIndex = j;
    previous = at;
    hoisted += at < j;
    // No compute between the launch and its place touches its bytes (the
    // collectives between were launched before it, on the same lane).
    distance += j - at;
    for (size_t i = at; i < j; ++i) {
      if (!isCollective(prog->instructions[i].opcode)) {
        EXPECT_FALSE(touchesSameBytes(plan, prog->instructions[i],
                                      prog->instructions[j]))
            << "collective " << j << " launched before instruction " << i
            << " which touches its bytes";
      }
    }
  }
  std::printf("%zu of %zu collectives launched ahead, %zu instructions "
              "ahead in all\n",
              hoisted, collectives, distance);
  // ZeRO-3's gathers are most of the collectives; the planner leaves most
  // of them free to go ahead of the compute before them.
  EXPECT_GT(hoisted, collectives / 2) << hoisted << " of " << collectives;
}

TEST(ExecutorOverlap, GathersAreLaunchedAheadOfTheirUseAndNoHazardIsCrossed) {
  std::vector<std::pair<size_t, size_t>> points;
  checkLaunchPoints(zero3Plan(), points);
}

TEST(ExecutorOverlap, WithPrefetchEachGatherIsLaunchedBesideThePrevious) {
  // --dsc-plan-memory prefetch reserves a gathered parameter's bytes from
  // the collective before it: nothing in between holds it back.
  Plan plan = prefetchPlan();
  std::vector<std::pair<size_t, size_t>> points;
  checkLaunchPoints(plan, points);
  const Program *prog = plan.findProgram("forward_backward");
  for (size_t k = 1; k < points.size(); ++k) {
    auto [j, at] = points[k];
    if (prog->instructions[j].opcode != Opcode::GatherParameter)
      continue;
    EXPECT_LE(at, points[k - 1].first + 1)
        << "gather " << j << " waits until " << at
        << ", after the collective before it at " << points[k - 1].first;
  }
}

TEST(ExecutorOverlap, OffByDefaultOnTheCpuAndWithoutGroups) {
  Plan plan = zero3Plan();
  runRanks(2, [&](Communicator &world) {
    Executor ex(plan, 1234, &world);
    EXPECT_FALSE(ex.overlapsCommunication());
  });
  Plan one = readPlanFile(std::string(DSC_TEST_INPUTS) + "/gpt-tiny-one.plan");
  Executor single(one, 1234);
  single.setOverlapCommunication(true);
  EXPECT_FALSE(single.overlapsCommunication()); // no groups to overlap
}

} // namespace
