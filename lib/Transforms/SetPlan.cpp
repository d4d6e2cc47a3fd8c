//===- SetPlan.cpp - --dsc-set-plan ---------------------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Records the plan --dsc-compile builds as the module's dsc.parallel_plan,
// where every later pass reads its knobs (PlanOptions.h).
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PlanOptions.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCSETPLANPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct DscSetPlanPass
    : PlanReadingPass<DscSetPlanPass,
                      mlir::dsc::impl::DscSetPlanPassBase<DscSetPlanPass>> {
  using PlanReadingPass::PlanReadingPass;

  DscSetPlanPass() = default;
  /// --dsc-compile's: the whole plan, over nothing the module recorded.
  explicit DscSetPlanPass(const ::dsc::ParallelPlan &plan) : whole(plan) {}

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Run alone, its keys are the module's plan from now on.
    const ::dsc::ParallelPlan plan = whole ? *whole : readPlan(module);
    // The graph's token shape fixes the micro-batch size: a plan that asks
    // for another is refused, not compiled at the graph's.
    if (auto model = module->getAttrOfType<DictionaryAttr>(kModelAttr))
      if (auto graph = model.getAs<IntegerAttr>("micro_batch_size");
          graph && plan.microBatchSize != 0 &&
          graph.getInt() != plan.microBatchSize) {
        module.emitError("--dsc-set-plan: the plan's micro-batch-size=")
            << plan.microBatchSize << " is not the graph's "
            << graph.getInt()
            << " (its token shape); import the model with that micro-batch "
               "size (dsc-run does, given the config)";
        return signalPassFailure();
      }
    setModulePlan(module, plan);
  }

  std::optional<::dsc::ParallelPlan> whole;
};

} // namespace

std::unique_ptr<Pass>
mlir::dsc::createDscSetPlanPass(const ::dsc::ParallelPlan &plan) {
  return std::make_unique<DscSetPlanPass>(plan);
}
