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

#include "dsc/Runtime/DType.h"
#include "dsc/Runtime/Opcode.h"
#include "dsc/Runtime/ShapeMath.h"
#include "dsc/Support/PipelineScheduleKind.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt {

/// Bumped whenever the binary layout or an opcode's meaning changes; a plan
/// of another version is refused with both versions in the message.
constexpr uint32_t kPlanFormatVersion = 15;

/// The program a 1-bit optimizer runs after its warm-up, in place of
/// "optimizer" from Plan::compressionFromStep on (a pipeline stage's is
/// its prefix + this).
inline constexpr const char *kCompressedOptimizerProgram =
    "optimizer.compressed";

/// 0/1 Adam's step programs other than its variance step ("optimizer"), in
/// ZeroOneAdamStep order (onebit, local, sync).
inline constexpr const char *kZeroOneAdamPrograms[3] = {
    "optimizer.onebit", "optimizer.local", "optimizer.sync"};

/// 0/1 Adam (optimizer=zero_one_adam, docs/onebit.md): DeepSpeed's policy,
/// from which each step's program follows (zeroOneAdamStageAt), and the
/// gradient norm and learning rate each of its three other programs
/// returns.
struct ZeroOneAdamPlan {
  bool enabled = false;
  int64_t varFreezeStep = 0, varUpdateScaler = 1;
  int64_t localStepScaler = 1, localStepClipper = 1;
  int64_t gradNorm[3] = {-1, -1, -1}, learningRate[3] = {-1, -1, -1};
  /// Rank 0's planned collective bytes of a step of each kind.
  uint64_t collectiveBytes[3] = {0, 0, 0};
};

enum class Tier : uint32_t { Device = 0, Host = 1, Nvme = 2 };

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
  OffloadCopy = 10,   // persistent copy in an offload tier (the update's
                      // master weights, the gradients moved there): filled
                      // by Transfer; not checkpointed (a master equals its
                      // parameter after every step, and the "initialize"
                      // program refills it after a load)
  Input = 11,         // an inference program's request data (token ids,
                      // positions, block tables, sampling settings),
                      // written by the generation driver before each run
  Output = 12,        // an inference program's sampled tokens, read by the
                      // driver after each run
  KvCache = 13,       // an attention layer's paged keys and values:
                      // persistent, never checkpointed
  CompressionError = 14, // a 1-bit optimizer's error feedback: persistent,
                         // zero-initialized, checkpointed with a row per
                         // rank; a checkpoint of another group size (or
                         // none) starts it from zeros, with a warning
};
/// The largest BufferRole value (the plan reader's and verifier's bound).
inline constexpr BufferRole kLastBufferRole = BufferRole::CompressionError;

/// Whether a buffer of `role` lives only through the programs of one
/// training step (a temporary, a pipeline's boundary buffer, the ids and
/// the loss): under a curriculum, such a buffer used by one length's step
/// alone may share bytes with another length's (docs/curriculum.md).
bool livesWithinOneStep(BufferRole role);

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
  /// The whole tensor's shape (what checkpoints name it by); the buffer's
  /// own shape when it is whole.
  std::vector<int64_t> shape;
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

/// A pipelined plan plans each pipeline rank's memory apart: an arena
/// belongs to the ranks whose coordinate on the mesh axis "pp" is
/// `pipelineRank` (their stages' parameters, states, boundaries and
/// temporaries), and only those allocate it; -1 (every plan without
/// stages, and what several pipeline ranks share) is every rank's.
struct Arena {
  Tier tier = Tier::Device;
  uint64_t bytes = 0;
  int64_t pipelineRank = -1;
};

/// Learning-rate schedules (DeepSpeed's WarmupLR, WarmupDecayLR,
/// WarmupCosineLR): LearningRate's `kind`. With i = max(0, step - 2)
/// (DeepSpeed's last_batch_iteration at the step's update: its engine
/// builds the scheduler at -1, which sets step 1's rate, and steps it after
/// each optimizer step), W = max(2, warmup) when warmup > 0 (no warmup when
/// 0), T = total; step 1 of a WarmupCosineDecay with a warmup is at 0 (what
/// WarmupCosineLR sets at -1):
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
///
/// The Annealing* kinds are GPT-NeoX's AnnealingLR (its lr_decay_style),
/// with n = step - 1 (its num_iters at the step's update), W = warmup,
/// T = total, min = decayEnd (its min_lr): base * max(1, n) / W while
/// W > 0 and n <= W; then with m = n - W, E = T - W: base (constant),
/// base * (E - m) / E (linear), min + (base - min) * (1 + cos(pi m/E)) / 2
/// (cosine), base * exp(-0.693 m / E) (exponential), never below min
/// (the warmup is not lifted to min: GPT-NeoX returns it first). Not
/// clamped past T, as in GPT-NeoX. warmupStart and warmupLog do not
/// apply.
enum class LrScheduleKind : uint32_t {
  Constant = 0,
  WarmupConstant = 1,
  WarmupLinearDecay = 2,
  WarmupCosineDecay = 3,
  AnnealingConstant = 4,
  AnnealingLinear = 5,
  AnnealingCosine = 6,
  AnnealingExponential = 7,
};

