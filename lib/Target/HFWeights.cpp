//===- HFWeights.cpp - Hugging Face tensors as dsc parameters -------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Each family's names and layouts. dsc's linear weights are [in, out] (x·W),
// as GPT-2's Conv1D stores them; nn.Linear stores [out, in], so GPT-NeoX's
// are transposed. dsc's fused QKV has its columns [Q | K | V] with the heads
// inside each part (Megatron's order, what the tensor-parallel pass splits);
// GPT-NeoX's query_key_value has its rows per head, [q_h | k_h | v_h] for
// each head h, and is reordered.
//
//===----------------------------------------------------------------------===//

#include "dsc/Target/HFModel.h"

#include "dsc/Runtime/WeightsCheckpoint.h"

#include <algorithm>
#include <cstring>

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// Splits "<prefix>layers.N.<rest>" (or "h.N.<rest>"); false otherwise.
bool splitLayer(StringRef name, StringRef layers, int64_t &layer,
                StringRef &rest) {
  rest = name;
  return rest.consume_front(layers) && !rest.consumeInteger(10, layer) &&
         rest.consume_front(".");
}

/// One tensor of a family: its transformers name (a layer's after
/// "<layers>N."), the dsc parameter it is (a layer's after "h.N."; "" for a
/// buffer dsc computes itself), how it is stored, and its part of a
/// parameter dsc fuses. These tables are the mapping both ways: the import
/// reads tensors through them and the export lists and writes them.
struct TensorRule {
  const char *hf, *dsc;
  HFLayout layout = HFLayout::Same;
  int part = 0, parts = 1;
};

/// A family's tensors: whole-model ones and per-layer ones under
/// `layers` ("transformer.h.": layer N's are "transformer.h.N.<hf>"); a
/// layer's attention projections apart where they depend on the attention
/// (Llama's fusing differs between multi-head and grouped-query).
struct FamilyRules {
  llvm::ArrayRef<TensorRule> top;
  const char *layers;
  llvm::ArrayRef<TensorRule> layer;
  llvm::ArrayRef<TensorRule> attention = {};
  /// An MoE layer's experts: expert N's tensors are "<experts>N.<hf>".
  const char *experts = nullptr;
  llvm::ArrayRef<TensorRule> expert = {};
};

// GPT-2's Conv1D stores [in, out], as dsc's linear layers: names change, no
// transposes. c_attn's columns are [Q | K | V], heads inside each: the
// order dsc's qkv slices. Old checkpoints keep the causal mask as buffers;
// dsc's attention is causal by construction.
const TensorRule kGPT2Top[] = {
    {"transformer.wte.weight", "wte.weight"},
    {"transformer.wpe.weight", "wpe.weight"},
    {"transformer.ln_f.weight", "ln_f.weight"},
    {"transformer.ln_f.bias", "ln_f.bias"},
    {"lm_head.weight", "lm_head.weight"},
};
const TensorRule kGPT2Layer[] = {
    {"ln_1.weight", "ln_1.weight"},
    {"ln_1.bias", "ln_1.bias"},
    {"attn.c_attn.weight", "attn.qkv.weight"},
    {"attn.c_attn.bias", "attn.qkv.bias"},
    {"attn.c_proj.weight", "attn.proj.weight"},
    {"attn.c_proj.bias", "attn.proj.bias"},
    {"ln_2.weight", "ln_2.weight"},
    {"ln_2.bias", "ln_2.bias"},
    {"mlp.c_fc.weight", "mlp.fc.weight"},
    {"mlp.c_fc.bias", "mlp.fc.bias"},
    {"mlp.c_proj.weight", "mlp.proj.weight"},
    {"mlp.c_proj.bias", "mlp.proj.bias"},
    {"attn.bias", ""},
    {"attn.masked_bias", ""},
};

