//===- GPTGraphBuilder.cpp - emit a GPT loss graph --------------*- C++ -*-===//
//
// Emits the dsc graph of a GPT-2 / GPT-NeoX decoder (pre-norm blocks,
// learned, rotary or no positions, sequential or parallel residual, tanh or
// exact GELU, tied or untied output embedding) computing the mean
// next-token loss of one micro-batch.
//
//===----------------------------------------------------------------------===//

#include "dsc/Target/GPTGraphBuilder.h"
#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// Builds the module; keeps the builders and the shapes in one place.
class GPTGraphBuilder {
public:
  GPTGraphBuilder(const GPTConfig &config, Location loc)
      : config(config), context(loc.getContext()), fileLoc(loc),
        builder(context) {}

  OwningOpRef<ModuleOp> build();

private:
  Location named(const Twine &name) {
    return NameLoc::get(StringAttr::get(context, name), fileLoc);
  }
  /// A tensor of the model's float type (f32, or f64 for gradient checks).
  RankedTensorType floatTensor(ArrayRef<int64_t> shape) {
    Type element =
        config.useF64 ? Type(builder.getF64Type()) : Type(builder.getF32Type());
    return RankedTensorType::get(shape, element);
  }
  /// GPT-NeoX's init methods (megatron/model/init_functions.py) for a
  /// weight of `shape`; all draw from a normal distribution.
  InitAttr init(StringRef method, ArrayRef<int64_t> shape) {
    auto normalWith = [&](double std) {
      return InitAttr::get(context, InitKind::Normal, llvm::APFloat(std), 0);
    };
    const double h = double(config.hiddenSize);
    if (method == "scaled_normal")
      return InitAttr::get(context, InitKind::ScaledNormal,
                           llvm::APFloat(config.initMethodStd),
                           config.numLayers);
    if (method == "small_init") // Nguyen & Salazar 2019
      return normalWith(std::sqrt(2.0 / (5.0 * h)));
    if (method == "wang_init")
      return normalWith(2.0 / double(config.numLayers) / std::sqrt(h));
    if (method == "xavier_normal") // Glorot & Bengio 2010, from the fans
      // (an expert's [E, in, out] weight: each expert's matrix's).
      return normalWith(
          std::sqrt(2.0 / double(shape[shape.size() - 2] + shape.back())));
    return normalWith(config.initMethodStd);
  }
  /// Weights that are not residual outputs (NeoX's init_method).
  InitAttr normal(ArrayRef<int64_t> shape) {
    return init(config.initMethod, shape);
  }
  /// The residual branches' output projections (output_layer_init_method).
  InitAttr scaledNormal(ArrayRef<int64_t> shape) {
    return init(config.outputLayerInitMethod, shape);
  }
  InitAttr fill(InitKind kind) {
    return InitAttr::get(context, kind, llvm::APFloat(0.0), 0);
  }

  /// Declares parameter `name` at module level and reads it in the body.
  Value param(StringRef name, ArrayRef<int64_t> shape, InitAttr init);
  Value norm(const Twine &prefix, Value x);
  /// x · W + b with W of shape [in, out]; x · W without `bias`.
  Value linear(const Twine &prefix, Value x, int64_t in, int64_t out,
               InitAttr init, bool bias = true);
  /// The attention sub-block's core: q, k, v from ln_1's output, rotated
  /// and grouped as the config says, through dsc.attention.
  Value attention(const std::string &prefix, int64_t layer, Value x);
  Value dropout(const Twine &name, Value x, double p);
  /// Transformer layer `layer`, each of its ops marked `dsc.layer = layer`.
  Value block(int64_t layer, Value x);
  Value blockOps(int64_t layer, Value x);
  /// The MLP sub-block's core on its normed input: dense, or experts.
  Value mlp(const std::string &prefix, Value x);
  Value moeMlp(const std::string &prefix, int64_t layer, Value x);

  const GPTConfig &config;
  MLIRContext *context;
  Location fileLoc;
  OpBuilder builder;
  OpBuilder moduleBuilder{context};
  int64_t dropoutSeed = 0;
  /// The MoE layers' auxiliary losses, which join the loss's gradient.
  SmallVector<Value> auxiliaryLosses;
};

