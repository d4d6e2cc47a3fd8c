//===- HFModel.h - Hugging Face causal LMs as dsc graphs --------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A Hugging Face model directory (config.json + model.safetensors, or
// shards with their index) as a dsc loss graph and a step-0 checkpoint of
// its weights (docs/hf-import.md). Families are added as the graph gains
// their features; today GPT2LMHeadModel, whose weights map one to one.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TARGET_HFMODEL_H
#define DSC_TARGET_HFMODEL_H

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

/// The dsc parameter name of the tensor `name` of `architecture`'s
/// safetensors ("transformer.h.0.attn.c_attn.weight" ->
/// "h.0.attn.qkv.weight"); "" for a tensor dsc does not keep (GPT-2's
/// causal-mask buffers); nullopt for a name the family does not have.
std::optional<std::string> dscNameOfHFTensor(llvm::StringRef architecture,
                                             llvm::StringRef name);

/// Registers `--import-hf` with mlir-translate's registry.
void registerImportHFTranslation();

} // namespace mlir::dsc

#endif // DSC_TARGET_HFMODEL_H
