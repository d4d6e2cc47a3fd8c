//===- CudaBackendTest.cpp - The executor on the CUDA backend -------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The oracle is the CPU backend running the same plan: the same initial
// weights (drawn on the host, so bit-equal), the same batches, the same
// dropout masks. The kernels sum in other orders, so per-step losses agree
// within 1e-3 relative over ten steps and the trained weights within 1e-3
// relative L2 norm, not bit for bit. The plans are gpt-tiny as the compiler
// makes it (test/Runtime/Inputs; cuda-test-plans.test keeps them current),
// since a GPU machine has no MLIR to compile one.
//
// Without a CUDA device the binary prints why and exits 77 (ctest: skipped).
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CudaBackend.h"
#include "dsc/Runtime/Data.h"
#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/ThreadCommunicator.h"

#include "CudaTestMain.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

using namespace dsc::rt;

namespace {

constexpr int kSteps = 10;

std::string inputPlan(const std::string &name) {
  return std::string(DSC_TEST_INPUTS) + "/" + name;
}

std::unique_ptr<Backend> cudaOn(int device) {
  CudaBackendOptions options;
  options.device = device;
  return createCudaBackend(options);
}

/// Per-step losses of `steps` steps, rank `dpRank` of `dpSize` taking its
/// part of each step's samples (as dsc-run does).
std::vector<double> train(Executor &ex, const BatchSampler &sampler, int steps,
                          int64_t dpRank = 0, int64_t dpSize = 1) {
  const int64_t M = ex.plan().microBatches;
  const int64_t batch = ex.plan().microBatchSize;
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    auto fill = [&](int64_t m, int32_t *tokens, int32_t *targets) {
      const int64_t first = ((int64_t(s) * dpSize + dpRank) * M + m) * batch;
      sampler.sample(first, batch, tokens, targets);
    };
    losses.push_back(ex.trainStep(fill, M).loss);
  }
  return losses;
}

double relativeL2(const std::vector<double> &a, const std::vector<double> &b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

class CudaBackendTest : public ::testing::Test {
protected:
  void SetUp() override {
    plan = readPlanFile(inputPlan("gpt-tiny-one.plan"));
    source = openTokenSource("", plan.vocabSize);
    sampler = std::make_unique<BatchSampler>(
        *source, plan.microBatchSize, plan.seqLength, 1234, plan.vocabSize);
  }
  Plan plan;
  std::unique_ptr<TokenSource> source;
  std::unique_ptr<BatchSampler> sampler;
};

TEST_F(CudaBackendTest, InitialWeightsAreTheCpuBackendsBitForBit) {
  Executor cpu(plan, 7);
  Executor gpu(plan, 7, nullptr, cudaOn(0));
  EXPECT_STREQ(gpu.backend().name(), "cuda");
  for (const Buffer &b : plan.buffers)
    if (b.role == BufferRole::Parameter) {
      EXPECT_EQ(cpu.read(b.name), gpu.read(b.name)) << b.name;
    }
}

/// kSteps steps of `cpu` and `gpu` (one plan): their losses agree within
/// 1e-3 relative at every step; the GPU's losses.
std::vector<double> expectLossesAlike(Executor &cpu, Executor &gpu,
                                      const BatchSampler &sampler) {
  std::vector<double> want = train(cpu, sampler, kSteps);
  std::vector<double> got = train(gpu, sampler, kSteps);
  for (int s = 0; s < kSteps; ++s)
    EXPECT_NEAR(got[s], want[s], 1e-3 * std::fabs(want[s])) << "step " << s;
  return got;
}

TEST_F(CudaBackendTest, TrainsLikeTheCpuBackend) {
  Executor cpu(plan, 1234);
  Executor gpu(plan, 1234, nullptr, cudaOn(0));
  std::vector<double> got = expectLossesAlike(cpu, gpu, *sampler);
  EXPECT_LT(got.back(), got.front()); // it trains
  EXPECT_NEAR(gpu.gradNorm(), cpu.gradNorm(), 1e-2 * cpu.gradNorm());
  EXPECT_DOUBLE_EQ(gpu.learningRate(), double(float(cpu.learningRate())));
  for (const Buffer &b : plan.buffers)
    if (b.role == BufferRole::Parameter) {
      EXPECT_LT(relativeL2(gpu.read(b.name), cpu.read(b.name)), 1e-3) << b.name;
    }
}

TEST_F(CudaBackendTest, OffloadedDelayedUpdateTrainsLikeTheCpuBackend) {
  // ZeRO-Offload on the CUDA backend: the states in pinned host memory,
  // the transfers over PCIe, the update by the CPU Adam, delayed a step
  // (gpt-tiny-dpu.plan: offload-optimizer=host dpu=1).
  const Plan dpu = readPlanFile(inputPlan("gpt-tiny-dpu.plan"));
  Executor cpu(dpu, 1234);
  Executor gpu(dpu, 1234, nullptr, cudaOn(0));
  expectLossesAlike(cpu, gpu, *sampler);
  for (const Buffer &b : dpu.buffers)
    if (b.role == BufferRole::Parameter) {
      EXPECT_LT(relativeL2(gpu.read(b.name), cpu.read(b.name)), 1e-3) << b.name;
      EXPECT_LT(relativeL2(gpu.read("offload.master." + b.name),
                           cpu.read("offload.master." + b.name)),
                1e-3)
          << b.name;
    }
}

TEST_F(CudaBackendTest, AnMoeModelTrainsLikeTheCpuBackend) {
  // gpt-tiny-moe.plan: 4 experts, DeepSpeed's top-2 with token dropping.
  // The routers decide alike on both backends (routing in double), so
  // the losses and weights follow the CPU's as the dense model's do.
  const Plan moe = readPlanFile(inputPlan("gpt-tiny-moe.plan"));
  auto moeSource = openTokenSource("", moe.vocabSize);
  BatchSampler moeSampler(*moeSource, moe.microBatchSize, moe.seqLength, 1234,
                          moe.vocabSize);
  Executor cpu(moe, 1234);
  Executor gpu(moe, 1234, nullptr, cudaOn(0));
  std::vector<double> got = expectLossesAlike(cpu, gpu, moeSampler);
  EXPECT_LT(got.back(), got.front());
  for (const Buffer &b : moe.buffers)
    if (b.role == BufferRole::Parameter) {
      EXPECT_LT(relativeL2(gpu.read(b.name), cpu.read(b.name)), 1e-3) << b.name;
    }
}

TEST_F(CudaBackendTest, CheckpointsRoundTripThroughTheDevice) {
  const std::string path = ::testing::TempDir() + "/cuda-backend.ckpt";
  Executor gpu(plan, 1234, nullptr, cudaOn(0));
  train(gpu, *sampler, 2);
  gpu.saveCheckpoint(path, 64);
  // A CPU executor resumes the GPU's checkpoint: the same bytes.
  Executor cpu(plan, 99);
  EXPECT_EQ(cpu.loadCheckpoint(path), 64);
  for (const Buffer &b : plan.buffers)
    if (b.role == BufferRole::Parameter) {
      EXPECT_EQ(cpu.read(b.name), gpu.read(b.name)) << b.name;
    }
  Executor back(plan, 5, nullptr, cudaOn(0));
  back.loadCheckpoint(path);
  EXPECT_EQ(back.step(), gpu.step());
  for (const Buffer &b : plan.buffers)
    if (b.role == BufferRole::Parameter) {
      EXPECT_EQ(back.read(b.name), gpu.read(b.name)) << b.name;
    }
  std::remove(path.c_str());
}

TEST_F(CudaBackendTest, ABadTokenIdIsRefusedOnTheHostNamingItsPosition) {
  Executor gpu(plan, 1234, nullptr, cudaOn(0));
  std::vector<int32_t> tokens(size_t(plan.microBatchSize * plan.seqLength), 1);
  tokens[5] = int32_t(plan.vocabSize) + 3;
  try {
    gpu.setTokens(tokens.data(), tokens.size());
    FAIL() << "no error for a token id outside the vocabulary";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("at position 5 is outside the "
                                         "vocabulary [0, " +
                                         std::to_string(plan.vocabSize) + ")"),
              std::string::npos)
        << e.what();
  }
  tokens[5] = -1;
  EXPECT_THROW(gpu.setTargets(tokens.data(), tokens.size()), Error);
}

