//===- DscDialect.h - dsc dialect -------------------------------*- C++ -*-===//
//
// The dsc dialect class and its attributes and enums.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCDIALECT_H
#define DSC_DIALECT_DSC_IR_DSCDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dsc/Dialect/Dsc/IR/DscDialect.h.inc"

#include "dsc/Dialect/Dsc/IR/DscAttrs.h"

#endif // DSC_DIALECT_DSC_IR_DSCDIALECT_H
