//===- DscOps.cpp - dsc graph op verifiers ----------------------*- C++ -*-===//
//
// Verifiers of the parameter, graph, mesh, transfer and stage ops. Each
// message names the operand, the expected shape and what was found, so a
// user can fix the IR (or the config that produced it) without a debugger.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::dsc;

std::string mlir::dsc::formatShape(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(shape, os, "x");
  return text;
}

/// Checks that `result` has `expected` shape and `elementType`.
static LogicalResult verifyResult(Operation *op, RankedTensorType result,
                                  ArrayRef<int64_t> expected, Type elementType,
                                  StringRef why) {
  if (result.getShape() != expected)
    return op->emitOpError("result shape must be ")
           << why << " = [" << formatShape(expected) << "], got ["
           << formatShape(result.getShape()) << "]";
  if (result.getElementType() != elementType)
    return op->emitOpError("result element type ")
           << result.getElementType() << " must match the input element type "
           << elementType;
  return success();
}

/// Checks that a per-feature vector (bias, gamma, beta) matches `features`.
static LogicalResult verifyFeatureVector(Operation *op, StringRef name,
                                         RankedTensorType vector,
                                         int64_t features, Type elementType) {
  if (vector.getRank() != 1 || vector.getDimSize(0) != features)
    return op->emitOpError() << name << " must be a vector of the last "
                             << "dimension's size [" << features << "], got ["
                             << formatShape(vector.getShape()) << "]";
  if (vector.getElementType() != elementType)
    return op->emitOpError()
           << name << " element type " << vector.getElementType()
           << " must match the input element type " << elementType;
  return success();
}

//===----------------------------------------------------------------------===//
// ParameterOp
//===----------------------------------------------------------------------===//

int64_t ParameterOp::getWholeNumElements() {
  ShardLayoutAttr layout = getLayoutAttr();
  return layout ? layout.getWholeNumElements() : getNumElements();
}

bool ParameterOp::isChunked() {
  ShardLayoutAttr layout = getLayoutAttr();
  return layout && layout.getChunk() && !layout.getChunk().empty();
}

LogicalResult ParameterOp::verify() {
  RankedTensorType type = getTensorType();
  if (!type.hasStaticShape())
    return emitOpError("parameter '")
           << getSymName() << "' must have a static shape, got " << type;
  if (type.getNumElements() == 0)
    return emitOpError("parameter '") << getSymName() << "' has no elements";
  ShardLayoutAttr layout = getLayoutAttr();
  // Only a ZeRO-3 chunk is fetched per use; a whole parameter off the
  // device would have to be copied in whole for every read.
  if (getTier() != MemoryTier::Device && (!layout || !isChunked()))
    return emitOpError("parameter '")
           << getSymName() << "' is in tier '" << stringifyMemoryTier(getTier())
           << "' but is not a ZeRO-3 chunk; only chunks are offloaded";
  if (!layout)
    return success();
  // The rank's part: the whole view divided by every split and chunk axis.
  auto module = (*this)->getParentOfType<ModuleOp>();
  MeshOp mesh;
  for (auto m : module.getOps<MeshOp>())
    mesh = m;
  if (!mesh)
    return emitOpError("parameter '")
           << getSymName() << "' has a layout but the module has no dsc.mesh";
  auto axisSize = [&](StringRef axis) -> FailureOr<int64_t> {
    std::optional<unsigned> index = mesh.getAxisIndex(axis);
    if (!index)
      return emitOpError("layout of '")
             << getSymName() << "' names mesh axis '" << axis << "' that @"
             << mesh.getSymName() << " does not have";
    return mesh.getShape()[*index];
  };
  int64_t part = 1;
  for (auto [dim, size] : llvm::enumerate(layout.getView())) {
    int64_t parts = 1;
    for (StringRef axis : layout.getAxesOfDim(dim)) {
      FailureOr<int64_t> n = axisSize(axis);
      if (failed(n))
        return failure();
      parts *= *n;
    }
    if (size % parts != 0)
      return emitOpError("layout of '")
             << getSymName() << "' splits view dimension " << dim << " ("
             << size << ") into " << parts << " parts, which do not divide it";
    part *= size / parts;
  }
  int64_t chunks = 1;
  for (StringRef axis : layout.getChunkAxisNames()) {
    FailureOr<int64_t> n = axisSize(axis);
    if (failed(n))
      return failure();
    chunks *= *n;
  }
  if (part % chunks != 0)
    return emitOpError("layout of '")
           << getSymName() << "' chunks " << part << " elements into " << chunks
           << " chunks, which do not divide them";
  if (type.getNumElements() != part / chunks)
    return emitOpError("parameter '")
           << getSymName() << "' has " << type.getNumElements()
           << " elements but its layout gives each rank " << part / chunks
           << " of the whole " << layout.getWholeNumElements();
  return success();
}

