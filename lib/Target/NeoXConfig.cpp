//===- NeoXConfig.cpp - read GPT-NeoX model configs -------------*- C++ -*-===//
//
// Reads a GPT-NeoX config (YAML, or JSON, which is YAML) into a GPTConfig.
// A config is user input: every error names the key and its line.
//
//===----------------------------------------------------------------------===//

#include "dsc/Target/GPTConfig.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/YAMLParser.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <functional>

using namespace mlir;
using namespace mlir::dsc;

int64_t GPTConfig::expectedParameters() const {
  const int64_t l = numLayers, h = hiddenSize, f = ffnWidth();
  const int64_t qkv = (numAttentionHeads + 2 * kvHeads()) * headDim();
  const int64_t attention = h * qkv + h * h + (attentionBias ? qkv + h : 0);
  const int64_t fc = swiglu ? 2 * f : f;
  const int64_t mlp = h * fc + f * h + (mlpBias ? fc + h : 0);
  // A norm is a gain and, for LayerNorm, a bias.
  const int64_t norm = rmsNorm ? h : 2 * h;
  const int64_t perLayer =
      attention + mlp + (parallelResidualTied ? 1 : 2) * norm;
  const int64_t embeddings =
      (vocabSize + (learnedPositions ? maxPositionEmbeddings : 0)) * h;
  const int64_t head = tieWordEmbeddings ? 0 : vocabSize * h;
  // An MoE layer's MLP is E bias-free experts and a router [h, E].
  const int64_t moeMlp = moeNumExperts * (h * fc + f * h) + h * moeNumExperts;
  return l * perLayer + numMoeLayers() * (moeMlp - mlp) + embeddings + norm +
         head;
}

int64_t GPTConfig::moeCapacity() const {
  const int64_t tokens = microBatchSize * seqLength;
  if (!moeDropTokens)
    return tokens;
  // DeepSpeed's _capacity: ceil(T / E * cf) with cf doubled for top-2
  // and times k for top-k, at least min_capacity; the factor is a float32
  // tensor there, so the product is rounded to float as DeepSpeed's is.
  const float factor = float(moeCapacityFactor * double(moeTopK));
  const float perExpert = float(double(tokens) / double(moeNumExperts));
  const int64_t capacity = int64_t(std::ceil(perExpert * factor));
  return std::max(capacity, moeMinCapacity);
}

