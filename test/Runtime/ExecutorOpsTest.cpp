//===- ExecutorOpsTest.cpp - Every opcode through the executor ------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A small transformer-like plan that uses every forward and backward opcode
// (embeddings, layer norm, a QKV matmul sliced into attention with dropout,
// bias, GELU, softmax, transposes, concat, copy, cross entropy), its
// hand-written backward, checked against central finite differences in f64
// through the executor. This is what the compiler's lowering will rely on:
// that each instruction means what Plan.h says.
//
//===----------------------------------------------------------------------===//

#include "PlanTestSupport.h"

#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/PlanIO.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {

constexpr int64_t B = 2, S = 5, H = 4, Heads = 2, V = 7, P = 8;

struct OpsPlan {
  Plan plan;
  std::vector<std::string> params;
};

OpsPlan makeOpsPlan(DType dt, double attnDropout, double dropout) {
  OpsPlan r;
  Plan &plan = r.plan;
  plan.vocabSize = V;
  plan.seqLength = S;
  plan.microBatchSize = B;
  plan.arenas.push_back({Tier::Device, 0});
  std::map<std::string, uint32_t> id;
  auto buf = [&](const std::string &name, std::vector<int64_t> shape,
                 BufferRole role = BufferRole::Temporary,
                 BufferInit init = {}) {
    id[name] = addBuffer(
        plan, name,
        role == BufferRole::Tokens || role == BufferRole::Targets ? DType::I32
                                                                  : dt,
        std::move(shape), role, init);
    return id[name];
  };
  auto param = [&](const std::string &name, std::vector<int64_t> shape,
                   BufferInit init) {
    buf(name, shape, BufferRole::Parameter, init);
    buf(name + ".grad", shape, BufferRole::Gradient);
    r.params.push_back(name);
  };
  plan.tokens = buf("tokens", {B, S}, BufferRole::Tokens);
  plan.targets = buf("targets", {B, S}, BufferRole::Targets);
  plan.loss = buf("loss", {}, BufferRole::Loss);
  buf("dloss", {}, BufferRole::Constant, {InitKind::Constant, 0, 1.0});
  plan.gradientSeed = id["dloss"];
  BufferInit normal{InitKind::Normal, 0.7, 0};
  param("wte", {V, H}, normal);
  param("wpe", {P, H}, normal);
  param("ln.g", {H}, {InitKind::Normal, 0.3, 0});
  param("ln.b", {H}, normal);
  param("qkv.w", {H, 3 * H}, normal);
  param("o.w", {H, H}, normal);
  param("o.b", {H}, normal);
  param("head.w", {2 * H, V}, normal);
  for (const char *t :
       {"e",   "p",   "h0",   "n1",  "q",    "k",    "v",    "a",
        "o",   "o2",  "g1",   "g1d", "s",    "m",    "m2",   "dm",
        "dmt", "dm2", "dg1a", "ds",  "dg1b", "dg1",  "dg1d", "do2",
        "da",  "dq",  "dk",   "dv",  "dn1",  "dh0a", "dh0b", "dh0"})
    buf(t, {B, S, H});
  for (const char *t : {"mt", "dmtt"})
    buf(t, {B, H, S});
  buf("qkv", {B, S, 3 * H});
  buf("dqkv", {B, S, 3 * H});
  buf("dtmp", {B, S, 3 * H});
  buf("c", {B, S, 2 * H});
  buf("dc", {B, S, 2 * H});
  buf("c2", {B * S, 2 * H});
  buf("dc2", {B * S, 2 * H});
  buf("logits", {B * S, V});
  buf("dlogits", {B * S, V});

  const int64_t rows = B * S;
  auto I = [&](Opcode op, std::vector<std::string> in,
               std::vector<std::string> out, std::vector<int64_t> ints = {},
               std::vector<double> floats = {}) {
    std::vector<uint32_t> ii, oo;
    for (auto &n : in)
      ii.push_back(id.at(n));
    for (auto &n : out)
      oo.push_back(id.at(n));
    return makeInst(op, ii, oo,
                    out.empty() ? "zero" : out[0] + "." + opcodeName(op), ints,
                    floats);
  };
  std::vector<Instruction> fwd = {
      I(Opcode::Embedding, {"wte", "tokens"}, {"e"}),
      I(Opcode::PositionEmbedding, {"wpe"}, {"p"}, {B, S}),
      I(Opcode::Add, {"e", "p"}, {"h0"}),
      I(Opcode::LayerNorm, {"h0", "ln.g", "ln.b"}, {"n1"}, {}, {1e-5}),
      I(Opcode::Matmul, {"n1", "qkv.w"}, {"qkv"},
        {1, rows, 3 * H, H, 0, 0, 0, 0}),
      I(Opcode::Slice, {"qkv"}, {"q"}, {0, 0, 0}),
      I(Opcode::Slice, {"qkv"}, {"k"}, {0, 0, H}),
      I(Opcode::Slice, {"qkv"}, {"v"}, {0, 0, 2 * H}),
      I(Opcode::Attention, {"q", "k", "v"}, {"a"}, {Heads, 1, 99, 0, 0},
        {attnDropout}),
      I(Opcode::Matmul, {"a", "o.w"}, {"o"}, {1, rows, H, H, 0, 0, 0, 0}),
      I(Opcode::BiasAdd, {"o", "o.b"}, {"o2"}),
      I(Opcode::Gelu, {"o2"}, {"g1"}),
      I(Opcode::Dropout, {"g1"}, {"g1d"}, {77}, {dropout}),
      I(Opcode::Softmax, {"g1d"}, {"s"}),
      I(Opcode::Mul, {"g1d", "s"}, {"m"}),
      I(Opcode::Transpose, {"m"}, {"mt"}, {0, 2, 1}),
      I(Opcode::Transpose, {"mt"}, {"m2"}, {0, 2, 1}),
      I(Opcode::Concat, {"m2", "h0"}, {"c"}, {2}),
      I(Opcode::Copy, {"c"}, {"c2"}),
      I(Opcode::Matmul, {"c2", "head.w"}, {"logits"},
        {1, rows, V, 2 * H, 0, 0, 0, 0}),
      I(Opcode::CrossEntropy, {"logits", "targets"}, {"loss"}, {0}),
  };
  std::vector<Instruction> bwd = {
      I(Opcode::CrossEntropyGrad, {"logits", "targets", "dloss"}, {"dlogits"},
        {0}),
      I(Opcode::Matmul, {"c2", "dlogits"}, {"head.w.grad"},
        {1, 2 * H, V, rows, 1, 0, 0, 1}),
      I(Opcode::Matmul, {"dlogits", "head.w"}, {"dc2"},
        {1, rows, 2 * H, V, 0, 1, 0, 0}),
      I(Opcode::Copy, {"dc2"}, {"dc"}),
      I(Opcode::Slice, {"dc"}, {"dm2"}, {0, 0, 0}),
      I(Opcode::Slice, {"dc"}, {"dh0a"}, {0, 0, H}),
      I(Opcode::Transpose, {"dm2"}, {"dmtt"}, {0, 2, 1}),
      I(Opcode::Transpose, {"dmtt"}, {"dm"}, {0, 2, 1}),
      I(Opcode::Mul, {"dm", "s"}, {"dg1a"}),
      I(Opcode::Mul, {"dm", "g1d"}, {"ds"}),
      I(Opcode::SoftmaxGrad, {"s", "ds"}, {"dg1b"}),
      I(Opcode::Add, {"dg1a", "dg1b"}, {"dg1d"}),
      I(Opcode::Dropout, {"dg1d"}, {"dg1"}, {77}, {dropout}),
      I(Opcode::GeluGrad, {"o2", "dg1"}, {"do2"}),
      I(Opcode::BiasGrad, {"do2"}, {"o.b.grad"}, {1}),
      I(Opcode::Matmul, {"a", "do2"}, {"o.w.grad"},
        {1, H, H, rows, 1, 0, 0, 1}),
      I(Opcode::Matmul, {"do2", "o.w"}, {"da"}, {1, rows, H, H, 0, 1, 0, 0}),
      I(Opcode::AttentionGrad, {"q", "k", "v", "da"}, {"dq", "dk", "dv"},
        {Heads, 1, 99, 0, 0}, {attnDropout}),
      I(Opcode::SliceGrad, {"dq"}, {"dqkv"}, {0, 0, 0}),
      I(Opcode::SliceGrad, {"dk"}, {"dtmp"}, {0, 0, H}),
      I(Opcode::Accumulate, {"dtmp"}, {"dqkv"}),
      I(Opcode::SliceGrad, {"dv"}, {"dtmp"}, {0, 0, 2 * H}),
      I(Opcode::Accumulate, {"dtmp"}, {"dqkv"}),
      I(Opcode::Matmul, {"n1", "dqkv"}, {"qkv.w.grad"},
        {1, H, 3 * H, rows, 1, 0, 0, 1}),
      I(Opcode::Matmul, {"dqkv", "qkv.w"}, {"dn1"},
        {1, rows, H, 3 * H, 0, 1, 0, 0}),
      // Accumulate dgamma and dbeta (bits 1, 2), overwrite dx.
      I(Opcode::LayerNormGrad, {"h0", "ln.g", "dn1"},
        {"dh0b", "ln.g.grad", "ln.b.grad"}, {6}, {1e-5}),
      I(Opcode::Add, {"dh0a", "dh0b"}, {"dh0"}),
      I(Opcode::EmbeddingGrad, {"dh0", "tokens"}, {"wte.grad"}, {1}),
      I(Opcode::PositionEmbeddingGrad, {"dh0"}, {"wpe.grad"}, {B, S, 1}),
  };
  std::vector<Instruction> fb = fwd;
  fb.insert(fb.end(), bwd.begin(), bwd.end());
  std::vector<std::string> grads;
  for (auto &p : r.params)
    grads.push_back(p + ".grad");
  plan.programs.push_back({"forward", fwd});
  plan.programs.push_back({"forward_backward", fb});
  plan.programs.push_back({"zero_grad", {I(Opcode::Zero, {}, grads)}});
  plan.summary.peakBytesPerArena = {plan.arenas[0].bytes};
  return r;
}