//===----------------------------------------------------------------------===//
// Graph ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  RankedTensorType table = tensorOf(getTable());
  if (table.getRank() != 2)
    return emitOpError("table must be a rank-2 [vocab, hidden] tensor, got [")
           << formatShape(table.getShape()) << "]";
  SmallVector<int64_t> expected(tensorOf(getIds()).getShape());
  expected.push_back(table.getDimSize(1));
  return verifyResult(*this, tensorOf(getResult()), expected,
                      table.getElementType(), "ids shape + [hidden]");
}

LogicalResult PositionEmbeddingOp::verify() {
  RankedTensorType table = tensorOf(getTable());
  RankedTensorType result = tensorOf(getResult());
  if (table.getRank() != 2)
    return emitOpError(
               "table must be a rank-2 [positions, hidden] tensor, got [")
           << formatShape(table.getShape()) << "]";
  if (result.getRank() != 3)
    return emitOpError("result must be a rank-3 [batch, seq, hidden] tensor, "
                       "got [")
           << formatShape(result.getShape()) << "]";
  if (result.getDimSize(1) > table.getDimSize(0))
    return emitOpError("sequence length ")
           << result.getDimSize(1) << " exceeds the " << table.getDimSize(0)
           << " positions of the table";
  return verifyResult(
      *this, result,
      {result.getDimSize(0), result.getDimSize(1), table.getDimSize(1)},
      table.getElementType(), "[batch, seq, hidden of table]");
}

/// The product's shape (batch + [M, N]) of `op`'s operands and flags, or
/// an error on `op` naming what does not fit (dsc.matmul and
/// dsc.matmul_accumulate alike).
FailureOr<SmallVector<int64_t>>
mlir::dsc::matmulShape(Operation *op, Value lhsValue, Value rhsValue,
                       bool transposeLhs, bool transposeRhs) {
  RankedTensorType lhs = tensorOf(lhsValue), rhs = tensorOf(rhsValue);
  int64_t lhsRank = lhs.getRank(), rhsRank = rhs.getRank();
  if (lhsRank < 2)
    return op->emitOpError("lhs must have rank >= 2, got [")
           << formatShape(lhs.getShape()) << "]";
  if (rhsRank != 2 && rhsRank != lhsRank)
    return op->emitOpError("rhs must be a matrix or have the lhs's rank ")
           << lhsRank << ", got [" << formatShape(rhs.getShape()) << "]";
  ArrayRef<int64_t> batch = lhs.getShape().drop_back(2);
  if (rhsRank == lhsRank && rhs.getShape().drop_back(2) != batch)
    return op->emitOpError("batch dimensions differ: lhs [")
           << formatShape(batch) << "], rhs ["
           << formatShape(rhs.getShape().drop_back(2)) << "]";
  if (lhs.getElementType() != rhs.getElementType())
    return op->emitOpError("operand element types differ: ")
           << lhs.getElementType() << " vs " << rhs.getElementType();
  int64_t m = lhs.getDimSize(lhsRank - (transposeLhs ? 1 : 2));
  int64_t kLhs = lhs.getDimSize(lhsRank - (transposeLhs ? 2 : 1));
  int64_t kRhs = rhs.getDimSize(rhsRank - (transposeRhs ? 1 : 2));
  int64_t n = rhs.getDimSize(rhsRank - (transposeRhs ? 2 : 1));
  if (kLhs != kRhs)
    return op->emitOpError("contracting dimensions differ: lhs has K = ")
           << kLhs << ", rhs has K = " << kRhs;
  SmallVector<int64_t> expected(batch);
  expected.append({m, n});
  return expected;
}