namespace {

/// GPT-NeoX keys that configure training, data or the launcher rather than
/// the model graph, and those that only pick a kernel for the same
/// mathematics (fusions, Transformer Engine's modules; its fp8 keys are not
/// here: fp8 changes the numbers). The model reader hands them to the
/// caller's training reader (dsc-run honors or refuses each); without one
/// they are listed in one warning, so a user knows the import did not act
/// on them.
const char *const kTrainingKeys[] = {
    "pipe_parallel_size",
    "optimizer",
    "zero_optimization",
    "train_batch_size",
    "gradient_accumulation_steps",
    "data_path",
    "train_data_paths",
    "valid_data_paths",
    "test_data_paths",
    "merge_file",
    "save",
    "load",
    "checkpoint_factor",
    "save_interval",
    "eval_interval",
    "eval_iters",
    "log_interval",
    "steps_per_print",
    "wall_clock_breakdown",
    "curriculum_learning",
    "fp16",
    "bf16",
    "fp32_allreduce",
    "precision",
    "train_iters",
    "lr_decay_iters",
    "lr_decay_style",
    "warmup",
    "min_lr",
    "gradient_clipping",
    "weight_decay",
    "distributed_backend",
    "scaled_upper_triang_masked_softmax_fusion",
    "checkpoint_activations",
    "checkpoint_num_layers",
    "partition_activations",
    "synchronize_each_layer",
    "split",
    "launcher",
    "hostfile",
    "include",
    "num_gpus",
    "data_impl",
    "use_wandb",
    "wandb_project",
    "wandb_group",
    "tensorboard_dir",
    "log_dir",
    "keep_last_n_checkpoints",
    "sparsity_config",
    "no_load_optim",
    "no_load_rng",
    "finetune",
    "contiguous_checkpointing",
    "zero_allow_untested_optimizer",
    "loss_scale",
    "loss_scale_window",
    "hysteresis",
    "min_loss_scale",
    "rope_fusion",
    "layernorm_fusion",
    "gas",
    "num_workers",
    "extra_save_iters",
    "deepspeed_extra_args",
    "use_bnb_optimizer",
    "global_num_gpus",
    "checkpoint_validation_with_forward_pass",
    "wandb_team",
    "override_lr_scheduler",
    "data_types",
    "profile",
    "log_grad_norm",
    "deepspeed_slurm",
    "text_gen_type",
    "te_columnparallel",
    "te_rowparallel",
    "te_layernorm_mlp",
    "te_mha",
    "comment",
    "decay_lr_to",
    "maximum_tokens",
    "profile_step_start",
    "use_comet",
    "wandb_host",
    "comet_project",
    "profile_step_stop",
    "prompt_end",
    "warmup_iters",
    "comet_experiment_name",
    "memory_profiling",
    "temperature",
    "comet_tags",
    "memory_profiling_path",
    "top_p",
    "comet_others",
    "top_k",
    "recompute",
    "num_samples",
    "sample_input_file",
    "sample_output_file",
    "initial_scale_power"};

/// The keys that size the vocabulary, the MLP and the norms (GPT-NeoX's
/// defaults), which depend on other keys: stored as read and
/// resolved once the whole config is read.
struct DeferredKeys {
  int64_t vocabMultiple = 128;
  int64_t modelParallelSize = 1;
  std::string vocabFile;
  std::string tokenizerType = "GPT2BPETokenizer";
  int64_t intermediateSize = 0;
  double expansionFactor = 0.0;
  int64_t mlpMultipleOf = 1;
  bool normBias = true;
  /// Mixture of Experts: GPT-NeoX's two implementations and their keys,
  /// checked together once read (validateMoe).
  std::string moeType = "megablocks";
  std::string moeRouterType = "sinkhorn";
  std::optional<double> moeEvalCapacityFactor;
  bool moeUseResidual = true;
  int64_t moeExpertParallelSize = 1;
  std::string moeJitterEps;
  bool moeExpertTensorParallelism = false;
  bool moeGlu = false;
};

/// The model keys dsc reads, with how to store each. String keys take one
/// of supportedValues(key); Text keys any string.
struct KeySpec {
  enum class Kind { Int, Float, Bool, String, Text };
  Kind kind;
  bool required;
  std::function<void(GPTConfig &, int64_t, double, bool, StringRef)> store;
};

llvm::StringMap<KeySpec> buildModelKeys(DeferredKeys &deferred) {
  using K = KeySpec::Kind;
  llvm::StringMap<KeySpec> keys;
  auto intKey = [&](StringRef name, bool required, int64_t GPTConfig::*field) {
    keys[name] = {K::Int, required,
                  [field](GPTConfig &c, int64_t i, double, bool, StringRef) {
                    c.*field = i;
                  }};
  };
  auto floatKey = [&](StringRef name, double GPTConfig::*field) {
    keys[name] = {K::Float, false,
                  [field](GPTConfig &c, int64_t, double d, bool, StringRef) {
                    c.*field = d;
                  }};
  };
  intKey("num_layers", true, &GPTConfig::numLayers);
  intKey("hidden_size", true, &GPTConfig::hiddenSize);
  intKey("num_attention_heads", true, &GPTConfig::numAttentionHeads);
  intKey("seq_length", true, &GPTConfig::seqLength);
  intKey("vocab_size", false, &GPTConfig::vocabSize);
  intKey("max_position_embeddings", false, &GPTConfig::maxPositionEmbeddings);
  intKey("train_micro_batch_size_per_gpu", false, &GPTConfig::microBatchSize);
  intKey("seed", false, &GPTConfig::seed);
  floatKey("init_method_std", &GPTConfig::initMethodStd);
  floatKey("hidden_dropout", &GPTConfig::hiddenDropout);
  floatKey("attention_dropout", &GPTConfig::attentionDropout);
  floatKey("layernorm_epsilon", &GPTConfig::layerNormEpsilon);
  floatKey("rms_norm_epsilon", &GPTConfig::rmsNormEpsilon);
  floatKey("rotary_pct", &GPTConfig::rotaryPct);
  floatKey("rotary_emb_base", &GPTConfig::rotaryEmbBase);
  // GPT-NeoX's `activation: gelu` is F.gelu (erf) unless bias_gelu_fusion
  // selects its fused kernel, which computes the tanh form
  // (megatron/model/activations.py): the key changes the mathematics.
  keys["bias_gelu_fusion"] = {K::Bool, false,
                              [](GPTConfig &c, int64_t, double, bool b,
                                 StringRef) { c.exactGelu = !b; }};
  // onnx_safe selects erf_gelu, the same erf GELU written without F.gelu.
  keys["onnx_safe"] = {
      K::Bool, false,
      [](GPTConfig &c, int64_t, double, bool b, StringRef) { c.onnxSafe = b; }};
  // The vocabulary: its size from vocab_size, the command line or the
  // tokenizer file, then padded (validate, resolveVocabulary).
  keys["make_vocab_size_divisible_by"] = {
      K::Int, false,
      [&deferred](GPTConfig &, int64_t i, double, bool, StringRef) {
        deferred.vocabMultiple = i;
      }};
  keys["model_parallel_size"] = {
      K::Int, false,
      [&deferred](GPTConfig &, int64_t i, double, bool, StringRef) {
        deferred.modelParallelSize = i;
      }};
  keys["vocab_file"] = {
      K::Text, false,
      [&deferred](GPTConfig &, int64_t, double, bool, StringRef v) {
        deferred.vocabFile = v.str();
      }};
  keys["tokenizer_type"] = {
      K::Text, false,
      [&deferred](GPTConfig &, int64_t, double, bool, StringRef v) {
        deferred.tokenizerType = v.str();
      }};
  keys["no_weight_tying"] = {K::Bool, false,
                             [](GPTConfig &c, int64_t, double, bool b,
                                StringRef) { c.tieWordEmbeddings = !b; }};
  // Architecture choices dsc supports one value of today; they are checked
  // (not ignored) so that a config asking for RMSNorm or rotary embeddings
  // fails loudly instead of silently training a different model.
  keys["activation"] = {K::String, false,
                        [](GPTConfig &c, int64_t, double, bool, StringRef v) {
                          c.swiglu = v.lower() == "swiglu";
                        }};
  intKey("num_kv_heads", false, &GPTConfig::numKvHeads);
  intKey("sliding_window_width", false, &GPTConfig::slidingWindow);
  keys["intermediate_size"] = {
      K::Int, false,
      [&deferred](GPTConfig &, int64_t i, double, bool, StringRef) {
        deferred.intermediateSize = i;
      }};
  keys["expansion_factor"] = {
      K::Float, false,
      [&deferred](GPTConfig &, int64_t, double d, bool, StringRef) {
        deferred.expansionFactor = d;
      }};
  keys["mlp_multiple_of"] = {
      K::Int, false,
      [&deferred](GPTConfig &, int64_t i, double, bool, StringRef) {
        deferred.mlpMultipleOf = i;
      }};
  keys["use_bias_in_attn_linear"] = {K::Bool, false,
                                     [](GPTConfig &c, int64_t, double, bool b,
                                        StringRef) { c.attentionBias = b; }};
  keys["use_bias_in_mlp"] = {
      K::Bool, false,
      [](GPTConfig &c, int64_t, double, bool b, StringRef) { c.mlpBias = b; }};
  keys["use_bias_in_norms"] = {
      K::Bool, false,
      [&deferred](GPTConfig &, int64_t, double, bool b, StringRef) {
        deferred.normBias = b;
      }};
  keys["pos_emb"] = {K::String, false,
                     [](GPTConfig &c, int64_t, double, bool, StringRef v) {
                       c.learnedPositions = v.lower() == "learned";
                       c.rotary = v.lower() == "rotary";
                     }};
  keys["gpt_j_residual"] = {K::Bool, false,
                            [](GPTConfig &c, int64_t, double, bool b,
                               StringRef) { c.parallelResidual = b; }};
  keys["gpt_j_tied"] = {K::Bool, false,
                        [](GPTConfig &c, int64_t, double, bool b, StringRef) {
                          c.parallelResidualTied = b;
                        }};
  keys["init_method"] = {K::String, false,
                         [](GPTConfig &c, int64_t, double, bool, StringRef v) {
                           c.initMethod = v.lower();
                         }};
  keys["output_layer_init_method"] = {
      K::String, false, [](GPTConfig &c, int64_t, double, bool, StringRef v) {
        c.outputLayerInitMethod = v.lower();
      }};
  // Megatron's row-parallel output layer is a different collective
  // pattern; dsc's LM head is vocabulary-parallel, GPT-NeoX's "column".
  keys["output_layer_parallelism"] = {K::String, false, nullptr};
  keys["norm"] = {K::String, false,
                  [](GPTConfig &c, int64_t, double, bool, StringRef v) {
                    c.rmsNorm = v.lower() == "rmsnorm";
                  }};
  // Mixture of Experts (docs/moe.md has what each implementation means).
  intKey("moe_num_experts", false, &GPTConfig::moeNumExperts);
  intKey("moe_top_k", false, &GPTConfig::moeTopK);
  intKey("moe_expert_interval", false, &GPTConfig::moeExpertInterval);
  intKey("moe_min_capacity", false, &GPTConfig::moeMinCapacity);
  floatKey("moe_loss_coeff", &GPTConfig::moeLossCoeff);
  floatKey("moe_train_capacity_factor", &GPTConfig::moeCapacityFactor);
  keys["moe_token_dropping"] = {K::Bool, false,
                                [](GPTConfig &c, int64_t, double, bool b,
                                   StringRef) { c.moeDropTokens = b; }};
  keys["moe_type"] = {K::String, false,
                      [&deferred](GPTConfig &, int64_t, double, bool,
                                  StringRef v) { deferred.moeType = v.lower(); }};
  keys["moe_router_type"] = {
      K::String, false, [&deferred](GPTConfig &, int64_t, double, bool,
                                    StringRef v) {
        deferred.moeRouterType = v.lower();
      }};
  keys["moe_eval_capacity_factor"] = {
      K::Float, false, [&deferred](GPTConfig &, int64_t, double d, bool,
                                   StringRef) {
        deferred.moeEvalCapacityFactor = d;
      }};
  keys["moe_use_residual"] = {K::Bool, false,
                              [&deferred](GPTConfig &, int64_t, double, bool b,
                                          StringRef) {
                                deferred.moeUseResidual = b;
                              }};
  keys["moe_expert_parallel_size"] = {
      K::Int, false, [&deferred](GPTConfig &, int64_t i, double, bool,
                                 StringRef) {
        deferred.moeExpertParallelSize = i;
      }};
  keys["moe_jitter_eps"] = {K::Text, false,
                            [&deferred](GPTConfig &, int64_t, double, bool,
                                        StringRef v) {
                              deferred.moeJitterEps = v.str();
                            }};
  keys["enable_expert_tensor_parallelism"] = {
      K::Bool, false, [&deferred](GPTConfig &, int64_t, double, bool b,
                                  StringRef) {
        deferred.moeExpertTensorParallelism = b;
      }};
  keys["moe_glu"] = {K::Bool, false,
                     [&deferred](GPTConfig &, int64_t, double, bool b,
                                 StringRef) { deferred.moeGlu = b; }};
  // The same mathematics whatever their value: dsc's routers and their
  // losses are always fp32 (moe_lbl_in_fp32), Tutel is a kernel library,
  // and an MoE parameter group holds the same optimizer settings.
  keys["moe_lbl_in_fp32"] = {K::Bool, false, nullptr};
  keys["use_tutel"] = {K::Bool, false, nullptr};
  keys["create_moe_param_group"] = {K::Bool, false, nullptr};
  return keys;
}

/// The values each architecture key may have.
std::vector<StringRef> supportedValues(StringRef key) {
  if (key == "norm")
    return {"layernorm", "rmsnorm"};
  if (key == "activation")
    return {"gelu", "swiglu"};
  if (key == "output_layer_parallelism")
    return {"column"};
  if (key == "moe_type")
    return {"megablocks", "deepspeed"};
  if (key == "moe_router_type")
    return {"topk", "sinkhorn"};
  // Orthogonal and uniform draws are GPT-NeoX methods dsc has no
  // initializer for yet: refused, not replaced by another.
  if (key == "init_method" || key == "output_layer_init_method")
    return {"normal", "scaled_normal", "small_init", "wang_init",
            "xavier_normal"};
  return {"learned", "rotary", "none"};
}

/// A YAML scalar as JSON: an unquoted one is a boolean (YAML 1.1's and
/// Python's spellings, which GPT-NeoX configs use), null, an integer or a
/// number when it reads as one; anything else, or quoted, is a string.
llvm::json::Value scalarToJson(llvm::yaml::ScalarNode &scalar) {
  SmallString<32> storage;
  StringRef text = scalar.getValue(storage);
  StringRef raw = scalar.getRawValue();
  if (raw.starts_with("\"") || raw.starts_with("'"))
    return text.str();
  StringRef lower = text.trim();
  if (llvm::is_contained({"true", "True", "TRUE", "yes", "Yes"}, lower))
    return true;
  if (llvm::is_contained({"false", "False", "FALSE", "no", "No"}, lower))
    return false;
  if (llvm::is_contained({"null", "None", "~", ""}, lower))
    return nullptr;
  int64_t asInt = 0;
  if (!lower.getAsInteger(10, asInt))
    return asInt;
  double asDouble = 0;
  if (!lower.getAsDouble(asDouble))
    return asDouble;
  return text.str();
}

/// A YAML value as JSON (mappings as objects, sequences as arrays), read
/// once: the parser visits each node a single time.
llvm::json::Value yamlToJson(llvm::yaml::Node *node) {
  if (auto *scalar = dyn_cast_or_null<llvm::yaml::ScalarNode>(node))
    return scalarToJson(*scalar);
  if (auto *block = dyn_cast_or_null<llvm::yaml::BlockScalarNode>(node))
    return block->getValue().str();
  if (auto *map = dyn_cast_or_null<llvm::yaml::MappingNode>(node)) {
    llvm::json::Object object;
    for (llvm::yaml::KeyValueNode &entry : *map) {
      auto *key = dyn_cast_or_null<llvm::yaml::ScalarNode>(entry.getKey());
      SmallString<32> storage;
      std::string name = key ? key->getValue(storage).str() : "";
      llvm::json::Value value = yamlToJson(entry.getValue());
      if (key)
        object[name] = std::move(value);
    }
    return object;
  }
  if (auto *list = dyn_cast_or_null<llvm::yaml::SequenceNode>(node)) {
    llvm::json::Array array;
    for (llvm::yaml::Node &item : *list)
      array.push_back(yamlToJson(&item));
    return array;
  }
  return nullptr;
}

const char *const kPlanShapingKeys[] = {"model_parallel_size",
                                        "moe_expert_parallel_size"};

/// The model keys a training reader also needs.
bool trainingAlsoReads(StringRef key) {
  return key == "seed" || llvm::is_contained(kPlanShapingKeys, key) ||
         key == "train_micro_batch_size_per_gpu";
}

class NeoXConfigReader {
public:
  NeoXConfigReader(llvm::SourceMgr &sourceMgr, MLIRContext *context,
                   const NeoXImportOptions &options, NeoXTrainingKeys *training)
      : sourceMgr(sourceMgr), context(context),
        bufferId(sourceMgr.getMainFileID()), options(options),
        training(training) {}

