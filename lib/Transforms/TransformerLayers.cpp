//===- TransformerLayers.cpp - which transformer layer an op is in --------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/TransformerLayers.h"
#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Location.h"

#include <functional>

using namespace mlir;

int64_t mlir::dsc::transformerLayerOfName(StringRef name) {
  if (!name.consume_front("h."))
    return -1;
  unsigned layer;
  if (name.consumeInteger(10, layer) || !(name.empty() || name.front() == '.'))
    return -1;
  return layer;
}

int64_t mlir::dsc::transformerLayerOf(Operation *op) {
  if (auto mark = op->getAttrOfType<IntegerAttr>(kLayerAttr))
    return mark.getInt();
  if (auto read = dyn_cast<GetParameterOp>(op))
    return transformerLayerOfName(read.getName());
  std::function<int64_t(Location)> fromLoc = [&](Location loc) -> int64_t {
    if (auto fused = dyn_cast<FusedLoc>(loc)) {
      for (Location inner : fused.getLocations())
        if (int64_t layer = fromLoc(inner); layer >= 0)
          return layer;
      return -1;
    }
    if (auto named = dyn_cast<NameLoc>(loc))
      return transformerLayerOfName(named.getName().getValue());
    return -1;
  };
  return fromLoc(op->getLoc());
}

void mlir::dsc::inheritTransformerLayer(Operation *source, Operation *created) {
  Attribute mark = source->getAttr(kLayerAttr);
  if (mark && !created->hasAttr(kLayerAttr))
    created->setAttr(kLayerAttr, mark);
}

void mlir::dsc::inheritTransformerLayer(Operation *source,
                                        Block::iterator begin,
                                        Block::iterator end) {
  for (Operation &created : llvm::make_range(begin, end))
    inheritTransformerLayer(source, &created);
}

bool mlir::dsc::isRematerialized(Operation *op) {
  return op && isa<GetParameterOp, arith::ConstantOp>(op);
}
