//===- DscInferenceOps.cpp - inference programs' ops ------------*- C++ -*-===//
//
// Verifiers of dsc.kv_cache, dsc.paged_attention, dsc.rotary_at,
// dsc.position_embedding_at, dsc.gather_rows and dsc.sample
// (DscInferenceOps.td); their costs are with every op's in DscCost.cpp.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"

using namespace mlir;
using namespace mlir::dsc;



/// Token rows are `[1, N, C]`; the N of `type`, or failure after saying why.
static FailureOr<int64_t> rowsOf(Operation *op, StringRef what,
                                 RankedTensorType type) {
  if (type.getRank() != 3 || type.getDimSize(0) != 1)
    return op->emitOpError()
           << what << " must be token rows [1, N, C], not " << shapeOf(type);
  return type.getDimSize(1);
}

LogicalResult KvCacheOp::verify() {
  RankedTensorType type = getTensorType();
  if (type.getRank() != 5 || type.getDimSize(1) != 2)
    return emitOpError("cache must be [blocks, 2, block_size, kv_heads, "
                       "head_dim], not ")
           << shapeOf(type);
  if (type.getNumElements() == 0)
    return emitOpError("cache has no elements: ") << shapeOf(type);
  return success();
}

LogicalResult PagedAttentionOp::verify() {
  FailureOr<int64_t> n = rowsOf(*this, "query", tensorOf(getQuery()));
  if (failed(n))
    return failure();
  RankedTensorType q = tensorOf(getQuery()), k = tensorOf(getKey());
  if (k != tensorOf(getValue()))
    return emitOpError("key ") << shapeOf(k) << " and value "
                               << shapeOf(tensorOf(getValue())) << " differ";
  if (k.getRank() != 3 || k.getDimSize(1) != *n ||
      k.getElementType() != q.getElementType())
    return emitOpError("key must be the query's ")
           << *n << " rows of its element type, not " << shapeOf(k);
  if (getResult().getType() != q)
    return emitOpError("result must have the query's type");
  int64_t heads = int64_t(getNumHeads()), kvHeads = int64_t(getNumKvHeads());
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0)
    return emitOpError("num_heads ")
           << heads << " must be a positive multiple of num_kv_heads "
           << kvHeads;
  if (q.getDimSize(2) % heads != 0)
    return emitOpError("num_heads ") << heads << " does not divide the query's "
                                     << q.getDimSize(2) << " features";
  int64_t d = q.getDimSize(2) / heads;
  if (k.getDimSize(2) != kvHeads * d)
    return emitOpError("key must have num_kv_heads * head_dim = ")
           << kvHeads * d << " features, not " << k.getDimSize(2);
  for (Value ids : {getPositions(), getSequences()})
    if (tensorOf(ids).getDimSize(0) != *n)
      return emitOpError("positions and sequences must have one id per "
                         "row (")
             << *n << "), not " << tensorOf(ids).getDimSize(0);
  if (int64_t(getWindow()) < 0)
    return emitOpError("window must be >= 0, not ") << int64_t(getWindow());
  return success();
}

LogicalResult
PagedAttentionOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto cache = tables.lookupNearestSymbolFrom<KvCacheOp>(*this, getCacheAttr());
  if (!cache)
    return emitOpError("'") << getCache() << "' does not name a dsc.kv_cache";
  RankedTensorType q = tensorOf(getQuery());
  int64_t d = q.getDimSize(2) / int64_t(getNumHeads());
  if (cache.getKvHeads() != int64_t(getNumKvHeads()) ||
      cache.getHeadDim() != d ||
      cache.getTensorType().getElementType() != q.getElementType())
    return emitOpError("cache '@")
           << getCache() << "' " << shapeOf(cache.getTensorType())
           << " does not hold " << getNumKvHeads() << " kv heads of " << d
           << " " << q.getElementType() << " features";
  return success();
}

LogicalResult RotaryAtOp::verify() {
  FailureOr<int64_t> n = rowsOf(*this, "input", tensorOf(getInput()));
  if (failed(n))
    return failure();
  if (tensorOf(getPositions()).getDimSize(0) != *n)
    return emitOpError("positions must have one id per row (") << *n << ")";
  int64_t c = tensorOf(getInput()).getDimSize(2);
  int64_t headDim = int64_t(getHeadDim()), rotary = int64_t(getRotaryDims());
  if (headDim <= 0 || c % headDim != 0)
    return emitOpError("head_dim ")
           << headDim << " does not divide the last dim " << c;
  if (rotary <= 0 || rotary > headDim || rotary % 2 != 0)
    return emitOpError("rotary_dims must be even and in (0, head_dim], not ")
           << rotary;
  return success();
}

LogicalResult PositionEmbeddingAtOp::verify() {
  RankedTensorType table = tensorOf(getTable());
  RankedTensorType result = tensorOf(getResult());
  FailureOr<int64_t> n = rowsOf(*this, "result", result);
  if (failed(n))
    return failure();
  if (table.getRank() != 2 || table.getDimSize(1) != result.getDimSize(2) ||
      table.getElementType() != result.getElementType())
    return emitOpError("table ")
           << shapeOf(table) << " must be [P, " << result.getDimSize(2)
           << "] of the result's element type";
  if (tensorOf(getPositions()).getDimSize(0) != *n)
    return emitOpError("positions must have one id per row (") << *n << ")";
  return success();
}

LogicalResult GatherRowsOp::verify() {
  RankedTensorType in = tensorOf(getInput()), out = tensorOf(getResult());
  if (failed(rowsOf(*this, "input", in)) ||
      failed(rowsOf(*this, "result", out)))
    return failure();
  if (out.getDimSize(1) != tensorOf(getRows()).getDimSize(0) ||
      out.getDimSize(2) != in.getDimSize(2) ||
      out.getElementType() != in.getElementType())
    return emitOpError("result must be [1, R, ")
           << in.getDimSize(2) << "] with R = the rows' "
           << tensorOf(getRows()).getDimSize(0) << ", not " << shapeOf(out);
  return success();
}

LogicalResult SampleOp::verify() {
  RankedTensorType logits = tensorOf(getLogits());
  if (logits.getRank() != 3)
    return emitOpError("logits must be [shards, R, V / shards], not ")
           << shapeOf(logits);
  int64_t r = logits.getDimSize(1);
  RankedTensorType params = tensorOf(getParams());
  if (params.getDimSize(0) != r || params.getDimSize(1) != 3)
    return emitOpError("params must be [")
           << r << ", 3] (temperature, top_k, top_p), not " << shapeOf(params);
  if (tensorOf(getUniforms()).getDimSize(0) != r ||
      tensorOf(getResult()).getDimSize(0) != r)
    return emitOpError("uniforms and the result must have one element per "
                       "row (")
           << r << ")";
  int64_t v = logits.getDimSize(0) * logits.getDimSize(2);
  int64_t classes = int64_t(getClasses());
  if (classes < 0 || classes > v)
    return emitOpError("classes ") << classes << " must be in [0, " << v << "]";
  return success();
}
