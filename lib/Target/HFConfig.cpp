//===- HFConfig.cpp - Hugging Face config.json as a GPTConfig -------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A config.json is user input: every key is honored with transformers'
// meaning, listed as having no effect on the causal LM's graph, or refused
// by name. GPT-2, GPT-NeoX, Llama, Mistral and Mixtral are the families
// whose graphs dsc builds; a known family it does not is refused naming
// what it needs.
//
//===----------------------------------------------------------------------===//

#include "dsc/Target/HFModel.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// Keys of every transformers config that do not shape a causal LM's
/// training graph: generation, tokenizer ids, output switches, bookkeeping.
const char *const kNoGraphEffect[] = {
    "_name_or_path", "architectures", "model_type", "transformers_version",
    "dtype", "torch_dtype", "use_cache", "bos_token_id", "eos_token_id",
    "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "output_attentions", "output_hidden_states", "return_dict",
    "tokenizer_class", "prefix", "task_specific_params", "id2label", "label2id",
    "problem_type", "is_encoder_decoder", "is_decoder",
    "chunk_size_feed_forward", "tie_encoder_decoder", "finetuning_task",
    // GPT2DoubleHeadsModel's and GPT2ForSequenceClassification's summary
    // head; GPT2LMHeadModel has none.
    "summary_type", "summary_use_proj", "summary_activation",
    "summary_proj_to_labels", "summary_first_dropout",
    // Attention numerics only (fp32 upcast of q·k): the same mathematics.
    "reorder_and_upcast_attn"};

/// The transformers architectures whose graph needs features dsc's graph
/// does not have yet, and what they are.
struct Pending {
  const char *architecture, *needs;
};
const Pending kPending[] = {
    {"GemmaForCausalLM", "GELU-gated MLPs, a scaled embedding and (1 + w) "
                         "RMSNorm gains"},
};

class ConfigReader {
public:
  ConfigReader(const llvm::json::Object &root, llvm::StringRef file,
               Location loc)
      : root(root), file(file), loc(loc) {}

  InFlightDiagnostic error() {
    failed = true;
    return emitError(loc) << "'" << file << "': ";
  }
  bool ok() const { return !failed; }

  std::optional<int64_t> integer(llvm::StringRef key, int64_t min = 1) {
    usedKeys.insert(key);
    std::optional<int64_t> v = root.getInteger(key);
    if (!v) {
      error() << "key '" << key << "' must be an integer"
              << (root.get(key) ? "" : " and is missing");
      return std::nullopt;
    }
    if (*v < min) {
      error() << "key '" << key << "' must be at least " << min << ", got "
              << *v;
      return std::nullopt;
    }
    return v;
  }
  /// The value at `key` read by `as` (a json::Value getter), or `fallback`
  /// when the key is absent; an error saying what it must be otherwise.
  template <typename T, typename As>
  T get(llvm::StringRef key, T fallback, const char *what, As as) {
    usedKeys.insert(key);
    const llvm::json::Value *v = root.get(key);
    if (!v)
      return fallback;
    auto x = as(*v);
    if (!x) {
      error() << "key '" << key << "' must be " << what;
      return fallback;
    }
    return T(*x);
  }
  double number(llvm::StringRef key, double fallback) {
    return get(key, fallback, "a number",
               [](const llvm::json::Value &v) { return v.getAsNumber(); });
  }
  bool boolean(llvm::StringRef key, bool fallback) {
    return get(key, fallback, "true or false",
               [](const llvm::json::Value &v) { return v.getAsBoolean(); });
  }
  std::string string(llvm::StringRef key, llvm::StringRef fallback) {
    return get(key, fallback.str(), "a string",
               [](const llvm::json::Value &v) { return v.getAsString(); });
  }
  /// The object at `key`, or null when absent (an error when not an object).
  const llvm::json::Object *object(llvm::StringRef key) {
    usedKeys.insert(key);
    const llvm::json::Value *v = root.get(key);
    if (v && !v->getAsObject() && !v->getAsNull())
      error() << "key '" << key << "' must be an object";
    return v ? v->getAsObject() : nullptr;
  }
  bool isNull(llvm::StringRef key) {
    usedKeys.insert(key);
    const llvm::json::Value *v = root.get(key);
    return !v || v->getAsNull();
  }
  /// Every key neither read nor known to have no effect is refused.
  void refuseUnknownKeys(llvm::StringRef architecture) {
    for (const auto &[key, value] : root)
      if (!usedKeys.count(key) &&
          !llvm::is_contained(kNoGraphEffect, key.str()))
        error() << "key '" << key.str() << "' of " << architecture
                << " is not supported by dsc (it would change the model, "
                   "and dsc does not build that)";
  }

private:
  const llvm::json::Object &root;
  llvm::StringRef file;
  Location loc;
  llvm::StringSet<> usedKeys;
  bool failed = false;
};

