//===- HFModel.h - Hugging Face causal LMs as dsc graphs --------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A Hugging Face model directory (config.json + model.safetensors, or
// shards with their index) as a dsc loss graph and a step-0 checkpoint of
// its weights (docs/hf-import.md). Families are added as the graph gains
// their features: GPT2LMHeadModel and GPTNeoXForCausalLM.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TARGET_HFMODEL_H
#define DSC_TARGET_HFMODEL_H

#include "dsc/Runtime/WeightsCheckpoint.h"
#include "dsc/Target/GPTConfig.h"

#include "mlir/IR/Location.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace mlir::dsc {

/// The graph's shape a config.json does not hold (it is a training choice).
struct HFImportOptions {
  int64_t seqLength = 0; // 0: the model's n_positions
  int64_t microBatchSize = 1;
};

struct HFModel {
  /// config.json's `architectures[0]` ("GPT2LMHeadModel").
  std::string architecture;
  GPTConfig config;
};

/// Parses the config.json text `text` (from `file`). Every key is honored,
/// known to have no effect on the causal LM's graph, or refused by name;
/// errors are emitted at `loc` naming the file and key.
std::optional<HFModel> parseHFConfig(llvm::StringRef text, llvm::StringRef file,
                                     const HFImportOptions &options,
                                     Location loc);

/// How a family's tensor is stored against dsc's parameter.
enum class HFLayout {
  Same,
  /// nn.Linear's [out, in]; dsc's linear weights are [in, out].
  Transposed,
  /// GPT-NeoX's fused QKV bias: per head [q_h | k_h | v_h]; dsc's columns
  /// are [Q | K | V], heads inside each.
  PerHeadQKV,
  /// Its weight: the same rows, then transposed.
  PerHeadQKVTransposed,
};

struct HFTensorMapping {
  /// The dsc parameter; "" for a tensor dsc does not keep (causal-mask and
  /// rotary-frequency buffers older checkpoints saved).
  std::string dscName;
  HFLayout layout;
};

/// The mapping of the tensor `name` of `architecture`'s safetensors
/// ("transformer.h.0.attn.c_attn.weight" -> "h.0.attn.qkv.weight", Same);
/// nullopt for a name the family does not have.
std::optional<HFTensorMapping> mapHFTensor(llvm::StringRef architecture,
                                           llvm::StringRef name);
/// Its dsc name alone.
std::optional<std::string> dscNameOfHFTensor(llvm::StringRef architecture,
                                             llvm::StringRef name);

/// Renames `t` (an HF tensor, or a gradient in its layout) to its dsc
/// parameter and reorders its bytes and shape into dsc's layout; false and
/// `error` naming the tensor when it is unknown or its shape does not fit.
bool convertHFTensor(const HFModel &model, ::dsc::rt::WholeTensor &t,
                     std::string &error);

/// Registers `--import-hf` with mlir-translate's registry.
void registerImportHFTranslation();

} // namespace mlir::dsc

#endif // DSC_TARGET_HFMODEL_H