Value GPTGraphBuilder::param(StringRef name, ArrayRef<int64_t> shape,
                             InitAttr init) {
  RankedTensorType type = floatTensor(shape);
  ParameterOp::create(moduleBuilder, named(name), name, type, init,
                      /*layout=*/nullptr);
  return GetParameterOp::create(builder, named(name), type,
                                FlatSymbolRefAttr::get(context, name));
}

Value GPTGraphBuilder::norm(const Twine &prefix, Value x) {
  int64_t h = config.hiddenSize;
  Value gamma = param((prefix + ".weight").str(), {h}, fill(InitKind::Ones));
  // GPT-NeoX's RMSNorm adds its epsilon to the root mean square, outside
  // the square root; transformers' (Llama's) inside.
  if (config.rmsNorm)
    return RmsNormOp::create(
        builder, named(prefix), x.getType(), x, gamma,
        builder.getF64FloatAttr(config.rmsNormEpsilon),
        config.rmsNormEpsilonInsideSqrt ? UnitAttr() : builder.getUnitAttr());
  Value beta = param((prefix + ".bias").str(), {h}, fill(InitKind::Zeros));
  return LayerNormOp::create(builder, named(prefix), x.getType(), x, gamma,
                             beta,
                             builder.getF64FloatAttr(config.layerNormEpsilon));
}

Value GPTGraphBuilder::linear(const Twine &prefix, Value x, int64_t in,
                              int64_t out, InitAttr init, bool bias) {
  auto xType = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(xType.getShape().drop_back());
  shape.push_back(out);
  Value weight = param((prefix + ".weight").str(), {in, out}, init);
  Value biasParam =
      bias ? param((prefix + ".bias").str(), {out}, fill(InitKind::Zeros))
           : Value();
  Value y =
      MatmulOp::create(builder, named(prefix), floatTensor(shape), x, weight,
                       /*transpose_lhs=*/false,
                       /*transpose_rhs=*/false);
  if (!bias)
    return y;
  return BiasAddOp::create(builder, named(prefix), y.getType(), y, biasParam);
}

Value GPTGraphBuilder::attention(const std::string &prefix, int64_t layer,
                                 Value x) {
  const int64_t b = config.microBatchSize, s = config.seqLength;
  const int64_t h = config.hiddenSize, d = config.headDim();
  const int64_t kv = config.kvHeads() * d;
  const bool bias = config.attentionBias;
  auto slice = [&](const std::string &name, Value from, int64_t offset,
                   int64_t width) -> Value {
    return SliceOp::create(builder, named(name), floatTensor({b, s, width}),
                           from, builder.getDenseI64ArrayAttr({0, 0, offset}),
                           builder.getDenseI64ArrayAttr({b, s, width}));
  };
  Value q, k, v;
  if (kv == h) {
    // One fused projection, [Q | K | V] with the heads inside each part
    // (Megatron's order, what tensor slicing splits in its [h, 3, h] view).
    Value qkv =
        linear(prefix + ".attn.qkv", x, h, 3 * h, normal({h, 3 * h}), bias);
    q = slice(prefix + ".attn.qkv", qkv, 0, h);
    k = slice(prefix + ".attn.qkv", qkv, h, h);
    v = slice(prefix + ".attn.qkv", qkv, 2 * h, h);
  } else {
    // Grouped-query attention: the queries' projection, and one for the
    // fewer key and value heads ([K | V], split over tp in its [h, 2, kv]
    // view).
    q = linear(prefix + ".attn.q", x, h, h, normal({h, h}), bias);
    Value kvProj =
        linear(prefix + ".attn.kv", x, h, 2 * kv, normal({h, 2 * kv}), bias);
    k = slice(prefix + ".attn.kv", kvProj, 0, kv);
    v = slice(prefix + ".attn.kv", kvProj, kv, kv);
  }
  if (config.rotary) {
    auto rotate = [&](const char *name, Value t) -> Value {
      return RotaryOp::create(builder, named(prefix + name), t.getType(), t,
                              builder.getI64IntegerAttr(d),
                              builder.getI64IntegerAttr(config.rotaryDims()),
                              builder.getF64FloatAttr(config.rotaryEmbBase),
                              UnitAttr());
    };
    q = rotate(".attn.rotary_q", q);
    k = rotate(".attn.rotary_k", k);
  }
  if (kv != h) {
    const int64_t repeats = config.numAttentionHeads / config.kvHeads();
    auto repeat = [&](const char *name, Value t) -> Value {
      return RepeatHeadsOp::create(builder, named(prefix + name),
                                   floatTensor({b, s, h}), t,
                                   builder.getI64IntegerAttr(d),
                                   builder.getI64IntegerAttr(repeats));
    };
    k = repeat(".attn.repeat_k", k);
    v = repeat(".attn.repeat_v", v);
  }
  return AttentionOp::create(
      builder, named(prefix + ".attn"), floatTensor({b, s, h}), q, k, v,
      builder.getI64IntegerAttr(config.numAttentionHeads),
      builder.getUnitAttr(), builder.getF64FloatAttr(config.attentionDropout),
      builder.getI64IntegerAttr(config.seed + 1000 + layer),
      /*head_axes=*/nullptr, builder.getI64IntegerAttr(config.slidingWindow));
}