void fillBatch(Executor &ex) {
  for (int64_t i = 0; i < B * S; ++i) {
    ex.tokens()[i] = int32_t((5 * i + 2) % V);
    ex.targets()[i] = int32_t((3 * i + 1) % V);
  }
}

void checkGradients(double attnDropout, double dropout) {
  OpsPlan ops = makeOpsPlan(DType::F64, attnDropout, dropout);
  ASSERT_NO_THROW(validatePlan(ops.plan));
  Executor ex(ops.plan, 21);
  fillBatch(ex);
  ex.runProgram("forward_backward");
  double fbLoss = ex.loss();
  ex.runProgram("forward");
  // The same masks in both programs: same step, same micro-batch.
  EXPECT_EQ(ex.loss(), fbLoss);
  for (const std::string &name : ops.params) {
    std::vector<double> grad = ex.read(name + ".grad");
    BufferView p = ex.buffer(name);
    double *w = p.as<double>();
    double worst = 0;
    for (int64_t i = 0; i < p.size(); ++i) {
      const double h = 1e-6, saved = w[i];
      w[i] = saved + h;
      ex.runProgram("forward");
      double up = ex.loss();
      w[i] = saved - h;
      ex.runProgram("forward");
      double down = ex.loss();
      w[i] = saved;
      double fd = (up - down) / (2 * h);
      EXPECT_NEAR(grad[i], fd, 1e-7 + 1e-5 * std::fabs(fd))
          << name << "[" << i << "]";
      worst = std::max(worst, std::fabs(grad[i]));
    }
    // A gradient that is all zero would pass any FD check trivially.
    EXPECT_GT(worst, 1e-6) << name;
  }
}

