//===- ExecutorTest.cpp - The executor on a hand-built plan ---------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Runs the tiny language model of PlanTestSupport.h: its loss against a
// direct computation, its gradients against central finite differences in
// f64, a training step that lowers the loss, arena sizes against the plan,
// bitwise reproducibility for a seed, and the run-time errors.
//
//===----------------------------------------------------------------------===//

#include "PlanTestSupport.h"

#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/PlanIO.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {

const TinyShape kShape;

/// A fixed batch: tokens and their successors.
void fillBatch(Executor &ex, int64_t salt = 0) {
  const int64_t n = kShape.batch * kShape.seq;
  std::vector<int32_t> tokens(n), targets(n);
  for (int64_t i = 0; i < n; ++i) {
    tokens[i] = int32_t((3 * i + 1 + salt) % kShape.vocab);
    targets[i] = int32_t((3 * i + 4 + salt) % kShape.vocab);
  }
  ex.setTokens(tokens.data(), tokens.size());
  ex.setTargets(targets.data(), targets.size());
}

/// The loss computed from the executor's parameters with plain loops.
double referenceLoss(Executor &ex) {
  std::vector<double> wte = ex.read("wte.weight");
  std::vector<double> head = ex.read("head.weight");
  const int64_t V = kShape.vocab, H = kShape.hidden;
  const int64_t rows = kShape.batch * kShape.seq;
  const int32_t *tok = ex.tokens(), *tgt = ex.targets();
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> logits(V, 0.0);
    for (int64_t v = 0; v < V; ++v)
      for (int64_t h = 0; h < H; ++h)
        logits[v] += wte[tok[r] * H + h] * head[h * V + v];
    double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (double l : logits)
      sum += std::exp(l - mx);
    total += mx + std::log(sum) - logits[tgt[r]];
  }
  return total / double(rows);
}

TEST(Executor, LossMatchesADirectComputation) {
  Executor ex(makeTinyPlan(DType::F64), 42);
  fillBatch(ex);
  ex.runProgram("forward");
  EXPECT_NEAR(ex.loss(), referenceLoss(ex), 1e-12);
  // And exactly what the kernels give when called by hand.
  std::vector<double> wte = ex.read("wte.weight"),
                      head = ex.read("head.weight");
  const int64_t rows = kShape.batch * kShape.seq;
  std::vector<double> x(rows * kShape.hidden), logits(rows * kShape.vocab);
  embeddingForward(wte.data(), ex.tokens(), x.data(), rows, kShape.vocab,
                   kShape.hidden);
  MatmulShape s;
  s.m = rows;
  s.n = kShape.vocab;
  s.k = kShape.hidden;
  matmulForward(x.data(), head.data(), logits.data(), s);
  double loss = crossEntropyForward<double>(logits.data(), ex.targets(),
                                            nullptr, rows, kShape.vocab);
  EXPECT_EQ(ex.loss(), loss);
}

TEST(Executor, GradientsMatchFiniteDifferences) {
  Executor ex(makeTinyPlan(DType::F64), 7);
  fillBatch(ex);
  ex.runProgram("forward_backward");
  for (const char *name : {"wte.weight", "head.weight"}) {
    std::vector<double> grad = ex.read(std::string(name) + ".grad");
    BufferView p = ex.buffer(name);
    double *w = p.as<double>();
    for (int64_t i = 0; i < p.size(); i += 5) {
      const double h = 1e-6, saved = w[i];
      w[i] = saved + h;
      ex.runProgram("forward");
      double up = ex.loss();
      w[i] = saved - h;
      ex.runProgram("forward");
      double down = ex.loss();
      w[i] = saved;
      double fd = (up - down) / (2 * h);
      EXPECT_NEAR(grad[i], fd, 1e-7 + 1e-6 * std::fabs(fd))
          << name << "[" << i << "]";
    }
  }
}

