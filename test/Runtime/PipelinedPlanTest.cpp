//===- PipelinedPlanTest.cpp - compiled pipelined plans, read and fuzzed -===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Inputs/gpt-tiny-pp2-interleaved.plan is what the compiler makes of
// gpt-tiny on 2 pipeline ranks with 2 model chunks each
// (test/Integration/cuda-test-plans.test keeps it current): its stages,
// the rank's optimizer and step on the first two, the residuals each split
// backward reads. Inputs/gpt-tiny-pp2-zb-h1.plan is the zero-bubble plan
// of gpt-tiny on 2 ranks: every stage's backward in two parts, the
// weight-gradient parts run apart, each after its own backward. Random
// byte flips in either are refused or read as a valid plan, never a
// crash.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/ArenaHolders.h"
#include "dsc/Runtime/Fnv1a.h"
#include "dsc/Runtime/Instructions.h"
#include "dsc/Runtime/Plan.h"
#include "dsc/Runtime/PlanIO.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

using namespace dsc::rt;

namespace {

std::vector<uint8_t>
planBytes(const char *name = "gpt-tiny-pp2-interleaved.plan") {
  std::ifstream in(std::string(DSC_TEST_INPUTS) + "/" + name, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

/// Random byte flips in `good` (sealed again) are refused or read as a
/// valid plan, never a crash.
void expectFlipsNeverCrash(const std::vector<uint8_t> &good) {
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
    // Every stage but the last keeps what its backward reads, in its
    // rank's own arena, in as many slots as micro-batches it has in
    // flight (interleaved, 2 micro-batches: both, on every stage).
    EXPECT_EQ(st.residuals.empty(), k == 3) << "stage " << k;
    for (int64_t id : st.activationBuffers())
      EXPECT_EQ(plan.arenas[plan.buffers[size_t(id)].arena].pipelineRank,
                int64_t(k % 2))
          << "stage " << k << " buffer " << plan.buffers[size_t(id)].name;
    EXPECT_EQ(st.activationSlots.slots, 2) << "stage " << k;
  }
  // Each pipeline rank's arenas hold its own stages' parameters only.
  for (const Buffer &b : plan.buffers)
    if (b.role == BufferRole::Parameter && b.name.rfind("h.", 0) == 0)
      EXPECT_GE(plan.arenas[b.arena].pipelineRank, 0) << b.name;
  // A rank's step runs only its own stages: rank 1 holds 1 and 3.
  const Program *step = plan.findProgram(plan.stages[1].step);
  ASSERT_NE(step, nullptr);
  for (const Instruction &inst : step->instructions) {
    if (inst.opcode == Opcode::PipelineForward) {
      EXPECT_EQ(ops::PipelineForward::decode(inst).stage % 2, 1);
    }
  }
}

TEST(PipelinedPlan, ZeroBubbleStagesRunTheirWeightGradientsApart) {
  std::vector<uint8_t> bytes = planBytes("gpt-tiny-pp2-zb-h1.plan");
  ASSERT_FALSE(bytes.empty());
  Plan plan = readPlan(bytes.data(), bytes.size());
  validatePlan(plan);
  EXPECT_EQ(plan.schedule, PipelineSchedule::ZeroBubbleH1);
  ASSERT_EQ(plan.stages.size(), 2u);
  for (size_t k = 0; k < plan.stages.size(); ++k) {
    const PipelineStage &st = plan.stages[k];
    EXPECT_NE(plan.findProgram(st.backwardWeight), nullptr) << "stage " << k;
    EXPECT_FALSE(st.weightStash.empty()) << "stage " << k;
    EXPECT_GE(st.weightSlots.slots, 1) << "stage " << k;
    // Each stage's step runs M weight-gradient parts, each after the
    // backward of its micro-batch, in micro-batch order.
    const Program *step = plan.findProgram(st.step);
    ASSERT_NE(step, nullptr);
    int64_t backwards = 0, weights = 0;
    for (const Instruction &inst : step->instructions) {
      if (inst.opcode == Opcode::PipelineBackward)
        ++backwards;
      if (inst.opcode == Opcode::PipelineBackwardWeight) {
        EXPECT_EQ(ops::PipelineBackwardWeight::decode(inst).microBatch,
                  weights);
        EXPECT_LT(weights++, backwards);
      }
    }
    EXPECT_EQ(weights, plan.microBatches);
  }
  // The last stage holds one weight-gradient part back (ZB-H1: stage k
  // holds k): its first one runs after its second backward.
  const Program *last = plan.findProgram(plan.stages[1].step);
  int64_t backwardsBeforeFirstWeight = 0;
  for (const Instruction &inst : last->instructions) {
    if (inst.opcode == Opcode::PipelineBackwardWeight)
      break;
    backwardsBeforeFirstWeight += inst.opcode == Opcode::PipelineBackward;
  }
  EXPECT_EQ(backwardsBeforeFirstWeight, 2);
}

// A weight-gradient part before its backward, or a stage without its
// weight-gradient program, is refused naming the stage.
TEST(PipelinedPlan, ZeroBubbleOrderIsChecked) {
  std::vector<uint8_t> bytes = planBytes("gpt-tiny-pp2-zb-h1.plan");
  Plan plan = readPlan(bytes.data(), bytes.size());
  Plan early = plan;
  auto named = std::find_if(
      early.programs.begin(), early.programs.end(),
      [&](const Program &p) { return p.name == early.stages[0].step; });
  ASSERT_NE(named, early.programs.end());
  Program *step = &*named;
  auto isWeight = [](const Instruction &inst) {
    return inst.opcode == Opcode::PipelineBackwardWeight;
  };
  auto first = std::find_if(step->instructions.begin(),
                            step->instructions.end(), isWeight);
  ASSERT_NE(first, step->instructions.end());
  Instruction weight = *first;
  step->instructions.erase(first);
  step->instructions.insert(step->instructions.begin(), weight);
  EXPECT_THROW(
      {
        try {
          validatePlan(early);
        } catch (const Error &e) {
          EXPECT_NE(std::string(e.what()).find(
                        "the weight gradients of micro-batch 0 of stage 0 "
                        "come before its backward"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  Plan missing = plan;
  missing.stages[1].backwardWeight = "stage1.nothing";
  EXPECT_THROW(
      {
        try {
          validatePlan(missing);
        } catch (const Error &e) {
          EXPECT_NE(std::string(e.what()).find(
                        "pipeline stage 1: no weight-gradient program "
                        "'stage1.nothing'"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
}

// Two micro-batches in flight in one slot would overwrite each other's
// kept values: refused, naming both.
TEST(PipelinedPlan, SharedSlotsAreRefused) {
  std::vector<uint8_t> bytes = planBytes();
  ASSERT_FALSE(bytes.empty());
  Plan plan = readPlan(bytes.data(), bytes.size());
  Program *step = nullptr;
  for (Program &p : plan.programs)
    if (p.name == plan.stages[0].step)
      step = &p;
  ASSERT_NE(step, nullptr);
  // Stage 0's second forward into the first one's slot.
  int forwards = 0;
  for (Instruction &inst : step->instructions)
    if (inst.opcode == Opcode::PipelineForward &&
        ops::PipelineForward::decode(inst).stage == 0 && forwards++ == 1) {
      ops::PipelineForward f = ops::PipelineForward::decode(inst);
      f.slot = 1 - f.slot;
      inst.ints.clear();
      inst.floats.clear();
      f.encode(inst);
    }
  ASSERT_EQ(forwards, 2);
  try {
    validatePlan(plan);
    FAIL() << "a slot shared by two micro-batches in flight was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("which micro-batch 0 still uses"),
              std::string::npos)
        << e.what();
  }
}

// A stage program reading another pipeline rank's buffer would read memory
// this rank never allocated: refused, naming the buffer and both ranks.
TEST(PipelinedPlan, AnotherRanksBufferIsRefused) {
  std::vector<uint8_t> bytes = planBytes();
  ASSERT_FALSE(bytes.empty());
  Plan plan = readPlan(bytes.data(), bytes.size());
  validatePlan(plan);
  // Move a layer parameter of rank 0 into rank 1's device arena (same
  // offset: still inside it, overlapping nothing persistent of rank 1
  // would be luck, so look for the message about the rank first).
  int64_t rank1Arena = -1;
  for (size_t a = 0; a < plan.arenas.size(); ++a)
    if (plan.arenas[a].pipelineRank == 1 && plan.arenas[a].tier == Tier::Device)
      rank1Arena = int64_t(a);
  ASSERT_GE(rank1Arena, 0);
  const int64_t id = plan.findBuffer("h.0.ln_1.bias");
  ASSERT_GE(id, 0);
  Buffer &b = plan.buffers[size_t(id)];
  ASSERT_EQ(plan.arenas[b.arena].pipelineRank, 0);
  b.arena = uint32_t(rank1Arena);
  b.offset = plan.arenas[size_t(rank1Arena)].bytes - b.bytes;
  try {
    validatePlan(plan);
    FAIL() << "a stage program using another rank's buffer was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("h.0.ln_1.bias"), std::string::npos)
        << e.what();
  }
}

TEST(PipelinedPlan, RandomByteFlipsNeverCrash) {
  // (And the offload plans: the delayed parameter update's OverlapNextStep
  // and the host-tier rules behind it; chunks, fetches and swaps on NVMe;
  // and an MoE model's routers, i32 slots, dispatches and combines.)
  for (const char *name :
       {"gpt-tiny-pp2-interleaved.plan", "gpt-tiny-pp2-zb-h1.plan",
        "gpt-tiny-dpu.plan", "gpt-tiny-dp2-zero3-params-nvme.plan",
        "gpt-tiny-moe.plan"}) {
    SCOPED_TRACE(name);
    expectFlipsNeverCrash(planBytes(name));
  }
}

} // namespace

// A shared arena is allocated by the pipeline ranks whose stages use it:
// the compiler plans the tied embedding's parameter and moments (named by
// the first and the last stage) in an arena of their own, which ranks 1
// and 2 of 4 do not hold; what every stage names, and a shared arena that
// no program or a program of no stage names, stays every rank's.
TEST(PipelinedPlan, SharedArenasAreHeldByTheRanksThatUseThem) {
  Plan plan;
  plan.mesh = {{"pp", 4}};
  // Arenas 0-3: each rank's own. Shared ones: 4, every stage's; 5, the
  // first and the last stage's; 6, nobody's; 7, a program's of no stage.
  plan.arenas.resize(8);
  for (size_t a = 0; a < 8; ++a)
    plan.arenas[a].pipelineRank = a < 4 ? int64_t(a) : -1;
  auto buffer = [&](uint32_t arena) {
    Buffer b;
    b.arena = arena;
    plan.buffers.push_back(b);
    return uint32_t(plan.buffers.size() - 1);
  };
  const uint32_t own[4] = {buffer(0), buffer(1), buffer(2), buffer(3)};
  const uint32_t all = buffer(4), ends = buffer(5);
  buffer(6);
  const uint32_t other = buffer(7);
  for (int64_t k = 0; k < 4; ++k) {
    PipelineStage st;
    st.forward = "forward" + std::to_string(k);
    st.optimizer = "optimizer" + std::to_string(k);
    plan.stages.push_back(st);
    Program fwd{st.forward, {}}, opt{st.optimizer, {}};
    Instruction read;
    read.inputs = {own[k]};
    if (k == 0 || k == 3)
      read.inputs.push_back(ends);
    fwd.instructions.push_back(read);
    Instruction reduce;
    reduce.inputs = {all};
    opt.instructions.push_back(reduce);
    plan.programs.push_back(fwd);
    plan.programs.push_back(opt);
  }
  Instruction init;
  init.outputs = {other};
  plan.programs.push_back({"initialize", {init}});

  const std::vector<std::vector<bool>> held = arenaHolders(plan);
  ASSERT_EQ(held.size(), 8u);
  for (size_t a = 0; a < 4; ++a)
    for (size_t r = 0; r < 4; ++r)
      EXPECT_EQ(held[a][r], a == r) << "arena " << a << " rank " << r;
  EXPECT_EQ(held[4], std::vector<bool>({true, true, true, true}));
  EXPECT_EQ(held[5], std::vector<bool>({true, false, false, true}));
  EXPECT_EQ(held[6], std::vector<bool>({true, true, true, true}));
  EXPECT_EQ(held[7], std::vector<bool>({true, true, true, true}));

  // Without stages, one "rank" holds everything.
  plan.stages.clear();
  for (const std::vector<bool> &h : arenaHolders(plan))
    EXPECT_EQ(h, std::vector<bool>({true}));
}