Value GPTGraphBuilder::dropout(const Twine &name, Value x, double p) {
  if (p == 0.0)
    return x;
  return DropoutOp::create(
      builder, named(name), x.getType(), x, builder.getF64FloatAttr(p),
      builder.getI64IntegerAttr(config.seed + dropoutSeed++),
      /*shard_axes=*/nullptr);
}

Value GPTGraphBuilder::block(int64_t layer, Value x) {
  // The layer is an attribute, not only the ops' `h.<i>` name locations:
  // printing drops those unless asked to keep debug information, and the
  // pipeline cut and recompute must find the layers in any printed module.
  Block *body = builder.getInsertionBlock();
  Operation *before = body->empty() ? nullptr : &body->back();
  Value y = blockOps(layer, x);
  auto mark = builder.getI64IntegerAttr(layer);
  for (Operation &op : llvm::make_range(
           before ? std::next(before->getIterator()) : body->begin(),
           body->end()))
    op.setAttr(kLayerAttr, mark);
  return y;
}

Value GPTGraphBuilder::blockOps(int64_t layer, Value x) {
  std::string prefix = "h." + std::to_string(layer);
  int64_t h = config.hiddenSize;

  // Attention sub-block: proj(attn(ln_1(x))).
  Value ln1 = norm(prefix + ".ln_1", x);
  Value attn = attention(prefix, layer, ln1);
  Value proj = linear(prefix + ".attn.proj", attn, h, h, scaledNormal({h, h}),
                      config.attentionBias);
  proj = dropout(prefix + ".attn.dropout", proj, config.hiddenDropout);
  // Sequential: the MLP reads x + attention. Parallel (gpt_j_residual): it
  // reads the block's input, and both branches add to it.
  Value mlpInput = x;
  if (!config.parallelResidual)
    x = mlpInput =
        AddOp::create(builder, named(prefix + ".attn.residual"), x, proj);

  Value ln2 = config.parallelResidualTied ? ln1
                                          : norm(prefix + ".ln_2", mlpInput);
  Value down = config.isMoeLayer(layer) ? moeMlp(prefix, layer, ln2)
                                        : mlp(prefix, ln2);
  down = dropout(prefix + ".mlp.dropout", down, config.hiddenDropout);
  if (config.parallelResidual)
    down = AddOp::create(builder, named(prefix + ".parallel"), proj, down);
  return AddOp::create(builder, named(prefix + ".mlp.residual"), x, down);
}

Value GPTGraphBuilder::mlp(const std::string &prefix, Value x) {
  // proj(gelu(fc(x))), or with SwiGLU proj(swiglu(fc(x))) where fc is
  // [up | gate].
  const int64_t b = config.microBatchSize, s = config.seqLength;
  const int64_t h = config.hiddenSize;
  const int64_t f = config.ffnWidth(), fc = config.swiglu ? 2 * f : f;
  Value hidden =
      linear(prefix + ".mlp.fc", x, h, fc, normal({h, fc}), config.mlpBias);
  if (config.swiglu)
    hidden = SwigluOp::create(builder, named(prefix + ".mlp.swiglu"),
                              floatTensor({b, s, f}), hidden);
  else
    hidden = GeluOp::create(builder, named(prefix + ".mlp.gelu"), hidden,
                            config.exactGelu);
  return linear(prefix + ".mlp.proj", hidden, f, h, scaledNormal({f, h}),
                config.mlpBias);
}

