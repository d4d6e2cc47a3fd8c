//===- TensorParallel.cpp - --dsc-tensor-parallel ---------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Megatron-LM's tensor slicing of a GPT forward graph over the mesh's `tp`
// axis. The pass runs before autodiff and rewrites the graph into one rank's
// SPMD program: column-parallel QKV and first MLP products (their weights
// split by output column, the attention heads split with them),
// row-parallel output projections (split by input row, followed by an
// all-reduce), and the vocabulary-parallel embedding and cross-entropy, so
// no rank holds the whole vocabulary's logits. Every split parameter keeps
// its name and gets a #dsc.layout saying which part of the whole it is, so
// the runtime initializes it with the one-rank run's values.
//
// The collectives are differentiable ops (copy_to_parallel is Megatron's f,
// all_reduce its g), so autodiff derives the backward's all-reduces.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Transforms/ForwardPart.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PlanOptions.h"
#include "dsc/Transforms/TransformerLayers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCTENSORPARALLELPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// `type` with its last dimension divided by `parts`.
RankedTensorType splitLastDim(RankedTensorType type, int64_t parts) {
  SmallVector<int64_t> shape(type.getShape());
  shape.back() /= parts;
  return RankedTensorType::get(shape, type.getElementType());
}

/// How one parameter is split: its view of the whole and the view dim the
/// tp axis splits.
struct ParamSplit {
  SmallVector<int64_t> view;
  unsigned dim = 0;
};

struct DscTensorParallelPass
    : PlanReadingPass<
          DscTensorParallelPass,
          mlir::dsc::impl::DscTensorParallelPassBase<DscTensorParallelPass>> {
  using PlanReadingPass::PlanReadingPass;

  /// The plan knobs this pass builds (readPlan, at the start of a run).
  int64_t tp{};
  bool sequenceParallel{};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    {
      const ::dsc::ParallelPlan plan = readPlan(module);
      tp = plan.tp;
      sequenceParallel = plan.sequenceParallel;
    }
    // tp >= 1: the plan's parser's.
    if (tp == 1 && sequenceParallel) {
      module.emitError("--dsc-tensor-parallel: sequence-parallel=1 splits the "
                       "tensor-parallel group's tokens and needs tp > 1");
      return signalPassFailure();
    }
    if (tp == 1)
      return;
    FailureOr<func::FuncOp> found = forwardLossFunction(
        module, funcName, "--dsc-tensor-parallel", "slices the forward graph");
    if (failed(found))
      return signalPassFailure();
    func::FuncOp loss = *found;
    if (sequenceParallel) {
      // A rank's token rows would be routed alone, with a capacity sized
      // for the whole micro-batch.
      WalkResult moe = loss.walk([](MoeRouteOp route) {
        route.emitOpError("--dsc-tensor-parallel: sequence parallelism with "
                          "MoE layers is not supported yet (each rank would "
                          "route its own token rows)");
        return WalkResult::interrupt();
      });
      if (moe.wasInterrupted())
        return signalPassFailure();
    }
    FailureOr<MeshOp> mesh =
        getOrCreateMeshWithAxis(module, "tp", tp, "dsc-tensor-parallel");
    if (failed(mesh))
      return signalPassFailure();
    meshRef = FlatSymbolRefAttr::get(mesh->getSymNameAttr());
    axes = Builder(module.getContext()).getStrArrayAttr({"tp"});
    if (failed(sliceAttention(loss)) || failed(sliceMlp(loss)) ||
        failed(sliceVocabulary(loss)) || failed(splitParameters(module)))
      return signalPassFailure();
    if (sequenceParallel && failed(parallelizeSequence(loss)))
      return signalPassFailure();
  }

