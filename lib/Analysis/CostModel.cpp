//===- CostModel.cpp - Step time and memory of a parallel plan ------------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// Every term here is a closed form over the plan, so that the search can
// price tens of thousands of plans per second; docs/cost-model.md states
// each formula and where its constants come from.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/CostModel.h"

#include "dsc/Analysis/Collectives.h"
#include "dsc/Support/CollectiveBytes.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

using namespace mlir::dsc::analysis;

CostModel::CostModel(ModelShape model, ClusterSpec cluster)
    : modelShape(std::move(model)), clusterSpec(std::move(cluster)) {}

std::string CostModel::checkPlan(const ParallelPlan &plan) const {
  const ModelShape &m = modelShape;
  if (plan.dp < 1 || plan.tp < 1 || plan.pp < 1 || plan.microBatchSize < 1 ||
      plan.numMicroBatches < 1)
    return "dp, tp, pp, micro-batch size and micro-batch count must be >= 1";
  // Expert parallelism splits the data-parallel group (docs/moe.md).
  if (plan.ep < 1)
    return llvm::formatv("ep must be >= 1, got {0}", plan.ep);
  if (plan.ep > 1 && m.numExperts <= 0)
    return llvm::formatv("ep={0} needs MoE layers; the model has none",
                         plan.ep);
  if (plan.dp % plan.ep != 0)
    return llvm::formatv("ep={0} does not divide dp={1} (expert parallelism "
                         "splits the data-parallel group)",
                         plan.ep, plan.dp);
  if (m.numExperts % plan.ep != 0)
    return llvm::formatv("{0} experts are not divisible by ep={1}",
                         m.numExperts, plan.ep);
  if (plan.zeroStage < 0 || plan.zeroStage > 3)
    return llvm::formatv("ZeRO stage must be 0-3, got {0}", plan.zeroStage);
  if (m.numHeads % plan.tp != 0)
    return llvm::formatv("tp={0} does not divide the {1} attention heads",
                         plan.tp, m.numHeads);
  if (plan.tp > clusterSpec.gpusPerNode ||
      clusterSpec.gpusPerNode % plan.tp != 0)
    return llvm::formatv("tp={0} does not fit within a node of {1} GPUs",
                         plan.tp, clusterSpec.gpusPerNode);
  if (m.numLayers % plan.pp != 0)
    return llvm::formatv("pp={0} does not divide the {1} layers", plan.pp,
                         m.numLayers);
  // What --dsc-compile refuses for MoE layers (docs/moe.md).
  if (m.numExperts > 0 && plan.pp > 1 &&
      plan.precision == ::dsc::Precision::Fp16)
    return "fp16 pipelines with MoE layers are not supported yet (each "
           "stage's auxiliary losses have a fixed seed; use precision=bf16)";
  if (m.numExperts > 0 && plan.sequenceParallel)
    return "sequence parallelism with MoE layers is not supported yet";
  if (plan.pp > 1 || plan.virtualStages != 1)
    if (std::optional<std::string> why = ::dsc::pipelineShapeError(
            plan.schedule, plan.pp, plan.virtualStages, plan.numMicroBatches))
      return *why;
  if (m.numLayers % (plan.pp * plan.virtualStages) != 0)
    return llvm::formatv("pp={0} x virtual-stages={1} model chunks do not "
                         "divide the {2} layers",
                         plan.pp, plan.virtualStages, m.numLayers);
  if (plan.recompute == ::dsc::RecomputeKind::Selective)
    return "the cost model prices recompute=none or recompute=full; "
           "recompute=selective is not priced";
  if (plan.offloadsOptimizer() && plan.zeroStage == 0)
    return "optimizer offload needs ZeRO stage >= 1 (as in DeepSpeed)";
  if (plan.offloadsParams() &&
      (plan.zeroStage != 3 || !plan.offloadsOptimizer()))
    return "parameter offload needs ZeRO stage 3 and optimizer offload (as "
           "--dsc-offload builds it)";
  if (plan.delayedUpdate &&
      (!plan.offloadsOptimizer() || plan.offloadsParams()))
    return "the delayed parameter update needs optimizer offload without "
           "parameter offload (as --dsc-offload builds it)";
  return "";
}

int64_t
CostModel::zero3CollectivesPerLayer(int64_t t,
                                    int64_t persistenceThreshold) const {
  const ModelShape &ms = modelShape;
  const double h = static_cast<double>(ms.hiddenSize), f = ms.ffnWidth(),
               td = static_cast<double>(t);
  const double a = static_cast<double>(std::max<int64_t>(1, ms.numHeads));
  const double kv =
      static_cast<double>(ms.numKvHeads > 0 ? ms.numKvHeads : ms.numHeads);
  const double qkv = h * (h + 2.0 * kv * h / a) / td;
  // A layer's parameter tensors on one tp rank, as the importers name them:
  // GPT-2's block has two norms (weight, bias), QKV, the projection and two
  // MLP products, each with a bias; a gated block two RMS norms, QKV, the
  // projection, the gated up projection and the down projection.
  std::vector<double> tensors =
      ms.gatedMlp
          ? std::vector<double>{h,         h, qkv, h * h / td, 2.0 * f * h / td,
                                f * h / td}
          : std::vector<double>{h, h, qkv,        qkv / h, h * h / td, h,
                                h, h, f * h / td, f / td,  f * h / td, h};
  int64_t gathered = 0;
  for (double elements : tensors)
    if (elements > static_cast<double>(persistenceThreshold))
      ++gathered;
  return gathered;
}

