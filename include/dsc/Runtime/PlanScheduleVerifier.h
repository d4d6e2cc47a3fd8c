//===- PlanScheduleVerifier.h - the ranks of a plan agree -------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The runtime's counterpart of --dsc-verify-collectives, without MLIR: a
// pipelined plan's ranks run different programs, so a plan file (untrusted
// input) is proved to pair every message and to agree on every collective
// across ranks before any rank starts.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_PLANSCHEDULEVERIFIER_H
#define DSC_RUNTIME_PLANSCHEDULEVERIFIER_H

#include "dsc/Runtime/Plan.h"

namespace dsc::rt {

/// Runs the communication of one training step of every rank of a pipelined
/// plan together, as the communicators would run it (blocking collectives,
/// rendezvous sends and receives): each rank's step program (its messages,
/// and the collectives of the stage programs its forwards and backwards
/// run) and then its optimizer. Throws Error at the first send whose data
/// is not the micro-batch the last forward or backward of its stage
/// computed, the first send and receive that meet but disagree (stage,
/// direction, micro-batch, dtype or shape), the first two members of a
/// group whose next collectives differ (kind, axes, element count, dtype,
/// reduction), or the ranks that wait on each other forever; the message
/// names both ranks (world rank and mesh coordinates), the programs and
/// the instruction indices. Plans without pipeline stages run the same
/// programs on every rank and agree by construction.
///
/// validatePlan calls it last: it relies on the plan's structure (stages,
/// step programs, buffers, axes) having been checked.
void verifyPlanSchedule(const Plan &plan);

} // namespace dsc::rt

#endif // DSC_RUNTIME_PLANSCHEDULEVERIFIER_H