/// The shape keys GPT-NeoX's and Llama's configs share; false when one is
/// missing or the heads do not split the hidden size.
bool readCoreShape(ConfigReader &r, GPTConfig &c) {
  auto get = [&](llvm::StringRef key, int64_t &out) {
    if (std::optional<int64_t> v = r.integer(key))
      out = *v;
  };
  get("num_hidden_layers", c.numLayers);
  get("hidden_size", c.hiddenSize);
  get("num_attention_heads", c.numAttentionHeads);
  get("vocab_size", c.vocabSize);
  get("max_position_embeddings", c.maxPositionEmbeddings);
  get("intermediate_size", c.ffnHiddenSize);
  if (!r.ok())
    return false;
  if (c.hiddenSize % c.numAttentionHeads != 0) {
    r.error() << "hidden_size (" << c.hiddenSize
              << ") is not a multiple of num_attention_heads ("
              << c.numAttentionHeads << ")";
    return false;
  }
  return true;
}

/// Rotary positions from transformers 5's rope_parameters (default type
/// only; partial_rotary_factor and rope_theta), over the defaults the
/// family's own keys gave; rope_scaling is refused.
void readRope(ConfigReader &r, GPTConfig &c) {
  c.learnedPositions = false;
  c.rotary = true;
  if (const llvm::json::Object *rope = r.object("rope_parameters"))
    for (const auto &[key, value] : *rope) {
      std::optional<double> number = value.getAsNumber();
      if (key == "partial_rotary_factor" && number)
        c.rotaryPct = *number;
      else if (key == "rope_theta" && number)
        c.rotaryEmbBase = *number;
      else if (key == "rope_type" && value.getAsString() == "default")
        continue;
      else
        r.error() << "rope_parameters: '" << key.str()
                  << "' is not supported (dsc's rotary embedding is the "
                     "default type, with partial_rotary_factor and "
                     "rope_theta)";
    }
  if (!r.isNull("rope_scaling"))
    r.error() << "rope_scaling is not supported (dsc's rotary embedding is "
                 "unscaled)";
  std::string pct;
  llvm::raw_string_ostream(pct) << llvm::format("%g", c.rotaryPct);
  if (c.rotaryDims() < 2 || c.rotaryDims() % 2 != 0)
    r.error() << "the rotary share " << pct << " of the head's " << c.headDim()
              << " features is " << c.rotaryDims()
              << ", which is not an even number of at least 2";
}

/// The MLP's GELU from transformers' ACT2FN name at `key`: "gelu" is the
/// exact (erf) form, "gelu_new", "gelu_pytorch_tanh" and "gelu_fast" the
/// tanh form; anything else is refused.
void readGelu(ConfigReader &r, GPTConfig &c, llvm::StringRef key,
              llvm::StringRef fallback) {
  const std::string act = r.string(key, fallback);
  c.exactGelu = act == "gelu";
  if (act != "gelu" && act != "gelu_new" && act != "gelu_pytorch_tanh" &&
      act != "gelu_fast")
    r.error() << key << " '" << act
              << "' is not supported: dsc has the exact GELU (gelu) and its "
                 "tanh form (gelu_new, gelu_pytorch_tanh, gelu_fast)";
}