TEST(Executor, GradientsAccumulateOverMicroBatches) {
  Executor ex(makeTinyPlan(DType::F64), 7);
  fillBatch(ex);
  ex.runProgram("forward_backward");
  std::vector<double> once = ex.read("head.weight.grad");
  ex.runProgram("forward_backward");
  std::vector<double> twice = ex.read("head.weight.grad");
  for (size_t i = 0; i < once.size(); ++i)
    EXPECT_NEAR(twice[i], 2 * once[i], 1e-14);
}

TEST(Executor, TrainingLowersTheLoss) {
  Executor ex(makeTinyPlan(DType::F64), 3);
  fillBatch(ex);
  ex.runProgram("forward");
  double first = ex.loss();
  auto fill = [&](int64_t, int32_t *, int32_t *) { /* batch stays */ };
  StepResult r = ex.trainStep(fill, 1);
  EXPECT_DOUBLE_EQ(r.loss, first);
  EXPECT_EQ(ex.step(), 2);
  EXPECT_DOUBLE_EQ(r.learningRate, 0.05);
  EXPECT_GT(r.gradNorm, 0.0);
  ex.runProgram("forward");
  double second = ex.loss();
  EXPECT_LT(second, first);
  for (int i = 0; i < 30; ++i)
    ex.trainStep(fill, 1);
  ex.runProgram("forward");
  EXPECT_LT(ex.loss(), 0.5 * first);
  // The optimizer zeroed the gradients.
  for (double g : ex.read("head.weight.grad"))
    EXPECT_EQ(g, 0.0);
}

TEST(Executor, GradNormIsTheGlobalL2Norm) {
  Executor ex(makeTinyPlan(DType::F64, kShape, 0.05, /*maxNorm=*/0.0), 3);
  fillBatch(ex);
  ex.runProgram("forward_backward");
  double sq = 0;
  for (const char *g : {"wte.weight.grad", "head.weight.grad"})
    for (double v : ex.read(g))
      sq += v * v;
  ex.runProgram("optimizer");
  EXPECT_NEAR(ex.gradNorm(), std::sqrt(sq), 1e-12);
}

TEST(Executor, ClippingScalesTheGradients) {
  Plan plan = makeTinyPlan(DType::F64);
  // A program that only clips: gradients of ones, norm 2 over 4 elements.
  plan.buffers[plan.findBuffer("wte.weight.grad")].init = {InitKind::Ones};
  plan.programs.push_back(
      {"clip",
       {makeInst(Opcode::GlobalNormClip,
                 {uint32_t(plan.findBuffer("wte.weight.grad"))},
                 {uint32_t(plan.gradNorm)}, "clip", {}, {8.0})}});
  Executor ex(plan, 1);
  ex.runProgram("clip");
  double norm = std::sqrt(double(kShape.vocab * kShape.hidden));
  EXPECT_NEAR(ex.gradNorm(), norm, 1e-12);
  for (double g : ex.read("wte.weight.grad"))
    EXPECT_NEAR(g, 8.0 / (norm + 1e-6), 1e-9);
}

TEST(Executor, AllocatedBytesEqualThePlan) {
  Plan plan = makeTinyPlan(DType::F32);
  plan.arenas.push_back({Tier::Host, 1000});
  plan.summary.peakBytesPerArena.push_back(1000);
  Executor ex(plan, 1);
  for (uint32_t a = 0; a < plan.arenas.size(); ++a) {
    EXPECT_EQ(ex.allocatedBytes(a), plan.arenas[a].bytes);
    EXPECT_EQ(ex.allocatedBytes(a), plan.summary.peakBytesPerArena[a]);
    // 64-byte aligned.
    BufferView first = ex.buffer(plan.buffers[0].name);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first.data) % 64, 0u);
  }
  EXPECT_THROW(ex.allocatedBytes(7), Error);
}

