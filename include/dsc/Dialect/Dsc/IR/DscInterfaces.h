//===- DscInterfaces.h - dsc op interfaces ----------------------*- C++ -*-===//
//
// The cost, differentiation and communication interfaces of the dsc ops, and
// the records they return (OpCost, CommunicationEvent).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCINTERFACES_H
#define DSC_DIALECT_DSC_IR_DSCINTERFACES_H

#include "dsc/Dialect/Dsc/IR/DscAttrs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"

#include <cstdint>
#include <optional>

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

/// One communication an op makes its rank take part in, as
/// CommunicationOpInterface describes it. Strings and attributes are owned by
/// the MLIRContext, so an event stays valid as long as the IR it describes.
struct CommunicationEvent {
  enum class Kind { Collective, Send, Recv };
  Kind kind = Kind::Collective;
  /// Stable name of what the communicator executes: "all_reduce",
  /// "reduce_scatter", "all_gather", "send", "recv". Ops that execute the same
  /// thing report the same name.
  llvm::StringRef name;
  FlatSymbolRefAttr mesh;
  /// The group's axes for a collective (its members differ from this rank
  /// only on them, ordered as listed); the peer's single axis for send/recv.
  llvm::SmallVector<llvm::StringRef, 2> axes;
  /// The reduction of a reducing collective.
  std::optional<ReductionKind> reduction;
  /// What each rank contributes (a collective), sends or receives, in order.
  llvm::SmallVector<Type, 1> payload;
  /// Parameters every member must agree on (a collective's root,
  /// scatter_dim, ...; an interleaved pipeline message's sending stage);
  /// null when there are none.
  DictionaryAttr parameters;
  /// Send/recv only: the peer's coordinate on `axes[0]`, and the tag that
  /// pairs a send with its recv.
  int64_t peer = 0;
  int64_t tag = 0;

  bool isPointToPoint() const { return kind != Kind::Collective; }
  /// Whether two ranks' collectives on one group agree (kind, reduction,
  /// payload types, parameters).
  bool matchesCollective(const CommunicationEvent &other) const;
  /// Prints e.g. `all_reduce of tensor<64xf32> over [dp] (sum)` or
  /// `send of tensor<4x8xf32> to pp=1 tag 0`.
  void print(llvm::raw_ostream &os) const;
  /// Prints ` name = value ...` of `parameters`.
  void printParameters(llvm::raw_ostream &os) const;
};

} // namespace mlir::dsc

#include "dsc/Dialect/Dsc/IR/DscInterfaces.h.inc"

#endif // DSC_DIALECT_DSC_IR_DSCINTERFACES_H
