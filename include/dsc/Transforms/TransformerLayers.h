//===- TransformerLayers.h - which transformer layer an op is in -*- C++
//-*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The importers mark every op of transformer layer i with `dsc.layer = i`
// (an attribute, so that it survives printing without debug locations) and
// name its parameters `h.i.<part>.<weight>`; the passes that create ops for
// an op of a layer give them its mark (where they give them its location),
// and the passes that work layer by layer (the pipeline cut, activation
// recompute) read the layer by this one rule. Hand-written IR may instead
// name its ops `h.i.<part>` with name locations.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TRANSFORMS_TRANSFORMERLAYERS_H
#define DSC_TRANSFORMS_TRANSFORMERLAYERS_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::dsc {

/// The transformer layer of a dotted name (`h.3.mlp.fc` -> 3), or -1.
int64_t transformerLayerOfName(llvm::StringRef name);

/// The transformer layer `op` belongs to: its `dsc.layer`, else for a
/// parameter read the parameter's name, else its `h.<i>` name location;
/// -1 when none says.
int64_t transformerLayerOf(Operation *op);

/// Gives `created`, made for `source`, the layer mark of `source` (none when
/// `source` has none; a mark `created` already has stays).
void inheritTransformerLayer(Operation *source, Operation *created);

/// The same for every op of [begin, end).
void inheritTransformerLayer(Operation *source, Block::iterator begin,
                             Block::iterator end);

/// Ops a pass re-creates where it needs them instead of keeping their
/// value: parameter reads and constants.
bool isRematerialized(Operation *op);

} // namespace mlir::dsc

#endif // DSC_TRANSFORMS_TRANSFORMERLAYERS_H
