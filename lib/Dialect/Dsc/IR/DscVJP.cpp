//===- DscVJP.cpp - reverse-mode rules of the dsc graph ops -----*- C++ -*-===//
//
// One vector-Jacobian product per forward op (DifferentiableOpInterface).
// Each rule receives the gradients of the op's results and builds the ops
// computing the gradients of its operands, reusing forward ops where the
// gradient is one (matmul with transpose flags, dropout with the same mask)
// and dedicated gradient ops otherwise.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"

using namespace mlir;
using namespace mlir::dsc;


/// Builds `op(lhs) · op(rhs)` and infers its type.
static Value buildMatmul(OpBuilder &b, Location loc, Value lhs, Value rhs,
                         bool transposeLhs, bool transposeRhs) {
  RankedTensorType lhsType = tensorOf(lhs), rhsType = tensorOf(rhs);
  int64_t lr = lhsType.getRank(), rr = rhsType.getRank();
  SmallVector<int64_t> shape(lhsType.getShape().drop_back(2));
  shape.push_back(lhsType.getDimSize(lr - (transposeLhs ? 1 : 2)));
  shape.push_back(rhsType.getDimSize(rr - (transposeRhs ? 2 : 1)));
  auto type = RankedTensorType::get(shape, lhsType.getElementType());
  return MatmulOp::create(b, loc, type, lhs, rhs, transposeLhs, transposeRhs);
}

/// Collapses all but the last dimension: [..., n] -> [rows, n].
static Value flattenRows(OpBuilder &b, Location loc, Value value) {
  RankedTensorType type = tensorOf(value);
  int64_t cols = type.getShape().back();
  auto flat = RankedTensorType::get({type.getNumElements() / cols, cols},
                                    type.getElementType());
  return ReshapeOp::create(b, loc, flat, value);
}

LogicalResult EmbeddingOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(EmbeddingGradOp::create(
      b, getLoc(), getTable().getType(), resultGrads[0], getIds()));
  operandGrads.push_back(nullptr);
  return success();
}

LogicalResult
PositionEmbeddingOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(PositionEmbeddingGradOp::create(
      b, getLoc(), getTable().getType(), resultGrads[0]));
  return success();
}

LogicalResult MatmulOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Value dc = resultGrads[0], lhs = getLhs(), rhs = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  Location loc = getLoc();
  bool sharedRhs = tensorOf(rhs).getRank() == 2 && tensorOf(lhs).getRank() > 2;
  if (sharedRhs && ta)
    return emitOpError("cannot differentiate a transposed batched lhs times a "
                       "shared rhs; transpose the lhs explicitly");

  // dA: [.., M, K] = dC · op(B)ᵀ, or stored transposed when transpose_lhs.
  Value da = ta ? buildMatmul(b, loc, rhs, dc, /*tl=*/tb, /*tr=*/true)
                : buildMatmul(b, loc, dc, rhs, /*tl=*/false, /*tr=*/!tb);

  // dB: op(A)ᵀ · dC (or its transpose). A weight shared across the batch
  // sums over it, which one 2-D product over flattened rows does.
  Value db;
  if (sharedRhs) {
    Value lhsRows = flattenRows(b, loc, lhs), dcRows = flattenRows(b, loc, dc);
    db = tb ? buildMatmul(b, loc, dcRows, lhsRows, true, false)
            : buildMatmul(b, loc, lhsRows, dcRows, true, false);
  } else {
    db = tb ? buildMatmul(b, loc, dc, lhs, /*tl=*/true, /*tr=*/ta)
            : buildMatmul(b, loc, lhs, dc, /*tl=*/!ta, /*tr=*/false);
  }
  operandGrads.append({da, db});
  return success();
}

LogicalResult AddOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  operandGrads.append({resultGrads[0], resultGrads[0]});
  return success();
}

LogicalResult MulOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(MulOp::create(b, getLoc(), resultGrads[0], getRhs()));
  operandGrads.push_back(MulOp::create(b, getLoc(), resultGrads[0], getLhs()));
  return success();
}

LogicalResult BiasAddOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(resultGrads[0]);
  operandGrads.push_back(
      BiasGradOp::create(b, getLoc(), getBias().getType(), resultGrads[0]));
  return success();
}

