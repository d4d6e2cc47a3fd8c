//===- ZeroOneAdamPlanTest.cpp - 0/1 Adam's programs in a plan ------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// 0/1 Adam as a compiled plan runs it: the four optimizer programs the
// compiler emits for optimizer=zero_one_adam (a variance step, a onebit
// step, a local step, a sync step; test/Transforms/dsc-zero-one-adam.mlir),
// written here as the lowering writes their instructions, the plan's
// policy choosing each step's program (Executor::optimizerAt), on thread
// ranks. Fed the gradients of the independent numpy reference's goldens
// (test/Runtime/Inputs/onebit/zero-one-adam.json, scripts/onebit-reference),
// every step's kind and every rank's parameters after every step match
// them: the instructions' arithmetic, the compressed averages' error
// states (the sync's own, from zero), the f64 sum of learning rates and
// the program choice together. The goldens' one-rank case is not a plan
// (0/1 Adam compiles for dp >= 2 only).
//
//===----------------------------------------------------------------------===//

#include "OnebitGoldens.h"
#include "PlanTestSupport.h"

#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/Instructions.h"
#include "dsc/Runtime/OnebitAdam.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/ThreadCommunicator.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>

using namespace dsc::rt;
using namespace dsc::rt::test;
using namespace dsc::rt::onebit_goldens;

