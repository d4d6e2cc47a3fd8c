//===- ProgramRunner.h - Runs a program's instructions in order -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The step runner: one program at a time, each instruction to whoever runs
// it (compute to the backend, collectives to their lane, transfers to the
// tiers, Zero here), with the waits that keep every launch beside compute
// correct, the delayed parameter update's tail on a host thread beside the
// next step, and, when a hook is set, each instruction timed alone.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_EXEC_PROGRAMRUNNER_H
#define DSC_LIB_RUNTIME_EXEC_PROGRAMRUNNER_H

#include "Arenas.h"
#include "Collectives.h"
#include "MeshGroups.h"
#include "RunContext.h"
#include "TierTransfers.h"

#include "dsc/Runtime/InstructionEvent.h"

#include <exception>
#include <string>
#include <thread>

namespace dsc::rt {

class ProgramRunner {
public:
  ProgramRunner(const Plan &plan, Backend &backend, Arenas &arenas,
                const MeshGroups &mesh, RunContext &context,
                Collectives &collectives, TierTransfers &tiers);
  /// Waits for the delayed update, if one runs (its failure is dropped).
  ~ProgramRunner();
  ProgramRunner(const ProgramRunner &) = delete;
  ProgramRunner &operator=(const ProgramRunner &) = delete;

  /// Runs program `name`. Throws Error for an unknown program or a bad
  /// input found at run time (a token id outside the vocab).
  void run(const std::string &name);
  /// Waits for the delayed parameter update, if one runs; rethrows its
  /// error. Anything but the next forward and backward waits for it.
  void waitForOverlapped();

  void setHook(InstructionHook newHook) { hook = std::move(newHook); }
  const InstructionHook &instructionHook() const { return hook; }
  /// Microseconds since construction on the steady clock.
  double nowUs() const;

private:
  void runInstruction(const Program &prog, size_t index);
  /// run() with the hook: one instruction at a time, each to completion.
  void runTimed(const Program &prog);
  /// The delayed parameter update (OverlapNextStep): instructions
  /// [from, end) of `prog` on a host thread beside what follows.
  void launchOverlapped(const Program &prog, size_t from);

  const Plan &plan;
  Backend &backend;
  Arenas &arenas;
  const MeshGroups &mesh;
  RunContext &context;
  Collectives &collectives;
  TierTransfers &tiers;
  InstructionHook hook;
  double startNs = 0;
  /// The update's thread while it runs, and what it failed with.
  std::thread overlapped;
  std::exception_ptr overlappedError;
};

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_EXEC_PROGRAMRUNNER_H