// GPT-NeoX's nn.Linear stores [out, in]: transposed; query_key_value is per
// head. Older checkpoints saved the causal mask and the rotary frequencies,
// both computed by dsc.
const TensorRule kGPTNeoXTop[] = {
    {"gpt_neox.embed_in.weight", "wte.weight"},
    {"gpt_neox.final_layer_norm.weight", "ln_f.weight"},
    {"gpt_neox.final_layer_norm.bias", "ln_f.bias"},
    {"embed_out.weight", "lm_head.weight"},
};
const TensorRule kGPTNeoXLayer[] = {
    {"input_layernorm.weight", "ln_1.weight"},
    {"input_layernorm.bias", "ln_1.bias"},
    {"post_attention_layernorm.weight", "ln_2.weight"},
    {"post_attention_layernorm.bias", "ln_2.bias"},
    {"attention.query_key_value.weight", "attn.qkv.weight",
     HFLayout::PerHeadQKVTransposed},
    {"attention.query_key_value.bias", "attn.qkv.bias", HFLayout::PerHeadQKV},
    {"attention.dense.weight", "attn.proj.weight", HFLayout::Transposed},
    {"attention.dense.bias", "attn.proj.bias"},
    {"mlp.dense_h_to_4h.weight", "mlp.fc.weight", HFLayout::Transposed},
    {"mlp.dense_h_to_4h.bias", "mlp.fc.bias"},
    {"mlp.dense_4h_to_h.weight", "mlp.proj.weight", HFLayout::Transposed},
    {"mlp.dense_4h_to_h.bias", "mlp.proj.bias"},
    {"attention.bias", ""},
    {"attention.masked_bias", ""},
    {"attention.rotary_emb.inv_freq", ""},
};

// Llama and Mistral: nn.Linear (transposed); dsc fuses q, k and v into
// [Q | K | V] under multi-head attention and k, v into [K | V] beside q
// under grouped-query attention (GPTGraphBuilder's two layouts), and up and
// gate into [up | gate], the order dsc.swiglu reads (GPT-NeoX's chunks).
const TensorRule kLlamaTop[] = {
    {"model.embed_tokens.weight", "wte.weight"},
    {"model.norm.weight", "ln_f.weight"},
    {"lm_head.weight", "lm_head.weight"},
};
const TensorRule kLlamaLayer[] = {
    {"input_layernorm.weight", "ln_1.weight"},
    {"post_attention_layernorm.weight", "ln_2.weight"},
    {"self_attn.o_proj.weight", "attn.proj.weight", HFLayout::Transposed},
    {"self_attn.o_proj.bias", "attn.proj.bias"},
    {"mlp.up_proj.weight", "mlp.fc.weight", HFLayout::Transposed, 0, 2},
    {"mlp.gate_proj.weight", "mlp.fc.weight", HFLayout::Transposed, 1, 2},
    {"mlp.up_proj.bias", "mlp.fc.bias", HFLayout::Same, 0, 2},
    {"mlp.gate_proj.bias", "mlp.fc.bias", HFLayout::Same, 1, 2},
    {"mlp.down_proj.weight", "mlp.proj.weight", HFLayout::Transposed},
    {"mlp.down_proj.bias", "mlp.proj.bias"},
    {"self_attn.rotary_emb.inv_freq", ""},
};
const TensorRule kLlamaAttentionMHA[] = {
    {"self_attn.q_proj.weight", "attn.qkv.weight", HFLayout::Transposed, 0, 3},
    {"self_attn.k_proj.weight", "attn.qkv.weight", HFLayout::Transposed, 1, 3},
    {"self_attn.v_proj.weight", "attn.qkv.weight", HFLayout::Transposed, 2, 3},
    {"self_attn.q_proj.bias", "attn.qkv.bias", HFLayout::Same, 0, 3},
    {"self_attn.k_proj.bias", "attn.qkv.bias", HFLayout::Same, 1, 3},
    {"self_attn.v_proj.bias", "attn.qkv.bias", HFLayout::Same, 2, 3},
};
const TensorRule kLlamaAttentionGQA[] = {
    {"self_attn.q_proj.weight", "attn.q.weight", HFLayout::Transposed},
    {"self_attn.k_proj.weight", "attn.kv.weight", HFLayout::Transposed, 0, 2},
    {"self_attn.v_proj.weight", "attn.kv.weight", HFLayout::Transposed, 1, 2},
    {"self_attn.q_proj.bias", "attn.q.bias"},
    {"self_attn.k_proj.bias", "attn.kv.bias", HFLayout::Same, 0, 2},
    {"self_attn.v_proj.bias", "attn.kv.bias", HFLayout::Same, 1, 2},
};

