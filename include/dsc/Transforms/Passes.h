//===- Passes.h - dsc passes ------------------------------------*- C++ -*-===//
//
// Declarations and registration of the dsc passes (generated from
// Passes.td).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TRANSFORMS_PASSES_H
#define DSC_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir::dsc {

#define GEN_PASS_DECL
#include "dsc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dsc/Transforms/Passes.h.inc"

} // namespace mlir::dsc

#endif // DSC_TRANSFORMS_PASSES_H
