//===- ApplyPlan.cpp - --dsc-apply-plan (--dsc-compile plan=auto) ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The search's answer, compiled: reads the plan --dsc-auto-parallel recorded
// on the module (dsc.parallel_plan) and runs the --dsc-compile pipeline with
// it, as a dynamic pipeline because the plan is only known once the module is.
// Every entry of the plan is either applied or refused by name.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscAttrs.h"
#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <memory>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCAPPLYPLANPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct DscApplyPlanPass
    : public mlir::dsc::impl::DscApplyPlanPassBase<DscApplyPlanPass> {
  DscApplyPlanPass() : compile(std::make_shared<CompileOptions>()) {}
  explicit DscApplyPlanPass(const CompileOptions &options)
      : compile(std::make_shared<CompileOptions>()) {
    compile->copyFrom(options);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &msg) {
      module.emitError("--dsc-compile plan=auto: ") << msg;
      signalPassFailure();
    };
    if (!compile->plan.getValue().empty() && compile->plan != "auto")
      return fail(
          "plan must be 'auto' (the module's dsc.parallel_plan), got '" +
          compile->plan.getValue() + "'");
    auto recorded = module->getAttrOfType<ParallelPlanAttr>(kPlanAttr);
    if (!recorded)
      return fail("the module has no dsc.parallel_plan; run "
                  "--dsc-auto-parallel first (it records its winner there)");
    const ::dsc::ParallelPlan &planned = recorded.getPlan();
    // The graph's tokens fix the micro-batch size.
    if (auto model = module->getAttrOfType<DictionaryAttr>(kModelAttr))
      if (auto graph = model.getAs<IntegerAttr>("micro_batch_size");
          graph && planned.microBatchSize != 0 &&
          graph.getInt() != planned.microBatchSize)
        return fail("dsc.parallel_plan's micro-batch size " +
                    Twine(planned.microBatchSize) + " is not the graph's " +
                    Twine(graph.getInt()) +
                    " (its token shape); search with micro-batch=" +
                    Twine(graph.getInt()) +
                    " or import the model with that micro-batch size");
    // A compile option that disagrees with what the search chose is an
    // error, not an override. The knobs the search does not choose (how a
    // plan is realized: buckets, the ZeRO-3 persistence threshold,
    // prefetch, the NVMe lane, a device budget) are the options'.
    ::dsc::ParallelPlan plan = planned;
    auto searched = [](::dsc::PlanKey key) {
      using ::dsc::PlanKey;
      switch (key) {
      case PlanKey::bucketBytes:
      case PlanKey::persistenceThreshold:
      case PlanKey::prefetch:
      case PlanKey::recomputeLayers:
      case PlanKey::nvmePath:
      case PlanKey::nvmeBlockBytes:
      case PlanKey::nvmeQueueDepth:
      case PlanKey::deviceMemory:
        return false;
      default:
        return true;
      }
    };
    for (const ::dsc::PlanKeyInfo &info : ::dsc::planKeys()) {
      if (!compile->givenPlanKeys[size_t(info.key)])
        continue;
      const std::string mine =
          ::dsc::planValueString(compile->parallel, info.key);
      const std::string theirs = ::dsc::planValueString(planned, info.key);
      // An NVMe tier given beside the plan's host offload places the
      // states on NVMe (the cost model prices offload as one tier).
      const bool tierRefinement =
          (info.key == ::dsc::PlanKey::offloadOptimizer ||
           info.key == ::dsc::PlanKey::offloadParams) &&
          theirs == "host" && mine == "nvme";
      if (mine != theirs && searched(info.key) && !tierRefinement)
        return fail(Twine("the option ") + info.name + "=" + mine +
                    " disagrees with dsc.parallel_plan's " + info.name + "=" +
                    theirs + "; drop the option or plan=auto");
      ::dsc::copyPlanValue(plan, compile->parallel, info.key);
    }

    CompileOptions options;
    options.copyFrom(*compile);
    options.plan = "";
    options.parallel = plan;
    OpPassManager pipeline(ModuleOp::getOperationName());
    buildCompilePipeline(pipeline, options);
    if (failed(runPipeline(pipeline, module)))
      signalPassFailure();
  }

  /// Shared so that the pass stays copyable (pass managers clone passes).
  std::shared_ptr<CompileOptions> compile;
};

} // namespace

std::unique_ptr<Pass>
mlir::dsc::createDscApplyPlanPass(const CompileOptions &options) {
  return std::make_unique<DscApplyPlanPass>(options);
}
