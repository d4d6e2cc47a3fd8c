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
// first, so a dead peer is an error after DSC_NCCL_TIMEOUT_S, not a hang. Each instruction's
// argument reading is shared with the CPU backend (InstructionArgs.h).
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CudaBackend.h"

#include "dsc/Runtime/CudaKernels.h"
#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/InstructionArgs.h"
#include "dsc/Runtime/NcclCommunicator.h"
#include "dsc/Runtime/ShardLayout.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <cmath>
#include <string>
#include <vector>

using namespace dsc::rt;

namespace {

std::string cudaMessage(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

void check(cudaError_t e, const std::string &call) {
  if (e != cudaSuccess)
    throw Error("CUDA " + call + " failed (" + cudaMessage(e) + ")");
}

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(const CudaBackendOptions &options);
  ~CudaBackend() override;

  const char *name() const override { return "cuda"; }
  bool hostAddressable() const override { return false; }
  void prepare(const Plan &plan) override;
  uint64_t scratchBytes() const override { return matmul.workspaceSize; }

  void *allocate(uint64_t bytes, Tier tier, const std::string &what) override;
  void release(void *memory) override;
  // cudaMemcpyDefault: a host-tier arena is pinned host memory, and the
  // pointers tell the direction.
  void fillZero(void *memory, uint64_t bytes) override {
    setDevice();
    forget(memory, bytes);
    if (bytes)
      check(cudaMemsetAsync(memory, 0, bytes, current()), "cudaMemsetAsync");
  }
  void copyIn(void *dst, const void *src, uint64_t bytes) override {
    if (!bytes)
      return;
    setDevice();
    forget(dst, bytes);
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream),
          "cudaMemcpyAsync (host to device)");
    // The host side may be reused as soon as this returns.
    synchronize();
    // A float scalar (the loss-scale seed) is remembered: see readScalar.
    if (bytes == sizeof(float))
      hostWritten[dst] = *static_cast<const float *>(src);
  }
  void copyOut(void *dst, const void *src, uint64_t bytes) override {
    if (!bytes)
      return;
    setDevice();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream),
          "cudaMemcpyAsync (device to host)");
    synchronize();
  }
  void copy(void *dst, const void *src, uint64_t bytes) override {
    setDevice();
    forget(dst, bytes);
    if (bytes && dst != src)
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, current()),
            "cudaMemcpyAsync (device to device)");
  }
  void accumulate(DType dtype, void *acc, const void *x,
                  int64_t count) override {
    if (dtype != DType::F32)
      throw Error(std::string("the CUDA backend accumulates f32, not ") +
                  dtypeName(dtype));
    setDevice();
    check(cuda::accumulate(static_cast<const float *>(x),
                           static_cast<float *>(acc), count, current()),
          "accumulate");
  }

  double sumOfSquares(const float *x, int64_t count) override {
    setDevice();
    return sumsOfSquares(&x, &count, 1)[0];
  }
  void scale(float *x, int64_t count, double factor) override {
    setDevice();
    check(cuda::scaleForward(x, x, count, float(factor), stream),
          "scaleForward (loss scaling)");
  }

  std::unique_ptr<Communicator> makeWorld(Communicator &hostWorld) override {
    setDevice();
    std::unique_ptr<Communicator> world =
        createNcclCommunicator(hostWorld, device, commStream);
    ncclWorld = world.get();
    return world;
  }
  void forgetWorld() override { ncclWorld = nullptr; }

  // The communication stream: see the file comment.
  bool overlapsByDefault() const override { return true; }
  void setOverlap(bool on) override { overlap = on; }
  uint64_t launchCollective(const std::function<void()> &issue) override;
  void waitCollective(uint64_t ticket) override;
  void waitCollectives() override;

  void run(Executor &ex, const Program &prog, size_t index) override;
  void synchronize() override;

