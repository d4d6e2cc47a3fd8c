//===- DType.h - Element types of plan buffers and messages -----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The runtime's element types, their names and their sizes: the one table
// that the plan, the communicators, checkpoints and the lowering read. A
// header of its own so that libraries below the plan (the communicators)
// share it without linking the plan library.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_DTYPE_H
#define DSC_RUNTIME_DTYPE_H

#include <cstdint>

namespace dsc::rt {

/// The values are the plan file's encoding: append, never renumber.
enum class DType : uint32_t { F32 = 0, F64 = 1, I32 = 2, BF16 = 3, F16 = 4 };

/// "f32", ...; "unknown dtype" for a value outside the enum.
constexpr const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::I32:
    return "i32";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  }
  return "unknown dtype";
}

/// Bytes per element; 0 for a value outside the enum, which callers that
/// read untrusted input (a plan, a checkpoint) treat as an error.
constexpr uint64_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F64:
    return 8;
  case DType::BF16:
  case DType::F16:
    return 2;
  }
  return 0;
}

} // namespace dsc::rt

#endif // DSC_RUNTIME_DTYPE_H
