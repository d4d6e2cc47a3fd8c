//===- CudaBackend.cpp - Plan instructions on a CUDA device ---------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Binds each compute instruction to a CUDA kernel or cuBLASLt GEMM
// (CudaKernels.h) on the compute stream, over device arenas. The NCCL
// communicators run on a second stream: a launched collective waits for an
// event recorded on compute, and compute waits for the collective's event
// only where the executor says an instruction touches its bytes
// (Executor::setOverlapCommunication), so ZeRO-3's gathers and the
// gradients' reductions run beside the kernels.
//
// The host waits on the device only where a value must cross: the loss and
// the gradient norm (one scalar each; the learning rate and the loss-scale
// seed are the host's own, and token and target ids were checked on the host
// before they were copied in). Every wait goes through the NCCL watchdog
// first, so a dead peer is an error after DSC_NCCL_TIMEOUT_S, not a hang. Each
// instruction's argument reading is shared with the CPU backend
// (InstructionArgs.h).
//
//===----------------------------------------------------------------------===//
#include "CudaBackendImpl.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace dsc::rt;
using namespace dsc::rt::cuda_backend;

constexpr int kHostScalarSlots = 1024;
constexpr int kCollectiveEvents = 64;

CudaBackend::CudaBackend(const CudaBackendOptions &options)
    : device(options.device) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (device < 0 || device >= count)
    throw Error("CUDA device " + std::to_string(device) +
                " does not exist (this process sees " + std::to_string(count) +
                ")");
  check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  try {
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
          "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&commStream, cudaStreamNonBlocking),
          "cudaStreamCreate");
    check(cudaEventCreateWithFlags(&computeEvent, cudaEventDisableTiming),
          "cudaEventCreate");
    collectiveEvents.assign(kCollectiveEvents, nullptr);
    for (cudaEvent_t &e : collectiveEvents)
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
            "cudaEventCreate");
    cublasStatus_t st = cuda::createMatmulContext(
        matmul, size_t(32) << 20,
        options.tf32 ? cuda::MathMode::Tf32 : cuda::MathMode::Fp32);
    if (st != CUBLAS_STATUS_SUCCESS)
      throw Error("cuBLASLt handle and workspace: status " +
                  std::to_string(int(st)));
    check(cudaMallocHost(&hostScalars, kHostScalarSlots * sizeof(float)),
          "cudaMallocHost");
    // Kernel scratch comes from the stream-ordered pool: keep what it holds
    // across waits instead of returning it to the driver at each one.
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
      uint64_t keep = UINT64_MAX;
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
  } catch (...) {
    cleanup();
    throw;
  }
}

CudaBackend::~CudaBackend() {
  // Never throws: a failed wait was reported where it happened.
  setDevice();
  if (stream)
    cudaStreamSynchronize(stream);
  if (commStream)
    cudaStreamSynchronize(commStream);
  cleanup();
}

void CudaBackend::cleanup() {
  cuda::destroyMatmulContext(matmul);
  for (void *p : hostAllocations)
    cudaFreeHost(p);
  hostAllocations.clear();
  for (void *p : deviceAllocations)
    cudaFree(p);
  deviceAllocations.clear();
  cudaFree(deviceSums);
  cudaFreeHost(hostScalars);
  deviceSums = nullptr;
  hostScalars = nullptr;
  for (cudaEvent_t e : collectiveEvents)
    if (e)
      cudaEventDestroy(e);
  collectiveEvents.clear();
  if (computeEvent)
    cudaEventDestroy(computeEvent);
  computeEvent = nullptr;
  if (commStream)
    cudaStreamDestroy(commStream);
  if (stream)
    cudaStreamDestroy(stream);
  stream = commStream = nullptr;
}

uint64_t CudaBackend::launchCollective(const std::function<void()> &issue) {
  setDevice();
  // After the compute issued so far...
  check(cudaEventRecord(computeEvent, stream), "cudaEventRecord");
  check(cudaStreamWaitEvent(commStream, computeEvent, 0),
        "cudaStreamWaitEvent");
  inCollective = true;
  try {
    issue();
  } catch (...) {
    inCollective = false;
    throw;
  }
  inCollective = false;
  // ...and before the compute that waits for its ticket.
  const uint64_t ticket = ++lastTicket;
  check(
      cudaEventRecord(collectiveEvents[ticket % kCollectiveEvents], commStream),
      "cudaEventRecord");
  if (!overlap)
    waitCollective(ticket);
  return ticket;
}