double CostModel::gemmEfficiency(double m, double n, double k) const {
  const Calibration &c = clusterSpec.calibration;
  auto f = [&](double d) { return d / (d + c.gemmHalfDim); };
  return c.gemmMaxEfficiency * f(m) * f(n) * f(k);
}

double CostModel::gemmTime(double m, double n, double k, double batch) const {
  double flops = 2.0 * m * n * k * batch;
  return flops / (clusterSpec.gpu.peak16BitFlops * gemmEfficiency(m, n, k));
}

/// Seconds to stream `bytes` through HBM at the memory-bound efficiency.
static double memoryBoundTime(const ClusterSpec &c, double bytes) {
  return bytes / (c.gpu.memoryBandwidth * c.calibration.memoryBoundEfficiency);
}

double CostModel::layerForwardTime(int64_t b, int64_t t,
                                   bool sequenceParallel) const {
  double s = modelShape.seqLength, h = modelShape.hiddenSize,
         a = modelShape.numHeads;
  double tokens = static_cast<double>(b) * s, td = static_cast<double>(t);
  double heads = static_cast<double>(b) * a / td, dHead = h / a;
  // Megatron's layer: QKV, scores, context, projection, MLP up and down.
  // Together 24 b s h^2 / t (1 + s / (6h)) FLOPs, the paper's accounting.
  double gemms =
      gemmTime(tokens, 3.0 * h / td, h) + gemmTime(s, s, dHead, heads) +
      gemmTime(s, dHead, s, heads) + gemmTime(tokens, h, h / td) +
      gemmTime(tokens, 4.0 * h / td, h) + gemmTime(tokens, h, 4.0 * h / td);
  // Layer norms, GeLU, softmax, dropouts and residuals are memory bound.
  // The tensors Korthikanti et al. count as saved activations are the ones
  // these kernels produce; each is written once and read once.
  double traffic =
      2.0 * activationBytesPerLayer(modelShape, b, t, sequenceParallel,
                                    /*recompute=*/false);
  return gemms + memoryBoundTime(clusterSpec, traffic);
}

double CostModel::moeLayerForwardTime(int64_t b, int64_t t, int64_t ep) const {
  const ModelShape &ms = modelShape;
  if (ms.numExperts <= 0)
    return layerForwardTime(b, t, /*sequenceParallel=*/false);
  double s = ms.seqLength, h = ms.hiddenSize, a = ms.numHeads;
  double tokens = static_cast<double>(b) * s, td = static_cast<double>(t);
  double heads = static_cast<double>(b) * a / td, dHead = h / a;
  // The attention's four GEMMs, as layerForwardTime's.
  double attention = gemmTime(tokens, 3.0 * h / td, h) +
                     gemmTime(s, s, dHead, heads) +
                     gemmTime(s, dHead, s, heads) + gemmTime(tokens, h, h / td);
  // The router on every token, then the rank's E/ep experts on the rows of
  // its whole expert group: ep C each, E C in all, as at ep = 1. Experts
  // are not sliced by tp: every tp rank computes them whole.
  const double e = static_cast<double>(ms.numExperts);
  const double local = e / static_cast<double>(ep);
  const double capacity = static_cast<double>(ms.moeCapacity) *
                          static_cast<double>(b) /
                          static_cast<double>(ms.microBatchSize);
  const double rows = static_cast<double>(ep) * capacity;
  const double f = ms.ffnWidth();
  double experts = gemmTime(rows, ms.gatedMlp ? 2.0 * f : f, h, local) +
                   gemmTime(rows, h, f, local);
  double router = gemmTime(tokens, e, h);
  double traffic = 2.0 * moeActivationBytesPerLayer(ms, b, t,
                                                    /*recompute=*/false,
                                                    /*fp32=*/false);
  return attention + router + experts + memoryBoundTime(clusterSpec, traffic);
}

double CostModel::layersForwardTime(double layers, double moeLayers, int64_t b,
                                    int64_t t, bool sequenceParallel,
                                    int64_t ep) const {
  double dense = layerForwardTime(b, t, sequenceParallel);
  if (moeLayers <= 0)
    return layers * dense;
  return (layers - moeLayers) * dense +
         moeLayers * moeLayerForwardTime(b, t, ep);
}

int64_t CostModel::busiestRankMoeLayers(const ParallelPlan &plan) const {
  const ModelShape &ms = modelShape;
  if (ms.numExperts <= 0)
    return 0;
  const int64_t p = std::max<int64_t>(1, plan.pp),
                v = std::max<int64_t>(1, plan.virtualStages);
  if (p * v == 1)
    return ms.numMoeLayers();
  // Rank r holds chunks c p + r, each of l / (p v) consecutive layers.
  const int64_t chunk = ms.numLayers / (p * v);
  int64_t most = 0;
  for (int64_t r = 0; r < p; ++r) {
    int64_t layers = 0;
    for (int64_t c = 0; c < v; ++c)
      layers += ms.numMoeLayersIn((c * p + r) * chunk, chunk);
    most = std::max(most, layers);
  }
  return most;
}

double CostModel::allToAllBytes(const ParallelPlan &plan) const {
  const ModelShape &ms = modelShape;
  const double element = plan.isFp32() ? 4.0 : 2.0;
  return element * static_cast<double>(ms.numExperts) *
         static_cast<double>(ms.moeCapacity) *
         static_cast<double>(plan.microBatchSize) /
         static_cast<double>(ms.microBatchSize) *
         static_cast<double>(ms.hiddenSize);
}

