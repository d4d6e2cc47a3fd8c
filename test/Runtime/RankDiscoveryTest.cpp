//===- RankDiscoveryTest.cpp - launcher variables and their precedence ----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The environments launchers make (mpirun, srun with and without PMI, srun
// starting mpirun's daemons, torchrun, a shell's stale export): which one
// decides, and that disagreements and launches MPI cannot join are refused
// with the variables named.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/RankDiscovery.h"

#include "dsc/Runtime/Error.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

using namespace dsc::rt;

namespace {

/// An environment of exactly `vars`.
Environment envOf(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char *name) -> const char * {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

/// discoverLaunch's Error text ("" when it succeeds).
std::string errorOf(std::map<std::string, std::string> vars) {
  try {
    discoverLaunch(envOf(std::move(vars)));
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(RankDiscovery, AloneIsOneProcess) {
  const Launch launch = discoverLaunch(envOf({}));
  EXPECT_FALSE(launch.mpi);
  EXPECT_EQ(launch.rank, 0);
  EXPECT_EQ(launch.size, 1);
  // torchrun's one-process world, and a Slurm batch script (no step).
  EXPECT_FALSE(discoverLaunch(envOf({{"RANK", "0"}, {"WORLD_SIZE", "1"}})).mpi);
  EXPECT_FALSE(
      discoverLaunch(envOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}}))
          .mpi);
}

TEST(RankDiscovery, MpirunDecides) {
  const Launch launch = discoverLaunch(
      envOf({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}}));
  EXPECT_TRUE(launch.mpi);
  EXPECT_EQ(launch.source, "Open MPI");
  EXPECT_EQ(launch.rank, 3);
  EXPECT_EQ(launch.size, 4);
}

TEST(RankDiscovery, SrunWithPmixAgreesWithSlurm) {
  const Launch launch = discoverLaunch(envOf({{"PMIX_RANK", "1"},
                                              {"SLURM_PROCID", "1"},
                                              {"SLURM_NTASKS", "2"},
                                              {"SLURM_STEP_ID", "0"}}));
  EXPECT_TRUE(launch.mpi);
  EXPECT_EQ(launch.source, "PMIx");
  EXPECT_EQ(launch.rank, 1);
}

TEST(RankDiscovery, SlurmIsNotComparedUnderMpirun) {
  // mpirun inside a Slurm job: its daemons are srun tasks, and rank 5
  // inherits daemon 1's SLURM_PROCID.
  const Launch launch = discoverLaunch(envOf({{"OMPI_COMM_WORLD_RANK", "5"},
                                              {"OMPI_COMM_WORLD_SIZE", "8"},
                                              {"SLURM_PROCID", "1"},
                                              {"SLURM_NTASKS", "2"},
                                              {"SLURM_STEP_ID", "0"}}));
  EXPECT_EQ(launch.rank, 5);
}