/// The training shape (sequence, micro-batch) within the model's
/// positions, then every key not read refused.
std::optional<HFModel> finishConfig(ConfigReader &r, HFModel model,
                                    const HFImportOptions &options,
                                    llvm::StringRef positionsKey) {
  GPTConfig &c = model.config;
  c.seqLength = options.seqLength ? options.seqLength : c.maxPositionEmbeddings;
  if (c.seqLength > c.maxPositionEmbeddings)
    r.error() << "the sequence length " << c.seqLength << " exceeds "
              << positionsKey << " (" << c.maxPositionEmbeddings << ")";
  c.microBatchSize = options.microBatchSize;
  // A vocabulary tensor slicing cannot divide (real GPT-2's 50257) padded
  // as Megatron pads it: the padded rows are no classes of the loss.
  if (options.vocabMultiple > 1 && c.vocabSize % options.vocabMultiple != 0) {
    c.tokenizerVocabSize = c.vocabSize;
    c.vocabSize += options.vocabMultiple - c.vocabSize % options.vocabMultiple;
  }
  r.refuseUnknownKeys(model.architecture);
  if (!r.ok())
    return std::nullopt;
  return model;
}

std::optional<HFModel> parseGPT2(ConfigReader &r, HFModel model,
                                 const HFImportOptions &options) {
  GPTConfig &c = model.config;
  auto get = [&](llvm::StringRef key, int64_t &out) {
    if (std::optional<int64_t> v = r.integer(key))
      out = *v;
  };
  get("n_layer", c.numLayers);
  get("n_embd", c.hiddenSize);
  get("n_head", c.numAttentionHeads);
  get("vocab_size", c.vocabSize);
  get("n_positions", c.maxPositionEmbeddings);
  if (!r.isNull("n_ctx")) // the old spelling of n_positions
    if (std::optional<int64_t> ctx = r.integer("n_ctx"))
      if (*ctx != c.maxPositionEmbeddings)
        r.error() << "n_ctx (" << *ctx << ") differs from n_positions ("
                  << c.maxPositionEmbeddings << ")";
  if (!r.ok())
    return std::nullopt;
  if (c.hiddenSize % c.numAttentionHeads != 0)
    r.error() << "n_embd (" << c.hiddenSize << ") is not a multiple of n_head ("
              << c.numAttentionHeads << ")";
  if (!r.isNull("n_inner"))
    if (std::optional<int64_t> inner = r.integer("n_inner"))
      if (*inner != 4 * c.hiddenSize)
        r.error() << "n_inner (" << *inner
                  << ") is not 4 * n_embd: dsc's GPT-2 MLP is 4 * n_embd wide";
  readGelu(r, c, "activation_function", "gelu_new");
  c.layerNormEpsilon = r.number("layer_norm_epsilon", 1e-5);
  c.initMethodStd = r.number("initializer_range", 0.02);
  c.hiddenDropout = r.number("resid_pdrop", 0.1);
  const double embd = r.number("embd_pdrop", 0.1);
  if (embd != c.hiddenDropout)
    r.error() << "embd_pdrop (" << embd << ") differs from resid_pdrop ("
              << c.hiddenDropout << "): dsc has one hidden dropout probability";
  c.attentionDropout = r.number("attn_pdrop", 0.1);
  c.tieWordEmbeddings = r.boolean("tie_word_embeddings", true);
  if (!r.boolean("scale_attn_weights", true))
    r.error() << "scale_attn_weights false (attention without 1/sqrt(d)) is "
                 "not supported";
  if (r.boolean("scale_attn_by_inverse_layer_idx", false))
    r.error() << "scale_attn_by_inverse_layer_idx is not supported";
  if (r.boolean("add_cross_attention", false))
    r.error() << "add_cross_attention is not supported (a decoder-only "
                 "causal LM has no encoder)";
  return finishConfig(r, std::move(model), options, "n_positions");
}