LogicalResult GeluOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(GeluGradOp::create(b, getLoc(), getType(), getInput(),
                                            resultGrads[0], getExactAttr()));
  return success();
}

LogicalResult SwigluOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(SwigluGradOp::create(b, getLoc(), getInput().getType(),
                                              getInput(), resultGrads[0]));
  return success();
}

LogicalResult RepeatHeadsOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(RepeatHeadsGradOp::create(
      b, getLoc(), getInput().getType(), resultGrads[0], getHeadDimAttr(),
      getRepeatsAttr()));
  return success();
}

LogicalResult RotaryOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  // A rotation's transpose is the rotation back.
  operandGrads.push_back(
      RotaryOp::create(b, getLoc(), getType(), resultGrads[0], getHeadDimAttr(),
                       getRotaryDimsAttr(), getBaseAttr(),
                       getInverse() ? UnitAttr() : b.getUnitAttr()));
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  auto grads = LayerNormGradOp::create(
      b, getLoc(), getInput().getType(), getGamma().getType(),
      getBeta().getType(), getInput(), getGamma(), resultGrads[0],
      getEpsilonAttr());
  operandGrads.append(
      {grads.getInputGrad(), grads.getGammaGrad(), grads.getBetaGrad()});
  return success();
}

LogicalResult RmsNormOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  auto grads = RmsNormGradOp::create(
      b, getLoc(), getInput().getType(), getGamma().getType(), getInput(),
      getGamma(), resultGrads[0], getEpsilonAttr(),
      getEpsilonOutsideSqrtAttr());
  operandGrads.append({grads.getInputGrad(), grads.getGammaGrad()});
  return success();
}

LogicalResult SoftmaxOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(SoftmaxGradOp::create(b, getLoc(), getType(),
                                               getResult(), resultGrads[0]));
  return success();
}

LogicalResult AttentionOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Type type = getType();
  auto grads = AttentionGradOp::create(
      b, getLoc(), type, type, type, getQuery(), getKey(), getValue(),
      resultGrads[0], getNumHeadsAttr(), getCausalAttr(), getDropoutAttr(),
      getSeedAttr(), getHeadAxesAttr(), getWindowAttr());
  operandGrads.append(
      {grads.getQueryGrad(), grads.getKeyGrad(), grads.getValueGrad()});
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(CrossEntropyGradOp::create(
      b, getLoc(), getLogits().getType(), getLogits(), getTargets(),
      resultGrads[0], getClassesAttr()));
  operandGrads.push_back(nullptr);
  return success();
}

LogicalResult ReshapeOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      ReshapeOp::create(b, getLoc(), getInput().getType(), resultGrads[0]));
  return success();
}

LogicalResult TransposeOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  operandGrads.push_back(TransposeOp::create(b, getLoc(), getInput().getType(),
                                             resultGrads[0],
                                             b.getDenseI64ArrayAttr(inverse)));
  return success();
}

LogicalResult SliceOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(SliceGradOp::create(b, getLoc(), getInput().getType(),
                                             resultGrads[0], getOffsetsAttr()));
  return success();
}

LogicalResult ConcatOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  int64_t dim = getDimAttr().getInt(), offset = 0;
  int64_t rank = tensorOf(getResult()).getRank();
  for (Value input : getInputs()) {
    RankedTensorType type = tensorOf(input);
    SmallVector<int64_t> offsets(rank, 0);
    offsets[dim] = offset;
    operandGrads.push_back(SliceOp::create(
        b, getLoc(), type, resultGrads[0], b.getDenseI64ArrayAttr(offsets),
        b.getDenseI64ArrayAttr(type.getShape())));
    offset += type.getDimSize(dim);
  }
  return success();
}

LogicalResult DropoutOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  // The mask is a function of (seed, step, index): the same op on the
  // gradient applies the same mask and scale.
  operandGrads.push_back(DropoutOp::create(b, getLoc(), getType(),
                                           resultGrads[0], getPAttr(),
                                           getSeedAttr(), getShardAxesAttr()));
  return success();
}

LogicalResult CastOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  // The gradient goes back in the input's precision: a bf16 compute copy's
  // gradient is accumulated into its fp32 master weight's as fp32.
  operandGrads.push_back(
      CastOp::create(b, getLoc(), getInput().getType(), resultGrads[0]));
  return success();
}
