//===- Shapes.h - shape arithmetic for checkpoint files ---------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The checkpoint code's names for the runtime's shape helpers (ShapeMath.h,
// header-only, so DscRuntimeCheckpoint links without the executor).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_CHECKPOINT_SHAPES_H
#define DSC_LIB_RUNTIME_CHECKPOINT_SHAPES_H

#include "dsc/Runtime/ShapeMath.h"

namespace dsc::rt::checkpoint {

/// Product of the dims (1 for a scalar); -1 on a negative dim or overflow.
inline int64_t elementCount(const std::vector<int64_t> &shape) {
  return numElements(shape);
}

/// "[4, 64, 256]".
inline std::string shapeText(const std::vector<int64_t> &shape) {
  return shapeString(shape);
}

} // namespace dsc::rt::checkpoint

#endif // DSC_LIB_RUNTIME_CHECKPOINT_SHAPES_H
