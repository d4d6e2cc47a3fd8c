//===- PlanVerifier.cpp - Semantic checks on a plan -----------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// validatePlan: everything the executor relies on, checked before it runs,
// so that no plan (hand-edited, corrupt, or from a buggy compiler) can make
// a kernel read or write outside its buffers. Each error names the buffer or
// the program, instruction index and instruction name at fault. This file
// checks the plan as a whole (buffers, arenas, mesh, stages, programs); each
// instruction is checked by InstructionChecker (InstructionSignature.cpp,
// InstructionShapes.cpp).
//
//===----------------------------------------------------------------------===//

#include "InstructionChecker.h"

#include "dsc/Runtime/ArenaHolders.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/PlanScheduleVerifier.h"
#include "dsc/Runtime/SeqlenReshape.h"
#include "dsc/Runtime/ShardLayout.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_set>

using namespace dsc::rt;
using namespace dsc::rt::verifier;

namespace {

void checkBuffer(const Plan &plan, size_t id) {
  const Buffer &b = plan.buffers[id];
  std::string what = "buffer " + std::to_string(id) + " '" + b.name + "'";
  auto fail = [&](const std::string &msg) { throw Error(what + ": " + msg); };
  if (uint32_t(b.dtype) > uint32_t(DType::F16))
    fail("unknown dtype " + std::to_string(uint32_t(b.dtype)));
  if (uint32_t(b.role) > uint32_t(kLastBufferRole))
    fail("unknown role " + std::to_string(uint32_t(b.role)));
  if (uint32_t(b.init.kind) > uint32_t(InitKind::Constant))
    fail("unknown init kind " + std::to_string(uint32_t(b.init.kind)));
  if (b.arena >= plan.arenas.size())
    fail("arena " + std::to_string(b.arena) + " does not exist (the plan has " +
         std::to_string(plan.arenas.size()) + " arenas)");
  const Arena &arena = plan.arenas[b.arena];
  if (b.offset > arena.bytes || b.bytes > arena.bytes - b.offset)
    fail("bytes [" + std::to_string(b.offset) + ", " +
         (b.bytes > std::numeric_limits<uint64_t>::max() - b.offset
              ? std::string("overflow")
              : std::to_string(b.offset + b.bytes)) +
         ") overflow arena " + std::to_string(b.arena) + " (" +
         tierName(arena.tier) + ", " + std::to_string(arena.bytes) + " bytes)");
  if (b.shape.size() > size_t(kMaxRank))
    fail("rank " + std::to_string(b.shape.size()) + " exceeds the maximum " +
         std::to_string(kMaxRank));
  int64_t n = numElements(b.shape);
  if (n < 0)
    fail("shape " + shapeString(b.shape) +
         " has a negative dim or too many elements");
  uint64_t elem = dtypeSize(b.dtype);
  if (uint64_t(n) > std::numeric_limits<uint64_t>::max() / elem ||
      uint64_t(n) * elem != b.bytes)
    fail("holds " + std::to_string(b.bytes) + " bytes but " +
         shapeString(b.shape) + " x " + dtypeName(b.dtype) + " needs " +
         std::to_string(uint64_t(n) * elem));
  if (b.offset % elem != 0)
    fail("offset " + std::to_string(b.offset) + " is not a multiple of its " +
         std::to_string(elem) + "-byte element");
  if (b.init.kind == InitKind::Normal &&
      (!isFloat(b.dtype) || !std::isfinite(b.init.std) || b.init.std < 0))
    fail("normal init needs a float buffer and a finite std >= 0");
  if (b.init.kind == InitKind::Constant && !std::isfinite(b.init.value))
    fail("constant init value is not finite");
  if (b.role == BufferRole::Constant && b.init.kind == InitKind::None)
    fail("a constant buffer needs an initializer");
  if (!b.layout.isWhole()) {
    // A temporary has one when it is an offloaded ZeRO-3 chunk's device
    // copy, which a GatherParameter reads.
    if (b.role != BufferRole::Parameter && b.role != BufferRole::Gradient &&
        b.role != BufferRole::OptimizerState &&
        b.role != BufferRole::CompressionError &&
        b.role != BufferRole::OffloadCopy && b.role != BufferRole::Temporary)
      fail("a " + std::string(roleName(b.role)) +
           " buffer cannot have a shard layout");
    if (b.layout.view.size() > size_t(kMaxRank))
      fail("layout view rank " + std::to_string(b.layout.view.size()) +
           " exceeds the maximum " + std::to_string(kMaxRank));
    if (std::string fault = checkShardLayout(b.layout, n, plan.mesh);
        !fault.empty())
      fail(fault);
  }
}

/// ZeRO-Offload's delayed parameter update: one OverlapNextStep, in the
/// optimizer program; what follows it runs beside the next step's forward
/// and backward, so it may only update host-tier state in place (no
/// collective, no transfer, no temporary the next step's program reuses,
/// nothing written on the device).
void checkOverlapped(const Plan &plan, const Program &prog, size_t i,
                     const OpcodeInfo *info, bool &overlapped) {
  const Instruction &inst = prog.instructions[i];
  auto fail = [&](const std::string &why) {
    throw Error("program '" + prog.name + "' instruction " + std::to_string(i) +
                " (" + info->name + "): " + why);
  };
  if (inst.opcode == Opcode::OverlapNextStep) {
    if (prog.name != "optimizer")
      fail("only the optimizer program's update overlaps the next step");
    if (overlapped)
      fail("a second OverlapNextStep");
    overlapped = true;
    return;
  }
  if (!overlapped)
    return;
  if (info->has(kCollective) || info->has(kGroupKernel) ||
      info->has(kPipelineStep) || inst.opcode == Opcode::Transfer)
    fail("runs beside the next step's forward and backward (after "
         "OverlapNextStep), where only updates of host-tier state may");
  for (const std::vector<uint32_t> *ids : {&inst.inputs, &inst.outputs})
    for (uint32_t id : *ids) {
      const Buffer &b = plan.buffers[id];
      if (b.role == BufferRole::Temporary)
        fail("uses temporary '" + b.name +
             "' after OverlapNextStep, whose bytes the next step reuses");
      if (ids == &inst.outputs && plan.arenas[b.arena].tier == Tier::Device)
        fail("writes '" + b.name +
             "' of the device tier after OverlapNextStep, beside the next "
             "step's forward and backward");
    }
}

/// Under a curriculum, the length whose step alone uses each buffer (its
/// index in Plan::curriculum), else -1: a buffer another program uses too
/// (the optimizer's, the evaluation's, another length's) or none. All -1
/// without a curriculum.
std::vector<int64_t> curriculumScopes(const Plan &plan) {
  constexpr int64_t kUnused = -2;
  std::vector<int64_t> scope(plan.buffers.size(),
                             plan.curriculum.empty() ? -1 : kUnused);
  if (plan.curriculum.empty())
    return scope;
  std::map<std::string, int64_t> lengthOfProgram;
  for (size_t k = 0; k < plan.curriculum.size(); ++k) {
    const CurriculumLength &c = plan.curriculum[k];
    if (plan.stages.empty())
      lengthOfProgram[c.program] = int64_t(k);
    for (const PipelineStage &st : c.stages.empty() ? plan.stages : c.stages)
      for (const std::string &name : st.stepPrograms())
        lengthOfProgram[name] = int64_t(k);
  }
  auto mark = [&](uint32_t id, int64_t k) {
    if (id >= scope.size())
      return; // checkBuffer and the instruction checks name it
    int64_t &s = scope[id];
    s = s == kUnused || s == k ? k : -1;
  };
  for (const Program &prog : plan.programs) {
    auto it = lengthOfProgram.find(prog.name);
    const int64_t k = it == lengthOfProgram.end() ? -1 : it->second;
    for (const Instruction &inst : prog.instructions)
      for (const std::vector<uint32_t> *ids : {&inst.inputs, &inst.outputs})
        for (uint32_t id : *ids)
          mark(id, k);
  }
  for (int64_t &s : scope)
    if (s == kUnused)
      s = -1;
  return scope;
}

/// Whether buffer `id` lives only through the step of one curriculum
/// length (whose index `scope` holds): it may share bytes with what
/// another length's step or a program outside every step uses.
bool stepScoped(const Plan &plan, const std::vector<int64_t> &scope,
                uint32_t id) {
  return scope[id] >= 0 && livesWithinOneStep(plan.buffers[id].role);
}

/// Refuses any overlap, among the buffers `ids`, of one for which
/// `persistent` holds with another buffer.
template <typename IsPersistent>
void checkOverlapAmong(const Plan &plan, std::vector<uint32_t> order,
                       IsPersistent persistent, const std::string &rule) {
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Buffer &x = plan.buffers[a], &y = plan.buffers[b];
    return x.arena != y.arena ? x.arena < y.arena : x.offset < y.offset;
  });
  // Per arena: the buffer reaching furthest so far, of any role and of a
  // persistent role. A later buffer overlaps an earlier one iff it starts
  // before the furthest end.
  int64_t anyOwner = -1, persistentOwner = -1;
  uint32_t arena = UINT32_MAX;
  auto end = [&](int64_t id) {
    return plan.buffers[id].offset + plan.buffers[id].bytes;
  };
  for (uint32_t id : order) {
    const Buffer &b = plan.buffers[id];
    if (b.arena != arena) {
      arena = b.arena;
      anyOwner = persistentOwner = -1;
    }
    const bool kept = persistent(id);
    int64_t clash = -1;
    if (kept && anyOwner >= 0 && b.offset < end(anyOwner))
      clash = anyOwner;
    else if (persistentOwner >= 0 && b.offset < end(persistentOwner))
      clash = persistentOwner;
    if (clash >= 0) {
      const Buffer &c = plan.buffers[clash];
      throw Error("buffer " + std::to_string(id) + " '" + b.name + "' (" +
                  roleName(b.role) + ", bytes [" + std::to_string(b.offset) +
                  ", " + std::to_string(end(id)) + ")) overlaps buffer " +
                  std::to_string(clash) + " '" + c.name + "' (" +
                  roleName(c.role) + ", bytes [" + std::to_string(c.offset) +
                  ", " + std::to_string(end(clash)) + ")) in arena " +
                  std::to_string(arena) + "; " + rule);
    }
    if (anyOwner < 0 || end(id) > end(anyOwner))
      anyOwner = id;
    if (kept && (persistentOwner < 0 || end(id) > end(persistentOwner)))
      persistentOwner = id;
  }
}

