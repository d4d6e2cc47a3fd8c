//===- TransformerLayers.h - which transformer layer an op is in -*- C++
//-*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The importers name every op of transformer layer i `h.i.<part>` (a name
// location) and its parameters `h.i.<part>.<weight>`; the passes that work
// layer by layer (the pipeline cut, activation recompute) read the layer
// from there, by this one rule.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TRANSFORMS_TRANSFORMERLAYERS_H
#define DSC_TRANSFORMS_TRANSFORMERLAYERS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::dsc {

/// The transformer layer of a dotted name (`h.3.mlp.fc` -> 3), or -1.
int64_t transformerLayerOfName(llvm::StringRef name);

/// The transformer layer `op` belongs to, from its name location, or for a
/// parameter read from the parameter's name (which survives printing
/// without debug locations), or -1.
int64_t transformerLayerOf(Operation *op);

/// Ops a pass re-creates where it needs them instead of keeping their
/// value: parameter reads and constants.
bool isRematerialized(Operation *op);

} // namespace mlir::dsc

#endif // DSC_TRANSFORMS_TRANSFORMERLAYERS_H
