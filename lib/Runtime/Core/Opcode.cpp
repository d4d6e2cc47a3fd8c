//===- Opcode.cpp - The opcode table and plan name helpers ----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What each opcode takes, as data (validatePlan checks instructions against
// it, describeOpcode prints it), and the names messages use for dtypes,
// roles and tiers. The table mirrors the comments on `Opcode` in Plan.h.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Plan.h"

#include <algorithm>
#include <limits>

using namespace dsc::rt;

const std::vector<OpcodeInfo> &dsc::rt::opcodeTable() {
  // name, inputs, outputs, #in, #out, ints, floats, #ints, #floats.
  static const std::vector<OpcodeInfo> table = {
      {Opcode::Embedding, "Embedding", "table, ids", "y", 2, 1, "", "", 0, 0},
      {Opcode::PositionEmbedding, "PositionEmbedding", "table", "y", 1, 1,
       "batch seq", "", 2, 0},
      {Opcode::Matmul, "Matmul", "a, b", "c", 2, 1,
       "batch m n k transA transB broadcastB accumulate", "", 8, 0},
      {Opcode::Add, "Add", "a, b", "y", 2, 1, "", "", 0, 0},
      {Opcode::Mul, "Mul", "a, b", "y", 2, 1, "", "", 0, 0},
      {Opcode::BiasAdd, "BiasAdd", "x, bias", "y", 2, 1, "", "", 0, 0},
      {Opcode::Gelu, "Gelu", "x", "y", 1, 1, "", "", 0, 0},
      {Opcode::LayerNorm, "LayerNorm", "x, gamma, beta", "y", 3, 1, "", "eps",
       0, 1},
      {Opcode::Softmax, "Softmax", "x", "y", 1, 1, "", "", 0, 0},
      {Opcode::Attention, "Attention", "q, k, v", "o", 3, 1,
       "heads causal seed headAxes", "dropout", 4, 1},
      {Opcode::CrossEntropy, "CrossEntropy", "logits, targets", "loss", 2, 1,
       "", "", 0, 0},
      {Opcode::Copy, "Copy", "x", "y", 1, 1, "", "", 0, 0},
      // Transpose and Slice take one int per dim of x: counted at validation.
      {Opcode::Transpose, "Transpose", "x", "y", 1, 1, "permutation...", "", -1,
       0},
      {Opcode::Slice, "Slice", "x", "y", 1, 1, "offsets...", "", -1, 0},
      {Opcode::Concat, "Concat", "x0, x1, ...", "y", -1, 1, "dim", "", 1, 0},
      {Opcode::Dropout, "Dropout", "x", "y", 1, 1, "seed", "p", 1, 1},
      {Opcode::Cast, "Cast", "x", "y", 1, 1, "", "", 0, 0},
      {Opcode::EmbeddingGrad, "EmbeddingGrad", "dy, ids", "dtable", 2, 1,
       "accumulate", "", 1, 0},
      {Opcode::PositionEmbeddingGrad, "PositionEmbeddingGrad", "dy", "dtable",
       1, 1, "batch seq accumulate", "", 3, 0},
      {Opcode::BiasGrad, "BiasGrad", "dy", "dbias", 1, 1, "accumulate", "", 1,
       0},
      {Opcode::GeluGrad, "GeluGrad", "x, dy", "dx", 2, 1, "", "", 0, 0},
      {Opcode::LayerNormGrad, "LayerNormGrad", "x, gamma, dy",
       "dx, dgamma, dbeta", 3, 3, "accumulate", "eps", 1, 1},
      {Opcode::SoftmaxGrad, "SoftmaxGrad", "y, dy", "dx", 2, 1, "", "", 0, 0},
      {Opcode::AttentionGrad, "AttentionGrad", "q, k, v, dout", "dq, dk, dv", 4,
       3, "heads causal seed headAxes", "dropout", 4, 1},
      {Opcode::CrossEntropyGrad, "CrossEntropyGrad", "logits, targets, dloss",
       "dlogits", 3, 1, "", "", 0, 0},
      {Opcode::SliceGrad, "SliceGrad", "dy", "dx", 1, 1, "offsets...", "", -1,
       0},
      {Opcode::Accumulate, "Accumulate", "x", "y", 1, 1, "", "", 0, 0},
      {Opcode::Zero, "Zero", "", "x...", 0, -1, "", "", 0, 0},
      {Opcode::GlobalNormClip, "GlobalNormClip", "grads...", "norm", -1, 1, "",
       "max_norm", 0, 1},
      {Opcode::LearningRate, "LearningRate", "", "lr", 0, 1,
       "kind warmup total warmupLog", "base warmupStart decayEnd", 4, 3},
      {Opcode::AdamW, "AdamW", "grad, lr", "param, m, v", 2, 3, "decay",
       "beta1 beta2 eps wd", 1, 4},
      {Opcode::Sgd, "Sgd", "grad, lr", "param, momentum", 2, 2, "nesterov",
       "momentum wd", 1, 2},
      {Opcode::AdamWShard, "AdamWShard", "grad, lr", "param, m, v", 2, 3,
       "decay axes", "beta1 beta2 eps wd", 2, 4},
      {Opcode::GlobalNormClipParts, "GlobalNormClipParts", "grads...", "norm",
       -1, 1, "axes parts...", "max_norm", -1, 1},
      // In place: validatePlan checks that the outputs are the inputs.
      {Opcode::AllReduce, "AllReduce", "x0, x1, ...", "x0, x1, ...", -1, -1,
       "axes reduce", "", 2, 0},
      {Opcode::AllGather, "AllGather", "x0, x1, ...", "x0, x1, ...", -1, -1,
       "axes", "", 1, 0},
      {Opcode::ReduceScatter, "ReduceScatter", "x0, x1, ...", "x0, x1, ...", -1,
       -1, "axes reduce", "", 2, 0},
      {Opcode::ReduceScatterAccumulate, "ReduceScatterAccumulate", "x", "shard",
       1, 1, "axes reduce", "", 2, 0},
      {Opcode::GatherParameter, "GatherParameter", "chunk", "whole", 1, 1,
       "axes", "", 1, 0},
      {Opcode::VocabParallelEmbedding, "VocabParallelEmbedding", "table, ids",
       "y", 2, 1, "axes", "", 1, 0},
      {Opcode::VocabParallelEmbeddingGrad, "VocabParallelEmbeddingGrad",
       "dy, ids", "dtable", 2, 1, "axes accumulate", "", 2, 0},
      {Opcode::VocabParallelCrossEntropy, "VocabParallelCrossEntropy",
       "logits, targets", "loss", 2, 1, "axes", "", 1, 0},
      {Opcode::VocabParallelCrossEntropyGrad, "VocabParallelCrossEntropyGrad",
       "logits, targets, dloss", "dlogits", 3, 1, "axes", "", 1, 0},
  };
  return table;
}

