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
// every field and then validatePlan()'s semantics (PlanIO.h: a plan file is
// untrusted input) before anything executes.
//
// A training step is: for each micro-batch, load tokens/targets into their
// buffers and run program "forward_backward" (gradients accumulate into the
// gradient buffers); then run program "optimizer" once (clipping, the update,
// zeroing the gradients). Program "forward" (loss only) serves evaluation.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_PLAN_H
#define DSC_RUNTIME_PLAN_H

#include "dsc/Support/PipelineScheduleKind.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt {

/// Bumped whenever the binary layout or an opcode's meaning changes; a plan
/// of another version is refused with both versions in the message.
constexpr uint32_t kPlanFormatVersion = 4;

enum class Tier : uint32_t { Device = 0, Host = 1, Nvme = 2 };
enum class DType : uint32_t { F32 = 0, F64 = 1, I32 = 2, BF16 = 3, F16 = 4 };

/// What a buffer holds; decides its lifetime and who fills it. Every role but
/// Temporary is persistent: validatePlan refuses a plan where such a buffer
/// shares arena bytes with any other buffer.
enum class BufferRole : uint32_t {
  Temporary = 0,      // produced and consumed within one program run
  Parameter = 1,      // persistent, initialized from `init`, checkpointed
  Gradient = 2,       // persistent across micro-batches, zeroed by optimizer
  OptimizerState = 3, // persistent, zero-initialized, checkpointed
  Tokens = 4,         // i32 [microBatchSize, seqLength], filled by the loader
  Targets = 5,        // i32 [microBatchSize, seqLength], filled by the loader
  Loss = 6,           // f32/f64 scalar, read after forward_backward
  Scalar = 7,         // f32/f64 scalar the executor reads (grad norm, lr)
  Constant = 8,       // persistent, initialized once from `init`, never
                      // written by an instruction (validatePlan checks)
  Boundary = 9,       // a pipeline stage's input or output activation, or
                      // its gradient: filled or sent by the schedule
};

/// Constant fills every element with BufferInit::value (the compiler's scalar
/// constants, e.g. the loss gradient seed 1/microBatches).
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

/// Which part of a whole tensor a rank's buffer holds (tensor slicing,
/// ZeRO), so that each rank initializes its elements with the values a
/// one-rank run gives them (and checkpoints can tell a part from a whole).
/// `view` is the whole tensor's shape seen with the dims a split needs, in
/// the same element order (the fused QKV weight [H, 3H] as [H, 3, H]);
/// viewSplit[i] is a bit mask over Plan::mesh of the axes view dim i is
/// split evenly over (0: not split; several axes split it outermost-first in
/// mesh order), which selects the rank's box; chunkAxes (ZeRO) is a mask of
/// axes whose group splits the flattened box into equal chunks, of which the
/// buffer holds the one at the rank's index in that group. An empty view
/// means the buffer is the whole tensor (then chunkAxes may still be set:
/// the buffer is a chunk of the whole).
struct ShardLayout {
  std::vector<int64_t> view;
  std::vector<int64_t> viewSplit;
  int64_t chunkAxes = 0;
  bool isWhole() const { return view.empty() && chunkAxes == 0; }
};

struct Buffer {
  std::string name;   // stable dotted name for parameters and their state
  uint32_t arena = 0; // index into Plan::arenas
  uint64_t offset = 0, bytes = 0;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  BufferRole role = BufferRole::Temporary;
  BufferInit init;
  /// This rank's part of the whole tensor (parameters and their state).
  ShardLayout layout;
};

struct Arena {
  Tier tier = Tier::Device;
  uint64_t bytes = 0;
};

