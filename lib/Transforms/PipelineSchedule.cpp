//===- PipelineSchedule.cpp - --dsc-pipeline-schedule -----------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Writes each pipeline stage's training step as a `pipeline_step` program:
// the stage's forwards and backwards per micro-batch and the messages to
// its neighbours, in the order of the module's schedule (GPipe or 1F1B,
// PipelineStep.h), and records the bubble the schedule has on these stages
// (PipelineSimulation.h, with the stages' costs).
// The runtime runs these programs as written and --dsc-verify-collectives
// proves their messages match, so the order that most often hangs real
// pipelines is decided, printed and checked here.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Support/PipelineScheduleKind.h"
#include "dsc/Support/PipelineSimulation.h"
#include "dsc/Support/PipelineStep.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FormatVariadic.h"

#include <string>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCPIPELINESCHEDULEPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// What one stage's step program is written from.
struct StageInfo {
  func::FuncOp forward, forwardBackward;
  /// The weight-gradient part of the backward (zero-bubble schedules,
  /// --dsc-split-weight-gradient), or null.
  func::FuncOp weight;
  /// The activation received from stage k-1 (and its gradient sent back);
  /// null on stage 0.
  Type input;
  /// The activation sent to stage k+1 (and its gradient received); null on
  /// the last stage.
  Type output;
  FlatSymbolRefAttr mesh;
};

/// Writes rank `rank`'s step (PipelineStep.h) as ops at `b`; `stages` are
/// all the stages, rank r's chunk c being stage c * ranks + r.
void writeStep(OpBuilder &b, Location loc, ArrayRef<StageInfo> stages,
               int64_t ranks, int64_t rank, bool interleaved,
               ArrayRef<::dsc::PipelineStepOp> step) {
  using Kind = ::dsc::PipelineStepOp::Kind;
  auto symbolOf = [](func::FuncOp func) {
    return FlatSymbolRefAttr::get(func.getSymNameAttr());
  };
  for (const ::dsc::PipelineStepOp &op : step) {
    const StageInfo &s = stages[size_t(op.chunk * ranks + rank)];
    IntegerAttr microbatch = b.getI64IntegerAttr(op.microBatch);
    if (op.kind == Kind::Forward) {
      PipelineForwardOp::create(b, loc, symbolOf(s.forward), microbatch);
      continue;
    }
    if (op.kind == Kind::Backward) {
      PipelineBackwardOp::create(b, loc, symbolOf(s.forwardBackward),
                                 microbatch);
      continue;
    }
    if (op.kind == Kind::BackwardWeight) {
      PipelineBackwardWeightOp::create(b, loc, symbolOf(s.weight), microbatch);
      continue;
    }
    // Up the pipeline go activations, down their gradients: an activation
    // sent or a gradient received is the stage output's, the others its
    // input's.
    const bool send = op.kind == Kind::Send;
    const PipelineMessage message =
        op.gradient ? PipelineMessage::Gradient : PipelineMessage::Activation;
    TypeAttr type = TypeAttr::get(send != op.gradient ? s.output : s.input);
    IntegerAttr peer = b.getI64IntegerAttr(op.peer);
    IntegerAttr chunk = interleaved ? b.getI64IntegerAttr(op.chunk) : nullptr;
    if (send)
      PipelineSendOp::create(b, loc, message, chunk, peer, microbatch, s.mesh,
                             type);
    else
      PipelineRecvOp::create(b, loc, message, chunk, peer, microbatch, s.mesh,
                             type);
  }
}

/// A program's time for the bubble: its matmul FLOPs plus its vector FLOPs
/// at an eighth of the matrix units' rate (--dsc-pipeline's default
/// balance); only the stages' ratios matter.
double programTime(func::FuncOp func) {
  double time = 0;
  func.walk([&](CostOpInterface op) {
    OpCost cost = op.getCost();
    time += double(cost.matmulFlops) + 8.0 * double(cost.vectorFlops);
  });
  return time;
}

