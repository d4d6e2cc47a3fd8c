//===- DscGradOps.cpp - dsc backward and state ops --------------*- C++ -*-===//
//
// Verifiers and costs of the gradient ops --dsc-autodiff emits, and symbol
// checks of the persistent-state ops.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"

using namespace mlir;
using namespace mlir::dsc;

static int64_t bytesOf(Value v) {
  RankedTensorType type = tensorOf(v);
  return type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
}

/// Reads every operand and writes every result once, with `flopsPerElement`
/// vector FLOPs per element of the first operand.
static OpCost streamingCost(Operation *op, int64_t flopsPerElement) {
  OpCost cost;
  for (Value operand : op->getOperands())
    cost.bytesRead += bytesOf(operand);
  for (Value result : op->getResults())
    cost.bytesWritten += bytesOf(result);
  if (op->getNumOperands())
    cost.vectorFlops =
        flopsPerElement * tensorOf(op->getOperand(0)).getNumElements();
  return cost;
}

//===----------------------------------------------------------------------===//
// StateOp, AccumulateOp
//===----------------------------------------------------------------------===//

LogicalResult StateOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto param = tables.lookupNearestSymbolFrom<ParameterOp>(*this, getOfAttr());
  if (!param)
    return emitOpError("'") << getOf() << "' does not name a dsc.parameter";
  if (param.getType() == getType())
    return success();
  // A 1-bit optimizer's error feedback is f32 of the padded length (or the
  // served chunk of it), its fused buffer's pad whatever the padding adds:
  // dsc.compressed_all_reduce_states checks their sizes.
  if ((getKind() == StateKind::WorkerError ||
       getKind() == StateKind::ServerError ||
       getKind() == StateKind::CompressionPad) &&
      getTensorType().getRank() == 1 &&
      getTensorType().getElementType().isF32())
    return success();
  // 1-bit LAMB's scalars of a tensor: f64 [5] (dsc.onebit_lamb checks it).
  if (getKind() == StateKind::LambCoefficients)
    return success();
  // 0/1 Adam's learning-rate sum: one f64 (dsc.add_learning_rate's).
  if (getKind() == StateKind::LearningRateSum) {
    if (getTensorType().getNumElements() == 1 &&
        getTensorType().getElementType().isF64())
      return success();
    return emitOpError("a learning_rate_sum state is tensor<1xf64>, got ")
           << getType();
  }
  // A gradient or an optimizer moment may be a ZeRO shard: a rank-1 chunk
  // of the flattened parameter whose size divides the parameter's.
  RankedTensorType type = getTensorType();
  int64_t n = param.getNumElements();
  if (type.getRank() == 1 &&
      type.getElementType() == param.getTensorType().getElementType() &&
      type.getNumElements() > 0 && n % type.getNumElements() == 0)
    return success();
  return emitOpError("state type ")
         << getType() << " differs from parameter '@" << getOf() << "' of type "
         << param.getType() << " and is not a rank-1 shard of it";
}

LogicalResult MatmulAccumulateOp::verify() {
  return failure(failed(matmulShape(*this, getLhs(), getRhs(),
                                    getTransposeLhs(), getTransposeRhs())));
}

LogicalResult
MatmulAccumulateOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto state = tables.lookupNearestSymbolFrom<StateOp>(*this, getStateAttr());
  if (!state)
    return emitOpError("'") << getState() << "' does not name a dsc.state";
  FailureOr<SmallVector<int64_t>> shape = matmulShape(
      *this, getLhs(), getRhs(), getTransposeLhs(), getTransposeRhs());
  if (failed(shape))
    return failure();
  auto product = RankedTensorType::get(
      *shape, cast<RankedTensorType>(getLhs().getType()).getElementType());
  if (state.getType() != product)
    return emitOpError("product type ")
           << product << " differs from state '@" << getState() << "' of type "
           << state.getType();
  return success();
}

