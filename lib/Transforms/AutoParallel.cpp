//===- AutoParallel.cpp - --dsc-auto-parallel, --dsc-estimate ---*- C++ -*-===//
//
// Chooses a 3D-parallel training plan for the module's model with the
// analytical cost model of lib/Analysis and records it as
// `dsc.parallel_plan`
// (--dsc-auto-parallel), or prices one plan the user gives and says what
// the search would change (--dsc-estimate): two questions to one model.
//
//===----------------------------------------------------------------------===//
//
// The pass reads the closed-form shape the importer leaves on the module and
// annotates the module; it does not rewrite ops (the parallelize passes do):
//
//   module attributes {dsc.model = {num_layers = 96 : i64, hidden_size =
//                      12288 : i64, ...}} { ... }
//
// becomes, with cluster=dgx-a100-80gb.json gpus=1024 global-batch=1536,
//
//   module attributes {dsc.model = {...},
//                      dsc.parallel_plan = #dsc.parallel_plan<"dp=32 tp=8
//                          pp=4 zero=1 micro-batch-size=1 microbatches=48
//                          sequence-parallel=true precision=bf16">,
//                      dsc.plan_estimate = {step_seconds = ..., mfu = ...}}
//
// and, with report=PATH.md, writes PATH.md, PATH.json and PATH.svg.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/InferenceCost.h"
#include "dsc/Analysis/PlanReport.h"
#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscAttrs.h"
#include "dsc/Support/PipelineSimulation.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PlanOptions.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCAUTOPARALLELPASS
#define GEN_PASS_DEF_DSCESTIMATEPASS
#define GEN_PASS_DEF_DSCESTIMATEINFERENCEPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;
namespace an = mlir::dsc::analysis;

