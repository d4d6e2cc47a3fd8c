//===- ReduceOp.h - How a collective combines its ranks' values -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The reduction a plan's collective names (AllReduce, ReduceScatter, ...),
// on its own so that the plan library (its verifier prints and compares
// them) needs no communicator, and the communicators take the same values.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_REDUCEOP_H
#define DSC_RUNTIME_REDUCEOP_H

#include <cstdint>

namespace dsc::rt {

enum class ReduceOp : uint32_t { Sum = 0, Avg = 1, Max = 2, Min = 3 };

/// "sum", "avg", "max", "min"; "unknown-op" for a value outside the enum
/// (read from an untrusted plan).
inline const char *reduceOpName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Avg:
    return "avg";
  case ReduceOp::Max:
    return "max";
  case ReduceOp::Min:
    return "min";
  }
  return "unknown-op";
}

} // namespace dsc::rt

#endif // DSC_RUNTIME_REDUCEOP_H
