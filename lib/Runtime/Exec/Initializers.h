//===- Initializers.h - A plan's buffers' initial values --------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Each buffer's initializer (Buffer::init) drawn on the host and copied in,
// so every backend starts from the same bits: Normal draws N(0, std^2) from
// a counter-based generator keyed by (seed, FNV-1a of the buffer's name,
// element index), so the values do not depend on the thread count, the
// buffer order, the arena layout or how a parameter is sharded.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_EXEC_INITIALIZERS_H
#define DSC_LIB_RUNTIME_EXEC_INITIALIZERS_H

#include "Arenas.h"

#include <cstdint>
#include <vector>

namespace dsc::rt {

/// Writes every buffer's initial values (those not zeros: the arenas start
/// zeroed) for the rank at mesh coordinates `coords`.
void writeInitialValues(const Plan &plan, const std::vector<int64_t> &coords,
                        uint64_t seed, Arenas &arenas);

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_EXEC_INITIALIZERS_H