/// Every instruction the executor knows. The operands, results and the
/// integer/float attributes of each opcode are listed here and, as data, in
/// the table behind lookupOpcode()/describeOpcode() (lib/Runtime/Core/
/// Opcode.cpp), which validatePlan() checks every instruction against; keep
/// the two in step. Shapes: `[..., C]` means any leading dims, C the last;
/// a "scalar" is a buffer of one element (shape [] or [1]). All float
/// operands of one instruction share one dtype; ids/targets are I32.
///
/// `accumulate` is a bit mask over the results: bit i set makes result i add
/// into its buffer instead of overwriting it (so 1 means "accumulate" for a
/// one-result op; LayerNormGrad may accumulate dgamma/dbeta (6) while
/// overwriting dx).
enum class Opcode : uint32_t {
  // Forward ops (mirror the dsc graph ops).
  /// in(table [V,H], ids [...]) out(y [..., H])
  Embedding = 0,
  /// in(table [P,H]) out(y [batch,seq,H]); ints: batch seq
  PositionEmbedding = 1,
  /// in(a, b) out(c); ints: batch m n k transA transB broadcastB accumulate.
  /// a holds batch*m*k elements, b (broadcastB ? 1 : batch)*k*n, c
  /// batch*m*n; last dims: a m (transA) or k, b k (transB) or n, c n.
  Matmul = 2,
  /// in(a, b) out(y), one shape
  Add = 3,
  /// in(a, b) out(y), one shape
  Mul = 4,
  /// in(x [..., C], bias [C]) out(y)
  BiasAdd = 5,
  /// in(x) out(y)
  Gelu = 6,
  /// in(x [..., C], gamma [C], beta [C]) out(y); floats: eps
  LayerNorm = 7,
  /// in(x) out(y), over the last dim
  Softmax = 8,
  /// in(q, k, v [B,S,H]) out(o): `heads` heads of H/heads; under tensor
  /// slicing `headAxes` (a mask, 0 for none) names the group that splits
  /// the whole attention's heads, these being the ones at the rank's index
  /// (so dropout draws one rank's masks);
  /// ints: heads causal seed headAxes; floats: dropout
  Attention = 9,
  /// in(logits [..., V], targets i32) out(loss scalar); the loss may be of
  /// another float dtype than the logits (f32 from bf16)
  CrossEntropy = 10,
  /// in(x) out(y): reshape of contiguous data (same element count)
  Copy = 11,
  /// in(x) out(y); ints: permutation (one per dim), y dim i = x dim perm[i]
  Transpose = 12,
  /// in(x) out(y); ints: offsets (one per dim) of the box y inside x
  Slice = 13,
  /// in(x0, x1, ...) out(y); ints: dim
  Concat = 14,
  /// in(x) out(y); ints: seed; floats: p
  Dropout = 15,
  /// in(x) out(y): y = x converted to y's float dtype, the same element
  /// count (to bf16/f16: round to nearest even). Mixed precision's casts of
  /// fp32 master weights to the compute dtype and of gradients back.
  Cast = 16,

  // Backward ops. Those ending in Grad recompute what the forward did not
  // keep (layer-norm statistics, attention's logsumexp, cross-entropy's lse).
  // The backward of Dropout is Dropout of dy with the forward's seed.
  /// in(dy, ids) out(dtable); ints: accumulate
  EmbeddingGrad = 32,
  /// in(dy [batch,seq,H]) out(dtable [P,H]); ints: batch seq accumulate
  PositionEmbeddingGrad = 33,
  /// in(dy [..., C]) out(dbias [C]); ints: accumulate
  BiasGrad = 34,
  /// in(x, dy) out(dx)
  GeluGrad = 35,
  /// in(x, gamma, dy) out(dx, dgamma, dbeta); ints: accumulate; floats: eps
  LayerNormGrad = 36,
  /// in(y, dy) out(dx)
  SoftmaxGrad = 37,
  /// in(q, k, v, dout) out(dq, dk, dv); ints: heads causal seed headAxes;
  /// floats: dropout
  AttentionGrad = 38,
  /// in(logits, targets, dloss scalar) out(dlogits)
  CrossEntropyGrad = 39,
  /// in(dy) out(dx): zero dx, place dy; ints: offsets (one per dim of dx)
  SliceGrad = 40,
  /// in(x) out(y): y += x
  Accumulate = 41,

