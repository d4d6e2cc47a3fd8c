//===- Instructions.h - Typed views of plan instructions --------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// One struct per opcode of Instructions.def in namespace dsc::rt::ops, its
// fields the opcode's named attributes: the lowering fills one and calls
// encode(), the executor and the backends call decode() on an instruction
// validatePlan has checked, so no code outside the definition knows where an
// attribute sits in Instruction::ints or ::floats.
//
//   ops::Matmul mm = ops::Matmul::decode(inst);   // mm.batch, mm.transA ...
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_INSTRUCTIONS_H
#define DSC_RUNTIME_INSTRUCTIONS_H

#include "dsc/Runtime/Plan.h"

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsc::rt::ops {

#define DSC_INSTRUCTION_FILE "dsc/Runtime/Instructions.def"
#define DSC_GEN_STRUCTS
#include "dsc/Runtime/InstructionSetGen.inc"
#undef DSC_GEN_STRUCTS
#undef DSC_INSTRUCTION_FILE

} // namespace dsc::rt::ops

namespace dsc::rt {

/// The mesh-axes mask of the group an instruction runs over (its AXES
/// attribute: collectives, vocabulary-parallel kernels, sharded updates),
/// or 0 when it has none.
inline int64_t groupAxesOf(const Instruction &inst) {
  const OpcodeInfo *info = lookupOpcode(uint32_t(inst.opcode));
  const int at = info ? info->groupAxesIndex() : -1;
  return at >= 0 ? inst.ints[size_t(at)] : 0;
}

/// The learning rate a CyclicLearningRate instruction writes at 1-based
/// `step`.
inline double cyclicLearningRate(const ops::CyclicLearningRate &lr,
                                 int64_t step) {
  return cyclicLearningRate(lr.kind, lr.firstStairs, lr.secondStairs,
                            lr.staircase, lr.minLr, lr.maxLr, lr.firstSize,
                            lr.secondSize, lr.decaySize, lr.rate, step);
}

/// The learning rate a LearningRate instruction writes at 1-based `step`.
inline double scheduledLearningRate(const ops::LearningRate &lr,
                                    int64_t step) {
  return scheduledLearningRate(LrScheduleKind(lr.kind), lr.warmup, lr.total,
                               lr.warmupLog, lr.base, lr.warmupStart,
                               lr.decayEnd, step);
}

/// One gradient's entry of GlobalNormClipParts' `parts` (three ints each).
struct NormPart {
  /// ZeRO: the flattened gradient is equal chunks over the group of this
  /// mask (0 without ZeRO).
  int64_t chunkAxes = 0;
  /// The buffer is this rank's chunk (else the whole, of which only the
  /// chunk at this rank's index is valid).
  bool inBuffer = false;
  /// Tensor slicing: the ranks that differ on these axes hold different
  /// parts of the whole.
  int64_t splitAxes = 0;
};

/// The parts of a decoded GlobalNormClipParts, one per gradient.
inline std::vector<NormPart> normParts(const ops::GlobalNormClipParts &op) {
  std::vector<NormPart> parts(op.parts.size() / 3);
  for (size_t i = 0; i < parts.size(); ++i)
    parts[i] = {op.parts[3 * i], op.parts[3 * i + 1] != 0,
                op.parts[3 * i + 2]};
  return parts;
}
/// Appends `part` to an instruction being built.
inline void appendNormPart(ops::GlobalNormClipParts &op, const NormPart &part) {
  op.parts.insert(op.parts.end(),
                  {part.chunkAxes, part.inBuffer ? 1 : 0, part.splitAxes});
}

} // namespace dsc::rt

#endif // DSC_RUNTIME_INSTRUCTIONS_H