/// Refuses any overlap of a persistent buffer (every role but Temporary)
/// with another buffer: a temporary reusing those bytes would corrupt
/// parameters, gradients, optimizer state or the batch. Under a curriculum
/// a buffer that lives only through one length's step is persistent to
/// that step alone: it may share bytes with what other lengths' steps and
/// the programs outside every step use, never with its own step's.
void checkPersistentOverlap(const Plan &plan,
                            const std::vector<int64_t> &scope) {
  std::vector<uint32_t> sized;
  for (uint32_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].bytes)
      sized.push_back(i);
  checkOverlapAmong(
      plan, sized,
      [&](uint32_t id) {
        return plan.buffers[id].role != BufferRole::Temporary &&
               !stepScoped(plan, scope, id);
      },
      "persistent buffers may share no bytes");
  for (size_t k = 0; k < plan.curriculum.size(); ++k) {
    std::vector<uint32_t> own;
    for (uint32_t id : sized)
      if (scope[id] == int64_t(k) && stepScoped(plan, scope, id))
        own.push_back(id);
    checkOverlapAmong(
        plan, own,
        [&](uint32_t id) {
          return plan.buffers[id].role != BufferRole::Temporary;
        },
        "within curriculum length " + std::to_string(k) +
            "'s step, what lives through it may share no bytes");
  }
}

