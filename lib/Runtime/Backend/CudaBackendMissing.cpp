//===- CudaBackendMissing.cpp - The CUDA backend when it was not built ----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Linked instead of Cuda/CudaBackend.cpp when the build found no nvcc or no
// NCCL, so `dsc-run --backend cuda` says so instead of failing to link.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CudaBackend.h"

using namespace dsc::rt;

std::unique_ptr<Backend> dsc::rt::createCudaBackend(const CudaBackendOptions &) {
  throw Error("this dsc was built without the CUDA backend (no nvcc or no "
              "NCCL when it was configured; see docs/cuda-backend.md)");
}

bool dsc::rt::haveCudaBackend() { return false; }

int dsc::rt::cudaDeviceCount() { return 0; }
