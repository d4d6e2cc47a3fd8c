//===- DscToPlan.h - lower a planned module to a runtime plan ---*- C++ -*-===//
//
// Turns a module that went through --dsc-plan-memory (offsets on every
// buffer) into the runtime's dsc::rt::Plan, the form dsc-run executes.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_CONVERSION_DSCTOPLAN_H
#define DSC_CONVERSION_DSCTOPLAN_H

#include "dsc/Runtime/Plan.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::dsc {

/// The runtime's namespace, as the compiler sees it.
namespace rt = ::dsc::rt;

/// Builds the runtime plan of `module`: one device arena, a buffer per
/// parameter, state, program input, result, constant and temporary, and the
/// programs "forward", "forward_backward" and "optimizer" (the functions
/// with those `dsc.program` roles) as instruction lists in program order.
/// Emits a diagnostic and fails on an op the runtime has no instruction for,
/// or a module that was not memory-planned.
FailureOr<rt::Plan> lowerToPlan(ModuleOp module);

/// Runs --dsc-verify-collectives on a compiled `module`: what every path from
/// a compiled module into execution (--dsc-to-plan, dsc-run on a .mlir) does
/// before lowerToPlan, since the module may have been edited after it was
/// compiled. Emits the pass's diagnostics (naming both ranks) and fails when
/// the ranks disagree or can deadlock.
LogicalResult verifyCompiledModule(ModuleOp module);

/// Registers `dsc-translate --dsc-to-plan`, which writes the binary plan file.
void registerToPlanTranslation();

} // namespace mlir::dsc

#endif // DSC_CONVERSION_DSCTOPLAN_H