  // Optimizer ops.
  /// out(x...): fill with zeros
  Zero = 64,
  /// in(grads...) out(norm scalar): scales the grads in place;
  /// floats: max_norm (0 = no clipping, the norm is still computed)
  GlobalNormClip = 65,
  /// out(lr scalar); ints: kind warmup total warmupLog;
  /// floats: base warmupStart decayEnd (see LrScheduleKind)
  LearningRate = 66,
  /// in(grad, lr) out(param, m, v), updated in place; ints: decay;
  /// floats: beta1 beta2 eps wd
  AdamW = 67,
  /// in(grad, lr) out(param, momentum), updated in place; ints: nesterov;
  /// floats: momentum wd
  Sgd = 68,
  /// in(grad, lr) out(param, m, v), updated in place: ZeRO's AdamW of
  /// this rank's shard. The flattened param is D equal chunks (D = the size
  /// of the group of `axes`); m and v hold only the chunk at this rank's
  /// index in that group, which is the one updated. grad is either the
  /// whole gradient (ZeRO-1: its chunk at that index is used) or just this
  /// rank's chunk (ZeRO-2);
  /// ints: decay axes; floats: beta1 beta2 eps wd
  AdamWShard = 69,
  /// in(grads...) out(norm scalar): the global norm when gradients are
  /// parts of whole ones (ZeRO chunks, tensor slicing, pipeline stages):
  /// each
  /// gradient's sum of squares counts once per distinct part in the group
  /// of `axes` and the sums are added over that group; only the valid
  /// parts are scaled. `parts` are three ints per gradient: chunkAxes
  /// (ZeRO: its flattened elements are equal chunks over the group of this
  /// mask, 0 without ZeRO), inBuffer (1: the buffer is this rank's chunk;
  /// 0: the buffer is whole and only the chunk at this rank's index is
  /// valid) and splitAxes (tensor slicing: the ranks that differ on these
  /// hold different parts of the whole);
  /// ints: axes parts...; floats: max_norm
  GlobalNormClipParts = 71,
  // Collectives over the plan's mesh (Plan::mesh). The group of a rank is
  // the ranks that differ from it only in the coordinates of the axes in
  // `axes`, a bit mask over Plan::mesh (bit i = axis i); validatePlan
  // refuses a collective in a plan without a mesh.
  /// in(x0, x1, ...) out(x0, x1, ...): in place, the outputs are the inputs
  /// in the same order (float buffers of one dtype); ints: axes reduce
  /// (reduce 0 sum, 1 average, 2 max, 3 min). Buffers that are contiguous
  /// in their arena, in order, are one bucket, reduced with one collective.
  AllReduce = 80,
  /// in(x0, x1, ...) out(x0, x1, ...): in place, the outputs are the inputs
  /// in the same order; each buffer's flattened elements are D equal chunks
  /// (D = the group size), this rank holds the chunk at its index in the
  /// group and receives the others (ZeRO's parameter all-gather); ints: axes
  AllGather = 81,
  /// in(x0, x1, ...) out(x0, x1, ...): in place; each buffer's flattened
  /// elements are D equal chunks; the group's buffers are reduced and the
  /// chunk at this rank's index receives the result (ZeRO's gradient
  /// reduce-scatter; the other chunks are left as they were);
  /// ints: axes reduce
  ReduceScatter = 82,
  /// in(x) out(shard): ZeRO-2's gradient accumulation: reduces the group's
  /// x and adds the chunk at this rank's index (of D equal chunks of the
  /// flattened x) into `shard`, a buffer of numel(x)/D elements;
  /// ints: axes reduce
  ReduceScatterAccumulate = 83,
  /// in(chunk) out(whole): ZeRO-3's parameter gather: `chunk` is a
  /// parameter buffer holding one of D equal chunks of the flattened whole
  /// (D = the group size; its layout's chunkAxes are `axes`), `whole` a
  /// separate buffer of D * numel(chunk) elements that receives the group's
  /// chunks in group-rank order (the chunk stays where it is);
  /// ints: axes
  GatherParameter = 84,

  // Megatron-LM's vocabulary-parallel ops: a rank of the group of `axes`
  // (index i of n) holds rows [i*R, (i+1)*R) of the whole vocabulary of
  // R*n tokens; they communicate inside, per token.
  /// in(table [R,H], ids [...]) out(y [..., H]): the rows of ids in this
  /// rank's part, zeros for the others; ints: axes
  VocabParallelEmbedding = 90,
  /// in(dy [..., H], ids) out(dtable [R,H]): scatter-adds the rows of ids
  /// in this rank's part; ints: axes accumulate
  VocabParallelEmbeddingGrad = 91,
  /// in(logits [..., R], targets i32) out(loss scalar): the mean
  /// cross-entropy over the whole vocabulary, with three all-reduces of one
  /// f64 per token (max, sum of exponentials, target logit); ints: axes
  VocabParallelCrossEntropy = 92,
  /// in(logits, targets, dloss scalar) out(dlogits): this rank's columns of
  /// the gradient; all-reduces the max and the sum again; ints: axes
  VocabParallelCrossEntropyGrad = 93,
};

