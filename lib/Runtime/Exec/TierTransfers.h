//===- TierTransfers.h - Moves between device, host and NVMe ----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The plan's Transfer instructions: a copy between two memory arenas, or a
// read or write of an nvme arena's file. Those between a file and host
// memory may run on the NVMe lane, a host thread beside compute, so a
// swap-in overlaps the update before it (the prefetch the compiler placed).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_EXEC_TIERTRANSFERS_H
#define DSC_LIB_RUNTIME_EXEC_TIERTRANSFERS_H

#include "Arenas.h"
#include "MeshGroups.h"

#include "dsc/Runtime/CommLane.h"
#include "dsc/Runtime/TransferStats.h"

#include <cstdint>
#include <memory>

namespace dsc::rt {

class TierTransfers {
public:
  /// Starts the NVMe lane when the plan has an nvme arena.
  TierTransfers(const Plan &plan, Arenas &arenas, Backend &backend,
                const MeshGroups &mesh);

  /// Whether Transfer `index` of `prog` moves between a file and host
  /// memory, so it may run on the lane.
  bool onLane(const Program &prog, size_t index) const;
  /// Queues such a transfer on the lane; returns its ticket.
  uint64_t launch(const Program &prog, size_t index);
  /// Waits for the lane's work through `ticket`, or all of it; rethrows
  /// its first failure. No-ops without a lane.
  void wait(uint64_t ticket);
  void waitAll();
  /// Runs Transfer `index` of `prog` in place, after what was issued.
  void run(const Program &prog, size_t index);

  const TransferStats &stats() const { return totals; }

private:
  const Plan &plan;
  Arenas &arenas;
  Backend &backend;
  const MeshGroups &mesh;
  std::unique_ptr<CommLane> lane;
  TransferStats totals;
};

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_EXEC_TIERTRANSFERS_H
