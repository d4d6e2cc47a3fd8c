//===- PlanOptions.h - A pass's plan keys through the one parser -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The passes and pipelines that take a parallel plan on their option string
// (--dsc-compile, --dsc-estimate) hand its plan keys to the plan's one
// parser (dsc/Support/ParallelPlan.h) and only their own options to MLIR's
// option parser, so no option table restates the plan.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TRANSFORMS_PLANOPTIONS_H
#define DSC_TRANSFORMS_PLANOPTIONS_H

#include "dsc/Support/ParallelPlan.h"

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/Twine.h"

#include <string>

namespace mlir::dsc {

/// Parses the plan keys of `text` onto `plan` (`given`, when set, receives
/// the keys given) and returns the other words in `rest`; an error names
/// `what` (the pass or pipeline flag) and the key.
inline LogicalResult
parsePlanOptions(StringRef what, StringRef text, ::dsc::ParallelPlan &plan,
                 std::string &rest,
                 function_ref<LogicalResult(const Twine &)> errorHandler,
                 ::dsc::PlanKeySet *given = nullptr) {
  std::string error;
  if (!::dsc::parseParallelPlan(std::string_view(text.data(), text.size()),
                                plan, error, given, &rest))
    return errorHandler(what + ": " + error);
  return success();
}

} // namespace mlir::dsc

#endif // DSC_TRANSFORMS_PLANOPTIONS_H