TEST(ExecutorOps, EveryOpcodeMatchesFiniteDifferences) {
  checkGradients(0.0, 0.0);
}

TEST(ExecutorOps, WithDropoutTheBackwardReusesTheMask) {
  checkGradients(0.25, 0.2);
}

TEST(ExecutorOps, LayerNormGradAccumulatesOnlyWhatItsMaskSays) {
  OpsPlan ops = makeOpsPlan(DType::F64, 0, 0);
  Executor ex(ops.plan, 3);
  fillBatch(ex);
  ex.runProgram("forward_backward");
  std::vector<double> g1 = ex.read("ln.g.grad"), dx1 = ex.read("dh0b");
  ex.runProgram("forward_backward");
  std::vector<double> g2 = ex.read("ln.g.grad"), dx2 = ex.read("dh0b");
  for (size_t i = 0; i < g1.size(); ++i)
    EXPECT_NEAR(g2[i], 2 * g1[i], 1e-14);
  EXPECT_EQ(dx1, dx2);
  ex.runProgram("zero_grad");
  for (double g : ex.read("ln.g.grad"))
    EXPECT_EQ(g, 0.0);
}

TEST(ExecutorOps, F32AgreesWithF64) {
  Executor a(makeOpsPlan(DType::F32, 0, 0).plan, 5);
  Executor b(makeOpsPlan(DType::F64, 0, 0).plan, 5);
  fillBatch(a);
  fillBatch(b);
  a.runProgram("forward_backward");
  b.runProgram("forward_backward");
  EXPECT_NEAR(a.loss(), b.loss(), 1e-5 * std::fabs(b.loss()));
  std::vector<double> ga = a.read("qkv.w.grad"), gb = b.read("qkv.w.grad");
  for (size_t i = 0; i < ga.size(); ++i)
    EXPECT_NEAR(ga[i], gb[i], 1e-4 + 1e-4 * std::fabs(gb[i]));
}