void checkWellKnown(const Plan &plan) {
  auto check = [&](int64_t id, const std::string &field, BufferRole role) {
    if (id < 0 || uint64_t(id) >= plan.buffers.size())
      throw Error("well-known " + field + " buffer " + std::to_string(id) +
                  " is out of range (" + std::to_string(plan.buffers.size()) +
                  " buffers)");
    const Buffer &b = plan.buffers[id];
    std::string what =
        "well-known " + field + " " + describeBuffer(plan, uint32_t(id));
    if (b.role != role)
      throw Error(what + " has role " + roleName(b.role) + ", expected " +
                  roleName(role));
    if (role == BufferRole::Tokens || role == BufferRole::Targets) {
      std::vector<int64_t> want = {plan.microBatchSize, plan.seqLength};
      if (b.dtype != DType::I32 || b.shape != want)
        throw Error(what + " must be i32 " + shapeString(want) +
                    " [microBatchSize, seqLength]");
    } else if (!isFloat(b.dtype) || numElements(b.shape) != 1) {
      throw Error(what + " must be a float scalar");
    }
  };
  // An inference plan has no tokens, targets or loss of a training step:
  // its programs' inputs and outputs are named buffers (Input, Output).
  if (!isInferencePlan(plan)) {
    check(plan.tokens, "tokens", BufferRole::Tokens);
    check(plan.targets, "targets", BufferRole::Targets);
    check(plan.loss, "loss", BufferRole::Loss);
  }
  if (plan.gradNorm != -1)
    check(plan.gradNorm, "gradNorm", BufferRole::Scalar);
  if (plan.learningRate != -1)
    check(plan.learningRate, "learningRate", BufferRole::Scalar);
  if (plan.gradientSeed != -1)
    check(plan.gradientSeed, "gradientSeed", BufferRole::Constant);
  if (plan.beta1 != -1)
    check(plan.beta1, "beta1", BufferRole::Scalar);
  // A 1-bit optimizer's compressed step: the program, from a step >= 1,
  // with scalars of its own; none of it without one.
  // (A pipeline's are its ranks' first stages', checked with the stages.)
  bool compressed = plan.findProgram(kCompressedOptimizerProgram) != nullptr;
  for (const PipelineStage &st : plan.stages)
    compressed = compressed || !st.compressedOptimizer.empty();
  if (plan.compressionFromStep < 0 ||
      compressed != (plan.compressionFromStep > 0))
    throw Error("compressionFromStep " +
                std::to_string(plan.compressionFromStep) +
                (compressed ? " must be >= 1 for the plan's compressed "
                              "optimizer program"
                            : " must be 0: the plan has no compressed "
                              "optimizer program"));
  if (compressed) {
    if (!plan.stages.empty() && plan.findProgram(kCompressedOptimizerProgram))
      throw Error("a pipelined plan's compressed optimizers are its ranks' "
                  "(PipelineStage::compressedOptimizer), not one "
                  "\"optimizer.compressed\" program");
    check(plan.compressedGradNorm, "compressedGradNorm", BufferRole::Scalar);
    check(plan.compressedLearningRate, "compressedLearningRate",
          BufferRole::Scalar);
  } else if (plan.compressedGradNorm != -1 ||
             plan.compressedLearningRate != -1) {
    throw Error("compressedGradNorm and compressedLearningRate must be -1 "
                "without an \"optimizer.compressed\" program");
  }
  // 0/1 Adam: its three other programs with scalars of their own, a policy
  // in DeepSpeed's ranges, no pipelines and no 1-bit phase beside it; none
  // of it without.
  const ZeroOneAdamPlan &zo = plan.zeroOneAdam;
  for (int k = 0; k < 3; ++k) {
    const std::string program = kZeroOneAdamPrograms[k];
    const bool has = plan.findProgram(program) != nullptr;
    if (has != zo.enabled)
      throw Error(zo.enabled
                      ? "the plan runs 0/1 Adam but has no \"" + program +
                            "\" program"
                      : "program \"" + program +
                            "\" is 0/1 Adam's, but the plan does not run it");
    if (zo.enabled) {
      check(zo.gradNorm[k], "zeroOneAdam gradNorm of " + program,
            BufferRole::Scalar);
      check(zo.learningRate[k], "zeroOneAdam learningRate of " + program,
            BufferRole::Scalar);
    } else if (zo.gradNorm[k] != -1 || zo.learningRate[k] != -1 ||
               zo.collectiveBytes[k] != 0) {
      throw Error("0/1 Adam's scalars of \"" + program +
                  "\" must be -1 (and its bytes 0) without 0/1 Adam");
    }
  }
  if (zo.enabled) {
    if (!plan.stages.empty() || plan.compressionFromStep > 0)
      throw Error("0/1 Adam runs without pipelines and without a 1-bit "
                  "optimizer's compressed phase");
    if (zo.varFreezeStep < 0 || zo.varUpdateScaler < 1 ||
        zo.localStepScaler < 1 || zo.localStepClipper < 1)
      throw Error("0/1 Adam's policy is out of range: var_freeze_step " +
                  std::to_string(zo.varFreezeStep) + " (>= 0), " +
                  "var_update_scaler " + std::to_string(zo.varUpdateScaler) +
                  ", local_step_scaler " + std::to_string(zo.localStepScaler) +
                  ", local_step_clipper " +
                  std::to_string(zo.localStepClipper) + " (>= 1 each)");
  } else if (zo.varFreezeStep != 0 || zo.varUpdateScaler != 1 ||
             zo.localStepScaler != 1 || zo.localStepClipper != 1) {
    throw Error("0/1 Adam's policy is set, but the plan does not run it");
  }
}

