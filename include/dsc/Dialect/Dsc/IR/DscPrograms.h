//===- DscPrograms.h - training programs by role ----------------*- C++ -*-===//
//
// Finding a module's training programs by their `dsc.program` role and
// `dsc.stage`, so that no pass or lowering tells a program by its name.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCPROGRAMS_H
#define DSC_DIALECT_DSC_IR_DSCPROGRAMS_H

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscDialect.h"

#include "dsc/Support/PipelineStep.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir::dsc {

/// The `dsc.program` role of `func`, if it has one.
std::optional<ProgramRole> getProgramRole(Operation *func);
/// Marks `func` as a program with `role`.
void setProgramRole(Operation *func, ProgramRole role);
/// The `dsc.stage` of `func`, if it is a pipeline stage's.
std::optional<int64_t> getPipelineStage(Operation *func);

/// The function of `module` with `role` on pipeline stage `stage`
/// (std::nullopt: the one without `dsc.stage`), or null.
Operation *lookupProgramOp(Operation *module, ProgramRole role,
                           std::optional<int64_t> stage = std::nullopt);
/// Every function of `module` with `role`, staged or not, in module order.
SmallVector<Operation *> getProgramOps(Operation *module, ProgramRole role);

/// lookupProgramOp as a `FuncT` (func::FuncOp for the passes).
template <typename FuncT>
FuncT lookupProgram(Operation *module, ProgramRole role,
                    std::optional<int64_t> stage = std::nullopt) {
  return llvm::dyn_cast_or_null<FuncT>(lookupProgramOp(module, role, stage));
}

/// A pipelined module's shape (its `dsc.pipeline`): the stages, and the
/// model chunks each rank of the mesh's `pp` axis holds (`virtual_stages`,
/// 1 unless the schedule is interleaved). Rank r holds stages r, r + P,
/// r + 2P, ... with P = stages / virtual_stages ranks.
struct PipelineShape {
  int64_t stages = 1, virtualStages = 1;
  int64_t ranks() const { return stages / virtualStages; }
  int64_t rankOf(int64_t stage) const { return stage % ranks(); }
  int64_t chunkOf(int64_t stage) const { return stage / ranks(); }
};

/// `module`'s `dsc.pipeline`, or null when it is not cut into stages.
PipelineAttr getPipelineAttr(Operation *module);

/// The shape `module`'s `dsc.pipeline` records (its verifier checked it),
/// or none without one.
std::optional<PipelineShape> getPipelineShape(Operation *module);

/// Pipeline rank `rank`'s step program `step` (role pipeline_step) as the
/// schedule's instructions (PipelineStep.h), in order: chunks from the
/// callees' stages and the messages' `chunk`; std::nullopt when an op is
/// none of the step's or calls no stage.
std::optional<std::vector<::dsc::PipelineStepOp>>
readPipelineStep(Operation *step, const PipelineShape &shape);

} // namespace mlir::dsc

#endif // DSC_DIALECT_DSC_IR_DSCPROGRAMS_H
