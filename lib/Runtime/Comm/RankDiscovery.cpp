//===- RankDiscovery.cpp - which rank a launcher made this process --------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/RankDiscovery.h"

#include "dsc/Runtime/Error.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

using namespace dsc::rt;

namespace {

/// One convention's variables: rank, size (null: none), whether MPI_Init
/// reads it, and a variable that must also be set for it to count.
struct Convention {
  const char *name, *rank, *size;
  bool mpi;
  const char *alsoSet;
};

constexpr Convention kConventions[] = {
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", true, nullptr},
    {"PMIx", "PMIX_RANK", nullptr, true, nullptr},
    {"PMI", "PMI_RANK", "PMI_SIZE", true, nullptr},
    {"MVAPICH", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", true, nullptr},
    // A task of an srun step; a batch script has SLURM_PROCID 0 and the
    // job's task count, and is one process.
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", false, "SLURM_STEP_ID"},
    {"torchrun", "RANK", "WORLD_SIZE", false, nullptr},
};

int64_t parseCount(const char *variable, const char *text) {
  char *end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (!*text || *end || errno || value < 0)
    throw Error(std::string(variable) + "='" + text +
                "' is not a non-negative integer");
  return int64_t(value);
}

std::string describe(const RankClaim &c) {
  return c.convention + " (" + c.variables + ")";
}

/// "rank 1 of 4", "rank 1", or "a rank of 4" for what a convention says.
std::string rankOf(int64_t rank, int64_t size) {
  if (rank < 0)
    return "a rank of " + std::to_string(size);
  return "rank " + std::to_string(rank) +
         (size >= 0 ? " of " + std::to_string(size) : std::string());
}

} // namespace

bool dsc::rt::mpiLauncherVariablesSet(const Environment &lookup) {
  const Environment env =
      lookup ? lookup : [](const char *name) { return std::getenv(name); };
  for (const Convention &c : kConventions)
    for (const char *name : {c.rank, c.size})
      if (c.mpi && name)
        if (const char *value = env(name); value && *value)
          return true;
  return false;
}

std::vector<RankClaim> dsc::rt::rankClaims(const Environment &lookup) {
  const Environment env =
      lookup ? lookup : [](const char *name) { return std::getenv(name); };
  std::vector<RankClaim> claims;
  auto get = [&](const char *name) -> const char * {
    const char *value = name ? env(name) : nullptr;
    return value && *value ? value : nullptr;
  };
  for (const Convention &c : kConventions) {
    const char *rank = get(c.rank), *size = get(c.size);
    if ((!rank && !size) || (c.alsoSet && !get(c.alsoSet)))
      continue;
    RankClaim claim;
    claim.convention = c.name;
    claim.mpi = c.mpi;
    if (rank) {
      claim.rank = parseCount(c.rank, rank);
      claim.variables = std::string(c.rank) + "=" + rank;
    }
    if (size) {
      claim.size = parseCount(c.size, size);
      if (claim.size == 0)
        throw Error(std::string(c.size) + "=0: a world has at least one rank");
      claim.variables += (claim.variables.empty() ? "" : " ") +
                         std::string(c.size) + "=" + size;
    }
    if (claim.rank >= 0 && claim.size >= 0 && claim.rank >= claim.size)
      throw Error(describe(claim) + " puts rank " + std::to_string(claim.rank) +
                  " outside a world of " + std::to_string(claim.size));
    claims.push_back(std::move(claim));
  }
  return claims;
}

Launch dsc::rt::discoverLaunch(const Environment &env) {
  Launch launch;
  launch.claims = rankClaims(env);
  const RankClaim *decider = nullptr;
  for (const RankClaim &c : launch.claims)
    if (c.mpi) {
      decider = &c;
      break;
    }
  launch.mpi = decider != nullptr;
  if (!decider)
    for (const RankClaim &c : launch.claims)
      if (c.size > 1 || c.rank > 0) {
        decider = &c;
        break;
      }
  if (!decider)
    return launch;
  // Every other convention must agree with the decider (Slurm's are a
  // daemon's under an MPI launcher: not compared there).
  for (const RankClaim &c : launch.claims) {
    if (&c == decider || (launch.mpi && c.convention == "Slurm"))
      continue;
    const bool rankDiffers =
        c.rank >= 0 && decider->rank >= 0 && c.rank != decider->rank;
    const bool sizeDiffers =
        c.size >= 0 && decider->size >= 0 && c.size != decider->size;
    if (rankDiffers || sizeDiffers)
      throw Error("the launchers' variables disagree: " + describe(*decider) +
                  " makes this process " +
                  rankOf(decider->rank, decider->size) + ", " + describe(c) +
                  " " + rankOf(c.rank, c.size) +
                  "; unset the stale ones (an outer launcher's, or a "
                  "shell's export)");
  }
  launch.rank = decider->rank;
  launch.size = decider->size;
  launch.source = decider->convention;
  if (launch.mpi)
    return launch;
  // Without MPI the ranks meet where torch.distributed's env:// meets them.
  const Environment lookup =
      env ? env : [](const char *name) { return std::getenv(name); };
  const char *addr = lookup("MASTER_ADDR"), *port = lookup("MASTER_PORT");
  if (!addr || !*addr || !port || !*port)
    throw Error(describe(*decider) + " starts this process as " +
                rankOf(decider->rank, decider->size) +
                " without MPI, and MASTER_ADDR and MASTER_PORT are not both "
                "set: set them to rank 0's host and a free port for the ranks "
                "to meet through a TCP store (as torchrun does), or start "
                "them with mpirun, dsc-launch or srun --mpi=pmix; unset " +
                decider->variables.substr(0, decider->variables.find('=')) +
                " to run one process");
  if (decider->rank < 0 || decider->size < 0)
    throw Error(describe(*decider) + " says " +
                rankOf(decider->rank, decider->size) +
                ": a launch without MPI needs both the rank and the world "
                "size");
  const int64_t portNumber = parseCount("MASTER_PORT", port);
  if (portNumber < 1 || portNumber > 65535)
    throw Error(std::string("MASTER_PORT='") + port +
                "' is not a TCP port (1-65535)");
  // torchrun's agent serves torch.distributed's own store at that port and
  // tells its workers so; dsc's store speaks another protocol.
  if (const char *agent = lookup("TORCHELASTIC_USE_AGENT_STORE");
      agent && std::string(agent) == "True")
    throw Error(std::string("TORCHELASTIC_USE_AGENT_STORE=True: torchrun's "
                            "agent serves torch.distributed's TCPStore at "
                            "MASTER_ADDR:MASTER_PORT (") +
                addr + ":" + port +
                "), whose protocol dsc-run's store does not speak; start the "
                "ranks without torchrun, with RANK, WORLD_SIZE, MASTER_ADDR "
                "and MASTER_PORT set (docs/multi-node.md), or with mpirun or "
                "dsc-launch");
  launch.tcp = true;
  launch.masterAddr = addr;
  launch.masterPort = int(portNumber);
  return launch;
}

void dsc::rt::checkLaunchAgainstMpi(const Launch &launch, int64_t rank,
                                    int64_t size) {
  for (const RankClaim &c : launch.claims) {
    if (c.convention == "Slurm")
      continue;
    const bool rankDiffers = c.rank >= 0 && c.rank != rank;
    const bool sizeDiffers = c.size >= 0 && c.size != size;
    if (rankDiffers || sizeDiffers)
      throw Error("MPI made this process rank " + std::to_string(rank) +
                  " of " + std::to_string(size) + ", but " + describe(c) +
                  " says " + rankOf(c.rank, c.size) +
                  "; unset the stale variables (an outer launcher's, or a "
                  "shell's export)");
  }
}
