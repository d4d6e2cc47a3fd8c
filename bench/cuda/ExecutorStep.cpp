//===- ExecutorStep.cpp - A compiled plan's training step on CUDA ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Times the product path: a plan as the compiler makes it (bench/cuda/
// gpt2-small{,-bf16}.plan: GPT-2 small, micro-batch 4 x 1024, f32 or
// precision=bf16), run by the executor on the CUDA backend, every
// instruction through the same dispatch dsc-run uses. Reported as ms/step,
// tokens/s, model TFLOP/s, that as a fraction of the GEMM ceiling cuBLASLt
// reaches on this GPU in the same run in the plan's math (bf16 for a bf16
// plan; fp32, or TF32 with --tf32, for an f32 one), and for a bf16 plan the
// MFU against the datasheet's dense bf16 peak. The kernel-level bf16 step
// is dsc-bench-cuda-gpt2's; this one says what the executor adds.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CudaBackend.h"
#include "dsc/Runtime/CudaKernels.h"
#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/PlanIO.h"

#include "GpuPeak.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace dsc::rt;
namespace cu = dsc::rt::cuda;

namespace {

constexpr int kSkipCode = 77;

/// GEMM TFLOP/s that cuBLASLt reaches on an n^3 product of T (fp32 GEMMs
/// on TF32 tensor cores when `tf32`).
template <typename T> double gemmCeiling(bool tf32, int64_t n) {
  cu::MatmulContext ctx;
  if (cu::createMatmulContext(ctx, size_t(32) << 20,
                              tf32 ? cu::MathMode::Tf32 : cu::MathMode::Fp32) !=
      CUBLAS_STATUS_SUCCESS)
    return 0;
  T *a = nullptr, *b = nullptr, *c = nullptr;
  const size_t bytes = size_t(n * n) * sizeof(T);
  cudaMalloc(&a, bytes);
  cudaMalloc(&b, bytes);
  cudaMalloc(&c, bytes);
  cudaMemset(a, 0, bytes);
  cudaMemset(b, 0, bytes);
  MatmulShape s;
  s.m = n;
  s.n = n;
  s.k = n;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  for (int i = 0; i < 3; ++i)
    cu::matmulForward(ctx, a, b, c, s, false, stream);
  cudaStreamSynchronize(stream);
  const int reps = 10;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i)
    cu::matmulForward(ctx, a, b, c, s, false, stream);
  cudaStreamSynchronize(stream);
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cudaStreamDestroy(stream);
  cu::destroyMatmulContext(ctx);
  return 2.0 * double(n) * double(n) * double(n) * reps / seconds / 1e12;
}

/// True when the plan computes in bf16 (precision=bf16).
bool isBf16Plan(const Plan &plan) {
  for (const Buffer &b : plan.buffers)
    if (b.role == BufferRole::Temporary && b.dtype == DType::BF16)
      return true;
  return false;
}

/// Model FLOPs per token of a GPT plan, PaLM's 6N + 12 L h s (appendix B):
/// N counts each parameter once, L is the forward's attention count and h
/// its query width.
double flopsPerToken(const Plan &plan) {
  double n = 0;
  for (const Buffer &b : plan.buffers)
    if (b.role == BufferRole::Parameter)
      n += double(numElements(b.shape));
  int64_t layers = 0, hidden = 0;
  if (const Program *fwd = plan.findProgram("forward"))
    for (const Instruction &inst : fwd->instructions)
      if (inst.opcode == Opcode::Attention ||
          inst.opcode == Opcode::AttentionLse) {
        ++layers;
        hidden = plan.buffers[inst.inputs[0]].shape[2];
      }
  return 6.0 * n + 12.0 * double(layers) * double(hidden) *
                       double(plan.seqLength);
}

} // namespace

int main(int argc, char **argv) {
  std::string path;
  int steps = 10, warmup = 2;
  bool tf32 = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc)
      warmup = std::atoi(argv[++i]);
    else if (a == "--tf32")
      tf32 = true;
    else if (!a.empty() && a[0] != '-' && path.empty())
      path = a;
    else {
      std::fprintf(stderr, "usage: dsc-bench-cuda-executor PLAN [--steps N] "
                           "[--warmup W] [--tf32]\n");
      return 1;
    }
  }
  if (path.empty() || steps < 1 || warmup < 0) {
    std::fprintf(stderr, "usage: dsc-bench-cuda-executor PLAN [--steps N] "
                         "[--warmup W] [--tf32]\n");
    return 1;
  }
  if (cudaDeviceCount() == 0) {
    std::printf("no CUDA device: executor benchmark skipped\n");
    return kSkipCode;
  }
  try {
    Plan plan = readPlanFile(path);
    const int64_t M = plan.microBatches;
    const int64_t tokensPerStep = M * plan.microBatchSize * plan.seqLength;
    CudaBackendOptions options;
    options.tf32 = tf32;
    Executor ex(plan, 1234, nullptr, createCudaBackend(options));
    // Synthetic ids: the step's cost does not depend on them.
    std::vector<int32_t> ids(size_t(plan.microBatchSize * plan.seqLength));
    uint64_t state = 88172645463325252ull;
    auto fill = [&](int64_t, int32_t *tokens, int32_t *targets) {
      for (size_t i = 0; i < ids.size(); ++i) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        tokens[i] = int32_t(state % uint64_t(plan.vocabSize));
        targets[i] = int32_t((state >> 32) % uint64_t(plan.vocabSize));
      }
    };
    double firstLoss = 0;
    for (int i = 0; i < warmup; ++i) {
      double loss = ex.trainStep(fill, M).loss;
      if (i == 0)
        firstLoss = loss;
    }
    auto t0 = std::chrono::steady_clock::now();
    double lastLoss = 0;
    for (int i = 0; i < steps; ++i)
      lastLoss = ex.trainStep(fill, M).loss; // reads the loss: a full wait
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count() /
        steps;
    const double tflops = flopsPerToken(plan) * double(tokensPerStep) /
                          seconds / 1e12;
    const bool bf16 = isBf16Plan(plan);
    const char *math = bf16 ? "bf16" : tf32 ? "TF32" : "fp32";
    const double ceiling = bf16 ? gemmCeiling<__nv_bfloat16>(false, 8192)
                                : gemmCeiling<float>(tf32, 8192);
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    const double peak = bf16 ? dsc::bench::bf16PeakFor(prop.name) : 0.0;
    std::printf("device: %s; plan %s: %lld x %lld tokens x %lld "
                "micro-batches, %s\n",
                prop.name, path.c_str(), (long long)plan.microBatchSize,
                (long long)plan.seqLength, (long long)M, math);
    std::printf("cuBLASLt %s GEMM ceiling (8192^3): %.1f TFLOP/s; dense bf16 "
                "peak %.1f TFLOP/s%s\n",
                math, ceiling, peak, peak > 0 ? "" : " (unknown or f32)");
    std::printf("%10s %12s %10s %12s %8s %10s %10s\n", "ms/step", "tokens/s",
                "TFLOP/s", "of ceiling", "MFU", "loss[0]", "loss[end]");
    std::printf("%10.2f %12.0f %10.1f %11.1f%% %7.1f%% %10.4f %10.4f\n",
                seconds * 1e3, double(tokensPerStep) / seconds, tflops,
                ceiling > 0 ? 100.0 * tflops / ceiling : 0.0,
                peak > 0 ? 100.0 * tflops / peak : 0.0, firstLoss, lastLoss);
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "dsc-bench-cuda-executor: error: %s\n", e.what());
    return 1;
  }
}
