//===- ExportHF.cpp - dsc-translate --export-hf ---------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A trained dsc state back to a Hugging Face directory: the parameters of a
// checkpoint saved by any plan, each read whole, mapped to the family's
// tensors by the import's own mapping run backwards (mapHFTensor: the
// fused parameters split again, the transposes and GPT-NeoX's per-head QKV
// order undone), in config.json's dtype, written as model.safetensors with
// the config beside it, as transformers' save_pretrained lays them out.
//
//===----------------------------------------------------------------------===//

#include "dsc/Target/HFModel.h"

#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/WeightsCheckpoint.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <map>

using namespace mlir;
using namespace mlir::dsc;
using ::dsc::rt::DType;
using ::dsc::rt::WholeTensor;

namespace {

/// The tensors `model`'s family saves, in transformers' names.
std::vector<std::string> hfTensorNames(const HFModel &model) {
  const GPTConfig &c = model.config;
  std::vector<std::string> names;
  auto layers = [&](const std::string &prefix,
                    std::initializer_list<const char *> perLayer) {
    for (int64_t l = 0; l < c.numLayers; ++l)
      for (const char *n : perLayer)
        names.push_back(prefix + std::to_string(l) + "." + n);
  };
  if (model.architecture == "GPT2LMHeadModel") {
    names = {"transformer.wte.weight", "transformer.wpe.weight",
             "transformer.ln_f.weight", "transformer.ln_f.bias"};
    layers("transformer.h.",
           {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight",
            "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
            "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
            "mlp.c_proj.weight", "mlp.c_proj.bias"});
    if (!c.tieWordEmbeddings)
      names.push_back("lm_head.weight");
  } else if (model.architecture == "GPTNeoXForCausalLM") {
    names = {"gpt_neox.embed_in.weight", "gpt_neox.final_layer_norm.weight",
             "gpt_neox.final_layer_norm.bias", "embed_out.weight"};
    layers("gpt_neox.layers.",
           {"input_layernorm.weight", "input_layernorm.bias",
            "post_attention_layernorm.weight", "post_attention_layernorm.bias",
            "attention.query_key_value.weight", "attention.dense.weight",
            "mlp.dense_h_to_4h.weight", "mlp.dense_h_to_4h.bias",
            "mlp.dense_4h_to_h.weight", "mlp.dense_4h_to_h.bias"});
    if (c.attentionBias)
      layers("gpt_neox.layers.",
             {"attention.query_key_value.bias", "attention.dense.bias"});
  } else {
    names = {"model.embed_tokens.weight", "model.norm.weight"};
    if (!c.tieWordEmbeddings)
      names.push_back("lm_head.weight");
    layers("model.layers.",
           {"input_layernorm.weight", "post_attention_layernorm.weight",
            "self_attn.q_proj.weight", "self_attn.k_proj.weight",
            "self_attn.v_proj.weight", "self_attn.o_proj.weight",
            "mlp.gate_proj.weight", "mlp.up_proj.weight",
            "mlp.down_proj.weight"});
    if (c.attentionBias)
      layers("model.layers.",
             {"self_attn.q_proj.bias", "self_attn.k_proj.bias",
              "self_attn.v_proj.bias", "self_attn.o_proj.bias"});
    if (c.mlpBias)
      layers("model.layers.",
             {"mlp.gate_proj.bias", "mlp.up_proj.bias", "mlp.down_proj.bias"});
  }
  return names;
}

/// config.json's dtype ("dtype", or transformers 4's "torch_dtype").
std::optional<DType> configDType(const llvm::json::Object &config) {
  for (const char *key : {"dtype", "torch_dtype"})
    if (std::optional<llvm::StringRef> s = config.getString(key)) {
      if (*s == "float32")
        return DType::F32;
      if (*s == "bfloat16")
        return DType::BF16;
      if (*s == "float16")
        return DType::F16;
    }
  return std::nullopt;
}

} // namespace

bool mlir::dsc::exportHF(const std::string &checkpoint,
                         const std::string &configPath,
                         const std::string &outDir, std::string &error) {
  auto text = llvm::MemoryBuffer::getFile(configPath);
  if (!text) {
    error = "cannot read '" + configPath + "': " + text.getError().message();
    return false;
  }
  MLIRContext context;
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    llvm::raw_string_ostream(diagnostics) << d.str();
    return success();
  });
  std::optional<HFModel> model =
      parseHFConfig((*text)->getBuffer(), configPath, HFImportOptions(),
                    UnknownLoc::get(&context));
  if (!model) {
    error = diagnostics;
    return false;
  }
  std::vector<WholeTensor> params;
  if (!::dsc::rt::readCheckpointParameters(checkpoint, params, error))
    return false;
  std::map<std::string, const WholeTensor *> byName;
  for (const WholeTensor &t : params)
    byName[t.name] = &t;
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*text)->getBuffer());
  // The tensors keep the checkpoint's dtype unless config.json names one.
  DType dtype = DType::F32;
  bool convert = false;
  if (!json) {
    llvm::consumeError(json.takeError());
  } else if (const llvm::json::Object *root = json->getAsObject()) {
    if (std::optional<DType> d = configDType(*root)) {
      dtype = *d;
      convert = true;
    }
  }

  std::vector<WholeTensor> out;
  for (const std::string &name : hfTensorNames(*model)) {
    std::optional<HFTensorMapping> m = mapHFTensor(*model, name);
    auto it = m ? byName.find(m->dscName) : byName.end();
    if (it == byName.end()) {
      error = "the checkpoint '" + checkpoint + "' has no parameter '" +
              (m ? m->dscName : name) + "' for the " + model->architecture +
              " tensor '" + name + "' (is it this model's checkpoint?)";
      return false;
    }
    WholeTensor t;
    if (!exportHFTensor(*model, *m, *it->second, name, t, error))
      return false;
    if (convert && dtype != t.dtype) {
      const size_t n = t.bytes.size() / ::dsc::rt::dtypeSize(t.dtype);
      std::vector<uint8_t> converted(n * ::dsc::rt::dtypeSize(dtype));
      ::dsc::rt::convertFloats(t.bytes.data(), t.dtype, converted.data(),
                               dtype, n);
      t.bytes = std::move(converted);
      t.dtype = dtype;
    }
    out.push_back(std::move(t));
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(outDir)) {
    error = "cannot create '" + outDir + "': " + ec.message();
    return false;
  }
  llvm::SmallString<256> weights(outDir), config(outDir);
  llvm::sys::path::append(weights, "model.safetensors");
  llvm::sys::path::append(config, "config.json");
  if (!::dsc::rt::writeSafetensorsTensors(std::string(weights), out,
                                          {{"format", "pt"}}, error))
    return false;
  std::error_code ec;
  llvm::raw_fd_ostream os(config, ec);
  if (ec) {
    error = "cannot write '" + std::string(config) + "': " + ec.message();
    return false;
  }
  os << (*text)->getBuffer();
  return true;
}
