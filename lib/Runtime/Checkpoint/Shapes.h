//===- Shapes.h - shape arithmetic for checkpoint files ---------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// numElements and shapeString as Plan.h declares them, here again because
// DscRuntimeCheckpoint sits below DscRuntimeCore (which defines those) and
// must link without it (the model import, the format's tests).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_CHECKPOINT_SHAPES_H
#define DSC_LIB_RUNTIME_CHECKPOINT_SHAPES_H

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace dsc::rt::checkpoint {

/// Product of the dims (1 for a scalar); -1 on a negative dim or overflow.
inline int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d != 0 && n > std::numeric_limits<int64_t>::max() / d))
      return -1;
    n *= d;
  }
  return n;
}

/// "[4, 64, 256]".
inline std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace dsc::rt::checkpoint

#endif // DSC_LIB_RUNTIME_CHECKPOINT_SHAPES_H