LogicalResult MatmulOp::verify() {
  FailureOr<SmallVector<int64_t>> expected = matmulShape(
      *this, getLhs(), getRhs(), getTransposeLhs(), getTransposeRhs());
  if (failed(expected))
    return failure();
  return verifyResult(*this, tensorOf(getResult()), *expected,
                      tensorOf(getLhs()).getElementType(), "batch + [M, N]");
}

LogicalResult BiasAddOp::verify() {
  RankedTensorType input = tensorOf(getInput());
  if (input.getRank() < 1)
    return emitOpError("input must have rank >= 1");
  if (failed(verifyFeatureVector(*this, "bias", tensorOf(getBias()),
                                 input.getShape().back(),
                                 input.getElementType())))
    return failure();
  return success();
}

/// A normalization over the last dimension: a positive epsilon, an input
/// of rank >= 1, and each of `vectors` (gamma, beta) of the last dim's size.
static LogicalResult verifyNorm(Operation *op, Value input, APFloat epsilon,
                                ArrayRef<std::pair<StringRef, Value>> vectors) {
  RankedTensorType type = tensorOf(input);
  if (!(epsilon.convertToDouble() > 0.0))
    return op->emitOpError("epsilon must be > 0, got ")
           << epsilon.convertToDouble();
  if (type.getRank() < 1)
    return op->emitOpError("input must have rank >= 1");
  for (auto [name, vector] : vectors)
    if (failed(verifyFeatureVector(op, name, tensorOf(vector),
                                   type.getShape().back(),
                                   type.getElementType())))
      return failure();
  return success();
}

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getInput(), getEpsilon(),
                    {{"gamma", getGamma()}, {"beta", getBeta()}});
}

LogicalResult RmsNormOp::verify() {
  return verifyNorm(*this, getInput(), getEpsilon(), {{"gamma", getGamma()}});
}

LogicalResult RotaryOp::verify() {
  RankedTensorType input = tensorOf(getInput());
  if (input.getRank() < 2)
    return emitOpError("input must be [..., seq, heads * head_dim], got rank ")
           << input.getRank();
  int64_t headDim = getHeadDim(), rotary = getRotaryDims();
  int64_t features = input.getShape().back();
  if (headDim < 1 || features % headDim != 0)
    return emitOpError("head_dim ")
           << headDim << " does not divide the last dimension " << features;
  if (rotary < 2 || rotary > headDim || rotary % 2 != 0)
    return emitOpError("rotary_dims must be even and in [2, head_dim = ")
           << headDim << "], got " << rotary;
  if (!(getBase().convertToDouble() > 1.0))
    return emitOpError("base must be > 1, got ") << getBase().convertToDouble();
  return success();
}

/// `fused` is `[..., 2f]` ([up | gate]) and `half` `[..., f]`, same leading
/// dims and element type: dsc.swiglu's input and result.
static LogicalResult verifySwigluHalves(Operation *op, RankedTensorType fused,
                                        RankedTensorType half) {
  if (fused.getRank() < 1 || fused.getRank() != half.getRank() ||
      fused.getShape().drop_back() != half.getShape().drop_back() ||
      fused.getShape().back() != 2 * half.getShape().back() ||
      fused.getElementType() != half.getElementType())
    return op->emitOpError("the fused [up | gate] tensor ")
           << fused << " must be twice as wide as the gated one " << half
           << " in its last dimension, the other dimensions equal";
  return success();
}

