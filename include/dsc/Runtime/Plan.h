//===- Plan.h - the executable training plan --------------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The plan is the contract between the compiler and the runtime: statically
// planned buffers (offsets in one arena per memory tier) and flat, scheduled
// instruction lists ("programs") over them. The compiler fills a Plan and
// writes it with writePlan(); dsc-run reads it with readPlan(), which checks
// every field (a plan file is untrusted input) before anything executes.
//
// A training step is: for each micro-batch, load tokens/targets into their
// buffers and run program "forward_backward" (gradients accumulate into the
// gradient buffers); then run program "optimizer" once (clipping, the update,
// zeroing the gradients). Program "forward" (loss only) serves evaluation.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_PLAN_H
#define DSC_RUNTIME_PLAN_H

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt {

/// Bumped whenever the binary layout or an opcode's meaning changes; a plan
/// of another version is refused with both versions in the message.
constexpr uint32_t kPlanFormatVersion = 1;

enum class Tier : uint32_t { Device = 0, Host = 1, Nvme = 2 };
enum class DType : uint32_t { F32 = 0, F64 = 1, I32 = 2, BF16 = 3, F16 = 4 };

/// What a buffer holds; decides its lifetime and who fills it.
enum class BufferRole : uint32_t {
  Temporary = 0,      // produced and consumed within one program run
  Parameter = 1,      // persistent, initialized from `init`, checkpointed
  Gradient = 2,       // persistent across micro-batches, zeroed by optimizer
  OptimizerState = 3, // persistent, zero-initialized, checkpointed
  Tokens = 4,         // i32 [batch, seq], filled by the data loader
  Targets = 5,        // i32 [batch, seq], filled by the data loader
  Loss = 6,           // f32/f64 scalar, read after forward_backward
  Scalar = 7,         // f32/f64 scalar the executor reads (grad norm, lr)
  Constant = 8,       // persistent, initialized once from `init`, never written
};

/// Constant fills every element with BufferInit::value (the compiler's scalar
/// constants, e.g. the loss gradient seed 1/microbatches).
enum class InitKind : uint32_t {
  None = 0,
  Zeros = 1,
  Ones = 2,
  Normal = 3,
  Constant = 4
};

struct BufferInit {
  InitKind kind = InitKind::None;
  /// Standard deviation actually drawn with (already scaled for residual
  /// projections by the compiler).
  double std = 0.0;
  /// The fill value of InitKind::Constant.
  double value = 0.0;
};

struct Buffer {
  std::string name; // stable dotted name for parameters and their state
  uint32_t arena = 0; // index into Plan::arenas
  uint64_t offset = 0, bytes = 0;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  BufferRole role = BufferRole::Temporary;
  BufferInit init;
};

struct Arena {
  Tier tier = Tier::Device;
  uint64_t bytes = 0;
};

/// Every instruction the executor knows. The operand/result buffer lists and
/// the integer/float attributes each opcode expects are documented at
/// `describeOpcode` in Plan.cpp and checked by readPlan/validatePlan.
enum class Opcode : uint32_t {
  // Forward ops (mirror the dsc graph ops).
  Embedding = 0,         // in(table, ids) out(y)
  PositionEmbedding = 1, // in(table) out(y)                    ints: batch seq
  Matmul = 2,            // in(a, b) out(c)  ints: batch m n k transA transB broadcastB accumulate
  Add = 3,               // in(a, b) out(y)
  Mul = 4,               // in(a, b) out(y)
  BiasAdd = 5,           // in(x, bias) out(y)
  Gelu = 6,              // in(x) out(y)
  LayerNorm = 7,         // in(x, gamma, beta) out(y)              floats: eps
  Softmax = 8,           // in(x) out(y)
  Attention = 9,         // in(q, k, v) out(o)   ints: heads causal seed  floats: dropout
  CrossEntropy = 10,     // in(logits, targets) out(loss scalar)
  Copy = 11,             // in(x) out(y): reshape of contiguous data
  Transpose = 12,        // in(x) out(y)                          ints: permutation
  Slice = 13,            // in(x) out(y)                          ints: offsets
  Concat = 14,           // in(x0, x1, ...) out(y)                ints: dim
  Dropout = 15,          // in(x) out(y)                 ints: seed  floats: p
  // Backward ops. Those ending in Grad recompute what the forward did not
  // keep (layer-norm statistics, attention's logsumexp, cross-entropy's lse).
  EmbeddingGrad = 32,         // in(dy, ids) out(dtable)          ints: accumulate
  PositionEmbeddingGrad = 33, // in(dy) out(dtable)               ints: accumulate
  BiasGrad = 34,              // in(dy) out(dbias)                ints: accumulate
  GeluGrad = 35,              // in(x, dy) out(dx)
  LayerNormGrad = 36,  // in(x, gamma, dy) out(dx, dgamma, dbeta)  ints: accumulate  floats: eps
  SoftmaxGrad = 37,    // in(y, dy) out(dx)
  AttentionGrad = 38,  // in(q, k, v, dout) out(dq, dk, dv)   ints: heads causal seed  floats: dropout
  CrossEntropyGrad = 39, // in(logits, targets, dloss) out(dlogits)
  SliceGrad = 40,        // in(dy) out(dx): zero dx, place dy     ints: offsets
  Accumulate = 41,       // in(x) out(y): y += x
  // Optimizer ops.
  Zero = 64,          // out(x...): fill with zeros
  GlobalNormClip = 65, // in(grads...) out(norm scalar): scale grads in place  floats: max_norm (0 = off)
  LearningRate = 66,   // out(lr scalar)   ints: kind warmup total   floats: base min
  AdamW = 67,          // in(grad, lr) out(param, m, v) in place  ints: decay  floats: beta1 beta2 eps wd
  Sgd = 68,            // in(grad, lr) out(param, momentum) in place  ints: nesterov  floats: momentum wd
};

/// Learning-rate schedules (DeepSpeed's WarmupLR, WarmupDecayLR,
/// WarmupCosineLR): `LearningRate` ints[0].
enum class LrScheduleKind : uint32_t {
  Constant = 0,
  WarmupConstant = 1,
  WarmupLinearDecay = 2,
  WarmupCosineDecay = 3,
};

struct Instruction {
  Opcode opcode = Opcode::Add;
  std::vector<uint32_t> inputs;  // buffer ids
  std::vector<uint32_t> outputs; // buffer ids
  std::vector<int64_t> ints;
  std::vector<double> floats;
  /// Where it came from (`h.3.mlp.fc`), for errors and traces.
  std::string name;
};

struct Program {
  std::string name; // "forward_backward", "optimizer", "forward"
  std::vector<Instruction> instructions;
};

/// What the compiler predicted; dsc-run compares and reports.
struct PlanSummary {
  std::vector<uint64_t> peakBytesPerArena;
  uint64_t flopsPerMicroBatch = 0; // forward + backward, model FLOPs
  uint64_t collectiveBytesPerStep = 0;
};

struct Plan {
  uint32_t version = kPlanFormatVersion;
  // Model shape the data loader must honour.
  int64_t vocabSize = 0, seqLength = 0, microBatchSize = 0;
  std::vector<Arena> arenas;
  std::vector<Buffer> buffers;
  std::vector<Program> programs;
  PlanSummary summary;
  // Well-known buffers (index into buffers).
  uint32_t tokens = 0, targets = 0, loss = 0;
  int64_t gradNorm = -1, learningRate = -1; // -1 when absent
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_PLAN_H
