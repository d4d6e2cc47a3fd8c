//===- CudaBackendImpl.h - The CUDA backend's class -------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Runtime/Cuda: the CUDA backend's state, shared by its
// device and stream management (CudaBackend.cpp) and its instruction
// dispatch (CudaInstructions.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_CUDA_CUDABACKENDIMPL_H
#define DSC_RUNTIME_CUDA_CUDABACKENDIMPL_H

#include "dsc/Runtime/CudaBackend.h"

#include "dsc/Runtime/CudaKernels.h"
#include "dsc/Runtime/Backend.h"
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

namespace dsc::rt::cuda_backend {

inline std::string cudaMessage(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

inline void check(cudaError_t e, const std::string &call) {
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
  void scale(DType dtype, void *x, int64_t count, double factor) override {
    setDevice();
    // current(): an all-to-all scales its output on the communication
    // stream, after the receive.
    const float f = float(factor);
    cudaError_t err = cudaSuccess;
    switch (dtype) {
    case DType::F32: {
      auto *p = static_cast<float *>(x);
      err = cuda::scaleForward(p, p, count, f, current());
      break;
    }
    case DType::BF16: {
      auto *p = static_cast<__nv_bfloat16 *>(x);
      err = cuda::scaleForward(p, p, count, f, current());
      break;
    }
    case DType::F16: {
      auto *p = static_cast<__half *>(x);
      err = cuda::scaleForward(p, p, count, f, current());
      break;
    }
    default:
      throw Error(std::string("the CUDA backend does not scale ") +
                  dtypeName(dtype));
    }
    check(err, "scaleForward (loss scaling, all-to-all)");
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

  void run(InstructionContext &ex, const Program &prog, size_t index) override;
  void synchronize() override;

private:
  /// run() for an instruction whose data are of element type T.
  template <typename T>
  void execute(InstructionContext &ex, const Program &prog, size_t index);
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

} // namespace dsc::rt::cuda_backend

#endif // DSC_RUNTIME_CUDA_CUDABACKENDIMPL_H
