//===- InstructionArgs.h - Kernel arguments of plan instructions -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// How an instruction's operands and attributes (Instructions.def)
// become a kernel's arguments, shared by the CPU and CUDA backends so both
// read an instruction the same way.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_INSTRUCTIONARGS_H
#define DSC_RUNTIME_INSTRUCTIONARGS_H

#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/Instructions.h"
#include "dsc/Runtime/MoeKernels.h"

#include <cstdint>
#include <vector>

namespace dsc::rt {

/// A buffer as a [rows, lastDim] matrix (a scalar is 1 x 1).
int64_t rowsOf(const Buffer &b);
int64_t lastDim(const Buffer &b);
/// The product of shape[from, to).
int64_t product(const std::vector<int64_t> &shape, size_t from, size_t to);

/// Matmul's ints: batch m n k transA transB broadcastB (accumulate).
MatmulShape matmulShapeOf(const Instruction &inst);
/// AdamW/AdamWShard's floats (beta1 beta2 eps wd) at learning rate `lr`.
AdamWConfig adamConfigOf(const Instruction &inst, double lr);
/// AdamW/AdamWShard's `decay` (apply weight decay).
bool adamDecayOf(const Instruction &inst);
/// Sgd's floats (momentum wd) and ints (nesterov) at learning rate `lr`.
SgdConfig sgdConfigOf(const Instruction &inst, double lr);
/// MoeRoute's and MoeRouteGrad's routing rules, for the tokens and
/// experts of `logits` ([..., E]) and the capacity of `slots` ([E, C]).
MoeRouting moeRoutingOf(const Instruction &inst, const Buffer &logits,
                        const Buffer &slots);
/// Transpose's permutation as the kernels take it (int per dim).
struct Permutation {
  int perm[kMaxRank];
  int rank = 0;
};
Permutation permutationOf(const Instruction &inst);
/// Attention/AttentionGrad's `seed` (the plan's; the run's comes from the
/// executor's dropoutSeed()).
uint64_t attentionSeedOf(const Instruction &inst);
/// Attention/AttentionGrad's view of q [b, s, h] and ints (heads causal
/// seed headAxes), with dropout seed `seed` for this run; heads split over
/// a group are indexed as the whole attention's by the rank's `coords`.
AttentionShape attentionShapeOf(const Plan &plan, const Instruction &inst,
                                uint64_t seed,
                                const std::vector<int64_t> &coords);

} // namespace dsc::rt

#endif // DSC_RUNTIME_INSTRUCTIONARGS_H