  std::optional<GPTConfig> read();

private:
  /// The config file holding `point` (GPT-NeoX merges several).
  unsigned bufferOf(llvm::SMLoc point) {
    unsigned id = sourceMgr.FindBufferContainingLoc(point);
    return id ? id : bufferId;
  }
  Location locOf(llvm::SMLoc point) {
    const unsigned id = bufferOf(point);
    auto [line, column] = sourceMgr.getLineAndColumn(point, id);
    return FileLineColLoc::get(
        context, sourceMgr.getMemoryBuffer(id)->getBufferIdentifier(), line,
        column);
  }
  Location locOf(llvm::yaml::Node *node) {
    return locOf(node->getSourceRange().Start);
  }
  /// Where key `name` was written, or the start of the config.
  Location locOfKey(StringRef name) {
    auto it = keyLocations.find(name);
    return it == keyLocations.end() ? locOf(rootLoc) : locOf(it->second);
  }

  LogicalResult readEntry(llvm::yaml::KeyValueNode &entry);
  /// Hands `key`'s value, with its line, to the training reader.
  void keepForTraining(StringRef key, llvm::yaml::Node *keyNode,
                       llvm::json::Value value) {
    const llvm::SMLoc at = keyNode->getSourceRange().Start;
    training->lines[key] = sourceMgr.getLineAndColumn(at, bufferOf(at)).first;
    training->files[key] =
        sourceMgr.getMemoryBuffer(bufferOf(at))->getBufferIdentifier().str();
    // An ObjectKey made from a StringRef would not own its text.
    training->values[key.str()] = std::move(value);
  }
  LogicalResult readAttentionConfig(llvm::yaml::Node *value);
  /// Reads the config file in buffer `id`.
  LogicalResult readFile(unsigned id);
  LogicalResult validate();
  LogicalResult resolveVocabulary();
  LogicalResult resolveMlpWidth();
  LogicalResult validateMoe();
  std::string suggestKey(StringRef key);

