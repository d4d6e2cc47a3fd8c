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

} // namespace mlir::dsc

#endif // DSC_DIALECT_DSC_IR_DSCPROGRAMS_H