private:
  /// x · W (+ b) with W read from a parameter: the pieces of Megatron's
  /// linear layers. `bias` and `biasParam` are null for a biasless one
  /// (Llama's); `output` is the layer's result.
  struct Linear {
    MatmulOp matmul;
    GetParameterOp weight;
    BiasAddOp bias;
    GetParameterOp biasParam;
  };

  /// Matches `value = bias_add(matmul(x, W), b)`, or `matmul(x, W)`, with
  /// W and b parameters.
  std::optional<Linear> matchLinearOutput(Value value) {
    auto bias = value.getDefiningOp<BiasAddOp>();
    auto matmul = bias ? bias.getInput().getDefiningOp<MatmulOp>()
                       : value.getDefiningOp<MatmulOp>();
    if (!matmul || matmul.getTransposeLhs() || matmul.getTransposeRhs())
      return std::nullopt;
    auto weight = matmul.getRhs().getDefiningOp<GetParameterOp>();
    GetParameterOp biasParam =
        bias ? bias.getBias().getDefiningOp<GetParameterOp>() : nullptr;
    if (!weight || (bias && (!biasParam || !matmul.getResult().hasOneUse())))
      return std::nullopt;
    return Linear{matmul, weight, bias, biasParam};
  }

  /// Matches the linear layer whose product reads `value` as its lhs.
  std::optional<Linear> matchLinearInput(Value value) {
    if (!value.hasOneUse())
      return std::nullopt;
    auto matmul = dyn_cast<MatmulOp>(*value.getUsers().begin());
    if (!matmul || matmul.getLhs() != value || !matmul.getResult().hasOneUse())
      return std::nullopt;
    if (auto bias = dyn_cast<BiasAddOp>(*matmul.getResult().getUsers().begin()))
      return matchLinearOutput(bias.getResult());
    return matchLinearOutput(matmul.getResult());
  }

  /// Column-parallel: the rank keeps output columns; the input enters the
  /// parallel region through f. Layers reading the same input share one f,
  /// so the backward all-reduces their summed input gradient once.
  void columnParallel(Linear linear, ArrayRef<int64_t> weightView,
                      ArrayRef<int64_t> biasView) {
    Value x = linear.matmul.getLhs();
    CopyToParallelOp enter;
    for (Operation *user : x.getUsers())
      if (auto copy = dyn_cast<CopyToParallelOp>(user))
        enter = copy;
    if (!enter) {
      OpBuilder b(linear.matmul);
      enter = CopyToParallelOp::create(b, linear.matmul.getLoc(), x.getType(),
                                       x, meshRef, axes);
      inheritTransformerLayer(linear.matmul, enter);
    } else if (linear.matmul->isBeforeInBlock(enter)) {
      enter->moveBefore(linear.matmul);
    }
    linear.matmul.getLhsMutable().assign(enter);
    linear.matmul.getResult().setType(
        splitLastDim(tensorOf(linear.matmul.getResult()), tp));
    splits[linear.weight.getName()] = {SmallVector<int64_t>(weightView),
                                       unsigned(weightView.size() - 1)};
    if (!linear.bias)
      return;
    linear.bias.getResult().setType(linear.matmul.getResult().getType());
    splits[linear.biasParam.getName()] = {SmallVector<int64_t>(biasView),
                                          unsigned(biasView.size() - 1)};
  }

  /// Row-parallel: the rank keeps input rows and produces a partial sum,
  /// which g all-reduces before the (replicated) bias.
  void rowParallel(Linear linear) {
    OpBuilder b(linear.matmul);
    b.setInsertionPointAfter(linear.matmul);
    Value partial = linear.matmul.getResult();
    auto sum = AllReduceOp::create(b, linear.matmul.getLoc(), partial.getType(),
                                   partial, meshRef, axes);
    inheritTransformerLayer(linear.matmul, sum);
    if (linear.bias)
      linear.bias.getInputMutable().assign(sum);
    else
      partial.replaceAllUsesExcept(sum.getResult(), sum);
    RankedTensorType weight = tensorOf(linear.weight.getResult());
    splits[linear.weight.getName()] = {SmallVector<int64_t>(weight.getShape()),
                                       0};
  }

  /// One of q, k, v as the attention reads it: the slice or projection it
  /// comes from, through an optional rotary and (k, v) head repeat.
  struct AttentionInput {
    Value base;
    RotaryOp rotary;
    RepeatHeadsOp repeat;
  };

  AttentionInput peelAttentionInput(Value operand) {
    AttentionInput in;
    if (auto repeat = operand.getDefiningOp<RepeatHeadsOp>();
        repeat && repeat.getResult().hasOneUse()) {
      in.repeat = repeat;
      operand = repeat.getInput();
    }
    if (auto rotary = operand.getDefiningOp<RotaryOp>();
        rotary && rotary.getResult().hasOneUse()) {
      in.rotary = rotary;
      operand = rotary.getInput();
    }
    in.base = operand;
    return in;
  }

  /// A slice of `whole`'s last dim at `offset`, `width` wide, used once.
  static bool isColumnSlice(SliceOp slice, Value whole, int64_t offset,
                            int64_t width) {
    return slice && slice.getInput() == whole &&
           slice.getOffsets().back() == offset &&
           tensorOf(slice.getResult()).getShape().back() == width &&
           slice.getResult().hasOneUse();
  }

  /// Moves `slice` to this rank's part: `index` of its parts, `local` wide.
  void sliceLocally(SliceOp slice, int64_t index, int64_t local) {
    SmallVector<int64_t> offsets(slice.getOffsets()), sizes(slice.getSizes());
    offsets.back() = index * local;
    sizes.back() = local;
    slice.setOffsets(offsets);
    slice.setSizes(sizes);
    slice.getResult().setType(splitLastDim(tensorOf(slice.getResult()), tp));
  }

  /// Heads split over tp. Multi-head attention's fused QKV product is
  /// column-parallel in the [h, 3, h] view (each rank keeps its heads' q, k
  /// and v); grouped-query attention's q product is column-parallel and
  /// its [K | V] product in the [h, 2, kv] view, so each rank keeps its
  /// kv heads and the query heads grouped with them. Rotary and head
  /// repeats work head by head and stay as they are; the output projection
  /// is row-parallel.
  LogicalResult sliceAttention(func::FuncOp func) {
    SmallVector<AttentionOp> attentions;
    func.walk([&](AttentionOp op) { attentions.push_back(op); });
    for (AttentionOp attention : attentions) {
      int64_t heads = attention.getNumHeadsAttr().getInt();
      if (heads % tp != 0)
        return attention.emitOpError("--dsc-tensor-parallel: ")
               << heads << " attention heads are not divisible by tp=" << tp;
      AttentionInput q = peelAttentionInput(attention.getQuery());
      AttentionInput k = peelAttentionInput(attention.getKey());
      AttentionInput v = peelAttentionInput(attention.getValue());
      std::optional<Linear> proj = matchLinearInput(attention.getResult());
      if (!proj || q.repeat || v.rotary)
        return attention.emitOpError(
            "--dsc-tensor-parallel: expected q, k, v projected from one "
            "input (rotary on q and k, head repeats on k and v) and the "
            "output projection after the attention");
      const int64_t hidden = tensorOf(attention.getResult()).getShape().back();
      auto qSlice = q.base.getDefiningOp<SliceOp>();
      auto kSlice = k.base.getDefiningOp<SliceOp>();
      auto vSlice = v.base.getDefiningOp<SliceOp>();
      if (!kSlice || !vSlice || kSlice.getInput() != vSlice.getInput())
        return attention.emitOpError(
            "--dsc-tensor-parallel: expected k and v to be slices of one "
            "projection");
      std::optional<Linear> kv = matchLinearOutput(kSlice.getInput());
      if (!kv)
        return attention.emitOpError(
            "--dsc-tensor-parallel: expected the k and v projection x · W "
            "(+ b) before the attention");
      int64_t in = tensorOf(kv->weight.getResult()).getDimSize(0);
      if (qSlice && qSlice.getInput() == kSlice.getInput()) {
        // Fused [Q | K | V].
        if (k.repeat || v.repeat)
          return attention.emitOpError(
              "--dsc-tensor-parallel: a fused QKV projection has as many key "
              "and value heads as queries");
        SliceOp parts[] = {qSlice, kSlice, vSlice};
        for (auto [index, slice] : llvm::enumerate(parts))
          if (!isColumnSlice(slice, kSlice.getInput(), int64_t(index) * hidden,
                             hidden))
            return slice.emitOpError("--dsc-tensor-parallel: expected q, k, "
                                     "v at columns 0, h and 2h of the QKV "
                                     "projection, each feeding only the "
                                     "attention (or its rotary)");
        columnParallel(*kv, {in, 3, hidden}, {3, hidden});
        for (auto [index, slice] : llvm::enumerate(parts))
          sliceLocally(slice, int64_t(index), hidden / tp);
      } else {
        // Grouped-query: q's own projection, [K | V] another's.
        std::optional<Linear> qProj = matchLinearOutput(q.base);
        const int64_t kvWidth = tensorOf(kSlice.getResult()).getShape().back();
        const int64_t headDim = hidden / heads, kvHeads = kvWidth / headDim;
        if (!qProj || !k.repeat || !v.repeat ||
            qProj->matmul.getLhs() != kv->matmul.getLhs() ||
            !isColumnSlice(kSlice, kSlice.getInput(), 0, kvWidth) ||
            !isColumnSlice(vSlice, kSlice.getInput(), kvWidth, kvWidth))
          return attention.emitOpError(
              "--dsc-tensor-parallel: expected grouped-query attention's q "
              "projection and its [K | V] projection of the same input, k "
              "and v repeated per group");
        if (kvHeads % tp != 0)
          return attention.emitOpError("--dsc-tensor-parallel: ")
                 << kvHeads << " key/value heads are not divisible by tp=" << tp
                 << " (dsc splits the key/value heads over tp, as GPT-NeoX "
                    "and Megatron-LM do; replicating them is not supported)";
        columnParallel(*qProj, {in, hidden}, {hidden});
        columnParallel(*kv, {in, 2, kvWidth}, {2, kvWidth});
        sliceLocally(kSlice, 0, kvWidth / tp);
        sliceLocally(vSlice, 1, kvWidth / tp);
      }
      for (RotaryOp rotary : {q.rotary, k.rotary})
        if (rotary)
          rotary.getResult().setType(rotary.getInput().getType());
      for (RepeatHeadsOp repeat : {k.repeat, v.repeat})
        if (repeat)
          repeat.getResult().setType(
              splitLastDim(tensorOf(repeat.getResult()), tp));
      attention.setNumHeads(heads / tp);
      // Each rank's heads draw the dropout masks one rank draws for them.
      attention.setHeadAxesAttr(axes);
      attention.getResult().setType(
          splitLastDim(tensorOf(attention.getResult()), tp));
      rowParallel(*proj);
    }
    return success();
  }

  /// fc column-parallel, the activation on the rank's columns, proj
  /// row-parallel. SwiGLU's fc is [up | gate]: split in its [h, 2, f] view
  /// so each rank keeps both halves of its columns. An MoE layer's experts
  /// (the activation of a dsc.moe_dispatch's rows) stay whole: every tp
  /// rank routes the same tokens and runs every expert, so their
  /// gradients agree without a reduction (docs/moe.md).
  /// An activation inside an MoE layer's experts: its input is a batched
  /// product of the dispatched rows ([E, C, h]) and an [E, h, f] weight.
  static bool isExpertActivation(Operation *act) {
    auto fc = act->getOperand(0).getDefiningOp<MatmulOp>();
    return fc && fc.getLhs().getDefiningOp<MoeDispatchOp>();
  }

  LogicalResult sliceMlp(func::FuncOp func) {
    SmallVector<Operation *> activations;
    func.walk([&](Operation *op) {
      if (isa<GeluOp, SwigluOp>(op) && !isExpertActivation(op))
        activations.push_back(op);
    });
    for (Operation *act : activations) {
      Value input = act->getOperand(0), output = act->getResult(0);
      std::optional<Linear> fc = matchLinearOutput(input);
      std::optional<Linear> proj = matchLinearInput(output);
      if (!fc || !proj || !input.hasOneUse())
        return act->emitOpError(
            "--dsc-tensor-parallel: expected the MLP x · W1 (+ b1) -> "
            "activation -> · W2 (+ b2)");
      int64_t ffn = tensorOf(output).getShape().back();
      if (ffn % tp != 0)
        return act->emitOpError("--dsc-tensor-parallel: the MLP width ")
               << ffn << " is not divisible by tp=" << tp;
      int64_t in = tensorOf(fc->weight.getResult()).getDimSize(0);
      if (isa<SwigluOp>(act))
        columnParallel(*fc, {in, 2, ffn}, {2, ffn});
      else
        columnParallel(*fc, {in, ffn}, {ffn});
      output.setType(splitLastDim(tensorOf(output), tp));
      rowParallel(*proj);
    }
    return success();
  }

  /// The token embedding and the LM head split by vocabulary rows: each
  /// rank looks up its rows (then g sums the lookups) and computes its
  /// columns of the logits; the cross-entropy combines them with
  /// all-reduces of per-token values only.
  LogicalResult sliceVocabulary(func::FuncOp func) {
    SmallVector<Operation *> embeddings, losses;
    func.walk([&](Operation *op) {
      if (isa<EmbeddingOp>(op))
        embeddings.push_back(op);
      else if (isa<CrossEntropyOp>(op))
        losses.push_back(op);
    });
    for (Operation *op : embeddings) {
      auto embedding = cast<EmbeddingOp>(op);
      auto table = embedding.getTable().getDefiningOp<GetParameterOp>();
      if (!table)
        return embedding.emitOpError(
            "--dsc-tensor-parallel: the embedding table must be a parameter");
      RankedTensorType whole = tensorOf(table.getResult());
      if (failed(checkVocabulary(embedding, whole.getDimSize(0))))
        return failure();
      OpBuilder b(embedding);
      auto lookup = VocabParallelEmbeddingOp::create(
          b, embedding.getLoc(), embedding.getResult().getType(),
          embedding.getTable(), embedding.getIds(), meshRef, axes);
      auto sum = AllReduceOp::create(b, embedding.getLoc(), lookup.getType(),
                                     lookup, meshRef, axes);
      inheritTransformerLayer(embedding, lookup);
      inheritTransformerLayer(embedding, sum);
      embedding.getResult().replaceAllUsesWith(sum.getResult());
      embedding.erase();
      splits[table.getName()] = {SmallVector<int64_t>(whole.getShape()), 0};
    }
    for (Operation *op : losses) {
      auto crossEntropy = cast<CrossEntropyOp>(op);
      auto head = crossEntropy.getLogits().getDefiningOp<MatmulOp>();
      GetParameterOp weight =
          head ? head.getRhs().getDefiningOp<GetParameterOp>() : nullptr;
      if (!head || !weight || !head.getTransposeRhs() ||
          head.getTransposeLhs() || !head.getResult().hasOneUse())
        return crossEntropy.emitOpError(
            "--dsc-tensor-parallel: expected the logits to be x · Wᵀ of a "
            "[vocab, hidden] parameter (the LM head)");
      RankedTensorType whole = tensorOf(weight.getResult());
      if (failed(checkVocabulary(crossEntropy, whole.getDimSize(0))))
        return failure();
      OpBuilder b(head);
      Value x = head.getLhs();
      auto enter = CopyToParallelOp::create(b, head.getLoc(), x.getType(), x,
                                            meshRef, axes);
      inheritTransformerLayer(head, enter);
      head.getLhsMutable().assign(enter);
      head.getResult().setType(splitLastDim(tensorOf(head.getResult()), tp));
      b.setInsertionPoint(crossEntropy);
      auto parallel = VocabParallelCrossEntropyOp::create(
          b, crossEntropy.getLoc(), crossEntropy.getResult().getType(),
          crossEntropy.getLogits(), crossEntropy.getTargets(), meshRef, axes,
          crossEntropy.getClassesAttr());
      inheritTransformerLayer(crossEntropy, parallel);
      crossEntropy.getResult().replaceAllUsesWith(parallel.getResult());
      crossEntropy.erase();
      splits[weight.getName()] = {SmallVector<int64_t>(whole.getShape()), 0};
    }
    return success();
  }

  LogicalResult checkVocabulary(Operation *op, int64_t vocab) {
    if (vocab % tp != 0)
      return op->emitOpError("--dsc-tensor-parallel: the vocabulary (")
             << vocab << " tokens) is not divisible by tp=" << tp
             << "; pad it (Megatron's make-vocab-size-divisible-by; a "
                "Hugging Face model: dsc-translate --import-hf-pad-vocab-to "
                "N)";
    return success();
  }

  /// Gives every split parameter its local type and layout, and retypes
  /// its reads (an op the pass did not slice that reads one then fails its
  /// verifier, naming the shapes).
  LogicalResult splitParameters(ModuleOp module) {
    MLIRContext *context = module.getContext();
    Builder b(context);
    for (auto &[name, split] : splits) {
      auto param = module.lookupSymbol<ParameterOp>(name);
      if (param.getLayoutAttr())
        return param.emitOpError("--dsc-tensor-parallel: parameter '")
               << name << "' is split already";
      SmallVector<Attribute> perDim;
      for (unsigned d = 0; d < split.view.size(); ++d)
        perDim.push_back(d == split.dim ? Attribute(axes)
                                        : Attribute(b.getStrArrayAttr({})));
      // The rank's part of the whole, in the parameter's own rank: the
      // split view dim belongs to the parameter's dim that contains it.
      RankedTensorType whole = param.getTensorType();
      ArrayRef<int64_t> wholeShape = whole.getShape();
      auto layout = ShardLayoutAttr::get(
          context, split.view, b.getArrayAttr(perDim), nullptr,
          wholeShape == ArrayRef<int64_t>(split.view) ? ArrayRef<int64_t>()
                                                      : wholeShape);
      SmallVector<int64_t> local(whole.getShape());
      if (split.dim == 0)
        local.front() /= tp;
      else
        local.back() /= tp;
      auto type = RankedTensorType::get(local, whole.getElementType());
      param.setType(type);
      param.setLayoutAttr(layout);
      ++numSplitParameters;
      module.walk([&](GetParameterOp read) {
        if (read.getName() == name)
          read.getResult().setType(type);
      });
    }
    return success();
  }

  /// Sequence parallelism: the ops between the tensor-parallel regions
  /// move onto the rank's chunk of the token rows, [N/tp, h] with N the
  /// tokens of the micro-batch. Ops are rewritten in program order; `chunk`
  /// maps a whole value of the old graph to its chunk in the new one.
  LogicalResult parallelizeSequence(func::FuncOp func) {
    llvm::DenseMap<Value, Value> chunk;
    llvm::DenseMap<Value, Value> summedParameter;
    SmallVector<Operation *> replaced;
    Block &body = func.getBody().front();
    auto chunkType = [&](RankedTensorType whole) {
      return RankedTensorType::get(
          {whole.getNumElements() / whole.getShape().back() / tp,
           whole.getShape().back()},
          whole.getElementType());
    };
    auto rowsType = [&](RankedTensorType whole) {
      return RankedTensorType::get(
          {whole.getNumElements() / whole.getShape().back(),
           whole.getShape().back()},
          whole.getElementType());
    };
    auto checkTokens = [&](Operation *op,
                           RankedTensorType whole) -> LogicalResult {
      int64_t rows = whole.getNumElements() / whole.getShape().back();
      if (whole.getRank() < 2 || rows % tp != 0)
        return op->emitOpError("--dsc-tensor-parallel: sequence parallelism "
                               "splits the ")
               << rows << " token rows of " << whole << " over tp=" << tp
               << ", which does not divide them";
      return success();
    };
    IntegerAttr dim0 =
        IntegerAttr::get(IntegerType::get(func.getContext(), 64), 0);
    for (Operation &op :
         llvm::make_early_inc_range(body.without_terminator())) {
      OpBuilder b(&op);
      Location loc = op.getLoc();
      // What is made for `op` before it sits in its transformer layer.
      Operation *prev = op.getPrevNode();
      llvm::scope_exit inLayer([&] {
        inheritTransformerLayer(
            &op, prev ? std::next(prev->getIterator()) : body.begin(),
            op.getIterator());
      });
      // g: the partial sums are reduced and scattered by token rows.
      if (auto reduce = dyn_cast<AllReduceOp>(op)) {
        auto whole = cast<RankedTensorType>(reduce.getType());
        if (failed(checkTokens(&op, whole)))
          return failure();
        Value rows =
            ReshapeOp::create(b, loc, rowsType(whole), reduce.getInput());
        chunk[reduce.getResult()] =
            ReduceScatterOp::create(b, loc, chunkType(whole), rows, meshRef,
                                    axes, dim0, ReductionKind::Sum);
        replaced.push_back(&op);
        continue;
      }
      // f: the rank's rows are gathered into the whole value.
      if (auto enter = dyn_cast<CopyToParallelOp>(op);
          enter && chunk.count(enter.getInput())) {
        auto whole = cast<RankedTensorType>(enter.getType());
        Value rows = AllGatherOp::create(b, loc, rowsType(whole),
                                         chunk.lookup(enter.getInput()),
                                         meshRef, axes, dim0);
        enter.getResult().replaceAllUsesWith(
            ReshapeOp::create(b, loc, whole, rows).getResult());
        replaced.push_back(&op);
        continue;
      }
      if (!llvm::any_of(op.getOperands(),
                        [&](Value v) { return chunk.count(v); }))
        continue;
      // Between the regions: ops of one token row at a time.
      if (!isa<LayerNormOp, RmsNormOp, AddOp, BiasAddOp, DropoutOp, CastOp>(
              op) ||
          op.getNumResults() != 1)
        return op.emitOpError("--dsc-tensor-parallel: sequence parallelism "
                              "splits this op's input by token rows, but it "
                              "splits only layer norms, RMS norms, residual "
                              "adds, biases, dropouts and casts between the "
                              "tensor-parallel regions");
      auto whole = cast<RankedTensorType>(op.getResult(0).getType());
      IRMapping map;
      for (Value operand : op.getOperands()) {
        if (Value part = chunk.lookup(operand)) {
          map.map(operand, part);
        } else if (operand.getType() == whole) {
          // A replicated activation entering the region: the rank's rows.
          Value rows = ReshapeOp::create(b, loc, rowsType(whole), operand);
          map.map(operand,
                  ScatterToParallelOp::create(b, loc, chunkType(whole), rows,
                                              meshRef, axes, dim0)
                      .getResult());
        } else if (operand.getDefiningOp<GetParameterOp>()) {
          // A parameter of the region: its gradient is partial over the
          // rank's rows, so it is summed over tp (f's backward).
          Value &summed = summedParameter[operand];
          if (!summed) {
            OpBuilder atRead(operand.getDefiningOp());
            atRead.setInsertionPointAfterValue(operand);
            summed = CopyToParallelOp::create(atRead, loc, operand.getType(),
                                              operand, meshRef, axes);
            inheritTransformerLayer(operand.getDefiningOp(),
                                    summed.getDefiningOp());
          }
          map.map(operand, summed);
        } else {
          return op.emitOpError("--dsc-tensor-parallel: sequence "
                                "parallelism: operand of type ")
                 << operand.getType()
                 << " is neither a token-row activation nor a parameter";
        }
      }
      Operation *clone = b.clone(op, map);
      clone->getResult(0).setType(chunkType(whole));
      // A dropout draws, on the rank's rows, the whole tensor's mask.
      if (auto dropout = dyn_cast<DropoutOp>(clone))
        dropout.setShardAxesAttr(axes);
      chunk[op.getResult(0)] = clone->getResult(0);
      replaced.push_back(&op);
    }
    // Every use of a replaced value is a replaced op (or the check below
    // names it).
    for (Operation *op : llvm::reverse(replaced)) {
      for (Value result : op->getResults())
        for (Operation *user : result.getUsers())
          if (!llvm::is_contained(replaced, user))
            return user->emitOpError("--dsc-tensor-parallel: sequence "
                                     "parallelism: this op reads a value "
                                     "that is split by token rows");
      op->erase();
    }
    return success();
  }

  FlatSymbolRefAttr meshRef;
  ArrayAttr axes;
  /// Parameters to split, in the order first met (deterministic).
  llvm::MapVector<StringRef, ParamSplit> splits;
};

} // namespace