Value GPTGraphBuilder::moeMlp(const std::string &prefix, int64_t layer,
                              Value x) {
  // The router's logits x · Wg (no bias), its choice of slots, the tokens
  // gathered into [E, C, h], each expert's MLP as one batched product per
  // projection ([E, h, fc] and [E, f, h] weights, no biases), and the
  // slots' rows summed back into their tokens with the gates.
  const int64_t b = config.microBatchSize, s = config.seqLength;
  const int64_t h = config.hiddenSize, e = config.moeNumExperts;
  const int64_t k = config.moeTopK, c = config.moeCapacity();
  const int64_t f = config.ffnWidth(), fc = config.swiglu ? 2 * f : f;
  const std::string name = prefix + ".mlp";
  Value router = param(name + ".router.weight", {h, e}, normal({h, e}));
  Value logits = MatmulOp::create(builder, named(name + ".router"),
                                  floatTensor({b, s, e}), x, router,
                                  /*transpose_lhs=*/false,
                                  /*transpose_rhs=*/false);
  // DeepSpeed's gates: top-1 (weights not renormalized, first choices in
  // l_aux, random token selection), top-2 (renormalized after dropping,
  // first choices take the first slots) and top-k (all choices count, in
  // token order, the most probable kept, l_aux / k); Mixtral's
  // (renormalized over the chosen, all choices count); GPT-NeoX's dropless
  // top-k (the scores as they are).
  MoeNormalize normalize = MoeNormalize::None;
  MoeSlotOrder order = MoeSlotOrder::TokenMajor;
  MoeAuxCounts counts = MoeAuxCounts::AllChoices;
  MoeDropPolicy drop = MoeDropPolicy::Position;
  double auxScale = 1.0;
  switch (config.moeGating) {
  case GPTConfig::MoeGating::DeepSpeed:
    if (k == 1) {
      counts = MoeAuxCounts::FirstChoice;
      if (config.moeRandomTokenSelection)
        drop = MoeDropPolicy::Random;
    } else if (k == 2) {
      normalize = MoeNormalize::AfterDrop;
      order = MoeSlotOrder::ChoiceMajor;
      counts = MoeAuxCounts::FirstChoice;
    } else {
      normalize = MoeNormalize::AfterDrop;
      drop = MoeDropPolicy::Probability;
      auxScale = 1.0 / double(k);
    }
    break;
  case GPTConfig::MoeGating::Mixtral:
    normalize = MoeNormalize::BeforeDrop;
    break;
  case GPTConfig::MoeGating::NeoXDropless:
    break;
  }
  auto route = MoeRouteOp::create(
      builder, named(name + ".route"),
      RankedTensorType::get({e, c}, builder.getI32Type()),
      floatTensor({e, c}), floatTensor({}), logits,
      builder.getI64IntegerAttr(k), builder.getI64IntegerAttr(c),
      config.moeDropTokens ? builder.getUnitAttr() : UnitAttr(), normalize,
      drop, order, counts,
      builder.getF64FloatAttr(config.moeLossCoeff * auxScale),
      /*z_coeff=*/builder.getF64FloatAttr(0.0),
      builder.getI64IntegerAttr(config.seed + 2000 + layer));
  auxiliaryLosses.push_back(route.getAux());
  Value xe = MoeDispatchOp::create(builder, named(name + ".dispatch"),
                                   floatTensor({e, c, h}), x,
                                   route.getSlots(), Value());
  auto expertLinear = [&](const char *what, Value in, int64_t from, int64_t to,
                          InitAttr init) -> Value {
    Value w = param(name + ".experts." + what + ".weight", {e, from, to}, init);
    return MatmulOp::create(builder, named(name + ".experts." + what),
                            floatTensor({e, c, to}), in, w,
                            /*transpose_lhs=*/false, /*transpose_rhs=*/false);
  };
  Value hidden = expertLinear("fc", xe, h, fc, normal({e, h, fc}));
  if (config.swiglu)
    hidden = SwigluOp::create(builder, named(name + ".experts.swiglu"),
                              floatTensor({e, c, f}), hidden);
  else
    hidden = GeluOp::create(builder, named(name + ".experts.gelu"), hidden,
                            config.exactGelu);
  Value ye = expertLinear("proj", hidden, f, h, scaledNormal({e, f, h}));
  return MoeCombineOp::create(builder, named(name + ".combine"),
                              floatTensor({b, s, h}), ye, route.getSlots(),
                              route.getGates());
}