/// Learning-rate schedules (DeepSpeed's WarmupLR, WarmupDecayLR,
/// WarmupCosineLR): `LearningRate` ints[0]. With i = step - 1 (DeepSpeed's
/// last_batch_iteration at the step's update), W = max(2, warmup) when
/// warmup > 0 (no warmup when 0), T = total:
///
///   - warmup, i < W: warmupStart + (base - warmupStart) * g with
///     g = log(i+1)/log(W) when warmupLog (DeepSpeed's default), else i/W;
///   - WarmupConstant: base after the warmup;
///   - WarmupLinearDecay: decayEnd + (base - decayEnd) * g with
///     g = max(0, (T-i) / max(1, T-W));
///   - WarmupCosineDecay: decayEnd + (base - decayEnd) * (1 + cos(pi r))/2
///     with r = min(1, (i-W+1)/(T-W)) (clamped: DeepSpeed's rises again
///     past T).
///
/// WarmupDecayLR decays to its warmup_min_lr: set decayEnd = warmupStart.
/// WarmupCosineLR's ratios become warmupStart = warmup_min_ratio * base and
/// decayEnd = cos_min_ratio * base.
enum class LrScheduleKind : uint32_t {
  Constant = 0,
  WarmupConstant = 1,
  WarmupLinearDecay = 2,
  WarmupCosineDecay = 3,
};

/// The learning rate of a LearningRate instruction at 1-based `step`.
double scheduledLearningRate(LrScheduleKind kind, int64_t warmup, int64_t total,
                             bool warmupLog, double base, double warmupStart,
                             double decayEnd, int64_t step);

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

/// One pipeline stage (Plan::stages[k] runs on the ranks whose coordinate
/// on the mesh axis "pp" is k). Its programs are pure compute; the
/// executor's schedule moves the boundary buffers between neighbouring
/// stages with point-to-point messages over the pp group. Buffer ids are
/// -1 where a stage has no such buffer.
struct PipelineStage {
  /// Programs: the forward (input -> output; the last stage's computes the
  /// evaluation loss), the backward, which recomputes the forward from the
  /// stage input (input, outputGrad or targets -> inputGrad, loss), and the
  /// optimizer of the stage's parameters.
  std::string forward, forwardBackward, optimizer;
  /// The stage input: the tokens buffer on stage 0, else the activation
  /// received from stage k-1 (read by both forward and forwardBackward).
  int64_t input = -1;
  /// The forward's output activation, sent to stage k+1 (not on the last).
  int64_t output = -1;
  /// The gradient of `output`, received from stage k+1 (not on the last).
  int64_t outputGrad = -1;
  /// The gradient of `input`, sent to stage k-1 (not on stage 0).
  int64_t inputGrad = -1;
  /// The last stage's loss (forwardBackward's), the optimizer's gradient
  /// norm and learning rate.
  int64_t loss = -1, gradNorm = -1, learningRate = -1;
};

