//===- MeshGroups.h - A rank's place on the mesh and its groups -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The world against the plan's mesh: this rank's coordinates, and one group
// communicator per distinct `axes` mask the plan's collectives, transfers
// and pipeline use, split at construction (every rank constructs its
// executor, so the splits match) from the backend's world when it has one.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_EXEC_MESHGROUPS_H
#define DSC_LIB_RUNTIME_EXEC_MESHGROUPS_H

#include "dsc/Runtime/Backend.h"
#include "dsc/Runtime/Communicator.h"
#include "dsc/Runtime/Plan.h"

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace dsc::rt {

class MeshGroups {
public:
  /// Throws Error unless `world` fits the plan's mesh: exactly its ranks, or
  /// none or one rank for a plan without a mesh.
  static void checkWorld(const Plan &plan, const Communicator *world);
  /// Splits the groups (a collective call every rank makes).
  MeshGroups(const Plan &plan, Communicator *world, Backend &backend);
  /// Frees the groups before the backend's world they were split from.
  ~MeshGroups();
  MeshGroups(const MeshGroups &) = delete;
  MeshGroups &operator=(const MeshGroups &) = delete;

  /// The world communicator (null for a one-rank plan run without one).
  Communicator *world() const { return worldComm; }
  int worldRank() const { return worldComm ? worldComm->rank() : 0; }
  int worldSize() const { return worldComm ? worldComm->size() : 1; }
  /// This rank's coordinates on the mesh (empty without a mesh).
  const std::vector<int64_t> &coordinates() const { return coords; }
  /// The group of the ranks differing from this one only on `axes`, or null
  /// when no instruction of the plan uses that mask.
  Communicator *group(int64_t axes) const;
  /// group(axes) for instruction `index` of `prog`; Error naming it when
  /// the mask was not split.
  Communicator &require(const Program &prog, size_t index, int64_t axes) const;
  /// Whether there are groups and each may be called from any thread.
  bool callableFromAnyThread() const;
  /// The groups' counters, summed.
  CommStats stats() const;

  /// This rank's coordinate on "pp" (its first stage), -1 without stages,
  /// and the pp group.
  int64_t stage() const { return stageIndex; }
  Communicator &pipelineGroup() const { return *group(ppMask); }
  /// This rank's index in the data-parallel group (dataParallelPlace), 0
  /// without one.
  int64_t dataParallelIndex() const;

private:
  const Plan &plan;
  Backend &backend;
  Communicator *worldComm = nullptr;
  /// The backend's world (NCCL over `worldComm`), when it has one.
  std::unique_ptr<Communicator> backendWorld;
  std::vector<int64_t> coords;
  std::map<int64_t, std::unique_ptr<Communicator>> groups;
  int64_t stageIndex = -1;
  int64_t ppMask = 0;
};

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_EXEC_MESHGROUPS_H