  llvm::SourceMgr &sourceMgr;
  MLIRContext *context;
  unsigned bufferId;
  NeoXImportOptions options;
  NeoXTrainingKeys *training;
  llvm::SMLoc rootLoc, mainRoot;
  llvm::yaml::Stream *stream = nullptr;
  GPTConfig config;
  DeferredKeys deferred;
  llvm::StringMap<KeySpec> modelKeys = buildModelKeys(deferred);
  llvm::StringMap<llvm::SMLoc> keyLocations;
  SmallVector<std::string> ignoredKeys;
  /// The layers attention_config lists (-1: no attention_config).
  int64_t attentionConfigLayers = -1;
};

std::string NeoXConfigReader::suggestKey(StringRef key) {
  std::string best;
  unsigned bestDistance = 4;
  auto consider = [&](StringRef candidate) {
    unsigned distance = key.edit_distance(candidate);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = candidate.str();
    }
  };
  for (const auto &entry : modelKeys)
    consider(entry.getKey());
  for (const char *name : kTrainingKeys)
    consider(name);
  return best;
}

/// GPT-NeoX's attention_config, [[[types], repeats], ...] over the layers:
/// "global" and "flash" are the same dense causal attention (flash is a
/// kernel); the sparse and local types are other models, refused by name.
LogicalResult NeoXConfigReader::readAttentionConfig(llvm::yaml::Node *value) {
  auto fail = [&](llvm::yaml::Node *at) {
    emitError(locOf(at)) << "'attention_config' must be a list of "
                            "[[types...], layer count] pairs";
    return failure();
  };
  auto *list = dyn_cast_or_null<llvm::yaml::SequenceNode>(value);
  if (!list)
    return fail(value);
  attentionConfigLayers = 0;
  for (llvm::yaml::Node &entryNode : *list) {
    auto *entry = dyn_cast<llvm::yaml::SequenceNode>(&entryNode);
    if (!entry)
      return fail(&entryNode);
    // The parser reads nodes as they are visited: each part is read
    // before the next is reached.
    int64_t part = 0, count = 0, typeCount = 0;
    for (llvm::yaml::Node &partNode : *entry) {
      if (part++ == 0) {
        auto *types = dyn_cast<llvm::yaml::SequenceNode>(&partNode);
        if (!types)
          return fail(&partNode);
        for (llvm::yaml::Node &typeNode : *types) {
          auto *type = dyn_cast<llvm::yaml::ScalarNode>(&typeNode);
          SmallString<16> typeStorage;
          StringRef name = type ? type->getValue(typeStorage) : StringRef();
          if (name != "global" && name != "flash") {
            emitError(locOf(&typeNode))
                << "'attention_config' type '" << name
                << "' is not supported; dsc builds dense causal attention "
                   "('global', or 'flash', the same mathematics)";
            return failure();
          }
          ++typeCount;
        }
        continue;
      }
      auto *repeats = dyn_cast<llvm::yaml::ScalarNode>(&partNode);
      SmallString<16> storage;
      if (!repeats || repeats->getValue(storage).getAsInteger(10, count) ||
          count < 1)
        return fail(&partNode);
    }
    if (part != 2)
      return fail(entry);
    if (typeCount == 0)
      return fail(entry);
    // GPT-NeoX's expand_attention_types: [[types], n] repeats the list of
    // types n times, one layer per type.
    attentionConfigLayers += count * typeCount;
  }
  return success(!stream->failed());
}