namespace {

constexpr const char *kHowToGetModel =
    "import the model with `dsc-translate --import-neox` (which records its "
    "shape) or add `dsc.model = {num_layers = L : i64, hidden_size = H : i64, "
    "num_attention_heads = A : i64, seq_length = S : i64, vocab_size = V : "
    "i64, micro_batch_size = B : i64, parameters = P : i64}` to the module";

/// Reads `dsc.model` into a ModelShape, or reports what is missing
/// (`pass` names the asking pass in the messages).
FailureOr<an::ModelShape>
readModelShape(ModuleOp module, StringRef pass = "--dsc-auto-parallel") {
  auto dict = module->getAttrOfType<DictionaryAttr>(kModelAttr);
  if (!dict) {
    if (module->hasAttr(kModelAttr))
      return module.emitError(pass)
             << ": 'dsc.model' must be a dictionary; " << kHowToGetModel;
    return module.emitError(pass)
           << ": the module has no 'dsc.model' attribute with the model's "
              "shape; "
           << kHowToGetModel;
  }
  an::ModelShape shape;
  std::pair<StringRef, int64_t *> ints[] = {
      {"num_layers", &shape.numLayers},
      {"hidden_size", &shape.hiddenSize},
      {"num_attention_heads", &shape.numHeads},
      {"seq_length", &shape.seqLength},
      {"vocab_size", &shape.vocabSize},
      {"micro_batch_size", &shape.microBatchSize},
  };
  for (auto [key, out] : ints) {
    auto value = dyn_cast_or_null<IntegerAttr>(dict.get(key));
    if (!value)
      return module.emitError(pass)
             << ": 'dsc.model' has no integer entry '" << key << "'";
    *out = value.getInt();
  }
  // Optional: the family's MLP width, key/value heads and gating.
  if (auto f = dyn_cast_or_null<IntegerAttr>(dict.get("ffn_hidden_size")))
    shape.ffnHiddenSize = f.getInt();
  if (auto kv = dyn_cast_or_null<IntegerAttr>(dict.get("num_kv_heads")))
    shape.numKvHeads = kv.getInt();
  if (auto gated = dyn_cast_or_null<BoolAttr>(dict.get("gated_mlp")))
    shape.gatedMlp = gated.getValue();
  std::pair<StringRef, int64_t *> moe[] = {
      {"num_experts", &shape.numExperts},
      {"moe_expert_interval", &shape.moeExpertInterval},
      {"moe_capacity", &shape.moeCapacity}};
  for (auto [key, out] : moe)
    if (auto value = dyn_cast_or_null<IntegerAttr>(dict.get(key)))
      *out = value.getInt();
  Attribute params = dict.get("parameters");
  if (auto i = dyn_cast_or_null<IntegerAttr>(params))
    shape.parameters = static_cast<double>(i.getInt());
  else if (auto f = dyn_cast_or_null<FloatAttr>(params))
    shape.parameters = f.getValueAsDouble();
  else
    return module.emitError(pass)
           << ": 'dsc.model' has no numeric entry 'parameters'";
  shape.name = module.getSymName()
                   ? module.getSymName()->str()
                   : llvm::formatv("GPT {0:F1}B", shape.parameters / 1e9).str();
  if (std::string err = shape.validate(); !err.empty())
    return module.emitError(pass) << ": 'dsc.model' is invalid: " << err;
  return shape;
}

/// The cost model of the module's model (dsc.model) on the cluster
/// described in `clusterPath`, or an error naming the cause (`pass` names
/// the asking pass).
FailureOr<an::CostModel> loadCostModel(ModuleOp module, StringRef pass,
                                       StringRef clusterPath) {
  if (clusterPath.empty())
    return module.emitError(pass)
           << ": needs cluster=FILE (see examples/clusters/)";
  FailureOr<an::ModelShape> shape = readModelShape(module, pass);
  if (failed(shape))
    return failure();
  llvm::Expected<an::ClusterSpec> spec = an::loadClusterSpec(clusterPath);
  if (!spec)
    return module.emitError(pass) << ": " << llvm::toString(spec.takeError());
  return an::CostModel(*shape, *spec);
}

/// Restricts `options` to the knobs `knobs` names: "buildable" (what
/// --dsc-compile builds: a winner the compiler cannot build answers the
/// wrong question) or "all"; false for another value.
bool restrictToKnobs(an::SearchOptions &options, StringRef knobs) {
  if (knobs != "buildable" && knobs != "all")
    return false;
  const bool all = knobs == "all";
  // --dsc-recompute's recompute=full, --dsc-tensor-parallel's
  // sequence-parallel=1, the interleaved and zero-bubble schedules,
  // --dsc-offload's optimizer offload and its parameter offload (without
  // pipeline stages) are built.
  options.allowRecompute = true;
  options.allowSequenceParallel = true;
  options.allowInterleaved = true;
  options.allowZeroBubble = true;
  options.allowOffload = true;
  options.allowOffloadWithPipeline = true;
  options.allowParamsOffloadWithPipeline = all;
  return true;
}

struct DscAutoParallelPass
    : mlir::dsc::impl::DscAutoParallelPassBase<DscAutoParallelPass> {
  using DscAutoParallelPassBase::DscAutoParallelPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &msg) {
      module.emitError("--dsc-auto-parallel: ") << msg;
      signalPassFailure();
    };
    if (gpus <= 0)
      return fail("needs gpus=N with N > 0");
    if (globalBatch <= 0)
      return fail("needs global-batch=B with B > 0");
    std::optional<an::SearchObjective> objectiveKind =
        an::parseObjective(objective);
    if (!objectiveKind)
      return fail("objective must be 'time' or 'memory', got '" + objective +
                  "'");

    FailureOr<an::CostModel> loaded =
        loadCostModel(module, "--dsc-auto-parallel", cluster);
    if (failed(loaded))
      return signalPassFailure();
    const an::CostModel &model = *loaded;
    an::SearchOptions options;
    options.numGpus = gpus;
    options.globalBatch = globalBatch;
    options.objective = *objectiveKind;
    options.topK = top;
    options.microBatchSize = microBatch;
    if (precision != "bf16" && precision != "fp32")
      return fail("precision must be 'bf16' or 'fp32', got '" + precision +
                  "'");
    options.fp32 = precision == "fp32";
    if (!restrictToKnobs(options, knobs))
      return fail("knobs must be 'buildable' or 'all', got '" + knobs + "'");
    llvm::Expected<an::SearchResult> result = an::searchPlans(model, options);
    if (!result)
      return fail(llvm::toString(result.takeError()));

    if (!report.empty()) {
      an::ReportContext ctx;
      ctx.model = &model;
      ctx.options = options;
      ctx.clusterSource = cluster;
      if (llvm::Error err = an::writeReport(*result, ctx, report))
        return fail(llvm::toString(std::move(err)));
    }

