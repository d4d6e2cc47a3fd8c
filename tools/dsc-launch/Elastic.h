//===- Elastic.h - Continuing a job on fewer ranks --------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// dsc-launch --elastic MIN:MAX (torchrun's --nnodes=MIN:MAX): after a rank
// is lost, the job continues on the largest world of at least MIN ranks
// that the surviving slots hold and the plan can shrink to. Only the
// data-parallel degree shrinks: dp' divides dp * microbatches, and each
// rank runs dp * microbatches / dp' micro-batches, so the global batch (and
// with it the samples per step, the data order and the learning-rate
// schedule) stays the run's; tp and pp are compiled into every rank's
// program and stay. dsc-run compiles the new plan, and its checkpoint
// loader reshards the last complete step into it.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_DSCLAUNCH_ELASTIC_H
#define DSC_TOOLS_DSCLAUNCH_ELASTIC_H

#include "Hostfile.h"
#include "Launcher.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::launch {

/// --elastic MIN:MAX.
struct ElasticRange {
  int min = 0, max = 0;
};

/// Parses "MIN:MAX" and checks it against the job's world (the plan's and
/// the slots'): 1 <= MIN <= MAX = world. Errors name --elastic.
llvm::Expected<ElasticRange> parseElastic(llvm::StringRef text, int world);

/// The plan as dsc-run resolves it (dsc-run ... --print-config): the mesh
/// and the micro-batches each data-parallel rank runs per step.
struct ElasticPlan {
  int64_t dp = 1, tp = 1, pp = 1, ep = 1, microBatches = 1;
  int64_t world() const { return dp * tp * pp; }
  /// "dp=4 tp=1 pp=1, 1 micro-batch per rank"
  std::string describe() const;
};

/// Reads the resolved plan from dsc-run's --print-config text.
llvm::Expected<ElasticPlan> parsePrintConfig(llvm::StringRef text);

/// The worlds `plan` can shrink to, largest first (its own world
/// included): dp' * tp * pp for every dp' dividing dp * microbatches that
/// ep divides.
std::vector<int64_t> shrinkableWorlds(const ElasticPlan &plan);

/// A smaller job: its plan and the slots it runs on.
struct Shrunk {
  ElasticPlan plan;
  Allocation hosts;
};

/// The largest of `worlds` (some of shrinkableWorlds(plan), largest
/// first) in [range.min, range.max] that `alive` holds in whole
/// tensor-parallel groups per host (the slots taken host by host, as the
/// ranks are placed). Errors say why none does.
llvm::Expected<Shrunk> shrinkTo(const ElasticPlan &plan,
                                const Allocation &alive, ElasticRange range,
                                llvm::ArrayRef<int64_t> worlds);

/// `plan` with dp' = world / (tp * pp) and the micro-batches that keep its
/// global batch; `world` must be one of shrinkableWorlds(plan).
ElasticPlan shrinkPlan(const ElasticPlan &plan, int64_t world);

/// `alive` without the slot that world rank `rank` of `used` ran on.
Allocation dropRankSlot(const Allocation &alive, const Allocation &used,
                        int rank);

/// dsc-run's arguments for `plan`: every --compile replaced by one whose
/// dp is the plan's, every --microbatches by the plan's count.
llvm::Expected<std::vector<std::string>>
shrinkRunArgs(llvm::ArrayRef<std::string> runArgs, const ElasticPlan &plan);

} // namespace dsc::launch

#endif // DSC_TOOLS_DSCLAUNCH_ELASTIC_H
