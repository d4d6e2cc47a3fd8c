//===- DscParallelOps.cpp - tensor-slicing ops ------------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Verifiers and reverse-mode rules of the ops tensor slicing adds: the
// conjugate pair copy_to_parallel (f) / all_reduce (g) and the
// vocabulary-parallel embedding and cross-entropy. Their rules put the
// backward's collectives in place, so --dsc-autodiff needs no knowledge of
// tensor slicing.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"

using namespace mlir;
using namespace mlir::dsc;


//===----------------------------------------------------------------------===//
// Symbol uses: the mesh and its axes
//===----------------------------------------------------------------------===//

LogicalResult
CopyToParallelOp::verifySymbolUses(SymbolTableCollection &tables) {
  return getMeshGroupSize(*this, tables, getMeshAttr(), getMeshAxes());
}
LogicalResult
ScatterToParallelOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> group =
      getMeshGroupSize(*this, tables, getMeshAttr(), getMeshAxes());
  if (failed(group))
    return failure();
  auto input = cast<RankedTensorType>(getInput().getType());
  int64_t dim = getDimAttr().getInt();
  if (dim < 0 || dim >= input.getRank())
    return emitOpError("dimension ")
           << dim << " is out of range for rank " << input.getRank();
  if (input.getDimSize(dim) % *group != 0)
    return emitOpError("dimension ")
           << dim << " of size " << input.getDimSize(dim)
           << " is not divisible by the group size " << *group;
  SmallVector<int64_t> shape(input.getShape());
  shape[dim] /= *group;
  auto expected = RankedTensorType::get(shape, input.getElementType());
  if (getResult().getType() != expected)
    return emitOpError("result type ")
           << getResult().getType() << " must be " << expected;
  return success();
}

LogicalResult
VocabParallelEmbeddingOp::verifySymbolUses(SymbolTableCollection &tables) {
  return getMeshGroupSize(*this, tables, getMeshAttr(), getMeshAxes());
}
LogicalResult VocabParallelEmbeddingGradOp::verifySymbolUses(
    SymbolTableCollection &tables) {
  return getMeshGroupSize(*this, tables, getMeshAttr(), getMeshAxes());
}
/// `classes` (0: all) counts the whole vocabulary's classes: at most the
/// group's columns.
static LogicalResult verifyClasses(Operation *op, SymbolTableCollection &tables,
                                   FlatSymbolRefAttr mesh, ArrayAttr axes,
                                   Value logits, int64_t classes) {
  FailureOr<int64_t> group = getMeshGroupSize(op, tables, mesh, axes);
  if (failed(group))
    return failure();
  return verifyClassCount(op, classes,
                          tensorOf(logits).getShape().back() * *group,
                          "the whole vocabulary");
}
LogicalResult
VocabParallelCrossEntropyOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyClasses(*this, tables, getMeshAttr(), getMeshAxes(), getLogits(),
                       getClassesAttr().getInt());
}
LogicalResult VocabParallelCrossEntropyGradOp::verifySymbolUses(
    SymbolTableCollection &tables) {
  return verifyClasses(*this, tables, getMeshAttr(), getMeshAxes(), getLogits(),
                       getClassesAttr().getInt());
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

/// `rows` ([ids..., H]) must be the ids' shape plus the table's hidden size
/// with the table's element type.
static LogicalResult verifyLookupShape(Operation *op, RankedTensorType table,
                                       Value ids, RankedTensorType rows,
                                       StringRef what) {
  if (table.getRank() != 2)
    return op->emitOpError("table must be a rank-2 [vocab rows, hidden] "
                           "tensor, got ")
           << table;
  SmallVector<int64_t> expected(tensorOf(ids).getShape());
  expected.push_back(table.getDimSize(1));
  if (rows.getShape() != ArrayRef<int64_t>(expected) ||
      rows.getElementType() != table.getElementType())
    return op->emitOpError()
           << what << " " << rows
           << " must be the ids shape + [hidden] with the table's element "
              "type";
  return success();
}

LogicalResult VocabParallelEmbeddingOp::verify() {
  return verifyLookupShape(*this, tensorOf(getTable()), getIds(),
                           tensorOf(getResult()), "result");
}

LogicalResult VocabParallelEmbeddingGradOp::verify() {
  return verifyLookupShape(*this, tensorOf(getResult()), getIds(),
                           tensorOf(getGrad()), "grad");
}

/// Logits [tokens..., R] and targets [tokens...].
static LogicalResult verifyLogits(Operation *op, Value logits, Value targets) {
  RankedTensorType type = tensorOf(logits);
  if (type.getRank() < 2)
    return op->emitOpError("logits must have rank >= 2 ([tokens..., vocab "
                           "columns]), got ")
           << type;
  if (tensorOf(targets).getShape() != type.getShape().drop_back())
    return op->emitOpError("targets ")
           << targets.getType()
           << " must have the logits shape without the vocab dimension";
  return success();
}

LogicalResult VocabParallelCrossEntropyOp::verify() {
  if (failed(verifyLogits(*this, getLogits(), getTargets())))
    return failure();
  bool f64 = tensorOf(getLogits()).getElementType().isF64();
  Type lossType = tensorOf(getResult()).getElementType();
  if (f64 != lossType.isF64())
    return emitOpError("the loss must be ")
           << (f64 ? "f64 for f64 logits" : "f32") << ", got " << lossType;
  return success();
}

LogicalResult VocabParallelCrossEntropyGradOp::verify() {
  return verifyLogits(*this, getLogits(), getTargets());
}

//===----------------------------------------------------------------------===//
// Reverse-mode rules
//===----------------------------------------------------------------------===//

LogicalResult CopyToParallelOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  // Each rank's branch holds a part of the gradient: sum them (f's backward).
  operandGrads.push_back(
      AllReduceOp::create(b, getLoc(), resultGrads[0].getType(),
                          resultGrads[0], getMeshAttr(), getMeshAxes()));
  return success();
}