/// `narrow` is `[..., kv * headDim]`, `wide` `[..., kv * repeats * headDim]`:
/// dsc.repeat_heads' input and result.
static LogicalResult verifyHeadRepeat(Operation *op, RankedTensorType narrow,
                                      RankedTensorType wide, int64_t headDim,
                                      int64_t repeats) {
  if (headDim < 1 || repeats < 1)
    return op->emitOpError("head_dim and repeats must be >= 1, got ")
           << headDim << " and " << repeats;
  if (narrow.getRank() < 1 || narrow.getShape().back() % headDim != 0)
    return op->emitOpError("head_dim ")
           << headDim << " does not divide the heads' dimension of " << narrow;
  if (narrow.getRank() != wide.getRank() ||
      narrow.getShape().drop_back() != wide.getShape().drop_back() ||
      wide.getShape().back() != narrow.getShape().back() * repeats ||
      narrow.getElementType() != wide.getElementType())
    return op->emitOpError("repeating each head of ")
           << narrow << " " << repeats << " times makes "
           << narrow.getShape().back() * repeats << " features, not " << wide;
  return success();
}

LogicalResult SwigluOp::verify() {
  return verifySwigluHalves(*this, tensorOf(getInput()), tensorOf(getResult()));
}
LogicalResult SwigluGradOp::verify() {
  return verifySwigluHalves(*this, tensorOf(getInput()), tensorOf(getGrad()));
}
LogicalResult RepeatHeadsOp::verify() {
  return verifyHeadRepeat(*this, tensorOf(getInput()), tensorOf(getResult()),
                          getHeadDim(), getRepeats());
}
LogicalResult RepeatHeadsGradOp::verify() {
  return verifyHeadRepeat(*this, tensorOf(getResult()), tensorOf(getGrad()),
                          getHeadDim(), getRepeats());
}

LogicalResult mlir::dsc::verifyAttention(Operation *op, RankedTensorType query,
                                         int64_t heads, double dropout,
                                         int64_t window, bool causal,
                                         RankedTensorType lse) {
  if (query.getRank() != 3)
    return op->emitOpError("query must be a rank-3 [batch, seq, hidden] "
                           "tensor, got [")
           << formatShape(query.getShape()) << "]";
  if (heads <= 0)
    return op->emitOpError("num_heads must be >= 1, got ") << heads;
  if (query.getDimSize(2) % heads != 0)
    return op->emitOpError("hidden size ")
           << query.getDimSize(2) << " is not divisible by num_heads " << heads;
  if (!(dropout >= 0.0 && dropout < 1.0))
    return op->emitOpError("attention dropout must be in [0, 1), got ")
           << dropout;
  if (window < 0 || (window > 0 && !causal))
    return op->emitOpError("a sliding window must be >= 1 and causal, got ")
           << window << (causal ? "" : " without causal");
  if (!lse)
    return success();
  SmallVector<int64_t> want = {query.getDimSize(0), heads, query.getDimSize(1)};
  if (lse.getShape() != ArrayRef<int64_t>(want))
    return op->emitOpError("lse must be [batch, heads, seq] = [")
           << formatShape(want) << "], got " << shapeOf(lse);
  Type element = query.getElementType().isF64()
                     ? Type(Float64Type::get(op->getContext()))
                     : Type(Float32Type::get(op->getContext()));
  if (lse.getElementType() != element)
    return op->emitOpError("lse must be ")
           << element << " (the scores' logsumexp of " << query.getElementType()
           << " operands), got " << lse.getElementType();
  return success();
}

LogicalResult AttentionOp::verify() {
  return verifyAttention(
      *this, tensorOf(getQuery()), getNumHeadsAttr().getInt(),
      getDropout().convertToDouble(), getWindow(), getCausal());
}

