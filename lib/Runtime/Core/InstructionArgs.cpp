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
  MatmulShape s;
  s.batch = inst.ints[0];
  s.m = inst.ints[1];
  s.n = inst.ints[2];
  s.k = inst.ints[3];
  s.transA = inst.ints[4];
  s.transB = inst.ints[5];
  s.broadcastB = inst.ints[6];
  return s;
}

AdamWConfig dsc::rt::adamConfigOf(const Instruction &inst, double lr) {
  AdamWConfig cfg;
  cfg.lr = lr;
  cfg.beta1 = inst.floats[0];
  cfg.beta2 = inst.floats[1];
  cfg.eps = inst.floats[2];
  cfg.weightDecay = inst.floats[3];
  return cfg;
}

SgdConfig dsc::rt::sgdConfigOf(const Instruction &inst, double lr) {
  SgdConfig cfg;
  cfg.lr = lr;
  cfg.momentum = inst.floats[0];
  cfg.weightDecay = inst.floats[1];
  cfg.nesterov = inst.ints[0] != 0;
  return cfg;
}

AttentionShape dsc::rt::attentionShapeOf(const Plan &plan,
                                         const Instruction &inst,
                                         uint64_t seed,
                                         const std::vector<int64_t> &coords) {
  const Buffer &q = plan.buffers[inst.inputs[0]];
  AttentionShape s;
  s.batch = q.shape[0];
  s.seq = q.shape[1];
  s.hidden = q.shape[2];
  s.heads = inst.ints[0];
  s.causal = inst.ints[1] != 0;
  s.dropout = float(inst.floats[0]);
  s.seed = seed;
  // Heads split over a group: this rank's are those at its index.
  if (int64_t axes = inst.ints[3]) {
    s.headOffset = groupIndex(plan.mesh, coords, axes) * s.heads;
    s.totalHeads = groupSize(plan.mesh, axes) * s.heads;
  }
  return s;
}