TEST(Executor, SameSeedGivesIdenticalBits) {
  auto train = [](uint64_t seed) {
    Executor ex(makeTinyPlan(DType::F32), seed);
    fillBatch(ex);
    std::vector<double> losses;
    for (int i = 0; i < 3; ++i)
      losses.push_back(
          ex.trainStep([](int64_t, int32_t *, int32_t *) {}, 1).loss);
    std::vector<float> w(ex.buffer("head.weight").size());
    std::memcpy(w.data(), ex.buffer("head.weight").data, w.size() * 4);
    return std::make_pair(losses, w);
  };
  auto a = train(11), b = train(11), c = train(12);
  EXPECT_EQ(a.first, b.first);
  EXPECT_EQ(std::memcmp(a.second.data(), b.second.data(), a.second.size() * 4),
            0);
  EXPECT_NE(a.first, c.first);
}

TEST(Executor, InitDependsOnNameAndSeedOnly) {
  Plan plan = makeTinyPlan(DType::F64);
  Executor a(plan, 5);
  // Another layout: an extra parameter first, everything shifted.
  Plan moved = makeTinyPlan(DType::F64);
  for (Buffer &b : moved.buffers)
    b.offset += 1024;
  moved.arenas[0].bytes += 1024;
  moved.summary.peakBytesPerArena[0] += 1024;
  Executor b(moved, 5);
  EXPECT_EQ(a.read("wte.weight"), b.read("wte.weight"));
  EXPECT_NE(a.read("wte.weight"), a.read("head.weight"));
  // Roughly N(0, 0.5^2).
  std::vector<double> w = a.read("wte.weight");
  double sq = 0;
  for (double v : w)
    sq += v * v;
  EXPECT_NEAR(std::sqrt(sq / double(w.size())), 0.5, 0.1);
  EXPECT_EQ(a.read("loss.grad_seed")[0], 1.0);
  EXPECT_EQ(a.read("wte.weight.exp_avg")[0], 0.0);
}

TEST(Executor, F32AgreesWithF64) {
  Executor a(makeTinyPlan(DType::F32), 9), b(makeTinyPlan(DType::F64), 9);
  fillBatch(a);
  fillBatch(b);
  a.runProgram("forward");
  b.runProgram("forward");
  EXPECT_NEAR(a.loss(), b.loss(), 1e-5);
}

TEST(Executor, MicroBatchesSetTheLossScale) {
  Executor ex(makeTinyPlan(DType::F64), 2);
  fillBatch(ex);
  ex.trainStep([](int64_t, int32_t *, int32_t *) {}, 4);
  EXPECT_EQ(ex.read("loss.grad_seed")[0], 0.25);
}

TEST(Executor, MicroBatchCountNeedsALossScale) {
  Plan plan = makeTinyPlan(DType::F64);
  plan.gradientSeed = -1;
  Executor ex(plan, 2);
  fillBatch(ex);
  EXPECT_NO_THROW(ex.trainStep([](int64_t, int32_t *, int32_t *) {}, 1));
  try {
    ex.trainStep([](int64_t, int32_t *, int32_t *) {}, 2);
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("compiled for 1 micro-batches per "
                                         "step and has no gradientSeed buffer"),
              std::string::npos)
        << e.what();
  }
}

TEST(Executor, TokenOutsideTheVocabIsAnError) {
  Executor ex(makeTinyPlan(DType::F64), 2);
  fillBatch(ex);
  ex.tokens()[3] = 99;
  try {
    ex.runProgram("forward");
    FAIL() << "no error";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("instruction 0 'wte' (Embedding)"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("token id 99 at position 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[0, 16)"), std::string::npos) << msg;
  }
}

TEST(Executor, UnknownProgramNamesTheOnesThereAre) {
  Executor ex(makeTinyPlan(DType::F64), 2);
  try {
    ex.runProgram("backward");
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("no program 'backward' (it has "
                                         "'forward', 'forward_backward', "
                                         "'optimizer')"),
              std::string::npos)
        << e.what();
  }
}