void CudaBackend::waitCollective(uint64_t ticket) {
  if (!ticket)
    return;
  setDevice();
  check(cudaStreamWaitEvent(stream,
                            collectiveEvents[ticket % kCollectiveEvents], 0),
        "cudaStreamWaitEvent");
}

void CudaBackend::waitCollectives() { waitCollective(lastTicket); }

void CudaBackend::prepare(const Plan &plan) {
  setDevice();
  int maxBuffers = 1;
  for (const Program &prog : plan.programs) {
    for (size_t i = 0; i < prog.instructions.size(); ++i) {
      const Instruction &inst = prog.instructions[i];
      auto fail = [&](const std::string &msg) {
        throw instructionError(prog, i, msg);
      };
      if (isVocabParallel(inst.opcode))
        fail("the CUDA backend has no vocabulary-parallel kernels yet: "
             "compile with tp=1 to run on CUDA");
      // The inference programs' kernels are the CPU backend's only (yet).
      const bool inferenceOnly = (inst.opcode == Opcode::PagedAttention) ||
                                 (inst.opcode == Opcode::RotaryAt) ||
                                 (inst.opcode == Opcode::PositionEmbeddingAt) ||
                                 (inst.opcode == Opcode::GatherRows) ||
                                 (inst.opcode == Opcode::Sample);
      if (inferenceOnly)
        fail("the CUDA backend has no inference kernels yet (paged "
             "attention, sampling): run inference plans on the CPU backend");
      const bool onebit = (inst.opcode == Opcode::OnebitAdam) ||
                          (inst.opcode == Opcode::AdamMomentum) ||
                          (inst.opcode == Opcode::FrozenAdam) ||
                          (inst.opcode == Opcode::OnebitAdamShard) ||
                          (inst.opcode == Opcode::FrozenAdamShard) ||
                          (inst.opcode == Opcode::CompressedAllReduce) ||
                          (inst.opcode == Opcode::OnebitLamb) ||
                          (inst.opcode == Opcode::LambFreezeScale) ||
                          (inst.opcode == Opcode::LambScalingCoeffs) ||
                          (inst.opcode == Opcode::LambMomentum) ||
                          (inst.opcode == Opcode::FrozenLamb) ||
                          (inst.opcode == Opcode::ZeroOneAdamUpdate) ||
                          (inst.opcode == Opcode::AddLearningRate) ||
                          (inst.opcode == Opcode::ZeroOneAdamRewind) ||
                          (inst.opcode == Opcode::ZeroOneAdamResync);
      // OneCycle's cycle_momentum (a scheduled beta1).
      const bool scheduledBeta1 =
          (inst.opcode == Opcode::CyclicMomentum) ||
          (inst.opcode == Opcode::AdamWScheduledBeta1) ||
          (inst.opcode == Opcode::AdamWShardScheduledBeta1);
      if (scheduledBeta1)
        fail("the CUDA backend has no scheduled-beta1 AdamW kernel yet "
             "(OneCycle's cycle_momentum): run it on the CPU backend, or set "
             "\"cycle_momentum\": false");
      if (onebit)
        fail("the CUDA backend has no 1-bit Adam, 0/1 Adam or 1-bit LAMB "
             "kernels yet: run optimizer=onebit_adam, zero_one_adam or "
             "onebit_lamb on the CPU backend");
      // Ids are checked on the host as they are copied in (the executor's
      // setTokens/setTargets), so the kernels read only the plan's tokens
      // and targets.
      const bool readsIds = inst.opcode == Opcode::Embedding ||
                            inst.opcode == Opcode::EmbeddingGrad ||
                            inst.opcode == Opcode::CrossEntropy ||
                            inst.opcode == Opcode::CrossEntropyGrad;
      if (readsIds) {
        const Buffer &ids = plan.buffers[inst.inputs[1]];
        if (ids.role != BufferRole::Tokens && ids.role != BufferRole::Targets)
          fail("its ids come from buffer '" + ids.name +
               "', not the tokens or targets the CUDA backend checks on the "
               "host");
      }
      auto checkType = [&](uint32_t id) {
        DType t = plan.buffers[id].dtype;
        if (t == DType::F64)
          fail(std::string("the CUDA backend runs f32, bf16 and f16 "
                           "buffers, not f64 (buffer '") +
               plan.buffers[id].name + "')");
      };
      for (uint32_t id : inst.inputs)
        checkType(id);
      for (uint32_t id : inst.outputs)
        checkType(id);
      // The optimizer's kernels: fp32 masters, moments, gradients, scalars.
      switch (inst.opcode) {
      case Opcode::LearningRate:
      case Opcode::CyclicLearningRate:
      case Opcode::GlobalNormClip:
      case Opcode::GlobalNormClipParts:
      case Opcode::AdamW:
      case Opcode::AdamWShard:
      case Opcode::Sgd:
        for (const std::vector<uint32_t> *ids : {&inst.inputs, &inst.outputs})
          for (uint32_t id : *ids)
            if (plan.buffers[id].dtype != DType::F32)
              fail(std::string("the CUDA optimizer kernels take f32 "
                               "weights, gradients and scalars, not ") +
                   dtypeName(plan.buffers[id].dtype) + " (buffer '" +
                   plan.buffers[id].name + "')");
        break;
      default:
        break;
      }
      if ((inst.opcode == Opcode::Attention ||
           inst.opcode == Opcode::AttentionGrad ||
           inst.opcode == Opcode::AttentionLse ||
           inst.opcode == Opcode::AttentionGradLse) &&
          !cuda::attentionSupported(attentionShapeOf(
              plan, inst, 0, std::vector<int64_t>(plan.mesh.size(), 0))))
        fail("the CUDA attention kernels take head dims 16, 32, 64 and 128");
      if (inst.opcode == Opcode::GlobalNormClip ||
          inst.opcode == Opcode::GlobalNormClipParts)
        maxBuffers = std::max(maxBuffers, int(inst.inputs.size()));
    }
  }
  deviceSumsCapacity = maxBuffers;
  check(cudaMalloc(&deviceSums, sizeof(double) * size_t(maxBuffers)),
        "cudaMalloc (norm scratch)");
}