    const an::PlanEstimate &best = result->top.front();
    const an::ParallelPlan &p = best.plan;
    Builder b(module.getContext());
    // Sequence parallelism means nothing without tp: the plan records it
    // only where the compiler builds it.
    ::dsc::ParallelPlan chosen = p;
    chosen.sequenceParallel = p.sequenceParallel && p.tp > 1;
    module->setAttr(kPlanAttr,
                    ParallelPlanAttr::get(module.getContext(), chosen));
    NamedAttribute estimate[] = {
        b.getNamedAttr("step_seconds", b.getF64FloatAttr(best.time.total)),
        b.getNamedAttr("mfu", b.getF64FloatAttr(best.mfu)),
        b.getNamedAttr("tflops_per_gpu",
                       b.getF64FloatAttr(best.flopsPerGpu / 1e12)),
        b.getNamedAttr("device_gb",
                       b.getF64FloatAttr(best.memory.device / 1e9)),
        b.getNamedAttr("host_gb", b.getF64FloatAttr(best.memory.host / 1e9)),
        b.getNamedAttr("nvme_gb", b.getF64FloatAttr(best.memory.nvme / 1e9)),
        b.getNamedAttr("bubble_fraction",
                       b.getF64FloatAttr(best.bubbleFraction)),
        b.getNamedAttr("objective", b.getStringAttr(objective)),
        b.getNamedAttr("reason", b.getStringAttr(result->explanation)),
        b.getNamedAttr("onebit_adam", b.getStringAttr(result->onebit.sentence)),
    };
    module->setAttr(kPlanEstimateAttr, b.getDictionaryAttr(estimate));
  }
};

struct DscEstimatePass : mlir::dsc::impl::DscEstimatePassBase<DscEstimatePass> {
  using DscEstimatePassBase::DscEstimatePassBase;

