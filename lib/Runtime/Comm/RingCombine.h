//===- RingCombine.h - One step of a ring reduction -------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The arithmetic of a ring reduction step and the ring's chunking, shared by
// the communicators that run the ring themselves (threads, TCP), so that
// both reduce every element in the same order and agree bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_COMM_RINGCOMBINE_H
#define DSC_LIB_RUNTIME_COMM_RINGCOMBINE_H

#include "dsc/Runtime/DType.h"
#include "dsc/Runtime/ReduceOp.h"

#include <cstddef>
#include <utility>

namespace dsc::rt::detail {

/// dst = partial (op) own, then / divisor for Avg when divisor > 1 (the
/// last step of a ring reduction). The partial is always the left operand:
/// chunk c is summed as ((x[c+1] + x[c+2]) + ...) + x[c] on every rank.
/// `dst` may be `own` (in place). 16-bit types step in f32 and round back
/// (NCCL's ring numerics).
void combineBytes(char *dst, const char *partial, const char *own, size_t count,
                  DType dtype, ReduceOp op, int divisor);

/// Byte offset and length of chunk `k` when `count` elements are split into
/// `n` near-equal chunks (the first count % n one element longer), as
/// ringBytesSent assumes.
std::pair<size_t, size_t> chunkOf(size_t count, int n, int k, size_t esize);

} // namespace dsc::rt::detail

#endif // DSC_LIB_RUNTIME_COMM_RINGCOMBINE_H
