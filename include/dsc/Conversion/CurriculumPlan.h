//===- CurriculumPlan.h - one plan for a curriculum's lengths ---*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Curriculum learning by sequence length compiles the model once per length
// the schedule reaches; this joins those plans into one: the longest's
// parameters, states and optimizer, and each shorter length's training step
// program beside its "forward_backward", in memory planned once
// (docs/curriculum.md, "How lengths compile").
//
//===----------------------------------------------------------------------===//

#ifndef DSC_CONVERSION_CURRICULUMPLAN_H
#define DSC_CONVERSION_CURRICULUMPLAN_H

#include "dsc/Runtime/Plan.h"

#include <cstdint>
#include <vector>

namespace dsc::rt {

/// A plan of the model compiled at one of a curriculum's lengths (its
/// seqLength), first trained at 1-based step `fromStep`.
struct CurriculumPart {
  int64_t fromStep = 1;
  Plan plan;
};

/// Joins `parts` (rising lengths and steps, the first from step 1) into the
/// last one's plan: each shorter length's "forward_backward" becomes
/// "forward_backward.seq<L>" (a pipelined plan's: each stage's forward,
/// backward, weight-gradient and step programs "<name>.seq<L>", listed in
/// its CurriculumLength::stages), reading and writing the longest plan's
/// parameters, gradients and optimizer states (matched by name, with equal
/// dtype, shape and arena); the buffers that live only through its step
/// (livesWithinOneStep: temporaries, boundary buffers and slot banks, ids,
/// loss) are moved as one block to where the plan's own temporaries start
/// (no two lengths' steps run at once), its other buffers (constants)
/// after everything, so each arena is planned once for all lengths, and
/// Plan::curriculum lists the lengths. Throws Error when the plans are not
/// of one model and plan (another mesh, arenas, stages, micro-batch, a
/// parameter missing or shaped otherwise), then validates the result.
/// With `reshape` (seqlen_reshape, SeqlenReshape.h), each shorter length's
/// plan has the micro-batch rows its samples are cut into.
Plan joinCurriculumPlans(std::vector<CurriculumPart> parts,
                         bool reshape = false);

} // namespace dsc::rt

#endif // DSC_CONVERSION_CURRICULUMPLAN_H