LogicalResult CrossEntropyOp::verify() {
  RankedTensorType logits = tensorOf(getLogits());
  if (logits.getRank() < 2)
    return emitOpError("logits must have rank >= 2 ([tokens..., vocab]), got [")
           << formatShape(logits.getShape()) << "]";
  Type lossType = tensorOf(getResult()).getElementType();
  bool f64 = logits.getElementType().isF64();
  if (f64 != lossType.isF64())
    return emitOpError("the loss must be ")
           << (f64 ? "f64 for f64 logits" : "f32 (accumulated in f32)")
           << ", got " << lossType;
  ArrayRef<int64_t> expected = logits.getShape().drop_back();
  ArrayRef<int64_t> targets = tensorOf(getTargets()).getShape();
  if (targets != expected)
    return emitOpError("targets shape must be the logits shape without the "
                       "vocab dimension = [")
           << formatShape(expected) << "], got [" << formatShape(targets)
           << "]";
  return verifyClassCount(*this, getClassesAttr().getInt(),
                          logits.getShape().back(), "the logits");
}

LogicalResult mlir::dsc::verifyClassCount(Operation *op, int64_t classes,
                                          int64_t columns, StringRef whose) {
  if (classes < 0 || classes > columns)
    return op->emitOpError("classes = ")
           << classes << " must be between 0 (every column) and the " << columns
           << " columns of " << whose;
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = tensorOf(getInput()), result = tensorOf(getResult());
  if (!input.hasStaticShape() || !result.hasStaticShape())
    return emitOpError("reshape needs static shapes");
  if (input.getNumElements() != result.getNumElements())
    return emitOpError("cannot reshape [")
           << formatShape(input.getShape()) << "] (" << input.getNumElements()
           << " elements) to [" << formatShape(result.getShape()) << "] ("
           << result.getNumElements() << " elements)";
  if (input.getElementType() != result.getElementType())
    return emitOpError("result element type ")
           << result.getElementType() << " must match the input element type "
           << input.getElementType();
  return success();
}

LogicalResult TransposeOp::verify() {
  RankedTensorType input = tensorOf(getInput());
  ArrayRef<int64_t> perm = getPermutation();
  if (static_cast<int64_t>(perm.size()) != input.getRank())
    return emitOpError("permutation has ")
           << perm.size() << " entries but the input has rank "
           << input.getRank();
  SmallVector<bool> used(perm.size(), false);
  SmallVector<int64_t> expected;
  for (int64_t p : perm) {
    if (p < 0 || p >= input.getRank() || used[p])
      return emitOpError("permutation [")
             << formatShape(perm) << "] is not a permutation of 0.."
             << input.getRank() - 1;
    used[p] = true;
    expected.push_back(input.getDimSize(p));
  }
  return verifyResult(*this, tensorOf(getResult()), expected,
                      input.getElementType(), "the permuted input shape");
}

