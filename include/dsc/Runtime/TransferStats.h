//===- TransferStats.h - Bytes and time moved between tiers -----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The counters of a plan's Transfer instructions, by source and destination
// tier, that dsc-run prints as offload bandwidth (docs/offload.md).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_TRANSFERSTATS_H
#define DSC_RUNTIME_TRANSFERSTATS_H

#include <cstdint>

namespace dsc::rt {

/// Indexed [from][to] by Tier's values (device, host, nvme).
struct TransferStats {
  uint64_t bytes[3][3] = {};
  double seconds[3][3] = {};
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_TRANSFERSTATS_H
