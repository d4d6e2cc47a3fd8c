//===- ApplyPlan.cpp - --dsc-apply-plan (--dsc-compile plan=auto) ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The search's answer, compiled: reads the plan --dsc-auto-parallel recorded
// on the module (dsc.plan) and runs the --dsc-compile pipeline with it, as a
// dynamic pipeline because the plan is only known once the module is. Every
// entry of the plan is either applied or refused by name.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
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
    compile->copyOptionValuesFrom(options);
    // What the user set (copying sets every option's value, so read it
    // from the original).
    given.dp = options.dp.hasValue();
    given.tp = options.tp.hasValue();
    given.pp = options.pp.hasValue();
    given.zero = options.zero.hasValue();
    given.microbatches = options.microbatches.hasValue();
    given.schedule = options.pipelineSchedule.hasValue();
    given.virtualStages = options.virtualStages.hasValue();
    given.recompute = options.recompute.hasValue();
    given.sequenceParallel = options.sequenceParallel.hasValue();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &msg) {
      module.emitError("--dsc-compile plan=auto: ") << msg;
      signalPassFailure();
    };
    if (!compile->plan.getValue().empty() && compile->plan != "auto")
      return fail("plan must be 'auto' (the module's dsc.plan), got '" +
                  compile->plan.getValue() + "'");
    auto plan = module->getAttrOfType<DictionaryAttr>(kPlanAttr);
    if (!plan)
      return fail("the module has no dsc.plan; run --dsc-auto-parallel "
                  "first (it records its winner there)");
    auto integer = [&](StringRef key) -> std::optional<int64_t> {
      if (auto v = plan.getAs<IntegerAttr>(key))
        return v.getInt();
      fail("dsc.plan has no integer '" + key + "'");
      return std::nullopt;
    };
    std::optional<int64_t> dp = integer("dp"), tp = integer("tp"),
                           pp = integer("pp"), zero = integer("zero"),
                           microbatches = integer("microbatches"),
                           microBatchSize = integer("micro_batch_size");
    if (!dp || !tp || !pp || !zero || !microbatches || !microBatchSize)
      return;
    auto schedule = plan.getAs<StringAttr>("schedule");
    if (!schedule)
      return fail("dsc.plan has no string 'schedule'");
    // Model chunks per pipeline rank (interleaved 1F1B); 1 when absent.
    int64_t virtualStages = 1;
    if (Attribute chunks = plan.get("virtual_stages")) {
      auto value = dyn_cast<IntegerAttr>(chunks);
      if (!value)
        return fail("dsc.plan's 'virtual_stages' must be an integer");
      virtualStages = value.getInt();
    }
    // The graph's tokens fix the micro-batch size.
    if (auto model = module->getAttrOfType<DictionaryAttr>(kModelAttr))
      if (auto graph = model.getAs<IntegerAttr>("micro_batch_size");
          graph && graph.getInt() != *microBatchSize)
        return fail("dsc.plan's micro-batch size " + Twine(*microBatchSize) +
                    " is not the graph's " + Twine(graph.getInt()) +
                    " (its token shape); search with micro-batch=" +
                    Twine(graph.getInt()) +
                    " or import the model with that micro-batch size");
    // A compile option that disagrees with the plan is an error, not an
    // override.
    auto agree = [&](bool set, StringRef option, int64_t mine,
                     int64_t planned) {
      if (set && mine != planned) {
        fail("the option " + option + "=" + Twine(mine) +
             " disagrees with dsc.plan's " + Twine(planned) +
             "; drop the option or plan=auto");
        return false;
      }
      return true;
    };
    if (!agree(given.dp, "dp", compile->dp, *dp) ||
        !agree(given.tp, "tp", compile->tp, *tp) ||
        !agree(given.pp, "pp", compile->pp, *pp) ||
        !agree(given.zero, "zero", compile->zero, *zero) ||
        !agree(given.microbatches, "microbatches", compile->microbatches,
               *microbatches))
      return;
    if (given.schedule && *pp > 1 &&
        compile->pipelineSchedule.getValue() != schedule.getValue())
      return fail("the option pipeline-schedule=" +
                  compile->pipelineSchedule.getValue() +
                  " disagrees with dsc.plan's " + schedule.getValue());
    if (!agree(given.virtualStages, "virtual-stages", compile->virtualStages,
               virtualStages))
      return;

    // The cost model's recompute is Korthikanti et al.'s full recompute.
    auto recomputeKnob = plan.getAs<BoolAttr>("recompute");
    const std::string recompute =
        recomputeKnob && recomputeKnob.getValue() ? "full" : "none";
    if (given.recompute && compile->recompute.getValue() != recompute)
      return fail("the option recompute=" + compile->recompute.getValue() +
                  " disagrees with dsc.plan's " + recompute);
    auto sequenceKnob = plan.getAs<BoolAttr>("sequence_parallel");
    // (With tp=1 --dsc-tensor-parallel refuses it by name.)
    const bool sequenceParallel = sequenceKnob && sequenceKnob.getValue();
    if (given.sequenceParallel &&
        compile->sequenceParallel.getValue() != sequenceParallel)
      return fail("the option sequence-parallel=" +
                  Twine(int(compile->sequenceParallel.getValue())) +
                  " disagrees with dsc.plan's " + Twine(int(sequenceParallel)));

    // The cost model's optimizer offload is ZeRO-Offload's host tier; an
    // offload-optimizer=nvme given beside it places the states on NVMe.
    auto offloadKnob = plan.getAs<BoolAttr>("offload");
    const bool offload = offloadKnob && offloadKnob.getValue();
    if (!offload && compile->offloadOptimizer.getValue() != "none")
      return fail("the option offload-optimizer=" +
                  compile->offloadOptimizer.getValue() +
                  " disagrees with dsc.plan's offload = false");

    auto paramsKnob = plan.getAs<BoolAttr>("offload_params");
    const bool offloadParams = paramsKnob && paramsKnob.getValue();
    if (!offloadParams && compile->offloadParams.getValue() != "none")
      return fail(
          "the option offload-params=" + compile->offloadParams.getValue() +
          " disagrees with dsc.plan's offload_params = false");

    CompileOptions options;
    options.copyOptionValuesFrom(*compile);
    if (offload && compile->offloadOptimizer.getValue() == "none")
      options.offloadOptimizer = "host";
    if (offloadParams && compile->offloadParams.getValue() == "none")
      options.offloadParams = "host";
    options.plan = "";
    options.dp = *dp;
    options.tp = *tp;
    options.pp = *pp;
    options.zero = *zero;
    options.microbatches = *microbatches;
    options.pipelineSchedule = schedule.getValue().str();
    options.virtualStages = virtualStages;
    options.recompute = recompute;
    options.sequenceParallel = sequenceParallel;
    OpPassManager pipeline(ModuleOp::getOperationName());
    buildCompilePipeline(pipeline, options);
    if (failed(runPipeline(pipeline, module)))
      signalPassFailure();
  }

  /// Shared so that the pass stays copyable (pass managers clone passes).
  std::shared_ptr<CompileOptions> compile;
  struct {
    bool dp = false, tp = false, pp = false, zero = false, microbatches = false,
         schedule = false, virtualStages = false, recompute = false,
         sequenceParallel = false;
  } given;
};

} // namespace

std::unique_ptr<Pass>
mlir::dsc::createDscApplyPlanPass(const CompileOptions &options) {
  return std::make_unique<DscApplyPlanPass>(options);
}
