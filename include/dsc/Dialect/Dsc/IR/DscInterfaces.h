//===- DscInterfaces.h - dsc op interfaces ----------------------*- C++ -*-===//
//
// The cost and differentiation interfaces of the dsc graph ops, and the
// OpCost record the cost interface returns.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCINTERFACES_H
#define DSC_DIALECT_DSC_IR_DSCINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include <cstdint>

namespace mlir::dsc {

/// What one execution of an op costs. FLOPs are exact integers so that the
/// totals can be compared with closed-form formulas (Megatron-LM, ZeRO).
struct OpCost {
  /// FLOPs of dense products (2 per multiply-add), run on matrix units.
  int64_t matmulFlops = 0;
  /// Elementwise and reduction FLOPs, run on vector units.
  int64_t vectorFlops = 0;
  /// Bytes of the operands read and the results written.
  int64_t bytesRead = 0;
  int64_t bytesWritten = 0;

  int64_t totalFlops() const { return matmulFlops + vectorFlops; }
  OpCost &operator+=(const OpCost &other) {
    matmulFlops += other.matmulFlops;
    vectorFlops += other.vectorFlops;
    bytesRead += other.bytesRead;
    bytesWritten += other.bytesWritten;
    return *this;
  }
};

} // namespace mlir::dsc

#include "dsc/Dialect/Dsc/IR/DscInterfaces.h.inc"

#endif // DSC_DIALECT_DSC_IR_DSCINTERFACES_H
