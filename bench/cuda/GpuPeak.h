//===- GpuPeak.h - Datasheet peaks the CUDA benchmarks report against -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_BENCH_CUDA_GPUPEAK_H
#define DSC_BENCH_CUDA_GPUPEAK_H

#include <string>

namespace dsc::bench {

/// Dense bf16 tensor-core peak in TFLOP/s by device name (vendor
/// datasheets, SXM parts unless the name says PCIe); 0 when unknown (the
/// benchmarks take --peak-tflops then).
inline double bf16PeakFor(const std::string &name) {
  if (name.find("H200") != std::string::npos ||
      name.find("H100") != std::string::npos)
    return name.find("PCIe") != std::string::npos ? 756.0 : 989.4;
  if (name.find("A100") != std::string::npos)
    return 312.0;
  return 0.0;
}

} // namespace dsc::bench

#endif // DSC_BENCH_CUDA_GPUPEAK_H
