//===- InstructionEvent.h - One executed instruction, timed -----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What the executor reports after each instruction when a hook is set
// (Executor::setInstructionHook): dsc-run's Chrome trace and its per-op
// timings are built from these.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_INSTRUCTIONEVENT_H
#define DSC_RUNTIME_INSTRUCTIONEVENT_H

#include "dsc/Runtime/Plan.h"

#include <cstddef>
#include <cstdint>
#include <functional>

namespace dsc::rt {

/// Times are microseconds on the steady clock since the executor was
/// constructed.
struct InstructionEvent {
  const Program *program = nullptr;
  size_t index = 0;
  const Instruction *instruction = nullptr;
  double startUs = 0, durationUs = 0;
  /// The lane it ran on: 0 is the compute stream, 1 communication
  /// (collectives; on the CPU they run in turn with compute).
  int stream = 0;
  /// A collective (AllReduce, ...); then `bytesSent` is what this rank sent.
  bool collective = false;
  uint64_t bytesSent = 0;
};
using InstructionHook = std::function<void(const InstructionEvent &)>;

} // namespace dsc::rt

#endif // DSC_RUNTIME_INSTRUCTIONEVENT_H