/// Curriculum learning: its lengths rise from step 1 to the plan's own,
/// each with a training step program (a pipelined plan's: stages) and i32
/// [microBatchSize, L] ids of its own (the last, the plan's well-known
/// ones and stages). Each shorter length's stages are checked as the
/// plan's are (checkStages, verifyPlanSchedule) by validatePlan.
void checkCurriculum(const Plan &plan) {
  if (plan.curriculum.empty())
    return;
  const bool pipelined = !plan.stages.empty();
  auto buffer = [&](int64_t id, const std::string &what,
                    BufferRole role) -> const Buffer & {
    if (id < 0 || uint64_t(id) >= plan.buffers.size())
      throw Error(what + " buffer " + std::to_string(id) +
                  " is out of range (" + std::to_string(plan.buffers.size()) +
                  " buffers)");
    const Buffer &b = plan.buffers[size_t(id)];
    if (b.role != role)
      throw Error(what + " " + describeBuffer(plan, uint32_t(id)) +
                  " has role " + roleName(b.role) + ", expected " +
                  roleName(role));
    return b;
  };
  for (size_t k = 0; k < plan.curriculum.size(); ++k) {
    const CurriculumLength &c = plan.curriculum[k];
    const bool last = k + 1 == plan.curriculum.size();
    const std::string what = "curriculum length " + std::to_string(k) +
                             " (sequence " + std::to_string(c.seqLength) + ")";
    if (c.seqLength < 1 || c.seqLength > plan.seqLength ||
        (k > 0 && c.seqLength <= plan.curriculum[k - 1].seqLength))
      throw Error(what + ": lengths must rise, from 1 up to the plan's "
                         "sequence length " +
                  std::to_string(plan.seqLength));
    if ((k == 0 && c.fromStep != 1) ||
        (k > 0 && c.fromStep <= plan.curriculum[k - 1].fromStep))
      throw Error(what + ": first step " + std::to_string(c.fromStep) +
                  "; the first length starts at step 1, each later one after "
                  "the one before");
    const std::string program = pipelined ? ""
                                : last    ? "forward_backward"
                                          : curriculumProgramName(c.seqLength);
    if (c.program != program || (!pipelined && !plan.findProgram(c.program)))
      throw Error(what + ": its program must be \"" + program + "\"" +
                  (pipelined ? " (a pipelined plan's lengths train in their "
                               "stages)"
                             : ", a program of the plan") +
                  " (got \"" + c.program + "\")");
    const size_t stages = pipelined && !last ? plan.stages.size() : 0;
    if (c.stages.size() != stages)
      throw Error(what + ": has " + std::to_string(c.stages.size()) +
                  " pipeline stages, expected " + std::to_string(stages) +
                  (last ? " (the last length trains in the plan's own)"
                        : " (the plan's count)"));
    // Every length steps the plan's optimizers (the executor runs the
    // plan's stage's; the schedule proof must see the same).
    for (size_t k = 0; k < c.stages.size(); ++k) {
      const PipelineStage &mine = c.stages[k], &own = plan.stages[k];
      if (mine.optimizer != own.optimizer ||
          mine.compressedOptimizer != own.compressedOptimizer ||
          mine.gradNorm != own.gradNorm ||
          mine.learningRate != own.learningRate ||
          mine.compressedGradNorm != own.compressedGradNorm ||
          mine.compressedLearningRate != own.compressedLearningRate)
        throw Error(
            what + ": stage " + std::to_string(k) + " names optimizer '" +
            mine.optimizer +
            "' or its scalars other than the plan's stage (optimizer '" +
            own.optimizer + "'); every length steps the plan's");
    }
    if (last && (c.seqLength != plan.seqLength || c.tokens != plan.tokens ||
                 c.targets != plan.targets || c.loss != plan.loss ||
                 c.gradientSeed != plan.gradientSeed))
      throw Error(what + ": the last length must be the plan's own (sequence " +
                  std::to_string(plan.seqLength) +
                  ", its well-known tokens, targets, loss and gradient seed)");
    // The rows its samples are cut into (SeqlenReshape.h), one way for
    // every length.
    if (c.reshape != plan.curriculum[0].reshape)
      throw Error(what + ": cuts samples by " +
                  (c.reshape ? "seqlen_reshape" : "seqlen_truncate") +
                  ", the first length by the other; a plan cuts them one way");
    const int64_t rows = c.reshape
                             ? seqlenReshapeRows(plan.microBatchSize,
                                                 plan.seqLength, c.seqLength)
                             : plan.microBatchSize;
    if (c.rows != rows)
      throw Error(
          what + ": " + std::to_string(c.rows) + " rows a micro-batch; " +
          (c.reshape ? "seqlen_reshape cuts " : "truncation keeps ") +
          std::to_string(plan.microBatchSize) + " samples of " +
          std::to_string(plan.seqLength) + " into " + std::to_string(rows));
    const std::vector<int64_t> ids = {c.rows, c.seqLength};
    for (auto [id, role] : {std::pair{c.tokens, BufferRole::Tokens},
                            std::pair{c.targets, BufferRole::Targets}}) {
      const Buffer &b = buffer(id, what + " " + roleName(role), role);
      if (b.dtype != DType::I32 || b.shape != ids)
        throw Error(what + ": " + describeBuffer(plan, id) + " must be i32 " +
                    shapeString(ids) + " [rows, length]");
    }
    const Buffer &loss = buffer(c.loss, what + " loss", BufferRole::Loss);
    if (!isFloat(loss.dtype) || numElements(loss.shape) != 1)
      throw Error(what + ": its loss must be a float scalar");
    if (c.gradientSeed != -1)
      buffer(c.gradientSeed, what + " gradientSeed", BufferRole::Constant);
  }
}