/// The learning rate of a LearningRate instruction at 1-based `step`.
double scheduledLearningRate(LrScheduleKind kind, int64_t warmup, int64_t total,
                             bool warmupLog, double base, double warmupStart,
                             double decayEnd, int64_t step);

/// DeepSpeed's LRRangeTest and OneCycle (CyclicLearningRate's `kind`: 0
/// and 1) at 1-based `step`, with b = step - 1 (both set minLr at
/// last_batch_iteration = -1 and step after each optimizer step):
///
///   - LRRangeTest: minLr (1 + rate i), i = b / firstSize (its step size),
///     floored when `staircase`;
///   - OneCycle: within the cycle (b - 1 < T = firstSize + secondSize)
///     minLr + (maxLr - minLr) s, where s rises 0 -> 1 over firstSize
///     steps and falls over secondSize (in firstStairs / secondStairs flat
///     stairs when > 0); after it minLr / (1 + rate (b - T) / decaySize),
///     or minLr when rate or decaySize is 0.
double cyclicLearningRate(int64_t kind, int64_t firstStairs,
                          int64_t secondStairs, bool staircase, double minLr,
                          double maxLr, double firstSize, double secondSize,
                          double decaySize, double rate, int64_t step);

/// DeepSpeed's OneCycle momentum (cycle_momentum: Adam's beta1) at 1-based
/// `step`, b = step - 1: minMom at step 1 (the scheduler sets cycle_min_mom
/// when it is built); then within the cycle (b - 1 < T) maxMom - (maxMom -
/// minMom) s, s the learning rate's cycle position (cyclicLearningRate's,
/// stairs included), so the momentum falls as the rate rises; after it
/// maxMom (1 + rate (b - T) / decaySize), or maxMom when rate or decaySize
/// is 0.
double cyclicMomentum(int64_t firstStairs, int64_t secondStairs, double minMom,
                      double maxMom, double firstSize, double secondSize,
                      double decaySize, double rate, int64_t step);

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
/// r on the mesh axis "pp" of size P is k mod P: k itself, unless the
/// schedule is interleaved and each rank holds stages r, r+P, r+2P, ...).
/// Its compute programs are pure compute; the step program of its rank,
/// the compiler's schedule, runs them per micro-batch and moves the
/// boundary buffers between neighbouring stages with point-to-point
/// messages over the pp group. Buffer ids are -1 where a stage has no such
/// buffer.
struct PipelineStage {
  /// Programs: the forward (input -> output and the residuals; the last
  /// stage's computes the evaluation loss), the backward (input, outputGrad
  /// and the residuals, or targets -> inputGrad, loss; without residuals
  /// it computes the forward again from the input), and on
  /// the stages k < P (one per rank; "" on the others) the optimizer of the
  /// rank's parameters and the step: the schedule, as the compiler wrote it
  /// (--dsc-pipeline-schedule), of PipelineForward, PipelineBackward,
  /// PipelineSend and PipelineRecv (and, zero-bubble,
  /// PipelineBackwardWeight) instructions, which the executor runs in
  /// order.
  std::string forward, forwardBackward, optimizer, step;
  /// A 1-bit optimizer's step after its warm-up on the stages k < P (run
  /// in place of `optimizer` from Plan::compressionFromStep on; "" on the
  /// others and without one), and its norm and learning rate.
  std::string compressedOptimizer;
  int64_t compressedGradNorm = -1, compressedLearningRate = -1;
  /// The stage input: the tokens buffer on stage 0, else the activation
  /// received from stage k-1 (read by both forward and forwardBackward).
  int64_t input = -1;
  /// The forward's output activation, sent to stage k+1 (not on the last).
  int64_t output = -1;
  /// The gradient of `output`, received from stage k+1 (not on the last).
  int64_t outputGrad = -1;
  /// The gradient of `input`, sent to stage k-1 (not on stage 0).
  int64_t inputGrad = -1;
  /// The last stage's loss (forwardBackward's), the rank's optimizer's
  /// gradient norm and learning rate.
  int64_t loss = -1, gradNorm = -1, learningRate = -1;
  /// A stage whose backward does not compute the forward again
  /// (--dsc-stage-backward): the forward's results after `output`, which
  /// are the backward's arguments after `outputGrad` (one buffer each:
  /// the forward writes them where the backward reads them). Empty on the
  /// last stage and without the split.
  std::vector<int64_t> residuals;
  /// Under a zero-bubble schedule (--dsc-split-weight-gradient): the
  /// weight-gradient part W of the backward, run by PipelineBackwardWeight
  /// apart from forwardBackward (then the activation-gradient part B), and
  /// the values B keeps for it: B's results after its own, which are W's
  /// arguments. "" and empty otherwise.
  std::string backwardWeight;
  std::vector<int64_t> weightStash;