struct DscPipelineSchedulePass
    : public mlir::dsc::impl::DscPipelineSchedulePassBase<
          DscPipelineSchedulePass> {
  using DscPipelineSchedulePassBase::DscPipelineSchedulePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    PipelineAttr pipeline = getPipelineAttr(module);
    if (!pipeline) {
      module.emitError("--dsc-pipeline-schedule: the module has no ")
          << kPipelineAttr << " attribute (run --dsc-pipeline first)";
      return signalPassFailure();
    }
    const std::optional<::dsc::PipelineScheduleKind> kind =
        pipeline.getSchedule();
    const std::optional<PipelineShape> shape = getPipelineShape(module);
    if (!getProgramOps(module, ProgramRole::PipelineStep).empty()) {
      module.emitError("--dsc-pipeline-schedule: the module's stages have "
                       "their step programs already");
      return signalPassFailure();
    }
    int64_t microbatches = 1;
    if (auto count = module->getAttrOfType<IntegerAttr>(kMicrobatchesAttr))
      microbatches = count.getInt();
    const int64_t stages = shape->stages, ranks = shape->ranks();
    if (std::optional<std::string> why = ::dsc::pipelineShapeError(
            *kind, ranks, shape->virtualStages, microbatches)) {
      module.emitError("--dsc-pipeline-schedule: ") << *why;
      return signalPassFailure();
    }
    auto meshes = module.getOps<MeshOp>();
    if (meshes.empty()) {
      module.emitError("--dsc-pipeline-schedule: the module has no dsc.mesh "
                       "for its stages' messages");
      return signalPassFailure();
    }
    FlatSymbolRefAttr mesh =
        FlatSymbolRefAttr::get((*meshes.begin()).getSymNameAttr());

    std::vector<StageInfo> infos(static_cast<size_t>(stages));
    std::vector<::dsc::PipelineStageTimes> times;
    for (int64_t k = 0; k < stages; ++k) {
      StageInfo &info = infos[size_t(k)];
      info.mesh = mesh;
      info.forward =
          lookupProgram<func::FuncOp>(module, ProgramRole::Forward, k);
      info.forwardBackward =
          lookupProgram<func::FuncOp>(module, ProgramRole::ForwardBackward, k);
      if (!info.forward || !info.forwardBackward) {
        module.emitError("--dsc-pipeline-schedule: stage ")
            << k << " has no "
            << (info.forward ? "forward_backward" : "forward")
            << " program (run --dsc-autodiff before)";
        return signalPassFailure();
      }
      // A zero-bubble schedule runs the backward's two parts apart; the
      // others run it whole.
      info.weight =
          lookupProgram<func::FuncOp>(module, ProgramRole::BackwardWeight, k);
      const bool zeroBubble =
          *kind == ::dsc::PipelineScheduleKind::ZeroBubbleH1;
      if (zeroBubble != bool(info.weight)) {
        module.emitError("--dsc-pipeline-schedule: stage ")
            << k
            << (zeroBubble
                    ? " has no backward_weight program, which the zb-h1 "
                      "schedule runs apart from the backward (run "
                      "--dsc-split-weight-gradient before)"
                    : "'s backward is split into its activation- and "
                      "weight-gradient parts, which only the zb-h1 schedule "
                      "runs");
        return signalPassFailure();
      }
      // The stage's forward: stage 0 takes the tokens, the others the
      // previous stage's activation first; all but the last return theirs.
      FunctionType type = info.forward.getFunctionType();
      if (k > 0)
        info.input = type.getInput(0);
      if (k < stages - 1) {
        // (--dsc-stage-backward adds the residuals after the output.)
        if (type.getNumResults() < 1) {
          info.forward.emitError("--dsc-pipeline-schedule: stage ")
              << k << "'s forward must return its output activation";
          return signalPassFailure();
        }
        info.output = type.getResult(0);
      }
      // The last stage's forward runs inside its backward.
      const bool last = k == stages - 1;
      times.push_back({last ? 0.0 : programTime(info.forward),
                       programTime(info.forwardBackward),
                       info.weight ? programTime(info.weight) : 0.0});
    }

    const std::vector<std::vector<::dsc::PipelineStepOp>> steps =
        ::dsc::pipelineSteps(*kind, ranks, shape->virtualStages, microbatches,
                             times);
    OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    for (int64_t r = 0; r < ranks; ++r) {
      auto step = func::FuncOp::create(b, module.getLoc(),
                                       "step.stage" + std::to_string(r),
                                       b.getFunctionType({}, {}));
      setProgramRole(step, ProgramRole::PipelineStep);
      step->setAttr(kStageAttr, b.getI64IntegerAttr(r));
      OpBuilder body(step.getContext());
      body.setInsertionPointToStart(step.addEntryBlock());
      writeStep(body, step.getLoc(), infos, ranks, r, shape->virtualStages > 1,
                steps[size_t(r)]);
      func::ReturnOp::create(body, step.getLoc());
      numMessages += llvm::count_if(steps[size_t(r)], [](const auto &op) {
        return op.kind == ::dsc::PipelineStepOp::Kind::Send;
      });
    }

    // The bubble of this schedule on these stages, recorded beside it for
    // the plan summary.
    std::string error;
    std::optional<::dsc::PipelineSimulation> sim =
        ::dsc::simulatePipeline(steps, times, error);
    if (!sim) {
      module.emitError("--dsc-pipeline-schedule: the schedule does not "
                       "finish: ")
          << error;
      return signalPassFailure();
    }
    module->setAttr(kPipelineAttr,
                    PipelineAttr::get(module.getContext(), pipeline.getStages(),
                                      *kind, pipeline.getVirtualStages(),
                                      llvm::APFloat(sim->bubble)));
    if (printTimeline)
      emitTimeline(module, *sim, ranks, shape->virtualStages, microbatches,
                   ::dsc::pipelineScheduleName(*kind));
  }

  /// The simulated step per stage as text, 100 columns for the step.
  static void emitTimeline(ModuleOp module,
                           const ::dsc::PipelineSimulation &sim, int64_t ranks,
                           int64_t virtualStages, int64_t microbatches,
                           StringRef schedule) {
    InFlightDiagnostic remark = mlir::emitRemark(module.getLoc());
    remark << "--dsc-pipeline-schedule: " << schedule << ", ";
    if (virtualStages > 1)
      remark << ranks << " ranks x " << virtualStages << " chunks";
    else
      remark << ranks << " stages";
    remark << ", " << microbatches << " micro-batches, bubble "
           << llvm::formatv("{0:f3}", sim.bubble).str()
           << " (digits: forwards, letters: backwards, a = micro-batch 0"
           << (schedule == "zb-h1" ? ", capitals: weight gradients" : "")
           << ")";
    for (const std::string &line :
         ::dsc::renderPipelineTimeline(sim, ranks, virtualStages))
      remark << "\n  " << line;
  }
};

} // namespace