/// The order of a pipelined step's forwards and backwards (see
/// Executor::trainStep), shared with the compiler.
using PipelineSchedule = ::dsc::PipelineScheduleKind;

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
  /// Micro-batches per optimizer step (gradient accumulation); dsc-run's
  /// --microbatches overrides it.
  int64_t microBatches = 1;
  std::vector<Arena> arenas;
  std::vector<Buffer> buffers;
  std::vector<Program> programs;
  PlanSummary summary;
  // Well-known buffers (index into buffers).
  uint32_t tokens = 0, targets = 0, loss = 0;
  int64_t gradNorm = -1, learningRate = -1; // -1 when absent
  /// The Constant scalar holding 1/microBatches, the backward's seed
  /// (CrossEntropyGrad's dloss), or -1. The executor's trainStep writes
  /// 1/M for the M micro-batches it runs, so the accumulated gradients are
  /// the mean over micro-batches; without it a plan runs only with its own
  /// microBatches.
  int64_t lossScale = -1;

  /// The device mesh the plan's collectives run over, outermost axis first;
  /// empty for a one-rank plan. World ranks are laid out row-major with the
  /// last axis innermost (Megatron's order: tp innermost), so the rank with
  /// coordinates (c0, c1, ...) is sum(c_i * prod(size_j, j > i)). A rank's
  /// coordinate along an axis named "dp" selects its data: of each step's
  /// dp * microBatches micro-batches, data-parallel rank d trains on
  /// [d * microBatches, (d + 1) * microBatches), so one rank with
  /// dp * microBatches micro-batches sees the same samples.
  struct MeshAxis {
    std::string name;
    int64_t size = 1;
  };
  std::vector<MeshAxis> mesh;

  /// Pipeline stages over the mesh axis "pp", one per coordinate; empty for
  /// a plan that is not pipelined (every rank runs "forward_backward" and
  /// "optimizer").
  std::vector<PipelineStage> stages;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;

  /// The program called `name`, or null.
  const Program *findProgram(const std::string &name) const;
  /// The buffer called `name`, or -1.
  int64_t findBuffer(const std::string &name) const;
};

//===----------------------------------------------------------------------===//
// Names, sizes and the opcode table
//===----------------------------------------------------------------------===//

/// What an opcode takes, as data: validatePlan checks counts against it and
/// describeOpcode prints it. numInputs/numOutputs of -1 mean "one or more";
/// numInts of -1 means "one per dim" (Transpose, Slice, SliceGrad).
struct OpcodeInfo {
  Opcode opcode;
  const char *name;    // "Matmul"
  const char *inputs;  // "a, b"
  const char *outputs; // "c"
  int numInputs, numOutputs;
  const char *ints;   // space-separated names, "" when none
  const char *floats; // space-separated names, "" when none
  int numInts, numFloats;
};

/// The table entry of a raw opcode value, or null for an unknown one.
const OpcodeInfo *lookupOpcode(uint32_t raw);
/// The whole table, in opcode order.
const std::vector<OpcodeInfo> &opcodeTable();
/// "Matmul", or "opcode 99" for an unknown value.
std::string opcodeName(Opcode op);
/// The executor's collectives (AllReduce, AllGather, ReduceScatter,
/// ReduceScatterAccumulate, GatherParameter), over the group of ints[0].
bool isCollective(Opcode op);
/// The vocabulary-parallel ops, which call the group of ints[0] from inside
/// their kernel.
bool isVocabParallel(Opcode op);
/// One line: "Matmul: in(a, b) out(c) ints(batch m n k ...)"; the ints and
/// floats parts only when the opcode has them.
std::string describeOpcode(Opcode op);

/// "f32", ...; inline so that libraries below Core (the communicators)
/// name dtypes the same way without linking it.
inline const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::I32:
    return "i32";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  }
  return "unknown dtype";
}
/// Bytes per element (0 for an unknown value).
inline uint64_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F64:
    return 8;
  case DType::BF16:
  case DType::F16:
    return 2;
  }
  return 0;
}
const char *roleName(BufferRole r); // "parameter", ...
const char *tierName(Tier t);       // "device", ...
/// Product of the dims (1 for a scalar); -1 on a negative dim or overflow.
int64_t numElements(const std::vector<int64_t> &shape);
/// "[4, 64, 256]".
std::string shapeString(const std::vector<int64_t> &shape);

/// The ranks a mesh spans: the product of its sizes, 1 for an empty mesh
/// (a one-rank plan); -1 when a size is below 1 or the product overflows.
int64_t meshRanks(const std::vector<Plan::MeshAxis> &mesh);
/// "dp=2 tp=4"; "" for an empty mesh.
std::string meshString(const std::vector<Plan::MeshAxis> &mesh);
/// The coordinates of world rank `rank` (row-major, last axis innermost).
std::vector<int64_t> meshCoordinates(const std::vector<Plan::MeshAxis> &mesh,
                                     int64_t rank);
/// The index of the axis called `name`, or -1.
int64_t findMeshAxis(const std::vector<Plan::MeshAxis> &mesh,
                     const std::string &name);

} // namespace dsc::rt

#endif // DSC_RUNTIME_PLAN_H
