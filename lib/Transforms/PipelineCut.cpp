//===- PipelineCut.cpp - --dsc-pipeline -------------------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
// (The pass pipeline --dsc-compile is CompilePipeline.cpp.)
//
//===----------------------------------------------------------------------===//
//
// Pipeline parallelism's partition: the loss function is cut at
// transformer-layer boundaries into one function per stage of the mesh's
// `pp` axis, balanced by the ops' cost. Each later pass (autodiff, the
// optimizer, memory planning, lowering) then works stage by stage, and the
// runtime's schedule moves the boundary activations.
//
//   func.func @loss(%tokens, %targets) -> tensor<f32> {
//     <embedding> <h.0> <h.1> | <h.2> <h.3> <ln_f, lm_head, loss>
//   }
// becomes, for pp=2 (the cut `|` minimizes the heaviest stage's cost):
//   func.func @loss.stage0(%tokens) -> tensor<BxSxH>
//       attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0}
//       { <embedding> <h.0> <h.1>; return %x }
//   func.func @loss.stage1(%x, %targets) -> tensor<f32>
//       attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1}
//       { <h.2> <h.3> <ln_f, lm_head, loss> }
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Support/PipelineStep.h"
#include "dsc/Transforms/ForwardPart.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PlanOptions.h"
#include "dsc/Transforms/TransformerLayers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <limits>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCPIPELINEPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct DscPipelinePass
    : PlanReadingPass<DscPipelinePass,
                      mlir::dsc::impl::DscPipelinePassBase<DscPipelinePass>> {
  using PlanReadingPass::PlanReadingPass;

  /// The plan knobs this pass builds (readPlan, at the start of a run).
  int64_t pp{};
  ::dsc::PipelineScheduleKind schedule{};
  int64_t virtualStages{};
  ::dsc::Precision precision{};
  std::string stageLayers;
  /// Whether the loss had MoE auxiliary losses, now seeded per stage.
  bool seedAuxiliaryLosses = false;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    {
      const ::dsc::ParallelPlan plan = readPlan(module);
      pp = plan.pp;
      schedule = plan.schedule;
      virtualStages = plan.virtualStages;
      precision = plan.precision;
      stageLayers = plan.stageLayers;
    }
    seedAuxiliaryLosses = false;
    if (failed(refuseRemovedScheduleOption(module, "--dsc-pipeline",
                                           removedSchedule)))
      return signalPassFailure();
    // The micro-batch count is --dsc-autodiff's; its rule is checked by
    // --dsc-pipeline-schedule.
    if (pp > 1 || virtualStages != 1)
      if (std::optional<std::string> why = ::dsc::pipelineShapeError(
              schedule, pp, virtualStages, /*microBatches=*/pp)) {
        module.emitError("--dsc-pipeline: ") << *why;
        return signalPassFailure();
      }
    if (pp == 1)
      return;
    FailureOr<func::FuncOp> found =
        forwardLossFunction(module, funcName, "--dsc-pipeline",
                            "cuts the forward graph", /*singleBlock=*/true);
    if (failed(found))
      return signalPassFailure();
    func::FuncOp loss = *found;
    // An MoE layer's auxiliary loss is seeded in its own stage (the stage's
    // one message, the residual stream, does not carry it): the loss
    // function's dsc.auxiliary_loss goes, and each stage with MoE layers
    // gets a dsc.stage_auxiliary_loss of its routers' losses.
    Operation *ret = loss.getBody().front().getTerminator();
    if (auto aux = ret->getNumOperands() == 1
                       ? ret->getOperand(0).getDefiningOp<AuxiliaryLossOp>()
                       : AuxiliaryLossOp()) {
      if (precision == ::dsc::Precision::Fp16) {
        aux.emitOpError("--dsc-pipeline: pipelines with MoE layers seed each "
                        "stage's auxiliary losses with a fixed 1/m; fp16's "
                        "dynamic loss scaling is not supported with them "
                        "(use precision=bf16)");
        return signalPassFailure();
      }
      for (Value a : aux.getAux())
        if (!a.getDefiningOp<MoeRouteOp>()) {
          aux.emitOpError("--dsc-pipeline: an auxiliary loss that is not a "
                          "dsc.moe_route's cannot be seeded in its stage");
          return signalPassFailure();
        }
      aux.getResult().replaceAllUsesWith(aux.getLoss());
      aux.erase();
      seedAuxiliaryLosses = true;
    }
    if (failed(checkMesh(module)))
      return signalPassFailure();
    if (failed(cut(loss)))
      return signalPassFailure();
    if (seedAuxiliaryLosses)
      addStageAuxiliaryLosses(module);
    module->setAttr(kPipelineAttr,
                    PipelineAttr::get(module.getContext(), pp * virtualStages,
                                      schedule, virtualStages,
                                      /*bubble=*/std::nullopt));
  }

  LogicalResult checkMesh(ModuleOp module) {
    auto meshes = module.getOps<MeshOp>();
    if (meshes.empty()) {
      OpBuilder b(module.getContext());
      b.setInsertionPointToStart(module.getBody());
      MeshOp::create(b, module.getLoc(), "mesh", b.getStrArrayAttr({"pp"}),
                     b.getDenseI64ArrayAttr({pp}));
      return success();
    }
    MeshOp mesh = *meshes.begin();
    std::optional<unsigned> axis = mesh.getAxisIndex("pp");
    if (!axis)
      return mesh.emitError("--dsc-pipeline: mesh @")
             << mesh.getSymName() << " has no 'pp' axis for " << pp
             << " stages";
    if (mesh.getShape()[*axis] != pp)
      return mesh.emitError("--dsc-pipeline: pp=")
             << pp << " but mesh @" << mesh.getSymName()
             << " has a 'pp' axis of size " << mesh.getShape()[*axis];
    return success();
  }

  LogicalResult cut(func::FuncOp loss) {
    Block &body = loss.getBody().front();
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    llvm::DenseMap<Operation *, size_t> position;
    for (auto [i, op] : llvm::enumerate(ops))
      position[op] = i;

    // Layers in program order: first and last op of each, contiguous.
    SmallVector<std::pair<size_t, size_t>> layers; // [first, last]
    for (auto [i, op] : llvm::enumerate(ops)) {
      int64_t layer = transformerLayerOf(op);
      if (layer < 0)
        continue;
      if (size_t(layer) == layers.size()) {
        layers.push_back({i, i});
        continue;
      }
      if (size_t(layer) + 1 != layers.size()) {
        // Layers must appear h.0, h.1, ... each in one contiguous run.
        if (size_t(layer) > layers.size())
          return op->emitOpError("--dsc-pipeline: layer h.")
                 << layer << " comes before layer h." << layers.size()
                 << "; stages are cut between whole layers numbered from h.0 "
                    "in program order";
        return op->emitOpError("--dsc-pipeline: layer h.")
               << layer << " is interleaved with layer h." << layers.size() - 1
               << "; stages are cut between whole layers in program order";
      }
      layers.back().second = i;
    }
    const int64_t numLayers = layers.size();
    // Interleaved, each of the pp ranks holds virtual-stages of the stages.
    const int64_t stages = pp * virtualStages;
    if (numLayers < stages)
      return loss.emitError("--dsc-pipeline: ")
             << stages << " stages need at least " << stages
             << " transformer layers, but @" << funcName.getValue() << " has "
             << numLayers;

    // Segment j: layer j, with everything before layer 1 in segment 0 and
    // everything after the last layer in the last segment.
    SmallVector<size_t> segmentStart(numLayers + 1);
    segmentStart[0] = 0;
    for (int64_t j = 1; j < numLayers; ++j)
      segmentStart[j] = layers[j].first;
    segmentStart[numLayers] = ops.size();
    SmallVector<double> segmentCost(numLayers, 0.0);
    for (int64_t j = 0; j < numLayers; ++j)
      for (size_t i = segmentStart[j]; i < segmentStart[j + 1]; ++i)
        if (auto costly = dyn_cast<CostOpInterface>(ops[i])) {
          OpCost c = costly.getCost();
          segmentCost[j] += double(c.matmulFlops) +
                            vectorWeight * double(c.vectorFlops);
        }

    // Contiguous partition of the segments into the stages minimizing the
    // heaviest stage: best[s][j] is the least maximum over splits of the
    // first j segments into s stages.
    const double inf = std::numeric_limits<double>::infinity();
    SmallVector<double> prefix(numLayers + 1, 0.0);
    for (int64_t j = 0; j < numLayers; ++j)
      prefix[j + 1] = prefix[j] + segmentCost[j];
    SmallVector<SmallVector<double>> best(
        stages + 1, SmallVector<double>(numLayers + 1, inf));
    SmallVector<SmallVector<int64_t>> choice(
        stages + 1, SmallVector<int64_t>(numLayers + 1, -1));
    best[0][0] = 0;
    for (int64_t s = 1; s <= stages; ++s)
      for (int64_t j = s; j <= numLayers; ++j)
        for (int64_t i = s - 1; i < j; ++i) {
          double cost = std::max(best[s - 1][i], prefix[j] - prefix[i]);
          if (cost < best[s][j]) {
            best[s][j] = cost;
            choice[s][j] = i;
          }
        }
    SmallVector<int64_t> firstSegment(stages + 1);
    firstSegment[stages] = numLayers;
    for (int64_t s = stages; s >= 1; --s)
      firstSegment[s - 1] = choice[s][firstSegment[s]];
    // stage-layers: the user's cut instead (a stage that keeps more
    // micro-batches in flight, 1F1B's first, may take fewer layers).
    if (!stageLayers.empty()) {
      std::vector<int64_t> given;
      std::string error;
      if (!::dsc::parseStageLayers(stageLayers, stages, numLayers, given,
                                   error))
        return loss.emitError("--dsc-pipeline: ") << error;
      for (int64_t k = 0; k < stages; ++k)
        firstSegment[k + 1] = firstSegment[k] + given[k];
    }

    // The value crossing each cut: exactly one activation.
    SmallVector<Value> crossing(stages, Value()); // crossing[k]: into stage k
    for (int64_t k = 1; k < stages; ++k) {
      size_t at = segmentStart[firstSegment[k]];
      llvm::SetVector<Value> live;
      for (size_t i = 0; i < at; ++i) {
        if (isRematerialized(ops[i]))
          continue;
        for (Value result : ops[i]->getResults())
          for (Operation *user : result.getUsers()) {
            Operation *inBlock = body.findAncestorOpInBlock(*user);
            if (inBlock == body.getTerminator() || position[inBlock] >= at)
              live.insert(result);
          }
      }
      if (live.size() != 1) {
        InFlightDiagnostic diag =
            ops[at]->emitOpError("--dsc-pipeline: the cut before layer h.")
            << firstSegment[k] << " (stage " << k << ") is crossed by "
            << live.size() << " values; a cut must be crossed by exactly one "
            << "activation (the residual stream)";
        for (Value v : live)
          diag.attachNote(v.getLoc()) << "crossing value";
        return diag;
      }
      crossing[k] = live.front();
    }

    // Build the stage functions after the loss function, in order.
    OpBuilder moduleBuilder(loss);
    Operation *insertAfter = loss;
    SymbolTable symbols(getOperation());
    auto returnOp = cast<func::ReturnOp>(body.getTerminator());
    for (int64_t k = 0; k < stages; ++k) {
      size_t from = segmentStart[firstSegment[k]];
      size_t to = segmentStart[firstSegment[k + 1]];
      Value result = k + 1 < stages ? crossing[k + 1] : returnOp.getOperand(0);
      FailureOr<func::FuncOp> stage =
          buildStage(loss, ArrayRef(ops).slice(from, to - from), k,
                     crossing[k], result, moduleBuilder, insertAfter);
      if (failed(stage))
        return failure();
      symbols.insert(*stage);
      insertAfter = *stage;
      ++numStages;
    }
    loss.erase();
    return success();
  }

  /// The routers' auxiliary losses of each stage, seeded there.
  void addStageAuxiliaryLosses(ModuleOp module) {
    for (auto func : module.getOps<func::FuncOp>()) {
      if (!func->hasAttr(kStageAttr) || func.isExternal())
        continue;
      SmallVector<Value> aux;
      func.walk([&](MoeRouteOp route) { aux.push_back(route.getAux()); });
      if (aux.empty())
        continue;
      OpBuilder b(func.getBody().front().getTerminator());
      StageAuxiliaryLossOp::create(b, func.getLoc(), aux);
    }
  }

  /// The function of stage `k` running `ops`: arguments are the crossing
  /// activation `in` (absent on stage 0) and the loss function's arguments
  /// the ops use, in order; it returns `out`.
  FailureOr<func::FuncOp> buildStage(func::FuncOp loss,
                                     ArrayRef<Operation *> ops, int64_t k,
                                     Value in, Value out, OpBuilder &b,
                                     Operation *insertAfter) {
    llvm::DenseSet<Operation *> inStage(ops.begin(), ops.end());
    SmallVector<Value> inputs;
    if (in)
      inputs.push_back(in);
    for (BlockArgument arg : loss.getArguments())
      if (llvm::any_of(arg.getUsers(), [&](Operation *user) {
            return inStage.contains(
                loss.getBody().front().findAncestorOpInBlock(*user));
          }))
        inputs.push_back(arg);

    SmallVector<Type> inputTypes;
    for (Value v : inputs)
      inputTypes.push_back(v.getType());
    b.setInsertionPointAfter(insertAfter);
    std::string name = (loss.getSymName() + ".stage" + Twine(k)).str();
    auto func = func::FuncOp::create(
        b, loss.getLoc(), name,
        b.getFunctionType(inputTypes, TypeRange{out.getType()}));
    func->setAttr(kStageAttr, b.getI64IntegerAttr(k));
    setProgramRole(func, ProgramRole::Forward);
    Block *entry = func.addEntryBlock();

    IRMapping mapping;
    for (auto [value, arg] : llvm::zip(inputs, entry->getArguments()))
      mapping.map(value, arg);
    OpBuilder body = OpBuilder::atBlockEnd(entry);
    for (Operation *op : ops) {
      // A parameter read or constant of an earlier stage is cloned again
      // here, just before its first use in this stage.
      for (Value operand : op->getOperands()) {
        if (mapping.contains(operand))
          continue;
        Operation *def = operand.getDefiningOp();
        if (!isRematerialized(def))
          return op->emitOpError("--dsc-pipeline: operand from another stage "
                                 "is neither the crossing activation nor a "
                                 "parameter read or constant");
        body.clone(*def, mapping);
      }
      body.clone(*op, mapping);
    }
    Value result = mapping.lookupOrNull(out);
    if (!result)
      return loss.emitError("--dsc-pipeline: stage ")
             << k << " does not compute the value it must pass on";
    func::ReturnOp::create(body, loss.getLoc(), result);
    // Parameter reads and constants of this stage that only later stages
    // use are dead here.
    for (Operation &op : llvm::make_early_inc_range(
             llvm::reverse(entry->without_terminator())))
      if (isRematerialized(&op) && op.use_empty())
        op.erase();
    return func;
  }
};

} // namespace