  /// What a micro-batch keeps from one part of its work to a later one
  /// lives in planned slots, one per micro-batch in flight, instead of
  /// being copied aside: slot s of a buffer of a bank lies at the buffer's
  /// offset + s * stride of its arena. Slot 0 is the buffer itself; the
  /// bank's bytes [offset, offset + slots * stride) hold no other buffer.
  /// The step program's instructions name the slot each micro-batch uses
  /// (the compiler's choice, checked on load: no two micro-batches in
  /// flight share one).
  struct SlotBank {
    int64_t slots = 1;
    uint64_t offset = 0, stride = 0;
  };
  /// The input and the residuals: from the input's receive (stage 0: the
  /// forward, which loads the tokens) to the backward.
  SlotBank activationSlots;
  /// The output's gradient: from its receive to the backward (not on the
  /// last stage).
  SlotBank gradientSlots;
  /// The weight stash: from the backward to the weight-gradient part.
  SlotBank weightSlots;
  /// The buffers of the activation and gradient banks (the weight bank's
  /// are `weightStash`).
  std::vector<int64_t> activationBuffers() const;
  std::vector<int64_t> gradientBuffers() const;
  /// The programs a training step runs of this stage (its forward,
  /// backward, weight-gradient and step programs, those it has; not its
  /// optimizer).
  std::vector<std::string> stepPrograms() const;
};

/// Curriculum learning by sequence length (docs/curriculum.md): one of the
/// lengths the schedule trains at, with the training step program compiled
/// for it and the buffers that program reads and writes in place of the
/// plan's well-known ones. Every length shares the plan's parameters,
/// gradients, optimizer states and optimizer programs; the longest is the
/// plan's own (seqLength, "forward_backward", tokens, targets, loss,
/// gradientSeed, stages). A pipelined plan's shorter lengths have stages
/// of their own: each stage's forward, backward and step programs compiled
/// at the length, over its own boundary buffers and slot banks, sharing
/// the stage's parameters, gradients and optimizer.
struct CurriculumLength {
  int64_t seqLength = 0;
  /// The first 1-based optimizer step trained at this length; it lasts
  /// until the next entry's (the last, the plan's length, for good).
  int64_t fromStep = 1;
  /// Its training step program ("forward_backward" for the plan's length,
  /// "forward_backward.seq<L>" for another).
  std::string program;
  /// The rows of a micro-batch at this length: the plan's microBatchSize,
  /// or under seqlen_reshape the rows its samples are cut into
  /// (SeqlenReshape.h; every length of a plan cuts them one way).
  int64_t rows = 0;
  bool reshape = false;
  /// i32 [rows, seqLength] ids, the f32/f64 loss scalar and the backward's
  /// seed (a Constant, -1 when none) of `program`.
  uint32_t tokens = 0, targets = 0, loss = 0;
  int64_t gradientSeed = -1;
  /// Model FLOPs of one micro-batch's forward and backward at this length,
  /// and rank 0's planned collective bytes of a step at it.
  uint64_t flopsPerMicroBatch = 0;
  uint64_t collectiveBytesPerStep = 0;
  /// A pipelined plan's stages at this length, as many as Plan::stages
  /// (their optimizer programs and scalars the plan's); empty for the
  /// plan's own length (Plan::stages) and without pipelines. `program` is
  /// then "" and `tokens` / `targets` / `loss` are the first and last
  /// stage's.
  std::vector<PipelineStage> stages;
};

/// The name of the training step program compiled for sequence length `L`
/// beside the plan's own.
std::string curriculumProgramName(int64_t seqLength);

/// The name of stage program `name` compiled for sequence length `L` beside
/// the plan's own: "<name>.seq<L>".
std::string curriculumStageProgramName(const std::string &name,
                                       int64_t seqLength);

/// The order of a pipelined step's forwards and backwards, which the
/// stages' step programs spell out (recorded for reports).
using PipelineSchedule = ::dsc::PipelineScheduleKind;

/// What the compiler predicted; dsc-run compares and reports.
struct PlanSummary {
  std::vector<uint64_t> peakBytesPerArena;
  uint64_t flopsPerMicroBatch = 0; // forward + backward, model FLOPs
  uint64_t collectiveBytesPerStep = 0;
  /// The same for a step that runs "optimizer.compressed" (1-bit Adam
  /// after its warm-up); 0 without one.
  uint64_t collectiveBytesPerCompressedStep = 0;
  /// A pipelined plan's idle fraction of the step, from the compiler's
  /// simulation of its schedule with the stages' costs (0 without stages).
  double pipelineBubble = 0;
};