/// Pipeline rank r's step program: only pipeline-step instructions, on
/// the rank's stages (r, r+P, ...); each message on the buffer its
/// direction moves (the output or the input's gradient out, the input or
/// the output's gradient in) to or from the rank of the neighbouring
/// stage; every micro-batch of the step's forward and backward once per
/// stage, each stage's in micro-batch order, a backward after its forward
/// (the executor keeps the stage inputs of the micro-batches in flight,
/// oldest first); and what a forward or backward reads received before it.
void checkStep(const Plan &plan, int64_t rank, const Program &step) {
  const int64_t stages = int64_t(plan.stages.size());
  const int64_t ranks = plan.pipelineRanks();
  std::vector<int64_t> forwards(size_t(stages), 0),
      backwards(size_t(stages), 0), weights(size_t(stages), 0);
  const bool zeroBubble = plan.schedule == PipelineSchedule::ZeroBubbleH1;
  // Messages received and not yet read: (stage, gradient, micro-batch).
  std::set<std::tuple<int64_t, bool, int64_t>> received;
  // The slots in use: (stage, bank, slot) -> micro-batch; and each
  // (stage, bank, micro-batch)'s slot.
  std::map<std::tuple<int64_t, int, int64_t>, int64_t> slotUser;
  std::map<std::tuple<int64_t, int, int64_t>, int64_t> slotOf;
  // The micro-batch whose output (inputGrad) the stage's latest forward
  // (backward) wrote, -1 before any: a send moves it before it is
  // overwritten.
  std::vector<int64_t> lastForward(size_t(stages), -1),
      lastBackward(size_t(stages), -1);
  for (size_t i = 0; i < step.instructions.size(); ++i) {
    const Instruction &inst = step.instructions[i];
    auto fail = [&](const std::string &why) {
      throw Error("pipeline rank " + std::to_string(rank) +
                  "'s step program '" + step.name + "' instruction " +
                  std::to_string(i) + " (" + opcodeName(inst.opcode) +
                  "): " + why);
    };
    const OpcodeInfo *info = lookupOpcode(uint32_t(inst.opcode));
    if (!info || !info->has(kPipelineStep))
      fail("a step program holds only pipeline-step instructions");
    int64_t stage = -1, mb = -1;
    switch (inst.opcode) {
    case Opcode::PipelineForward:
      stage = ops::PipelineForward::decode(inst).stage;
      mb = ops::PipelineForward::decode(inst).microBatch;
      break;
    case Opcode::PipelineBackward:
      stage = ops::PipelineBackward::decode(inst).stage;
      mb = ops::PipelineBackward::decode(inst).microBatch;
      break;
    case Opcode::PipelineBackwardWeight:
      stage = ops::PipelineBackwardWeight::decode(inst).stage;
      mb = ops::PipelineBackwardWeight::decode(inst).microBatch;
      break;
    case Opcode::PipelineSend:
      stage = ops::PipelineSend::decode(inst).stage;
      mb = ops::PipelineSend::decode(inst).microBatch;
      break;
    case Opcode::PipelineRecv:
      stage = ops::PipelineRecv::decode(inst).stage;
      mb = ops::PipelineRecv::decode(inst).microBatch;
      break;
    default:
      break;
    }
    if (stage < 0 || stage >= stages || stage % ranks != rank)
      fail("stage " + std::to_string(stage) + " is not one of rank " +
           std::to_string(rank) + "'s (" + std::to_string(stages) +
           " stages over " + std::to_string(ranks) + " ranks)");
    if (mb < 0 || mb >= plan.microBatches)
      fail("micro-batch " + std::to_string(mb) + " is outside the step's " +
           std::to_string(plan.microBatches));
    const PipelineStage &st = plan.stages[size_t(stage)];
    const std::string where = " of stage " + std::to_string(stage);
    const char *bankNames[] = {"activation", "gradient", "weight"};
    const PipelineStage::SlotBank *banks[] = {
        &st.activationSlots, &st.gradientSlots, &st.weightSlots};
    // Micro-batch mb starts using `slot` of bank `bank`: a slot of the
    // bank that no micro-batch in flight uses.
    auto takeSlot = [&](int bank, int64_t slot) {
      if (slot < 0 || slot >= banks[bank]->slots)
        fail(std::string("names ") + bankNames[bank] + " slot " +
             std::to_string(slot) + where + ", which has " +
             std::to_string(banks[bank]->slots));
      auto [it, inserted] = slotUser.try_emplace({stage, bank, slot}, mb);
      if (!inserted)
        fail("puts micro-batch " + std::to_string(mb) + " in " +
             bankNames[bank] + " slot " + std::to_string(slot) + where +
             ", which micro-batch " + std::to_string(it->second) +
             " still uses");
      slotOf[{stage, bank, mb}] = slot;
    };
    // A later instruction of micro-batch mb reads its slot: the one it
    // took; `release` when this is its last reader.
    auto useSlot = [&](int bank, int64_t slot, bool release) {
      auto it = slotOf.find({stage, bank, mb});
      if (it == slotOf.end() || it->second != slot)
        fail(std::string("reads ") + bankNames[bank] + " slot " +
             std::to_string(slot) + where + " for micro-batch " +
             std::to_string(mb) + ", which " +
             (it == slotOf.end() ? std::string("holds nothing of it")
                                 : "is in slot " + std::to_string(it->second)));
      if (release) {
        slotUser.erase({stage, bank, slot});
        slotOf.erase(it);
      }
    };
    auto inOrder = [&](int64_t &count) {
      if (mb != count)
        fail("runs micro-batch " + std::to_string(mb) + where +
             " where micro-batch " + std::to_string(count) +
             " is next (forwards, and backwards, run in micro-batch order)");
      ++count;
    };
    auto take = [&](bool gradient, const char *what) {
      if (!received.erase({stage, gradient, mb}))
        fail(std::string("reads the ") + what + " of micro-batch " +
             std::to_string(mb) + where + ", which no earlier receive brings");
    };
    switch (inst.opcode) {
    case Opcode::PipelineForward: {
      const int64_t slot = ops::PipelineForward::decode(inst).slot;
      inOrder(forwards[size_t(stage)]);
      if (stage > 0) {
        take(false, "activation");
        useSlot(0, slot, false);
      } else {
        takeSlot(0, slot);
      }
      lastForward[size_t(stage)] = mb;
      break;
    }
    case Opcode::PipelineBackward: {
      const ops::PipelineBackward b = ops::PipelineBackward::decode(inst);
      inOrder(backwards[size_t(stage)]);
      if (backwards[size_t(stage)] > forwards[size_t(stage)])
        fail("the backward of micro-batch " + std::to_string(mb) + where +
             " comes before its forward");
      useSlot(0, b.slot, true);
      if (stage + 1 < stages) {
        take(true, "output's gradient");
        useSlot(1, b.gradientSlot, true);
      } else if (b.gradientSlot != -1) {
        fail("names gradient slot " + std::to_string(b.gradientSlot) +
             " on the last stage, which receives no gradient");
      }
      if (zeroBubble)
        takeSlot(2, b.weightSlot);
      else if (b.weightSlot != -1)
        fail("names weight slot " + std::to_string(b.weightSlot) +
             " without a zero-bubble schedule");
      lastBackward[size_t(stage)] = mb;
      break;
    }
    case Opcode::PipelineBackwardWeight:
      if (!zeroBubble)
        fail("runs a weight-gradient part, which only the zb-h1 schedule "
             "has");
      inOrder(weights[size_t(stage)]);
      if (weights[size_t(stage)] > backwards[size_t(stage)])
        fail("the weight gradients of micro-batch " + std::to_string(mb) +
             where + " come before its backward");
      useSlot(2, ops::PipelineBackwardWeight::decode(inst).slot, true);
      break;
    case Opcode::PipelineSend:
    case Opcode::PipelineRecv: {
      const bool send = inst.opcode == Opcode::PipelineSend;
      const int64_t peer = send ? ops::PipelineSend::decode(inst).peer
                                : ops::PipelineRecv::decode(inst).peer;
      const int64_t buf = int64_t(send ? inst.inputs[0] : inst.outputs[0]);
      // Up the pipeline go activations, down go gradients.
      const int64_t upBuffer = send ? st.output : st.input;
      const int64_t downBuffer = send ? st.inputGrad : st.outputGrad;
      const int64_t up = send ? stage + 1 : stage - 1;
      const int64_t down = send ? stage - 1 : stage + 1;
      bool gradient;
      if (up >= 0 && up < stages && peer == up % ranks && buf == upBuffer)
        gradient = false;
      else if (down >= 0 && down < stages && peer == down % ranks &&
               buf == downBuffer)
        gradient = true;
      else
        fail(std::string(send ? "sends " : "receives ") +
             describeBuffer(plan, uint32_t(buf)) + (send ? " to" : " from") +
             " rank " + std::to_string(peer) + ", which is not a message" +
             where +
             " (the output or the input's gradient to the rank of a "
             "neighbouring stage, the input or the output's gradient from "
             "one)");
      if (!send && !received.insert({stage, gradient, mb}).second)
        fail("receives the " +
             std::string(gradient ? "output's gradient" : "activation") +
             " of micro-batch " + std::to_string(mb) + where + " twice");
      if (!send)
        takeSlot(gradient ? 1 : 0, ops::PipelineRecv::decode(inst).slot);
      // A send moves what the stage's latest forward (backward) wrote,
      // from where it wrote it: that of this micro-batch.
      if (send && (gradient ? lastBackward : lastForward)[size_t(stage)] != mb)
        fail("sends the " +
             std::string(gradient ? "input's gradient" : "output") +
             " of micro-batch " + std::to_string(mb) + where +
             " where the stage's latest " +
             (gradient ? "backward" : "forward") + " wrote micro-batch " +
             std::to_string(
                 (gradient ? lastBackward : lastForward)[size_t(stage)]) +
             "'s");
      break;
    }
    default:
      break;
    }
  }
  for (int64_t k = rank; k < stages; k += ranks)
    if (forwards[size_t(k)] != plan.microBatches ||
        backwards[size_t(k)] != plan.microBatches ||
        (zeroBubble && weights[size_t(k)] != plan.microBatches))
      throw Error("pipeline rank " + std::to_string(rank) +
                  "'s step program '" + step.name + "' runs " +
                  std::to_string(forwards[size_t(k)]) + " forwards and " +
                  std::to_string(backwards[size_t(k)]) + " backwards " +
                  (zeroBubble ? "(and " + std::to_string(weights[size_t(k)]) +
                                    " weight-gradient parts) "
                              : std::string()) +
                  "of stage " + std::to_string(k) +
                  ", not one each for the step's " +
                  std::to_string(plan.microBatches) + " micro-batches");
  if (!received.empty())
    throw Error("pipeline rank " + std::to_string(rank) + "'s step program '" +
                step.name + "' receives a message of stage " +
                std::to_string(std::get<0>(*received.begin())) +
                " that no forward or backward reads");
}