private:
  /// run() for an instruction whose data are of element type T.
  template <typename T>
  void execute(Executor &ex, const Program &prog, size_t index);
  void setDevice() { cudaSetDevice(device); }
  /// The stream of the work being issued: the communication stream inside
  /// a launched collective, else the compute stream.
  cudaStream_t current() const { return inCollective ? commStream : stream; }
  /// Frees what the constructor made (also on its failure).
  void cleanup();
  /// A float scalar of the plan's memory on the host: the value the host
  /// wrote there last (the learning rate, the loss-scale seed) when nothing
  /// has written it since, else read (a wait).
  double readScalar(const Buffer &buffer, const void *data);
  /// Drops remembered scalars in [memory, memory + bytes).
  void forget(const void *memory, uint64_t bytes);
  /// Writes `value` to a device f32 scalar, in stream order.
  void writeScalar(float *data, double value);
  /// The sum of squares of each of `count` buffers, on the host.
  std::vector<double> sumsOfSquares(const float *const *buffers,
                                    const int64_t *sizes, int count);

  int device = 0;
  cudaStream_t stream = nullptr, commStream = nullptr;
  /// The NCCL world (owned by the executor); its watchdog guards every
  /// wait.
  Communicator *ncclWorld = nullptr;
  bool overlap = true, inCollective = false;
  /// Events of launched collectives (a ring: re-recording one only makes a
  /// later wait on an old ticket wait for a newer launch, which the lane's
  /// order implies anyway), and the compute event each launch waits for.
  std::vector<cudaEvent_t> collectiveEvents;
  cudaEvent_t computeEvent = nullptr;
  uint64_t lastTicket = 0;
  /// Scalars the host wrote (LearningRate, copyIn of the loss-scale seed),
  /// by address.
  std::map<const void *, float> hostWritten;
  cuda::MatmulContext matmul;
  /// Device scratch: per-buffer sums of squares (f64).
  double *deviceSums = nullptr;
  int deviceSumsCapacity = 0;
  /// Pinned host bytes for scalars written in stream order.
  float *hostScalars = nullptr;
  int hostScalarNext = 0;
  /// Pinned host allocations (the host tier), freed with cudaFreeHost.
  std::vector<void *> hostAllocations, deviceAllocations;
};

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
  check(cudaEventRecord(collectiveEvents[ticket % kCollectiveEvents],
                        commStream),
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
           inst.opcode == Opcode::AttentionGrad) &&
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

