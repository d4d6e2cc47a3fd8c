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

#include "dsc/Runtime/Plan.h"

#include <functional>
#include <iosfwd>
#include <vector>

namespace dsc::run {

/// Reads the plan file `input` names.
rt::Plan loadPlan(const std::string &input);

/// What a run did, for tests.
struct RunResult {
  std::vector<double> losses; // per step, mean over its micro-batches
  std::vector<uint64_t> allocatedBytesPerArena;
};

/// Trains `plan` as `options` say, printing a header, the log lines and a
/// summary to `out`. Throws dsc::rt::Error on bad input (data whose vocab
/// does not fit the plan, a plan that cannot train, an unwritable output
/// file, a token outside the vocab). Returns the exit code (0).
int runPlan(rt::Plan plan, const RunOptions &options, std::ostream &out,
            RunResult *result = nullptr);

/// Turns the parsed options' input into a plan. dsc-run passes one that
/// also compiles models in-process (CompileModel.h); the default reads plan
/// files only, which keeps this library free of the compiler.
using PlanLoader = std::function<rt::Plan(const RunOptions &)>;

/// The whole tool: parses argv, loads (with `loader`, or loadPlan when
/// empty), runs. Every failure becomes "dsc-run: error: <cause>" on `err`
/// and exit code 1.
int dscRunMain(const std::vector<std::string> &args, std::ostream &out,
               std::ostream &err, const PlanLoader &loader = {});

} // namespace dsc::run

#endif // DSC_TOOLS_DSCRUN_RUNPLAN_H