  /// The plan's keys go to the plan's one parser, the rest to the pass's
  /// own options. The estimate prices 16-bit plans unless told otherwise.
  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    givenPlan = estimateDefaults();
    std::string rest;
    if (failed(parsePlanOptions("--dsc-estimate", options, givenPlan, rest,
                                errorHandler)))
      return failure();
    return Pass::initializeOptions(rest, errorHandler);
  }

  /// The plan keys' defaults, but bf16: the estimate prices the papers'
  /// 16-bit forms unless told precision=fp32.
  static ::dsc::ParallelPlan estimateDefaults() {
    ::dsc::ParallelPlan plan;
    plan.precision = ::dsc::Precision::Bf16;
    return plan;
  }

  ::dsc::ParallelPlan givenPlan = estimateDefaults();

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &msg) {
      module.emitError("--dsc-estimate: ") << msg;
      signalPassFailure();
    };
    // The cost model's 16-bit forms are bf16's (fp16 adds a loss scaler
    // the estimate does not price).
    if (givenPlan.precision == ::dsc::Precision::Fp16)
      return fail("precision must be 'bf16' or 'fp32', got 'fp16'");
    // The cost model's stages hold equal layer counts; a given cut is
    // priced by --dsc-plan-summary's planned bytes, not here.
    if (!givenPlan.stageLayers.empty())
      return fail("stage-layers=" + givenPlan.stageLayers +
                  " is not priced: the cost model cuts the layers evenly "
                  "(compile the plan and read --dsc-plan-summary's "
                  "bytes_per_pipeline_rank for the given cut)");
    FailureOr<an::CostModel> loaded =
        loadCostModel(module, "--dsc-estimate", cluster);
    if (failed(loaded))
      return signalPassFailure();
    const an::CostModel &model = *loaded;

    an::ParallelPlan plan = givenPlan;
    if (plan.microBatchSize == 0)
      plan.microBatchSize = model.model().microBatchSize;
    if (std::string why = model.checkPlan(plan); !why.empty())
      return fail("the plan `" + plan.str() +
                  "` does not fit the model: " + why);
    const an::PlanEstimate given = model.estimate(plan);

    // The search's answer for the same GPUs and global batch.
    an::SearchOptions options;
    options.numGpus = plan.numGpus();
    options.globalBatch = plan.globalBatch();
    options.fp32 = plan.isFp32();
    if (!restrictToKnobs(options, knobs))
      return fail("knobs must be 'buildable' or 'all', got '" + knobs + "'");
    llvm::Expected<an::SearchResult> result = an::searchPlans(model, options);
    std::string searched;
    if (!result) {
      searched = "the search finds no plan that fits: " +
                 llvm::toString(result.takeError());
    } else {
      const an::PlanEstimate &w = result->top.front();
      std::vector<std::string> changes = an::planChanges(plan, w.plan);
      searched = llvm::formatv("the search's best on {0} GPUs with global "
                               "batch {1}: `{2}`, {3:F2} s per step",
                               options.numGpus, options.globalBatch,
                               w.plan.str(), w.time.total)
                     .str();
      if (changes.empty())
        searched += " (this plan)";
      else
        searched += llvm::formatv(
                        " ({0:F1}% {1}); it changes: {2}",
                        100.0 * std::abs(given.time.total - w.time.total) /
                            given.time.total,
                        w.time.total <= given.time.total ? "faster" : "slower",
                        llvm::join(changes, ", "))
                        .str();
      if (!result->onebit.sentence.empty())
        searched += "; " + result->onebit.sentence;
    }
    InFlightDiagnostic remark = mlir::emitRemark(module.getLoc());
    remark << "--dsc-estimate: `" << plan.str() << "`: ";
    if (!given.fits)
      remark << "does not fit (" << given.whyNot << "); ";
    remark << llvm::formatv("{0:F2} s per step, {1:F0} TFLOP/s per GPU, MFU "
                            "{2:F1}%, pipeline bubble {3:F1}%, {4:F1} GB per "
                            "GPU; ",
                            given.time.total, given.flopsPerGpu / 1e12,
                            100.0 * given.mfu, 100.0 * given.bubbleFraction,
                            given.memory.device / 1e9)
                  .str();
    // An fp32 plan is what --dsc-compile builds: its bytes, to hold against
    // the memory planner's arena (without the runtime's reserve).
    if (plan.isFp32())
      remark << llvm::formatv(
                    "{0:F0} bytes per GPU before the {1:F0} "
                    "reserved (states {2:F0}, activations {3:F0}, "
                    "temporaries {4:F0}); ",
                    given.memory.device - given.memory.reserved,
                    given.memory.reserved, given.memory.states.total(),
                    given.memory.activations, given.memory.temporaries)
                    .str();
    remark << searched;
    // DeepSpeed's 1-bit Adam on the same plan: its warm-up steps (the step
    // above at zero=0; under ZeRO-1/2 the gradients stay whole) and its
    // compressed steps, against the plan's step.
    const an::CompressedStepEstimate &ce = given.compressed;
    if (ce.whyNot.empty())
      remark << llvm::formatv(
                    "; with 1-bit Adam (optimizer=onebit_adam) its warm-up "
                    "steps take {0:F2} s and its compressed steps "
                    "{1:F2} s ({2:F1}% {3}): the data-parallel traffic "
                    "falls from {4:F2} to {5:F3} GB per GPU and step in "
                    "{9:F0} compressed all-reduces ({6:F2} s exposed "
                    "instead of {7:F2} s, compression {8:F3} s)",
                    ce.warmUp, ce.total,
                    100.0 * std::abs(given.time.total - ce.total) /
                        given.time.total,
                    ce.total <= given.time.total ? "faster" : "slower",
                    given.comm.dp / 1e9, ce.dpBytes / 1e9, ce.dpComm,
                    given.time.dpComm, ce.compress, ce.collectives)
                    .str();
    // Each pipeline rank plans its own stages' memory: what each needs.
    if (!given.memory.devicePerPipelineRank.empty()) {
      SmallVector<std::string> perRank;
      for (double bytes : given.memory.devicePerPipelineRank)
        perRank.push_back(llvm::formatv("{0:F1}", bytes / 1e9).str());
      remark << "; GB per pipeline rank: " << llvm::join(perRank, ", ");
    }
    remark.report();
    if (timeline && plan.pp > 1)
      emitTimeline(module, model, plan);

    if (!report.empty() && result) {
      an::ReportContext ctx;
      ctx.model = &model;
      ctx.options = options;
      ctx.clusterSource = cluster;
      ctx.given = given;
      if (llvm::Error err = an::writeReport(*result, ctx, report))
        return fail(llvm::toString(std::move(err)));
    }
  }

  /// The plan's pipeline step per rank, simulated with the cost model's
  /// stage times (PipelineSimulation.h, what --dsc-pipeline-schedule runs
  /// for a compiled plan), as a remark.
  static void emitTimeline(ModuleOp module, const an::CostModel &model,
                           const an::ParallelPlan &plan) {
    std::vector<::dsc::PipelineStageTimes> times =
        model.pipelineStageTimes(plan);
    std::string error;
    std::optional<::dsc::PipelineSimulation> sim = ::dsc::simulatePipeline(
        ::dsc::pipelineSteps(plan.schedule, plan.pp, plan.virtualStages,
                             plan.numMicroBatches, times),
        times, error);
    if (!sim) {
      module.emitError("--dsc-estimate: the schedule does not finish: ")
          << error;
      return;
    }
    InFlightDiagnostic remark = mlir::emitRemark(module.getLoc());
    remark << "--dsc-estimate: " << an::scheduleName(plan.schedule) << ", "
           << plan.pp << " ranks";
    if (plan.virtualStages > 1)
      remark << " x " << plan.virtualStages << " chunks";
    remark << ", " << plan.numMicroBatches << " micro-batches, simulated "
           << "bubble " << llvm::formatv("{0:f3}", sim->bubble).str()
           << " (compute only; digits: forwards, letters: backwards, a = "
              "micro-batch 0"
           << (plan.schedule == ::dsc::PipelineScheduleKind::ZeroBubbleH1
                   ? ", capitals: weight gradients"
                   : "")
           << ")";
    for (const std::string &line :
         ::dsc::renderPipelineTimeline(*sim, plan.pp, plan.virtualStages))
      remark << "\n  " << line;
  }
};