TEST(ExecutorOps, DropoutMasksChangeWithTheStep) {
  Executor ex(makeOpsPlan(DType::F64, 0.25, 0.2).plan, 5);
  fillBatch(ex);
  ex.runProgram("forward");
  double first = ex.loss();
  ex.setStep(2);
  ex.runProgram("forward");
  EXPECT_NE(ex.loss(), first);
  ex.setStep(1);
  ex.runProgram("forward");
  EXPECT_EQ(ex.loss(), first);
}

/// validatePlan must be sound: whatever it accepts runs without touching
/// memory outside the arenas (run this under ASan to make that visible).
/// Mutates the ops plan at random (ints, operand ids, shapes, offsets) and
/// runs every program of each mutant that validates.
TEST(ExecutorOps, WhatValidatesRunsSafely) {
  const OpsPlan base = makeOpsPlan(DType::F32, 0.1, 0.1);
  std::mt19937 rng(1234);
  int accepted = 0, trials = 600;
  for (int trial = 0; trial < trials; ++trial) {
    Plan plan = base.plan;
    Program &prog = plan.programs[1];
    for (int k = 0; k < 1 + int(rng() % 2); ++k) {
      Instruction &inst = prog.instructions[rng() % prog.instructions.size()];
      switch (rng() % 4) {
      case 0:
        if (!inst.ints.empty())
          inst.ints[rng() % inst.ints.size()] = int64_t(rng() % 24) - 2;
        break;
      case 1: {
        auto &ids =
            (rng() % 2 || inst.inputs.empty()) ? inst.outputs : inst.inputs;
        if (!ids.empty())
          ids[rng() % ids.size()] = uint32_t(rng() % plan.buffers.size());
        break;
      }
      case 2: {
        Buffer &b = plan.buffers[rng() % plan.buffers.size()];
        if (!b.shape.empty()) {
          int64_t &d = b.shape[rng() % b.shape.size()];
          d = std::max<int64_t>(0, d + int64_t(rng() % 5) - 2);
          if (rng() % 2)
            b.bytes = uint64_t(numElements(b.shape)) * dtypeSize(b.dtype);
        }
        break;
      }
      default: {
        Buffer &b = plan.buffers[rng() % plan.buffers.size()];
        b.offset = uint64_t(std::max<int64_t>(
            0, int64_t(b.offset) + (int64_t(rng() % 9) - 4) * 16));
        break;
      }
      }
    }
    try {
      validatePlan(plan);
    } catch (const Error &) {
      continue;
    }
    ++accepted;
    Executor ex(plan, 3);
    fillBatch(ex);
    for (const Program &p : plan.programs) {
      try {
        ex.runProgram(p.name);
      } catch (const Error &) {
        // A run-time refusal (a token outside a resized table) is fine.
      }
    }
  }
  // Some mutants are harmless (an unchanged value, a free offset).
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, trials);
}

} // namespace