// Mixtral: Mistral's attention and norms; each layer's MLP is a router
// (nn.Linear [E, h], transposed to dsc's [h, E]) and experts whose w1
// (gate), w3 (up) and w2 (down) stack into dsc's [E, h, 2f] [up | gate]
// and [E, f, h] expert weights.
const TensorRule kMixtralLayer[] = {
    {"input_layernorm.weight", "ln_1.weight"},
    {"post_attention_layernorm.weight", "ln_2.weight"},
    {"self_attn.o_proj.weight", "attn.proj.weight", HFLayout::Transposed},
    {"self_attn.o_proj.bias", "attn.proj.bias"},
    {"block_sparse_moe.gate.weight", "mlp.router.weight",
     HFLayout::Transposed},
    {"self_attn.rotary_emb.inv_freq", ""},
};
const TensorRule kMixtralExpert[] = {
    {"w3.weight", "mlp.experts.fc.weight", HFLayout::Transposed, 0, 2},
    {"w1.weight", "mlp.experts.fc.weight", HFLayout::Transposed, 1, 2},
    {"w2.weight", "mlp.experts.proj.weight", HFLayout::Transposed},
};

/// The rules of `model`'s family, or none for an architecture dsc does not
/// read.
std::optional<FamilyRules> rulesOf(const HFModel &model) {
  if (model.architecture == "GPT2LMHeadModel")
    return FamilyRules{kGPT2Top, "transformer.h.", kGPT2Layer};
  if (model.architecture == "GPTNeoXForCausalLM")
    return FamilyRules{kGPTNeoXTop, "gpt_neox.layers.", kGPTNeoXLayer};
  const bool mixtral = model.architecture == "MixtralForCausalLM";
  if (model.architecture == "LlamaForCausalLM" ||
      model.architecture == "MistralForCausalLM" || mixtral) {
    const GPTConfig &c = model.config;
    const bool grouped = c.kvHeads() != c.numAttentionHeads;
    FamilyRules rules{kLlamaTop, "model.layers.",
                      mixtral ? llvm::ArrayRef<TensorRule>(kMixtralLayer)
                              : llvm::ArrayRef<TensorRule>(kLlamaLayer),
                      grouped
                          ? llvm::ArrayRef<TensorRule>(kLlamaAttentionGQA)
                          : llvm::ArrayRef<TensorRule>(kLlamaAttentionMHA)};
    if (mixtral) {
      rules.experts = "block_sparse_moe.experts.";
      rules.expert = kMixtralExpert;
    }
    return rules;
  }
  return std::nullopt;
}

HFTensorMapping mappingOf(const TensorRule &rule, const std::string &prefix) {
  return HFTensorMapping{*rule.dsc ? prefix + rule.dsc : std::string(),
                         rule.layout, rule.part, rule.parts};
}

/// The rows of `t` (its first dim) taken in `order`: row i of the result
/// is row order[i] of `t`.
void permuteRows(::dsc::rt::WholeTensor &t, const std::vector<int64_t> &order) {
  const size_t rowBytes = t.bytes.size() / size_t(t.shape[0]);
  std::vector<uint8_t> out(t.bytes.size());
  for (size_t i = 0; i < order.size(); ++i)
    std::memcpy(out.data() + i * rowBytes,
                t.bytes.data() + size_t(order[i]) * rowBytes, rowBytes);
  t.bytes = std::move(out);
}

void transpose(::dsc::rt::WholeTensor &t) {
  const size_t e = ::dsc::rt::dtypeSize(t.dtype);
  const size_t rows = size_t(t.shape[0]), cols = size_t(t.shape[1]);
  std::vector<uint8_t> out(t.bytes.size());
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c)
      std::memcpy(out.data() + (c * rows + r) * e,
                  t.bytes.data() + (r * cols + c) * e, e);
  t.bytes = std::move(out);
  std::swap(t.shape[0], t.shape[1]);
}

/// GPT-NeoX's per-head QKV order: order[c] is the row of the per-head
/// layout ([q_h | k_h | v_h] for each head h) that dsc's column c of
/// [Q | K | V] holds.
std::vector<int64_t> perHeadOrder(const GPTConfig &config) {
  const int64_t h = config.hiddenSize, heads = config.numAttentionHeads;
  const int64_t d = h / heads;
  std::vector<int64_t> order(size_t(3 * h));
  for (int64_t p = 0; p < 3; ++p)
    for (int64_t hh = 0; hh < heads; ++hh)
      for (int64_t i = 0; i < d; ++i)
        order[size_t(p * h + hh * d + i)] = hh * 3 * d + p * d + i;
  return order;
}

/// Renames `t` to its dsc parameter and reorders it into dsc's layout.
/// Whether dsc parameter `name` has a row per token ([V, h]: the token
/// embedding and the untied output layer).
bool isVocabularyRows(StringRef name) {
  return name == "wte.weight" || name == "lm_head.weight";
}

