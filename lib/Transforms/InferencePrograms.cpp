//===- InferencePrograms.cpp - --dsc-inference-programs ---------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// An inference plan's two programs from a model's (tensor-sliced) loss
// graph. Both run the same forward over a flat list of token rows, [1, N,
// *]: row i is token tokens[i] of sequence sequences[i] at positions[i]
// (vLLM's flattened batch, DeepSpeed-FastGen's token budget), so one
// program serves prompts' chunks of any lengths and decode steps alike:
//
//   @prefill  N = token-budget rows: chunks of prompts (a long prompt over
//             several forwards, short ones together);
//   @decode   N = max-sequences rows: one token of each running sequence.
//
// The graph's ops keep their meaning on rows; only the ones that read a
// row's place in its sequence change:
//
//   dsc.attention           -> dsc.paged_attention over the layer's
//                              dsc.kv_cache (grouped-query attention reads
//                              the cache's kv heads: dsc.repeat_heads goes)
//   dsc.rotary              -> dsc.rotary_at positions
//   dsc.position_embedding  -> dsc.position_embedding_at positions
//   dsc.dropout             -> its input
//   the output projection   -> on dsc.gather_rows of the rows to sample
//   the cross-entropy       -> dsc.sample (after a dsc.all_gather of the
//                              vocabulary shards under tensor slicing)
//
// The caches are declared once and shared by both programs: [blocks, 2,
// block-size, kv heads, head dim] per layer, blocks = kv-blocks or
// max-sequences x ceil(max-context / block-size). The memory planner then
// places them beside the weights; the plan states them and the driver
// refuses a request that cannot fit.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Transforms/ForwardPart.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCINFERENCEPROGRAMSPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

constexpr StringLiteral kPass = "--dsc-inference-programs";

/// The program's inputs, in argument order; their buffers are named
/// `<program>.<name>` (the driver fills them).
constexpr StringLiteral kInputNames[] = {
    "tokens",      "positions", "sequences", "block_table",
    "sample_rows", "sampling",  "draws"};

/// What the two programs share: the caches, by the training graph's
/// attention op.
struct Shared {
  llvm::DenseMap<Operation *, KvCacheOp> caches;
  int64_t blocks = 0, blockSize = 0, maxSequences = 0, tableWidth = 0;
};

/// Builds one program from the loss function.
class ProgramBuilder {
public:
  ProgramBuilder(ModuleOp module, func::FuncOp loss, Shared &shared)
      : module(module), loss(loss), shared(shared) {}

  FailureOr<func::FuncOp> build(StringRef name, ProgramRole role, int64_t rows,
                                int64_t sampled);

private:
  ModuleOp module;
  func::FuncOp loss;
  Shared &shared;
  int64_t batch = 0, seq = 0, rows = 0;
  IRMapping map;
  llvm::DenseSet<Value> perToken; // values with a row per token
  Value positions, sequences, table, sampleRows, sampling, draws;
  MatmulOp projection;  // the training graph's output projection
  Value sampledLogits; // its result on the sampled rows
  Value result;

  /// `type` with its leading [batch, seq] as [1, rows].
  Type rowsType(Type type) const {
    auto t = dyn_cast<RankedTensorType>(type);
    if (!t || t.getRank() < 2 || t.getDimSize(0) != batch ||
        t.getDimSize(1) != seq)
      return type;
    SmallVector<int64_t> shape(t.getShape());
    shape[0] = 1;
    shape[1] = rows;
    return RankedTensorType::get(shape, t.getElementType());
  }
  LogicalResult visit(OpBuilder &b, Operation &op);
  LogicalResult cloneGeneric(OpBuilder &b, Operation &op);
  /// The layer's cache (declared once, shared by both programs).
  KvCacheOp cacheFor(AttentionOp attention, Value key, int64_t kvHeads);
};

/// The producer of the loss's logits: the cross-entropy's first operand's
/// defining matmul (the output projection).
MatmulOp outputProjection(func::FuncOp loss) {
  MatmulOp found;
  loss.walk([&](Operation *op) {
    if (isa<CrossEntropyOp, VocabParallelCrossEntropyOp>(op))
      found = op->getOperand(0).getDefiningOp<MatmulOp>();
  });
  return found;
}

KvCacheOp ProgramBuilder::cacheFor(AttentionOp attention, Value key,
                                   int64_t kvHeads) {
  if (KvCacheOp cache = shared.caches.lookup(attention))
    return cache;
  auto keyType = cast<RankedTensorType>(key.getType());
  const int64_t headDim = keyType.getDimSize(2) / kvHeads;
  auto type = RankedTensorType::get(
      {shared.blocks, 2, shared.blockSize, kvHeads, headDim},
      keyType.getElementType());
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPoint(loss);
  std::string name = "kv." + std::to_string(shared.caches.size());
  if (auto layer = attention->getAttrOfType<IntegerAttr>(kLayerAttr))
    name = "kv." + std::to_string(layer.getInt());
  auto cache = KvCacheOp::create(b, attention.getLoc(), name, type);
  shared.caches[attention] = cache;
  return cache;
}