TEST(Executor, RefusesAnInvalidPlan) {
  Plan plan = makeTinyPlan(DType::F64);
  plan.buffers[2].offset = plan.arenas[0].bytes;
  EXPECT_THROW(Executor ex(plan), Error);
}

TEST(Executor, RunsBf16PlansThroughF32Kernels) {
  // Every buffer bf16 (no fp32 masters: a plan can say so): the CPU stages
  // them through the f32 kernels and still trains.
  Executor ex(makeTinyPlan(DType::BF16), 3);
  fillBatch(ex);
  ex.runProgram("forward");
  const double first = ex.loss();
  auto fill = [&](int64_t, int32_t *, int32_t *) { /* batch stays */ };
  for (int i = 0; i < 20; ++i)
    ex.trainStep(fill, 1);
  ex.runProgram("forward");
  EXPECT_LT(ex.loss(), 0.7 * first);
  // What is read back is a bf16 value: 8 significant bits.
  for (double w : ex.read("wte.weight"))
    EXPECT_EQ(w, double(bf16ToFloat(floatToBf16(float(w)))));
}

TEST(Executor, APlanLargerThanTheMachineIsRefused) {
  Plan plan = makeTinyPlan(DType::F64);
  plan.arenas[0].bytes = uint64_t(1) << 62;
  plan.summary.peakBytesPerArena[0] = plan.arenas[0].bytes;
  try {
    Executor ex(plan);
    FAIL() << "no error";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("arena 0 (device) 4611686018427387904"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("bytes of memory"), std::string::npos) << msg;
  }
}

TEST(Executor, InstructionHookSeesEveryInstruction) {
  Executor ex(makeTinyPlan(DType::F64), 2);
  fillBatch(ex);
  std::vector<InstructionEvent> events;
  ex.setInstructionHook(
      [&](const InstructionEvent &e) { events.push_back(e); });
  ex.runProgram("forward_backward");
  ASSERT_EQ(events.size(), 7u);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].index, i);
    EXPECT_GE(events[i].durationUs, 0.0);
    EXPECT_EQ(events[i].stream, 0);
    if (i) {
      EXPECT_GE(events[i].startUs, events[i - 1].startUs);
    }
  }
  EXPECT_EQ(events[1].instruction->name, "head");
}