/// Stage k's banks of slots (PipelineStage::SlotBank): a bank with more
/// than one slot lies in one arena of the stage's rank, its buffers in its
/// first slot, and no other buffer shares the bytes of its slots — but
/// under a curriculum (the stages of curriculum length `length`), what
/// another length's step or a program outside every step uses may.
void checkSlotBanks(const Plan &plan, int64_t k,
                    const std::vector<int64_t> &scope, int64_t length) {
  auto elsewhere = [&](uint32_t id) {
    if (length < 0)
      return false;
    return stepScoped(plan, scope, id)
               ? scope[id] != length
               : scope[id] < 0 &&
                     plan.buffers[id].role == BufferRole::Temporary;
  };
  const PipelineStage &st = plan.stages[size_t(k)];
  const std::string where = "pipeline stage " + std::to_string(k);
  const std::vector<int64_t> activation = st.activationBuffers(),
                             gradient = st.gradientBuffers();
  for (auto [name, bank, ids] :
       {std::make_tuple("activation", &st.activationSlots, &activation),
        std::make_tuple("gradient", &st.gradientSlots, &gradient),
        std::make_tuple("weight", &st.weightSlots, &st.weightStash)}) {
    const std::string what = where + "'s " + name + " slots";
    if (bank->slots < 1 || bank->slots > (int64_t(1) << 20))
      throw Error(what + ": " + std::to_string(bank->slots) +
                  " slots; a bank has 1 to 2^20");
    if (bank->slots == 1 || ids->empty())
      continue; // slot 0 is the buffers themselves
    const uint32_t arena = plan.buffers[size_t((*ids)[0])].arena;
    const uint64_t arenaBytes = plan.arenas[arena].bytes;
    if (bank->stride == 0 || bank->offset > arenaBytes ||
        bank->stride > (arenaBytes - bank->offset) / uint64_t(bank->slots))
      throw Error(what + ": " + std::to_string(bank->slots) + " slots of " +
                  std::to_string(bank->stride) + " bytes at " +
                  std::to_string(bank->offset) + " do not fit arena " +
                  std::to_string(arena) + " (" + std::to_string(arenaBytes) +
                  " bytes)");
    const uint64_t end = bank->offset + bank->stride * uint64_t(bank->slots);
    std::set<uint32_t> members;
    for (int64_t id : *ids) {
      const Buffer &b = plan.buffers[size_t(id)];
      if (b.arena != arena || b.offset < bank->offset ||
          b.offset + b.bytes > bank->offset + bank->stride)
        throw Error(what + ": " + describeBuffer(plan, uint32_t(id)) +
                    " is not in the bank's first slot (arena " +
                    std::to_string(arena) + " bytes [" +
                    std::to_string(bank->offset) + ", " +
                    std::to_string(bank->offset + bank->stride) + "))");
      members.insert(uint32_t(id));
    }
    for (uint32_t id = 0; id < plan.buffers.size(); ++id) {
      const Buffer &b = plan.buffers[id];
      if (b.arena == arena && b.bytes && !members.count(id) && b.offset < end &&
          b.offset + b.bytes > bank->offset && !elsewhere(id))
        throw Error(what + ": " + describeBuffer(plan, id) +
                    " shares bytes with the bank's slots [" +
                    std::to_string(bank->offset) + ", " + std::to_string(end) +
                    ") of arena " + std::to_string(arena));
    }
  }
}

/// A pipelined plan's arenas belong to pipeline ranks (or all of them):
/// each stage's programs use only buffers of its rank's arenas and the
/// shared ones, and any other program's instruction only those of one
/// rank (it runs where they are).
void checkPipelineArenas(const Plan &plan) {
  const int64_t ranks = plan.pipelineRanks();
  for (size_t a = 0; a < plan.arenas.size(); ++a) {
    const int64_t r = plan.arenas[a].pipelineRank;
    if (r < -1 || r >= std::max<int64_t>(ranks, 0))
      throw Error("arena " + std::to_string(a) + " belongs to pipeline rank " +
                  std::to_string(r) + ", but the plan has " +
                  (ranks > 0 ? std::to_string(ranks) + " pipeline ranks"
                             : std::string("no pipeline stages")) +
                  " (-1: every rank's)");
  }
  if (ranks <= 0)
    return;
  const std::map<std::string, int64_t> rankOfProgram =
      pipelineRankOfPrograms(plan);
  for (const Program &prog : plan.programs) {
    auto it = rankOfProgram.find(prog.name);
    for (size_t i = 0; i < prog.instructions.size(); ++i) {
      const Instruction &inst = prog.instructions[i];
      int64_t rank = it == rankOfProgram.end() ? -1 : it->second;
      for (const std::vector<uint32_t> *ids : {&inst.inputs, &inst.outputs})
        for (uint32_t id : *ids) {
          const int64_t held = plan.arenas[plan.buffers[id].arena].pipelineRank;
          if (held < 0 || held == rank)
            continue;
          if (rank < 0 && it == rankOfProgram.end()) {
            rank = held; // another program's: the rank of its buffers
            continue;
          }
          throw Error("program '" + prog.name + "' instruction " +
                      std::to_string(i) + " (" + opcodeName(inst.opcode) +
                      ") uses " + describeBuffer(plan, id) +
                      " of pipeline rank " + std::to_string(held) +
                      "'s arena " + std::to_string(plan.buffers[id].arena) +
                      ", which " +
                      (it == rankOfProgram.end()
                           ? "is not the rank of its other buffers (" +
                                 std::to_string(rank) + ")"
                           : "pipeline rank " + std::to_string(rank) +
                                 ", which runs it, does not hold"));
        }
    }
  }
}

