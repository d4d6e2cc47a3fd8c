//===- ParallelPlan.cpp - The plan's one parser and printer ---------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The textual form of dsc::ParallelPlan, generated from ParallelPlan.def:
// every entry point parses and prints a plan here, so a plan printed by the
// search, the attribute or --print-config is one --dsc-compile accepts.
// Plain C++ (no LLVM): the runtime links it too.
//
//===----------------------------------------------------------------------===//

#include "dsc/Support/ParallelPlan.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

using namespace dsc;

const char *dsc::recomputeName(RecomputeKind kind) {
  switch (kind) {
  case RecomputeKind::None:
    return "none";
  case RecomputeKind::Selective:
    return "selective";
  case RecomputeKind::Full:
    return "full";
  }
  return "unknown";
}

const char *dsc::offloadTierName(OffloadTier tier) {
  switch (tier) {
  case OffloadTier::None:
    return "none";
  case OffloadTier::Host:
    return "host";
  case OffloadTier::Nvme:
    return "nvme";
  }
  return "unknown";
}

const char *dsc::precisionName(Precision precision) {
  switch (precision) {
  case Precision::Fp32:
    return "fp32";
  case Precision::Bf16:
    return "bf16";
  case Precision::Fp16:
    return "fp16";
  }
  return "unknown";
}

const std::vector<PlanKeyInfo> &dsc::planKeys() {
  static const std::vector<PlanKeyInfo> keys = {
#define DSC_PLAN_KEY(Member, Kind, Key, Default, Aliases, Doc)                 \
  {PlanKey::Member, PlanValueKind::Kind, Key, Aliases, Doc},
#include "dsc/Support/ParallelPlan.def"
  };
  return keys;
}

const PlanKeyInfo &dsc::planKeyInfo(PlanKey key) {
  return planKeys()[size_t(key)];
}

namespace {

/// The words of a space-separated alias list.
std::vector<std::string_view> aliasesOf(const PlanKeyInfo &info) {
  std::vector<std::string_view> out;
  std::string_view s = info.aliases;
  while (!s.empty()) {
    size_t space = s.find(' ');
    std::string_view word = s.substr(0, space);
    if (!word.empty())
      out.push_back(word);
    if (space == std::string_view::npos)
      break;
    s.remove_prefix(space + 1);
  }
  return out;
}

/// Levenshtein distance, for "did you mean".
size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

bool parseInteger(std::string_view text, int64_t &value) {
  if (text.empty())
    return false;
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end;
}

std::optional<bool> parseFlag(std::string_view text) {
  if (text == "1" || text == "true")
    return true;
  if (text == "0" || text == "false")
    return false;
  return std::nullopt;
}

std::string quoteIfNeeded(const std::string &text) {
  // An empty value is "key=" (which reads back as empty).
  const bool plain = std::none_of(text.begin(), text.end(), [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) || c == '"' ||
           c == '\\' || c == '{' || c == '}' || c == '\'' ||
           !std::isprint(static_cast<unsigned char>(c));
  });
  if (plain)
    return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

/// The textual value of a word "key=value": unquoted, unescaped.
bool unquote(std::string_view raw, std::string &value, std::string &error) {
  if (raw.empty() || raw.front() != '"') {
    value = std::string(raw);
    return true;
  }
  value.clear();
  for (size_t i = 1; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '\\' && i + 1 < raw.size()) {
      value += raw[++i];
      continue;
    }
    if (c == '"') {
      if (i + 1 != raw.size()) {
        error = "text after the closing quote";
        return false;
      }
      return true;
    }
    value += c;
  }
  error = "an unterminated quote";
  return false;
}

std::string valuesTaken(PlanValueKind kind) {
  switch (kind) {
  case PlanValueKind::Count:
    return "an integer >= 1";
  case PlanValueKind::Size:
    return "an integer >= 0";
  case PlanValueKind::Stage:
    return "a ZeRO stage 0, 1, 2 or 3";
  case PlanValueKind::Flag:
    return "true, false, 1 or 0";
  case PlanValueKind::Schedule:
    return "gpipe, 1f1b, interleaved-1f1b or zb-h1";
  case PlanValueKind::Recompute:
    return "none, selective or full";
  case PlanValueKind::Tier:
    return "none, host (cpu) or nvme";
  case PlanValueKind::Precision:
    return "fp32, bf16 or fp16";
  case PlanValueKind::Text:
    return "any text";
  }
  return "";
}