const OpcodeInfo *dsc::rt::lookupOpcode(uint32_t raw) {
  for (const OpcodeInfo &info : opcodeTable())
    if (uint32_t(info.opcode) == raw)
      return &info;
  return nullptr;
}

std::string dsc::rt::opcodeName(Opcode op) {
  if (const OpcodeInfo *info = lookupOpcode(uint32_t(op)))
    return info->name;
  return "opcode " + std::to_string(uint32_t(op));
}

std::string dsc::rt::describeOpcode(Opcode op) {
  const OpcodeInfo *info = lookupOpcode(uint32_t(op));
  if (!info)
    return opcodeName(op) + ": unknown";
  std::string s = std::string(info->name) + ": in(" + info->inputs + ") out(" +
                  info->outputs + ")";
  if (*info->ints)
    s += std::string(" ints(") + info->ints + ")";
  if (*info->floats)
    s += std::string(" floats(") + info->floats + ")";
  return s;
}

const char *dsc::rt::roleName(BufferRole r) {
  switch (r) {
  case BufferRole::Temporary:
    return "temporary";
  case BufferRole::Parameter:
    return "parameter";
  case BufferRole::Gradient:
    return "gradient";
  case BufferRole::OptimizerState:
    return "optimizer state";
  case BufferRole::Tokens:
    return "tokens";
  case BufferRole::Targets:
    return "targets";
  case BufferRole::Loss:
    return "loss";
  case BufferRole::Scalar:
    return "scalar";
  case BufferRole::Constant:
    return "constant";
  case BufferRole::Boundary:
    return "boundary";
  }
  return "unknown role";
}

const char *dsc::rt::tierName(Tier t) {
  switch (t) {
  case Tier::Device:
    return "device";
  case Tier::Host:
    return "host";
  case Tier::Nvme:
    return "nvme";
  }
  return "unknown tier";
}

int64_t dsc::rt::numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d != 0 && n > std::numeric_limits<int64_t>::max() / d))
      return -1;
    n *= d;
  }
  return n;
}

std::string dsc::rt::shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t dsc::rt::meshRanks(const std::vector<Plan::MeshAxis> &mesh) {
  int64_t n = 1;
  for (const Plan::MeshAxis &axis : mesh) {
    if (axis.size < 1 || n > std::numeric_limits<int64_t>::max() / axis.size)
      return -1;
    n *= axis.size;
  }
  return n;
}

std::string dsc::rt::meshString(const std::vector<Plan::MeshAxis> &mesh) {
  std::string s;
  for (const Plan::MeshAxis &axis : mesh)
    s += (s.empty() ? "" : " ") + axis.name + "=" + std::to_string(axis.size);
  return s;
}

std::vector<int64_t>
dsc::rt::meshCoordinates(const std::vector<Plan::MeshAxis> &mesh,
                         int64_t rank) {
  std::vector<int64_t> coords(mesh.size());
  for (size_t i = mesh.size(); i-- > 0;) {
    int64_t size = std::max<int64_t>(1, mesh[i].size);
    coords[i] = rank % size;
    rank /= size;
  }
  return coords;
}

int64_t dsc::rt::findMeshAxis(const std::vector<Plan::MeshAxis> &mesh,
                              const std::string &name) {
  for (size_t i = 0; i < mesh.size(); ++i)
    if (mesh[i].name == name)
      return int64_t(i);
  return -1;
}

const Program *Plan::findProgram(const std::string &name) const {
  for (const Program &p : programs)
    if (p.name == name)
      return &p;
  return nullptr;
}

int64_t Plan::findBuffer(const std::string &name) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == name)
      return int64_t(i);
  return -1;
}

bool dsc::rt::isCollective(Opcode op) {
  return op == Opcode::AllReduce || op == Opcode::AllGather ||
         op == Opcode::ReduceScatter ||
         op == Opcode::ReduceScatterAccumulate ||
         op == Opcode::GatherParameter;
}

bool dsc::rt::isVocabParallel(Opcode op) {
  return op == Opcode::VocabParallelEmbedding ||
         op == Opcode::VocabParallelEmbeddingGrad ||
         op == Opcode::VocabParallelCrossEntropy ||
         op == Opcode::VocabParallelCrossEntropyGrad;
}
