//===- PlanSearch.h - Exhaustive search over parallel plans -----*- C++ -*-===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// Enumerates dp x tp x pp x ep x ZeRO x micro-batch x schedule x recompute
// x sequence parallel x offload for a model on N GPUs (ep > 1 for MoE
// models only), prunes by memory and ranks the rest with the cost model.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_ANALYSIS_PLANSEARCH_H
#define DSC_ANALYSIS_PLANSEARCH_H

#include "dsc/Analysis/CostModel.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::dsc::analysis {

enum class SearchObjective { Time, Memory };

/// Parses "time" or "memory".
std::optional<SearchObjective> parseObjective(llvm::StringRef s);
const char *objectiveName(SearchObjective o);

struct SearchOptions {
  int64_t numGpus = 0;
  int64_t globalBatch = 0;
  SearchObjective objective = SearchObjective::Time;
  /// How many ranked plans to keep.
  size_t topK = 10;
  /// Restrict the micro-batch size (0: search all divisors).
  int64_t microBatchSize = 0;
  bool allowRecompute = true;
  bool allowOffload = true;
  /// Optimizer offload with pipeline stages.
  bool allowOffloadWithPipeline = true;
  /// Parameter offload (ZeRO-Infinity) with pipeline stages (--dsc-offload
  /// builds it without them only).
  bool allowParamsOffloadWithPipeline = true;
  bool allowSequenceParallel = true;
  bool allowGPipe = true;
  /// Interleaved 1F1B with 2 to 8 model chunks per pipeline rank.
  bool allowInterleaved = true;
  /// ZB-H1 (Qi et al. 2024).
  bool allowZeroBubble = true;
  /// Expert parallelism (ep > 1) for an MoE model: every ep dividing dp and
  /// the experts. A dense model is always searched at ep = 1.
  bool allowExpertParallel = true;
  /// Price every plan with fp32 element sizes (ParallelPlan::fp32).
  bool fp32 = false;
};

/// One feasible plan as a point of the report's scatter plot.
struct PlanPoint {
  double deviceBytes = 0;
  /// Model FLOP/s per GPU (MFU x peak): useful work, so higher is faster.
  double modelFlopsPerGpu = 0;
};

/// The best feasible plan that differs from the winner in one respect, for
/// the report's "why this plan" table.
struct Alternative {
  /// What differs, e.g. "no pipeline parallelism (pp = 1)".
  std::string what;
  /// `fits` is false when no such plan fits.
  PlanEstimate best;
  /// How it compares, e.g. "10.1% slower, mostly from more recompute
  /// (+5.22 s)".
  std::string comparison;
};

/// 1-bit Adam changes the optimizer (no bias correction, a warm-up of exact
/// steps before the compressed ones), so the search proposes it beside its
/// winner instead of choosing it: the feasible plan fastest under 1-bit
/// Adam, its steps averaged over a run.
struct OnebitProposal {
  /// The plan, with onebit-bucket-bytes set; `fits` is false when 1-bit
  /// Adam applies to no feasible plan (one data-parallel rank, ZeRO-3 or
  /// offload everywhere).
  PlanEstimate best;
  /// Seconds per step averaged over a run whose first kWarmUpFraction of
  /// the steps are the warm-up's.
  double averaged = 0;
  /// Whether it beats the winner's step.
  bool pays = false;
  /// One sentence for the report and the remarks; empty without a plan.
  std::string sentence;
  /// DeepSpeed's tutorials freeze the variance after 15-25% of the steps.
  static constexpr double kWarmUpFraction = 0.2;
  /// The moments in buckets (DeepSpeed's fp16 form: a flattened group)
  /// of at most this many bytes: far fewer collectives than one a tensor.
  static constexpr int64_t kBucketBytes = 134217728;
};

struct SearchResult {
  /// Best first, by the objective; at most topK.
  std::vector<PlanEstimate> top;
  /// Every feasible plan (for the plot).
  std::vector<PlanPoint> feasible;
  /// The best plan whose (tp, pp) differs from the winner's, and the best
  /// whose ZeRO stage differs; `fits` is false when none exists.
  PlanEstimate bestOtherLayout;
  PlanEstimate bestOtherZero;
  /// One entry per respect in which a plan can differ from the winner:
  /// (tp, pp) split, ZeRO stage, with/without pipeline or tensor
  /// parallelism, recompute, offload, schedule.
  std::vector<Alternative> alternatives;
  /// The plan needing the least device memory, feasible or not (to explain
  /// a search that found nothing).
  PlanEstimate leastMemory;
  size_t numEnumerated = 0;
  size_t numFeasible = 0;
  /// One sentence on why the winner wins.
  std::string explanation;
  /// 1-bit Adam's best plan (searched by time only).
  OnebitProposal onebit;
  /// Wall-clock seconds the search took.
  double searchSeconds = 0;
};

/// Runs the search. Fails (with a message naming the cause) when the inputs
/// are inconsistent or no plan fits.
llvm::Expected<SearchResult> searchPlans(const CostModel &model,
                                         const SearchOptions &options);

/// Positive divisors of n, ascending.
std::vector<int64_t> divisors(int64_t n);

} // namespace mlir::dsc::analysis

#endif // DSC_ANALYSIS_PLANSEARCH_H