double CostModel::allToAllTime(const ParallelPlan &plan) const {
  if (plan.ep <= 1 || modelShape.numExperts <= 0)
    return 0.0;
  const ClusterSpec &c = clusterSpec;
  // The compiler's mesh is edp x ep x pp x tp, tp innermost
  // (--dsc-declare-mesh): an expert group is ep ranks at stride pp tp, so
  // it stays in a node when pp tp ep ranks fit in one.
  const int64_t n = plan.ep;
  GroupPlacement group = placeGroup(plan.tp * plan.pp, n, c.gpusPerNode);
  const double bytes = allToAllBytes(plan);
  if (!group.crossesNodes)
    return collectiveTime(CollectiveKind::AllToAll, n, bytes,
                          linkFor(c, group));
  // Across nodes a ring crosses each node boundary once, so g members of a
  // node share g NICs (linkFor); an all-to-all instead sends each rank's
  // blocks for the other nodes through its own NIC share, beside its blocks
  // for the g - 1 peers in its node over NVLink.
  const double nd = static_cast<double>(n);
  const double g = static_cast<double>(group.membersPerNode);
  const double nvlink =
      c.intraNodeBandwidth * c.calibration.intraNodeCollectiveEfficiency;
  const double nic = c.interNodeBandwidthPerGpu() *
                     c.calibration.interNodeCollectiveEfficiency;
  return static_cast<double>(ringSteps(CollectiveKind::AllToAll, n)) *
             c.interNodeLatency +
         std::max((g - 1.0) / nd * bytes / nvlink,
                  (nd - g) / nd * bytes / std::min(nvlink, nic));
}

double CostModel::logitsForwardTime(int64_t b, int64_t t) const {
  double s = modelShape.seqLength, h = modelShape.hiddenSize,
         v = modelShape.vocabSize;
  double tokens = static_cast<double>(b) * s, td = static_cast<double>(t);
  // fp32 logits written, then read by the vocab-parallel cross-entropy.
  double traffic = 2.0 * 4.0 * tokens * v / td;
  return gemmTime(tokens, v / td, h) + memoryBoundTime(clusterSpec, traffic);
}