LogicalResult ProgramBuilder::cloneGeneric(OpBuilder &b, Operation &op) {
  bool rowsIn = llvm::any_of(op.getOperands(), [&](Value v) {
    return perToken.contains(map.lookupOrDefault(v));
  });
  Operation *clone = b.clone(op, map);
  if (!rowsIn)
    return success();
  for (Value r : clone->getResults()) {
    r.setType(rowsType(r.getType()));
    perToken.insert(r);
  }
  // A slice names its sizes: the leading [batch, seq] become [1, rows].
  if (auto slice = dyn_cast<SliceOp>(clone)) {
    SmallVector<int64_t> sizes(slice.getSizes());
    if (sizes.size() >= 2 && sizes[0] == batch && sizes[1] == seq) {
      sizes[0] = 1;
      sizes[1] = rows;
      slice.setSizes(sizes);
    }
  }
  if (isa<ReshapeOp, TransposeOp, ConcatOp>(clone))
    return op.emitOpError(kPass)
           << ": a reshape, transpose or concat of token rows is not "
              "compiled for inference yet";
  if (failed(mlir::verify(clone)))
    return op.emitOpError(kPass) << ": could not be applied to token rows";
  return success();
}

LogicalResult ProgramBuilder::visit(OpBuilder &b, Operation &op) {
  auto rowsOf = [&](Value v) { return map.lookupOrDefault(v); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
      .Case<MoeRouteOp, MoeDispatchOp, MoeCombineOp, AuxiliaryLossOp,
            AllToAllOp>([&](Operation *moe) {
        return moe->emitOpError(kPass)
               << ": Mixture-of-Experts layers are not compiled for "
                  "inference yet";
      })
      .Case<DropoutOp>([&](DropoutOp dropout) {
        map.map(dropout.getResult(), rowsOf(dropout.getInput()));
        return success();
      })
      .Case<RepeatHeadsOp>([&](RepeatHeadsOp repeat) -> LogicalResult {
        // The cache holds the kv heads: dsc.paged_attention groups the
        // query heads itself. Anything else reading the repeat is refused.
        for (Operation *user : repeat->getUsers())
          if (!isa<AttentionOp>(user))
            return repeat.emitOpError(kPass)
                   << ": repeated heads read by other than an attention";
        return success();
      })
      .Case<RotaryOp>([&](RotaryOp rotary) {
        Value x = rowsOf(rotary.getInput());
        Value r = RotaryAtOp::create(b, rotary.getLoc(), x.getType(), x,
                                     positions, rotary.getHeadDimAttr(),
                                     rotary.getRotaryDimsAttr(),
                                     rotary.getBaseAttr());
        r.getDefiningOp()->setDiscardableAttrs(
            rotary->getDiscardableAttrDictionary());
        map.map(rotary.getResult(), r);
        perToken.insert(r);
        return success();
      })
      .Case<PositionEmbeddingOp>([&](PositionEmbeddingOp pos) {
        Type type = rowsType(pos.getResult().getType());
        Value r = PositionEmbeddingAtOp::create(
            b, pos.getLoc(), type, rowsOf(pos.getTable()), positions);
        map.map(pos.getResult(), r);
        perToken.insert(r);
        return success();
      })
      .Case<AttentionOp>([&](AttentionOp attention) -> LogicalResult {
        if (!attention.getCausal())
          return attention.emitOpError(kPass)
                 << ": only causal attention has a KV cache";
        int64_t heads = int64_t(attention.getNumHeads());
        int64_t kvHeads = heads;
        Value key = attention.getKey(), value = attention.getValue();
        auto kr = key.getDefiningOp<RepeatHeadsOp>();
        auto vr = value.getDefiningOp<RepeatHeadsOp>();
        if (bool(kr) != bool(vr) || (kr && kr.getRepeats() != vr.getRepeats()))
          return attention.emitOpError(kPass)
                 << ": keys and values must repeat their heads alike";
        if (kr) {
          kvHeads = heads / int64_t(kr.getRepeats());
          key = kr.getInput();
          value = vr.getInput();
        }
        KvCacheOp cache = cacheFor(attention, rowsOf(key), kvHeads);
        Value q = rowsOf(attention.getQuery());
        auto r = PagedAttentionOp::create(
            b, attention.getLoc(), q.getType(), q, rowsOf(key), rowsOf(value),
            positions, sequences, table,
            FlatSymbolRefAttr::get(cache.getSymNameAttr()),
            b.getI64IntegerAttr(heads), b.getI64IntegerAttr(kvHeads),
            b.getI64IntegerAttr(int64_t(attention.getWindow())));
        r->setDiscardableAttrs(attention->getDiscardableAttrDictionary());
        map.map(attention.getResult(), r);
        perToken.insert(r);
        return success();
      })
      .Case<MatmulOp>([&](MatmulOp matmul) -> LogicalResult {
        if (matmul != projection)
          return cloneGeneric(b, *matmul);
        // The output projection runs on the rows to sample only.
        Value x = rowsOf(matmul.getLhs());
        auto xType = cast<RankedTensorType>(x.getType());
        int64_t sampled =
            cast<RankedTensorType>(sampleRows.getType()).getDimSize(0);
        auto gatheredType = RankedTensorType::get(
            {1, sampled, xType.getDimSize(2)}, xType.getElementType());
        Value gathered = GatherRowsOp::create(b, matmul.getLoc(), gatheredType,
                                              x, sampleRows);
        auto logitsType = cast<RankedTensorType>(matmul.getType());
        auto type =
            RankedTensorType::get({1, sampled, logitsType.getShape().back()},
                                  logitsType.getElementType());
        auto product = cast<MatmulOp>(b.clone(*matmul, map));
        product->setOperand(0, gathered);
        product.getResult().setType(type);
        if (failed(mlir::verify(product)))
          return failure();
        sampledLogits = product;
        map.map(matmul.getResult(), product);
        return success();
      })
      .Case<CrossEntropyOp, VocabParallelCrossEntropyOp>([&](Operation *ce)
                                                             -> LogicalResult {
        if (!sampledLogits || rowsOf(ce->getOperand(0)) != sampledLogits)
          return ce->emitOpError(kPass)
                 << ": the logits must be the output projection's "
                    "(a dsc.matmul)";
        Value logits = sampledLogits;
        int64_t classes = 0;
        if (auto plain = dyn_cast<CrossEntropyOp>(ce)) {
          classes = int64_t(plain.getClasses());
        } else {
          auto vp = cast<VocabParallelCrossEntropyOp>(ce);
          classes = int64_t(vp.getClasses());
          auto meshOp = SymbolTable::lookupNearestSymbolFrom<MeshOp>(
              vp, vp.getMeshAttr());
          int64_t shards = 1;
          for (StringRef axis : vp.getMeshAxes().getAsValueRange<StringAttr>())
            shards *= meshOp.getShape()[*meshOp.getAxisIndex(axis)];
          auto t = cast<RankedTensorType>(logits.getType());
          auto whole = RankedTensorType::get(
              {shards, t.getDimSize(1), t.getDimSize(2)}, t.getElementType());
          logits = AllGatherOp::create(b, ce->getLoc(), whole, logits,
                                       vp.getMeshAttr(), vp.getMeshAxes(),
                                       b.getI64IntegerAttr(0));
        }
        auto logitsType = cast<RankedTensorType>(logits.getType());
        int64_t whole = logitsType.getDimSize(0) * logitsType.getDimSize(2);
        if (classes == whole)
          classes = 0;
        auto tokensType =
            RankedTensorType::get({logitsType.getDimSize(1)}, b.getI32Type());
        result = SampleOp::create(b, ce->getLoc(), tokensType, logits, sampling,
                                  draws, b.getI64IntegerAttr(classes));
        return success();
      })
      .Case<func::ReturnOp>([&](auto) { return success(); })
      .Default([&](Operation *other) { return cloneGeneric(b, *other); });
}

FailureOr<func::FuncOp> ProgramBuilder::build(StringRef name, ProgramRole role,
                                              int64_t rowCount,
                                              int64_t sampled) {
  rows = rowCount;
  projection = outputProjection(loss);
  auto tokensType = cast<RankedTensorType>(loss.getArgument(0).getType());
  batch = tokensType.getDimSize(0);
  seq = tokensType.getDimSize(1);
  Builder types(module.getContext());
  Type i32 = types.getI32Type(), f32 = types.getF32Type();
  SmallVector<Type> inputs = {
      RankedTensorType::get({1, rows}, i32),
      RankedTensorType::get({rows}, i32),
      RankedTensorType::get({rows}, i32),
      RankedTensorType::get({shared.maxSequences, shared.tableWidth}, i32),
      RankedTensorType::get({sampled}, i32),
      RankedTensorType::get({sampled, 3}, f32),
      RankedTensorType::get({sampled}, f32)};
  auto fnType =
      types.getFunctionType(inputs, {RankedTensorType::get({sampled}, i32)});
  OpBuilder mb(module.getBodyRegion());
  mb.setInsertionPointAfter(loss);
  auto func = func::FuncOp::create(mb, loss.getLoc(), name, fnType);
  setProgramRole(func, role);
  for (auto [i, input] : llvm::enumerate(kInputNames))
    func.setArgAttr(unsigned(i), kInputAttr, types.getStringAttr(input));
  Block *entry = func.addEntryBlock();
  positions = entry->getArgument(1);
  sequences = entry->getArgument(2);
  table = entry->getArgument(3);
  sampleRows = entry->getArgument(4);
  sampling = entry->getArgument(5);
  draws = entry->getArgument(6);
  map.map(loss.getArgument(0), entry->getArgument(0));
  perToken.insert(entry->getArgument(0));
  OpBuilder b = OpBuilder::atBlockEnd(entry);
  for (Operation &op : loss.getBody().front())
    if (failed(visit(b, op)))
      return failure();
  if (!result)
    return loss.emitError(kPass)
           << ": @" << loss.getSymName()
           << " has no cross-entropy of an output projection's logits to "
              "sample from";
  func::ReturnOp::create(b, loss.getLoc(), result);
  // Values only the loss read (the targets' side) are dead here.
  for (Operation &op :
       llvm::make_early_inc_range(llvm::reverse(entry->without_terminator())))
    if (op.use_empty() && isPure(&op))
      op.erase();
  return func;
}

struct DscInferenceProgramsPass
    : mlir::dsc::impl::DscInferenceProgramsPassBase<DscInferenceProgramsPass> {
  using DscInferenceProgramsPassBase::DscInferenceProgramsPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> found = forwardLossFunction(
        module, funcName, kPass, "builds inference programs from the loss");
    if (failed(found))
      return signalPassFailure();
    func::FuncOp loss = *found;
    if (loss.getNumArguments() != 2)
      return fail(loss, "must take (tokens, targets)");

    // The longest context: the option, or the model's positions.
    int64_t context = maxContext;
    auto model = module->getAttrOfType<DictionaryAttr>(kModelAttr);
    auto positionsAttr =
        model ? model.getAs<IntegerAttr>("max_position_embeddings") : nullptr;
    if (context == 0) {
      if (!positionsAttr)
        return fail(module, "max-context= is needed: the module's dsc.model "
                            "states no max_position_embeddings");
      context = positionsAttr.getInt();
    }
    // A learned position table has no row past its last.
    PositionEmbeddingOp learned;
    loss.walk([&](PositionEmbeddingOp op) { learned = op; });
    if (learned) {
      int64_t table =
          cast<RankedTensorType>(learned.getTable().getType()).getDimSize(0);
      if (context > table)
        return fail(module, "max-context=" + std::to_string(context) +
                                " exceeds the " + std::to_string(table) +
                                " positions of the model's learned position "
                                "embeddings");
    }
    if (blockSize <= 0 || tokenBudget <= 0 || maxSequences <= 0 ||
        context <= 0 || kvBlocks < 0)
      return fail(module, "block-size, token-budget, max-sequences and "
                          "max-context must be positive, kv-blocks >= 0");
    Shared shared;
    shared.blockSize = blockSize;
    shared.maxSequences = maxSequences;
    shared.tableWidth = (context + blockSize - 1) / blockSize;
    shared.blocks = kvBlocks ? int64_t(kvBlocks)
                             : int64_t(maxSequences) * shared.tableWidth;
    if (shared.blocks < shared.tableWidth)
      return fail(module, "kv-blocks=" + std::to_string(shared.blocks) +
                              " cannot hold one sequence of max-context=" +
                              std::to_string(context) + " (" +
                              std::to_string(shared.tableWidth) +
                              " blocks of " + std::to_string(blockSize) + ")");

    const int64_t sampledPrefill = std::min<int64_t>(tokenBudget, maxSequences);
    ProgramBuilder prefill(module, loss, shared);
    if (failed(prefill.build("prefill", ProgramRole::Prefill, tokenBudget,
                             sampledPrefill)))
      return signalPassFailure();
    ProgramBuilder decode(module, loss, shared);
    if (failed(decode.build("decode", ProgramRole::Decode, maxSequences,
                            maxSequences)))
      return signalPassFailure();
    Builder b(module.getContext());
    module->setAttr(
        kInferenceAttr,
        b.getDictionaryAttr({
            b.getNamedAttr("block_size", b.getI64IntegerAttr(blockSize)),
            b.getNamedAttr("kv_blocks", b.getI64IntegerAttr(shared.blocks)),
            b.getNamedAttr("max_context", b.getI64IntegerAttr(context)),
            b.getNamedAttr("max_sequences", b.getI64IntegerAttr(maxSequences)),
            b.getNamedAttr("token_budget", b.getI64IntegerAttr(tokenBudget)),
        }));
    loss.erase();
  }

  void fail(Operation *at, const Twine &why) {
    at->emitError(kPass) << ": " << why;
    signalPassFailure();
  }
};

} // namespace