/// Pipeline stages: P or P*v of them over the mesh axis "pp" of size P,
/// their programs present (the optimizer and step on the first P, one per
/// rank), their boundary buffers of the roles the schedule fills, and each
/// message's two ends of one dtype and size. `length`: the index in
/// Plan::curriculum of the length these stages train (-1: no curriculum).
void checkStages(const Plan &plan, const std::vector<int64_t> &scope,
                 int64_t length) {
  if (plan.stages.empty())
    return;
  const int64_t ranks = plan.pipelineRanks();
  if (ranks < 1 || int64_t(plan.stages.size()) % ranks != 0)
    throw Error("the plan has " + std::to_string(plan.stages.size()) +
                " pipeline stages but its mesh (" + meshString(plan.mesh) +
                ") has no 'pp' axis whose size divides them");
  if (int64_t(plan.stages.size()) != ranks &&
      plan.schedule != PipelineSchedule::InterleavedOneFOneB)
    throw Error("the plan has " + std::to_string(plan.stages.size()) +
                " pipeline stages over a 'pp' axis of " +
                std::to_string(ranks) + " ranks, but its schedule " +
                pipelineScheduleName(plan.schedule) +
                " runs one stage per rank");
  const size_t last = plan.stages.size() - 1;
  for (size_t k = 0; k < plan.stages.size(); ++k) {
    const PipelineStage &st = plan.stages[k];
    const std::string where = "pipeline stage " + std::to_string(k);
    const bool ownsRank = int64_t(k) < ranks;
    for (const std::string *name : {&st.forward, &st.forwardBackward})
      if (!plan.findProgram(*name))
        throw Error(where + ": no program '" + *name + "'");
    // A zero-bubble schedule runs every stage's backward in two parts.
    const bool zeroBubble = plan.schedule == PipelineSchedule::ZeroBubbleH1;
    if (zeroBubble && !plan.findProgram(st.backwardWeight))
      throw Error(where + ": no weight-gradient program '" + st.backwardWeight +
                  "', which the " + pipelineScheduleName(plan.schedule) +
                  " schedule runs");
    if (!zeroBubble && (!st.backwardWeight.empty() || !st.weightStash.empty()))
      throw Error(where +
                  ": has a weight-gradient program, which only the "
                  "zb-h1 schedule runs, not " +
                  std::string(pipelineScheduleName(plan.schedule)));
    // A 1-bit optimizer's compressed step: on every rank, or on none.
    const bool compresses = plan.compressionFromStep > 0;
    if (ownsRank && compresses && !plan.findProgram(st.compressedOptimizer))
      throw Error(where + ": no compressed optimizer program '" +
                  st.compressedOptimizer + "' (the plan compresses from step " +
                  std::to_string(plan.compressionFromStep) + ")");
    if ((!ownsRank || !compresses) && !st.compressedOptimizer.empty())
      throw Error(where + ": names compressed optimizer program '" +
                  st.compressedOptimizer + "', but " +
                  (compresses ? "only the first stage of a rank has one"
                              : "the plan does not compress"));
    for (const std::string *name : {&st.optimizer, &st.step}) {
      if (ownsRank && !plan.findProgram(*name))
        throw Error(where + ": no program '" + *name + "'");
      if (!ownsRank && !name->empty())
        throw Error(where + ": names program '" + *name +
                    "', but only the first stage of a rank has an optimizer "
                    "and a step");
    }
    auto check = [&](int64_t id, const char *field, BufferRole role,
                     bool present) {
      if (!present) {
        if (id != -1)
          throw Error(where + ": has a " + field +
                      " buffer, which this stage cannot have");
        return;
      }
      if (id < 0 || uint64_t(id) >= plan.buffers.size())
        throw Error(where + ": " + field + " buffer " + std::to_string(id) +
                    " is out of range");
      if (plan.buffers[id].role != role)
        throw Error(where + ": " + field + " " +
                    describeBuffer(plan, uint32_t(id)) + " has role " +
                    roleName(plan.buffers[id].role) + ", expected " +
                    roleName(role));
    };
    check(st.input, "input", k == 0 ? BufferRole::Tokens : BufferRole::Boundary,
          true);
    check(st.output, "output", BufferRole::Boundary, k != last);
    check(st.outputGrad, "outputGrad", BufferRole::Boundary, k != last);
    check(st.inputGrad, "inputGrad", BufferRole::Boundary, k != 0);
    check(st.loss, "loss", BufferRole::Loss, k == last);
    check(st.gradNorm, "gradNorm", BufferRole::Scalar, true);
    check(st.learningRate, "learningRate", BufferRole::Scalar, true);
    check(st.compressedGradNorm, "compressedGradNorm", BufferRole::Scalar,
          compresses);
    check(st.compressedLearningRate, "compressedLearningRate",
          BufferRole::Scalar, compresses);
    // The residuals a split backward reads (none on the last stage, which
    // runs both together) and what B keeps for W: boundary buffers.
    if (k == last && !st.residuals.empty())
      throw Error(where + ": has " + std::to_string(st.residuals.size()) +
                  " residuals; the last stage keeps none");
    for (int64_t id : st.residuals)
      check(id, "residual", BufferRole::Boundary, true);
    for (int64_t id : st.weightStash)
      check(id, "weight stash", BufferRole::Boundary, true);
    checkSlotBanks(plan, int64_t(k), scope, length);
    if (ownsRank)
      checkStep(plan, int64_t(k), *plan.findProgram(st.step));
    if (k == last)
      continue;
    // The messages between k and k+1: both ends alike.
    const PipelineStage &next = plan.stages[k + 1];
    for (auto [a, b] : {std::make_pair(st.output, next.input),
                        std::make_pair(st.outputGrad, next.inputGrad),
                        std::make_pair(st.output, st.outputGrad)}) {
      // The next stage's ends are checked in its own turn, after this one.
      for (int64_t id : {a, b})
        if (id < 0 || uint64_t(id) >= plan.buffers.size())
          throw Error(where + ": the message to stage " +
                      std::to_string(k + 1) + " names buffer " +
                      std::to_string(id) + ", which is out of range");
      const Buffer &x = plan.buffers[a], &y = plan.buffers[b];
      if (x.dtype != y.dtype || x.shape != y.shape)
        throw Error(where + ": " + describeBuffer(plan, uint32_t(a)) + " and " +
                    describeBuffer(plan, uint32_t(b)) +
                    " are two ends of one message but differ in dtype or "
                    "shape");
    }
  }
}

} // namespace

