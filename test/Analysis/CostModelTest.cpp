//===- CostModelTest.cpp - Step time and memory of a plan -----------------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// Checks the cost model's accounting against the closed forms it claims:
// Megatron's FLOPs, the ZeRO and tensor-parallel communication volumes, the
// pipeline bubble and in-flight micro-batches, recompute and offload.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/CostModel.h"
#include "dsc/Analysis/Collectives.h"

#include "gtest/gtest.h"

#include <algorithm>

using namespace mlir::dsc::analysis;

namespace {

ClusterSpec a100() {
  llvm::Expected<ClusterSpec> c =
      loadClusterSpec(DSC_CLUSTERS_DIR "/dgx-a100-80gb.json");
  EXPECT_TRUE(static_cast<bool>(c));
  if (!c) {
    llvm::consumeError(c.takeError());
    return ClusterSpec();
  }
  return *c;
}

ParallelPlan plan(int64_t dp, int64_t tp, int64_t pp, int zero, int64_t b,
                  int64_t m) {
  ParallelPlan p;
  p.dp = dp;
  p.tp = tp;
  p.pp = pp;
  p.zeroStage = zero;
  p.microBatchSize = b;
  p.numMicroBatches = m;
  // The papers' 16-bit forms unless a test asks for fp32.
  p.precision = ::dsc::Precision::Bf16;
  return p;
}

/// An fp32 plan on 8 GPUs (dp=8) with its optimizer offloaded, as
/// --dsc-offload builds it.
ParallelPlan fp32OffloadPlan(int zero, int64_t microbatches) {
  ParallelPlan p = plan(8, 1, 1, zero, 1, microbatches);
  p.precision = ::dsc::Precision::Fp32;
  p.offloadOptimizer = ::dsc::OffloadTier::Host;
  return p;
}

TEST(Flops, MegatronAccounting) {
  ModelShape m = ModelShape::gpt3_175B();
  double b = 4, s = 2048, l = 96, h = 12288, v = 51200;
  double fwd = 24 * b * s * l * h * h * (1 + s / (6 * h)) + 2 * b * s * h * v;
  EXPECT_DOUBLE_EQ(m.forwardFlops(4), fwd);
  EXPECT_DOUBLE_EQ(m.trainingFlops(4, false), 3 * fwd);
  EXPECT_DOUBLE_EQ(m.trainingFlops(4, true), 4 * fwd);
  EXPECT_NEAR(m.parameters / 1e9, 174.6, 0.1);
}

TEST(Flops, MoeLayersComputeTheirCapacityAndRouter) {
  // test/Integration/Inputs/moe-neox-8experts.yml: 2 layers, h 64, s 32,
  // V 256, b 4, 8 experts of top-1 at capacity 16 (= the 128 tokens / 8),
  // so the experts compute as many rows as a dense MLP, plus the routers'
  // 2 b s h E. --dsc-print-model-stats sums the graph's own ops to the
  // same 31,719,424 FLOPs.
  ModelShape m = ModelShape::gpt("moe", 2, 64, 4, 32, 256);
  m.microBatchSize = 4;
  m.numExperts = 8;
  m.moeCapacity = 16;
  EXPECT_DOUBLE_EQ(m.forwardFlops(4), 31719424.0);
  // Twice the micro-batch: twice the capacity and twice the FLOPs.
  EXPECT_DOUBLE_EQ(m.forwardFlops(8), 2 * 31719424.0);
  // Capacity factor 2: the experts' MLP FLOPs (2 layers x 128 rows x
  // 65,536) once more.
  m.moeCapacity = 32;
  EXPECT_DOUBLE_EQ(m.forwardFlops(4), 31719424.0 + 2 * 128 * 65536.0);
  // Every other layer MoE: one router and one dense MLP fewer.
  m.moeCapacity = 16;
  m.moeExpertInterval = 2;
  EXPECT_DOUBLE_EQ(m.forwardFlops(4), 31719424.0 - 2 * 128 * 64 * 8.0);
  EXPECT_EQ(m.validate(), "");
  // What --dsc-compile refuses for MoE layers, the search does not offer.
  CostModel cm(m, a100());
  EXPECT_EQ(cm.checkPlan(plan(1, 1, 2, 0, 1, 2)), "");
  ParallelPlan fp16 = plan(1, 1, 2, 0, 1, 2);
  fp16.precision = ::dsc::Precision::Fp16;
  EXPECT_EQ(cm.checkPlan(fp16),
            "fp16 pipelines with MoE layers are not supported yet (each "
            "stage's auxiliary losses have a fixed seed; use precision=bf16)");
  ParallelPlan sp = plan(1, 2, 1, 0, 1, 2);
  sp.sequenceParallel = true;
  EXPECT_EQ(cm.checkPlan(sp),
            "sequence parallelism with MoE layers is not supported yet");
  m.moeCapacity = 0;
  EXPECT_NE(m.validate().find("moe_capacity >= 1"), std::string::npos);
}

/// A GPT of 2048-wide layers whose every MLP is `experts` top-1 experts of
/// capacity factor 1 (C = b s / E at the model's micro-batch b): the
/// experts compute as many rows as a dense MLP's tokens, so the active
/// FLOPs are the dense model's (plus the routers'). `parameters` counts
/// every expert, as the importers do.
ModelShape moeShape(int64_t experts, int64_t b = 8, int64_t layers = 24) {
  ModelShape m = ModelShape::gpt("moe", layers, 2048, 16, 2048, 51200);
  m.microBatchSize = b;
  m.numExperts = experts;
  m.moeCapacity = b * 2048 / experts;
  m.parameters +=
      m.expertParameters() - double(m.numMoeLayers()) * 8.0 * 2048.0 * 2048.0;
  return m;
}

ParallelPlan withEp(ParallelPlan p, int64_t ep) {
  p.ep = ep;
  return p;
}

TEST(Moe, ExpertParametersAreTheStackedWeights) {
  ModelShape m = moeShape(8);
  // 24 MoE layers x 8 experts x (h 4h + 4h h).
  EXPECT_DOUBLE_EQ(m.expertParameters(), 24.0 * 8 * 8 * 2048.0 * 2048.0);
  m.moeExpertInterval = 5; // layers 0, 5, 10, 15, 20
  EXPECT_EQ(m.numMoeLayers(), 5);
  m.gatedMlp = true; // [E, h, 2f] and [E, f, h]
  EXPECT_DOUBLE_EQ(m.expertParameters(), 5.0 * 8 * 12 * 2048.0 * 2048.0);
  EXPECT_EQ(ModelShape::gpt3_175B().expertParameters(), 0.0);
}

// With ideal GEMMs and infinite HBM bandwidth an MoE layer's forward takes
// exactly its share of ModelShape::forwardFlops over peak: the attention,
// the router and the experts' rows, at any ep (ep moves rows between
// experts' ranks, not work).
TEST(Moe, LayerGemmsAddUpToTheFlops) {
  ClusterSpec c = a100();
  c.calibration.gemmMaxEfficiency = 1.0;
  c.calibration.gemmHalfDim = 1e-30;
  c.gpu.memoryBandwidth = 1e300;
  ModelShape m = moeShape(8, 4);
  CostModel cm(m, c);
  const double s = 2048, h = 2048, v = 51200;
  for (int64_t b : {2, 4})
    for (int64_t ep : {1, 2, 8}) {
      double layer = (m.forwardFlops(b) - 2.0 * b * s * h * v) / 24.0;
      EXPECT_NEAR(cm.moeLayerForwardTime(b, 1, ep) * c.gpu.peak16BitFlops /
                      layer,
                  1.0, 1e-12);
    }
  // A dense model's "MoE layer" is its layer.
  CostModel dense(ModelShape::gpt3_175B(), a100());
  EXPECT_EQ(dense.moeLayerForwardTime(1, 8, 1),
            dense.layerForwardTime(1, 8, false));
}

// (a) At ep = 1 an MoE model of E top-1 experts at capacity factor 1 does
// the dense model's work in E batched GEMMs of b s / E rows (plus the
// routers): a little slower, never faster.
TEST(Moe, StepTimeAtEp1IsCloseToTheDenseModelOfEqualActiveFlops) {
  ModelShape dense = ModelShape::gpt("dense", 24, 2048, 16, 2048, 51200);
  ModelShape moe = moeShape(8);
  EXPECT_NEAR(moe.forwardFlops(8) / dense.forwardFlops(8), 1.0, 0.01);
  CostModel cd(dense, a100()), cmoe(moe, a100());
  ParallelPlan p = plan(1, 1, 1, 0, 8, 16);
  PlanEstimate ed = cd.estimate(p), em = cmoe.estimate(p);
  EXPECT_GT(em.time.compute, ed.time.compute);
  EXPECT_LT(em.time.compute, 1.05 * ed.time.compute);
  EXPECT_GT(em.time.total, ed.time.total);
  EXPECT_LT(em.time.total, 1.10 * ed.time.total)
      << em.time.total << " vs " << ed.time.total;
  EXPECT_EQ(em.time.epComm, 0.0);
  EXPECT_EQ(em.comm.ep, 0.0);
  EXPECT_NEAR(em.mfu / ed.mfu, 1.0, 0.1);
}

// (b) 4 all-to-alls of E C h per MoE layer and micro-batch (6 with full
// recompute), none at ep = 1; inside a node while tp ep ranks fit in one,
// slower once they do not.
TEST(Moe, AllToAllsOverTheExpertGroup) {
  ModelShape m = moeShape(8);
  CostModel cm(m, a100());
  const double bytes = 2.0 * 8 * (8 * 2048 / 8) * 2048; // E C h bf16
  ParallelPlan p = plan(8, 1, 1, 1, 8, 4);
  EXPECT_EQ(cm.allToAllTime(p), 0.0);
  EXPECT_EQ(cm.estimate(p).time.epComm, 0.0);
  ParallelPlan ep2 = withEp(p, 2);
  Link nvlink = linkFor(cm.cluster(), placeGroup(1, 2, 8));
  ASSERT_FALSE(nvlink.interNode);
  EXPECT_DOUBLE_EQ(cm.allToAllTime(ep2),
                   collectiveTime(CollectiveKind::AllToAll, 2, bytes, nvlink));
  PlanEstimate e = cm.estimate(ep2);
  EXPECT_GT(e.time.epComm, 0.0);
  EXPECT_DOUBLE_EQ(e.time.epComm, 4.0 * 24 * 4 * cm.allToAllTime(ep2));
  EXPECT_DOUBLE_EQ(e.comm.ep, 4.0 * 24 * 4 * bytes / 2);
  EXPECT_DOUBLE_EQ(e.time.total,
                   e.time.compute + e.time.tpComm + e.time.epComm +
                       e.time.ppComm + e.time.zeroComm + e.time.bubble +
                       e.time.dpComm + e.time.optimizer + e.time.offload);
  ParallelPlan rc = ep2;
  rc.recompute = ::dsc::RecomputeKind::Full;
  EXPECT_DOUBLE_EQ(cm.estimate(rc).time.epComm, 1.5 * e.time.epComm);
  // An fp32 plan sends 4-byte elements.
  ParallelPlan fp32 = ep2;
  fp32.precision = ::dsc::Precision::Fp32;
  EXPECT_DOUBLE_EQ(cm.estimate(fp32).comm.ep, 2.0 * e.comm.ep);
  // tp 4 x ep 2 fills a node; tp 8 x ep 2 spans two: the same bytes (the
  // experts are whole on every tp rank) over InfiniBand.
  ParallelPlan intra = withEp(plan(4, 4, 1, 1, 8, 4), 2);
  ParallelPlan inter = withEp(plan(2, 8, 1, 1, 8, 4), 2);
  EXPECT_DOUBLE_EQ(cm.allToAllTime(intra), cm.allToAllTime(ep2));
  EXPECT_GT(cm.allToAllTime(inter), 2.0 * cm.allToAllTime(intra));
  EXPECT_GT(cm.estimate(inter).time.epComm, cm.estimate(intra).time.epComm);
}

// (c) Expert states are split over ep, and ZeRO shards them over the dp/ep
// ranks that hold the same experts: without ZeRO a rank's expert states
// fall by ep; at stage 3 (16 Psi_e / dp either way) they do not change.
TEST(Moe, ExpertStatesFallByEp) {
  ModelShape m = moeShape(8);
  CostModel cm(m, a100());
  const double pe = m.expertParameters();
  const double dense = m.parameters - pe;
  for (int64_t ep : {1, 2, 4, 8}) {
    MemoryBreakdown mem = cm.memory(withEp(plan(8, 1, 1, 0, 1, 8), ep));
    EXPECT_NEAR(mem.states.total(), 16.0 * dense + 16.0 * pe / ep, 1e3);
    // ZeRO-1: the optimizer states over dp (dense) and dp/ep (experts).
    MemoryBreakdown z1 = cm.memory(withEp(plan(8, 1, 1, 1, 1, 8), ep));
    EXPECT_NEAR(z1.states.params, 2.0 * dense + 2.0 * pe / ep, 1e3);
    EXPECT_NEAR(z1.states.optimizer,
                12.0 * dense / 8 + 12.0 * pe / ep / double(8 / ep), 1e3);
    MemoryBreakdown z3 = cm.memory(withEp(plan(8, 1, 1, 3, 1, 8), ep));
    EXPECT_NEAR(z3.states.total(), 16.0 * m.parameters / 8, 1e3);
  }
  // With tp the experts are whole on every tp rank: only the dense
  // parameters are divided by tp.
  MemoryBreakdown tp2 = cm.memory(withEp(plan(4, 2, 1, 0, 1, 8), 2));
  EXPECT_NEAR(tp2.states.total(), 16.0 * dense / 2 + 16.0 * pe / 2, 1e3);
  // The experts' rows replace the dense MLP's activations: at capacity
  // factor 1 the experts keep E C = b s rows of h + f + f, the dense MLP
  // 8 h per token.
  ModelShape d = ModelShape::gpt("dense", 24, 2048, 16, 2048, 51200);
  const double sbh = 2048.0 * 1 * 2048;
  EXPECT_DOUBLE_EQ(moeActivationBytesPerLayer(m, 1, 1, false, false),
                   activationBytesPerLayer(d, 1, 1, false, false) -
                       2 * 8 * sbh + 2 * 9 * sbh);
  EXPECT_DOUBLE_EQ(moeActivationBytesPerLayer(m, 1, 1, true, false),
                   activationBytesPerLayer(d, 1, 1, false, true));
  EXPECT_GT(cm.memory(plan(8, 1, 1, 0, 1, 8)).activations,
            CostModel(d, a100()).memory(plan(8, 1, 1, 0, 1, 8)).activations);
}

// Pipelines with MoE layers (each stage seeds its own aux losses): MoE
// layers need not fall evenly on the stages, so the busiest rank's MoE
// layers are priced, and each stage of the schedule simulation has its own.
TEST(Moe, PipelinesPriceTheBusiestStage) {
  ModelShape m = moeShape(8);
  m.moeExpertInterval = 5; // layers 0, 5 | 10 | 15 | 20 on 4 stages of 6
  m.parameters = ModelShape::gpt("moe", 24, 2048, 16, 2048, 51200).parameters +
                 m.expertParameters() - 5 * 8.0 * 2048 * 2048;
  EXPECT_EQ(m.numMoeLayersIn(0, 6), 2);
  EXPECT_EQ(m.numMoeLayersIn(6, 6), 1);
  EXPECT_EQ(m.numMoeLayersIn(1, 4), 0);
  CostModel cm(m, a100());
  ParallelPlan p = withEp(plan(2, 1, 4, 0, 8, 8), 2);
  ASSERT_EQ(cm.checkPlan(p), "");
  std::vector<::dsc::PipelineStageTimes> stages = cm.pipelineStageTimes(p);
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_GT(stages[0].forward, stages[1].forward);
  EXPECT_DOUBLE_EQ(stages[1].forward, stages[2].forward);
  // The busiest rank holds two MoE layers' experts, split over ep.
  const double layerExperts = 8 * 8.0 * 2048 * 2048;
  const double dense = (m.parameters - m.expertParameters()) / 4;
  EXPECT_NEAR(cm.memory(p).states.total(),
              16.0 * dense + 16.0 * 2 * layerExperts / 2, 1e3);
  // Its all-to-alls: an ep group at stride pp = 4 (the mesh is edp x ep x
  // pp x tp) of 2 ranks stays in the node.
  PlanEstimate e = cm.estimate(p);
  EXPECT_DOUBLE_EQ(e.time.epComm, 4.0 * 2 * 8 * cm.allToAllTime(p));
  EXPECT_DOUBLE_EQ(cm.allToAllTime(p),
                   collectiveTime(CollectiveKind::AllToAll, 2,
                                  2.0 * 8 * 2048 * 2048,
                                  linkFor(cm.cluster(), placeGroup(4, 2, 8))));
  // pp 4 x ep 4 spans two nodes.
  ParallelPlan wide = withEp(plan(4, 1, 4, 0, 8, 8), 4);
  EXPECT_GT(cm.allToAllTime(wide),
            collectiveTime(CollectiveKind::AllToAll, 4, 2.0 * 8 * 2048 * 2048,
                           linkFor(cm.cluster(), placeGroup(1, 4, 8))));
}

// (d) What does not divide, with the numbers.
TEST(Moe, CheckPlanNamesTheNumbers) {
  CostModel cm(moeShape(8), a100());
  EXPECT_EQ(cm.checkPlan(withEp(plan(4, 1, 1, 0, 1, 1), 3)),
            "ep=3 does not divide dp=4 (expert parallelism splits the "
            "data-parallel group)");
  EXPECT_EQ(cm.checkPlan(withEp(plan(6, 1, 1, 0, 1, 1), 3)),
            "8 experts are not divisible by ep=3");
  EXPECT_EQ(cm.checkPlan(withEp(plan(4, 1, 1, 0, 1, 1), 0)),
            "ep must be >= 1, got 0");
  EXPECT_EQ(cm.checkPlan(withEp(plan(8, 2, 1, 0, 1, 1), 8)), "");
  CostModel dense(ModelShape::gpt3_175B(), a100());
  EXPECT_EQ(dense.checkPlan(withEp(plan(8, 8, 16, 1, 1, 192), 2)),
            "ep=2 needs MoE layers; the model has none");
}

// Expert gradients are reduced over dp/ep ranks, the dense ones over dp.
TEST(Moe, ExpertGradientsReduceOverEdp) {
  ModelShape m = moeShape(8);
  CostModel cm(m, a100());
  const double pe = m.expertParameters(), dense = m.parameters - pe;
  for (int64_t ep : {1, 2, 8}) {
    PlanEstimate e = cm.estimate(withEp(plan(8, 1, 1, 0, 1, 8), ep));
    const int64_t edp = 8 / ep;
    double want = ep == 1 ? collectiveBusBytes(CollectiveKind::AllReduce, 8,
                                               2.0 * m.parameters)
                          : collectiveBusBytes(CollectiveKind::AllReduce, 8,
                                               2.0 * dense) +
                                collectiveBusBytes(CollectiveKind::AllReduce,
                                                   edp, 2.0 * pe / ep);
    EXPECT_NEAR(e.comm.dp, want, 1e3) << "ep=" << ep;
  }
}

TEST(Efficiency, FallsForSmallDimensions) {
  CostModel cm(ModelShape::gpt3_175B(), a100());
  double max = cm.cluster().calibration.gemmMaxEfficiency;
  EXPECT_LT(cm.gemmEfficiency(8192, 8192, 8192), max);
  EXPECT_GT(cm.gemmEfficiency(8192, 8192, 8192), 0.9 * max);
  EXPECT_LT(cm.gemmEfficiency(2048, 2048, 128),
            cm.gemmEfficiency(2048, 2048, 1024));
  EXPECT_LT(cm.gemmEfficiency(64, 8192, 8192),
            0.5 * cm.gemmEfficiency(8192, 8192, 8192));
  // Symmetric, so forward, data-gradient and weight-gradient GEMMs of one
  // matmul run at one efficiency.
  EXPECT_DOUBLE_EQ(cm.gemmEfficiency(2048, 4608, 12288),
                   cm.gemmEfficiency(12288, 2048, 4608));
}

// With ideal GEMMs and infinite HBM bandwidth a layer's forward takes
// exactly Megatron's FLOPs over peak: the GEMM list is the accounting.
TEST(Efficiency, LayerGemmsAddUpToMegatronFlops) {
  ClusterSpec c = a100();
  c.calibration.gemmMaxEfficiency = 1.0;
  c.calibration.gemmHalfDim = 1e-30;
  c.gpu.memoryBandwidth = 1e300;
  ModelShape m = ModelShape::gpt3_175B();
  CostModel cm(m, c);
  double s = 2048, h = 12288, v = 51200;
  for (int64_t t : {1, 2, 8})
    for (int64_t b : {1, 3}) {
      double layer = 24.0 * b * s * h * h / t * (1 + s / (6 * h));
      EXPECT_NEAR(cm.layerForwardTime(b, t, false) * c.gpu.peak16BitFlops /
                      layer,
                  1.0, 1e-12);
      EXPECT_NEAR(cm.logitsForwardTime(b, t) * c.gpu.peak16BitFlops /
                      (2.0 * b * s * h * v / t),
                  1.0, 1e-12);
    }
}

TEST(Memory, ModelStatesAreZeroFormulasOverTpAndPp) {
  ModelShape m = ModelShape::gpt3_175B();
  CostModel cm(m, a100());
  for (int zero = 0; zero <= 3; ++zero) {
    ParallelPlan p = plan(16, 8, 8, zero, 1, 96);
    MemoryBreakdown mem = cm.memory(p);
    ModelStateBytes want = zeroModelStateBytes(m.parameters / 64, zero, 16);
    EXPECT_EQ(mem.states.params, want.params);
    EXPECT_EQ(mem.states.grads, want.grads);
    EXPECT_EQ(mem.states.optimizer, want.optimizer);
    EXPECT_DOUBLE_EQ(mem.device, mem.states.total() + mem.activations +
                                     mem.temporaries + mem.reserved);
  }
}

TEST(Memory, InFlightMicroBatches1F1BVersusGPipe) {
  ModelShape m = ModelShape::gpt3_175B();
  CostModel cm(m, a100());
  ParallelPlan p = plan(8, 8, 16, 1, 1, 192);
  p.sequenceParallel = true;
  double perLayer = activationBytesPerLayer(m, 1, 8, true, false);
  // 1F1B: the first stage holds p = 16 micro-batches of its 6 layers.
  EXPECT_DOUBLE_EQ(cm.memory(p).activations, perLayer * 6 * 16);
  p.schedule = PipelineSchedule::GPipe;
  EXPECT_DOUBLE_EQ(cm.memory(p).activations, perLayer * 6 * 192);
  // Fewer micro-batches than stages: only m are ever in flight.
  ParallelPlan few = plan(8, 8, 16, 1, 24, 8);
  few.sequenceParallel = true;
  EXPECT_DOUBLE_EQ(cm.memory(few).activations,
                   activationBytesPerLayer(m, 24, 8, true, false) * 6 * 8);
}

TEST(Memory, EachPipelineRankHoldsItsOwnMicroBatchesInFlight) {
  // 1F1B: rank r keeps min(p - r, m) micro-batches of its 6 layers; the
  // last also the logits; all the same states. GPipe: every rank m.
  ModelShape m = ModelShape::gpt3_175B();
  CostModel cm(m, a100());
  ParallelPlan p = plan(8, 8, 16, 1, 1, 192);
  p.sequenceParallel = true;
  double perLayer = activationBytesPerLayer(m, 1, 8, true, false);
  MemoryBreakdown mem = cm.memory(p);
  ASSERT_EQ(mem.devicePerPipelineRank.size(), 16u);
  const double fixed = mem.states.total() + mem.reserved;
  for (int r = 0; r < 15; ++r)
    EXPECT_DOUBLE_EQ(mem.devicePerPipelineRank[size_t(r)],
                     fixed + perLayer * 6 * (16 - r))
        << "rank " << r;
  EXPECT_GT(mem.devicePerPipelineRank[15], fixed + perLayer * 6);
  EXPECT_DOUBLE_EQ(mem.device,
                   *std::max_element(mem.devicePerPipelineRank.begin(),
                                     mem.devicePerPipelineRank.end()));
  p.schedule = PipelineSchedule::GPipe;
  mem = cm.memory(p);
  for (int r = 0; r < 15; ++r)
    EXPECT_DOUBLE_EQ(mem.devicePerPipelineRank[size_t(r)],
                     fixed + perLayer * 6 * 192);
  // Without stages there is one rank: nothing per pipeline rank.
  EXPECT_TRUE(
      cm.memory(plan(8, 8, 1, 1, 1, 192)).devicePerPipelineRank.empty());
}

TEST(Memory, InterleavingHoldsMoreOnTheFirstRank) {
  // Korthikanti et al. 2022 (4.2.3): the interleaved schedule's first rank
  // holds (1 + (p-1)/(p v)) times 1F1B's activations.
  ModelShape m = ModelShape::gpt3_175B();
  CostModel cm(m, a100());
  ParallelPlan p = plan(8, 8, 16, 1, 1, 192);
  p.sequenceParallel = true;
  p.schedule = PipelineSchedule::InterleavedOneFOneB;
  p.virtualStages = 2;
  double perLayer = activationBytesPerLayer(m, 1, 8, true, false);
  EXPECT_DOUBLE_EQ(cm.memory(p).activations,
                   perLayer * 6 * 16 * (1.0 + 15.0 / 32.0));
}

TEST(Memory, RecomputeKeepsLayerInputsPlusOneLayer) {
  ModelShape m = ModelShape::gpt3_175B();
  CostModel cm(m, a100());
  ParallelPlan p = plan(8, 8, 16, 1, 1, 192);
  p.recompute = ::dsc::RecomputeKind::Full;
  double sbh = 2048.0 * 12288.0;
  EXPECT_DOUBLE_EQ(cm.memory(p).activations,
                   2 * sbh * 6 * 16 +
                       activationBytesPerLayer(m, 1, 8, false, false));
}

TEST(Time, BubbleIsPMinusOneOverM) {
  CostModel cm(ModelShape::gpt3_175B(), a100());
  for (int64_t pp : {2, 4, 16})
    for (int64_t mb : {16, 64}) {
      ParallelPlan p = plan(1024 / (8 * pp), 8, pp, 1, 1, mb);
      PlanEstimate e = cm.estimate(p);
      EXPECT_DOUBLE_EQ(e.bubbleFraction, double(pp - 1) / mb);
      const StepTimeBreakdown &t = e.time;
      double slot = (t.compute + t.tpComm + t.ppComm + t.zeroComm) / mb;
      EXPECT_NEAR(t.bubble, (pp - 1) * slot, 1e-9 * t.total);
    }
  // More micro-batches amortize the bubble.
  PlanEstimate few = cm.estimate(plan(8, 8, 16, 1, 4, 48));
  PlanEstimate many = cm.estimate(plan(8, 8, 16, 1, 1, 192));
  EXPECT_GT(few.time.bubble / few.time.total,
            many.time.bubble / many.time.total);
}

TEST(Time, InterleavingDividesTheBubbleByTheChunks) {
  // Narayanan et al. 2021: v model chunks per rank make the bubble
  // (1/v)(p-1)/m and send v times the activations.
  CostModel cm(ModelShape::gpt3_175B(), a100());
  for (int64_t v : {2, 3, 6})
    for (int64_t mb : {16, 64}) {
      ParallelPlan one = plan(8, 8, 16, 1, 1, mb);
      ParallelPlan p = one;
      p.schedule = PipelineSchedule::InterleavedOneFOneB;
      p.virtualStages = v;
      ASSERT_EQ(cm.checkPlan(p), "");
      PlanEstimate e = cm.estimate(p), base = cm.estimate(one);
      EXPECT_NEAR(e.bubbleFraction, 15.0 / double(v * mb), 1e-12);
      EXPECT_DOUBLE_EQ(e.comm.pp, double(v) * base.comm.pp);
      EXPECT_DOUBLE_EQ(e.time.compute, base.time.compute);
      const StepTimeBreakdown &t = e.time;
      double slot = (t.compute + t.tpComm + t.ppComm + t.zeroComm) / mb;
      EXPECT_NEAR(t.bubble, 15.0 * slot / double(v), 1e-9 * t.total);
    }
}

TEST(Time, ZeroBubbleH1FillsTheBubbleWithWeightGradients) {
  // Qi et al. 2024: ZB-H1's bubble is (p-1)(F + B - W), 1F1B's
  // (p-1)(F + B + W); without recompute W is half the backward, which is
  // twice the forward.
  CostModel cm(ModelShape::gpt3_175B(), a100());
  ParallelPlan one = plan(8, 8, 16, 1, 1, 64);
  ParallelPlan zb = one;
  zb.schedule = PipelineSchedule::ZeroBubbleH1;
  PlanEstimate e = cm.estimate(zb), base = cm.estimate(one);
  const StepTimeBreakdown &t = e.time;
  const double computeMb = t.compute / 64.0;
  const double slot = (t.compute + t.tpComm + t.ppComm + t.zeroComm) / 64.0;
  const double backward = computeMb * 2.0 / 3.0;
  EXPECT_NEAR(t.bubble, 15.0 * (slot - backward), 1e-9 * t.total);
  EXPECT_LT(t.bubble, base.time.bubble);
  EXPECT_DOUBLE_EQ(t.compute, base.time.compute);
}

TEST(Time, PartsAddUpAndThroughputIsConsistent) {
  ModelShape m = ModelShape::gpt3_175B();
  CostModel cm(m, a100());
  PlanEstimate e = cm.estimate(plan(16, 8, 8, 1, 1, 96));
  const StepTimeBreakdown &t = e.time;
  EXPECT_DOUBLE_EQ(t.total, t.compute + t.tpComm + t.ppComm + t.zeroComm +
                                t.bubble + t.dpComm + t.optimizer + t.offload);
  EXPECT_DOUBLE_EQ(e.mfu * 312e12 * 1024 * t.total,
                   m.trainingFlops(1, false) * 1536);
  EXPECT_DOUBLE_EQ(e.flopsPerGpu, e.modelFlopsPerGpu); // no recompute
}

TEST(Time, RecomputeCostsAForwardPass) {
  CostModel cm(ModelShape::gpt3_175B(), a100());
  ParallelPlan p = plan(16, 8, 8, 1, 1, 96);
  PlanEstimate base = cm.estimate(p);
  p.recompute = ::dsc::RecomputeKind::Full;
  PlanEstimate rc = cm.estimate(p);
  EXPECT_EQ(base.time.recompute, 0.0);
  // The recomputed forward is a third of the layers' forward + backward.
  double layers = rc.time.compute - rc.time.recompute;
  EXPECT_NEAR(rc.time.recompute / layers, 1.0 / 3.0, 0.03);
  EXPECT_GT(rc.time.total, base.time.total);
  EXPECT_GT(rc.flopsPerGpu, rc.modelFlopsPerGpu);
  EXPECT_LT(rc.memory.activations, base.memory.activations);
}

// DESIGN.md: tensor parallel is 4 all-reduces of b s h per layer per
// micro-batch.
TEST(Comm, TensorParallelVolume) {
  CostModel cm(ModelShape::gpt3_175B(), a100());
  ParallelPlan p = plan(16, 8, 8, 1, 2, 48);
  double bsh2 = 2.0 * 2 * 2048 * 12288; // fp16 bytes
  double perAllReduce = collectiveBusBytes(CollectiveKind::AllReduce, 8, bsh2);
  EXPECT_DOUBLE_EQ(cm.estimate(p).comm.tp, 48 * 12 * 4 * perAllReduce);
  // Sequence parallelism: AG + RS pairs of the same volume, and the
  // backward's second gather of each column-parallel input (2 per layer),
  // as --dsc-compile builds it.
  p.sequenceParallel = true;
  double perAllGather = collectiveBusBytes(CollectiveKind::AllGather, 8, bsh2);
  EXPECT_DOUBLE_EQ(cm.estimate(p).comm.tp,
                   48 * 12 * (4 * perAllReduce + 2 * perAllGather));
  // With full recompute the recomputed forward gathers them anyway.
  p.recompute = ::dsc::RecomputeKind::Full;
  EXPECT_DOUBLE_EQ(cm.estimate(p).comm.tp, 48 * 12 * 6 * perAllReduce);
}

// DESIGN.md / ZeRO paper: DP and ZeRO-1/2 move 2 Psi per rank, ZeRO-3 3 Psi
// (with one micro-batch per step).
TEST(Comm, ZeroVolumes) {
  ModelShape m = ModelShape::gpt("1.3B", 24, 2048, 16, 2048, 51200);
  CostModel cm(m, a100());
  int64_t d = 64;
  double psi = m.parameters, bytes = 2 * psi; // fp16
  double unit = double(d - 1) / d * bytes;    // one ring pass of Psi
  EXPECT_DOUBLE_EQ(cm.estimate(plan(d, 1, 1, 0, 8, 1)).comm.dp, 2 * unit);
  EXPECT_DOUBLE_EQ(cm.estimate(plan(d, 1, 1, 1, 8, 1)).comm.dp, 2 * unit);
  EXPECT_DOUBLE_EQ(cm.estimate(plan(d, 1, 1, 2, 8, 1)).comm.dp, 2 * unit);
  EXPECT_DOUBLE_EQ(cm.estimate(plan(d, 1, 1, 3, 8, 1)).comm.dp, 3 * unit);
  // Gradient accumulation: stage 2 reduce-scatters every micro-batch.
  EXPECT_DOUBLE_EQ(cm.estimate(plan(d, 1, 1, 1, 2, 4)).comm.dp, 2 * unit);
  EXPECT_DOUBLE_EQ(cm.estimate(plan(d, 1, 1, 2, 2, 4)).comm.dp, 5 * unit);
  // Without data parallelism nothing moves.
  EXPECT_EQ(cm.estimate(plan(1, 8, 1, 0, 8, 1)).comm.dp, 0.0);
}

TEST(Comm, GradientAllReduceOverlapsTheLastBackward) {
  ModelShape m = ModelShape::gpt("1.3B", 24, 2048, 16, 2048, 51200);
  ClusterSpec c = a100();
  CostModel cm(m, c);
  PlanEstimate e = cm.estimate(plan(64, 1, 1, 0, 8, 1));
  double full = collectiveTime(CollectiveKind::AllReduce, 64, 2 * m.parameters,
                               linkFor(c, placeGroup(1, 64, 8)));
  EXPECT_GT(e.time.dpComm, 0.0);
  EXPECT_LT(e.time.dpComm, full);
  c.calibration.overlapSlowdown = 0.0;
  PlanEstimate ideal = CostModel(m, c).estimate(plan(64, 1, 1, 0, 8, 1));
  EXPECT_LT(ideal.time.dpComm, e.time.dpComm);
}

TEST(Offload, OptimizerStatesMoveToHostOrNvme) {
  ModelShape m = ModelShape::gpt3_175B();
  ClusterSpec c = a100();
  ParallelPlan p = plan(16, 8, 8, 1, 1, 96);
  p.offloadOptimizer = ::dsc::OffloadTier::Host;
  double psiRank = m.parameters / 64;
  PlanEstimate e = CostModel(m, c).estimate(p);
  EXPECT_EQ(e.memory.states.optimizer, 0.0);
  EXPECT_DOUBLE_EQ(e.memory.host, 12 * psiRank / 16 + 2 * psiRank / 16);
  EXPECT_EQ(e.memory.nvme, 0.0);
  EXPECT_GT(e.time.offload, 0.0);
  EXPECT_EQ(e.time.optimizer, 0.0);
  // A host too small for the states spills them to NVMe, which is slower.
  c.hostMemoryBytes = 8 * 1e9;
  PlanEstimate spill = CostModel(m, c).estimate(p);
  EXPECT_DOUBLE_EQ(spill.memory.nvme, 12 * psiRank / 16);
  EXPECT_GT(spill.time.offload, e.time.offload);
}

TEST(Offload, Fp32PlansPriceWhatThePassBuilds) {
  // --dsc-offload in an fp32 plan: master, gradient copy and both moments
  // (16 bytes per shard parameter) on the host, 4 bytes each way over
  // PCIe; the device keeps parameters and gradients.
  ModelShape m = ModelShape::gpt("1.3B", 24, 2048, 16, 2048, 51200);
  ClusterSpec c = a100();
  ParallelPlan p = plan(8, 1, 1, 1, 1, 8);
  p.precision = ::dsc::Precision::Fp32;
  PlanEstimate on = CostModel(m, c).estimate(p);
  p.offloadOptimizer = ::dsc::OffloadTier::Host;
  PlanEstimate off = CostModel(m, c).estimate(p);
  const double shard = m.parameters / 8;
  EXPECT_DOUBLE_EQ(off.memory.host, 16 * shard);
  EXPECT_DOUBLE_EQ(on.memory.device - off.memory.device, 8 * shard);
  EXPECT_DOUBLE_EQ(off.memory.states.params, 4 * m.parameters);
  EXPECT_GE(off.time.offload, 8 * shard / c.pcieBandwidthPerGpu);
  // Spilled to NVMe: master and moments (12 bytes) there, the gradient
  // copy (4) on the host.
  c.hostMemoryBytes = 1e9;
  PlanEstimate spill = CostModel(m, c).estimate(p);
  EXPECT_DOUBLE_EQ(spill.memory.nvme, 12 * shard);
  EXPECT_DOUBLE_EQ(spill.memory.host, 4 * shard);
}

TEST(Offload, Fp32ParameterOffloadPricesTheFetches) {
  // ZeRO-Infinity in an fp32 plan as --dsc-offload builds it: the ZeRO-3
  // chunk is its own master, so the host keeps 16 bytes per shard
  // parameter as before and the device loses the 4 of the chunk; over
  // PCIe the gradient goes down (4) and every micro-batch fetches the
  // chunk for the forward's and the backward's gathers (2 x 4 x m), with
  // nothing going up after the update.
  ModelShape m = ModelShape::gpt("1.3B", 24, 2048, 16, 2048, 51200);
  ClusterSpec c = a100();
  ParallelPlan p = fp32OffloadPlan(3, 4);
  PlanEstimate optimizerOnly = CostModel(m, c).estimate(p);
  p.offloadParams = ::dsc::OffloadTier::Host;
  PlanEstimate withParams = CostModel(m, c).estimate(p);
  const double shard = m.parameters / 8;
  EXPECT_DOUBLE_EQ(optimizerOnly.memory.states.params, 4 * shard);
  EXPECT_EQ(withParams.memory.states.params, 0.0);
  EXPECT_DOUBLE_EQ(optimizerOnly.memory.device - withParams.memory.device,
                   4 * shard);
  EXPECT_DOUBLE_EQ(withParams.memory.host, 16 * shard);
  EXPECT_DOUBLE_EQ(optimizerOnly.memory.host, 16 * shard);
  EXPECT_NEAR(withParams.time.offload - optimizerOnly.time.offload,
              (4 + 2 * 4 * 4 - 8) * shard / c.pcieBandwidthPerGpu,
              1e-9 * withParams.time.offload);
  // Without ZeRO-3 or without the optimizer offload it is not a plan.
  CostModel cm(m, c);
  p.zeroStage = 2;
  EXPECT_NE(cm.checkPlan(p).find("parameter offload needs ZeRO stage 3"),
            std::string::npos);
  p.zeroStage = 3;
  p.offloadOptimizer = ::dsc::OffloadTier::None;
  EXPECT_NE(cm.checkPlan(p).find("and optimizer offload"), std::string::npos);
}

TEST(Offload, DelayedUpdateHidesTheCpuAdamBehindTheNextStep) {
  // ZeRO-Offload's DPU: the CPU Adam (28 bytes per shard parameter over
  // the host's memory bandwidth) runs beside the next step's forward and
  // backward; only the PCIe transfers stay on the step's path when the
  // compute outlasts it.
  ModelShape m = ModelShape::gpt("1.3B", 24, 2048, 16, 2048, 51200);
  ClusterSpec c = a100();
  ParallelPlan p = fp32OffloadPlan(1, 8);
  CostModel cm(m, c);
  PlanEstimate inOrder = cm.estimate(p);
  p.delayedUpdate = true;
  EXPECT_EQ(cm.checkPlan(p), "");
  PlanEstimate delayed = cm.estimate(p);
  const double shard = m.parameters / 8;
  const double cpuAdam =
      28 * shard / (c.hostMemoryBandwidth / double(c.gpusPerNode));
  ASSERT_GT(delayed.time.compute, cpuAdam);
  EXPECT_NEAR(inOrder.time.offload - delayed.time.offload, cpuAdam,
              1e-9 * inOrder.time.offload);
  EXPECT_DOUBLE_EQ(delayed.time.offload, 8 * shard / c.pcieBandwidthPerGpu);
  EXPECT_EQ(delayed.memory.device, inOrder.memory.device);
  // Not without the host tier, nor with the chunks offloaded, nor spilled.
  p.offloadOptimizer = ::dsc::OffloadTier::None;
  EXPECT_NE(cm.checkPlan(p).find("delayed parameter update needs"),
            std::string::npos);
  p.offloadOptimizer = ::dsc::OffloadTier::Host;
  // 1.5 GB of host memory per GPU: the gradient copies (4 bytes per shard
  // parameter) fit, the masters and moments (12) spill.
  c.hostMemoryBytes = 1.5e9 * double(c.gpusPerNode);
  PlanEstimate spilled = CostModel(m, c).estimate(p);
  EXPECT_FALSE(spilled.fits);
  EXPECT_NE(spilled.whyNot.find("to NVMe, where the delayed parameter update "
                                "is not built"),
            std::string::npos)
      << spilled.whyNot;
}

TEST(Plans, InfeasibleAndInvalidPlansSayWhy) {
  CostModel cm(ModelShape::gpt3_175B(), a100());
  PlanEstimate e = cm.estimate(plan(128, 8, 1, 0, 1, 12));
  EXPECT_FALSE(e.fits);
  EXPECT_NE(e.whyNot.find("GB per GPU"), std::string::npos) << e.whyNot;
  EXPECT_NE(cm.checkPlan(plan(1, 16, 64, 0, 1, 1)).find("within a node"),
            std::string::npos);
  EXPECT_NE(cm.checkPlan(plan(1, 8, 5, 0, 1, 1)).find("96 layers"),
            std::string::npos);
  ParallelPlan off = plan(8, 8, 16, 0, 1, 1);
  off.offloadOptimizer = ::dsc::OffloadTier::Host;
  EXPECT_NE(cm.checkPlan(off).find("ZeRO stage >= 1"), std::string::npos);
  EXPECT_EQ(cm.checkPlan(plan(8, 8, 16, 1, 1, 192)), "");
  // Megatron-LM's interleaving rules, with the numbers.
  ParallelPlan chunks = plan(8, 8, 16, 1, 1, 24);
  chunks.schedule = PipelineSchedule::InterleavedOneFOneB;
  chunks.virtualStages = 4;
  EXPECT_EQ(cm.checkPlan(chunks),
            "interleaved-1f1b runs the micro-batches in groups of pp: 24 "
            "micro-batches is not a multiple of pp=16");
  chunks.numMicroBatches = 32;
  EXPECT_EQ(cm.checkPlan(chunks), "pp=16 x virtual-stages=4 model chunks do "
                                  "not divide the 96 layers");
  chunks.virtualStages = 3;
  EXPECT_EQ(cm.checkPlan(chunks), "");
  ParallelPlan notInterleaved = plan(8, 8, 16, 1, 1, 32);
  notInterleaved.virtualStages = 2;
  EXPECT_EQ(cm.checkPlan(notInterleaved),
            "virtual-stages=2 needs pipeline-schedule=interleaved-1f1b, not "
            "1f1b");
}

// ZeRO-3 issues one collective per parameter tensor above the persistence
// threshold (docs/cost-model.md, "At scale"): GPT-2's block has 12 tensors,
// 4 of them (the matrices) above DeepSpeed's 1e5 elements at h = 12288.
// Fewer collectives and prefetch=1's overlap can only shorten the step, and
// at d = 1536 the latencies of 12 tensors outweigh the compute.
TEST(Zero3AtScale, CollectivesPerTensorAndOverlap) {
  CostModel cm(ModelShape::gpt3_175B(), a100());
  EXPECT_EQ(cm.zero3CollectivesPerLayer(1, 0), 12);
  EXPECT_EQ(cm.zero3CollectivesPerLayer(1, 100000), 4);
  ParallelPlan p;
  p.dp = 1536;
  p.zeroStage = 3;
  p.microBatchSize = 1;
  p.recompute = ::dsc::RecomputeKind::Full;
  p.precision = ::dsc::Precision::Bf16;
  PlanEstimate plain = cm.estimate(p);
  p.persistenceThreshold = 100000;
  PlanEstimate persistent = cm.estimate(p);
  p.prefetch = true;
  PlanEstimate prefetched = cm.estimate(p);
  EXPECT_LT(persistent.time.zeroComm, plain.time.zeroComm);
  EXPECT_LT(prefetched.time.zeroComm, persistent.time.zeroComm);
  EXPECT_GT(plain.time.zeroComm, plain.time.compute);
}

} // namespace
