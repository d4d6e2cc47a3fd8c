//===- RankDiscovery.h - which rank a launcher made this process -*- C++
//-*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Users start ranks with the launcher they know, and each launcher says in
// the environment which rank a process is: Open MPI's mpirun
// (OMPI_COMM_WORLD_RANK/SIZE), PMIx and PMI launchers (PMIX_RANK,
// PMI_RANK/PMI_SIZE: srun --mpi=pmix, MPICH's hydra, Intel MPI), MVAPICH
// (MV2_COMM_WORLD_RANK/SIZE), Slurm's srun (SLURM_PROCID/SLURM_NTASKS in a
// job step) and torchrun (RANK/WORLD_SIZE). An MPI launcher's variables
// decide and the others must agree with them. A multi-process launch
// without MPI (torchrun, ranks started by hand, srun without PMI) meets
// through a TCP store at MASTER_ADDR:MASTER_PORT (TcpStore.h), as
// torch.distributed's env:// does; without those two it is refused by name
// rather than trained N times alone.
//
// Slurm's variables are not compared when an MPI launcher's are present:
// mpirun inside a Slurm job starts its daemons as srun tasks, and its
// ranks inherit a daemon's SLURM_PROCID, which is not theirs.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_RANKDISCOVERY_H
#define DSC_RUNTIME_RANKDISCOVERY_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dsc::rt {

/// What one launcher convention says about this process; -1 where it says
/// nothing (PMIx sets no world size).
struct RankClaim {
  /// "Open MPI", "PMIx", "PMI", "MVAPICH", "Slurm", "torchrun".
  std::string convention;
  /// Its variables, for messages: "OMPI_COMM_WORLD_RANK=1 ...".
  std::string variables;
  int64_t rank = -1, size = -1;
  /// A convention MPI_Init reads (the process is an MPI rank).
  bool mpi = false;
};

/// Looks up an environment variable (null when unset); getenv by default.
using Environment = std::function<const char *(const char *)>;

/// Whether a variable of an MPI launcher's convention is set (whatever its
/// value): launchedByMpi().
bool mpiLauncherVariablesSet(const Environment &env = nullptr);

/// The conventions whose variables are set, MPI's first. A value that is
/// not a non-negative integer, or a rank outside its size, is an Error
/// naming the variable.
std::vector<RankClaim> rankClaims(const Environment &env);

/// How this process was launched.
struct Launch {
  /// Started as an MPI rank: dsc-run joins the MPI world.
  bool mpi = false;
  /// The rank and world size the deciding convention claims (0 and 1 for
  /// a process started alone; -1 where an MPI launcher leaves it to
  /// MPI_Init).
  int64_t rank = 0, size = 1;
  /// The deciding convention, or "" for a process started alone.
  std::string source;
  /// Several processes without MPI: they meet through the TCP store at
  /// MASTER_ADDR:MASTER_PORT.
  bool tcp = false;
  std::string masterAddr;
  int masterPort = 0;
  std::vector<RankClaim> claims;
};

/// The launch, checked: conventions that disagree on the rank or the world
/// size, and a multi-process launch with neither MPI nor MASTER_ADDR and
/// MASTER_PORT, are Errors that name the variables and what to do.
Launch discoverLaunch(const Environment &env = nullptr);

/// After MPI_Init: MPI's own rank and size must be what every launcher
/// variable claims; an Error names the one that does not.
void checkLaunchAgainstMpi(const Launch &launch, int64_t rank, int64_t size);

} // namespace dsc::rt

#endif // DSC_RUNTIME_RANKDISCOVERY_H
