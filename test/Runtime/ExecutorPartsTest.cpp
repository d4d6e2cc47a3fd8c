//===- ExecutorPartsTest.cpp - The executor's parts, each on its own ------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The parts the executor coordinates (lib/Runtime/Exec), built here without
// an executor from a hand-built plan and the CPU backend: what each owns and
// the errors it names, so a part can change without the whole training loop
// being the only test of it.
//
//===----------------------------------------------------------------------===//

#include "Arenas.h"
#include "LossScaling.h"
#include "MeshGroups.h"
#include "RunContext.h"
#include "TokenFeed.h"

#include "PlanTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {

/// The message of the Error `f` throws ("" when it throws none).
template <typename F> std::string errorOf(F &&f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

/// A plan and a prepared CPU backend, with the parts' lower layers.
struct Fixture {
  Plan plan;
  std::unique_ptr<Backend> backend = createCpuBackend();
  explicit Fixture(Plan p) : plan(std::move(p)) { backend->prepare(plan); }
};

TEST(ExecutorParts, ArenasHoldThePlannedBytesAndReadBackWhatWasWritten) {
  Fixture f(makeTinyPlan(DType::F64));
  Arenas arenas(f.plan, *f.backend, 0);
  EXPECT_EQ(arenas.allocatedBytes(0), f.plan.arenas[0].bytes);
  EXPECT_FALSE(arenas.hasNvme());
  EXPECT_TRUE(arenas.hostReachable(0));

  arenas.writeScalar(f.plan.loss, 2.5);
  EXPECT_EQ(arenas.readScalar(f.plan.loss), 2.5);
  std::vector<int32_t> ids(size_t(arenas.view(f.plan.tokens).size()), 7);
  arenas.writeBytes(f.plan.tokens, ids.data());
  std::vector<int32_t> back(ids.size(), 0);
  arenas.readBytes(f.plan.tokens, back.data());
  EXPECT_EQ(back, ids);

  arenas.zeroAll();
  EXPECT_EQ(arenas.readScalar(f.plan.loss), 0.0);
  EXPECT_NE(errorOf([&] { arenas.view(100000); }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              arenas.allocatedBytes(7);
            }).find("arena 7 does not exist (1 arenas)"),
            std::string::npos);
}

// The staging area holds what the neediest collective stages: an
// all-to-all with strided blocks (sendOuter or recvOuter > 1) all of its
// input, one with contiguous blocks nothing (it goes straight from x to y).
TEST(ExecutorParts, ArenasStageAStridedAllToAllWhole) {
  Plan plan = makeTinyPlan(DType::F32);
  plan.mesh = {{"ep", 2}};
  uint32_t x = addBuffer(plan, "x", DType::F32, {4, 3}, BufferRole::Temporary);
  uint32_t y = addBuffer(plan, "y", DType::F32, {4, 3}, BufferRole::Temporary);
  auto a2a = [&](int64_t sendOuter, int64_t recvOuter) {
    return makeInst(Opcode::AllToAll, {x}, {y}, "a2a",
                    {1, sendOuter, recvOuter}, {1.0});
  };
  plan.programs.push_back({"a2a", {a2a(1, 1)}});
  EXPECT_EQ(stagingBytesOf(plan, plan.programs.back().instructions[0]), 0u);
  {
    Fixture f(plan);
    EXPECT_EQ(Arenas(f.plan, *f.backend, 0).stagingBytes(), 0u);
  }
  for (auto [sendOuter, recvOuter] :
       {std::pair<int64_t, int64_t>{2, 1}, {1, 3}, {2, 2}}) {
    plan.programs.back().instructions = {a2a(sendOuter, recvOuter)};
    EXPECT_EQ(stagingBytesOf(plan, plan.programs.back().instructions[0]),
              uint64_t(12 * 4))
        << sendOuter << " " << recvOuter;
    Fixture f(plan);
    EXPECT_EQ(Arenas(f.plan, *f.backend, 0).stagingBytes(), uint64_t(12 * 4));
  }
}

TEST(ExecutorParts, MeshGroupsRefuseAWorldThatDoesNotFitTheMesh) {
  Plan plan = makeTinyPlan(DType::F64);
  EXPECT_EQ(errorOf([&] { MeshGroups::checkWorld(plan, nullptr); }), "");
  plan.mesh = {{"dp", 2}};
  EXPECT_NE(errorOf([&] { MeshGroups::checkWorld(plan, nullptr); })
                .find("needs 2 ranks, but the executor was given no "
                      "communicator"),
            std::string::npos);
}

TEST(ExecutorParts, RunContextOwnsTheStepAndTheDropoutStreams) {
  Fixture f(makeTinyPlan(DType::F64));
  Arenas arenas(f.plan, *f.backend, 0);
  MeshGroups mesh(f.plan, nullptr, *f.backend);
  RunContext context(f.plan, arenas, mesh);
  context.restart(42);
  EXPECT_EQ(context.step(), 1);
  EXPECT_EQ(context.seed(), 42u);
  EXPECT_TRUE(context.meshCoordinates().empty());

  const uint64_t first = context.dropoutSeed(3);
  context.setMicroBatch(1);
  EXPECT_NE(context.dropoutSeed(3), first) << "a micro-batch draws afresh";
  context.setMicroBatch(0);
  EXPECT_EQ(context.dropoutSeed(3), first) << "its backward draws the same";

  // A delayed update's thread reads the step it belongs to.
  context.setStep(5);
  int64_t seenThere = 0;
  std::thread update([&] {
    RunContext::setThreadStep(4);
    seenThere = context.step();
    RunContext::setThreadStep(0);
  });
  update.join();
  EXPECT_EQ(seenThere, 4);
  EXPECT_EQ(context.step(), 5);
}

