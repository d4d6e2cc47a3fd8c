//===- PlanOptions.cpp - Passes that read the typed plan
//-------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A pass's plan keys through the plan's one parser, over the module's
// `dsc.parallel_plan` (PlanOptions.h).
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/PlanOptions.h"

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscAttrs.h"

using namespace mlir;
using namespace mlir::dsc;

LogicalResult
PlanOverrides::parse(StringRef pass, StringRef text, std::string &rest,
                     function_ref<LogicalResult(const Twine &)> errorHandler,
                     ArrayRef<PlanAlias> aliases) {
  std::vector<std::string> words;
  std::string error;
  if (!::dsc::splitPlanWords(std::string_view(text.data(), text.size()), words,
                             error))
    return errorHandler(pass + ": " + error);
  // The pass's own older spellings become the plan's keys.
  std::string spelled;
  for (std::string &word : words) {
    StringRef key = StringRef(word).split('=').first;
    for (const PlanAlias &alias : aliases)
      if (key == alias.first) {
        word = (alias.second + StringRef(word).drop_front(key.size())).str();
        break;
      }
    spelled += (spelled.empty() ? "" : " ") + word;
  }
  values = ::dsc::ParallelPlan();
  given.reset();
  return parsePlanOptions(pass, spelled, values, rest, errorHandler, &given);
}

::dsc::ParallelPlan PlanOverrides::resolve(ModuleOp module) const {
  ::dsc::ParallelPlan plan =
      getModulePlan(module).value_or(::dsc::ParallelPlan());
  for (const ::dsc::PlanKeyInfo &info : ::dsc::planKeys())
    if (given[size_t(info.key)])
      ::dsc::copyPlanValue(plan, values, info.key);
  return plan;
}

std::optional<::dsc::ParallelPlan> mlir::dsc::getModulePlan(ModuleOp module) {
  if (auto attr = module->getAttrOfType<ParallelPlanAttr>(kPlanAttr))
    return attr.getPlan();
  return std::nullopt;
}

void mlir::dsc::setModulePlan(ModuleOp module,
                              const ::dsc::ParallelPlan &plan) {
  module->setAttr(kPlanAttr, ParallelPlanAttr::get(module.getContext(), plan));
}
