//===- DscMoeOps.cpp - Mixture-of-Experts ops -------------------*- C++ -*-===//
//
// Verifiers and vector-Jacobian products of dsc.moe_route,
// dsc.moe_dispatch, dsc.moe_combine, their gradient ops and
// dsc.auxiliary_loss (DscMoeOps.td); their costs are with every op's in
// DscCost.cpp.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::dsc;



/// Tokens of a `[..., H]` tensor: the product of its leading dimensions.
static int64_t tokensOf(RankedTensorType type) {
  return type.getRank() == 0 ? 0 : type.getNumElements() / type.getShape().back();
}

//===----------------------------------------------------------------------===//
// dsc.moe_route and its gradient
//===----------------------------------------------------------------------===//

/// The rules dsc.moe_route and dsc.moe_route_grad share: logits `[..., E]`,
/// 1 <= top_k <= E, capacity >= 1 (>= T without dropping), slots and a
/// gates-shaped tensor `[E, C]`, finite non-negative coefficients.
static LogicalResult verifyRouting(Operation *op, Value logits, Value slots,
                                   Value gates, int64_t topK, int64_t capacity,
                                   bool dropTokens, double auxCoeff,
                                   double zCoeff, StringRef gatesName) {
  RankedTensorType logitsType = tensorOf(logits);
  if (logitsType.getRank() < 1 || logitsType.getShape().back() < 1)
    return op->emitOpError("logits must be [..., experts] with experts >= 1, "
                           "got ")
           << shapeOf(logitsType);
  const int64_t experts = logitsType.getShape().back();
  const int64_t tokens = tokensOf(logitsType);
  if (topK < 1 || topK > experts)
    return op->emitOpError("top_k must be in [1, ")
           << experts << "] (the experts), got " << topK;
  if (capacity < 1)
    return op->emitOpError("capacity must be >= 1, got ") << capacity;
  if (!dropTokens && capacity < tokens)
    return op->emitOpError("without drop_tokens every expert must have room "
                           "for all ")
           << tokens << " tokens (capacity >= tokens), got capacity "
           << capacity;
  if (!(auxCoeff >= 0.0) || !std::isfinite(auxCoeff) || !(zCoeff >= 0.0) ||
      !std::isfinite(zCoeff))
    return op->emitOpError("aux_coeff and z_coeff must be finite and >= 0, "
                           "got ")
           << auxCoeff << " and " << zCoeff;
  const SmallVector<int64_t, 2> expected = {experts, capacity};
  if (tensorOf(slots).getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("slots must be [experts, capacity] = [")
           << experts << "x" << capacity << "], got "
           << shapeOf(tensorOf(slots));
  RankedTensorType gatesType = tensorOf(gates);
  if (gatesType.getShape() != ArrayRef<int64_t>(expected) ||
      gatesType.getElementType() != logitsType.getElementType())
    return op->emitOpError()
           << gatesName << " must be [experts, capacity] = [" << experts << "x"
           << capacity << "] of the logits' " << logitsType.getElementType()
           << ", got " << gatesType;
  return success();
}

LogicalResult MoeRouteOp::verify() {
  if (failed(verifyRouting(*this, getLogits(), getSlots(), getGates(),
                           getTopK(), getCapacity(), getDropTokens(),
                           getAuxCoeff().convertToDouble(),
                           getZCoeff().convertToDouble(), "gates")))
    return failure();
  if (tensorOf(getAux()).getElementType() !=
      tensorOf(getLogits()).getElementType())
    return emitOpError("aux must be a scalar of the logits' element type");
  return success();
}

LogicalResult MoeRouteGradOp::verify() {
  if (failed(verifyRouting(*this, getLogits(), getSlots(), getGradGates(),
                           getTopK(), getCapacity(), getDropTokens(),
                           getAuxCoeff().convertToDouble(),
                           getZCoeff().convertToDouble(), "grad_gates")))
    return failure();
  if (getGradAux().getType() != tensorOf(getLogits()).clone(ArrayRef<int64_t>{}))
    return emitOpError("grad_aux must be a scalar of the logits' element "
                       "type, got ")
           << getGradAux().getType();
  return success();
}

LogicalResult MoeRouteOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  // resultGrads: slots (none: an index), gates, aux.
  Value dGates = resultGrads[1], dAux = resultGrads[2];
  if (!dGates || !dAux)
    return emitOpError("both the gates and the auxiliary loss must reach the "
                       "loss (dsc.moe_combine and dsc.auxiliary_loss)");
  operandGrads.push_back(MoeRouteGradOp::create(
      b, getLoc(), getLogits().getType(), getLogits(), getSlots(), dGates,
      dAux, getTopKAttr(), getCapacityAttr(), getDropTokensAttr(),
      getNormalize(), getDropPolicy(), getSlotOrder(), getAuxCounts(),
      getAuxCoeffAttr(), getZCoeffAttr(), getSeedAttr()));
  return success();
}

