//===- ClusterSpec.h - Hardware description of a GPU cluster ----*- C++ -*-===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// What the cost model knows about the machine: one GPU kind, a node layout
// and the calibration constants, read from the JSON format documented in
// examples/clusters/README.md. All quantities are in SI base units.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_ANALYSIS_CLUSTERSPEC_H
#define DSC_ANALYSIS_CLUSTERSPEC_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace mlir::dsc::analysis {

struct GpuSpec {
  std::string kind;
  double peak16BitFlops = 0;  // dense bf16/fp16 tensor-core FLOP/s
  double peakFp32Flops = 0;   // FLOP/s
  double memoryBytes = 0;     // device memory
  double memoryBandwidth = 0; // bytes/s
};

/// Constants that turn peak numbers into achievable ones. Defaults are
/// estimates; docs/cost-model.md says which microbenchmark measures each.
struct Calibration {
  /// Fraction of peak that a large bf16 GEMM reaches (cuBLAS, big m=n=k).
  double gemmMaxEfficiency = 0.8;
  /// Each GEMM dimension d contributes d / (d + gemmHalfDim) to efficiency.
  double gemmHalfDim = 128;
  /// Fraction of HBM bandwidth that elementwise/normalization kernels reach.
  double memoryBoundEfficiency = 0.8;
  /// nccl-tests bus bandwidth as a fraction of the link's unidirectional rate.
  double intraNodeCollectiveEfficiency = 0.8;
  double interNodeCollectiveEfficiency = 0.9;
  /// Communication hidden behind compute still slows it: NCCL kernels take
  /// SMs and HBM bandwidth. This fraction of the hidden time is charged.
  double overlapSlowdown = 0.15;
  /// Device memory the plan cannot use: CUDA context, NCCL and cuBLAS
  /// workspaces, allocator fragmentation.
  double reservedBytes = 2e9;
};

struct ClusterSpec {
  std::string name;
  GpuSpec gpu;
  int64_t gpusPerNode = 8;
  /// Per GPU, one direction (NVLink/NVSwitch), bytes/s.
  double intraNodeBandwidth = 0;
  /// Per hop of a ring step, seconds.
  double intraNodeLatency = 0;
  /// NICs per node times their rate, bytes/s.
  double interNodeBandwidthPerNode = 0;
  double interNodeLatency = 0;
  double hostMemoryBytes = 0;     // per node
  double hostMemoryBandwidth = 0; // per node, bytes/s
  double pcieBandwidthPerGpu = 0; // host<->device, one direction, bytes/s
  double nvmeBytes = 0;           // per node
  double nvmeBandwidth = 0;       // per node, bytes/s
  Calibration calibration;

  double interNodeBandwidthPerGpu() const {
    return interNodeBandwidthPerNode / static_cast<double>(gpusPerNode);
  }
};

/// Parses the JSON text of a cluster description. Numbers may be bare or
/// {"value": N, "source": "..."}. Errors name `fileName`, the key path and
/// what is wrong with it.
llvm::Expected<ClusterSpec> parseClusterSpec(llvm::StringRef jsonText,
                                             llvm::StringRef fileName);

/// Reads and parses a cluster description file.
llvm::Expected<ClusterSpec> loadClusterSpec(llvm::StringRef path);

} // namespace mlir::dsc::analysis

#endif // DSC_ANALYSIS_CLUSTERSPEC_H
