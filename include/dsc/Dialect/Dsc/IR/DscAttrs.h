//===- DscAttrs.h - dsc attributes and enums --------------------*- C++ -*-===//
//
// Parameter initializers, memory tiers, reduction kinds and shardings.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCATTRS_H
#define DSC_DIALECT_DSC_IR_DSCATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "dsc/Support/ParallelPlan.h"
#include "dsc/Support/PipelineScheduleKind.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/Hashing.h"

#include "dsc/Dialect/Dsc/IR/DscEnums.h.inc"

namespace mlir::dsc {
/// Parses a floating-point attribute parameter written as a plain number.
FailureOr<llvm::APFloat> parseF64Parameter(AsmParser &parser);
/// A #dsc.parallel_plan's text: a quoted plan string, read by the plan's one
/// parser (its error names the key).
FailureOr<::dsc::ParallelPlan> parseParallelPlanParameter(AsmParser &parser);
void printParallelPlanParameter(AsmPrinter &printer,
                                const ::dsc::ParallelPlan &plan);
/// A #dsc.pipeline's schedule: a quoted name pipelineScheduleName spells.
FailureOr<::dsc::PipelineScheduleKind>
parsePipelineScheduleParameter(AsmParser &parser);
/// A floating-point parameter that may be absent, written as a number.
FailureOr<std::optional<llvm::APFloat>>
parseOptionalF64Parameter(AsmParser &parser);
} // namespace mlir::dsc

namespace dsc {
/// Attribute storage uniques plans by value.
inline llvm::hash_code hash_value(const ParallelPlan &plan) {
  return llvm::hash_value(printParallelPlan(plan, /*all=*/true));
}
} // namespace dsc

#define GET_ATTRDEF_CLASSES
#include "dsc/Dialect/Dsc/IR/DscAttrs.h.inc"

#endif // DSC_DIALECT_DSC_IR_DSCATTRS_H