TEST(Executor, BaseLearningRateOverride) {
  Executor ex(makeTinyPlan(DType::F64), 2);
  fillBatch(ex);
  ex.setBaseLearningRate(0.125);
  StepResult r = ex.trainStep([](int64_t, int32_t *, int32_t *) {}, 1);
  EXPECT_EQ(r.learningRate, 0.125);
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

void step(Executor &ex) {
  ex.trainStep([](int64_t, int32_t *, int32_t *) {}, 1);
}

TEST(Executor, ResumingFromACheckpointIsBitwiseIdentical) {
  std::string path = uniqueTempPath(::testing::TempDir(), "resume.ckpt");
  Executor a(makeTinyPlan(DType::F32), 8);
  fillBatch(a);
  for (int i = 0; i < 3; ++i)
    step(a);
  a.saveCheckpoint(path, 123);
  std::vector<double> lossesA;
  for (int i = 0; i < 2; ++i)
    lossesA.push_back(
        a.trainStep([](int64_t, int32_t *, int32_t *) {}, 1).loss);

  // Another seed and another memory layout: the names carry the state.
  Plan moved = makeTinyPlan(DType::F32);
  for (Buffer &buf : moved.buffers)
    buf.offset += 4096;
  moved.arenas[0].bytes += 4096;
  moved.summary.peakBytesPerArena[0] += 4096;
  Executor b(moved, 99);
  fillBatch(b);
  EXPECT_EQ(b.loadCheckpoint(path), 123);
  EXPECT_EQ(b.step(), 4);
  std::vector<double> lossesB;
  for (int i = 0; i < 2; ++i)
    lossesB.push_back(
        b.trainStep([](int64_t, int32_t *, int32_t *) {}, 1).loss);
  EXPECT_EQ(lossesA, lossesB);
  EXPECT_EQ(a.read("head.weight"), b.read("head.weight"));
  EXPECT_EQ(a.read("wte.weight.exp_avg_sq"), b.read("wte.weight.exp_avg_sq"));
  std::remove(path.c_str());
}

TEST(Executor, ABadCheckpointChangesNothing) {
  // Damaged checkpoints (test/Runtime/CheckpointTest.cpp has the format's
  // own cases): each load fails naming the file and the tensor, and the
  // executor keeps its weights and step.
  std::string dir = uniqueTempPath(::testing::TempDir(), "bad.ckpt");
  Executor a(makeTinyPlan(DType::F64), 1);
  const std::string step = a.saveCheckpoint(dir);
  EXPECT_EQ(step, dir + "/step-00000000");
  const std::string data = step + "/rank-00000.safetensors";
  const std::string manifest = step + "/manifest.json";
  auto slurpFile = [](const std::string &path) {
    std::ifstream is(path, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(is)),
                             std::istreambuf_iterator<char>());
  };
  auto put = [](const std::string &path, const std::vector<char> &bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), std::streamsize(bytes.size()));
  };
  const std::vector<char> goodData = slurpFile(data);
  const std::vector<char> goodManifest = slurpFile(manifest);

  Executor b(makeTinyPlan(DType::F64), 2);
  std::vector<double> before = b.read("wte.weight");
  auto load = [&]() {
    try {
      b.loadCheckpoint(dir);
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::vector<char> corrupt = goodData;
  corrupt[corrupt.size() - 3] ^= 1;
  put(data, corrupt);
  std::string msg = load();
  EXPECT_NE(msg.find("checksum mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find(data), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor '"), std::string::npos) << msg;
  for (size_t len = 0; len < goodData.size(); len += 97) {
    put(data, std::vector<char>(goodData.begin(), goodData.begin() + len));
    msg = load();
    EXPECT_NE(msg.find(data), std::string::npos) << msg;
  }
  put(data, goodData);
  for (size_t len = 0; len < goodManifest.size(); len += 61) {
    put(manifest,
        std::vector<char>(goodManifest.begin(), goodManifest.begin() + len));
    msg = load();
    EXPECT_NE(msg.find("checkpoint manifest '" + manifest + "'"),
              std::string::npos)
        << msg;
  }
  put(manifest, goodManifest);
  std::remove(data.c_str());
  msg = load();
  EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
  EXPECT_EQ(b.read("wte.weight"), before);
  EXPECT_EQ(b.step(), 1);

  // A checkpoint of another model names the tensor that does not fit.
  TinyShape wider;
  wider.hidden = 12;
  Executor c(makeTinyPlan(DType::F64, wider), 1);
  c.saveCheckpoint(dir);
  msg = load();
  EXPECT_NE(msg.find("tensor 'wte.weight' is f64 [16, 12] in the checkpoint "
                     "but f64 [16, 8] in the plan"),
            std::string::npos)
      << msg;
  EXPECT_EQ(b.read("wte.weight"), before);
  EXPECT_THROW(b.loadCheckpoint("/nonexistent/x.ckpt"), Error);
  // The good one, back in place, loads.
  a.saveCheckpoint(dir);
  EXPECT_EQ(load(), "no error");
  EXPECT_EQ(b.read("wte.weight"), a.read("wte.weight"));
}

TEST(Executor, PlanFromAFileRuns) {
  std::vector<uint8_t> bytes = writePlan(makeTinyPlan(DType::F32));
  Executor ex(readPlan(bytes.data(), bytes.size()), 4);
  fillBatch(ex);
  ex.runProgram("forward");
  EXPECT_TRUE(std::isfinite(ex.loss()));
}

} // namespace
