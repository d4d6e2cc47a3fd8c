//===- PlanTestSupport.h - Small hand-built plans for tests -----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A tiny language model as a plan, built by hand the way the compiler's
// lowering would: embedding -> matmul -> cross-entropy, its backward, and an
// AdamW optimizer program. Shared by the plan I/O and executor tests.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TEST_RUNTIME_PLANTESTSUPPORT_H
#define DSC_TEST_RUNTIME_PLANTESTSUPPORT_H

#include "dsc/Runtime/Plan.h"

#include <string>
#include <unistd.h>

namespace dsc::rt::test {

/// A path in the test temp directory unique to this process, so test runs
/// of several build trees on one machine do not collide.
inline std::string uniqueTempPath(const std::string &dir,
                                  const std::string &name) {
  return dir + "/dsc-test-" + std::to_string(getpid()) + "-" + name;
}

/// Shape of the tiny model.
struct TinyShape {
  int64_t vocab = 16, hidden = 8, batch = 2, seq = 4;
};

/// Adds a buffer at the end of arena 0 (64-byte aligned) and returns its id.
inline uint32_t addBuffer(Plan &plan, const std::string &name, DType dtype,
                          std::vector<int64_t> shape, BufferRole role,
                          BufferInit init = {}) {
  Buffer b;
  b.name = name;
  b.arena = 0;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.role = role;
  b.init = init;
  b.bytes = uint64_t(numElements(b.shape)) * dtypeSize(dtype);
  uint64_t &end = plan.arenas[0].bytes;
  b.offset = (end + 63) / 64 * 64;
  end = b.offset + b.bytes;
  plan.buffers.push_back(b);
  return uint32_t(plan.buffers.size() - 1);
}

inline Instruction makeInst(Opcode op, std::vector<uint32_t> in,
                            std::vector<uint32_t> out, std::string name,
                            std::vector<int64_t> ints = {},
                            std::vector<double> floats = {}) {
  Instruction inst;
  inst.opcode = op;
  inst.inputs = std::move(in);
  inst.outputs = std::move(out);
  inst.name = std::move(name);
  inst.ints = std::move(ints);
  inst.floats = std::move(floats);
  return inst;
}

/// Programs "forward", "forward_backward" and "optimizer" (constant lr
/// `lr`, global-norm clipping at `maxNorm`, AdamW, zeroing the gradients).
/// The temporaries x and dx share bytes, as memory planning would have them.
inline Plan makeTinyPlan(DType dt = DType::F64, TinyShape s = {},
                         double lr = 0.05, double maxNorm = 1.0,
                         int64_t microBatches = 1) {
  Plan plan;
  plan.vocabSize = s.vocab;
  plan.seqLength = s.seq;
  plan.microBatchSize = s.batch;
  plan.microBatches = microBatches;
  plan.arenas.push_back({Tier::Device, 0});
  const int64_t rows = s.batch * s.seq;

  BufferInit normal{InitKind::Normal, 0.5, 0.0};
  plan.tokens = addBuffer(plan, "tokens", DType::I32, {s.batch, s.seq},
                          BufferRole::Tokens);
  plan.targets = addBuffer(plan, "targets", DType::I32, {s.batch, s.seq},
                           BufferRole::Targets);
  uint32_t wte = addBuffer(plan, "wte.weight", dt, {s.vocab, s.hidden},
                           BufferRole::Parameter, normal);
  uint32_t head = addBuffer(plan, "head.weight", dt, {s.hidden, s.vocab},
                            BufferRole::Parameter, normal);
  uint32_t gWte = addBuffer(plan, "wte.weight.grad", dt, {s.vocab, s.hidden},
                            BufferRole::Gradient);
  uint32_t gHead = addBuffer(plan, "head.weight.grad", dt, {s.hidden, s.vocab},
                             BufferRole::Gradient);
  uint32_t mWte = addBuffer(plan, "wte.weight.exp_avg", dt, {s.vocab, s.hidden},
                            BufferRole::OptimizerState);
  uint32_t vWte = addBuffer(plan, "wte.weight.exp_avg_sq", dt,
                            {s.vocab, s.hidden}, BufferRole::OptimizerState);
  uint32_t mHead = addBuffer(plan, "head.weight.exp_avg", dt,
                             {s.hidden, s.vocab}, BufferRole::OptimizerState);
  uint32_t vHead = addBuffer(plan, "head.weight.exp_avg_sq", dt,
                             {s.hidden, s.vocab}, BufferRole::OptimizerState);
  plan.loss = addBuffer(plan, "loss", dt, {}, BufferRole::Loss);
  uint32_t dloss =
      addBuffer(plan, "loss.grad_seed", dt, {}, BufferRole::Constant,
                {InitKind::Constant, 0.0, 1.0 / microBatches});
  plan.gradientSeed = dloss;
  uint32_t lrBuf = addBuffer(plan, "lr", dt, {}, BufferRole::Scalar);
  uint32_t norm = addBuffer(plan, "grad_norm", dt, {}, BufferRole::Scalar);
  plan.learningRate = lrBuf;
  plan.gradNorm = norm;
  uint32_t x = addBuffer(plan, "x", dt, {s.batch, s.seq, s.hidden},
                         BufferRole::Temporary);
  uint32_t logits = addBuffer(plan, "logits", dt, {s.batch, s.seq, s.vocab},
                              BufferRole::Temporary);
  uint32_t dlogits = addBuffer(plan, "dlogits", dt, {s.batch, s.seq, s.vocab},
                               BufferRole::Temporary);
  // dx reuses x's bytes: x is dead once the head's gradient is computed.
  Buffer dxDesc = plan.buffers[x];
  dxDesc.name = "dx";
  plan.buffers.push_back(dxDesc);
  uint32_t dx = uint32_t(plan.buffers.size() - 1);

  std::vector<Instruction> forward = {
      makeInst(Opcode::Embedding, {wte, plan.tokens}, {x}, "wte"),
      makeInst(Opcode::Matmul, {x, head}, {logits}, "head",
               {1, rows, s.vocab, s.hidden, 0, 0, 0, 0}),
      makeInst(Opcode::CrossEntropy, {logits, plan.targets}, {plan.loss},
               "loss", {/*classes=*/0}),
  };
  std::vector<Instruction> fb = forward;
  fb.push_back(makeInst(Opcode::CrossEntropyGrad, {logits, plan.targets, dloss},
                        {dlogits}, "loss.grad", {/*classes=*/0}));
  // dHead += x^T dlogits: x stored [rows, hidden] read transposed.
  fb.push_back(makeInst(Opcode::Matmul, {x, dlogits}, {gHead},
                        "head.grad_weight",
                        {1, s.hidden, s.vocab, rows, 1, 0, 0, 1}));
  // dx = dlogits head^T: head stored [hidden, vocab] read transposed.
  fb.push_back(makeInst(Opcode::Matmul, {dlogits, head}, {dx},
                        "head.grad_input",
                        {1, rows, s.hidden, s.vocab, 0, 1, 0, 0}));
  fb.push_back(makeInst(Opcode::EmbeddingGrad, {dx, plan.tokens}, {gWte},
                        "wte.grad", {1}));

  std::vector<Instruction> opt = {
      makeInst(Opcode::LearningRate, {}, {lrBuf}, "lr",
               {int64_t(LrScheduleKind::Constant), 0, 0, 0}, {lr, 0.0, 0.0}),
      makeInst(Opcode::GlobalNormClip, {gWte, gHead}, {norm}, "clip", {},
               {maxNorm}),
      makeInst(Opcode::AdamW, {gWte, lrBuf}, {wte, mWte, vWte}, "wte.adamw",
               {1}, {0.9, 0.999, 1e-8, 0.01}),
      makeInst(Opcode::AdamW, {gHead, lrBuf}, {head, mHead, vHead},
               "head.adamw", {0}, {0.9, 0.999, 1e-8, 0.01}),
      makeInst(Opcode::Zero, {}, {gWte, gHead}, "zero_grad"),
  };
  plan.programs.push_back({"forward", forward});
  plan.programs.push_back({"forward_backward", fb});
  plan.programs.push_back({"optimizer", opt});
  plan.summary.peakBytesPerArena = {plan.arenas[0].bytes};
  plan.summary.flopsPerMicroBatch = uint64_t(6 * rows * s.hidden * s.vocab);
  return plan;
}

} // namespace dsc::rt::test

#endif // DSC_TEST_RUNTIME_PLANTESTSUPPORT_H
