//===- ParallelPlan.h - The one typed parallel plan -------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A parallel training plan (mesh axes, ZeRO, micro-batches, pipeline
// schedule, recompute, sequence parallelism, memory tiers, precision) as one
// value type, generated from ParallelPlan.def, with its one textual form
// ("dp=2 tp=2 pp=2 zero=1 pipeline-schedule=interleaved-1f1b
// virtual-stages=2"), which is also the command-line form. --dsc-compile,
// plan=auto, --dsc-apply-plan, --dsc-estimate, the cost model and plan
// search, the #dsc.parallel_plan attribute and the DeepSpeed/GPT-NeoX config
// readers all produce and consume this struct through this parser and
// printer. No MLIR and no LLVM, so the runtime may use it too.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_SUPPORT_PARALLELPLAN_H
#define DSC_SUPPORT_PARALLELPLAN_H

#include "dsc/Support/PipelineScheduleKind.h"

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsc {

/// Activation recompute (Korthikanti et al.): none, the attention core of
/// every layer (selective), or everything but each layer's input (full).
enum class RecomputeKind : uint8_t { None = 0, Selective = 1, Full = 2 };

/// Where an offloaded kind of state lives: on the device (none), in host
/// memory, or on NVMe.
enum class OffloadTier : uint8_t { None = 0, Host = 1, Nvme = 2 };

/// The compute precision: fp32, or 16-bit compute over fp32 masters.
enum class Precision : uint8_t { Fp32 = 0, Bf16 = 1, Fp16 = 2 };

const char *recomputeName(RecomputeKind kind);

/// What recompute=selective recomputes (the plan's recompute-modules).
struct RecomputeModules {
  bool coreAttention = false, layerNorm = false, mlpActivation = false;
};
/// Parses a recompute-modules value ("core_attn,layernorm,mlp_act"): false
/// with `error` naming an unknown or repeated module and the ones there are.
bool parseRecomputeModules(const std::string &text, RecomputeModules &modules,
                           std::string &error);
/// Parses a stage-layers value ("2,3,4,3"): each stage's transformer layer
/// count, in stage order; false with `error` naming an entry that is not a
/// count >= 1, or a count of stages other than `stages` (pp x
/// virtual-stages), or a sum other than `numLayers`.
bool parseStageLayers(const std::string &text, int64_t stages,
                      int64_t numLayers, std::vector<int64_t> &layers,
                      std::string &error);
const char *offloadTierName(OffloadTier tier);
const char *precisionName(Precision precision);

/// How a key's value is spelled and checked (ParallelPlan.def).
enum class PlanValueKind : uint8_t {
  Count,
  Size,
  Stage,
  Flag,
  Schedule,
  Recompute,
  Tier,
  Precision,
  Text
};

/// Each key of ParallelPlan.def, in its order.
enum class PlanKey : uint8_t {
#define DSC_PLAN_KEY(Member, Kind, Key, Default, Aliases, Doc) Member,
#include "dsc/Support/ParallelPlan.def"
};

inline constexpr size_t kNumPlanKeys = 0
#define DSC_PLAN_KEY(Member, Kind, Key, Default, Aliases, Doc) +1
#include "dsc/Support/ParallelPlan.def"
    ;

/// A set of keys (those a plan string gave explicitly).
using PlanKeySet = std::bitset<kNumPlanKeys>;

namespace detail {
template <PlanValueKind K> struct PlanValueType;
template <> struct PlanValueType<PlanValueKind::Count> {
  using type = int64_t;
};
template <> struct PlanValueType<PlanValueKind::Size> { using type = int64_t; };
template <> struct PlanValueType<PlanValueKind::Stage> { using type = int; };
template <> struct PlanValueType<PlanValueKind::Flag> { using type = bool; };
template <> struct PlanValueType<PlanValueKind::Schedule> {
  using type = PipelineScheduleKind;
};
template <> struct PlanValueType<PlanValueKind::Recompute> {
  using type = RecomputeKind;
};
template <> struct PlanValueType<PlanValueKind::Tier> {
  using type = OffloadTier;
};
template <> struct PlanValueType<PlanValueKind::Precision> {
  using type = Precision;
};
template <> struct PlanValueType<PlanValueKind::Text> {
  using type = std::string;
};
} // namespace detail

/// A world rank's place in a dp x tp x pp mesh laid out as Megatron-LM
/// orders it: rank = tpRank + tp * (dpRank + dp * ppRank).
struct RankCoordinates {
  int64_t pp = 0, dp = 0, tp = 0;
};
inline RankCoordinates rankCoordinates(int64_t rank, int64_t dp, int64_t tp) {
  return {rank / (tp * dp), (rank / tp) % dp, rank % tp};
}

/// A 3D-parallel training plan. Ranks are laid out as Megatron-LM orders
/// them (rankCoordinates).
struct ParallelPlan {
#define DSC_PLAN_KEY(Member, Kind, Key, Default, Aliases, Doc)                 \
  typename detail::PlanValueType<PlanValueKind::Kind>::type Member = Default;
#include "dsc/Support/ParallelPlan.def"

  int64_t numGpus() const { return dp * tp * pp; }
  /// Sequences per step (needs microBatchSize set).
  int64_t globalBatch() const { return dp * microBatchSize * numMicroBatches; }
  bool offloadsOptimizer() const {
    return offloadOptimizer != OffloadTier::None;
  }
  bool offloadsParams() const { return offloadParams != OffloadTier::None; }
  bool isFp32() const { return precision == Precision::Fp32; }
  bool fullRecompute() const { return recompute == RecomputeKind::Full; }

  /// The textual form of the keys that differ from their defaults (the
  /// mesh axes always), e.g. "dp=8 tp=8 pp=16 zero=1 micro-batch-size=1
  /// microbatches=192"; parseParallelPlan reads it back to an equal plan.
  std::string str() const;

  bool operator==(const ParallelPlan &other) const;
  bool operator!=(const ParallelPlan &other) const { return !(*this == other); }
};

/// A key's spellings, kind and meaning.
struct PlanKeyInfo {
  PlanKey key;
  PlanValueKind kind;
  const char *name;
  /// Other spellings, space-separated ("" for none).
  const char *aliases;
  const char *doc;
};

/// Every key, in ParallelPlan.def's order.
const std::vector<PlanKeyInfo> &planKeys();
const PlanKeyInfo &planKeyInfo(PlanKey key);

/// The key spelled `name` (its key or an alias), or none.
std::optional<PlanKey> lookupPlanKey(std::string_view name);

/// Parses `text` ("key=value ..." separated by spaces; a value may be
/// double-quoted with \" and \\ escapes; a Flag key alone means true) onto
/// `plan`: the keys given replace the plan's values. On failure returns
/// false, leaves `plan` unchanged and sets `error` to a message naming the
/// key: an unknown key (with the nearest key), a bad value (with the values
/// the key takes), or a key given twice with different values (through any
/// of its spellings). `given`, when set, receives the keys given. `rest`,
/// when set, receives the words that are not plan keys instead of an error,
/// space-separated as they were written (so another option parser can take
/// them).
bool parseParallelPlan(std::string_view text, ParallelPlan &plan,
                       std::string &error, PlanKeySet *given = nullptr,
                       std::string *rest = nullptr);

/// Sets one key from its textual value; false with `error` naming the key
/// and the values it takes.
bool setPlanValue(ParallelPlan &plan, PlanKey key, std::string_view value,
                  std::string &error);

/// Copies one key's value from `from` to `to`.
void copyPlanValue(ParallelPlan &to, const ParallelPlan &from, PlanKey key);

/// A key's value in the textual form ("2", "true", "interleaved-1f1b",
/// "\"a dir\"" quoted only when it must be).
std::string planValueString(const ParallelPlan &plan, PlanKey key);

/// The textual form: "key=value" for each key in ParallelPlan.def's order,
/// every key when `all`, else those that differ from `base` (the mesh axes
/// always).
std::string printParallelPlan(const ParallelPlan &plan, bool all = false,
                              const ParallelPlan &base = ParallelPlan());

/// Splits `text` into its words as parseParallelPlan does (quotes and
/// braces keep their spaces); false with `error` on an unterminated quote
/// or brace.
bool splitPlanWords(std::string_view text, std::vector<std::string> &words,
                    std::string &error);

} // namespace dsc

#endif // DSC_SUPPORT_PARALLELPLAN_H