struct Plan {
  uint32_t version = kPlanFormatVersion;
  // Model shape the data loader must honour. vocabSize is the tokenizer's:
  // under a padded vocabulary (GPT-NeoX's), fewer than the embedding's rows.
  int64_t vocabSize = 0, seqLength = 0, microBatchSize = 0;
  /// Micro-batches per optimizer step (gradient accumulation); dsc-run's
  /// --microbatches overrides it.
  int64_t microBatches = 1;
  std::vector<Arena> arenas;
  /// The directory of the nvme arenas' files (--dsc-offload's nvme-path;
  /// dsc-run --nvme-path overrides); empty when none is given.
  std::string nvmePath;
  /// The NVMe lane's request size and requests in flight (DeepSpeed's aio
  /// block_size and queue_depth; its defaults).
  uint64_t nvmeBlockBytes = 1 << 20;
  int64_t nvmeQueueDepth = 8;
  std::vector<Buffer> buffers;
  std::vector<Program> programs;
  PlanSummary summary;
  // Well-known buffers (index into buffers).
  uint32_t tokens = 0, targets = 0, loss = 0;
  int64_t gradNorm = -1, learningRate = -1; // -1 when absent
  /// The optimizer's scheduled beta1 (OneCycle's cycle_momentum), for the
  /// step log; -1 when its beta1 is constant.
  int64_t beta1 = -1;
  /// The Constant scalar holding 1/microBatches, the backward's seed
  /// (CrossEntropyGrad's dloss), or -1. The executor's trainStep writes
  /// 1/M for the M micro-batches it runs, so the accumulated gradients are
  /// the mean over micro-batches; without it a plan runs only with its own
  /// microBatches.
  int64_t gradientSeed = -1;
  /// A 1-bit optimizer (optimizer=onebit_adam, docs/onebit.md): from
  /// optimizer step compressionFromStep on (1-based; 0: never) the program
  /// "optimizer.compressed" runs in place of "optimizer" (its warm-up), and
  /// its gradient norm and learning rate are these scalars.
  int64_t compressionFromStep = 0;
  int64_t compressedGradNorm = -1, compressedLearningRate = -1;
  /// 0/1 Adam: its policy and the scalars of its programs (no pipelines).
  ZeroOneAdamPlan zeroOneAdam;
  /// Curriculum learning: the lengths in training order, from step 1 to
  /// the plan's own seqLength (last); empty without a curriculum.
  std::vector<CurriculumLength> curriculum;
  /// The entry step `step` (1-based) trains at; null without a curriculum.
  const CurriculumLength *curriculumAt(int64_t step) const;

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

  /// Pipeline stages over the mesh axis "pp", one per coordinate (v per
  /// coordinate, interleaved); empty for a plan that is not pipelined
  /// (every rank runs "forward_backward" and "optimizer").
  std::vector<PipelineStage> stages;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;

  /// The pipeline's ranks P: the size of the mesh axis "pp" (stage k runs
  /// on rank k mod P), 0 without stages or without that axis.
  int64_t pipelineRanks() const;

  /// The program called `name`, or null.
  const Program *findProgram(const std::string &name) const;
  /// The buffer called `name`, or -1.
  int64_t findBuffer(const std::string &name) const;
};

//===----------------------------------------------------------------------===//
// Names and sizes
//===----------------------------------------------------------------------===//

// DType, dtypeName and dtypeSize: DType.h.
const char *roleName(BufferRole r); // "parameter", ...
const char *tierName(Tier t);       // "device", ...

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
/// The data-parallel group of a mesh: its size and the coordinate of the
/// rank at `coords` in it. The axis "dp", or with expert parallelism the
/// axes "edp" and "ep" (ep innermost: DeepSpeed's E+D grouping, where the
/// ep ranks of an expert group are consecutive data-parallel ranks); size
/// 1 and index 0 without them.
struct DataParallelPlace {
  int64_t index = 0, size = 1;
};
DataParallelPlace dataParallelPlace(const std::vector<Plan::MeshAxis> &mesh,
                                    const std::vector<int64_t> &coords);

/// Whether `plan` is an inference plan (--dsc-compile-inference): it has
/// "prefill" and "decode" programs and no training program.
bool isInferencePlan(const Plan &plan);

/// Replaces every LearningRate instruction's base rate with `lr` (dsc-run
/// --lr), its warmup start and decay end scaling with it, and a
/// CyclicLearningRate's base (OneCycle's peak, LRRangeTest's start), its
/// other bound keeping its ratio. Throws Error for a rate that is not finite
/// and >= 0, or when the plan has neither instruction.
void rescaleLearningRates(Plan &plan, double lr);

} // namespace dsc::rt

#endif // DSC_RUNTIME_PLAN_H