OwningOpRef<ModuleOp> GPTGraphBuilder::build() {
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  moduleBuilder.setInsertionPointToEnd(module->getBody());

  int64_t b = config.microBatchSize, s = config.seqLength;
  int64_t h = config.hiddenSize, v = config.vocabSize;
  auto tokensType = RankedTensorType::get({b, s}, builder.getI32Type());
  auto lossType = floatTensor({});

  // Parameters are declared before the function, in the order they are
  // first used, so that the module reads top to bottom like the model.
  OpBuilder::InsertionGuard guard(moduleBuilder);
  auto func = func::FuncOp::create(
      fileLoc, "loss",
      builder.getFunctionType({tokensType, tokensType}, {lossType}));
  Block *entry = func.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  Value tokens = entry->getArgument(0), targets = entry->getArgument(1);

  // Both tables are read before the embeddings are computed (the order of
  // the plan's buffers and instructions follows it).
  Value wte = param("wte.weight", {v, h}, normal({v, h}));
  Value wpe = config.learnedPositions
                  ? param("wpe.weight", {config.maxPositionEmbeddings, h},
                          normal({config.maxPositionEmbeddings, h}))
                  : Value();
  Value x = EmbeddingOp::create(builder, named("wte"), floatTensor({b, s, h}),
                                wte, tokens);
  if (wpe) {
    Value pos = PositionEmbeddingOp::create(builder, named("wpe"),
                                            floatTensor({b, s, h}), wpe);
    x = AddOp::create(builder, named("wpe"), x, pos);
  }
  x = dropout("drop", x, config.hiddenDropout);

  for (int64_t layer = 0; layer < config.numLayers; ++layer)
    x = block(layer, x);

  x = norm("ln_f", x);
  Value head = config.tieWordEmbeddings
                   ? wte
                   : param("lm_head.weight", {v, h}, normal({v, h}));
  Value logits =
      MatmulOp::create(builder, named("lm_head"), floatTensor({b, s, v}), x,
                       head, /*transpose_lhs=*/false,
                       /*transpose_rhs=*/true);
  // A padded vocabulary's rows are not classes: they take no probability
  // and never count in the loss.
  const int64_t classes =
      config.tokenizerVocabSize && config.tokenizerVocabSize < v
          ? config.tokenizerVocabSize
          : 0;
  Value loss =
      CrossEntropyOp::create(builder, named("loss"), lossType, logits, targets,
                             builder.getI64IntegerAttr(classes));
  // The MoE layers' auxiliary losses train the routers; the reported loss
  // stays the language model's.
  if (!auxiliaryLosses.empty())
    loss = AuxiliaryLossOp::create(builder, named("loss"), lossType, loss,
                                   auxiliaryLosses);
  func::ReturnOp::create(builder, fileLoc, loss);
  module->getBody()->push_back(func);

  // The model's shape, for analyses (plan search) that reason in closed form.
  SmallVector<NamedAttribute> shape;
  auto add = [&](StringRef name, int64_t value) {
    shape.push_back(
        builder.getNamedAttr(name, builder.getI64IntegerAttr(value)));
  };
  add("num_layers", config.numLayers);
  add("hidden_size", h);
  add("num_attention_heads", config.numAttentionHeads);
  add("seq_length", s);
  add("max_position_embeddings", config.maxPositionEmbeddings);
  add("vocab_size", v);
  if (config.tokenizerVocabSize)
    add("tokenizer_vocab_size", config.tokenizerVocabSize);
  add("micro_batch_size", b);
  add("parameters", config.expectedParameters());
  // The family's departures from GPT-2's block, for the cost model.
  if (config.ffnWidth() != 4 * h)
    add("ffn_hidden_size", config.ffnWidth());
  if (config.kvHeads() != config.numAttentionHeads)
    add("num_kv_heads", config.kvHeads());
  if (config.swiglu)
    shape.push_back(
        builder.getNamedAttr("gated_mlp", builder.getBoolAttr(true)));
  if (config.isMoe()) {
    add("num_experts", config.moeNumExperts);
    add("moe_top_k", config.moeTopK);
    add("moe_expert_interval", config.moeExpertInterval);
    add("moe_capacity", config.moeCapacity());
  }
  shape.push_back(builder.getNamedAttr(
      "tied_embeddings", builder.getBoolAttr(config.tieWordEmbeddings)));
  (*module)->setAttr(kModelAttr, builder.getDictionaryAttr(shape));
  return module;
}

} // namespace

OwningOpRef<ModuleOp> mlir::dsc::buildGPTGraph(const GPTConfig &config,
                                               Location loc) {
  return GPTGraphBuilder(config, loc).build();
}
