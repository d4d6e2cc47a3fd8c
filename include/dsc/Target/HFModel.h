//===- HFModel.h - Hugging Face causal LMs as dsc graphs --------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A Hugging Face model directory (config.json + model.safetensors, or
// shards with their index) as a dsc loss graph and a step-0 checkpoint of
// its weights (docs/hf-import.md). Families are added as the graph gains
// their features: GPT2LMHeadModel, GPTNeoXForCausalLM, LlamaForCausalLM,
// MistralForCausalLM and MixtralForCausalLM.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TARGET_HFMODEL_H
#define DSC_TARGET_HFMODEL_H

#include "dsc/Runtime/WeightsCheckpoint.h"
#include "dsc/Target/GPTConfig.h"

#include "mlir/IR/Location.h"
#include "llvm/ADT/StringRef.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::dsc {

/// The graph's shape a config.json does not hold (it is a training choice).
struct HFImportOptions {
  int64_t seqLength = 0; // 0: the model's n_positions
  int64_t microBatchSize = 1;
  /// Pad the vocabulary up to a multiple of this (Megatron-LM's
  /// --make-vocab-size-divisible-by); 1: as it is. The padded rows are no
  /// classes (GPTConfig::tokenizerVocabSize) and are not exported.
  int64_t vocabMultiple = 1;
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
  /// Part `part` of `parts` of a parameter dsc fuses (Llama's q, k and v
  /// projections into [Q | K | V], its up and gate into [up | gate]): the
  /// parts, each in dsc's layout, concatenate along the last dim.
  int part = 0, parts = 1;
  /// Expert `expert` of `experts` of an MoE layer's stacked expert weight
  /// (Mixtral's experts.N.w1 of [E, h, 2f]): each expert's tensor (its
  /// parts concatenated) is the parameter's slice N of its first dim.
  /// experts = 0: not an expert tensor.
  int64_t expert = 0, experts = 0;
};

/// The mapping of the tensor `name` of `model`'s safetensors
/// ("transformer.h.0.attn.c_attn.weight" -> "h.0.attn.qkv.weight", Same);
/// nullopt for a name the family does not have.
std::optional<HFTensorMapping> mapHFTensor(const HFModel &model,
                                           llvm::StringRef name);

/// Every tensor of `model`'s family that dsc keeps, in transformers' names
/// and order, for each of its layers: the same tables mapHFTensor reads
/// through. Which of them a given model has (biases, an untied head) is
/// its graph's parameters' say (exportHF keeps those).
std::vector<std::string> hfTensorNames(const HFModel &model);

/// Turns a model's HF tensors (or gradients in their layout) into dsc's
/// parameters: renamed, transposed and reordered one by one (add), and the
/// parts of fused parameters concatenated once all are there (finish).
class HFTensorConverter {
public:
  explicit HFTensorConverter(const HFModel &model) : model(model) {}
  /// Converts `t`; a whole parameter goes to `out`, a part is held for
  /// finish, a buffer dsc does not keep is dropped. False and `error`
  /// naming the tensor when it is unknown, repeated or misshapen.
  bool add(::dsc::rt::WholeTensor t, std::vector<::dsc::rt::WholeTensor> &out,
           std::string &error);
  /// Appends the fused parameters to `out`; false and `error` naming the
  /// parameter and the part when one is missing or they disagree.
  bool finish(std::vector<::dsc::rt::WholeTensor> &out, std::string &error);

private:
  const HFModel &model;
  /// A fused or stacked parameter's tensors: expert e's part i at
  /// e * perExpert + i.
  struct Pending {
    std::vector<std::optional<::dsc::rt::WholeTensor>> parts;
    std::vector<std::string> hfNames;
    size_t perExpert = 1;
    bool expertTensor = false;
  };
  std::map<std::string, Pending> pending;
};

/// The HF tensor `hfName` (mapped by `mapping`) of the dsc parameter
/// `param`: its part of a fused parameter, transposed and reordered back
/// into the family's layout. False and `error` naming the parameter when
/// its shape does not fit.
bool exportHFTensor(const HFModel &model, const HFTensorMapping &mapping,
                    const ::dsc::rt::WholeTensor &param,
                    const std::string &hfName, ::dsc::rt::WholeTensor &out,
                    std::string &error);

/// dsc-translate --export-hf: the parameters of `checkpoint` (saved by any
/// plan of the model `configPath` describes) as `outDir`/model.safetensors
/// in the family's names, layouts and config.json's dtype, with the config
/// copied beside it. False and `error` on failure.
bool exportHF(const std::string &checkpoint, const std::string &configPath,
              const std::string &outDir, std::string &error);

/// Registers `--import-hf` with mlir-translate's registry.
void registerImportHFTranslation();

} // namespace mlir::dsc

#endif // DSC_TARGET_HFMODEL_H