LogicalResult NeoXConfigReader::readEntry(llvm::yaml::KeyValueNode &entry) {
  // After a syntax error the parser hands out null nodes; the error itself
  // was already reported by the YAML parser.
  llvm::yaml::Node *rawKey = entry.getKey();
  if (!rawKey || stream->failed())
    return failure();
  auto *keyNode = dyn_cast<llvm::yaml::ScalarNode>(rawKey);
  if (!keyNode) {
    emitError(locOf(rawKey)) << "config keys must be plain strings";
    return failure();
  }
  SmallString<32> keyStorage;
  std::string key = keyNode->getValue(keyStorage).str();
  std::replace(key.begin(), key.end(), '-', '_');
  llvm::yaml::Node *valueNode = entry.getValue();
  if (!valueNode || stream->failed())
    return failure();

  auto [previous, inserted] =
      keyLocations.try_emplace(key, keyNode->getSourceRange().Start);
  if (!inserted) {
    const unsigned first = bufferOf(previous->second);
    auto [line, column] = sourceMgr.getLineAndColumn(previous->second, first);
    if (first == bufferOf(keyNode->getSourceRange().Start)) {
      emitError(locOf(keyNode)) << "key '" << key << "' is given twice (first "
                                << "at line " << line << ")";
      return failure();
    }
    // GPT-NeoX refuses a key two of its config files set (whatever the
    // values); it compares the keys as written, so 'train-iters' after
    // 'train_iters' slips through there: dsc compares them as one.
    emitError(locOf(keyNode))
        << "key '" << key << "' is also set by the config file '"
        << sourceMgr.getMemoryBuffer(first)->getBufferIdentifier() << "' (line "
        << line << "); GPT-NeoX refuses a key that two config files repeat";
    return failure();
  }

  if (key == "attention_config")
    return readAttentionConfig(valueNode);

  auto spec = modelKeys.find(key);
  if (spec == modelKeys.end()) {
    if (llvm::is_contained(kTrainingKeys, StringRef(key))) {
      if (training) {
        keepForTraining(key, keyNode, yamlToJson(valueNode));
        return failure(stream->failed());
      }
      ignoredKeys.push_back(key);
      valueNode->skip();
      return failure(stream->failed());
    }
    InFlightDiagnostic diag = emitError(locOf(keyNode))
                              << "unknown key '" << keyNode->getRawValue()
                              << "' in GPT-NeoX config";
    if (std::string suggestion = suggestKey(key); !suggestion.empty())
      diag << "; did you mean '" << suggestion << "'?";
    return failure();
  }

  auto *scalar = dyn_cast_or_null<llvm::yaml::ScalarNode>(valueNode);
  if (!scalar) {
    emitError(locOf(valueNode)) << "key '" << key << "' needs a scalar value";
    return failure();
  }
  SmallString<32> valueStorage;
  StringRef text = scalar->getValue(valueStorage).trim();
  if (training && trainingAlsoReads(key))
    keepForTraining(key, keyNode, scalarToJson(*scalar));
  int64_t asInt = 0;
  double asFloat = 0.0;
  bool asBool = false;
  switch (spec->second.kind) {
  case KeySpec::Kind::Int:
    if (text.getAsInteger(10, asInt)) {
      emitError(locOf(scalar))
          << "key '" << key << "' needs an integer, got '" << text << "'";
      return failure();
    }
    break;
  case KeySpec::Kind::Float:
    if (!llvm::to_float(text, asFloat)) {
      emitError(locOf(scalar))
          << "key '" << key << "' needs a number, got '" << text << "'";
      return failure();
    }
    break;
  case KeySpec::Kind::Bool: {
    std::string lower = text.lower();
    if (lower != "true" && lower != "false") {
      emitError(locOf(scalar))
          << "key '" << key << "' needs true or false, got '" << text << "'";
      return failure();
    }
    asBool = lower == "true";
    break;
  }
  case KeySpec::Kind::Text:
    break;
  case KeySpec::Kind::String:
    if (!llvm::is_contained(supportedValues(key), text.lower())) {
      InFlightDiagnostic diag = emitError(locOf(scalar))
                                << "'" << key << "' = '" << text
                                << "' is not supported; dsc "
                                << "builds " << key << " ";
      llvm::interleave(
          supportedValues(key), diag,
          [&](StringRef v) { diag << "'" << v << "'"; }, " or ");
      return failure();
    }
    if (!spec->second.store)
      return success();
    break;
  }
  if (spec->second.store)
    spec->second.store(config, asInt, asFloat, asBool, text);
  return success();
}

