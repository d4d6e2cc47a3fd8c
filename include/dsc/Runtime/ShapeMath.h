//===- ShapeMath.h - Element counts and shape text --------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The shape arithmetic every runtime library needs, header-only so that the
// libraries below the executor (the checkpoint format, which the model
// import links without the executor) share it instead of copying it.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_SHAPEMATH_H
#define DSC_RUNTIME_SHAPEMATH_H

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace dsc::rt {

/// Largest rank of a plan's buffer: the layout kernels (CPU and CUDA) keep
/// shapes and permutations in fixed arrays of this size.
constexpr int kMaxRank = 8;

/// Product of the dims (1 for a scalar); -1 on a negative dim or overflow.
inline int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d != 0 && n > std::numeric_limits<int64_t>::max() / d))
      return -1;
    n *= d;
  }
  return n;
}

/// "[4, 64, 256]".
inline std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace dsc::rt

#endif // DSC_RUNTIME_SHAPEMATH_H
