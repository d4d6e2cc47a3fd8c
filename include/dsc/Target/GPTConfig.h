//===- GPTConfig.h - a GPT model configuration ------------------*- C++ -*-===//
//
// The shape and regularization of a GPT-2 / GPT-NeoX style decoder, and the
// reader of GPT-NeoX config files (YAML or JSON) that fills it in.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TARGET_GPTCONFIG_H
#define DSC_TARGET_GPTCONFIG_H

#include "mlir/IR/MLIRContext.h"
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
  int64_t vocabSize = 0;
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
  /// `pos_emb: learned` (GPT-2's table, wpe) or `none` (no position
  /// information but the causal mask).
  bool learnedPositions = true;
  /// `gpt_j_residual`: read so that a config asking for it is refused.
  bool parallelResidual = false;
  int64_t seed = 1234;
  /// Build the graph in f64 instead of f32 (finite-difference checks).
  bool useF64 = false;

  /// Closed-form parameter count (Megatron-LM / Narayanan et al. 2021):
  /// 12lh²(1 + 13/(12h) + (V+s)/(12lh)) + 2h, plus V·h when untied; RMSNorm
  /// has no bias: (2l + 1)·h fewer; without learned positions, s·h fewer.
  int64_t expectedParameters() const;
};

/// Parses a GPT-NeoX config held in `sourceMgr`'s main buffer. Keys may be
/// spelled with '-' or '_'. Errors (syntax, unknown or missing keys, values
/// that make no sense) are emitted as diagnostics located at the offending
/// line and return std::nullopt.
std::optional<GPTConfig> parseNeoXConfig(llvm::SourceMgr &sourceMgr,
                                         MLIRContext *context);

} // namespace mlir::dsc

#endif // DSC_TARGET_GPTCONFIG_H
