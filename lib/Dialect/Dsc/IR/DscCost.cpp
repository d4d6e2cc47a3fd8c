//===- DscCost.cpp - cost interface of the dsc graph ops --------*- C++ -*-===//
//
// FLOPs and bytes of each graph op, from its types. Matmul-class FLOPs follow
// Megatron-LM's accounting (2 per multiply-add, full s² for causal attention)
// so that model totals match the published closed forms exactly.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"

using namespace mlir;
using namespace mlir::dsc;

// Vector FLOPs per element of the elementwise ops. These are rough operation
// counts (they feed the vector-unit part of the cost model, not the
// model-FLOPs totals): gelu's tanh form is x³, two fmas, tanh (~4), a mul
// and an add; layer_norm is mean, variance, normalize, scale and shift;
// rms_norm is the mean square, normalize and scale;
// softmax is max, subtract, exp, sum and divide; rotary is two products
// and a sum per element, its angle's cos and sin shared along the heads;
// swiglu is a sigmoid (exp, add, divide) and two products per input pair,
// counted per input element.
static constexpr int64_t kGeluFlopsPerElement = 8;
static constexpr int64_t kLayerNormFlopsPerElement = 8;
static constexpr int64_t kRmsNormFlopsPerElement = 4;
static constexpr int64_t kSoftmaxFlopsPerElement = 5;
static constexpr int64_t kRotaryFlopsPerElement = 3;
static constexpr int64_t kSwigluFlopsPerElement = 3;
static constexpr int64_t kCrossEntropyFlopsPerElement = 5;
static constexpr int64_t kDropoutFlopsPerElement = 2;