/// transformers' GPTNeoXConfig: Pythia, GPT-NeoX-20B and their kin.
std::optional<HFModel> parseGPTNeoX(ConfigReader &r, HFModel model,
                                    const HFImportOptions &options) {
  GPTConfig &c = model.config;
  if (!readCoreShape(r, c))
    return std::nullopt;
  readGelu(r, c, "hidden_act", "gelu");
  // Positions are rotary, on the first int(head_dim * pct) features of
  // each head. transformers 5 writes rope_parameters; 4.x wrote rotary_pct
  // and rotary_emb_base.
  c.rotaryPct = r.number("rotary_pct", 0.25);
  c.rotaryEmbBase = r.number("rotary_emb_base", 10000.0);
  readRope(r, c);
  c.parallelResidual = r.boolean("use_parallel_residual", true);
  c.attentionBias = r.boolean("attention_bias", true);
  c.layerNormEpsilon = r.number("layer_norm_eps", 1e-5);
  c.initMethodStd = r.number("initializer_range", 0.02);
  c.hiddenDropout = r.number("hidden_dropout", 0.0);
  c.attentionDropout = r.number("attention_dropout", 0.0);
  // classifier_dropout belongs to GPTNeoXForTokenClassification's head.
  r.number("classifier_dropout", 0.1);
  c.tieWordEmbeddings = r.boolean("tie_word_embeddings", false);
  return finishConfig(r, std::move(model), options, "max_position_embeddings");
}

/// transformers' MixtralConfig's experts: every layer's MLP is
/// num_local_experts SwiGLU experts, each token routed to
/// num_experts_per_tok of them by a softmax router whose chosen weights are
/// renormalized, nothing dropped (MixtralSparseMoeBlock).
void readMixtralExperts(ConfigReader &r, GPTConfig &c) {
  if (std::optional<int64_t> e = r.integer("num_local_experts"))
    c.moeNumExperts = *e;
  if (std::optional<int64_t> k = r.integer("num_experts_per_tok"))
    c.moeTopK = *k;
  if (c.moeTopK > c.moeNumExperts)
    r.error() << "num_experts_per_tok (" << c.moeTopK
              << ") exceeds num_local_experts (" << c.moeNumExperts << ")";
  c.moeGating = GPTConfig::MoeGating::Mixtral;
  c.moeExpertInterval = 1;
  c.moeDropTokens = false;
  c.moeRandomTokenSelection = false;
  // transformers adds router_aux_loss_coef times the load-balancing loss
  // only with output_router_logits, and pools the router logits of all
  // layers into one loss; dsc's is per layer (DeepSpeed's and
  // Megatron-LM's), so that loss is refused rather than changed.
  if (r.boolean("output_router_logits", false))
    r.error() << "output_router_logits = true is not supported: transformers "
                 "computes Mixtral's load-balancing loss over all layers' "
                 "router logits at once, dsc per layer";
  r.number("router_aux_loss_coef", 0.001); // read only with the above
  if (r.number("router_jitter_noise", 0.0) != 0.0)
    r.error() << "router_jitter_noise other than 0 is not supported (dsc's "
                 "routers have no input jitter)";
}

