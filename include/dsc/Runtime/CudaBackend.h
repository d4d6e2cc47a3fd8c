//===- CudaBackend.h - Plan instructions on a CUDA device -------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The executor's CUDA backend: the plan's arenas in device memory (one
// cudaMalloc each), its compute instructions as CUDA kernels and cuBLASLt
// GEMMs (CudaKernels.h) on one stream, and its collectives over NCCL, whose
// world is made over the host world the executor was given (MPI under
// mpirun, or threads: one GPU per rank either way).
//
// This header includes no CUDA header, so dsc-run compiles the same with or
// without the CUDA backend; without it createCudaBackend throws.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_CUDABACKEND_H
#define DSC_RUNTIME_CUDABACKEND_H

#include "dsc/Runtime/Backend.h"

#include <memory>

namespace dsc::rt {

struct CudaBackendOptions {
  /// The GPU this rank uses (cudaSetDevice).
  int device = 0;
  /// fp32 GEMMs on TF32 tensor cores (10-bit mantissa inputs).
  bool tf32 = false;
};

/// Throws Error when the runtime was built without CUDA, or the device
/// cannot be used (naming the CUDA call and the cause).
std::unique_ptr<Backend> createCudaBackend(const CudaBackendOptions &options);

/// True when the runtime was built with the CUDA backend and NCCL.
bool haveCudaBackend();
/// CUDA devices visible to this process (0 without the CUDA backend or a
/// driver).
int cudaDeviceCount();

} // namespace dsc::rt

#endif // DSC_RUNTIME_CUDABACKEND_H