LogicalResult SliceOp::verify() {
  RankedTensorType input = tensorOf(getInput());
  ArrayRef<int64_t> offsets = getOffsets(), sizes = getSizes();
  if (static_cast<int64_t>(offsets.size()) != input.getRank() ||
      static_cast<int64_t>(sizes.size()) != input.getRank())
    return emitOpError("needs one offset and one size per input dimension (")
           << input.getRank() << "), got " << offsets.size() << " offsets and "
           << sizes.size() << " sizes";
  for (int64_t d = 0, e = input.getRank(); d < e; ++d) {
    if (offsets[d] < 0 || sizes[d] <= 0 ||
        offsets[d] + sizes[d] > input.getDimSize(d))
      return emitOpError("slice [")
             << offsets[d] << ", " << offsets[d] + sizes[d] << ") of dimension "
             << d << " is out of bounds [0, " << input.getDimSize(d) << ")";
  }
  return verifyResult(*this, tensorOf(getResult()), sizes,
                      input.getElementType(), "the slice sizes");
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  RankedTensorType first = tensorOf(getInputs().front());
  int64_t dim = getDimAttr().getInt();
  if (dim < 0 || dim >= first.getRank())
    return emitOpError("dim ")
           << dim << " is out of range for rank " << first.getRank();
  SmallVector<int64_t> expected(first.getShape());
  expected[dim] = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    RankedTensorType type = tensorOf(input);
    if (type.getRank() != first.getRank() ||
        type.getElementType() != first.getElementType())
      return emitOpError("input ") << i << " has type " << type
                                   << ", incompatible with input 0 " << first;
    for (int64_t d = 0, e = first.getRank(); d < e; ++d)
      if (d != dim && type.getDimSize(d) != first.getDimSize(d))
        return emitOpError("input ")
               << i << " differs from input 0 in dimension " << d << " ("
               << type.getDimSize(d) << " vs " << first.getDimSize(d)
               << "); only dimension " << dim << " may differ";
    expected[dim] += type.getDimSize(dim);
  }
  return verifyResult(*this, tensorOf(getResult()), expected,
                      first.getElementType(), "the concatenated shape");
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0.0 && p < 1.0))
    return emitOpError("dropout probability must be in [0, 1), got ") << p;
  return success();
}

LogicalResult CastOp::verify() {
  RankedTensorType input = tensorOf(getInput()), result = getType();
  for (auto [what, type] :
       {std::make_pair("input", input), std::make_pair("result", result)})
    if (!isa<Float16Type, BFloat16Type, Float32Type, Float64Type>(
            type.getElementType()))
      return emitOpError() << what << " must be a float tensor (f16, bf16, "
                           << "f32 or f64 elements), got " << type
                           << "; only float tensors are cast";
  if (input.getShape() != result.getShape())
    return emitOpError("result shape [")
           << formatShape(result.getShape()) << "] must equal the input shape ["
           << formatShape(input.getShape())
           << "]; a cast changes only the element type (reshape with "
              "dsc.reshape)";
  return success();
}

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

LogicalResult MeshOp::verify() {
  ArrayAttr axes = getAxes();
  ArrayRef<int64_t> shape = getShape();
  if (axes.empty())
    return emitOpError("mesh needs at least one axis");
  if (axes.size() != shape.size())
    return emitOpError("has ") << axes.size() << " axis names but "
                               << shape.size() << " axis sizes";
  llvm::StringSet<> seen;
  for (auto [name, size] :
       llvm::zip(axes.getAsValueRange<StringAttr>(), shape)) {
    if (name.empty())
      return emitOpError("mesh axis names must not be empty");
    if (!seen.insert(name).second)
      return emitOpError("mesh axis '") << name << "' is declared twice";
    if (size < 1)
      return emitOpError("mesh axis '")
             << name << "' must have size >= 1, got " << size;
  }
  return success();
}

std::optional<unsigned> MeshOp::getAxisIndex(StringRef name) {
  for (auto [i, axis] :
       llvm::enumerate(getAxes().getAsValueRange<StringAttr>()))
    if (axis == name)
      return i;
  return std::nullopt;
}

int64_t MeshOp::getNumRanks() {
  int64_t ranks = 1;
  for (int64_t size : getShape())
    ranks *= size;
  return ranks;
}

//===----------------------------------------------------------------------===//
// TransferOp, SwapInOp, SwapOutOp
//===----------------------------------------------------------------------===//

namespace {
/// A parameter or state declaration as a transfer endpoint: its type and
/// tier (parameters live on the device).
struct Placed {
  RankedTensorType type;
  MemoryTier tier;
};
} // namespace