MemoryBreakdown CostModel::memory(const ParallelPlan &plan) const {
  const ModelShape &ms = modelShape;
  const ClusterSpec &c = clusterSpec;
  MemoryBreakdown mem;
  int64_t t = plan.tp, p = plan.pp, m = plan.numMicroBatches,
          b = plan.microBatchSize;
  bool sp = plan.sequenceParallel && t > 1;
  double nd = static_cast<double>(plan.dp);

  // Model states: tp and pp divide Psi evenly (embedding imbalance ignored),
  // ZeRO divides the rank's share over dp. Expert weights are whole on
  // every tp rank, split over ep, and ZeRO divides them over the dp/ep
  // ranks that hold the same experts (edp).
  const double expertPsi = std::min(ms.expertParameters(), ms.parameters);
  const double densePsi = ms.parameters - expertPsi;
  const int64_t ep = std::max<int64_t>(1, plan.ep);
  const int64_t edp = std::max<int64_t>(1, plan.dp / ep);
  // One MoE layer's experts on one rank, and the busiest pipeline rank's
  // MoE layers (MoE layers need not fall evenly on the stages).
  const double rankMoeLayers = static_cast<double>(busiestRankMoeLayers(plan));
  const double layerExperts =
      expertPsi > 0 ? expertPsi / static_cast<double>(ms.numMoeLayers()) /
                          static_cast<double>(ep)
                    : 0.0;
  const double expertRank = layerExperts * rankMoeLayers;
  double psiRank = densePsi / static_cast<double>(t * p);
  // An fp32 plan is held against the memory planner, so it also counts
  // what tensor slicing replicates on every tp rank: each layer's two norms
  // and the biases of its row-parallel products (6h of a GPT-2 block's
  // 13h; a gated, bias-free block's two RMS norms, 2h) and the final norm.
  if (plan.isFp32() && t > 1) {
    const double h = static_cast<double>(ms.hiddenSize);
    const double replicated =
        (ms.gatedMlp ? 2.0 : 6.0) * h * static_cast<double>(ms.numLayers) +
        (ms.gatedMlp ? 1.0 : 2.0) * h;
    psiRank = (densePsi - replicated) / static_cast<double>(t * p) +
              replicated / static_cast<double>(p);
  }
  auto stateBytes = [&](double psi, int64_t nd) {
    return plan.isFp32() ? fp32ModelStateBytes(psi, plan.zeroStage, nd)
                         : zeroModelStateBytes(psi, plan.zeroStage, nd);
  };
  mem.states = stateBytes(psiRank, plan.dp);
  if (expertRank > 0) {
    ModelStateBytes experts = stateBytes(expertRank, edp);
    mem.states.params += experts.params;
    mem.states.grads += experts.grads;
    mem.states.optimizer += experts.optimizer;
  }
  if (plan.offloadsOptimizer()) {
    // ZeRO-Offload: optimizer states and a copy of the gradient partition
    // live on the host. DeepSpeed's fp16 copy; in an fp32 plan, what
    // --dsc-offload builds: the fp32 gradient copy and an fp32 master of
    // the partition beside the moments (the device keeps its parameter).
    const double shard = psiRank / nd + expertRank / static_cast<double>(edp);
    double offloaded =
        mem.states.optimizer + (plan.isFp32() ? 4.0 * shard : 0.0);
    double gradCopy = (plan.isFp32() ? 4.0 : 2.0) * shard;
    mem.states.optimizer = 0;
    // ZeRO-Infinity: the chunks leave the device. An fp32 chunk is its
    // own master (the 4 bytes above); DeepSpeed's fp16 chunk joins the
    // fp32 master.
    if (plan.offloadsParams()) {
      if (!plan.isFp32())
        offloaded += mem.states.params;
      mem.states.params = 0;
    }
    double hostShare = c.hostMemoryBytes / static_cast<double>(c.gpusPerNode);
    if (offloaded + gradCopy <= hostShare) {
      mem.host = offloaded + gradCopy;
    } else {
      // ZeRO-Infinity: the optimizer states spill to NVMe.
      mem.host = gradCopy;
      mem.nvme = offloaded;
    }
  }

  // Activations: 1F1B keeps min(p, m) micro-batches in flight on the first
  // stage and one on the last; GPipe keeps all m on every stage.
  double layersPerStage = static_cast<double>(ms.numLayers / p);
  auto layerBytes =
      plan.isFp32() ? fp32ActivationBytesPerLayer : activationBytesPerLayer;
  double perLayer = layerBytes(ms, b, t, sp, plan.fullRecompute());
  double working = plan.fullRecompute() ? layerBytes(ms, b, t, sp, false)
                                        : 0.0; // the layer being recomputed
  // A stage's layers, MoE layers with their experts' rows.
  double stageBytes = perLayer * layersPerStage;
  const double moeLayers = rankMoeLayers;
  if (moeLayers > 0) {
    const double moeLayer = moeActivationBytesPerLayer(
        ms, b, t, plan.fullRecompute(), plan.isFp32());
    stageBytes = perLayer * (layersPerStage - moeLayers) + moeLayer * moeLayers;
    if (plan.fullRecompute())
      working = std::max(
          working, moeActivationBytesPerLayer(ms, b, t, false, plan.isFp32()));
  }
  bool gpipe = plan.schedule == PipelineSchedule::GPipe && p > 1;
  double firstInFlight = gpipe ? m : std::min(p, m);
  double lastInFlight = gpipe ? m : 1;
  // Interleaved: the first rank's warm-up runs ahead through its chunks,
  // (1 + (p-1)/(p v)) times 1F1B's (Korthikanti et al. 2022, 4.2.3).
  if (plan.schedule == PipelineSchedule::InterleavedOneFOneB && p > 1)
    firstInFlight *= 1.0 + static_cast<double>(p - 1) /
                               static_cast<double>(p * plan.virtualStages);
  // ZB-H1: rank k holds k weight-gradient parts back, so every rank may
  // hold min(p, m) micro-batches, 1F1B's first-stage count.
  if (plan.schedule == PipelineSchedule::ZeroBubbleH1 && p > 1)
    lastInFlight = firstInFlight;
  double firstAct = stageBytes * firstInFlight + working;
  double lastAct = stageBytes * lastInFlight + working;
  // Korthikanti et al.: the cross-entropy keeps 4 s b V / t bytes of fp32
  // logits on the last stage.
  const double sb = static_cast<double>(ms.seqLength) * b;
  double logits =
      4.0 * sb * static_cast<double>(ms.vocabSize) / static_cast<double>(t);
  // An fp32 plan's output layer as dsc builds it keeps the final norm's
  // input and output (4 s b h each) and the logits for the cross-entropy's
  // backward, which then holds the logits' gradient beside them.
  if (plan.isFp32())
    logits = 2.0 * 4.0 * sb * static_cast<double>(ms.hiddenSize) + 2.0 * logits;
  // ZeRO-3 gathers a layer whole: an MoE layer's attention (4h^2 / t), its
  // router and the rank's E/ep experts, when edp > 1 shards them.
  double gatheredLayer = 12.0 * static_cast<double>(ms.hiddenSize) *
                         static_cast<double>(ms.hiddenSize) /
                         static_cast<double>(t);
  if (ms.numMoeLayers() > 0 && edp > 1) {
    const double h = static_cast<double>(ms.hiddenSize);
    gatheredLayer =
        std::max(gatheredLayer, 4.0 * h * h / static_cast<double>(t) +
                                    h * static_cast<double>(ms.numExperts) +
                                    layerExperts);
  }
  double zero3Gather = 0;
  if (plan.zeroStage == 3 && plan.dp > 1)
    zero3Gather = plan.isFp32()
                      // dsc gathers each parameter just before it is read and
                      // frees it after: at the peak, where the backward starts,
                      // only the output layer's weight is gathered.
                      ? 4.0 * static_cast<double>(ms.vocabSize) *
                            static_cast<double>(ms.hiddenSize) /
                            static_cast<double>(t)
                      // Two gathered fp16 layers (current + prefetched).
                      : 2.0 * 2.0 * gatheredLayer;
  double first = firstAct, last = lastAct + logits;
  if (p == 1)
    first = last = std::max(firstAct, lastAct) + logits;
  if (first >= last) {
    mem.activations = firstAct;
    mem.temporaries = zero3Gather + (p == 1 ? logits : 0.0);
  } else {
    mem.activations = lastAct;
    mem.temporaries = zero3Gather + logits;
  }
  mem.reserved = c.calibration.reservedBytes;
  mem.device =
      mem.states.total() + mem.activations + mem.temporaries + mem.reserved;
  // Each pipeline rank plans its own stages' memory (--dsc-plan-memory):
  // the same states, the micro-batches its stage keeps in flight, the
  // logits on the last.
  if (p > 1) {
    const double scale = firstInFlight / (gpipe ? m : std::min(p, m));
    for (int64_t r = 0; r < p; ++r) {
      double inFlight = gpipe ? double(m) : double(std::min(p - r, m)) * scale;
      if (plan.schedule == PipelineSchedule::ZeroBubbleH1)
        inFlight = firstInFlight;
      double act = stageBytes * inFlight + working;
      double temporaries = zero3Gather + (r == p - 1 ? logits : 0.0);
      mem.devicePerPipelineRank.push_back(mem.states.total() + act +
                                          temporaries + mem.reserved);
    }
  }
  return mem;
}

