//===- Launcher.h - Ranks on hosts and their launch commands ----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What dsc-launch decides once the allocation is known: the plan's mesh
// read from dsc-run's --compile, checked against the slots before anything
// starts (world size, tensor-parallel groups inside a host); each rank's
// host, local rank and mesh coordinates; and the mpirun, srun or ssh
// command lines that start dsc-run on every slot.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_DSCLAUNCH_LAUNCHER_H
#define DSC_TOOLS_DSCLAUNCH_LAUNCHER_H

#include "Hostfile.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dsc::launch {

/// The mesh that dsc-run's arguments ask for, when they say it.
struct PlanMesh {
  /// False when the arguments carry no mesh dsc-launch can read (no
  /// --compile, plan=auto): `note` says why and dsc-run checks at start.
  bool known = false;
  int64_t dp = 1, tp = 1, pp = 1, ep = 1;
  /// The mesh axes as written ("dp=2 tp=2").
  std::string text;
  std::string note;
  /// The axes a GPT-NeoX config set ("tp=2 from gpt.yml's
  /// model_parallel_size"), empty when --compile gave them all.
  std::string sources;
  /// dsc-run's --np, when given.
  std::optional<int64_t> np;

  int64_t ranks() const { return dp * tp * pp; }
};

/// Reads the mesh from dsc-run's arguments (`runArgs[0]` is the program):
/// --compile's axes, over a GPT-NeoX config MODEL's model_parallel_size,
/// pipe_parallel_size and moe_expert_parallel_size, as dsc-run layers
/// them; and --np. Errors on a --compile string the plan parser refuses.
llvm::Expected<PlanMesh> readPlanMesh(llvm::ArrayRef<std::string> runArgs);

/// Refuses a plan that the allocation cannot run, naming the numbers: a
/// world size that is not dp*tp*pp (or dsc-run's --np), ep not dividing
/// dp, and a host whose slots do not hold whole tensor-parallel groups.
llvm::Error checkPlan(const PlanMesh &mesh, const Allocation &hosts);

/// One rank: where it runs and its mesh coordinates.
struct RankPlace {
  int rank = 0;
  int host = 0; // index into the allocation
  int localRank = 0;
  int slot = 0; // the device index on its host
  int64_t dp = 0, tp = 0, pp = 0;
};

/// Ranks host by host, consecutive ranks on one host (what mpirun's
/// --map-by slot and srun's block distribution do), with the coordinates
/// of ParallelPlan.h's order: rank = tp + tp * (dp + dp * pp).
std::vector<RankPlace> placeRanks(const PlanMesh &mesh,
                                  const Allocation &hosts);

void printRankTable(llvm::raw_ostream &os, const PlanMesh &mesh,
                    const Allocation &hosts, llvm::ArrayRef<RankPlace> ranks);

/// What every launcher needs besides the allocation.
struct LaunchOptions {
  std::string masterAddr;
  int masterPort = 29500;
  /// Extra words for mpirun/srun/ssh (DeepSpeed's --launcher_args).
  std::vector<std::string> launcherArgs;
  /// dsc-run and its arguments.
  std::vector<std::string> runArgs;
  /// Which restart this launch is (--max-restarts), passed to the ranks as
  /// torchrun's TORCHELASTIC_RESTART_COUNT; unset without --max-restarts,
  /// so the commands stay as they were.
  std::optional<int> restartCount;
  /// Where a rank's watch writes the world rank that died
  /// (DSC_DEAD_RANK_FILE), so that a restart knows the slot it lost.
  std::string deadRankFile;
};

/// The Open MPI hostfile text ("host slots=N" per host in use).
std::string openMpiHostfile(const Allocation &hosts);

/// mpirun -n W --hostfile `hostfile` --map-by slot ... dsc-run ...
std::vector<std::string> openMpiCommand(const Allocation &hosts,
                                        const LaunchOptions &options,
                                        llvm::StringRef hostfile);

/// srun --nodes=N --ntasks=W --ntasks-per-node=S --nodelist=... dsc-run ...;
/// errors when hosts have different slot counts (srun spreads tasks
/// evenly).
llvm::Expected<std::vector<std::string>>
slurmCommand(const Allocation &hosts, const LaunchOptions &options);

/// One ssh command per host, each starting that host's ranks with the
/// torchrun environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
/// NODE_RANK, MASTER_ADDR, MASTER_PORT, CUDA_VISIBLE_DEVICES), under which
/// dsc-run's ranks meet through its TCP store; each exits with the largest
/// of its ranks' statuses.
std::vector<std::vector<std::string>> sshCommands(const Allocation &hosts,
                                                  const LaunchOptions &options,
                                                  llvm::StringRef workingDir);

/// `word` as a POSIX shell reads it back: bare when it is plain, else in
/// single quotes.
std::string shellQuote(llvm::StringRef word);
std::string shellJoin(llvm::ArrayRef<std::string> words);

} // namespace dsc::launch

#endif // DSC_TOOLS_DSCLAUNCH_LAUNCHER_H