template <typename T> bool assign(T &slot, std::optional<T> value) {
  if (!value)
    return false;
  slot = *value;
  return true;
}

bool setValue(int64_t &slot, PlanValueKind kind, std::string_view text) {
  int64_t v = 0;
  if (!parseInteger(text, v) || v < (kind == PlanValueKind::Count ? 1 : 0))
    return false;
  slot = v;
  return true;
}
bool setValue(int &slot, PlanValueKind, std::string_view text) {
  int64_t v = 0;
  if (!parseInteger(text, v) || v < 0 || v > 3)
    return false;
  slot = int(v);
  return true;
}
bool setValue(bool &slot, PlanValueKind, std::string_view text) {
  return assign(slot, parseFlag(text));
}
bool setValue(PipelineScheduleKind &slot, PlanValueKind,
              std::string_view text) {
  return assign(slot, parsePipelineSchedule(text));
}
bool setValue(RecomputeKind &slot, PlanValueKind, std::string_view text) {
  for (RecomputeKind k :
       {RecomputeKind::None, RecomputeKind::Selective, RecomputeKind::Full})
    if (text == recomputeName(k))
      return slot = k, true;
  // --dsc-estimate's boolean: the cost model's recompute is the full one.
  if (std::optional<bool> flag = parseFlag(text))
    return slot = *flag ? RecomputeKind::Full : RecomputeKind::None, true;
  return false;
}
bool setValue(OffloadTier &slot, PlanValueKind, std::string_view text) {
  for (OffloadTier t :
       {OffloadTier::None, OffloadTier::Host, OffloadTier::Nvme})
    if (text == offloadTierName(t))
      return slot = t, true;
  // DeepSpeed's offload device "cpu" is the host tier; --dsc-estimate's
  // boolean offload=1 is ZeRO-Offload's host tier.
  if (text == "cpu")
    return slot = OffloadTier::Host, true;
  if (std::optional<bool> flag = parseFlag(text))
    return slot = *flag ? OffloadTier::Host : OffloadTier::None, true;
  return false;
}
bool setValue(Precision &slot, PlanValueKind, std::string_view text) {
  for (Precision p : {Precision::Fp32, Precision::Bf16, Precision::Fp16})
    if (text == precisionName(p))
      return slot = p, true;
  if (text == "f32")
    return slot = Precision::Fp32, true;
  return false;
}
bool setValue(std::string &slot, PlanValueKind, std::string_view text) {
  slot = std::string(text);
  return true;
}

std::string valueString(int64_t v) { return std::to_string(v); }
std::string valueString(int v) { return std::to_string(v); }
std::string valueString(bool v) { return v ? "true" : "false"; }
std::string valueString(PipelineScheduleKind v) {
  return pipelineScheduleName(v);
}
std::string valueString(RecomputeKind v) { return recomputeName(v); }
std::string valueString(OffloadTier v) { return offloadTierName(v); }
std::string valueString(Precision v) { return precisionName(v); }
std::string valueString(const std::string &v) { return quoteIfNeeded(v); }

/// Whether the key's values in `a` and `b` are equal.
bool sameValue(const ParallelPlan &a, const ParallelPlan &b, PlanKey key) {
  switch (key) {
#define DSC_PLAN_KEY(Member, Kind, Key, Default, Aliases, Doc)                 \
  case PlanKey::Member:                                                        \
    return a.Member == b.Member;
#include "dsc/Support/ParallelPlan.def"
  }
  return false;
}