/// The tokenizer's size (the command line, vocab_size, or the vocab_file),
/// padded as GPT-NeoX's _vocab_size_with_padding pads it.
LogicalResult NeoXConfigReader::resolveVocabulary() {
  if (options.vocabSize > 0) {
    config.vocabSize = options.vocabSize;
  } else if (!keyLocations.count("vocab_size")) {
    if (deferred.vocabFile.empty()) {
      emitError(locOf(rootLoc))
          << "the vocabulary size is unknown: the config has neither "
             "'vocab_size' nor a 'vocab_file' (its tokenizer); add one, or "
             "give --import-neox-vocab-size N";
      return failure();
    }
    std::string error;
    std::optional<int64_t> size = countTokenizerVocabulary(
        deferred.vocabFile, deferred.tokenizerType, error);
    if (!size) {
      emitError(locOfKey("vocab_file")) << error;
      return failure();
    }
    config.vocabSize = *size;
  }
  if (deferred.vocabMultiple < 1 || deferred.modelParallelSize < 1) {
    emitError(locOfKey(deferred.vocabMultiple < 1
                           ? "make_vocab_size_divisible_by"
                           : "model_parallel_size"))
        << "'make_vocab_size_divisible_by' and 'model_parallel_size' must be "
           ">= 1";
    return failure();
  }
  const int64_t multiple = deferred.vocabMultiple * deferred.modelParallelSize;
  const int64_t padded =
      (config.vocabSize + multiple - 1) / multiple * multiple;
  if (config.vocabSize >= 1 && padded != config.vocabSize) {
    config.tokenizerVocabSize = config.vocabSize;
    config.vocabSize = padded;
  }
  return success();
}

/// GPT-NeoX's ParallelMLP widths: intermediate_size (or expansion_factor
/// times hidden, or 4 * hidden); a gated activation scales it by 2/3 and
/// halves it for the second projection; both round up to mlp_multiple_of
/// (the first to twice it).
LogicalResult NeoXConfigReader::resolveMlpWidth() {
  if (deferred.intermediateSize && deferred.expansionFactor > 0.0) {
    emitError(locOfKey("expansion_factor"))
        << "give 'intermediate_size' or 'expansion_factor', not both (as "
           "GPT-NeoX asks)";
    return failure();
  }
  if (deferred.mlpMultipleOf < 1 || deferred.intermediateSize < 0 ||
      deferred.expansionFactor < 0.0) {
    emitError(locOfKey("mlp_multiple_of"))
        << "'mlp_multiple_of', 'intermediate_size' and 'expansion_factor' "
           "must be positive";
    return failure();
  }
  int64_t first =
      deferred.intermediateSize ? deferred.intermediateSize
      : deferred.expansionFactor > 0.0
          ? int64_t(deferred.expansionFactor * double(config.hiddenSize))
          : 4 * config.hiddenSize;
  int64_t second = first;
  if (config.swiglu) {
    first = first * 2 / 3;
    second = first / 2;
  }
  const int64_t m = deferred.mlpMultipleOf;
  first = (first + 2 * m - 1) / (2 * m) * (2 * m);
  second = (second + m - 1) / m * m;
  if (first != (config.swiglu ? 2 : 1) * second || second < 1) {
    emitError(locOfKey(deferred.intermediateSize ? "intermediate_size"
                                                 : "mlp_multiple_of"))
        << "GPT-NeoX's MLP widths disagree: the first projection is " << first
        << " wide and the second reads " << second
        << (config.swiglu ? " (a gated MLP needs twice that)" : "")
        << "; GPT-NeoX itself cannot build this config";
    return failure();
  }
  config.ffnHiddenSize = second;
  return success();
}

LogicalResult NeoXConfigReader::validate() {
  for (const auto &entry : modelKeys)
    if (entry.second.required && !keyLocations.count(entry.getKey())) {
      std::string dashed = entry.getKey().str();
      std::replace(dashed.begin(), dashed.end(), '_', '-');
      emitError(locOf(rootLoc)) << "missing required key '" << entry.getKey()
                                << "' (or '" << dashed << "')";
      return failure();
    }
  if (!keyLocations.count("max_position_embeddings"))
    config.maxPositionEmbeddings = config.seqLength;
  if (failed(resolveVocabulary()))
    return failure();

  auto atLeastOne = [&](StringRef key, int64_t value) -> LogicalResult {
    if (value >= 1)
      return success();
    emitError(locOfKey(key)) << "'" << key << "' must be >= 1, got " << value;
    return failure();
  };
  if (failed(atLeastOne("num_layers", config.numLayers)) ||
      failed(atLeastOne("hidden_size", config.hiddenSize)) ||
      failed(atLeastOne("num_attention_heads", config.numAttentionHeads)) ||
      failed(atLeastOne("seq_length", config.seqLength)) ||
      failed(atLeastOne("vocab_size", config.vocabSize)) ||
      failed(atLeastOne("max_position_embeddings",
                        config.maxPositionEmbeddings)) ||
      failed(
          atLeastOne("train_micro_batch_size_per_gpu", config.microBatchSize)))
    return failure();
  if (config.hiddenSize % config.numAttentionHeads != 0) {
    emitError(locOfKey("num_attention_heads"))
        << "'num_attention_heads' (" << config.numAttentionHeads
        << ") must divide 'hidden_size' (" << config.hiddenSize << ")";
    return failure();
  }
  if (config.maxPositionEmbeddings < config.seqLength) {
    emitError(locOfKey("max_position_embeddings"))
        << "'max_position_embeddings' (" << config.maxPositionEmbeddings
        << ") is smaller than 'seq_length' (" << config.seqLength << ")";
    return failure();
  }
  auto probability = [&](StringRef key, double value) -> LogicalResult {
    if (value >= 0.0 && value < 1.0)
      return success();
    emitError(locOfKey(key))
        << "'" << key << "' must be in [0, 1), got " << value;
    return failure();
  };
  if (failed(probability("hidden_dropout", config.hiddenDropout)) ||
      failed(probability("attention_dropout", config.attentionDropout)))
    return failure();
  if (!(config.initMethodStd > 0.0)) {
    emitError(locOfKey("init_method_std"))
        << "'init_method_std' must be > 0, got " << config.initMethodStd;
    return failure();
  }
  if (!(config.layerNormEpsilon > 0.0)) {
    emitError(locOfKey("layernorm_epsilon"))
        << "'layernorm_epsilon' must be > 0, got " << config.layerNormEpsilon;
    return failure();
  }
  if (!(config.rmsNormEpsilon > 0.0)) {
    emitError(locOfKey("rms_norm_epsilon"))
        << "'rms_norm_epsilon' must be > 0, got " << config.rmsNormEpsilon;
    return failure();
  }
  if (failed(resolveMlpWidth()) || failed(validateMoe()))
    return failure();
  if (config.numKvHeads &&
      (config.numKvHeads < 1 ||
       config.numAttentionHeads % config.numKvHeads != 0)) {
    emitError(locOfKey("num_kv_heads"))
        << "'num_kv_heads' (" << config.numKvHeads
        << ") must divide 'num_attention_heads' (" << config.numAttentionHeads
        << ")";
    return failure();
  }
  if (config.slidingWindow < 0) {
    emitError(locOfKey("sliding_window_width"))
        << "'sliding_window_width' must be >= 1, got " << config.slidingWindow;
    return failure();
  }
  if (!deferred.normBias && !config.rmsNorm) {
    emitError(locOfKey("use_bias_in_norms"))
        << "'use_bias_in_norms' = false with 'norm' = 'layernorm' is not "
           "supported (dsc's LayerNorm has its bias; RMSNorm has none)";
    return failure();
  }
  if (attentionConfigLayers >= 0 && attentionConfigLayers != config.numLayers) {
    emitError(locOfKey("attention_config"))
        << "'attention_config' covers " << attentionConfigLayers
        << " layers, but 'num_layers' is " << config.numLayers;
    return failure();
  }
  if (config.parallelResidualTied && !config.parallelResidual) {
    // GPT-NeoX reads gpt_j_tied only inside its gpt_j_residual branch.
    emitError(locOfKey("gpt_j_tied"))
        << "'gpt_j_tied' = true needs 'gpt_j_residual' = true (it ties the "
           "parallel residual's two layer norms)";
    return failure();
  }
  if (config.onnxSafe && !config.exactGelu) {
    emitError(locOfKey("onnx_safe"))
        << "'onnx_safe' and 'bias_gelu_fusion' are not compatible (as in "
           "GPT-NeoX)";
    return failure();
  }
  if (config.rotary) {
    int64_t headDim = config.headDim(), dims = config.rotaryDims();
    if (!(config.rotaryPct > 0.0 && config.rotaryPct <= 1.0) || dims < 2 ||
        dims % 2 != 0) {
      std::string pct;
      llvm::raw_string_ostream(pct) << llvm::format("%g", config.rotaryPct);
      emitError(locOfKey("rotary_pct"))
          << "'rotary_pct' (" << pct << ") of the head's " << headDim
          << " features rotates " << dims
          << " of them; dsc needs an even number of at least 2";
      return failure();
    }
    if (!(config.rotaryEmbBase > 1.0)) {
      emitError(locOfKey("rotary_emb_base"))
          << "'rotary_emb_base' must be > 1, got " << config.rotaryEmbBase;
      return failure();
    }
  }
  return success();
}

