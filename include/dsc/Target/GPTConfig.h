//===- GPTConfig.h - a GPT model configuration ------------------*- C++ -*-===//
//
// The shape and regularization of a GPT-2 / GPT-NeoX style decoder, and the
// reader of GPT-NeoX config files (YAML or JSON) that fills it in.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TARGET_GPTCONFIG_H
#define DSC_TARGET_GPTCONFIG_H

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::dsc {

/// A decoder-only transformer as GPT-NeoX describes it. Defaults follow
/// GPT-NeoX's where the config may omit a key.
struct GPTConfig {
  int64_t numLayers = 0;
  int64_t hiddenSize = 0;
  int64_t numAttentionHeads = 0;
  int64_t seqLength = 0;
  /// Rows of the learned position table; defaults to seqLength.
  int64_t maxPositionEmbeddings = 0;
  /// The embedding's rows: the tokenizer's vocabulary, padded (GPT-NeoX's
  /// padded_vocab_size).
  int64_t vocabSize = 0;
  /// The tokenizer's own size before padding (0 when not padded). The
  /// padded rows are not classes: the loss's softmax leaves them out
  /// (dsc.cross_entropy's `classes`), so they take no probability, never
  /// count in the loss and get no gradient from it; no token id names them.
  int64_t tokenizerVocabSize = 0;
  int64_t microBatchSize = 1;
  /// GPT-2 ties the output projection to the token embedding.
  bool tieWordEmbeddings = true;
  double initMethodStd = 0.02;
  /// GPT-NeoX's `init_method` (every weight but the residual branches'
  /// output projections) and `output_layer_init_method` (those): normal,
  /// scaled_normal, small_init, wang_init or xavier_normal.
  std::string initMethod = "normal";
  std::string outputLayerInitMethod = "scaled_normal";
  double hiddenDropout = 0.0;
  double attentionDropout = 0.0;
  double layerNormEpsilon = 1e-5;
  /// `norm: rmsnorm`: GPT-NeoX's RMSNorm, x / (rms(x) + eps) * gamma with
  /// no bias, in place of LayerNorm; `rms_norm_epsilon` (NeoX's 1e-8).
  bool rmsNorm = false;
  double rmsNormEpsilon = 1e-8;
  /// transformers' (Llama's) RMSNorm: x / sqrt(ms + eps) * gamma.
  bool rmsNormEpsilonInsideSqrt = false;
  /// `pos_emb: learned` (GPT-2's table, wpe), `rotary` (queries and keys
  /// rotated per head, dsc.rotary) or `none` (no position information but
  /// the causal mask).
  bool learnedPositions = true;
  bool rotary = false;
  /// `rotary_pct`: the rotated share of each head's features (the rotated
  /// count is int(head_dim * rotary_pct), as GPT-NeoX and transformers
  /// truncate it); `rotary_emb_base`: the frequencies are base^(-2i/d).
  double rotaryPct = 1.0;
  double rotaryEmbBase = 10000.0;
  /// `gpt_j_residual` (GPT-J, NeoX-20B, Pythia): attention and MLP read the
  /// same input, x + attn(ln_1(x)) + mlp(ln_2(x)); with `gpt_j_tied` both
  /// read ln_1(x) and there is no ln_2.
  bool parallelResidual = false;
  bool parallelResidualTied = false;
  /// The MLP's inner width (`intermediate_size`); 0 means 4 * hiddenSize.
  /// With swiglu, the width of each of its two halves.
  int64_t ffnHiddenSize = 0;
  /// `activation: swiglu` (Llama, Mistral): the MLP's first projection is
  /// fused [up | gate], 2f wide, and dsc.swiglu gates it.
  bool swiglu = false;
  /// `num_kv_heads`: grouped-query attention when fewer than the heads (0:
  /// as many); k and v get their own projection and dsc.repeat_heads.
  int64_t numKvHeads = 0;
  /// `sliding_window_width` (Mistral): query t attends to keys t - W + 1 ..
  /// t; 0: all earlier keys.
  int64_t slidingWindow = 0;
  /// `use_bias_in_attn_linear`, `use_bias_in_mlp`.
  bool attentionBias = true;
  bool mlpBias = true;
  /// The MLP's GELU is the exact (erf) one instead of the tanh form.
  /// GPT-NeoX's default (F.gelu); `bias_gelu_fusion` selects the tanh form.
  bool exactGelu = true;
  /// GPT-NeoX's `onnx_safe` (read to refuse it with bias_gelu_fusion).
  bool onnxSafe = false;
  /// Mixture of Experts (docs/moe.md): with moeNumExperts > 1, the MLP of
  /// every layer whose index is a multiple of moeExpertInterval is
  /// moeNumExperts experts of the same shape (no biases), each token
  /// routed to moeTopK of them by a router x · Wg (dsc.moe_route).
  int64_t moeNumExperts = 1;
  int64_t moeTopK = 1;
  int64_t moeExpertInterval = 1;
  /// The routing rules: DeepSpeed's gates (top-1, top-2 or top-k by
  /// moeTopK, each as deepspeed/moe/sharded_moe.py has it), Mixtral's
  /// (softmax, top-k, renormalized over the chosen; nothing dropped) or
  /// GPT-NeoX's dropless MoE's top-k router (the chosen softmax scores as
  /// they are; nothing dropped).
  enum class MoeGating { DeepSpeed, Mixtral, NeoXDropless };
  MoeGating moeGating = MoeGating::DeepSpeed;
  /// DeepSpeed's capacity: max(ceil(T / E * cf * k'), min) per expert of a
  /// micro-batch's T tokens (k' = 1, 2 for top-2, k for top-k); without
  /// token dropping every expert has room for all T tokens.
  double moeCapacityFactor = 1.0;
  int64_t moeMinCapacity = 4;
  bool moeDropTokens = false;
  /// DeepSpeed's random token selection for top-1 (use_rts, its
  /// default): which tokens an over-full expert keeps.
  bool moeRandomTokenSelection = true;
  /// The loss the gradient sees: lm + moeLossCoeff * (the sum over MoE
  /// layers of l_aux, as DeepSpeed and GPT-NeoX sum it); the reported loss
  /// is lm alone.
  double moeLossCoeff = 0.0;
  int64_t seed = 1234;
  /// Build the graph in f64 instead of f32 (finite-difference checks).
  bool useF64 = false;

  bool isMoe() const { return moeNumExperts > 1; }
  bool isMoeLayer(int64_t layer) const {
    return isMoe() && layer % moeExpertInterval == 0;
  }
  int64_t numMoeLayers() const {
    return isMoe() ? (numLayers + moeExpertInterval - 1) / moeExpertInterval
                   : 0;
  }
  /// Slots per expert for a micro-batch of microBatchSize * seqLength
  /// tokens (see moeCapacityFactor).
  int64_t moeCapacity() const;
  int64_t ffnWidth() const {
    return ffnHiddenSize ? ffnHiddenSize : 4 * hiddenSize;
  }
  int64_t headDim() const { return hiddenSize / numAttentionHeads; }
  int64_t kvHeads() const {
    return numKvHeads ? numKvHeads : numAttentionHeads;
  }
  int64_t rotaryDims() const { return int64_t(double(headDim()) * rotaryPct); }

  /// Closed-form parameter count (Megatron-LM / Narayanan et al. 2021):
  /// per layer 4h² + 4h attention, 2hf + f + h MLP (f the inner width; with
  /// f = 4h the paper's 12h² + 13h) and 4h of norms, plus V·h embeddings,
  /// s·h learned positions, 2h final norm and V·h more when untied. RMSNorm
  /// has no bias: (2l + 1)·h fewer; gpt_j_tied shares ln_1: 2h a layer fewer.
  /// Grouped-query attention's q, k, v are h·(H + 2·KV)·d; SwiGLU's first
  /// projection is 2f wide; biasless linears drop their biases
  /// (docs/model-families.md).
  int64_t expectedParameters() const;
};

/// What a GPT-NeoX config may leave to the command line.
struct NeoXImportOptions {
  /// The tokenizer's vocabulary size (--import-neox-vocab-size); 0: the
  /// config's vocab_size, or the size of the vocab_file it names.
  int64_t vocabSize = 0;
};

/// The training keys of a GPT-NeoX config (optimizer, schedule, batch,
/// precision, ZeRO, checkpoints, data, logging, launcher), kept as JSON
/// values for the reader that honors them (dsc-run's), with the model keys
/// training also reads (seed, model_parallel_size,
/// train_micro_batch_size_per_gpu). Keys spelled with '-' are stored with
/// '_'.
struct NeoXTrainingKeys {
  llvm::json::Object values;
  /// The line each key was written on, and its file (several config files
  /// merge, as GPT-NeoX merges them).
  llvm::StringMap<unsigned> lines;
  llvm::StringMap<std::string> files;
};

/// Every training key a GPT-NeoX config may hold (the keys that do not
/// shape the model graph), for readers that must classify each one.
llvm::ArrayRef<const char *> neoxTrainingKeyNames();

/// The model keys a training reader also reads because they shape the
/// parallel plan (model_parallel_size: tp, moe_expert_parallel_size: ep):
/// a config that sets one is read for training even without any key of
/// neoxTrainingKeyNames().
llvm::ArrayRef<const char *> neoxPlanShapingKeyNames();

/// Parses a GPT-NeoX config held in `sourceMgr`'s buffers: one file, or
/// several merged in order as GPT-NeoX merges them (a key set by two files
/// is an error, as it is there). Keys may be
/// spelled with '-' or '_'. Errors (syntax, unknown or missing keys, values
/// that make no sense) are emitted as diagnostics located at the offending
/// line and return std::nullopt. The vocabulary is the tokenizer's, padded
/// as GPT-NeoX pads it: up to a multiple of make_vocab_size_divisible_by
/// (128) times model_parallel_size. The training keys go to `training`
/// when given; without it they are listed in one warning (they do not
/// shape the graph).
std::optional<GPTConfig>
parseNeoXConfig(llvm::SourceMgr &sourceMgr, MLIRContext *context,
                const NeoXImportOptions &options = NeoXImportOptions(),
                NeoXTrainingKeys *training = nullptr);

/// The vocabulary size of the tokenizer file `path` of GPT-NeoX's
/// `tokenizerType` (HFTokenizer: a tokenizer.json; GPT2BPETokenizer: a
/// vocab.json): its largest id plus one. nullopt and `error` naming the
/// file when it cannot be read or counted.
std::optional<int64_t> countTokenizerVocabulary(llvm::StringRef path,
                                                llvm::StringRef tokenizerType,
                                                std::string &error);

} // namespace mlir::dsc

#endif // DSC_TARGET_GPTCONFIG_H