/// transformers' LlamaConfig and MistralConfig: RMSNorm (epsilon inside the
/// square root), rotary on whole heads, SwiGLU, grouped-query attention,
/// no biases, untied output; Mistral adds a sliding window.
std::optional<HFModel> parseLlama(ConfigReader &r, HFModel model,
                                  const HFImportOptions &options) {
  GPTConfig &c = model.config;
  if (!readCoreShape(r, c))
    return std::nullopt;
  if (!r.isNull("num_key_value_heads"))
    if (std::optional<int64_t> kv = r.integer("num_key_value_heads"))
      c.numKvHeads = *kv;
  if (!r.isNull("head_dim"))
    if (std::optional<int64_t> d = r.integer("head_dim"))
      if (*d != c.headDim())
        r.error() << "head_dim " << *d
                  << " is not hidden_size / num_attention_heads ("
                  << c.headDim() << "): dsc's heads split the hidden size";
  if (c.numKvHeads && c.numAttentionHeads % c.numKvHeads != 0)
    r.error() << "num_key_value_heads (" << c.numKvHeads
              << ") does not divide num_attention_heads ("
              << c.numAttentionHeads << ")";
  const std::string act = r.string("hidden_act", "silu");
  if (act != "silu" && act != "swish")
    r.error() << "hidden_act '" << act
              << "' is not supported: dsc's gated MLP is SwiGLU (silu)";
  c.swiglu = true;
  c.rmsNorm = true;
  c.rmsNormEpsilonInsideSqrt = true;
  c.rmsNormEpsilon = r.number("rms_norm_eps", 1e-6);
  c.rotaryPct = 1.0;
  c.rotaryEmbBase = r.number("rope_theta", 10000.0);
  readRope(r, c);
  c.attentionBias = r.boolean("attention_bias", false);
  c.mlpBias = r.boolean("mlp_bias", false);
  if (r.number("pretraining_tp", 1) != 1)
    r.error() << "pretraining_tp other than 1 is not supported (it splits "
                 "the projections' products, which change their rounding)";
  c.initMethodStd = r.number("initializer_range", 0.02);
  c.attentionDropout = r.number("attention_dropout", 0.0);
  c.hiddenDropout = 0.0;
  c.tieWordEmbeddings = r.boolean("tie_word_embeddings", false);
  if (model.architecture == "MixtralForCausalLM")
    readMixtralExperts(r, c);
  // Mistral's sliding window (query t sees keys t - W + 1 .. t). Kept even
  // when it is at least the training sequence (where it changes nothing):
  // an inference plan's contexts are longer (--dsc-compile-inference).
  if (!r.isNull("sliding_window"))
    if (std::optional<int64_t> w = r.integer("sliding_window"))
      if (*w > 0)
        c.slidingWindow = *w;
  return finishConfig(r, std::move(model), options, "max_position_embeddings");
}

} // namespace

std::optional<HFModel> mlir::dsc::parseHFConfig(llvm::StringRef text,
                                                llvm::StringRef file,
                                                const HFImportOptions &options,
                                                Location loc) {
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  if (!json) {
    emitError(loc) << "'" << file
                   << "' is not JSON: " << llvm::toString(json.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *root = json->getAsObject();
  if (!root) {
    emitError(loc) << "'" << file << "' is not a JSON object";
    return std::nullopt;
  }
  ConfigReader r(*root, file, loc);
  const llvm::json::Array *archs = root->getArray("architectures");
  if (!archs || archs->size() != 1 || !(*archs)[0].getAsString()) {
    r.error() << "key 'architectures' must list one architecture";
    return std::nullopt;
  }
  HFModel model;
  model.architecture = (*archs)[0].getAsString()->str();
  for (const Pending &p : kPending)
    if (model.architecture == p.architecture) {
      r.error() << "architecture '" << model.architecture
                << "' is not importable yet: its graph needs " << p.needs;
      return std::nullopt;
    }
  if (model.architecture == "GPTNeoXForCausalLM")
    return parseGPTNeoX(r, std::move(model), options);
  if (model.architecture == "LlamaForCausalLM" ||
      model.architecture == "MistralForCausalLM" ||
      model.architecture == "MixtralForCausalLM")
    return parseLlama(r, std::move(model), options);
  if (model.architecture != "GPT2LMHeadModel") {
    r.error() << "unknown architecture '" << model.architecture
              << "' (dsc imports GPT2LMHeadModel, GPTNeoXForCausalLM, "
                 "LlamaForCausalLM, MistralForCausalLM and "
                 "MixtralForCausalLM)";
    return std::nullopt;
  }
  return parseGPT2(r, std::move(model), options);
}
