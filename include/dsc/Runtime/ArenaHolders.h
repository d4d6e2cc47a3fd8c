//===- ArenaHolders.h - Which pipeline ranks allocate an arena --*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A pipelined plan's arena belongs to one pipeline rank (Arena::pipelineRank)
// or is shared (-1). A shared arena is allocated by the ranks whose stages'
// programs use a buffer in it: the compiler plans what some ranks but not
// all name (a tied embedding's parameter and Adam moments, read by the first
// and the last stage) in an arena of its own, so the ranks between them hold
// none of it. One rule for the allocator, the fit check and the log.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_ARENAHOLDERS_H
#define DSC_RUNTIME_ARENAHOLDERS_H

#include "dsc/Runtime/Plan.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dsc::rt {

/// holders[a][r]: whether pipeline rank r (the coordinate on the mesh axis
/// "pp") allocates arena a. Its own arenas; a shared one when a program of
/// one of its stages names a buffer in it, or when a program of no stage
/// does or no program does (then every rank, as a shared arena always
/// was). A plan without stages has one "rank", holding everything.
std::vector<std::vector<bool>> arenaHolders(const Plan &plan);

/// The pipeline rank that runs each stage's programs (stage k's on rank
/// k mod P, P = Plan::pipelineRanks() > 0), a curriculum's other lengths'
/// stages included; programs of no stage are absent.
std::map<std::string, int64_t> pipelineRankOfPrograms(const Plan &plan);

} // namespace dsc::rt

#endif // DSC_RUNTIME_ARENAHOLDERS_H