TEST(ExecutorParts, TokenFeedChecksTheCountAndWritesTheBuffer) {
  Fixture f(makeTinyPlan(DType::F64));
  Arenas arenas(f.plan, *f.backend, 0);
  TokenFeed feed(f.plan, *f.backend, arenas);
  const std::vector<int32_t> three = {1, 2, 3};
  EXPECT_NE(errorOf([&] {
              feed.set(f.plan.tokens, three.data(), three.size(), "Tokens");
            }).find("setTokens: got 3 ids for a buffer of 8"),
            std::string::npos);
  feed.fill(
      [](int64_t m, int32_t *tokens, int32_t *targets) {
        for (int i = 0; i < 8; ++i) {
          tokens[i] = int32_t(m + i);
          targets[i] = int32_t(i);
        }
      },
      5);
  EXPECT_EQ(feed.hostView(f.plan.tokens)[7], 12);
}

/// A plan computing in f16 whose one gradient is f32, as --dsc-compile
/// precision=fp16 keeps them.
Plan makeScaledPlan() {
  Plan plan;
  plan.arenas.push_back({Tier::Device, 0});
  addBuffer(plan, "h", DType::F16, {4}, BufferRole::Temporary);
  addBuffer(plan, "w.grad", DType::F32, {4}, BufferRole::Gradient);
  return plan;
}

TEST(ExecutorParts, LossScalingUnscalesOrSkipsAndZeroes) {
  Fixture unscaled(makeTinyPlan(DType::F64));
  EXPECT_FALSE(LossScaling(unscaled.plan).enabled());
  EXPECT_EQ(LossScaling(unscaled.plan).backwardSeed(4), 0.25);

  Fixture f(makeScaledPlan());
  Arenas arenas(f.plan, *f.backend, 0);
  LossScaling scaling(f.plan);
  ASSERT_TRUE(scaling.enabled());
  const double scale = scaling.current()->scale();
  EXPECT_EQ(scaling.backwardSeed(4), scale / 4);

  float *grad = arenas.view(1).as<float>();
  for (int i = 0; i < 4; ++i)
    grad[i] = float(2 * scale);
  StepResult r;
  EXPECT_TRUE(scaling.unscaleOrSkip(f.plan, arenas, *f.backend, nullptr, 1, r));
  EXPECT_EQ(grad[0], 2.0f);
  EXPECT_EQ(r.lossScale, scale);
  EXPECT_FALSE(r.skipped);

  grad[2] = std::numeric_limits<float>::infinity();
  StepResult overflowed;
  EXPECT_FALSE(scaling.unscaleOrSkip(f.plan, arenas, *f.backend, nullptr, 2,
                                     overflowed));
  EXPECT_TRUE(overflowed.skipped);
  EXPECT_EQ(overflowed.skippedSteps, 1);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(grad[i], 0.0f) << "a skipped step's gradients are zeroed";
}

TEST(ExecutorParts, LossScalingTakesItsRuleFromThePlan) {
  // Without ZeRO DeepSpeed scales in FP16_Optimizer; a config's rule does
  // not override the plan's.
  Plan whole = makeScaledPlan();
  addBuffer(whole, "w.exp_avg", DType::F32, {4}, BufferRole::OptimizerState);
  EXPECT_EQ(lossScaleRuleOf(whole), LossScaleRule::Fused);
  LossScaling fused(whole);
  EXPECT_EQ(fused.current()->rule(), LossScaleRule::Fused);
  LossScalerConfig dynamic;
  dynamic.rule = LossScaleRule::Dynamic;
  fused.setConfig(dynamic);
  EXPECT_EQ(fused.current()->rule(), LossScaleRule::Fused);
  EXPECT_EQ(fused.config().rule, LossScaleRule::Fused);

  // Optimizer state in chunks over a data-parallel axis: ZeRO, whose
  // optimizers build DeepSpeed's DynamicLossScaler.
  Plan zero = whole;
  zero.buffers.back().layout.chunkAxes = 1;
  EXPECT_EQ(lossScaleRuleOf(zero), LossScaleRule::Dynamic);
  LossScaling sharded(zero);
  EXPECT_EQ(sharded.current()->rule(), LossScaleRule::Dynamic);
  LossScalerConfig fusedConfig;
  fusedConfig.rule = LossScaleRule::Fused;
  sharded.setConfig(fusedConfig);
  EXPECT_EQ(sharded.current()->rule(), LossScaleRule::Dynamic);

  // ZeRO on one data-parallel rank chunks nothing; its instructions say it.
  for (Opcode zeroOp : {Opcode::AdamWShard, Opcode::GatherParameter}) {
    Plan oneRank = whole;
    oneRank.programs.emplace_back();
    oneRank.programs.back().instructions.emplace_back();
    oneRank.programs.back().instructions.back().opcode = zeroOp;
    EXPECT_EQ(lossScaleRuleOf(oneRank), LossScaleRule::Dynamic);
  }
}

} // namespace
