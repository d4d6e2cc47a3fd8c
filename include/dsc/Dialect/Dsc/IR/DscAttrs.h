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

#include "llvm/ADT/APFloat.h"

#include "dsc/Dialect/Dsc/IR/DscEnums.h.inc"

namespace mlir::dsc {
/// Parses a floating-point attribute parameter written as a plain number.
FailureOr<llvm::APFloat> parseF64Parameter(AsmParser &parser);
} // namespace mlir::dsc

#define GET_ATTRDEF_CLASSES
#include "dsc/Dialect/Dsc/IR/DscAttrs.h.inc"

#endif // DSC_DIALECT_DSC_IR_DSCATTRS_H