static int64_t numElements(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

static int64_t bytesOf(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t bits = type.getElementTypeBitWidth();
  return type.getNumElements() * ((bits + 7) / 8);
}

/// Cost of an op that reads all its operands and writes all its results
/// once, with `flopsPerElement` vector FLOPs per result element.
static OpCost streamingCost(Operation *op, int64_t flopsPerElement) {
  OpCost cost;
  for (Value operand : op->getOperands())
    cost.bytesRead += bytesOf(operand);
  for (Value result : op->getResults()) {
    cost.bytesWritten += bytesOf(result);
    cost.vectorFlops += flopsPerElement * numElements(result);
  }
  return cost;
}

OpCost EmbeddingOp::getCost() {
  // Only the gathered rows of the table are read.
  OpCost cost;
  cost.bytesRead = bytesOf(getIds()) + bytesOf(getResult());
  cost.bytesWritten = bytesOf(getResult());
  return cost;
}

OpCost PositionEmbeddingOp::getCost() { return streamingCost(*this, 0); }

OpCost MatmulOp::getCost() {
  auto lhs = cast<RankedTensorType>(getLhs().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  int64_t k = lhs.getDimSize(lhs.getRank() - (getTransposeLhs() ? 2 : 1));
  OpCost cost = streamingCost(*this, 0);
  cost.matmulFlops = 2 * result.getNumElements() * k;
  return cost;
}

OpCost MatmulAccumulateOp::getCost() {
  // The product's FLOPs; it reads its operands and the state and writes the
  // state, once.
  auto lhs = cast<RankedTensorType>(getLhs().getType());
  FailureOr<SmallVector<int64_t>> shape = matmulShape(
      *this, getLhs(), getRhs(), getTransposeLhs(), getTransposeRhs());
  OpCost cost = streamingCost(*this, 0);
  if (failed(shape))
    return cost;
  int64_t elements = 1;
  for (int64_t d : *shape)
    elements *= d;
  const int64_t bytes = elements * ((lhs.getElementTypeBitWidth() + 7) / 8);
  cost.bytesRead += bytes;
  cost.bytesWritten += bytes;
  cost.matmulFlops =
      2 * elements *
      lhs.getDimSize(lhs.getRank() - (getTransposeLhs() ? 2 : 1));
  return cost;
}

OpCost AddOp::getCost() { return streamingCost(*this, 1); }
OpCost MulOp::getCost() { return streamingCost(*this, 1); }
OpCost BiasAddOp::getCost() { return streamingCost(*this, 1); }
OpCost GeluOp::getCost() { return streamingCost(*this, kGeluFlopsPerElement); }
// bias_add's and gelu's FLOPs, without bias_add's write and gelu's read of
// the sum.
OpCost BiasGeluOp::getCost() {
  return streamingCost(*this, 1 + kGeluFlopsPerElement);
}
OpCost SwigluOp::getCost() {
  return streamingCost(*this, kSwigluFlopsPerElement);
}
OpCost RepeatHeadsOp::getCost() { return streamingCost(*this, 0); }
OpCost RotaryOp::getCost() {
  return streamingCost(*this, kRotaryFlopsPerElement);
}
OpCost LayerNormOp::getCost() {
  return streamingCost(*this, kLayerNormFlopsPerElement);
}
OpCost RmsNormOp::getCost() {
  return streamingCost(*this, kRmsNormFlopsPerElement);
}
OpCost SoftmaxOp::getCost() {
  return streamingCost(*this, kSoftmaxFlopsPerElement);
}

/// q·kᵀ and p·v, each 2·B·S²·H over all heads; scale, softmax (and
/// dropout) over the B·heads·S·S score matrix.
static OpCost attentionCost(Operation *op, Value queryValue, int64_t heads,
                            bool dropout) {
  auto query = cast<RankedTensorType>(queryValue.getType());
  int64_t batch = query.getDimSize(0), seq = query.getDimSize(1);
  int64_t hidden = query.getDimSize(2);
  OpCost cost = streamingCost(op, 0);
  cost.matmulFlops = 4 * batch * seq * seq * hidden;
  int64_t scores = batch * heads * seq * seq;
  cost.vectorFlops = scores * (1 + kSoftmaxFlopsPerElement + (dropout ? 2 : 0));
  return cost;
}

OpCost AttentionOp::getCost() {
  return attentionCost(*this, getQuery(), getNumHeads(),
                       !getDropout().isZero());
}
OpCost AttentionLseOp::getCost() {
  return attentionCost(*this, getQuery(), getNumHeads(),
                       !getDropout().isZero());
}

OpCost CrossEntropyOp::getCost() {
  OpCost cost = streamingCost(*this, 0);
  cost.vectorFlops = kCrossEntropyFlopsPerElement * numElements(getLogits());
  return cost;
}

// A reshape of a contiguous tensor is a view: it moves no data.
OpCost ReshapeOp::getCost() { return OpCost(); }
OpCost TransposeOp::getCost() { return streamingCost(*this, 0); }
OpCost SliceOp::getCost() {
  OpCost cost;
  cost.bytesRead = cost.bytesWritten = bytesOf(getResult());
  return cost;
}
OpCost ConcatOp::getCost() { return streamingCost(*this, 0); }
// A conversion moves data (fp32 in, bf16 out) and does no arithmetic the
// cost model counts, like the other data-movement ops.
OpCost CastOp::getCost() { return streamingCost(*this, 0); }
OpCost DropoutOp::getCost() {
  return streamingCost(*this, kDropoutFlopsPerElement);
}

//===----------------------------------------------------------------------===//
// Mixture of Experts
//===----------------------------------------------------------------------===//

/// streamingCost's bytes with `vectorFlops` in all (the MoE ops' FLOPs are
/// not per result element).
static OpCost streamingCostWithFlops(Operation *op, int64_t vectorFlops) {
  OpCost cost = streamingCost(op, 0);
  cost.vectorFlops = vectorFlops;
  return cost;
}

// The softmax (5 FLOPs an element), the top-k scan (k compares) and, per
// slot, one normalization divide; the backward the softmax's Jacobian
// product (4 an element) on top of recomputing it.
OpCost MoeRouteOp::getCost() {
  return streamingCostWithFlops(*this,
                                numElements(getLogits()) * (5 + getTopK()) +
                                    numElements(getGates()));
}
OpCost MoeRouteGradOp::getCost() {
  return streamingCostWithFlops(*this,
                                numElements(getLogits()) * (9 + getTopK()));
}
// Dispatch and combine move rows (a multiply per element when weighted,
// an add too when combining).
OpCost MoeDispatchOp::getCost() {
  return streamingCostWithFlops(*this,
                                getGates() ? numElements(getResult()) : 0);
}
OpCost MoeCombineOp::getCost() {
  return streamingCostWithFlops(*this,
                                (getGates() ? 2 : 1) * numElements(getInput()));
}
OpCost MoeGatesGradOp::getCost() {
  return streamingCostWithFlops(*this, 2 * numElements(getInput()));
}
OpCost AuxiliaryLossOp::getCost() { return streamingCost(*this, 0); }

//===----------------------------------------------------------------------===//
// Inference programs' ops (DscInferenceOps.td)
//===----------------------------------------------------------------------===//

OpCost PagedAttentionOp::getCost() {
  // Each row's query against the keys and values of its context: at most
  // the cache's whole width per sequence; priced at the longest context the
  // block table allows (an upper bound: --dsc-estimate's decode step).
  auto q = cast<RankedTensorType>(getQuery().getType());
  auto table = cast<RankedTensorType>(getBlockTable().getType());
  auto cache = SymbolTable::lookupNearestSymbolFrom<KvCacheOp>(getOperation(),
                                                               getCacheAttr());
  int64_t context = cache ? table.getDimSize(1) * cache.getBlockSize() : 0;
  if (getWindow() > 0)
    context = std::min<int64_t>(context, int64_t(getWindow()));
  OpCost cost = streamingCost(*this, 0);
  int64_t rows = q.getDimSize(1), features = q.getDimSize(2);
  cost.matmulFlops = 4 * rows * context * features;
  if (cache)
    cost.bytesRead += 2 * rows * context * getNumKvHeads() *
                      cache.getHeadDim() *
                      int64_t(q.getElementTypeBitWidth() / 8);
  return cost;
}

OpCost RotaryAtOp::getCost() {
  return streamingCost(*this, kRotaryFlopsPerElement);
}

OpCost PositionEmbeddingAtOp::getCost() { return streamingCost(*this, 0); }

OpCost GatherRowsOp::getCost() {
  // Only the gathered rows are read.
  OpCost cost;
  cost.bytesRead = 2 * bytesOf(getResult());
  cost.bytesWritten = bytesOf(getResult());
  return cost;
}

OpCost SampleOp::getCost() {
  // A sort of each row dominates; priced as a few passes over it.
  return streamingCost(*this, 8);
}
