//===- RunPlan.h - dsc-run's driver: load a plan and train ------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The runtime half of dsc-run as a library, so tests drive it in-process:
// loadPlan (the one place that will also compile a graph-level .mlir input),
// runPlan (data, executor, training loop, log/JSON/trace output) and
// dscRunMain (argv in, exit code out, never an escaping exception).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_DSCRUN_RUNPLAN_H
#define DSC_TOOLS_DSCRUN_RUNPLAN_H

#include "RunOptions.h"

#include "dsc/Runtime/Communicator.h"
#include "dsc/Runtime/Plan.h"

#include <functional>
#include <iosfwd>
#include <vector>

namespace dsc::run {

/// Reads the plan file `input` names.
rt::Plan loadPlan(const std::string &input);

/// What a run did (world rank 0's view), for tests.
struct RunResult {
  /// Per step, mean over its micro-batches and over the ranks.
  std::vector<double> losses;
  std::vector<uint64_t> allocatedBytesPerArena;
  /// Per step, bytes rank 0 sent in the plan's collectives.
  std::vector<uint64_t> collectiveBytesPerStep;
};

/// Test hooks.
struct RunHooks {
  /// Called on every rank before each step (a test injects a failure).
  std::function<void(int worldRank, int64_t iteration)> beforeStep;
};

/// Trains `plan` as `options` say, printing a header, the log lines and a
/// summary to `out` (world rank 0 only). A plan with a mesh runs on its
/// ranks: on `world` when given (dsc-run passes the MPI world under
/// mpirun), else on options.np thread ranks (runRanks), each with its own
/// executor; the mesh must span exactly that many ranks. Data-parallel rank
/// d of D (the "dp" axis) trains on micro-batches [d*M, (d+1)*M) of each
/// step's D*M. Throws dsc::rt::Error on bad input (data whose vocab does not
/// fit the plan, a plan that cannot train, a mesh that does not match the
/// ranks, an unwritable output file, a token outside the vocab) and when a
/// rank fails ("rank 1 failed: ..."). Returns the exit code (0).
int runPlan(rt::Plan plan, const RunOptions &options, std::ostream &out,
            RunResult *result = nullptr, rt::Communicator *world = nullptr,
            const RunHooks &hooks = {});

/// "trace.json" for rank 0, "trace.rank1.json" for rank 1 ("t" ->
/// "t.rank1"): each rank writes its own Chrome trace.
std::string traceFileOfRank(const std::string &path, int rank);

/// Turns the parsed options' input into a plan. dsc-run passes one that
/// also compiles models in-process (CompileModel.h), and may set run
/// options a training config decides (--deepspeed's steps_per_print); the
/// default reads plan files only, which keeps this library free of the
/// compiler.
using PlanLoader = std::function<rt::Plan(RunOptions &)>;

/// The whole tool: parses argv, loads (with `loader`, or loadPlan when
/// empty), runs. Every failure becomes "dsc-run: error: <cause>" on `err`
/// and exit code 1. Started by mpirun (discoverLaunch()), it runs as one
/// rank of the MPI world, and a failing rank aborts the job with its
/// message (Communicator::abort).
int dscRunMain(const std::vector<std::string> &args, std::ostream &out,
               std::ostream &err, const PlanLoader &loader = {});

} // namespace dsc::run

#endif // DSC_TOOLS_DSCRUN_RUNPLAN_H