std::string unknownKeyError(std::string_view key) {
  std::string best;
  size_t bestDistance = std::numeric_limits<size_t>::max();
  std::string all;
  for (const PlanKeyInfo &info : planKeys()) {
    all += (all.empty() ? "" : ", ") + std::string(info.name);
    std::vector<std::string_view> names = aliasesOf(info);
    names.push_back(info.name);
    for (std::string_view name : names) {
      size_t d = editDistance(key, name);
      if (d < bestDistance) {
        bestDistance = d;
        best = info.name;
      }
    }
  }
  std::string msg = "unknown plan key '" + std::string(key) + "'";
  if (bestDistance <= 2)
    msg += " (did you mean '" + best + "'?)";
  return msg + "; the keys are " + all;
}

} // namespace

std::optional<PlanKey> dsc::lookupPlanKey(std::string_view name) {
  for (const PlanKeyInfo &info : planKeys()) {
    if (name == info.name)
      return info.key;
    for (std::string_view alias : aliasesOf(info))
      if (name == alias)
        return info.key;
  }
  return std::nullopt;
}

bool dsc::setPlanValue(ParallelPlan &plan, PlanKey key, std::string_view value,
                       std::string &error) {
  const PlanKeyInfo &info = planKeyInfo(key);
  bool ok = false;
  switch (key) {
#define DSC_PLAN_KEY(Member, Kind, Key, Default, Aliases, Doc)                 \
  case PlanKey::Member:                                                        \
    ok = setValue(plan.Member, PlanValueKind::Kind, value);                    \
    break;
#include "dsc/Support/ParallelPlan.def"
  }
  if (!ok)
    error = "plan key '" + std::string(info.name) + "': '" +
            std::string(value) + "' is not " + valuesTaken(info.kind);
  return ok;
}

void dsc::copyPlanValue(ParallelPlan &to, const ParallelPlan &from,
                        PlanKey key) {
  switch (key) {
#define DSC_PLAN_KEY(Member, Kind, Key, Default, Aliases, Doc)                 \
  case PlanKey::Member:                                                        \
    to.Member = from.Member;                                                   \
    return;
#include "dsc/Support/ParallelPlan.def"
  }
}

std::string dsc::planValueString(const ParallelPlan &plan, PlanKey key) {
  switch (key) {
#define DSC_PLAN_KEY(Member, Kind, Key, Default, Aliases, Doc)                 \
  case PlanKey::Member:                                                        \
    return valueString(plan.Member);
#include "dsc/Support/ParallelPlan.def"
  }
  return "";
}

bool dsc::splitPlanWords(std::string_view text, std::vector<std::string> &words,
                         std::string &error) {
  words.clear();
  size_t i = 0;
  while (i < text.size()) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    std::string word;
    int braces = 0;
    bool quoted = false;
    for (; i < text.size(); ++i) {
      char c = text[i];
      if (quoted) {
        word += c;
        if (c == '\\' && i + 1 < text.size())
          word += text[++i];
        else if (c == '"')
          quoted = false;
        continue;
      }
      if (braces == 0 && std::isspace(static_cast<unsigned char>(c)))
        break;
      if (c == '"')
        quoted = true;
      else if (c == '{')
        ++braces;
      else if (c == '}' && braces > 0)
        --braces;
      word += c;
    }
    if (quoted) {
      error = "'" + word + "': an unterminated quote";
      return false;
    }
    if (braces != 0) {
      error = "'" + word + "': an unterminated '{'";
      return false;
    }
    words.push_back(std::move(word));
  }
  return true;
}