/// GPT-NeoX's MoE keys: `moe_type: megablocks` (its default; today's
/// GPT-NeoX has only this) is ParallelDroplessMoE: nothing dropped, the
/// router's top-k softmax scores as the weights (`moe_router_type: topk`;
/// sinkhorn routing is not built); `moe_type: deepspeed` is DeepSpeed's
/// MoE layer (top-1/top-2/top-k gates with capacity, token dropping and
/// l_aux). What dsc does not build is refused by name.
LogicalResult NeoXConfigReader::validateMoe() {
  const bool moeKeys =
      llvm::any_of(keyLocations, [](const auto &entry) {
        StringRef key = entry.getKey();
        return key.starts_with("moe_") || key == "use_tutel" ||
               key == "create_moe_param_group" ||
               key == "enable_expert_tensor_parallelism";
      });
  if (!moeKeys)
    return success();
  auto refuse = [&](StringRef key, const Twine &message) {
    emitError(locOfKey(key)) << message;
    return failure();
  };
  auto g = [](double value) {
    std::string text;
    llvm::raw_string_ostream(text) << llvm::format("%g", value);
    return text;
  };
  if (config.moeNumExperts < 1)
    return refuse("moe_num_experts", "'moe_num_experts' must be >= 1, got " +
                                         Twine(config.moeNumExperts));
  if (!config.isMoe())
    return success();
  if (config.moeTopK < 1 || config.moeTopK > config.moeNumExperts)
    return refuse("moe_top_k", "'moe_top_k' (" + Twine(config.moeTopK) +
                                   ") must be in [1, moe_num_experts = " +
                                   Twine(config.moeNumExperts) + "]");
  if (config.moeExpertInterval < 1)
    return refuse("moe_expert_interval",
                  "'moe_expert_interval' must be >= 1, got " +
                      Twine(config.moeExpertInterval));
  if (!(config.moeCapacityFactor > 0.0) ||
      !std::isfinite(config.moeCapacityFactor))
    return refuse("moe_train_capacity_factor",
                  "'moe_train_capacity_factor' must be > 0, got " +
                      g(config.moeCapacityFactor));
  if (deferred.moeEvalCapacityFactor &&
      *deferred.moeEvalCapacityFactor != config.moeCapacityFactor &&
      deferred.moeType == "deepspeed" && config.moeDropTokens)
    return refuse("moe_eval_capacity_factor",
                  "'moe_eval_capacity_factor' (" +
                      g(*deferred.moeEvalCapacityFactor) +
                      ") differs from 'moe_train_capacity_factor' (" +
                      g(config.moeCapacityFactor) +
                      "); dsc evaluates with the training graph's capacity");
  if (config.moeMinCapacity < 0)
    return refuse("moe_min_capacity", "'moe_min_capacity' must be >= 0, got " +
                                          Twine(config.moeMinCapacity));
  if (!(config.moeLossCoeff >= 0.0) || !std::isfinite(config.moeLossCoeff))
    return refuse("moe_loss_coeff", "'moe_loss_coeff' must be >= 0, got " +
                                        g(config.moeLossCoeff));
  // The plan's ep (dsc-run's training reader sets it); the model is the
  // same at any ep.
  if (deferred.moeExpertParallelSize < 1)
    return refuse("moe_expert_parallel_size",
                  "'moe_expert_parallel_size' must be >= 1, got " +
                      Twine(deferred.moeExpertParallelSize));
  if (config.moeNumExperts % deferred.moeExpertParallelSize != 0)
    return refuse("moe_expert_parallel_size",
                  "'moe_num_experts' = " + Twine(config.moeNumExperts) +
                      " is not divisible by 'moe_expert_parallel_size' = " +
                      Twine(deferred.moeExpertParallelSize));
  if (deferred.moeExpertTensorParallelism)
    return refuse("enable_expert_tensor_parallelism",
                  "'enable_expert_tensor_parallelism' = true is not "
                  "supported: dsc does not slice experts over tp");
  StringRef jitter = StringRef(deferred.moeJitterEps).trim();
  double jitterValue = 0.0;
  if (!jitter.empty() && !llvm::is_contained({"null", "None", "~"}, jitter) &&
      (!llvm::to_float(jitter, jitterValue) || jitterValue != 0.0))
    return refuse("moe_jitter_eps",
                  "'moe_jitter_eps' = " + jitter +
                      " is not supported: dsc's routers have no input "
                      "jitter (leave it null)");
  if (deferred.moeGlu)
    return refuse("moe_glu", "'moe_glu' = true is not supported: dsc's "
                             "experts use the config's 'activation' (gelu, "
                             "or swiglu for a gated MLP)");
  if (deferred.moeType == "deepspeed") {
    // deepspeed.moe.layer.MoE, as GPT-NeoX 2.x builds it.
    if (deferred.moeUseResidual)
      return refuse("moe_use_residual",
                    "'moe_use_residual' is true (GPT-NeoX's default with "
                    "'moe_type' = 'deepspeed'): residual MoE (PR-MoE) is not "
                    "built yet; set 'moe_use_residual: false'");
    if (config.mlpBias)
      return refuse("use_bias_in_mlp",
                    "with 'moe_type' = 'deepspeed', GPT-NeoX's experts keep "
                    "their first projection's bias, which dsc's experts do "
                    "not have; set 'use_bias_in_mlp: false'");
    config.moeGating = GPTConfig::MoeGating::DeepSpeed;
    return success();
  }
  // ParallelDroplessMoE: no capacity, no auxiliary loss.
  if (deferred.moeRouterType == "sinkhorn")
    return refuse("moe_router_type",
                  "'moe_router_type' = 'sinkhorn' (GPT-NeoX's default) is not "
                  "built yet; 'topk' is");
  for (StringRef key : {"moe_token_dropping", "moe_train_capacity_factor",
                        "moe_eval_capacity_factor", "moe_min_capacity",
                        "moe_loss_coeff", "moe_use_residual"})
    if (keyLocations.count(key))
      return refuse(key, "'" + key +
                             "' is a key of 'moe_type' = 'deepspeed'; "
                             "GPT-NeoX's dropless MoE ('megablocks') has no "
                             "capacity and no auxiliary loss");
  config.moeGating = GPTConfig::MoeGating::NeoXDropless;
  config.moeDropTokens = false;
  config.moeLossCoeff = 0.0;
  return success();
}

