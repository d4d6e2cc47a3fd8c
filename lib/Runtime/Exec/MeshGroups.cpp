//===- MeshGroups.cpp - A rank's place on the mesh and its groups ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Splitting the plan's groups from the world, in one order on every rank.
//
//===----------------------------------------------------------------------===//

#include "MeshGroups.h"

#include "dsc/Runtime/Instructions.h"

#include <set>
#include <string>

using namespace dsc::rt;

void MeshGroups::checkWorld(const Plan &plan, const Communicator *world) {
  const int64_t meshSize = meshRanks(plan.mesh);
  if (plan.mesh.empty()) {
    if (world && world->size() != 1)
      throw Error("the plan has no mesh (it runs on one rank) but the "
                  "communicator has " +
                  std::to_string(world->size()) + " ranks");
  } else if (!world) {
    throw Error("the plan's mesh " + meshString(plan.mesh) + " needs " +
                std::to_string(meshSize) +
                " ranks, but the executor was given no communicator");
  } else if (world->size() != meshSize) {
    throw Error("the plan's mesh " + meshString(plan.mesh) + " needs " +
                std::to_string(meshSize) + " ranks, but the communicator has " +
                std::to_string(world->size()));
  }
}

MeshGroups::MeshGroups(const Plan &plan, Communicator *world, Backend &backend)
    : plan(plan), backend(backend), worldComm(world) {
  if (plan.mesh.empty())
    return;
  coords = meshCoordinates(plan.mesh, world->rank());
  // A device backend's collectives move its memory: split its world.
  backendWorld = backend.makeWorld(*world);
  Communicator *splitFrom = backendWorld ? backendWorld.get() : world;
  // Every rank has the same plan, so every rank splits the same masks in
  // the same (ascending) order, as split's collective contract needs.
  std::set<int64_t> masks;
  // A pipeline's stages exchange activations over the pp group.
  if (!plan.stages.empty()) {
    const int64_t axis = findMeshAxis(plan.mesh, "pp");
    ppMask = int64_t(1) << axis;
    stageIndex = coords[axis];
    masks.insert(ppMask);
  }
  for (const Program &prog : plan.programs)
    for (const Instruction &inst : prog.instructions)
      if (int64_t mask = groupAxesOf(inst))
        masks.insert(mask);
      else if (inst.opcode == Opcode::Transfer &&
               ops::Transfer::decode(inst).axes != 0)
        masks.insert(ops::Transfer::decode(inst).axes); // a chunk's index
  for (int64_t mask : masks) {
    // The color numbers the rank's coordinates on the axes outside the
    // mask (row-major); ranks agreeing there form one group, ordered by
    // world rank.
    int64_t color = 0;
    for (size_t a = 0; a < plan.mesh.size(); ++a)
      if (!(mask >> a & 1))
        color = color * plan.mesh[a].size + coords[a];
    std::unique_ptr<Communicator> group =
        splitFrom->split(int(color), splitFrom->rank());
    if (!group)
      throw Error("splitting the group of mesh axes mask " +
                  std::to_string(mask) + " returned no communicator");
    groups[mask] = std::move(group);
  }
}

MeshGroups::~MeshGroups() {
  // The groups were split from the backend's world: free them first.
  groups.clear();
  backend.forgetWorld();
  backendWorld.reset();
}

Communicator *MeshGroups::group(int64_t axes) const {
  auto it = groups.find(axes);
  return it == groups.end() ? nullptr : it->second.get();
}

Communicator &MeshGroups::require(const Program &prog, size_t index,
                                  int64_t axes) const {
  Communicator *comm = group(axes);
  if (!comm)
    throw instructionError(
        prog, index, "no group for mesh axes mask " + std::to_string(axes));
  return *comm;
}

bool MeshGroups::callableFromAnyThread() const {
  // MPI initialized for one thread only may not be called from a lane.
  bool can = worldComm && !groups.empty();
  for (const auto &[mask, comm] : groups)
    can = can && comm->callableFromAnyThread();
  return can;
}

CommStats MeshGroups::stats() const {
  CommStats total;
  for (const auto &[mask, comm] : groups)
    total += comm->stats();
  return total;
}

int64_t MeshGroups::dataParallelIndex() const {
  return dataParallelPlace(plan.mesh, coords).index;
}