LogicalResult AccumulateOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto state = tables.lookupNearestSymbolFrom<StateOp>(*this, getStateAttr());
  if (!state)
    return emitOpError("'") << getState() << "' does not name a dsc.state";
  if (state.getType() != getValue().getType())
    return emitOpError("value type ")
           << getValue().getType() << " differs from state '@" << getState()
           << "' of type " << state.getType();
  return success();
}

LogicalResult
ReduceScatterAccumulateOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> group =
      getMeshGroupSize(*this, tables, getMeshAttr(), getMeshAxes());
  if (failed(group))
    return failure();
  auto state = tables.lookupNearestSymbolFrom<StateOp>(*this, getStateAttr());
  if (!state)
    return emitOpError("'") << getState() << "' does not name a dsc.state";
  int64_t n = cast<RankedTensorType>(getValue().getType()).getNumElements();
  if (state.getTensorType().getNumElements() * *group != n)
    return emitOpError("state '@")
           << getState() << "' has " << state.getTensorType().getNumElements()
           << " elements; this rank's chunk of " << n << " over " << *group
           << " ranks has " << n / *group;
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingGradOp::verify() {
  RankedTensorType table = tensorOf(getResult()), grad = tensorOf(getGrad());
  if (table.getRank() != 2)
    return emitOpError("result must be a rank-2 [vocab, hidden] table");
  SmallVector<int64_t> expected(tensorOf(getIds()).getShape());
  expected.push_back(table.getDimSize(1));
  if (grad.getShape() != ArrayRef<int64_t>(expected) ||
      grad.getElementType() != table.getElementType())
    return emitOpError("grad type ")
           << grad << " must be ids shape + [hidden] with the table's "
           << "element type";
  return success();
}

LogicalResult PositionEmbeddingGradOp::verify() {
  RankedTensorType table = tensorOf(getResult()), grad = tensorOf(getGrad());
  if (table.getRank() != 2 || grad.getRank() != 3 ||
      grad.getDimSize(2) != table.getDimSize(1) ||
      grad.getDimSize(1) > table.getDimSize(0) ||
      grad.getElementType() != table.getElementType())
    return emitOpError("grad ")
           << grad << " must be [batch, seq <= positions, hidden] of table "
           << table;
  return success();
}

LogicalResult BiasGradOp::verify() {
  RankedTensorType grad = tensorOf(getGrad()), bias = tensorOf(getResult());
  if (grad.getRank() < 1 || bias.getRank() != 1 ||
      bias.getDimSize(0) != grad.getShape().back() ||
      bias.getElementType() != grad.getElementType())
    return emitOpError("result ")
           << bias << " must be a vector of the grad's last dimension";
  return success();
}

/// bias_gelu and bias_gelu_grad: a bias [C] added along the input's last
/// dimension [..., C], of the input's element type.
static LogicalResult verifyBiasOfLastDim(Operation *op, Value inputValue,
                                         Value biasValue) {
  RankedTensorType input = tensorOf(inputValue), bias = tensorOf(biasValue);
  if (input.getRank() < 1)
    return op->emitOpError("input must have rank >= 1");
  const int64_t features = input.getShape().back();
  if (bias.getRank() != 1 || bias.getDimSize(0) != features)
    return op->emitOpError("bias must be a vector of the input's last ")
           << "dimension's size [" << features << "], got " << bias;
  if (bias.getElementType() != input.getElementType())
    return op->emitOpError("bias element type ")
           << bias.getElementType() << " must match the input element type "
           << input.getElementType();
  return success();
}

LogicalResult BiasGeluOp::verify() {
  return verifyBiasOfLastDim(*this, getInput(), getBias());
}

LogicalResult BiasGeluGradOp::verify() {
  return verifyBiasOfLastDim(*this, getInput(), getBias());
}

LogicalResult AttentionLseOp::verify() {
  return verifyAttention(*this, tensorOf(getQuery()),
                         getNumHeadsAttr().getInt(),
                         getDropout().convertToDouble(), getWindow(),
                         getCausal(), tensorOf(getLse()));
}