TEST(RankDiscovery, DisagreementsNameBothConventions) {
  EXPECT_EQ(errorOf({{"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "4"},
                     {"RANK", "2"},
                     {"WORLD_SIZE", "4"}}),
            "the launchers' variables disagree: Open MPI "
            "(OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=4) makes this "
            "process rank 1 of 4, torchrun (RANK=2 WORLD_SIZE=4) rank 2 of 4; "
            "unset the stale ones (an outer launcher's, or a shell's export)");
  EXPECT_NE(errorOf({{"OMPI_COMM_WORLD_RANK", "0"},
                     {"OMPI_COMM_WORLD_SIZE", "4"},
                     {"PMI_RANK", "0"},
                     {"PMI_SIZE", "2"}})
                .find("PMI (PMI_RANK=0 PMI_SIZE=2) rank 0 of 2"),
            std::string::npos);
}

TEST(RankDiscovery, MultiProcessLaunchWithoutMpiNeedsMasterAddrAndPort) {
  EXPECT_EQ(errorOf({{"RANK", "2"}, {"WORLD_SIZE", "4"}}),
            "torchrun (RANK=2 WORLD_SIZE=4) starts this process as rank 2 of "
            "4 without MPI, and MASTER_ADDR and MASTER_PORT are not both "
            "set: set them to rank 0's host and a free port for the ranks to "
            "meet through a TCP store (as torchrun does), or start them with "
            "mpirun, dsc-launch or srun --mpi=pmix; unset RANK to run one "
            "process");
  EXPECT_NE(errorOf({{"SLURM_PROCID", "1"},
                     {"SLURM_NTASKS", "2"},
                     {"SLURM_STEP_ID", "7"},
                     {"MASTER_ADDR", "node1"}})
                .find("Slurm (SLURM_PROCID=1 SLURM_NTASKS=2) starts this "
                      "process as rank 1 of 2 without MPI, and MASTER_ADDR "
                      "and MASTER_PORT are not both set"),
            std::string::npos);
  EXPECT_EQ(errorOf({{"RANK", "1"},
                     {"WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "node1"},
                     {"MASTER_PORT", "70000"}}),
            "MASTER_PORT='70000' is not a TCP port (1-65535)");
  // Under torchrun itself the port is its agent's store, not ours.
  EXPECT_EQ(errorOf({{"RANK", "1"},
                     {"WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "node1"},
                     {"MASTER_PORT", "29500"},
                     {"TORCHELASTIC_USE_AGENT_STORE", "True"}}),
            "TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent serves "
            "torch.distributed's TCPStore at MASTER_ADDR:MASTER_PORT "
            "(node1:29500), whose protocol dsc-run's store does not speak; "
            "start the ranks without torchrun, with RANK, WORLD_SIZE, "
            "MASTER_ADDR and MASTER_PORT set (docs/multi-node.md), or with "
            "mpirun or dsc-launch");
}

TEST(RankDiscovery, TorchrunAndSlurmMeetThroughTheTcpStore) {
  Launch launch = discoverLaunch(envOf({{"RANK", "3"},
                                        {"WORLD_SIZE", "4"},
                                        {"MASTER_ADDR", "10.0.0.1"},
                                        {"MASTER_PORT", "29500"}}));
  EXPECT_FALSE(launch.mpi);
  EXPECT_TRUE(launch.tcp);
  EXPECT_EQ(launch.rank, 3);
  EXPECT_EQ(launch.size, 4);
  EXPECT_EQ(launch.source, "torchrun");
  EXPECT_EQ(launch.masterAddr, "10.0.0.1");
  EXPECT_EQ(launch.masterPort, 29500);
  launch = discoverLaunch(envOf({{"SLURM_PROCID", "1"},
                                 {"SLURM_NTASKS", "2"},
                                 {"SLURM_STEP_ID", "7"},
                                 {"MASTER_ADDR", "node1"},
                                 {"MASTER_PORT", "12345"}}));
  EXPECT_TRUE(launch.tcp);
  EXPECT_EQ(launch.source, "Slurm");
  EXPECT_EQ(launch.rank, 1);
  // One process with MASTER_ADDR set (torchrun --nproc-per-node 1) is alone.
  launch = discoverLaunch(envOf({{"RANK", "0"},
                                 {"WORLD_SIZE", "1"},
                                 {"MASTER_ADDR", "node1"},
                                 {"MASTER_PORT", "12345"}}));
  EXPECT_FALSE(launch.tcp);
  EXPECT_EQ(launch.size, 1);
}

TEST(RankDiscovery, BadValuesNameTheVariable) {
  EXPECT_EQ(errorOf({{"RANK", "two"}, {"WORLD_SIZE", "4"}}),
            "RANK='two' is not a non-negative integer");
  EXPECT_EQ(
      errorOf({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}),
      "Open MPI (OMPI_COMM_WORLD_RANK=4 OMPI_COMM_WORLD_SIZE=4) puts "
      "rank 4 outside a world of 4");
  EXPECT_EQ(errorOf({{"WORLD_SIZE", "0"}}),
            "WORLD_SIZE=0: a world has at least one rank");
}

TEST(RankDiscovery, MpiHasTheLastWord) {
  const Launch launch = discoverLaunch(
      envOf({{"PMIX_RANK", "1"}, {"RANK", "1"}, {"WORLD_SIZE", "4"}}));
  EXPECT_NO_THROW(checkLaunchAgainstMpi(launch, 1, 4));
  try {
    checkLaunchAgainstMpi(launch, 1, 2);
    FAIL() << "a world of 2 passed against WORLD_SIZE=4";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(),
                 "MPI made this process rank 1 of 2, but torchrun (RANK=1 "
                 "WORLD_SIZE=4) says rank 1 of 4; unset the stale variables "
                 "(an outer launcher's, or a shell's export)");
  }
}