void *CudaBackend::allocate(uint64_t bytes, Tier tier,
                            const std::string &what) {
  if (!bytes)
    return nullptr;
  setDevice();
  void *p = nullptr;
  // The host tier is pinned, so its copies run at full PCIe rate; the
  // device tier is one cudaMalloc (256-byte aligned).
  cudaError_t e =
      tier == Tier::Device ? cudaMalloc(&p, bytes) : cudaMallocHost(&p, bytes);
  if (e != cudaSuccess) {
    size_t freeBytes = 0, totalBytes = 0;
    cudaMemGetInfo(&freeBytes, &totalBytes);
    throw Error("cannot allocate " + what + " on CUDA device " +
                std::to_string(device) + ": " + cudaMessage(e) + " (" +
                std::to_string(freeBytes) + " of " +
                std::to_string(totalBytes) + " bytes free)");
  }
  if (tier != Tier::Device)
    hostAllocations.push_back(p);
  else
    deviceAllocations.push_back(p);
  return p;
}

void CudaBackend::release(void *memory) {
  if (!memory)
    return;
  setDevice();
  // Nothing may still use it; a failed wait was reported elsewhere.
  try {
    if (ncclWorld)
      synchronizeNccl(*ncclWorld);
  } catch (const Error &) {
  }
  cudaStreamSynchronize(stream);
  forget(memory, 1);
  auto host = std::find(hostAllocations.begin(), hostAllocations.end(), memory);
  if (host != hostAllocations.end()) {
    hostAllocations.erase(host);
    cudaFreeHost(memory);
    return;
  }
  auto dev =
      std::find(deviceAllocations.begin(), deviceAllocations.end(), memory);
  if (dev != deviceAllocations.end())
    deviceAllocations.erase(dev);
  cudaFree(memory);
}

void CudaBackend::synchronize() {
  setDevice();
  // The communication stream first, under the NCCL watchdog: the compute
  // stream may be waiting for it, and a dead peer must end in an error.
  if (ncclWorld)
    synchronizeNccl(*ncclWorld);
  check(cudaStreamSynchronize(commStream), "cudaStreamSynchronize");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  hostScalarNext = 0;
}