LogicalResult AttentionGradLseOp::verify() {
  return verifyAttention(*this, tensorOf(getQuery()),
                         getNumHeadsAttr().getInt(),
                         getDropout().convertToDouble(), getWindow(),
                         getCausal(), tensorOf(getLse()));
}

LogicalResult CrossEntropyGradOp::verify() {
  RankedTensorType logits = tensorOf(getLogits());
  if (logits.getRank() < 2 ||
      tensorOf(getTargets()).getShape() != logits.getShape().drop_back())
    return emitOpError("targets must have the logits shape without the vocab "
                       "dimension");
  return verifyClassCount(*this, getClassesAttr().getInt(),
                          logits.getShape().back(), "the logits");
}

LogicalResult SliceGradOp::verify() {
  RankedTensorType grad = tensorOf(getGrad()), input = tensorOf(getResult());
  ArrayRef<int64_t> offsets = getOffsets();
  if (grad.getRank() != input.getRank() ||
      static_cast<int64_t>(offsets.size()) != input.getRank() ||
      grad.getElementType() != input.getElementType())
    return emitOpError("grad, offsets and result must have the same rank and "
                       "element type");
  for (int64_t d = 0, e = input.getRank(); d < e; ++d)
    if (offsets[d] < 0 || offsets[d] + grad.getDimSize(d) > input.getDimSize(d))
      return emitOpError("slice of dimension ")
             << d << " at offset " << offsets[d] << " with size "
             << grad.getDimSize(d) << " does not fit in "
             << input.getDimSize(d);
  return success();
}

//===----------------------------------------------------------------------===//
// Costs. Backward FLOPs follow Megatron-LM's accounting: each dense product
// of the forward pass costs two in the backward (input and weight gradient).
//===----------------------------------------------------------------------===//

OpCost EmbeddingGradOp::getCost() { return streamingCost(*this, 1); }
OpCost PositionEmbeddingGradOp::getCost() { return streamingCost(*this, 1); }
OpCost BiasGradOp::getCost() { return streamingCost(*this, 1); }
OpCost GeluGradOp::getCost() { return streamingCost(*this, 12); }
// The bias add's FLOP is recomputed: gelu_grad's 12 and one per element.
OpCost BiasGeluGradOp::getCost() { return streamingCost(*this, 13); }
OpCost SwigluGradOp::getCost() { return streamingCost(*this, 6); }
OpCost RepeatHeadsGradOp::getCost() { return streamingCost(*this, 1); }
OpCost LayerNormGradOp::getCost() { return streamingCost(*this, 16); }
OpCost RmsNormGradOp::getCost() { return streamingCost(*this, 8); }
OpCost SoftmaxGradOp::getCost() { return streamingCost(*this, 4); }
OpCost CrossEntropyGradOp::getCost() { return streamingCost(*this, 6); }
OpCost SliceGradOp::getCost() { return streamingCost(*this, 0); }

/// dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q: twice the forward's two
/// products. (Recomputing P from the logsumexp adds q·kᵀ again; that is
/// hardware work, not model FLOPs, with or without a saved logsumexp.)
static OpCost attentionGradCost(Operation *op, Value queryValue,
                                int64_t heads) {
  RankedTensorType query = tensorOf(queryValue);
  int64_t batch = query.getDimSize(0), seq = query.getDimSize(1);
  int64_t hidden = query.getDimSize(2);
  OpCost cost = streamingCost(op, 0);
  cost.matmulFlops = 8 * batch * seq * seq * hidden;
  cost.vectorFlops = 6 * batch * heads * seq * seq;
  return cost;
}

OpCost AttentionGradOp::getCost() {
  return attentionGradCost(*this, getQuery(), getNumHeadsAttr().getInt());
}
OpCost AttentionGradLseOp::getCost() {
  return attentionGradCost(*this, getQuery(), getNumHeadsAttr().getInt());
}