/// `t` ([rows, ...]) with `rows` rows: zero rows appended, or trailing
/// rows dropped.
void resizeRows(::dsc::rt::WholeTensor &t, int64_t rows) {
  const size_t rowBytes = t.bytes.size() / size_t(t.shape[0]);
  t.bytes.resize(size_t(rows) * rowBytes, 0);
  t.shape[0] = rows;
}

bool convertOne(const HFModel &model, const HFTensorMapping &mapping,
                ::dsc::rt::WholeTensor &t, std::string &error) {
  const HFTensorMapping *m = &mapping;
  const std::string hfName = t.name;
  t.name = m->dscName;
  if (m->layout == HFLayout::Same || t.name.empty())
    return true;
  const bool matrix = m->layout != HFLayout::PerHeadQKV;
  if (t.shape.size() != (matrix ? 2u : 1u)) {
    error = "tensor '" + hfName + "' must have rank " +
            std::to_string(matrix ? 2 : 1);
    return false;
  }
  if (m->layout != HFLayout::Transposed) {
    // Row (or element) hh*3d + p*d + i of the per-head layout is
    // column p*h + hh*d + i of dsc's [Q | K | V].
    const int64_t h = model.config.hiddenSize;
    if (t.shape[0] != 3 * h) {
      error = "tensor '" + hfName +
              "' must have 3 * hidden_size = " + std::to_string(3 * h) +
              " rows, has " + std::to_string(t.shape[0]);
      return false;
    }
    const std::vector<int64_t> order = perHeadOrder(model.config);
    permuteRows(t, order);
  }
  if (matrix)
    transpose(t);
  return true;
}

/// `parts`, each [..., w_i] with the same leading dims, side by side.
bool concatLastDim(std::vector<::dsc::rt::WholeTensor> &parts,
                   ::dsc::rt::WholeTensor &out, std::string &error) {
  const ::dsc::rt::WholeTensor &first = parts.front();
  const size_t e = ::dsc::rt::dtypeSize(first.dtype);
  std::vector<int64_t> lead(first.shape.begin(), first.shape.end() - 1);
  int64_t rows = 1, width = 0;
  for (int64_t d : lead)
    rows *= d;
  for (const ::dsc::rt::WholeTensor &p : parts) {
    if (p.dtype != first.dtype || p.shape.size() != first.shape.size() ||
        !std::equal(lead.begin(), lead.end(), p.shape.begin())) {
      error = "its parts disagree in dtype or shape";
      return false;
    }
    width += p.shape.back();
  }
  out.name = first.name;
  out.dtype = first.dtype;
  out.shape = lead;
  out.shape.push_back(width);
  out.bytes.resize(size_t(rows * width) * e);
  size_t at = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (const ::dsc::rt::WholeTensor &p : parts) {
      const size_t rowBytes = size_t(p.shape.back()) * e;
      std::memcpy(out.bytes.data() + at, p.bytes.data() + size_t(r) * rowBytes,
                  rowBytes);
      at += rowBytes;
    }
  return true;
}

} // namespace

std::optional<HFTensorMapping> mlir::dsc::mapHFTensor(const HFModel &model,
                                                      StringRef name) {
  std::optional<FamilyRules> rules = rulesOf(model);
  if (!rules)
    return std::nullopt;
  // GPT2Model and old GPT-2 checkpoints on the Hub have no "transformer."
  // prefix.
  const bool gpt2 = model.architecture == "GPT2LMHeadModel";
  const std::string full =
      gpt2 && !name.starts_with("transformer.") && name != "lm_head.weight"
          ? "transformer." + name.str()
          : name.str();
  for (const TensorRule &rule : rules->top)
    if (full == rule.hf)
      return mappingOf(rule, "");
  int64_t layer = 0;
  StringRef rest;
  if (!splitLayer(full, rules->layers, layer, rest))
    return std::nullopt;
  const std::string prefix = "h." + std::to_string(layer) + ".";
  for (llvm::ArrayRef<TensorRule> table : {rules->layer, rules->attention})
    for (const TensorRule &rule : table)
      if (rest == rule.hf)
        return mappingOf(rule, prefix);
  int64_t expert = 0;
  if (rules->experts && rest.consume_front(rules->experts) &&
      !rest.consumeInteger(10, expert) && rest.consume_front(".") &&
      expert >= 0 && expert < model.config.moeNumExperts)
    for (const TensorRule &rule : rules->expert)
      if (rest == rule.hf) {
        HFTensorMapping m = mappingOf(rule, prefix);
        m.expert = expert;
        m.experts = model.config.moeNumExperts;
        return m;
      }
  return std::nullopt;
}

