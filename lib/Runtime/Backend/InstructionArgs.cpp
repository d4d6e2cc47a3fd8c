//===- InstructionArgs.cpp - Kernel arguments of plan instructions --------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/InstructionArgs.h"

#include "dsc/Runtime/ShardLayout.h"

using namespace dsc::rt;

int64_t dsc::rt::rowsOf(const Buffer &b) {
  int64_t cols = b.shape.empty() ? 1 : b.shape.back();
  return cols ? numElements(b.shape) / cols : 0;
}

int64_t dsc::rt::lastDim(const Buffer &b) {
  return b.shape.empty() ? 1 : b.shape.back();
}

int64_t dsc::rt::product(const std::vector<int64_t> &shape, size_t from,
                         size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i)
    p *= shape[i];
  return p;
}

MatmulShape dsc::rt::matmulShapeOf(const Instruction &inst) {
  const ops::Matmul mm = ops::Matmul::decode(inst);
  MatmulShape s;
  s.batch = mm.batch;
  s.m = mm.m;
  s.n = mm.n;
  s.k = mm.k;
  s.transA = mm.transA;
  s.transB = mm.transB;
  s.broadcastB = mm.broadcastB;
  return s;
}

namespace {
template <typename Op> AdamWConfig adamConfig(const Op &op, double lr) {
  AdamWConfig cfg;
  cfg.lr = lr;
  cfg.beta1 = op.beta1;
  cfg.beta2 = op.beta2;
  cfg.eps = op.eps;
  cfg.weightDecay = op.wd;
  return cfg;
}
template <typename Op>
AttentionShape attentionShape(const Op &op, const Plan &plan, const Buffer &q,
                              uint64_t seed,
                              const std::vector<int64_t> &coords) {
  AttentionShape s;
  s.batch = q.shape[0];
  s.seq = q.shape[1];
  s.hidden = q.shape[2];
  s.heads = op.heads;
  s.causal = op.causal;
  s.window = op.window;
  s.dropout = float(op.dropout);
  s.seed = seed;
  // Heads split over a group: this rank's are those at its index.
  if (op.headAxes) {
    s.headOffset = groupIndex(plan.mesh, coords, op.headAxes) * s.heads;
    s.totalHeads = groupSize(plan.mesh, op.headAxes) * s.heads;
  }
  return s;
}
} // namespace

AdamWConfig dsc::rt::adamConfigOf(const Instruction &inst, double lr) {
  switch (inst.opcode) {
  case Opcode::AdamWShard:
    return adamConfig(ops::AdamWShard::decode(inst), lr);
  case Opcode::AdamWScheduledBeta1:
    return adamConfig(ops::AdamWScheduledBeta1::decode(inst), lr);
  case Opcode::AdamWShardScheduledBeta1:
    return adamConfig(ops::AdamWShardScheduledBeta1::decode(inst), lr);
  default:
    return adamConfig(ops::AdamW::decode(inst), lr);
  }
}

bool dsc::rt::adamDecayOf(const Instruction &inst) {
  switch (inst.opcode) {
  case Opcode::AdamWShard:
    return ops::AdamWShard::decode(inst).decay;
  case Opcode::AdamWScheduledBeta1:
    return ops::AdamWScheduledBeta1::decode(inst).decay;
  case Opcode::AdamWShardScheduledBeta1:
    return ops::AdamWShardScheduledBeta1::decode(inst).decay;
  default:
    return ops::AdamW::decode(inst).decay;
  }
}

Permutation dsc::rt::permutationOf(const Instruction &inst) {
  const std::vector<int64_t> permutation =
      ops::Transpose::decode(inst).permutation;
  Permutation p;
  p.rank = int(permutation.size()); // <= kMaxRank (validatePlan)
  for (int i = 0; i < p.rank; ++i)
    p.perm[i] = int(permutation[size_t(i)]);
  return p;
}

SgdConfig dsc::rt::sgdConfigOf(const Instruction &inst, double lr) {
  const ops::Sgd sgd = ops::Sgd::decode(inst);
  SgdConfig cfg;
  cfg.lr = lr;
  cfg.momentum = sgd.momentum;
  cfg.weightDecay = sgd.wd;
  cfg.nesterov = sgd.nesterov;
  return cfg;
}

AttentionShape dsc::rt::attentionShapeOf(const Plan &plan,
                                         const Instruction &inst, uint64_t seed,
                                         const std::vector<int64_t> &coords) {
  const Buffer &q = plan.buffers[inst.inputs[0]];
  switch (inst.opcode) {
  case Opcode::AttentionGrad:
    return attentionShape(ops::AttentionGrad::decode(inst), plan, q, seed,
                          coords);
  case Opcode::AttentionLse:
    return attentionShape(ops::AttentionLse::decode(inst), plan, q, seed,
                          coords);
  case Opcode::AttentionGradLse:
    return attentionShape(ops::AttentionGradLse::decode(inst), plan, q, seed,
                          coords);
  default:
    return attentionShape(ops::Attention::decode(inst), plan, q, seed, coords);
  }
}

uint64_t dsc::rt::attentionSeedOf(const Instruction &inst) {
  switch (inst.opcode) {
  case Opcode::AttentionGrad:
    return uint64_t(ops::AttentionGrad::decode(inst).seed);
  case Opcode::AttentionLse:
    return uint64_t(ops::AttentionLse::decode(inst).seed);
  case Opcode::AttentionGradLse:
    return uint64_t(ops::AttentionGradLse::decode(inst).seed);
  default:
    return uint64_t(ops::Attention::decode(inst).seed);
  }
}

namespace {
template <typename Op>
MoeRouting moeRoutingFrom(const Op &op, const Buffer &logits,
                          const Buffer &slots) {
  MoeRouting r;
  r.experts = lastDim(logits);
  r.tokens = rowsOf(logits);
  r.topK = op.topK;
  r.capacity = slots.shape.empty() ? 0 : slots.shape.back();
  r.dropTokens = op.dropTokens;
  r.normalize = MoeNormalize(op.normalize);
  r.drop = MoeDrop(op.drop);
  r.order = MoeSlotOrder(op.order);
  r.auxCounts = MoeAuxCounts(op.auxCounts);
  r.auxCoeff = op.auxCoeff;
  r.zCoeff = op.zCoeff;
  return r;
}
} // namespace

MoeRouting dsc::rt::moeRoutingOf(const Instruction &inst, const Buffer &logits,
                                 const Buffer &slots) {
  return inst.opcode == Opcode::MoeRouteGrad
             ? moeRoutingFrom(ops::MoeRouteGrad::decode(inst), logits, slots)
             : moeRoutingFrom(ops::MoeRoute::decode(inst), logits, slots);
}
