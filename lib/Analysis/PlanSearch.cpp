//===- PlanSearch.cpp - Exhaustive search over parallel plans -------------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// The space is small enough (tens of thousands of plans for a 1T model on
// thousands of GPUs) that exhaustive enumeration with closed-form pricing
// beats any clever search: it is exact and takes milliseconds.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/PlanSearch.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <functional>

using namespace mlir::dsc::analysis;

std::optional<SearchObjective>
mlir::dsc::analysis::parseObjective(llvm::StringRef s) {
  return llvm::StringSwitch<std::optional<SearchObjective>>(s)
      .Case("time", SearchObjective::Time)
      .Case("memory", SearchObjective::Memory)
      .Default(std::nullopt);
}

const char *mlir::dsc::analysis::objectiveName(SearchObjective o) {
  return o == SearchObjective::Time ? "time" : "memory";
}

std::vector<int64_t> mlir::dsc::analysis::divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t i = 1; i * i <= n; ++i) {
    if (n % i != 0)
      continue;
    low.push_back(i);
    if (i != n / i)
      high.push_back(n / i);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

namespace {

/// Orders plans by the objective; ties go to the other criterion, then to
/// the simpler plan (fewer pipeline stages, lower ZeRO stage), so results
/// are deterministic.
struct PlanOrder {
  SearchObjective objective;
  bool operator()(const PlanEstimate &a, const PlanEstimate &b) const {
    double ta = a.time.total, tb = b.time.total;
    double ma = a.memory.device, mb = b.memory.device;
    if (objective == SearchObjective::Time) {
      if (ta != tb)
        return ta < tb;
      if (ma != mb)
        return ma < mb;
    } else {
      if (ma != mb)
        return ma < mb;
      if (ta != tb)
        return ta < tb;
    }
    if (a.plan.pp != b.plan.pp)
      return a.plan.pp < b.plan.pp;
    if (a.plan.zeroStage != b.plan.zeroStage)
      return a.plan.zeroStage < b.plan.zeroStage;
    return a.plan.str() < b.plan.str();
  }
};

/// The time component that differs most between `alt` and `win`, phrased as
/// "more pipeline bubble (+1.2 s)".
std::string biggestDifference(const PlanEstimate &win,
                              const PlanEstimate &alt) {
  const StepTimeBreakdown &w = win.time, &a = alt.time;
  std::pair<const char *, double> parts[] = {
      {"compute", (a.compute - a.recompute) - (w.compute - w.recompute)},
      {"recompute", a.recompute - w.recompute},
      {"tensor-parallel communication", a.tpComm - w.tpComm},
      {"expert-parallel all-to-all", a.epComm - w.epComm},
      {"pipeline send/recv", a.ppComm - w.ppComm},
      {"exposed ZeRO communication", a.zeroComm - w.zeroComm},
      {"pipeline bubble", a.bubble - w.bubble},
      {"exposed data-parallel communication", a.dpComm - w.dpComm},
      {"optimizer step", a.optimizer - w.optimizer},
      {"offload traffic", a.offload - w.offload},
  };
  auto *best = std::max_element(
      std::begin(parts), std::end(parts),
      [](const auto &x, const auto &y) { return x.second < y.second; });
  return llvm::formatv("more {0} (+{1:F2} s)", best->first, best->second);
}

/// "12.3% slower (23.1 s/step), mostly from more recompute (+5.22 s)", or
/// the memory difference under the memory objective.
std::string comparison(const PlanEstimate &win, const PlanEstimate &alt,
                       SearchObjective objective) {
  if (!alt.fits)
    return "no such plan fits in memory";
  if (objective == SearchObjective::Memory)
    return llvm::formatv("needs {0:F2} GB more per GPU",
                         (alt.memory.device - win.memory.device) / 1e9);
  double slower = (alt.time.total / win.time.total - 1.0) * 100.0;
  return llvm::formatv("{0:F1}% slower ({1:F2} s/step), mostly from {2}",
                       slower, alt.time.total, biggestDifference(win, alt));
}

std::string compareTo(const PlanEstimate &win, const PlanEstimate &alt,
                      SearchObjective objective, const char *what) {
  if (!alt.fits)
    return llvm::formatv("no plan with a different {0} fits in memory", what);
  return llvm::formatv("the best plan with a different {0} ({1}) {2}{3}", what,
                       alt.plan.str(),
                       objective == SearchObjective::Memory ? "" : "is ",
                       comparison(win, alt, objective));
}

} // namespace

/// The schedules (and model chunks per rank) to try with `p` pipeline
/// stages and `m` micro-batches: 1F1B always; with p > 1 GPipe, Megatron-LM's
/// interleaved 1F1B with every v from 2 to 8 that its rules allow (m a
/// multiple of p, p v dividing the layers) and ZB-H1, as `opt` allows.
static std::vector<std::pair<PipelineSchedule, int64_t>>
pipelineSchedules(const SearchOptions &opt, const ModelShape &ms, int64_t p,
                  int64_t m) {
  std::vector<std::pair<PipelineSchedule, int64_t>> out = {
      {PipelineSchedule::OneFOneB, 1}};
  if (p == 1)
    return out;
  if (opt.allowGPipe)
    out.push_back({PipelineSchedule::GPipe, 1});
  if (opt.allowInterleaved && m % p == 0)
    for (int64_t v = 2; v <= 8; ++v)
      if (ms.numLayers % (p * v) == 0)
        out.push_back({PipelineSchedule::InterleavedOneFOneB, v});
  if (opt.allowZeroBubble)
    out.push_back({PipelineSchedule::ZeroBubbleH1, 1});
  return out;
}

/// The feasible plan whose steps under 1-bit Adam, averaged over a run,
/// are fastest (OnebitProposal), and how it compares with `win`.
static OnebitProposal proposeOnebit(const CostModel &cm,
                                    const std::vector<PlanEstimate> &feasible,
                                    const PlanEstimate &win) {
  OnebitProposal proposal;
  const double f = OnebitProposal::kWarmUpFraction;
  for (const PlanEstimate &e : feasible) {
    if (!e.compressed.whyNot.empty())
      continue; // One data-parallel rank, ZeRO-3 or offload.
    ParallelPlan bucketed = e.plan;
    bucketed.onebitBucketBytes = OnebitProposal::kBucketBytes;
    PlanEstimate b = cm.estimate(bucketed);
    if (!b.fits || !b.compressed.whyNot.empty())
      continue;
    const double averaged =
        f * b.compressed.warmUp + (1.0 - f) * b.compressed.total;
    if (!proposal.best.fits || averaged < proposal.averaged) {
      proposal.best = std::move(b);
      proposal.averaged = averaged;
    }
  }
  if (!proposal.best.fits)
    return proposal;
  const double t = win.time.total;
  proposal.pays = proposal.averaged < t;
  const CompressedStepEstimate &ce = proposal.best.compressed;
  const std::string steps = llvm::formatv(
      "warm-up steps {0:F2} s, compressed steps {1:F2} s, {2:F2} s averaged "
      "over a run that compresses from {3:F0}% of it",
      ce.warmUp, ce.total, proposal.averaged, 100.0 * f);
  proposal.sentence =
      proposal.pays
          ? llvm::formatv(
                "1-bit Adam would train faster: `{0}` with "
                "optimizer=onebit_adam and freeze-step at {1:F0}% of the "
                "steps ({2}), {3:F1}% faster than the winner's {4:F2} s; "
                "it changes the optimizer (no bias correction, DeepSpeed's "
                "OnebitAdam), so the search proposes it and does not "
                "choose it",
                proposal.best.plan.str(), 100.0 * f, steps,
                100.0 * (t - proposal.averaged) / t, t)
                .str()
          : llvm::formatv("1-bit Adam would not pay here: its best plan, "
                          "`{0}`, has {1}, {2:F1}% slower than the winner's "
                          "{3:F2} s",
                          proposal.best.plan.str(), steps,
                          100.0 * (proposal.averaged - t) / t, t)
                .str();
  return proposal;
}

llvm::Expected<SearchResult>
mlir::dsc::analysis::searchPlans(const CostModel &cm,
                                 const SearchOptions &opt) {
  auto start = std::chrono::steady_clock::now();
  const ModelShape &ms = cm.model();
  const ClusterSpec &c = cm.cluster();
  auto fail = [](const std::string &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  if (std::string err = ms.validate(); !err.empty())
    return fail("invalid model shape: " + err);
  if (opt.numGpus < 1)
    return fail(llvm::formatv("gpus must be positive, got {0}", opt.numGpus));
  if (opt.globalBatch < 1)
    return fail(llvm::formatv("global batch must be positive, got {0}",
                              opt.globalBatch));
  if (opt.numGpus > c.gpusPerNode && opt.numGpus % c.gpusPerNode != 0)
    return fail(llvm::formatv("{0} GPUs is not a whole number of {1}-GPU "
                              "nodes of '{2}'",
                              opt.numGpus, c.gpusPerNode, c.name));

  SearchResult result;
  PlanOrder order{opt.objective};
  std::vector<PlanEstimate> feasible;
  ParallelPlan leastMemoryPlan;
  double leastMemory = -1;

  // An MoE model: no sequence parallelism (what --dsc-compile refuses),
  // and expert parallelism over every ep that divides both dp and the
  // experts. A dense model keeps ep = 1.
  const bool moe = ms.numExperts > 0;
  auto expertDegrees = [&](int64_t d) {
    std::vector<int64_t> out;
    for (int64_t e : divisors(d))
      if (e == 1 || (moe && opt.allowExpertParallel && ms.numExperts % e == 0))
        out.push_back(e);
    return out;
  };

  for (int64_t t : divisors(c.gpusPerNode)) {
    if (ms.numHeads % t != 0 || opt.numGpus % t != 0)
      continue;
    for (int64_t p : divisors(ms.numLayers)) {
      if (opt.numGpus % (t * p) != 0)
        continue;
      int64_t d = opt.numGpus / (t * p);
      if (opt.globalBatch % d != 0)
        continue;
      for (int64_t b : divisors(opt.globalBatch / d)) {
        if (opt.microBatchSize > 0 && b != opt.microBatchSize)
          continue;
        for (int64_t ep : expertDegrees(d)) {
          ParallelPlan plan;
          plan.precision =
              opt.fp32 ? ::dsc::Precision::Fp32 : ::dsc::Precision::Bf16;
          plan.dp = d;
          plan.tp = t;
          plan.pp = p;
          plan.ep = ep;
          plan.microBatchSize = b;
          plan.numMicroBatches = opt.globalBatch / (d * b);
          for (int zero = 0; zero <= 3; ++zero) {
            // Without data parallelism ZeRO partitions nothing; stage 1 still
            // matters as the carrier of optimizer offload (ZeRO-Offload).
            if (d == 1 && zero > 1)
              continue;
            plan.zeroStage = zero;
            for (auto [schedule, chunks] :
                 pipelineSchedules(opt, ms, p, plan.numMicroBatches)) {
              plan.schedule = schedule;
              plan.virtualStages = chunks;
              for (int rc = 0; rc < 2; ++rc) {
                if (rc && !opt.allowRecompute)
                  continue;
                plan.recompute = rc ? ::dsc::RecomputeKind::Full
                                    : ::dsc::RecomputeKind::None;
                for (int sp = 0; sp < 2; ++sp) {
                  if (sp && (t == 1 || !opt.allowSequenceParallel || moe))
                    continue;
                  plan.sequenceParallel = sp != 0;
                  for (int off = 0; off < 2; ++off) {
                    if (off && (zero == 0 || !opt.allowOffload ||
                                (p > 1 && !opt.allowOffloadWithPipeline)))
                      continue;
                    if (!off && d == 1 && zero == 1)
                      continue;
                    plan.offloadOptimizer = off ? ::dsc::OffloadTier::Host
                                                : ::dsc::OffloadTier::None;
                    // ZeRO-Infinity's parameter offload: ZeRO-3's chunks
                    // beside the offloaded optimizer.
                    for (int params = 0; params < 2; ++params) {
                      if (params &&
                          (!off || zero != 3 ||
                           (p > 1 && !opt.allowParamsOffloadWithPipeline)))
                        continue;
                      plan.offloadParams = params ? ::dsc::OffloadTier::Host
                                                  : ::dsc::OffloadTier::None;
                      ++result.numEnumerated;
                      MemoryBreakdown mem = cm.memory(plan);
                      if (leastMemory < 0 || mem.device < leastMemory) {
                        leastMemory = mem.device;
                        leastMemoryPlan = plan;
                      }
                      if (mem.device > c.gpu.memoryBytes)
                        continue;
                      PlanEstimate e = cm.estimate(plan);
                      if (!e.fits)
                        continue;
                      result.feasible.push_back(
                          {e.memory.device, e.modelFlopsPerGpu});
                      feasible.push_back(std::move(e));
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  result.numFeasible = feasible.size();
  if (result.numEnumerated == 0)
    return fail(llvm::formatv(
        "no plan divides the problem: {0} GPUs, global batch {1}, {2} layers, "
        "{3} heads, {4} GPUs per node (the global batch must be a multiple of "
        "the data-parallel degree)",
        opt.numGpus, opt.globalBatch, ms.numLayers, ms.numHeads,
        c.gpusPerNode));
  result.leastMemory = cm.estimate(leastMemoryPlan);
  if (feasible.empty())
    return fail(llvm::formatv(
        "no plan fits: of {0} plans the smallest ({1}) {2}; use more GPUs, a "
        "GPU with more memory, or a smaller model or micro-batch",
        result.numEnumerated, leastMemoryPlan.str(),
        result.leastMemory.whyNot));

  size_t k = std::min(opt.topK == 0 ? size_t(1) : opt.topK, feasible.size());
  std::partial_sort(feasible.begin(), feasible.begin() + k, feasible.end(),
                    order);
  const PlanEstimate &win = feasible.front();
  const ParallelPlan &wp = win.plan;
  using Differs = std::function<bool(const ParallelPlan &)>;
  std::vector<std::pair<std::string, Differs>> respects = {
      {"a different tensor/pipeline split",
       [&](const ParallelPlan &p) { return p.tp != wp.tp || p.pp != wp.pp; }},
      {"a different ZeRO stage",
       [&](const ParallelPlan &p) { return p.zeroStage != wp.zeroStage; }},
  };
  if (wp.pp > 1)
    respects.push_back({"no pipeline parallelism (pp = 1)",
                        [](const ParallelPlan &p) { return p.pp == 1; }});
  else
    respects.push_back({"pipeline parallelism (pp > 1)",
                        [](const ParallelPlan &p) { return p.pp > 1; }});
  if (wp.tp > 1)
    respects.push_back({"no tensor parallelism (tp = 1)",
                        [](const ParallelPlan &p) { return p.tp == 1; }});
  else
    respects.push_back({"tensor parallelism (tp > 1)",
                        [](const ParallelPlan &p) { return p.tp > 1; }});
  if (moe)
    respects.push_back(
        {wp.ep > 1 ? "no expert parallelism (ep = 1)"
                   : "expert parallelism (ep > 1)",
         [&](const ParallelPlan &p) { return (p.ep > 1) != (wp.ep > 1); }});
  respects.push_back({wp.fullRecompute() ? "no recompute" : "full recompute",
                      [&](const ParallelPlan &p) {
                        return p.fullRecompute() != wp.fullRecompute();
                      }});
  respects.push_back(
      {wp.offloadsOptimizer() ? "no optimizer offload" : "optimizer offload",
       [&](const ParallelPlan &p) {
         return p.offloadsOptimizer() != wp.offloadsOptimizer();
       }});
  if (wp.zeroStage == 3 && wp.offloadsOptimizer())
    respects.push_back(
        {wp.offloadsParams() ? "no parameter offload" : "parameter offload",
         [&](const ParallelPlan &p) {
           return p.offloadsParams() != wp.offloadsParams();
         }});
  if (wp.pp > 1)
    respects.push_back(
        {std::string("a schedule other than ") + scheduleName(wp.schedule),
         [&](const ParallelPlan &p) {
           return p.pp > 1 && p.schedule != wp.schedule;
         }});
  std::vector<PlanEstimate> bestOf(respects.size());
  for (const PlanEstimate &e : feasible)
    for (size_t i = 0; i < respects.size(); ++i)
      if (respects[i].second(e.plan) &&
          (!bestOf[i].fits || order(e, bestOf[i])))
        bestOf[i] = e;
  for (size_t i = 0; i < respects.size(); ++i)
    result.alternatives.push_back({respects[i].first, bestOf[i],
                                   comparison(win, bestOf[i], opt.objective)});
  result.bestOtherLayout = bestOf[0];
  result.bestOtherZero = bestOf[1];
  result.top.assign(feasible.begin(), feasible.begin() + k);

  std::string head =
      opt.objective == SearchObjective::Time
          ? llvm::formatv("{0} wins at {1:F2} s/step ({2:F1}% MFU)",
                          win.plan.str(), win.time.total, win.mfu * 100.0)
                .str()
          : llvm::formatv("{0} needs the least memory, {1:F1} GB per GPU",
                          win.plan.str(), win.memory.device / 1e9)
                .str();
  result.explanation = llvm::formatv(
      "{0}: {1}, and {2}; {3} of {4} plans fit in {5:F0} GB.", head,
      compareTo(win, result.bestOtherLayout, opt.objective,
                "tensor/pipeline split"),
      compareTo(win, result.bestOtherZero, opt.objective, "ZeRO stage"),
      result.numFeasible, result.numEnumerated, c.gpu.memoryBytes / 1e9);

  if (opt.objective == SearchObjective::Time)
    result.onebit = proposeOnebit(cm, feasible, win);

  result.searchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}
