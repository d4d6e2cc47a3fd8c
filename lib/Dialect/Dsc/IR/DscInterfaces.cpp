//===- DscInterfaces.cpp - dsc op interfaces --------------------*- C++ -*-===//
//
// Generated definitions of the cost and differentiation interfaces.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscInterfaces.h"

#include "dsc/Dialect/Dsc/IR/DscInterfaces.cpp.inc"