LogicalResult NeoXConfigReader::readFile(unsigned id) {
  bufferId = id;
  const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(id);
  rootLoc = llvm::SMLoc::getFromPointer(buffer->getBufferStart());
  llvm::yaml::Stream yamlStream(buffer->getMemBufferRef(), sourceMgr);
  stream = &yamlStream;
  auto document = yamlStream.begin();
  if (document == yamlStream.end() || !document->getRoot() ||
      isa<llvm::yaml::NullNode>(document->getRoot())) {
    emitError(locOf(rootLoc)) << "the config is empty";
    return failure();
  }
  auto *root = dyn_cast<llvm::yaml::MappingNode>(document->getRoot());
  if (!root) {
    if (!yamlStream.failed())
      emitError(locOf(document->getRoot()))
          << "a GPT-NeoX config must be a mapping of keys to values";
    return failure();
  }
  rootLoc = root->getSourceRange().Start;
  if (id == sourceMgr.getMainFileID())
    mainRoot = rootLoc;
  for (llvm::yaml::KeyValueNode &entry : *root) {
    if (yamlStream.failed())
      break;
    if (failed(readEntry(entry))) {
      if (yamlStream.failed())
        break;
      return failure();
    }
  }
  if (yamlStream.failed()) {
    emitError(locOf(rootLoc)) << "the config is not valid YAML or JSON";
    return failure();
  }
  // Nodes die with their stream: what later checks need was copied out.
  stream = nullptr;
  return success();
}

std::optional<GPTConfig> NeoXConfigReader::read() {
  // Every buffer is a config file, merged in order as GPT-NeoX merges its
  // YAML files (deepy.py train.py a.yml b.yml): the keys of all of them.
  // (A yaml::Stream adds its own view of the buffer to the SourceMgr: the
  // files are the buffers there before the first.)
  const unsigned files = sourceMgr.getNumBuffers();
  for (unsigned id = 1; id <= files; ++id)
    if (failed(readFile(id)))
      return std::nullopt;
  bufferId = sourceMgr.getMainFileID();
  rootLoc = mainRoot;
  if (failed(validate()))
    return std::nullopt;
  if (!ignoredKeys.empty()) {
    std::string list;
    llvm::raw_string_ostream os(list);
    llvm::interleaveComma(ignoredKeys, os);
    emitWarning(locOf(rootLoc))
        << "ignored " << ignoredKeys.size()
        << " training/launcher keys that do not shape the model graph: "
        << list;
  }
  return config;
}

} // namespace

llvm::ArrayRef<const char *> mlir::dsc::neoxTrainingKeyNames() {
  return kTrainingKeys;
}

llvm::ArrayRef<const char *> mlir::dsc::neoxPlanShapingKeyNames() {
  return kPlanShapingKeys;
}

std::optional<GPTConfig>
mlir::dsc::parseNeoXConfig(llvm::SourceMgr &sourceMgr, MLIRContext *context,
                           const NeoXImportOptions &options,
                           NeoXTrainingKeys *training) {
  return NeoXConfigReader(sourceMgr, context, options, training).read();
}