LogicalResult AllReduceOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  switch (getReduction()) {
  case ReductionKind::Sum:
    // g's backward: every rank of the group already has the whole gradient.
    operandGrads.push_back(resultGrads[0]);
    return success();
  default:
    return emitOpError("only a sum all-reduce can be differentiated (the "
                       "tensor-parallel g); got reduction ")
           << stringifyReductionKind(getReduction());
  }
}

LogicalResult ReduceScatterOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  if (getReduction() != ReductionKind::Sum)
    return emitOpError("only a sum reduce-scatter can be differentiated (the "
                       "sequence-parallel exit); got reduction ")
           << stringifyReductionKind(getReduction());
  // Each rank's partial sum contributed to every chunk alike.
  operandGrads.push_back(
      AllGatherOp::create(b, getLoc(), getInput().getType(), resultGrads[0],
                          getMeshAttr(), getMeshAxes(), getScatterDimAttr()));
  return success();
}

LogicalResult AllGatherOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // Each rank's use of the gathered value holds a part of its gradient:
  // sum them, and keep this rank's chunk.
  operandGrads.push_back(ReduceScatterOp::create(
      b, getLoc(), getInput().getType(), resultGrads[0], getMeshAttr(),
      getMeshAxes(), getGatherDimAttr(), ReductionKind::Sum));
  return success();
}

LogicalResult AllToAllOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  // Each part came from one rank: its gradient goes back the way it came.
  auto valueOf = [](FloatAttr a) { return a ? a.getValueAsDouble() : 1.0; };
  const double scale = valueOf(getScaleAttr()) * valueOf(getGradScaleAttr());
  operandGrads.push_back(AllToAllOp::create(
      b, getLoc(), getInput().getType(), resultGrads[0], getMeshAttr(),
      getMeshAxes(), getConcatDimAttr(), getSplitDimAttr(),
      scale == 1.0 ? FloatAttr() : b.getF64FloatAttr(scale),
      /*grad_scale=*/FloatAttr()));
  return success();
}

LogicalResult
ScatterToParallelOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  // The replicated input's chunks went to different ranks: gather their
  // gradients back into the whole.
  operandGrads.push_back(AllGatherOp::create(b, getLoc(), getInput().getType(),
                                             resultGrads[0], getMeshAttr(),
                                             getMeshAxes(), getDimAttr()));
  return success();
}

LogicalResult
VocabParallelEmbeddingOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(VocabParallelEmbeddingGradOp::create(
      b, getLoc(), getTable().getType(), resultGrads[0], getIds(),
      getMeshAttr(), getMeshAxes()));
  operandGrads.push_back(nullptr);
  return success();
}

LogicalResult
VocabParallelCrossEntropyOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(VocabParallelCrossEntropyGradOp::create(
      b, getLoc(), getLogits().getType(), getLogits(), getTargets(),
      resultGrads[0], getMeshAttr(), getMeshAxes(), getClassesAttr()));
  operandGrads.push_back(nullptr);
  return success();
}