static FailureOr<Placed> lookupPlaced(Operation *op,
                                      SymbolTableCollection &tables,
                                      FlatSymbolRefAttr name, StringRef role) {
  Operation *decl = tables.lookupNearestSymbolFrom(op, name);
  if (auto param = dyn_cast_or_null<ParameterOp>(decl))
    return Placed{param.getTensorType(), param.getTier()};
  if (auto state = dyn_cast_or_null<StateOp>(decl))
    return Placed{state.getTensorType(), state.getTier()};
  return op->emitOpError(role)
         << " '" << name << "' does not name a dsc.parameter or dsc.state";
}

LogicalResult TransferOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<Placed> source =
      lookupPlaced(*this, tables, getSourceAttr(), "source");
  FailureOr<Placed> destination =
      lookupPlaced(*this, tables, getDestinationAttr(), "destination");
  if (failed(source) || failed(destination))
    return failure();
  if (source->tier == destination->tier)
    return emitOpError("source and destination are both in tier '")
           << stringifyMemoryTier(source->tier)
           << "'; a transfer must change the tier";
  if (source->type.getElementType() != destination->type.getElementType())
    return emitOpError("moves ") << source->type.getElementType() << " into "
                                 << destination->type.getElementType()
                                 << "; a transfer does not convert";
  int64_t from = source->type.getNumElements(),
          to = destination->type.getNumElements();
  if (!getMeshAttr() && !getChunkAxesAttr()) {
    if (from != to)
      return emitOpError("moves ")
             << from << " elements into " << to
             << "; without chunk axes both sides hold the same count";
    return success();
  }
  if (!getMeshAttr() || !getChunkAxesAttr())
    return emitOpError("a chunked transfer needs both a mesh and chunk axes");
  FailureOr<int64_t> group =
      getMeshGroupSize(*this, tables, getMeshAttr(), getChunkAxesAttr());
  if (failed(group))
    return failure();
  if (from != to * *group && to != from * *group)
    return emitOpError("chunked over a group of ")
           << *group << " ranks, one side must hold " << *group
           << " times the other's elements; got " << from << " and " << to;
  return success();
}

int64_t TransferOp::getBytes(SymbolTableCollection &tables) {
  FailureOr<Placed> source =
      lookupPlaced(*this, tables, getSourceAttr(), "source");
  FailureOr<Placed> destination =
      lookupPlaced(*this, tables, getDestinationAttr(), "destination");
  RankedTensorType smaller =
      source->type.getNumElements() <= destination->type.getNumElements()
          ? source->type
          : destination->type;
  return smaller.getNumElements() *
         ((smaller.getElementTypeBitWidth() + 7) / 8);
}

/// Swaps name `in nvme` states and parameter chunks.
static LogicalResult verifySwapped(Operation *op, SymbolTableCollection &tables,
                                   ArrayAttr states) {
  for (Attribute attr : states) {
    auto name = cast<FlatSymbolRefAttr>(attr);
    FailureOr<Placed> placed = lookupPlaced(op, tables, name, "swapped");
    if (failed(placed))
      return failure();
    if (placed->tier != MemoryTier::Nvme)
      return op->emitOpError("'")
             << name << "' is in tier '" << stringifyMemoryTier(placed->tier)
             << "'; only nvme states and parameters are swapped";
  }
  return success();
}

LogicalResult SwapInOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifySwapped(*this, tables, getStates());
}

LogicalResult SwapOutOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifySwapped(*this, tables, getStates());
}

LogicalResult OverlapNextStepOp::verify() {
  Operation *func = (*this)->getParentOp();
  if (getProgramRole(func) != ProgramRole::Optimizer)
    return emitOpError("belongs in the optimizer program (the update it "
                       "overlaps with the next step)");
  for (Operation *op = (*this)->getNextNode(); op; op = op->getNextNode()) {
    if (isa<AdamWOp>(op) || op->hasTrait<OpTrait::IsTerminator>())
      continue;
    return emitOpError("is followed by '")
           << op->getName()
           << "'; only dsc.adamw updates run beside the next step";
  }
  return success();
}

#define GET_OP_CLASSES
#include "dsc/Dialect/Dsc/IR/DscOps.cpp.inc"