std::vector<std::string> mlir::dsc::hfTensorNames(const HFModel &model) {
  std::vector<std::string> names;
  std::optional<FamilyRules> rules = rulesOf(model);
  if (!rules)
    return names;
  for (const TensorRule &rule : rules->top)
    if (*rule.dsc)
      names.push_back(rule.hf);
  for (int64_t l = 0; l < model.config.numLayers; ++l) {
    const std::string layer = rules->layers + std::to_string(l) + ".";
    for (llvm::ArrayRef<TensorRule> table : {rules->layer, rules->attention})
      for (const TensorRule &rule : table)
        if (*rule.dsc)
          names.push_back(layer + rule.hf);
    if (rules->experts && model.config.isMoeLayer(l))
      for (int64_t e = 0; e < model.config.moeNumExperts; ++e)
        for (const TensorRule &rule : rules->expert)
          names.push_back(layer + rules->experts + std::to_string(e) + "." +
                          rule.hf);
  }
  return names;
}

bool HFTensorConverter::add(::dsc::rt::WholeTensor t,
                            std::vector<::dsc::rt::WholeTensor> &out,
                            std::string &error) {
  std::optional<HFTensorMapping> m = mapHFTensor(model, t.name);
  if (!m) {
    error = "tensor '" + t.name + "' is not a " + model.architecture +
            " weight dsc knows";
    if (model.config.isMoe() && StringRef(t.name).contains(".experts."))
      error += " (the config has " +
               std::to_string(model.config.moeNumExperts) + " experts)";
    return false;
  }
  const std::string hfName = t.name;
  if (!convertOne(model, *m, t, error))
    return false;
  if (t.name.empty())
    return true;
  // A padded vocabulary (--import-hf-pad-vocab-to): zero rows, which no
  // token names and the loss leaves out.
  const GPTConfig &c = model.config;
  if (isVocabularyRows(t.name) && c.tokenizerVocabSize > 0 &&
      !t.shape.empty() && t.shape[0] == c.tokenizerVocabSize)
    resizeRows(t, c.vocabSize);
  if (m->parts == 1 && m->experts == 0) {
    out.push_back(std::move(t));
    return true;
  }
  // Held until every part of every expert is there: slot expert * parts +
  // part.
  const size_t experts = size_t(std::max<int64_t>(m->experts, 1));
  const size_t slot = size_t(m->expert) * size_t(m->parts) + size_t(m->part);
  Pending &p = pending[t.name];
  p.parts.resize(experts * size_t(m->parts));
  p.hfNames.resize(p.parts.size());
  p.perExpert = size_t(m->parts);
  p.expertTensor = m->experts > 0;
  if (p.parts[slot]) {
    error = "tensor '" + hfName + "' appears twice";
    return false;
  }
  p.parts[slot] = std::move(t);
  p.hfNames[slot] = hfName;
  return true;
}

bool HFTensorConverter::finish(std::vector<::dsc::rt::WholeTensor> &out,
                               std::string &error) {
  for (auto &[name, p] : pending) {
    // Each expert's parts side by side, then the experts stacked.
    const size_t experts = p.parts.size() / p.perExpert;
    std::vector<::dsc::rt::WholeTensor> stacked;
    for (size_t e = 0; e < experts; ++e) {
      std::vector<::dsc::rt::WholeTensor> parts;
      std::string names;
      for (size_t i = e * p.perExpert; i < (e + 1) * p.perExpert; ++i) {
        if (!p.parts[i]) {
          error = "parameter '" + name + "' is fused from " +
                  std::to_string(p.parts.size()) + " tensors and " +
                  (p.expertTensor ? "expert " + std::to_string(e) + " of " +
                                        std::to_string(experts) + "'s "
                                  : std::string()) +
                  "part " + std::to_string(i % p.perExpert) + " of " +
                  std::to_string(p.perExpert) + " is missing";
          return false;
        }
        names += (names.empty() ? "'" : ", '") + p.hfNames[i] + "'";
        parts.push_back(std::move(*p.parts[i]));
      }
      ::dsc::rt::WholeTensor fused;
      if (!concatLastDim(parts, fused, error)) {
        error = "parameter '" + name + "' (fused from " + names + "): " + error;
        return false;
      }
      stacked.push_back(std::move(fused));
    }
    if (!p.expertTensor) {
      out.push_back(std::move(stacked.front()));
      continue;
    }
    ::dsc::rt::WholeTensor whole = stacked.front();
    for (size_t e = 1; e < stacked.size(); ++e) {
      if (stacked[e].dtype != whole.dtype || stacked[e].shape != whole.shape) {
        error = "parameter '" + name + "': expert " + std::to_string(e) +
                "'s tensors disagree with expert 0's in dtype or shape";
        return false;
      }
      whole.bytes.insert(whole.bytes.end(), stacked[e].bytes.begin(),
                         stacked[e].bytes.end());
    }
    whole.shape.insert(whole.shape.begin(), int64_t(stacked.size()));
    out.push_back(std::move(whole));
  }
  pending.clear();
  return true;
}