TEST_F(CudaBackendTest, AnArenaLargerThanTheDeviceIsRefusedByName) {
  Plan huge = plan;
  huge.arenas[0].bytes = uint64_t(1) << 50; // a petabyte
  try {
    Executor gpu(huge, 1, nullptr, cudaOn(0));
    FAIL() << "a 1 PiB arena was allocated";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("cannot allocate arena 0"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CudaBackendTest, ANonexistentDeviceIsRefused) {
  EXPECT_THROW(cudaOn(1 << 20), Error);
}

TEST(CudaBackendNccl, DataParallelZero3EqualsOneGpu) {
  if (cudaDeviceCount() < 2)
    GTEST_SKIP() << "needs two CUDA devices (one per NCCL rank)";
  Plan one = readPlanFile(inputPlan("gpt-tiny-one.plan"));
  Plan dp2 = readPlanFile(inputPlan("gpt-tiny-dp2-zero3.plan"));
  auto source = openTokenSource("", one.vocabSize);
  BatchSampler sampler(*source, one.microBatchSize, one.seqLength, 1234,
                       one.vocabSize);
  // One GPU with both ranks' micro-batches: 2 per rank, 4 in all.
  Executor single(one, 1234, nullptr, cudaOn(0));
  std::vector<double> want;
  for (int s = 0; s < kSteps; ++s) {
    auto fill = [&](int64_t m, int32_t *tokens, int32_t *targets) {
      sampler.sample((int64_t(s) * 4 + m) * one.microBatchSize,
                     one.microBatchSize, tokens, targets);
    };
    want.push_back(single.trainStep(fill, 4).loss);
  }
  std::vector<std::vector<double>> got(2);
  std::mutex failures;
  std::vector<std::string> errors;
  runRanks(2, [&](Communicator &world) {
    try {
      Executor ex(dp2, 1234, &world, cudaOn(world.rank()));
      got[size_t(world.rank())] = train(ex, sampler, kSteps, world.rank(), 2);
    } catch (const std::exception &e) {
      std::lock_guard<std::mutex> lock(failures);
      errors.push_back(e.what());
      world.abort(e.what());
    }
  });
  ASSERT_TRUE(errors.empty()) << errors.front();
  for (int s = 0; s < kSteps; ++s) {
    // Each rank's loss is its own micro-batches' mean; their mean is the
    // step's.
    const double mean = 0.5 * (got[0][s] + got[1][s]);
    EXPECT_NEAR(mean, want[s], 1e-3 * std::fabs(want[s])) << "step " << s;
  }
}

} // namespace
int main(int argc, char **argv) {
  return dsc::rt::test::runCudaTests(argc, argv, "CUDA backend tests");
}