namespace {

struct GoldenPolicy {
  double lr, beta1, beta2, eps;
  int64_t varFreezeStep, varUpdateScaler, localStepScaler, localStepClipper;
};

/// One parameter theta [n] (the tiny plan has an 'x' of its own) with its
/// gradient, 0/1 Adam's states and error feedback (the onebit step's and the
/// sync's), on a dp mesh of p ranks, and the four programs.
Plan makeZeroOneAdamPlan(int64_t p, int64_t n, double wd,
                         const GoldenPolicy &policy) {
  Plan plan = makeTinyPlan(DType::F32);
  plan.mesh = {{"dp", p}};
  const int64_t padded = ::dsc::onebitPaddedSize(n, p);
  auto f32 = [&](const std::string &name, int64_t count, BufferRole role) {
    return addBuffer(plan, name, DType::F32, {count}, role);
  };
  const uint32_t x = f32("theta", n, BufferRole::Parameter);
  const uint32_t g = f32("theta.grad", n, BufferRole::Gradient);
  const uint32_t m = f32("theta.exp_avg", n, BufferRole::OptimizerState);
  const uint32_t v = f32("theta.exp_avg_sq", n, BufferRole::OptimizerState);
  const uint32_t cb = f32("theta.accumulator", n, BufferRole::OptimizerState);
  const uint32_t lrSum =
      addBuffer(plan, "lr_sum", DType::F64, {1}, BufferRole::OptimizerState);
  std::vector<uint32_t> errors;
  for (const char *phase : {"onebit", "sync"})
    for (int64_t count : {padded, padded / p}) {
      errors.push_back(
          f32(std::string(phase) + ".error." + std::to_string(count), count,
              BufferRole::CompressionError));
      Buffer &b = plan.buffers.back();
      b.layout.view = {p, count};
      b.layout.viewSplit = {1, 0};
    }
  const uint32_t lr =
      addBuffer(plan, "zo.lr", DType::F32, {}, BufferRole::Scalar);
  const uint32_t norm =
      addBuffer(plan, "zo.norm", DType::F32, {}, BufferRole::Scalar);

  auto learningRate = [&]() {
    return makeInst(Opcode::LearningRate, {}, {lr}, "lr",
                    {int64_t(LrScheduleKind::Constant), 0, 0, 0},
                    {policy.lr, 0.0, 0.0});
  };
  // A clip that never clips (the goldens' gradients are unclipped); its
  // norm is the program's returned scalar.
  auto clip = [&]() {
    return makeInst(Opcode::GlobalNormClip, {g}, {norm}, "clip", {}, {1e30});
  };
  auto compressed = [&](uint32_t worker, uint32_t server, uint32_t state) {
    Instruction inst = makeInst(Opcode::CompressedAllReduce, {},
                                {worker, server, state}, "compress");
    ops::CompressedAllReduce op;
    op.axes = 1;
    op.encode(inst);
    return inst;
  };
  auto momentum = [&]() {
    return makeInst(Opcode::AdamMomentum, {g}, {m}, "momentum", {},
                    {policy.beta1});
  };
  auto localUpdate = [&]() {
    return std::vector<Instruction>{
        momentum(), makeInst(Opcode::AddLearningRate, {lr}, {lrSum}, "lr_sum"),
        makeInst(Opcode::ZeroOneAdamUpdate, {m, v, lr}, {x, cb}, "update", {},
                 {policy.eps, wd})};
  };
  Instruction average = makeInst(Opcode::AllReduce, {g}, {g}, "average",
                                 {1, int64_t(ReduceOp::Avg)});
  std::vector<Instruction> variance = {
      average, learningRate(), clip(),
      makeInst(Opcode::OnebitAdam, {g, lr}, {x, m, v}, "adam", {},
               {policy.beta1, policy.beta2, policy.eps, wd}),
      makeInst(Opcode::Zero, {}, {g}, "zero")};
  std::vector<Instruction> onebit = {learningRate(),
                                     clip(),
                                     compressed(errors[0], errors[1], g),
                                     momentum(),
                                     makeInst(Opcode::FrozenAdam, {m, v, lr},
                                              {x}, "frozen", {},
                                              {policy.eps, wd}),
                                     makeInst(Opcode::Zero, {}, {g}, "zero")};
  std::vector<Instruction> local = {learningRate(), clip()};
  for (Instruction &inst : localUpdate())
    local.push_back(inst);
  local.push_back(makeInst(Opcode::Zero, {}, {g}, "zero"));
  std::vector<Instruction> sync = {learningRate(), clip()};
  for (Instruction &inst : localUpdate())
    sync.push_back(inst);
  sync.push_back(makeInst(Opcode::ZeroOneAdamRewind, {v}, {x, cb}, "rewind", {},
                          {policy.eps}));
  sync.push_back(compressed(errors[2], errors[3], cb));
  sync.push_back(makeInst(Opcode::ZeroOneAdamResync, {v, lrSum}, {x, m, cb},
                          "resync", {}, {policy.eps}));
  sync.push_back(makeInst(Opcode::Zero, {}, {g}, "zero"));
  sync.push_back(makeInst(Opcode::Zero, {}, {lrSum}, "zero_lr_sum"));

  // The tiny plan's own optimizer gives way to the variance step.
  for (Program &program : plan.programs)
    if (program.name == "optimizer")
      program.instructions = variance;
  plan.gradNorm = norm;
  plan.learningRate = lr;
  const std::vector<Instruction> *steps[3] = {&onebit, &local, &sync};
  ZeroOneAdamPlan &zo = plan.zeroOneAdam;
  zo.enabled = true;
  zo.varFreezeStep = policy.varFreezeStep;
  zo.varUpdateScaler = policy.varUpdateScaler;
  zo.localStepScaler = policy.localStepScaler;
  zo.localStepClipper = policy.localStepClipper;
  for (int k = 0; k < 3; ++k) {
    plan.programs.push_back({kZeroOneAdamPrograms[k], *steps[k]});
    zo.gradNorm[k] = norm;
    zo.learningRate[k] = lr;
  }
  plan.summary.peakBytesPerArena = {plan.arenas[0].bytes};
  return plan;
}

TEST(ZeroOneAdamPlan, ProgramsMatchTheNumpyReference) {
  llvm::json::Value json = readGolden("zero-one-adam.json");
  ASSERT_NE(json.getAsObject(), nullptr);
  const llvm::json::Object &root = *json.getAsObject();
  GoldenPolicy policy{*root.getNumber("lr"),
                      *root.getNumber("beta1"),
                      *root.getNumber("beta2"),
                      *root.getNumber("eps"),
                      *root.getInteger("var_freeze_step"),
                      *root.getInteger("var_update_scaler"),
                      *root.getInteger("local_step_scaler"),
                      *root.getInteger("local_step_clipper")};
  int cases = 0;
  std::set<std::string> kindsSeen;
  for (const llvm::json::Value &c : *root.getArray("cases")) {
    const llvm::json::Object &kase = *c.getAsObject();
    const std::string name = kase.getString("name")->str();
    const int64_t p = *kase.getInteger("p"), n = *kase.getInteger("n");
    if (p == 1)
      continue;
    const Plan plan =
        makeZeroOneAdamPlan(p, n, *kase.getNumber("weight_decay"), policy);
    // The plan as the lowering's output is checked: a round trip through
    // the file format and its verifier.
    const std::vector<uint8_t> bytes = writePlan(plan);
    const Plan loaded = readPlan(bytes.data(), bytes.size());
    const std::vector<float> params0 = row(*kase.get("params0"));
    std::vector<Rows> grads, params;
    for (const llvm::json::Value &step : *kase.getArray("grads"))
      grads.push_back(rows(step));
    for (const llvm::json::Value &step : *kase.getArray("params"))
      params.push_back(rows(step));
    const llvm::json::Array &stages = *kase.getArray("stages");
    std::vector<std::vector<std::string>> ran(static_cast<size_t>(p));
    std::vector<std::vector<double>> errors(static_cast<size_t>(p));
    runRanks(int(p), [&](Communicator &world) {
      const size_t r = size_t(world.rank());
      Executor ex(loaded, 7, &world);
      BufferView x = ex.buffer("theta");
      std::copy(params0.begin(), params0.end(), x.as<float>());
      for (size_t k = 0; k < grads.size(); ++k) {
        BufferView g = ex.buffer("theta.grad");
        std::copy(grads[k][r].begin(), grads[k][r].end(), g.as<float>());
        const std::string program = ex.optimizerAt(int64_t(k) + 1).name;
        ran[r].push_back(program);
        ex.runProgram(program);
        std::vector<float> now(x.as<float>(), x.as<float>() + n);
        errors[r].push_back(relativeError(now, params[k][r]));
      }
    });
    double worst = 0;
    for (int64_t rank = 0; rank < p; ++rank)
      for (size_t k = 0; k < grads.size(); ++k) {
        worst = std::max(worst, errors[size_t(rank)][k]);
        const std::string stage = stages[k].getAsString()->str();
        const std::string want =
            stage == "var" ? "optimizer" : "optimizer." + stage;
        const std::string at = name + " rank " + std::to_string(rank) +
                               " step " + std::to_string(k + 1);
        EXPECT_EQ(ran[size_t(rank)][k], want) << at;
        EXPECT_LT(errors[size_t(rank)][k], 1e-5) << at << " (" << stage << ")";
        kindsSeen.insert(stage);
      }
    std::printf("[ZeroOneAdamPlan] %-14s p=%lld: params max diff %.3g (of "
                "the vector's max magnitude) over %zu steps\n",
                name.c_str(), (long long)p, worst, grads.size());
    ++cases;
  }
  EXPECT_EQ(cases, 4);
  // Every kind of step was checked.
  EXPECT_EQ(kindsSeen,
            (std::set<std::string>{"var", "onebit", "local", "sync"}));
}

} // namespace