void dsc::rt::validatePlan(const Plan &plan) {
  if (plan.version != kPlanFormatVersion)
    throw Error("plan format version " + std::to_string(plan.version) +
                " is not supported: this runtime reads version " +
                std::to_string(kPlanFormatVersion));
  // An inference plan's batch is the driver's (its programs' row counts).
  const bool inference = isInferencePlan(plan);
  if (plan.vocabSize < 1 || plan.microBatches < 1 ||
      (!inference && (plan.seqLength < 1 || plan.microBatchSize < 1)))
    throw Error("model shape must be positive: vocabSize " +
                std::to_string(plan.vocabSize) + ", seqLength " +
                std::to_string(plan.seqLength) + ", microBatchSize " +
                std::to_string(plan.microBatchSize) + ", microBatches " +
                std::to_string(plan.microBatches));
  std::set<std::string> axisNames;
  for (size_t i = 0; i < plan.mesh.size(); ++i) {
    const Plan::MeshAxis &axis = plan.mesh[i];
    std::string what = "mesh axis " + std::to_string(i);
    if (axis.name.empty())
      throw Error(what + " has an empty name");
    what += " '" + axis.name + "'";
    if (!axisNames.insert(axis.name).second)
      throw Error(what + " appears twice in the mesh");
    if (axis.size < 1)
      throw Error(what + " has size " + std::to_string(axis.size) +
                  "; sizes must be >= 1");
  }
  if (int64_t ranks = meshRanks(plan.mesh);
      ranks < 0 || ranks > std::numeric_limits<int>::max())
    throw Error("the mesh " + meshString(plan.mesh) +
                " spans more ranks than an int holds");
  if (plan.nvmeBlockBytes < 4096 || plan.nvmeBlockBytes > (uint64_t(1) << 30))
    throw Error("nvmeBlockBytes " + std::to_string(plan.nvmeBlockBytes) +
                " is outside [4096, 2^30]");
  if (plan.nvmeQueueDepth < 1 || plan.nvmeQueueDepth > 4096)
    throw Error("nvmeQueueDepth " + std::to_string(plan.nvmeQueueDepth) +
                " is outside [1, 4096]");
  for (size_t a = 0; a < plan.arenas.size(); ++a)
    if (uint32_t(plan.arenas[a].tier) > uint32_t(Tier::Nvme))
      throw Error("arena " + std::to_string(a) + " has unknown tier " +
                  std::to_string(uint32_t(plan.arenas[a].tier)));
  if (!plan.summary.peakBytesPerArena.empty() &&
      plan.summary.peakBytesPerArena.size() != plan.arenas.size())
    throw Error("summary lists " +
                std::to_string(plan.summary.peakBytesPerArena.size()) +
                " arena peaks for " + std::to_string(plan.arenas.size()) +
                " arenas");

  std::unordered_set<std::string> persistentNames;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    checkBuffer(plan, i);
    const Buffer &b = plan.buffers[i];
    if (b.role != BufferRole::Temporary &&
        !persistentNames.insert(b.name).second)
      throw Error("buffer " + std::to_string(i) + " '" + b.name + "' (" +
                  roleName(b.role) +
                  "): another persistent buffer has the same name");
  }
  // The curriculum's lengths first: the overlap rules read them.
  checkCurriculum(plan);
  const std::vector<int64_t> scope = curriculumScopes(plan);
  checkPersistentOverlap(plan, scope);
  checkWellKnown(plan);

  // Pipeline-step instructions belong to the stages' step programs only
  // (checkStep checks those): elsewhere nothing would run them in order.
  std::set<std::string> stepPrograms;
  for (const PipelineStage &st : plan.stages)
    if (!st.step.empty())
      stepPrograms.insert(st.step);
  for (const CurriculumLength &c : plan.curriculum)
    for (const PipelineStage &st : c.stages)
      if (!st.step.empty())
        stepPrograms.insert(st.step);
  std::set<std::string> programNames;
  for (const Program &prog : plan.programs) {
    if (!programNames.insert(prog.name).second)
      throw Error("program '" + prog.name + "' appears twice");
    // After an OverlapNextStep, what runs beside the next step's forward
    // and backward.
    bool overlapped = false;
    for (size_t i = 0; i < prog.instructions.size(); ++i) {
      const OpcodeInfo *info =
          lookupOpcode(uint32_t(prog.instructions[i].opcode));
      InstructionChecker(plan, prog, i, info).run();
      checkOverlapped(plan, prog, i, info, overlapped);
      // NVMe bytes are a file, not memory: only a transfer reaches them.
      const Instruction &inst = prog.instructions[i];
      if (inst.opcode != Opcode::Transfer)
        for (const std::vector<uint32_t> *ids : {&inst.inputs, &inst.outputs})
          for (uint32_t id : *ids)
            if (plan.arenas[plan.buffers[id].arena].tier == Tier::Nvme)
              throw Error("program '" + prog.name + "' instruction " +
                          std::to_string(i) + " (" + info->name +
                          ") uses buffer '" + plan.buffers[id].name +
                          "' of the nvme tier; only a Transfer moves NVMe "
                          "bytes");
      if (info->has(kPipelineStep) && !stepPrograms.count(prog.name))
        throw Error("program '" + prog.name + "' instruction " +
                    std::to_string(i) + " (" + info->name +
                    "): a pipeline-step instruction outside a pipeline "
                    "stage's step program");
    }
  }
  const int64_t last = int64_t(plan.curriculum.size()) - 1;
  checkStages(plan, scope, last);
  checkPipelineArenas(plan);
  // Each rank's step is well formed; now all ranks' together.
  verifyPlanSchedule(plan);
  // A shorter curriculum length's stages, as the plan's: the plan with
  // them in place of its own.
  for (int64_t k = 0; k < last; ++k) {
    const CurriculumLength &c = plan.curriculum[size_t(k)];
    if (c.stages.empty())
      continue;
    Plan at = plan;
    at.stages = c.stages;
    at.seqLength = c.seqLength;
    at.tokens = c.tokens;
    at.targets = c.targets;
    at.loss = c.loss;
    at.gradientSeed = c.gradientSeed;
    try {
      checkStages(at, scope, k);
      verifyPlanSchedule(at);
    } catch (const Error &e) {
      throw Error("curriculum length " + std::to_string(k) + " (sequence " +
                  std::to_string(c.seqLength) + "): " + e.what());
    }
  }
}
