//===- Recompute.cpp - --dsc-recompute --------------------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Activation recompute as a rewrite of the forward_backward programs: a
// backward op that reads a forward value chosen for recompute reads a clone
// of it instead, made just before the first backward op that needs it, so
// the forward's value dies inside the forward and the memory planner keeps
// it no longer. Which values: `full`, each layer's inner values (the layer
// keeps its input); `selective`, the attention core's b x a x s x s ones;
// in every mode, sequence parallelism's gathers (the backward gathers the
// rank's rows again rather than keep the whole).
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Transforms/ForwardPart.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PlanOptions.h"
#include "dsc/Transforms/TransformerLayers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>
#include <map>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCRECOMPUTEPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The plan's recompute mode.
using Mode = ::dsc::RecomputeKind;

/// A value of shape b x a x s x s: attention scores, probabilities and
/// their dropout, the part of a layer Korthikanti et al.'s selective
/// recompute recomputes.
bool isAttentionCore(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.getRank() == 4 &&
         type.getDimSize(2) == type.getDimSize(3);
}

int64_t bytesOf(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
}

struct DscRecomputePass
    : PlanReadingPass<DscRecomputePass,
                      mlir::dsc::impl::DscRecomputePassBase<DscRecomputePass>> {
  using PlanReadingPass::PlanReadingPass;

  /// The plan knobs this pass builds (readPlan, at the start of a run).
  Mode mode = Mode::None;
  int64_t recomputeLayers{};
  ::dsc::RecomputeModules modules;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    {
      const ::dsc::ParallelPlan plan = readPlan(module);
      mode = plan.recompute;
      recomputeLayers = plan.recomputeLayers;
      std::string error;
      if (!::dsc::parseRecomputeModules(plan.recomputeModules, modules,
                                        error)) {
        module.emitError("--dsc-recompute: ") << error;
        return signalPassFailure();
      }
      if (mode != Mode::Selective && plan.recomputeModules != "core_attn") {
        module.emitError("--dsc-recompute: recompute-modules=")
            << plan.recomputeModules
            << " chooses what recompute=selective recomputes, but recompute="
            << ::dsc::recomputeName(mode);
        return signalPassFailure();
      }
    }
    // The plan's parser refused recompute-layers < 0.
    if (recomputeLayers > 0 && mode != Mode::Full) {
      module.emitError("--dsc-recompute: recompute-layers=")
          << recomputeLayers
          << " counts the layers of recompute=full, but recompute="
          << ::dsc::recomputeName(mode);
      return signalPassFailure();
    }
    for (Operation *op : getProgramOps(module, ProgramRole::ForwardBackward)) {
      auto fb = dyn_cast<func::FuncOp>(op);
      if (!fb)
        continue;
      FailureOr<size_t> forwardOps =
          countForwardOps(module, fb, "--dsc-recompute");
      if (failed(forwardOps))
        return signalPassFailure();
      if (failed(rewrite(fb, *forwardOps)))
        return signalPassFailure();
      fb->setAttr(kSavedActivationBytesAttr,
                  IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                   savedBytes(fb, *forwardOps)));
    }
  }

  LogicalResult rewrite(func::FuncOp fb, size_t forwardOps) {
    SmallVector<Operation *> ops;
    for (Operation &op : fb.getBody().front().without_terminator())
      ops.push_back(&op);
    llvm::DenseSet<Operation *> forward(ops.begin(), ops.begin() + forwardOps);

    // With recompute-layers=N, the first N layers of this program.
    std::map<int64_t, size_t> layerRank;
    for (size_t i = 0; i < forwardOps; ++i)
      if (int64_t layer = transformerLayerOf(ops[i]); layer >= 0)
        layerRank.emplace(layer, layerRank.size());

    // Without layers nothing would be recomputed: say so rather than plan
    // the memory of recompute=none under another name.
    bool anyLayer = mode == Mode::None ||
                    llvm::any_of(llvm::ArrayRef(ops).take_front(forwardOps),
                                 [](Operation *op) {
                                   return !isa<GetParameterOp>(op) &&
                                          transformerLayerOf(op) >= 0;
                                 });
    if (!anyLayer)
      return fb.emitError("--dsc-recompute: recompute=")
             << ::dsc::recomputeName(mode) << " needs the transformer layers, but no "
             << "op of @" << fb.getSymName()
             << " is marked with one (`dsc.layer = i`, as the importers "
                "mark each op of layer i, or an `h.<i>` name location)";

    // The forward ops whose values the backward recomputes. In every mode,
    // sequence parallelism's gathers (and the reshapes of what they
    // gathered): the backward gathers the rank's rows again instead of
    // keeping the whole value, as Megatron-LM does, so what a layer keeps
    // is 1/tp (Korthikanti et al.'s 34 sbh / t).
    llvm::DenseSet<Operation *> chosen;
    for (size_t i = 0; i < forwardOps; ++i) {
      Operation *op = ops[i];
      auto reshape = dyn_cast<ReshapeOp>(op);
      if (isa<AllGatherOp>(op) ||
          (reshape && chosen.contains(reshape.getInput().getDefiningOp())))
        chosen.insert(op);
    }
    for (size_t i = 0; i < forwardOps && mode != Mode::None; ++i) {
      Operation *op = ops[i];
      int64_t layer = transformerLayerOf(op);
      if (layer < 0 || isRematerialized(op) || op->getNumResults() == 0)
        continue;
      if (recomputeLayers > 0 && layerRank[layer] >= size_t(recomputeLayers))
        continue;
      // A value read outside its layer in the forward is a layer boundary,
      // kept: recomputing it would need what it was computed from.
      bool boundary = llvm::any_of(op->getUsers(), [&](Operation *user) {
        return forward.contains(user) ? transformerLayerOf(user) != layer
                                      : isa<func::ReturnOp>(user);
      });
      if (boundary)
        continue;
      if (mode == Mode::Selective && !isSelected(op))
        continue;
      chosen.insert(op);
    }

    // Each chosen value is cloned once, before the first backward op that
    // reads it, together with the chosen values it is computed from.
    IRMapping recomputed;
    OpBuilder b(fb.getContext());
    std::function<Value(Value)> materialize = [&](Value value) -> Value {
      if (Value clone = recomputed.lookupOrNull(value))
        return clone;
      Operation *def = value.getDefiningOp();
      for (Value operand : def->getOperands())
        if (chosen.contains(operand.getDefiningOp()))
          materialize(operand);
      b.clone(*def, recomputed);
      ++numRecomputed;
      return recomputed.lookup(value);
    };
    for (Operation *op : llvm::ArrayRef(ops).drop_front(forwardOps)) {
      for (OpOperand &use : op->getOpOperands()) {
        if (!chosen.contains(use.get().getDefiningOp()))
          continue;
        b.setInsertionPoint(op);
        use.set(materialize(use.get()));
      }
    }
    return success();
  }

  /// Whether recompute=selective recomputes `op` (recompute-modules): the
  /// attention core's s x s values; a norm's output (its input is kept for
  /// its own backward, and its statistics are recomputed with it); the
  /// MLP activation's output (its input is kept for its own backward).
  bool isSelected(Operation *op) const {
    if (modules.coreAttention && op->getNumResults() &&
        llvm::all_of(op->getResults(), isAttentionCore))
      return true;
    if (modules.layerNorm && isa<LayerNormOp, RmsNormOp>(op))
      return true;
    return modules.mlpActivation && isa<GeluOp, SwigluOp>(op);
  }

  /// Bytes of the forward values a backward op reads.
  static int64_t savedBytes(func::FuncOp fb, size_t forwardOps) {
    SmallVector<Operation *> ops;
    for (Operation &op : fb.getBody().front())
      ops.push_back(&op);
    llvm::DenseSet<Operation *> forward(ops.begin(), ops.begin() + forwardOps);
    int64_t bytes = 0;
    for (size_t i = 0; i < forwardOps; ++i) {
      if (isRematerialized(ops[i]) || isParameterCopy(ops[i]))
        continue;
      for (Value result : ops[i]->getResults()) {
        bool readByBackward =
            llvm::any_of(result.getUsers(), [&](Operation *u) {
              return !forward.contains(u) && !isa<func::ReturnOp>(u);
            });
        if (readByBackward)
          bytes += bytesOf(result);
      }
    }
    return bytes;
  }
};

} // namespace