void *CudaBackend::allocate(uint64_t bytes, Tier tier, const std::string &what) {
  if (!bytes)
    return nullptr;
  setDevice();
  void *p = nullptr;
  // The host tier is pinned, so its copies run at full PCIe rate; the
  // device tier is one cudaMalloc (256-byte aligned).
  cudaError_t e = tier == Tier::Device ? cudaMalloc(&p, bytes)
                                       : cudaMallocHost(&p, bytes);
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

void CudaBackend::run(Executor &ex, const Program &prog, size_t index) {
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

template <typename T>
void CudaBackend::execute(Executor &ex, const Program &prog, size_t index) {
  const Plan &plan = ex.plan();
  const Instruction &inst = prog.instructions[index];
  const std::vector<int64_t> &ints = inst.ints;
  auto fail = [&](const std::string &msg) {
    throw instructionError(prog, index, msg);
  };
  auto launched = [&](cudaError_t e) {
    if (e != cudaSuccess)
      fail("kernel launch failed (" + cudaMessage(e) + ")");
  };
  auto gemmDone = [&](cublasStatus_t s) {
    if (s != CUBLAS_STATUS_SUCCESS)
      fail("cuBLASLt GEMM failed (status " + std::to_string(int(s)) + ")");
  };
  auto inB = [&](size_t i) -> const Buffer & {
    return plan.buffers[inst.inputs[i]];
  };
  auto outB = [&](size_t i) -> const Buffer & {
    return plan.buffers[inst.outputs[i]];
  };
  // The data in the instruction's element type; f32 scalars and optimizer
  // operands (losses, norms, learning rates, master weights, moments).
  auto in = [&](size_t i) { return ex.buffer(inst.inputs[i]).as<T>(); };
  auto out = [&](size_t i) { return ex.buffer(inst.outputs[i]).as<T>(); };
  auto inF = [&](size_t i) { return ex.buffer(inst.inputs[i]).as<float>(); };
  auto outF = [&](size_t i) {
    return ex.buffer(inst.outputs[i]).as<float>();
  };
  auto ids = [&](size_t i) {
    return ex.buffer(inst.inputs[i]).as<int32_t>();
  };
  auto count = [&](const Buffer &b) { return numElements(b.shape); };

  switch (inst.opcode) {
  case Opcode::Embedding: {
    // Its ids are the tokens buffer (prepare), checked on the host when
    // they were copied in (Executor::setTokens): no wait here.
    const Buffer &table = inB(0);
    launched(cuda::embeddingForward(in(0), ids(1), out(0), count(inB(1)),
                                    table.shape[0], table.shape[1],
                                    /*badCount=*/nullptr, stream));
    break;
  }
  case Opcode::EmbeddingGrad: {
    const Buffer &table = outB(0);
    launched(cuda::embeddingBackward(in(0), ids(1), out(0), count(inB(1)),
                                     table.shape[0], table.shape[1],
                                     ints[0] != 0, stream));
    break;
  }
  case Opcode::PositionEmbedding:
    launched(cuda::positionEmbeddingForward(in(0), out(0), ints[0], ints[1],
                                            inB(0).shape[1], stream));
    break;
  case Opcode::PositionEmbeddingGrad:
    launched(cuda::positionEmbeddingBackward(in(0), out(0), ints[0], ints[1],
                                             outB(0).shape[0],
                                             outB(0).shape[1], ints[2] != 0,
                                             stream));
    break;
  case Opcode::Matmul:
    gemmDone(cuda::matmulForward(matmul, in(0), in(1), out(0),
                                 matmulShapeOf(inst), ints[7] != 0, stream));
    break;
  case Opcode::Add:
    launched(cuda::addForward(in(0), in(1), out(0), count(inB(0)), stream));
    break;
  case Opcode::Mul:
    launched(cuda::mulForward(in(0), in(1), out(0), count(inB(0)), stream));
    break;
  case Opcode::BiasAdd:
    launched(cuda::biasAddForward(in(0), in(1), out(0), rowsOf(inB(0)),
                                  lastDim(inB(0)), stream));
    break;
  case Opcode::Gelu:
    launched(cuda::geluForward(in(0), out(0), count(inB(0)), stream));
    break;
  case Opcode::LayerNorm:
    launched(cuda::layerNormForward(in(0), in(1), in(2), out(0), nullptr,
                                    nullptr, rowsOf(inB(0)), lastDim(inB(0)),
                                    float(inst.floats[0]), stream));
    break;
  case Opcode::Softmax:
    launched(cuda::softmaxForward(in(0), out(0), rowsOf(inB(0)),
                                  lastDim(inB(0)), stream));
    break;
  case Opcode::Attention:
  case Opcode::AttentionGrad: {
    AttentionShape s = attentionShapeOf(plan, inst, ex.dropoutSeed(ints[2]),
                                        ex.meshCoordinates());
    if (inst.opcode == Opcode::Attention)
      launched(cuda::attentionForward(in(0), in(1), in(2), out(0), nullptr, s,
                                      stream));
    else
      launched(cuda::attentionBackward(in(0), in(1), in(2), nullptr, in(3),
                                       out(0), out(1), out(2), s,
                                       AccumulateMask(0), stream));
    break;
  }
  case Opcode::CrossEntropy:
    // A target outside the vocabulary makes the loss NaN, which dsc-run
    // reports; the data sources check targets before they get here.
    launched(cuda::crossEntropyForward(in(0), ids(1), nullptr, outF(0),
                                       rowsOf(inB(0)), lastDim(inB(0)),
                                       stream));
    break;
  case Opcode::CrossEntropyGrad:
    launched(cuda::crossEntropyBackward(
        in(0), ids(1), nullptr, float(readScalar(inB(2), in(2))), out(0),
        rowsOf(inB(0)), lastDim(inB(0)), false, stream));
    break;
  case Opcode::Copy:
    copy(out(0), in(0), inB(0).bytes);
    break;
  case Opcode::Transpose: {
    int perm[kMaxRank];
    for (size_t i = 0; i < ints.size(); ++i)
      perm[i] = int(ints[i]);
    launched(cuda::transposeForward(in(0), out(0), inB(0).shape.data(), perm,
                                    int(ints.size()), stream));
    break;
  }
  case Opcode::Slice:
    launched(cuda::sliceForward(in(0), out(0), inB(0).shape.data(),
                                outB(0).shape.data(), ints.data(),
                                int(ints.size()), stream));
    break;
  case Opcode::SliceGrad:
    launched(cuda::sliceBackward(in(0), out(0), outB(0).shape.data(),
                                 inB(0).shape.data(), ints.data(),
                                 int(ints.size()), false, stream));
    break;
  case Opcode::Concat: {
    const Buffer &y = outB(0);
    const size_t dim = size_t(ints[0]);
    std::vector<const T *> ins;
    std::vector<int64_t> dims;
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      ins.push_back(in(i));
      dims.push_back(inB(i).shape[dim]);
    }
    launched(cuda::concatForward(ins.data(), dims.data(), int(ins.size()),
                                 out(0), product(y.shape, 0, dim),
                                 product(y.shape, dim + 1, y.shape.size()),
                                 stream));
    break;
  }
  case Opcode::Dropout:
    launched(cuda::dropoutForward(in(0), out(0), count(inB(0)),
                                  float(inst.floats[0]),
                                  ex.dropoutSeed(ints[0]), 0, stream));
    break;
  case Opcode::BiasGrad:
    launched(cuda::biasGrad(in(0), out(0), rowsOf(inB(0)), lastDim(inB(0)),
                            ints[0] != 0, stream));
    break;
  case Opcode::GeluGrad:
    launched(cuda::geluBackward(in(0), in(1), out(0), count(inB(0)), false,
                                stream));
    break;
  case Opcode::SoftmaxGrad:
    launched(cuda::softmaxBackward(in(0), in(1), out(0), rowsOf(inB(0)),
                                   lastDim(inB(0)), false, stream));
    break;
  case Opcode::LayerNormGrad:
    launched(cuda::layerNormBackward(
        in(0), in(1), nullptr, nullptr, in(2), out(0), out(1), out(2),
        rowsOf(inB(0)), lastDim(inB(0)), float(inst.floats[0]),
        AccumulateMask(uint32_t(ints[0])), stream));
    break;
  case Opcode::Accumulate:
    launched(cuda::accumulate(in(0), out(0), count(inB(0)), stream));
    break;
  case Opcode::GlobalNormClip: {
    std::vector<float *> ptrs;
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      ptrs.push_back(inF(i));
      sizes.push_back(count(inB(i)));
    }
    launched(cuda::sumOfSquares(
        const_cast<const float *const *>(ptrs.data()), sizes.data(),
        int(ptrs.size()), deviceSums, stream));
    // The clip factor is computed on the device from the same sum; no
    // clipping below a positive max norm, as on the CPU.
    if (inst.floats[0] > 0)
      launched(cuda::clipGradients(ptrs.data(), sizes.data(),
                                   int(ptrs.size()), deviceSums, 1.0,
                                   inst.floats[0], stream));
    double sum = 0;
    copyOut(&sum, deviceSums, sizeof sum);
    writeScalar(outF(0), std::sqrt(sum));
    break;
  }
  case Opcode::GlobalNormClipParts: {
    // As the CPU backend: each part's valid elements weighted by 1/(its
    // copies in the group), summed over the group, then one clip factor.
    Communicator *comm = &ex.requireGroup(prog, index, ints[0]);
    const std::vector<int64_t> &coords = ex.meshCoordinates();
    std::vector<float *> held;
    std::vector<int64_t> sizes;
    std::vector<double> copies;
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      const int64_t chunkAxes = ints[3 * i + 1], splitAxes = ints[3 * i + 3];
      const bool inBuffer = ints[3 * i + 2] != 0;
      int64_t n = count(inB(i));
      float *data = inF(i);
      if (chunkAxes && !inBuffer) {
        n /= groupSize(plan.mesh, chunkAxes);
        data += n * groupIndex(plan.mesh, coords, chunkAxes);
      }
      const int64_t parts =
          groupSize(plan.mesh, chunkAxes) * groupSize(plan.mesh, splitAxes);
      copies.push_back(double(comm->size()) / double(parts));
      held.push_back(data);
      sizes.push_back(n);
    }
    std::vector<double> sums =
        sumsOfSquares(held.data(), sizes.data(), int(held.size()));
    double sum = 0;
    for (size_t i = 0; i < sums.size(); ++i)
      sum += sums[i] / copies[i];
    copyIn(deviceSums, &sum, sizeof sum);
    // NCCL runs on the communication stream; the clip waits for it.
    waitCollective(launchCollective(
        [&] { comm->allReduce(deviceSums, 1, DType::F64, ReduceOp::Sum); }));
    if (inst.floats[0] > 0)
      launched(cuda::clipGradients(held.data(), sizes.data(),
                                   int(held.size()), deviceSums, 1.0,
                                   inst.floats[0], stream));
    copyOut(&sum, deviceSums, sizeof sum);
    writeScalar(outF(0), std::sqrt(sum));
    break;
  }
  case Opcode::LearningRate:
    writeScalar(outF(0), scheduledLearningRate(
                            LrScheduleKind(ints[0]), ints[1], ints[2],
                            ints[3] != 0, inst.floats[0], inst.floats[1],
                            inst.floats[2], ex.step()));
    break;
  case Opcode::AdamW: {
    AdamWConfig cfg = adamConfigOf(inst, readScalar(inB(1), in(1)));
    launched(cuda::adamwStep<float, __nv_bfloat16>(
        outF(0), inF(0), outF(1), outF(2), count(inB(0)), cfg, ex.step(),
        ints[0] != 0, 1.0f, nullptr, stream));
    break;
  }
  case Opcode::AdamWShard: {
    // This rank's chunk of the flattened parameter, as on the CPU.
    Communicator *comm = &ex.requireGroup(prog, index, ints[1]);
    const int64_t chunk = numElements(outB(1).shape);
    const int64_t offset = chunk * comm->rank();
    const int64_t gradOffset = count(inB(0)) == chunk ? 0 : offset;
    AdamWConfig cfg = adamConfigOf(inst, readScalar(inB(1), in(1)));
    launched(cuda::adamwStep<float, __nv_bfloat16>(
        outF(0) + offset, inF(0) + gradOffset, outF(1), outF(2), chunk, cfg,
        ex.step(), ints[0] != 0, 1.0f, nullptr, stream));
    break;
  }
  case Opcode::Sgd:
    launched(cuda::sgdStep<float, __nv_bfloat16>(
        outF(0), inF(0), outF(1), count(inB(0)),
        sgdConfigOf(inst, readScalar(inB(1), in(1))), 1.0f, nullptr, stream));
    break;
  default:
    fail("the CUDA backend does not run this instruction");
  }
}

} // namespace

std::unique_ptr<Backend>
dsc::rt::createCudaBackend(const CudaBackendOptions &options) {
  return std::make_unique<CudaBackend>(options);
}

bool dsc::rt::haveCudaBackend() { return true; }

int dsc::rt::cudaDeviceCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}