PlanEstimate CostModel::estimate(const ParallelPlan &plan) const {
  const ModelShape &ms = modelShape;
  const ClusterSpec &c = clusterSpec;
  PlanEstimate e;
  e.plan = plan;
  e.memory = memory(plan);

  // Fit: device first, then the offload tiers.
  double hostShare = c.hostMemoryBytes / static_cast<double>(c.gpusPerNode);
  double nvmeShare = c.nvmeBytes / static_cast<double>(c.gpusPerNode);
  auto gb = [](double bytes) { return bytes / 1e9; };
  if (e.memory.device > c.gpu.memoryBytes)
    e.whyNot =
        llvm::formatv("needs {0:F1} GB per GPU, the {1} has {2:F1} GB",
                      gb(e.memory.device), c.gpu.kind, gb(c.gpu.memoryBytes));
  else if (e.memory.host > hostShare)
    e.whyNot = llvm::formatv("needs {0:F1} GB of host memory per GPU, the "
                             "node has {1:F1} GB per GPU",
                             gb(e.memory.host), gb(hostShare));
  else if (e.memory.nvme > nvmeShare)
    e.whyNot = llvm::formatv("needs {0:F1} GB of NVMe per GPU, the node has "
                             "{1:F1} GB per GPU",
                             gb(e.memory.nvme), gb(nvmeShare));
  else if (plan.delayedUpdate && e.memory.nvme > 0)
    e.whyNot = llvm::formatv("spills {0:F1} GB of optimizer states per GPU "
                             "to NVMe, where the delayed parameter update "
                             "is not built (it needs them in host memory)",
                             gb(e.memory.nvme));
  e.fits = e.whyNot.empty();

  int64_t t = plan.tp, p = plan.pp, d = plan.dp, m = plan.numMicroBatches,
          b = plan.microBatchSize;
  bool sp = plan.sequenceParallel && t > 1;
  int64_t gpn = c.gpusPerNode;
  double layers = static_cast<double>(ms.numLayers / p);
  double md = static_cast<double>(m);
  // The busiest pipeline rank's MoE layers (all of them without one).
  const double moeLayers = static_cast<double>(busiestRankMoeLayers(plan));
  const int64_t ep = std::max<int64_t>(1, plan.ep);

  // Compute of one micro-batch: backward = 2x forward (two GEMMs per
  // forward GEMM, twice the elementwise traffic); recompute re-runs forward.
  double fwdStage = layersForwardTime(layers, moeLayers, b, t, sp, ep);
  double recomputeStage = plan.fullRecompute() ? fwdStage : 0.0;
  double bwdStage = 2.0 * fwdStage + recomputeStage;
  double logitsFwd = logitsForwardTime(b, t);
  // The last stage also owns the output layer; with p == 1 it is the only
  // stage.
  double lastFwd = fwdStage + logitsFwd;
  double lastBwd = bwdStage + 2.0 * logitsFwd;

  // Tensor parallel: 2 all-reduces of b s h in the forward, 2 in the
  // backward, 2 more in a recomputed forward; with sequence parallelism each
  // is an all-gather + reduce-scatter pair of the same bus volume.
  double actBytes = 2.0 * static_cast<double>(b) *
                    static_cast<double>(ms.seqLength) *
                    static_cast<double>(ms.hiddenSize);
  Link tpLink = linkFor(c, placeGroup(1, t, gpn));
  // An MoE layer's experts are whole on every tp rank: only its attention
  // all-reduces (half a dense layer's count).
  double tpCollectives = (plan.fullRecompute() ? 6.0 : 4.0) *
                         (moeLayers > 0 ? layers - 0.5 * moeLayers : layers);
  double tpOne =
      sp ? collectiveTime(CollectiveKind::AllGather, t, actBytes, tpLink) +
               collectiveTime(CollectiveKind::ReduceScatter, t, actBytes,
                              tpLink)
         : collectiveTime(CollectiveKind::AllReduce, t, actBytes, tpLink);
  double tpPerMb = tpCollectives * tpOne;
  double tpBytesPerMb =
      tpCollectives *
      collectiveBusBytes(CollectiveKind::AllReduce, t, actBytes);
  // Sequence parallelism keeps the rank's rows of a column-parallel
  // product's input, not the gathered whole, and gathers them again for the
  // weight gradient (Megatron-LM and --dsc-recompute alike): 2 more
  // all-gathers per layer, unless a recomputed forward gathers anyway.
  if (sp && !plan.fullRecompute()) {
    double regathers = 2.0 * layers;
    tpPerMb += regathers *
               collectiveTime(CollectiveKind::AllGather, t, actBytes, tpLink);
    tpBytesPerMb +=
        regathers * collectiveBusBytes(CollectiveKind::AllGather, t, actBytes);
  }

  // Expert parallelism: each MoE layer's dispatched [E, C, h] goes to the
  // experts' ranks and back in the forward, the same two in the backward,
  // two more in a recomputed forward; none overlapped (the experts wait on
  // them).
  double epCollectives = (plan.fullRecompute() ? 6.0 : 4.0) * moeLayers;
  double epPerMb = epCollectives * allToAllTime(plan);
  double epBytesPerMb =
      ep > 1 ? epCollectives * collectiveBusBytes(CollectiveKind::AllToAll, ep,
                                                  allToAllBytes(plan))
             : 0.0;

  // Pipeline: one activation forward and one gradient backward per
  // micro-batch and model chunk (v of them interleaved) on the critical
  // path. Across nodes Megatron sends 1/t of it per tp rank and all-gathers
  // inside the node (scatter/gather).
  double ppPerMb = 0, ppBytesPerMb = 0;
  if (p > 1) {
    GroupPlacement ppPlace = placeGroup(t * d, p, gpn);
    GroupPlacement pair{2, 1, ppPlace.crossesNodes};
    Link ppLink = linkFor(c, pair);
    double bytes = actBytes;
    double gather = 0;
    if (ppPlace.crossesNodes && t > 1) {
      bytes = actBytes / static_cast<double>(t);
      gather = collectiveTime(CollectiveKind::AllGather, t, actBytes, tpLink);
    }
    const double chunks = static_cast<double>(plan.virtualStages);
    ppPerMb = 2.0 * chunks *
              (collectiveTime(CollectiveKind::Send, 2, bytes, ppLink) + gather);
    ppBytesPerMb = 2.0 * chunks * bytes;
  }

  // Data parallel / ZeRO. Gradients are fp16: 2 bytes per parameter.
  // Expert parameters (whole on every tp rank, split over ep) are reduced,
  // sharded and gathered over their dp/ep replicas (edp, ranks at stride
  // ep tp) only; at ep = 1 they travel with the dense ones.
  const double expertPsi = std::min(ms.expertParameters(), ms.parameters);
  const int64_t edp = d / ep;
  double psiRank = (ms.parameters - expertPsi) / static_cast<double>(t * p);
  double expertRank = expertPsi > 0
                          ? expertPsi / static_cast<double>(ms.numMoeLayers()) /
                                static_cast<double>(ep) * moeLayers
                          : 0.0;
  if (ep == 1) {
    psiRank += expertRank;
    expertRank = 0;
  }
  double gradBytes = 2.0 * psiRank, expertGradBytes = 2.0 * expertRank;
  Link dpLink = linkFor(c, placeGroup(t, d, gpn));
  Link edpLink = linkFor(c, placeGroup(t * p * ep, edp, gpn));
  auto dpTime = [&](CollectiveKind kind) {
    return collectiveTime(kind, d, gradBytes, dpLink) +
           collectiveTime(kind, edp, expertGradBytes, edpLink);
  };
  auto dpBus = [&](CollectiveKind kind) {
    return collectiveBusBytes(kind, d, gradBytes) +
           collectiveBusBytes(kind, edp, expertGradBytes);
  };
  double tAR = dpTime(CollectiveKind::AllReduce);
  double tRS = dpTime(CollectiveKind::ReduceScatter);
  double tAG = dpTime(CollectiveKind::AllGather);
  double busAR = dpBus(CollectiveKind::AllReduce);
  double busRS = dpBus(CollectiveKind::ReduceScatter);
  double busAG = dpBus(CollectiveKind::AllGather);
  // Communication overlaps only the backward of the last micro-batch: the
  // gradients are final only then (bucketed all-reduce as in PyTorch DDP).
  double bwdWindow = std::max(bwdStage, lastBwd);
  double fwdWindow = std::max(fwdStage, lastFwd);
  double zeroPerMb = 0, dpExposed = 0, dpBytes = 0;
  // Time a transfer of `comm` seconds adds when it may overlap `window`
  // seconds of compute: the part that sticks out, plus the slowdown the
  // hidden part inflicts on the compute it shares the GPU with.
  double slowdown = c.calibration.overlapSlowdown;
  auto exposed = [&](double comm, double window) {
    return std::max(0.0, comm - window) + slowdown * std::min(comm, window);
  };
  if (d > 1) {
    switch (plan.zeroStage) {
    case 0:
      dpExposed = exposed(tAR, bwdWindow);
      dpBytes = busAR;
      break;
    case 1:
      // Reduce-scatter the gradients, all-gather the updated parameters.
      dpExposed = exposed(tRS, bwdWindow) + tAG;
      dpBytes = busRS + busAG;
      break;
    case 2:
      // Gradients are kept partitioned, so each micro-batch reduce-scatters
      // its gradients during its backward (DeepSpeed stage 2).
      zeroPerMb = exposed(tRS, bwdWindow);
      dpExposed = tAG;
      dpBytes = md * busRS + busAG;
      break;
    default: {
      // Stage 3: per micro-batch, gather parameters for the forward, again
      // for the backward (and the recomputed forward), reduce-scatter the
      // gradients. dsc (like DeepSpeed) issues one collective per parameter
      // tensor above the persistence threshold, and each pays the ring's
      // d - 1 step latencies: at d = 1536 and 12 tensors a layer that is
      // 12 * 1535 * alpha, 0.12 s a layer at NCCL's 6.6 us, more than the
      // layer's compute at micro-batch 1 (docs/cost-model.md, "At scale").
      double gathers = plan.fullRecompute() ? 2.0 : 1.0;
      const double perPass =
          layers * static_cast<double>(zero3CollectivesPerLayer(
                       plan.tp, plan.persistenceThreshold));
      // tAG and tRS already carry one collective's latency.
      double perPassLatency = std::max(0.0, perPass - 1.0) *
                              static_cast<double>(d - 1) * dpLink.latency;
      double forwardComm = tAG + perPassLatency;
      double backwardComm =
          gathers * tAG + tRS + (gathers + 1.0) * perPassLatency;
      if (plan.prefetch) {
        // With prefetch=1 the gather of the next parameter runs on the
        // communication lane beside the current one's compute: each layer
        // hides at most its own compute, max(0, comm - compute) a layer,
        // which for equal layers is the stage's sum.
        zeroPerMb =
            exposed(forwardComm, fwdWindow) + exposed(backwardComm, bwdWindow);
      } else {
        // Without it the memory planner reuses a gathered parameter's bytes,
        // so each gather runs just before its reader, and the one lane runs
        // collectives in program order: the reduce-scatters queue before
        // the next gather. Nothing is hidden.
        zeroPerMb = forwardComm + backwardComm;
      }
      dpBytes = md * ((gathers + 1.0) * busAG + busRS);
      break;
    }
    }
  }

  // Optimizer: Adam reads fp32 params, m, v and the fp16 gradient and
  // writes params, m, v and the fp16 copy: 28 bytes per parameter.
  double shard = plan.zeroStage >= 1 ? psiRank / static_cast<double>(d) +
                                           expertRank / static_cast<double>(edp)
                                     : psiRank + expertRank;
  double optimizer = 0, offload = 0, hostUpdate = 0;
  if (!plan.offloadsOptimizer()) {
    optimizer = memoryBoundTime(c, 28.0 * shard);
  } else {
    double gpusPerNode = static_cast<double>(gpn);
    // Over PCIe per parameter: the gradient down and the parameter up, 2
    // bytes each in fp16 (DeepSpeed), 4 in an fp32 plan (--dsc-offload's
    // transfers).
    const double element = plan.isFp32() ? 4.0 : 2.0;
    double pcieBytes = 2.0 * element;
    // Parameter offload: no parameter goes up after the update, and each
    // micro-batch fetches every chunk for the forward's gather and again
    // for the backward's.
    const double fetched = plan.offloadsParams() ? 2.0 * md * element : 0.0;
    if (plan.offloadsParams())
      pcieBytes = element + fetched;
    offload = pcieBytes * shard / c.pcieBandwidthPerGpu;
    hostUpdate = 28.0 * shard / (c.hostMemoryBandwidth / gpusPerNode);
    if (e.memory.nvme > 0)
      // Read and write the 12 bytes of states per parameter, and the
      // fetches read the chunks from the file.
      offload += (24.0 + fetched) * shard / (c.nvmeBandwidth / gpusPerNode);
  }

  // The slowest stage sets the pace of the pipeline.
  double firstMb =
      fwdStage + bwdStage + tpPerMb + epPerMb + ppPerMb + zeroPerMb;
  double lastMb = lastFwd + lastBwd + tpPerMb + epPerMb + ppPerMb + zeroPerMb;
  double slot = std::max(firstMb, lastMb);
  double computeMb =
      (lastMb >= firstMb) ? lastFwd + lastBwd : fwdStage + bwdStage;

  StepTimeBreakdown &st = e.time;
  st.compute = md * computeMb;
  st.recompute = md * recomputeStage;
  st.tpComm = md * tpPerMb;
  st.epComm = md * epPerMb;
  st.ppComm = md * ppPerMb;
  st.zeroComm = md * zeroPerMb;
  // The fill and drain of the pipeline: p-1 slots (Megatron-LM), 1/v of
  // them interleaved (a chunk's slot is 1/v of the stage's); ZB-H1 moves
  // the weight-gradient part W of the backward into them, leaving
  // (p-1)(F + B - W) (Qi et al. 2024). W is half the backward's GEMMs (dW
  // beside dX), not the recomputed forward.
  double bubbleSlot = slot;
  if (plan.schedule == PipelineSchedule::InterleavedOneFOneB)
    bubbleSlot = slot / static_cast<double>(plan.virtualStages);
  if (plan.schedule == PipelineSchedule::ZeroBubbleH1 && p > 1) {
    double backward = lastMb >= firstMb ? lastBwd : bwdStage;
    double weightPart = (backward - recomputeStage) / 2.0;
    bubbleSlot = std::max(0.0, slot - 2.0 * weightPart);
  }
  st.bubble = static_cast<double>(p - 1) * bubbleSlot;
  st.dpComm = dpExposed;
  st.optimizer = optimizer;
  // The CPU Adam; delayed (DPU), it runs beside the next step's forward
  // and backward and shows only where it outlasts them.
  st.offload =
      offload + (plan.delayedUpdate ? std::max(0.0, hostUpdate - st.compute)
                                    : hostUpdate);
  st.total = st.compute + st.tpComm + st.epComm + st.ppComm + st.zeroComm +
             st.bubble + st.dpComm + st.optimizer + st.offload;

  // 1-bit Adam after its warm-up: compressed all-reduces of the momentum,
  // one per parameter tensor (a GPT layer has 12: two norms, four weights
  // and their biases) or, with onebit-bucket-bytes, per bucket (the
  // matrices and the biases and norms apart, as DeepSpeed's parameter
  // groups); each an all-to-all of the rank's signs (1 bit an element, the
  // chunks padded as DeepSpeed pads them), an all-gather of the servers'
  // signs and two of one f32 scale per rank, after the backward. The
  // compression reads the momentum and worker error and writes the error
  // back (12 bytes an element), the server the same on its chunk after
  // summing the p decompressed chunks (about 12 more).
  CompressedStepEstimate &ce = e.compressed;
  if (d <= 1)
    ce.whyNot = "one data-parallel rank has nothing to compress";
  else if (plan.zeroStage == 3)
    ce.whyNot = "1-bit Adam is built for ZeRO stages 0-2 (its compression "
                "phase reads every parameter whole)";
  else if (plan.offloadsOptimizer())
    ce.whyNot = "1-bit Adam's update is not offloaded";
  if (ce.whyNot.empty()) {
    const double psi = psiRank + expertRank;
    // Tensors, or buckets of at most onebit-bucket-bytes of each class
    // (biases and norms are a few per mille of a layer: one bucket).
    const double collectives =
        plan.onebitBucketBytes > 0
            ? 1.0 + std::ceil(4.0 * psi /
                              static_cast<double>(plan.onebitBucketBytes))
            : 12.0 * layers + 4.0;
    const double elements = psi / collectives;
    const int64_t each = static_cast<int64_t>(std::ceil(elements));
    const double signBytes =
        static_cast<double>(::dsc::onebitPaddedSize(each, d)) / 8.0;
    const double perCollective =
        collectiveTime(CollectiveKind::AllToAll, d, signBytes, dpLink) +
        collectiveTime(CollectiveKind::AllGather, d, signBytes, dpLink) +
        2.0 * collectiveTime(CollectiveKind::AllGather, d,
                             4.0 * static_cast<double>(d), dpLink);
    ce.collectives = collectives;
    ce.dpComm = collectives * perCollective;
    ce.dpBytes =
        collectives *
        static_cast<double>(::dsc::compressedAllReduceBytesSent(each, d));
    ce.compress = memoryBoundTime(c, 24.0 * psi);
    // ZeRO-1/2 under 1-bit Adam (--dsc-data-parallel): the gradients stay
    // whole, so the warm-up all-reduces them as zero=0 does (no per
    // micro-batch reduce-scatter), and both phases all-gather the updated
    // parameters after the update.
    const double zeroTraffic = st.dpComm + st.zeroComm;
    const double gather = plan.zeroStage > 0 ? tAG : 0.0;
    ce.warmUp = st.total - zeroTraffic + exposed(tAR, bwdWindow) + gather;
    ce.total = st.total - zeroTraffic + ce.dpComm + gather + ce.compress;
    if (plan.zeroStage > 0)
      ce.dpBytes += busAG;
  }

  e.comm.tp = md * tpBytesPerMb;
  e.comm.pp = md * ppBytesPerMb;
  e.comm.ep = md * epBytesPerMb;
  e.comm.dp = dpBytes;

  double gpus = static_cast<double>(plan.numGpus());
  double samples = static_cast<double>(plan.globalBatch());
  double modelFlops = ms.trainingFlops(1, false) * samples;
  double hwFlops = ms.trainingFlops(1, plan.fullRecompute()) * samples;
  e.flopsPerGpu = hwFlops / gpus / st.total;
  e.modelFlopsPerGpu = modelFlops / gpus / st.total;
  e.mfu = e.modelFlopsPerGpu / c.gpu.peak16BitFlops;
  e.bubbleFraction = st.bubble / (md * slot);
  return e;
}

