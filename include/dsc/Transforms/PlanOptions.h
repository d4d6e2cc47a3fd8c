//===- PlanOptions.h - Passes that read the typed plan -----------*- C++
//-*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A pass reads its plan knobs (dp, zero, the pipeline schedule, ...) from
// the module's `dsc.parallel_plan`, which --dsc-compile records first
// (--dsc-set-plan). Plan keys on the pass's own option string (the older
// per-pass spellings, `--dsc-data-parallel="dp=2 zero=1"`) go to the plan's
// one parser and override the module's plan for that run. A pass that
// decides a knob (the offload tier a device budget picks) records its choice
// on the module's plan, so the compiled module says what was built. No pass
// declares a plan key as an option of its own.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TRANSFORMS_PLANOPTIONS_H
#define DSC_TRANSFORMS_PLANOPTIONS_H

#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Support/ParallelPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/Twine.h"

#include <string>
#include <utility>

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

/// A pass-local spelling of a plan key (--dsc-offload's `optimizer=` is
/// `offload-optimizer=`).
using PlanAlias = std::pair<StringRef, StringRef>;

/// The plan keys a pass was given on its option string.
class PlanOverrides {
public:
  /// Takes the plan keys of `text` (after `aliases`) and leaves the pass's
  /// own options in `rest`.
  LogicalResult parse(StringRef pass, StringRef text, std::string &rest,
                      function_ref<LogicalResult(const Twine &)> errorHandler,
                      ArrayRef<PlanAlias> aliases);
  /// The module's plan (or the defaults) with these keys over it.
  ::dsc::ParallelPlan resolve(ModuleOp module) const;
  bool empty() const { return given.none(); }

private:
  ::dsc::ParallelPlan values;
  ::dsc::PlanKeySet given;
};

/// The module's `dsc.parallel_plan`, or none.
std::optional<::dsc::ParallelPlan> getModulePlan(ModuleOp module);
/// Records `plan` as the module's `dsc.parallel_plan`.
void setModulePlan(ModuleOp module, const ::dsc::ParallelPlan &plan);

/// The base of a pass that reads the module's plan: `Base` is the pass's
/// generated base; `Derived` may define `static ArrayRef<PlanAlias>
/// planAliases()` for its own older spellings.
template <typename Derived, typename Base> class PlanReadingPass : public Base {
public:
  using Base::Base;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    std::string rest;
    if (failed(overrides.parse(("--" + this->getArgument()).str(), options,
                               rest, errorHandler, Derived::planAliases())))
      return failure();
    return Base::initializeOptions(rest, errorHandler);
  }

  static ArrayRef<PlanAlias> planAliases() { return {}; }

  /// The plan is a dsc attribute: its dialect loads before the pass runs.
  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registry.insert<DscDialect>();
  }

protected:
  /// The plan this run builds: the module's with the pass's own keys over
  /// it. (A pass run alone with its own keys leaves the module's plan as it
  /// was: its keys are that run's, not the module's.)
  ::dsc::ParallelPlan readPlan(ModuleOp module) const {
    return overrides.resolve(module);
  }

private:
  PlanOverrides overrides;
};

} // namespace mlir::dsc

#endif // DSC_TRANSFORMS_PLANOPTIONS_H
