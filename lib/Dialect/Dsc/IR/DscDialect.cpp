//===- DscDialect.cpp - dsc dialect registration ----------------*- C++ -*-===//
//
// Registers the dsc ops and attributes with the context.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"

using namespace mlir;
using namespace mlir::dsc;

#include "dsc/Dialect/Dsc/IR/DscDialect.cpp.inc"

void DscDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dsc/Dialect/Dsc/IR/DscOps.cpp.inc"
      >();
  registerAttributes();
}