/// --dsc-estimate-inference: serving the module's model (InferenceCost.h).
struct DscEstimateInferencePass
    : mlir::dsc::impl::DscEstimateInferencePassBase<DscEstimateInferencePass> {
  using DscEstimateInferencePassBase::DscEstimateInferencePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    constexpr StringLiteral pass = "--dsc-estimate-inference";
    FailureOr<an::CostModel> loaded = loadCostModel(module, pass, clusterPath);
    if (failed(loaded))
      return signalPassFailure();
    const an::ModelShape &model = loaded->model();
    const an::ClusterSpec &cluster = loaded->cluster();
    if (precision != "bf16" && precision != "fp32") {
      module.emitError(pass)
          << ": precision must be bf16 or fp32, not '" << precision << "'";
      return signalPassFailure();
    }
    if (objective != "latency" && objective != "throughput") {
      module.emitError(pass) << ": objective must be latency or throughput, "
                                "not '"
                             << objective << "'";
      return signalPassFailure();
    }
    an::InferencePlan plan;
    plan.tp = tp;
    plan.batch = batch;
    plan.context = context;
    plan.prompt = prompt;
    plan.bytesPerElement = precision == "fp32" ? 4 : 2;
    if (std::string why = an::checkInferencePlan(model, cluster, plan);
        !why.empty()) {
      module.emitError(pass) << ": " << why;
      return signalPassFailure();
    }
    an::InferencePlan one = plan;
    one.batch = 1;
    const an::InferenceEstimate e1 = an::estimateInference(model, cluster, one);
    const an::InferenceEstimate e = an::estimateInference(model, cluster, plan);
    InFlightDiagnostic remark = mlir::emitRemark(module.getLoc());
    remark << pass << ": tp=" << tp.getValue() << " " << precision.getValue()
           << " on " << cluster.gpu.kind
           << llvm::formatv(": weights {0:F2} GB per GPU, KV cache {1:F1} KB "
                            "per token ({2:F1} MB per sequence of {3}); ",
                            e.weightBytes / 1e9, e.kvBytesPerToken / 1e3,
                            e.kvBytesPerSequence / 1e6, context.getValue())
                  .str();
    if (e.largestBatch < 1) {
      remark << "the weights do not fit in "
             << llvm::formatv("{0:F1}", e.usableBytes / 1e9).str()
             << " GB of usable memory per GPU";
    } else {
      remark << llvm::formatv(
                    "decode {0:F2} ms per token at batch 1 (floor {1:F2} ms: "
                    "weight bytes / bandwidth + 2 all-reduces per layer), "
                    "{2:F2} ms per step at batch {3} ({4:F0} tokens/s); "
                    "prefill of {5} tokens {6:F1} ms; the largest batch at "
                    "context {7}: {8} sequences",
                    1e3 * e1.decodeSeconds, 1e3 * e1.decodeFloorSeconds,
                    1e3 * e.decodeSeconds, batch.getValue(), e.tokensPerSecond,
                    prompt.getValue(), 1e3 * e.prefillSeconds,
                    context.getValue(), e.largestBatch)
                    .str();
    }
    std::vector<an::InferenceChoice> best =
        an::searchInference(model, cluster, plan, objective == "throughput");
    if (best.empty()) {
      remark << "; no tp within a node fits the model";
      return;
    }
    const an::InferenceChoice &w = best.front();
    remark << "; for " << objective.getValue()
           << " the search picks tp=" << w.plan.tp;
    if (objective == "throughput")
      remark << llvm::formatv(" at batch {0}: {1:F0} tokens/s ({2:F0} per GPU)",
                              w.plan.batch, w.estimate.tokensPerSecond,
                              w.estimate.tokensPerSecond / double(w.plan.tp))
                    .str();
    else
      remark << llvm::formatv(": {0:F2} ms per token",
                              1e3 * w.estimate.decodeSeconds)
                    .str();
  }
};

} // namespace