bool mlir::dsc::exportHFTensor(const HFModel &model,
                               const HFTensorMapping &mapping,
                               const ::dsc::rt::WholeTensor &param,
                               const std::string &hfName,
                               ::dsc::rt::WholeTensor &out,
                               std::string &error) {
  out.name = hfName;
  out.dtype = param.dtype;
  out.shape = param.shape;
  out.bytes = param.bytes;
  if (out.shape.empty()) {
    error = "parameter '" + param.name + "' is a scalar";
    return false;
  }
  // A vocabulary padded on import (or by GPT-NeoX's
  // make_vocab_size_divisible_by): transformers' model has the config's
  // vocab_size rows.
  if (isVocabularyRows(param.name) && out.shape[0] > model.config.vocabSize &&
      model.config.vocabSize > 0)
    resizeRows(out, model.config.vocabSize);
  // An expert's slice of a stacked expert weight.
  if (mapping.experts > 0) {
    if (out.shape.size() < 2 || out.shape[0] != mapping.experts) {
      error = "parameter '" + param.name + "' must stack " +
              std::to_string(mapping.experts) + " experts in its first dim";
      return false;
    }
    const size_t slice = param.bytes.size() / size_t(mapping.experts);
    const auto first =
        param.bytes.begin() + std::ptrdiff_t(slice * size_t(mapping.expert));
    out.bytes.assign(first, first + std::ptrdiff_t(slice));
    out.shape.erase(out.shape.begin());
  }
  // This tensor's columns of a fused parameter.
  if (mapping.parts > 1) {
    const int64_t width = out.shape.back();
    if (width % mapping.parts != 0) {
      error = "parameter '" + param.name + "' (" + std::to_string(width) +
              " wide) does not split into " + std::to_string(mapping.parts) +
              " equal parts";
      return false;
    }
    const int64_t part = width / mapping.parts;
    const size_t e = ::dsc::rt::dtypeSize(out.dtype);
    const size_t rows = out.bytes.size() / (size_t(width) * e);
    std::vector<uint8_t> bytes(rows * size_t(part) * e);
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(bytes.data() + r * size_t(part) * e,
                  out.bytes.data() +
                      (r * size_t(width) + size_t(mapping.part * part)) * e,
                  size_t(part) * e);
    out.bytes = std::move(bytes);
    out.shape.back() = part;
  }
  const bool matrix = mapping.layout == HFLayout::Transposed ||
                      mapping.layout == HFLayout::PerHeadQKVTransposed;
  if (mapping.layout == HFLayout::Same)
    return true;
  if (out.shape.size() != (matrix ? 2u : 1u)) {
    error = "parameter '" + param.name + "' must have rank " +
            std::to_string(matrix ? 2 : 1);
    return false;
  }
  if (matrix)
    transpose(out);
  if (mapping.layout == HFLayout::PerHeadQKV ||
      mapping.layout == HFLayout::PerHeadQKVTransposed) {
    const std::vector<int64_t> order = perHeadOrder(model.config);
    if (out.shape[0] != int64_t(order.size())) {
      error = "parameter '" + param.name +
              "' must have 3 * hidden_size = " + std::to_string(order.size()) +
              " columns";
      return false;
    }
    // dsc's row c goes back to the per-head row order[c].
    std::vector<int64_t> inverse(order.size());
    for (size_t c = 0; c < order.size(); ++c)
      inverse[size_t(order[c])] = int64_t(c);
    permuteRows(out, inverse);
  }
  return true;
}