bool dsc::parseParallelPlan(std::string_view text, ParallelPlan &plan,
                            std::string &error, PlanKeySet *given,
                            std::string *rest) {
  std::vector<std::string> words;
  if (!splitPlanWords(text, words, error))
    return false;
  ParallelPlan parsed = plan;
  PlanKeySet seen;
  // The spelling that set each key, for the error of a contradiction.
  std::vector<std::string> spelling(kNumPlanKeys);
  std::string others;
  for (const std::string &word : words) {
    std::string_view w = word;
    size_t eq = w.find('=');
    std::string_view name = w.substr(0, eq);
    std::optional<PlanKey> key = lookupPlanKey(name);
    if (!key) {
      if (rest) {
        others += (others.empty() ? "" : " ") + word;
        continue;
      }
      error = unknownKeyError(name);
      return false;
    }
    const PlanKeyInfo &info = planKeyInfo(*key);
    std::string value;
    if (eq == std::string_view::npos) {
      if (info.kind != PlanValueKind::Flag) {
        error = "plan key '" + std::string(info.name) + "' needs a value (" +
                valuesTaken(info.kind) + ")";
        return false;
      }
      value = "true";
    } else if (std::string why; !unquote(w.substr(eq + 1), value, why)) {
      error = "plan key '" + std::string(info.name) + "': " + why;
      return false;
    }
    ParallelPlan next = parsed;
    if (!setPlanValue(next, *key, value, error))
      return false;
    const size_t index = size_t(*key);
    if (seen[index] && !sameValue(next, parsed, *key)) {
      error = "plan key '" + std::string(info.name) + "' is given twice: '" +
              spelling[index] + "' and '" + word + "' contradict each other";
      return false;
    }
    seen[index] = true;
    spelling[index] = word;
    parsed = std::move(next);
  }
  plan = std::move(parsed);
  if (given)
    *given = seen;
  if (rest)
    *rest = others;
  return true;
}

std::string dsc::printParallelPlan(const ParallelPlan &plan, bool all,
                                   const ParallelPlan &base) {
  std::string out;
  for (const PlanKeyInfo &info : planKeys()) {
    const bool axis = info.key == PlanKey::dp || info.key == PlanKey::tp ||
                      info.key == PlanKey::pp;
    if (!all && !axis && sameValue(plan, base, info.key))
      continue;
    out += (out.empty() ? "" : " ") + std::string(info.name) + "=" +
           planValueString(plan, info.key);
  }
  return out;
}

std::string ParallelPlan::str() const { return printParallelPlan(*this); }

bool ParallelPlan::operator==(const ParallelPlan &other) const {
  for (const PlanKeyInfo &info : planKeys())
    if (!sameValue(*this, other, info.key))
      return false;
  return true;
}

bool dsc::parseRecomputeModules(const std::string &text,
                                RecomputeModules &modules,
                                std::string &error) {
  modules = RecomputeModules();
  size_t at = 0;
  do {
    const size_t comma = text.find(',', at);
    const std::string name = text.substr(
        at, comma == std::string::npos ? std::string::npos : comma - at);
    bool *flag = name == "core_attn"  ? &modules.coreAttention
                 : name == "layernorm" ? &modules.layerNorm
                 : name == "mlp_act"   ? &modules.mlpActivation
                                       : nullptr;
    if (!flag) {
      error = "plan key 'recompute-modules': '" + name +
              "' is not core_attn, layernorm or mlp_act";
      return false;
    }
    if (*flag) {
      error = "plan key 'recompute-modules': '" + name + "' is given twice";
      return false;
    }
    *flag = true;
    at = comma == std::string::npos ? std::string::npos : comma + 1;
  } while (at != std::string::npos);
  return true;
}

bool dsc::parseStageLayers(const std::string &text, int64_t stages,
                           int64_t numLayers, std::vector<int64_t> &layers,
                           std::string &error) {
  layers.clear();
  const std::string key = "stage-layers=" + text;
  size_t at = 0;
  do {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(
        at, comma == std::string::npos ? std::string::npos : comma - at);
    int64_t n = 0;
    const char *end = item.data() + item.size();
    auto [ptr, ec] = std::from_chars(item.data(), end, n);
    if (item.empty() || ec != std::errc() || ptr != end || n < 1) {
      error = key + ": '" + item +
              "' is not a layer count >= 1 (each stage holds at least one "
              "transformer layer)";
      return false;
    }
    layers.push_back(n);
    at = comma == std::string::npos ? std::string::npos : comma + 1;
  } while (at != std::string::npos);
  if (int64_t(layers.size()) != stages) {
    error = key + " gives " + std::to_string(layers.size()) +
            " stages' layers, but the plan has " + std::to_string(stages) +
            " stages (pp x virtual-stages)";
    return false;
  }
  int64_t sum = 0;
  for (int64_t n : layers)
    sum += n;
  if (sum != numLayers) {
    error = key + " adds up to " + std::to_string(sum) +
            " layers, but the model has " + std::to_string(numLayers);
    return false;
  }
  return true;
}
