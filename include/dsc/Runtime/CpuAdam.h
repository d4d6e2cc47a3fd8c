//===- CpuAdam.h - AdamW over host-resident states --------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// ZeRO-Offload runs the O(parameters) work, the optimizer step, where the
// optimizer states live: in host memory, on the CPU. This is that step:
// AdamW (torch.optim.AdamW's formulas and operation order, as adamwStep in
// CpuKernels.h) with AVX-512, AVX2 and scalar paths chosen at run time
// (DeepSpeed's csrc/adam does the same), OpenMP threads over blocks, and,
// for mixed precision, the bf16 copy of each updated parameter written in
// the same pass over memory. The three paths use no fused multiply-add, so
// they agree bit for bit whichever the machine runs.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_CPUADAM_H
#define DSC_RUNTIME_CPUADAM_H

#include "dsc/Runtime/CpuKernels.h"

#include <cstdint>
#include <optional>
#include <string_view>

namespace dsc::rt {

/// The instruction sets the CPU Adam step has a path for.
enum class CpuIsa { Scalar, Avx2, Avx512 };

/// "scalar", "avx2" or "avx512".
const char *cpuIsaName(CpuIsa isa);

/// The spelled ISA, or none.
std::optional<CpuIsa> parseCpuIsa(std::string_view name);

/// The widest path this CPU runs (AVX-512F, else AVX2, else scalar).
CpuIsa detectCpuIsa();

/// Whether this CPU can run `isa`'s path.
bool cpuSupports(CpuIsa isa);

/// One AdamW step over n fp32 elements (`step` counts from 1; weight decay
/// only when `decay`), as adamwStep<float>, on `isa`'s path (which this
/// CPU must support). When `bf16Copy` is not null it receives each updated
/// parameter rounded to bf16 (nearest, ties to even).
void cpuAdamW(float *param, const float *grad, float *m, float *v, int64_t n,
              const AdamWConfig &cfg, int64_t step, bool decay,
              uint16_t *bf16Copy, CpuIsa isa);

} // namespace dsc::rt

#endif // DSC_RUNTIME_CPUADAM_H
