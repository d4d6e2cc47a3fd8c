//===- PlanScheduleVerifierTest.cpp - edited plans refused on load -------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Inputs/gpt-tiny-dp2-pp2-{1f1b,interleaved}.plan are what the compiler
// makes of gpt-tiny on dp=2 x pp=2 (4 micro-batches; 1F1B, and interleaved
// 1F1B with 2 model chunks per rank); test/Integration/plan-schedule-edits
// .test keeps them current and makes the same edits of the compiled
// modules. Each edit a user could make of the plan file (two sends swapped,
// a receive dropped, a micro-batch index changed, two collectives reordered
// on one stage, a message's shape changed) is refused when the file is
// read, before any rank starts: by readPlan (what dsc-run's load runs) and by
// dsc-run itself, and verifyPlanSchedule alone names both ranks.
//
//===----------------------------------------------------------------------===//

#include "RunPlan.h"

#include "dsc/Runtime/Fnv1a.h"
#include "dsc/Runtime/Instructions.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/PlanScheduleVerifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <sstream>
#include <unistd.h>

using namespace dsc::rt;

namespace {

Plan loadPlan(const std::string &name) {
  return readPlanFile(std::string(DSC_TEST_INPUTS) + "/" + name);
}

Program &programOf(Plan &plan, const std::string &name) {
  auto it = std::find_if(plan.programs.begin(), plan.programs.end(),
                         [&](const Program &p) { return p.name == name; });
  if (it == plan.programs.end())
    throw Error("test: the plan has no program '" + name + "'");
  return *it;
}

/// The indices of `prog`'s instructions of `opcode`.
std::vector<size_t> indicesOf(const Program &prog, Opcode opcode) {
  std::vector<size_t> found;
  for (size_t i = 0; i < prog.instructions.size(); ++i)
    if (prog.instructions[i].opcode == opcode)
      found.push_back(i);
  return found;
}

/// What loading the plan as a file says: writePlan, then readPlan (the
/// reader dsc-run's load runs, which validates); "" when it is accepted.
std::string loadError(const Plan &plan) {
  const std::vector<uint8_t> bytes = writePlan(plan);
  try {
    readPlan(bytes.data(), bytes.size(), "plan file 'edited.plan'");
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

/// What verifyPlanSchedule alone says; "" when it agrees.
std::string scheduleError(const Plan &plan) {
  try {
    verifyPlanSchedule(plan);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

/// dsc-run on the plan written to a file: its exit code and stderr.
std::pair<int, std::string> runEdited(const Plan &plan) {
  const std::string path =
      ::testing::TempDir() + "/edited-" + std::to_string(::getpid()) + ".plan";
  writePlanFile(plan, path);
  std::ostringstream out, err;
  const int code = dsc::run::dscRunMain(
      {path, "--np", "4", "--steps", "1", "--seed", "1"}, out, err);
  std::remove(path.c_str());
  return {code, err.str()};
}

/// A committed plan and the name of its schedule.
struct PlanCase {
  const char *file;
  const char *schedule;
};

/// How ctest lists a case (gtest prints a struct's bytes otherwise).
void PrintTo(const PlanCase &c, std::ostream *os) { *os << c.file; }

class EditedPlan : public ::testing::TestWithParam<PlanCase> {
protected:
  void SetUp() override { plan = loadPlan(GetParam().file); }

  /// Checks that the edited plan is refused on load with `loadPart` in the
  /// message, by dsc-run too (exit 1, nothing run), and that the schedule
  /// verifier alone names both pipeline ranks with `schedulePart`.
  void expectRefused(const std::string &loadPart,
                     const std::string &schedulePart) {
    const std::string load = loadError(plan);
    EXPECT_FALSE(load.empty());
    EXPECT_NE(load.find(loadPart), std::string::npos) << load;
    const std::string schedule = scheduleError(plan);
    EXPECT_NE(schedule.find(schedulePart), std::string::npos) << schedule;
    EXPECT_NE(schedule.find("rank 0 (dp=0, pp=0)"), std::string::npos)
        << schedule;
    EXPECT_NE(schedule.find("rank 1 (dp=0, pp=1)"), std::string::npos)
        << schedule;
    const auto [code, err] = runEdited(plan);
    EXPECT_EQ(code, 1);
    EXPECT_EQ(err.rfind("dsc-run: error: ", 0), 0u) << err;
    EXPECT_NE(err.find(loadPart), std::string::npos) << err;
  }

  Plan plan;
};

TEST_P(EditedPlan, CompiledPlanAgrees) {
  EXPECT_EQ(plan.mesh.size(), 2u);
  EXPECT_EQ(plan.pipelineRanks(), 2);
  EXPECT_EQ(pipelineScheduleName(plan.schedule),
            std::string(GetParam().schedule));
  EXPECT_EQ(scheduleError(plan), "");
  EXPECT_EQ(loadError(plan), "");
}

TEST_P(EditedPlan, TwoSendsSwapped) {
  Program &step = programOf(plan, plan.stages[0].step);
  const std::vector<size_t> sends = indicesOf(step, Opcode::PipelineSend);
  ASSERT_GE(sends.size(), 2u);
  std::swap(step.instructions[sends[0]], step.instructions[sends[1]]);
  // Rank 0 alone already sends micro-batch 1's output before its forward
  // wrote it; all ranks together disagree on the micro-batch.
  expectRefused("sends the output of micro-batch 1 of stage 0 where the "
                "stage's latest forward wrote micro-batch 0's",
                "they disagree on the micro-batch (1 sent, 0 expected)");
}

TEST_P(EditedPlan, ReceiveDropped) {
  // Pipeline rank 1 no longer receives its first activation; rank 0 sends
  // it all the same.
  Program &step = programOf(plan, plan.stages[1].step);
  const std::vector<size_t> recvs = indicesOf(step, Opcode::PipelineRecv);
  ASSERT_FALSE(recvs.empty());
  step.instructions.erase(step.instructions.begin() + long(recvs[0]));
  // 1F1B: the send meets the next receive; interleaved: the ranks, both
  // sending, wait on each other.
  expectRefused("which no earlier receive brings",
                "issues PipelineSend of stage 0's output (micro-batch 0, f32 "
                "[8, 64, 128]) to pp=1 at program 'stage0.step'");
}

TEST_P(EditedPlan, MicroBatchChanged) {
  Program &step = programOf(plan, plan.stages[0].step);
  const std::vector<size_t> sends = indicesOf(step, Opcode::PipelineSend);
  ASSERT_FALSE(sends.empty());
  Instruction &inst = step.instructions[sends[0]];
  ops::PipelineSend send = ops::PipelineSend::decode(inst);
  send.microBatch += 1;
  send.encode(inst);
  expectRefused("sends the output of micro-batch 1 of stage 0 where the "
                "stage's latest forward wrote micro-batch 0's",
                "they disagree on the micro-batch (1 sent, 0 expected)");
}

TEST_P(EditedPlan, CollectivesReorderedOnOneStage) {
  // Stage 0's optimizer all-reduces the tied embedding's gradient over pp,
  // then the global norm over pp: issued in the other order on pipeline
  // rank 0 only, the pp group's members call different collectives.
  Program &optimizer = programOf(plan, plan.stages[0].optimizer);
  const std::vector<size_t> norms =
      indicesOf(optimizer, Opcode::GlobalNormClipParts);
  ASSERT_EQ(norms.size(), 1u);
  size_t tied = optimizer.instructions.size();
  for (size_t i : indicesOf(optimizer, Opcode::AllReduce))
    if (groupAxesOf(optimizer.instructions[i]) ==
        groupAxesOf(optimizer.instructions[norms[0]]))
      tied = std::min(tied, i);
  ASSERT_LT(tied, norms[0]);
  std::swap(optimizer.instructions[tied], optimizer.instructions[norms[0]]);
  expectRefused("the members of group [pp] disagree on their next collective",
                "they differ in the instruction");
}

TEST_P(EditedPlan, MessageShapeChanged) {
  // Stage 1's input as [.., 2C] with half the rows: the same bytes, so
  // the buffer itself is well formed.
  Buffer &input = plan.buffers[size_t(plan.stages[1].input)];
  ASSERT_EQ(input.shape.size(), 3u);
  input.shape[0] /= 2;
  input.shape[2] *= 2;
  // On load the first instruction that reads the message refuses its shape
  // (instructions are checked before the ranks are run together).
  expectRefused("program 'stage1.forward' instruction 0",
                "they disagree on the message's dtype or shape");
}

INSTANTIATE_TEST_SUITE_P(
    GptTinyDp2Pp2, EditedPlan,
    ::testing::Values(PlanCase{"gpt-tiny-dp2-pp2-1f1b.plan", "1f1b"},
                      PlanCase{"gpt-tiny-dp2-pp2-interleaved.plan",
                               "interleaved-1f1b"}),
    [](const ::testing::TestParamInfo<PlanCase> &info) {
      return std::string(info.index == 0 ? "OneFOneB" : "Interleaved");
    });

/// A send of a micro-batch whose data the stage's buffer no longer holds:
/// the message pairs, but it would carry the wrong micro-batch's output.
TEST(PlanScheduleVerifier, SendAfterTheNextForwardIsRefused) {
  Plan plan = loadPlan("gpt-tiny-dp2-pp2-1f1b.plan");
  Program &step = programOf(plan, plan.stages[0].step);
  const std::vector<size_t> sends = indicesOf(step, Opcode::PipelineSend);
  const std::vector<size_t> forwards = indicesOf(step, Opcode::PipelineForward);
  ASSERT_GE(forwards.size(), 2u);
  ASSERT_LT(sends[0], forwards[1]);
  // F0 S0 F1 -> F0 F1 S0.
  std::rotate(step.instructions.begin() + long(sends[0]),
              step.instructions.begin() + long(sends[0]) + 1,
              step.instructions.begin() + long(forwards[1]) + 1);
  EXPECT_NE(scheduleError(plan).find(
                "pipeline rank 0's step program 'stage0.step' instruction 2 "
                "(PipelineSend): sends the activation of micro-batch 0 of "
                "stage 0, but the stage's last forward ran micro-batch 1"),
            std::string::npos)
      << scheduleError(plan);
}

/// Both ranks send first: each waits for the other's receive forever.
TEST(PlanScheduleVerifier, SendsFacingEachOtherDeadlock) {
  Plan plan = loadPlan("gpt-tiny-dp2-pp2-1f1b.plan");
  // Rank 1 sends its first gradient before it receives the second
  // activation (R0 F0 B0 R1 S0 -> R0 F0 B0 S0 R1), while rank 0 sends that
  // activation before it receives the gradient.
  Program &step1 = programOf(plan, plan.stages[1].step);
  const std::vector<size_t> recvs = indicesOf(step1, Opcode::PipelineRecv);
  const std::vector<size_t> sends = indicesOf(step1, Opcode::PipelineSend);
  ASSERT_GE(recvs.size(), 2u);
  ASSERT_LT(recvs[1], sends[0]);
  std::swap(step1.instructions[recvs[1]], step1.instructions[sends[0]]);
  const std::string error = scheduleError(plan);
  EXPECT_NE(error.find("deadlock: rank 0 (dp=0, pp=0) and rank 1 (dp=0, "
                       "pp=1) wait on each other"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("PipelineSend of stage 1's input's gradient"),
            std::string::npos)
      << error;
}

/// A rank that stops receiving goes on to the loss scaler's vote over all
/// ranks (between the step and the optimizer), where it waits for the
/// rank whose last send it never takes.
TEST(PlanScheduleVerifier, LastReceiveDroppedDeadlocksAtTheVote) {
  Plan plan = loadPlan("gpt-tiny-dp2-pp2-1f1b.plan");
  Program &step = programOf(plan, plan.stages[0].step);
  const std::vector<size_t> recvs = indicesOf(step, Opcode::PipelineRecv);
  step.instructions.erase(step.instructions.begin() + long(recvs.back()));
  const std::string error = scheduleError(plan);
  EXPECT_NE(error.find("deadlock: rank 0 (dp=0, pp=0) and rank 1 (dp=0, "
                       "pp=1) wait on each other: rank 0 (dp=0, pp=0) issues "
                       "the loss scaler's overflow vote: all_reduce of 1 i32 "
                       "(max) over [dp, pp] after the step program, rank 1 "
                       "(dp=0, pp=1) issues PipelineSend of stage 1's input's "
                       "gradient (micro-batch 3"),
            std::string::npos)
      << error;
}

/// On a large mesh two coordinates of each axis but pp stand for all of
/// them (their ranks run the same programs): the proof does not grow with
/// the data-parallel degree, and it still names ranks of the plan's mesh.
TEST(PlanScheduleVerifier, LargeMeshNamesItsOwnRanks) {
  Plan plan = loadPlan("gpt-tiny-dp2-pp2-1f1b.plan");
  ASSERT_EQ(plan.mesh[0].name, "dp");
  plan.mesh[0].size = 4096;
  EXPECT_EQ(scheduleError(plan), "");
  Program &step = programOf(plan, plan.stages[0].step);
  Instruction &inst =
      step.instructions[indicesOf(step, Opcode::PipelineSend)[0]];
  ops::PipelineSend send = ops::PipelineSend::decode(inst);
  send.microBatch += 1;
  send.encode(inst);
  const std::string error = scheduleError(plan);
  EXPECT_NE(error.find("rank 0 (dp=0, pp=0) issues PipelineSend"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("rank 1 (dp=0, pp=1) issues PipelineRecv"),
            std::string::npos)
      << error;
}

/// The committed pp=2 plans of the other tests agree too.
TEST(PlanScheduleVerifier, OtherCompiledPipelinesAgree) {
  for (const char *name :
       {"gpt-tiny-pp2-interleaved.plan", "gpt-tiny-pp2-zb-h1.plan"})
    EXPECT_EQ(scheduleError(loadPlan(name)), "") << name;
}

//===----------------------------------------------------------------------===//
// A pipelined curriculum: Inputs/gpt-curriculum-pp2.plan is what dsc-run
// compiles of Integration/Inputs/curriculum/gpt-curriculum.yml on pp=2
// (lengths 8, 16, 24 and 32; `--write-plan` in train-curriculum.test keeps
// it current). Each shorter length's stages are checked as the plan's own,
// and what lives through one length's step may share bytes with other
// lengths' steps, never with its own.
//===----------------------------------------------------------------------===//

Buffer &bufferNamed(Plan &plan, const std::string &name) {
  const int64_t id = plan.findBuffer(name);
  if (id < 0)
    throw Error("test: the plan has no buffer '" + name + "'");
  return plan.buffers[size_t(id)];
}

bool overlaps(const Buffer &b, uint64_t from, uint64_t to) {
  return b.offset < to && b.offset + b.bytes > from;
}

TEST(CurriculumPipelinePlan, CompiledPlanIsAcceptedAndSharesTheStepRegion) {
  Plan plan = loadPlan("gpt-curriculum-pp2.plan");
  ASSERT_EQ(plan.curriculum.size(), 4u);
  for (size_t k = 0; k < 3; ++k)
    EXPECT_EQ(plan.curriculum[k].stages.size(), 2u) << k;
  EXPECT_TRUE(plan.curriculum[3].stages.empty());
  EXPECT_EQ(plan.curriculum[0].stages[0].step, "stage0.step.seq8");
  EXPECT_EQ(plan.curriculum[0].stages[0].optimizer, "stage0.optimizer");
  EXPECT_EQ(loadError(plan), "");
  // Sequence 8's stage-0 output lies in the bytes of the plan's own
  // activation slots: the two lengths' steps never run together.
  const PipelineStage &own = plan.stages[0];
  const uint64_t from = own.activationSlots.offset;
  const uint64_t to =
      from + own.activationSlots.stride * uint64_t(own.activationSlots.slots);
  EXPECT_TRUE(
      overlaps(bufferNamed(plan, "seq8.stage0.forward.output"), from, to));
  // Written again, the same bytes.
  const std::vector<uint8_t> bytes = writePlan(plan);
  EXPECT_EQ(writePlan(readPlan(bytes.data(), bytes.size(), "again")), bytes);
}

TEST(CurriculumPipelinePlan, BoundaryOverItsOwnStepsTemporaryIsRefused) {
  Plan plan = loadPlan("gpt-curriculum-pp2.plan");
  bufferNamed(plan, "seq8.stage0.forward.output").offset =
      bufferNamed(plan, "seq8.stage0.forward.wte.0").offset;
  const std::string error = loadError(plan);
  EXPECT_NE(error.find("'seq8.stage0.forward.output'"), std::string::npos)
      << error;
  EXPECT_NE(error.find("within curriculum length 0's step, what lives "
                       "through it may share no bytes"),
            std::string::npos)
      << error;
}

TEST(CurriculumPipelinePlan, BoundaryOverAParameterIsRefused) {
  Plan plan = loadPlan("gpt-curriculum-pp2.plan");
  bufferNamed(plan, "seq16.stage0.forward.residual.0").offset =
      bufferNamed(plan, "wpe.weight").offset;
  const std::string error = loadError(plan);
  EXPECT_NE(error.find("persistent buffers may share no bytes"),
            std::string::npos)
      << error;
}

TEST(CurriculumPipelinePlan, ShorterLengthsSendsSwappedAreRefused) {
  Plan plan = loadPlan("gpt-curriculum-pp2.plan");
  Program &step = programOf(plan, "stage0.step.seq8");
  const std::vector<size_t> sends = indicesOf(step, Opcode::PipelineSend);
  ASSERT_GE(sends.size(), 2u);
  std::swap(step.instructions[sends[0]], step.instructions[sends[1]]);
  const std::string error = loadError(plan);
  EXPECT_NE(error.find("curriculum length 0 (sequence 8): "), std::string::npos)
      << error;
  EXPECT_NE(error.find("sends the output of micro-batch 1 of stage 0"),
            std::string::npos)
      << error;
}

TEST(CurriculumPipelinePlan, ShorterLengthsReceiveDroppedDeadlocks) {
  Plan plan = loadPlan("gpt-curriculum-pp2.plan");
  Program &step = programOf(plan, "stage1.step.seq16");
  const std::vector<size_t> recvs = indicesOf(step, Opcode::PipelineRecv);
  ASSERT_FALSE(recvs.empty());
  step.instructions.erase(step.instructions.begin() + long(recvs.back()));
  const std::string error = loadError(plan);
  EXPECT_NE(error.find("curriculum length 1 (sequence 16): "),
            std::string::npos)
      << error;
}

TEST(CurriculumPipelinePlan, LengthWithAnotherOptimizerIsRefused) {
  Plan plan = loadPlan("gpt-curriculum-pp2.plan");
  plan.curriculum[2].stages[1].optimizer = "stage0.optimizer";
  const std::string error = loadError(plan);
  EXPECT_NE(error.find("curriculum length 2 (sequence 24): stage 1 names "
                       "optimizer 'stage0.optimizer'"),
            std::string::npos)
      << error;
}

TEST(CurriculumPipelinePlan, LengthWithoutStagesIsRefused) {
  Plan plan = loadPlan("gpt-curriculum-pp2.plan");
  plan.curriculum[1].stages.clear();
  const std::string error = loadError(plan);
  EXPECT_NE(error.find("curriculum length 1 (sequence 16): has 0 pipeline "
                       "stages, expected 2"),
            std::string::npos)
      << error;
}

/// Bytes flipped in the lengths' part of the file (the curriculum entries
/// and their stages, at the end of the body) are refused or read as a
/// valid plan, never a crash.
TEST(CurriculumPipelinePlan, ByteFlipsInItsLengthsNeverCrash) {
  const std::vector<uint8_t> good =
      writePlan(loadPlan("gpt-curriculum-pp2.plan"));
  const size_t tail = 2400; // the curriculum's 4 entries and 6 stages
  ASSERT_GT(good.size(), kPlanHeaderSize + tail);
  std::mt19937 rng(35);
  int refused = 0;
  for (int trial = 0; trial < 250; ++trial) {
    std::vector<uint8_t> bytes = good;
    for (int f = 0, flips = 1 + int(rng() % 3); f < flips; ++f)
      bytes[bytes.size() - 1 - rng() % tail] = uint8_t(rng());
    const uint64_t body = bytes.size() - kPlanHeaderSize;
    for (int i = 0; i < 8; ++i) {
      bytes[16 + i] = uint8_t(body >> (8 * i));
      bytes[24 + i] =
          uint8_t(fnv1a64(bytes.data() + kPlanHeaderSize, body) >> (8 * i));
    }
    try {
      validatePlan(readPlan(bytes.data(), bytes.size(), "flipped"));
    } catch (const Error &) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

} // namespace