//===----------------------------------------------------------------------===//
// dsc.moe_dispatch, dsc.moe_combine, dsc.moe_gates_grad
//===----------------------------------------------------------------------===//

/// `rows` ([..., H], T tokens) and `slotRows` ([E, C, H]) against `slots`
/// ([E, C]) and the optional `gates` ([E, C]); one element type.
static LogicalResult verifySlotRows(Operation *op, RankedTensorType rows,
                                    RankedTensorType slotRows, Value slots,
                                    Value gates) {
  ArrayRef<int64_t> slotShape = tensorOf(slots).getShape();
  if (rows.getRank() < 1)
    return op->emitOpError("the token rows must be [..., hidden], got ")
           << shapeOf(rows);
  const int64_t hidden = rows.getShape().back();
  SmallVector<int64_t> expected(slotShape);
  expected.push_back(hidden);
  if (slotRows.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("the slot rows must be [experts, capacity, "
                           "hidden] = [")
           << slotShape[0] << "x" << slotShape[1] << "x" << hidden
           << "], got " << shapeOf(slotRows);
  if (rows.getElementType() != slotRows.getElementType())
    return op->emitOpError("token and slot rows differ in element type: ")
           << rows.getElementType() << " vs " << slotRows.getElementType();
  if (gates && (tensorOf(gates).getShape() != slotShape ||
                tensorOf(gates).getElementType() != rows.getElementType()))
    return op->emitOpError("gates must be [experts, capacity] like the "
                           "slots, of the rows' element type, got ")
           << gates.getType();
  return success();
}

LogicalResult MoeDispatchOp::verify() {
  return verifySlotRows(*this, tensorOf(getInput()), tensorOf(getResult()),
                        getSlots(), getGates());
}

LogicalResult MoeCombineOp::verify() {
  return verifySlotRows(*this, tensorOf(getResult()), tensorOf(getInput()),
                        getSlots(), getGates());
}

LogicalResult MoeGatesGradOp::verify() {
  if (failed(verifySlotRows(*this, tensorOf(getGrad()), tensorOf(getInput()),
                            getSlots(), getResult())))
    return failure();
  return success();
}

LogicalResult MoeDispatchOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  // Every slot of a token scatters its (scaled) row back to it; the
  // weights' gradient is each slot's row against the token's input.
  Value dxe = resultGrads[0];
  operandGrads.push_back(MoeCombineOp::create(
      b, getLoc(), getInput().getType(), dxe, getSlots(), getGates()));
  operandGrads.push_back(nullptr);
  if (getGates())
    operandGrads.push_back(MoeGatesGradOp::create(
        b, getLoc(), getGates().getType(), dxe, getSlots(), getInput()));
  return success();
}

LogicalResult MoeCombineOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  operandGrads.push_back(MoeDispatchOp::create(
      b, getLoc(), getInput().getType(), dy, getSlots(), getGates()));
  operandGrads.push_back(nullptr);
  if (getGates())
    operandGrads.push_back(MoeGatesGradOp::create(
        b, getLoc(), getGates().getType(), getInput(), getSlots(), dy));
  return success();
}

//===----------------------------------------------------------------------===//
// dsc.auxiliary_loss
//===----------------------------------------------------------------------===//

LogicalResult AuxiliaryLossOp::verify() {
  for (Value aux : getAux())
    if (aux.getType() != getLoss().getType())
      return emitOpError("each auxiliary loss must have the loss's type ")
             << getLoss().getType() << ", got " << aux.getType();
  return success();
}

LogicalResult AuxiliaryLossOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  // d(loss + Σ aux): the same gradient for each.
  for (size_t i = 0, e = getNumOperands(); i < e; ++i)
    operandGrads.push_back(resultGrads[0]);
  return success();
}