double CudaBackend::readScalar(const Buffer &buffer, const void *data) {
  // Only persistent f32 buffers: a temporary's bytes are shared with others.
  if (buffer.role != BufferRole::Temporary && buffer.dtype == DType::F32) {
    auto it = hostWritten.find(data);
    if (it != hostWritten.end())
      return double(it->second);
  }
  uint8_t bytes[8] = {};
  copyOut(bytes, data, std::min<uint64_t>(buffer.bytes, sizeof bytes));
  return loadAsDouble(bytes, buffer.dtype, 0);
}

void CudaBackend::forget(const void *memory, uint64_t bytes) {
  const auto *begin = static_cast<const uint8_t *>(memory);
  for (auto it = hostWritten.begin(); it != hostWritten.end();) {
    const auto *at = static_cast<const uint8_t *>(it->first);
    if (at + sizeof(float) > begin && at < begin + bytes)
      it = hostWritten.erase(it);
    else
      ++it;
  }
}

void CudaBackend::writeScalar(float *data, double value) {
  // A pinned slot that stays untouched until the next wait, when the copy
  // has surely run.
  if (hostScalarNext == kHostScalarSlots)
    synchronize();
  float *slot = hostScalars + hostScalarNext++;
  *slot = float(value);
  hostWritten[data] = *slot;
  check(cudaMemcpyAsync(data, slot, sizeof(float), cudaMemcpyHostToDevice,
                        stream),
        "cudaMemcpyAsync (scalar)");
}

std::vector<double> CudaBackend::sumsOfSquares(const float *const *buffers,
                                               const int64_t *sizes,
                                               int count) {
  for (int i = 0; i < count; ++i) {
    const float *b = buffers[i];
    check(cuda::sumOfSquares(&b, &sizes[i], 1, deviceSums + i, stream),
          "sumOfSquares (gradient norm)");
  }
  std::vector<double> sums(static_cast<size_t>(count));
  copyOut(sums.data(), deviceSums, sizeof(double) * size_t(count));
  return sums;
}

void CudaBackend::run(InstructionContext &ex, const Program &prog,
                      size_t index) {
  setDevice();
  const Plan &plan = ex.plan();
  const Instruction &inst = prog.instructions[index];
  if (inst.opcode == Opcode::Cast) {
    const Buffer &x = plan.buffers[inst.inputs[0]];
    const Buffer &y = plan.buffers[inst.outputs[0]];
    const void *from = ex.buffer(inst.inputs[0]).data;
    void *to = ex.buffer(inst.outputs[0]).data;
    const int64_t n = numElements(x.shape);
    cudaError_t e = cudaErrorInvalidValue;
    auto f32 = [](const void *p) { return static_cast<const float *>(p); };
    if (x.dtype == DType::F32 && y.dtype == DType::BF16)
      e = cuda::convert(f32(from), static_cast<__nv_bfloat16 *>(to), n, stream);
    else if (x.dtype == DType::F32 && y.dtype == DType::F16)
      e = cuda::convert(f32(from), static_cast<__half *>(to), n, stream);
    else if (x.dtype == DType::BF16 && y.dtype == DType::F32)
      e = cuda::convert(static_cast<const __nv_bfloat16 *>(from),
                        static_cast<float *>(to), n, stream);
    else if (x.dtype == DType::F16 && y.dtype == DType::F32)
      e = cuda::convert(static_cast<const __half *>(from),
                        static_cast<float *>(to), n, stream);
    else if (x.dtype == y.dtype) {
      copy(to, from, x.bytes);
      e = cudaSuccess;
    }
    if (e != cudaSuccess)
      throw instructionError(prog, index,
                             std::string("cast from ") + dtypeName(x.dtype) +
                                 " to " + dtypeName(y.dtype) + " failed (" +
                                 cudaMessage(e) + ")");
    return;
  }
  // The element type of the data the instruction works on: its first
  // input's (a cross-entropy's loss scalar is f32 whatever its logits are).
  const DType t =
      plan.buffers[inst.inputs.empty() ? inst.outputs[0] : inst.inputs[0]]
          .dtype;
  if (t == DType::BF16)
    execute<__nv_bfloat16>(ex, prog, index);
  else if (t == DType::F16)
    execute<__half>(ex, prog, index);
  else
    execute<float>(ex, prog, index);
}

std::unique_ptr<Backend>
dsc::rt::createCudaBackend(const CudaBackendOptions &options) {
  return std::make_unique<CudaBackend>(options);
}

bool dsc::rt::haveCudaBackend() { return true; }

int dsc::rt::cudaDeviceCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}