std::vector<::dsc::PipelineStageTimes>
CostModel::pipelineStageTimes(const ParallelPlan &plan) const {
  const int64_t chunks = plan.pp * plan.virtualStages;
  bool sp = plan.sequenceParallel && plan.tp > 1;
  const int64_t chunkLayers = modelShape.numLayers / chunks;
  double layers = static_cast<double>(chunkLayers);
  double logits = logitsForwardTime(plan.microBatchSize, plan.tp);
  std::vector<::dsc::PipelineStageTimes> times;
  for (int64_t k = 0; k < chunks; ++k) {
    const bool last = k == chunks - 1;
    // Stage k's own MoE layers.
    double forward = layersForwardTime(
        layers,
        static_cast<double>(
            modelShape.numMoeLayersIn(k * chunkLayers, chunkLayers)),
        plan.microBatchSize, plan.tp, sp, std::max<int64_t>(1, plan.ep));
    double recompute = plan.fullRecompute() ? forward : 0.0;
    ::dsc::PipelineStageTimes t;
    t.forward = forward + (last ? logits : 0.0);
    t.backward = 2.0 * t.forward + recompute;
    if (plan.schedule == PipelineSchedule::ZeroBubbleH1) {
      t.weight = (t.backward - recompute) / 2.0;
      t.backward -= t.weight;
    }
    times.push_back(t);
  }
  return times;
}
