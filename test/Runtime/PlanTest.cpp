//===- PlanTest.cpp - Plan files: round trip, corruption, validation ------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A plan file is untrusted input: these tests corrupt one in every way the
// reader distinguishes (and at every truncation point) and check that each
// is an Error naming the cause, never a crash; and that validatePlan names
// the buffer or instruction at fault.
//
//===----------------------------------------------------------------------===//

#include "PlanTestSupport.h"

#include "dsc/Runtime/Instructions.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/TokenSchedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <set>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {

/// Runs `fn`, expects an Error, and returns its message.
template <typename Fn> std::string errorOf(Fn fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e.what();
  } catch (const std::exception &e) {
    return std::string("unexpected non-Error exception: ") + e.what();
  }
  return "no error";
}

#define EXPECT_ERROR_HAS(expr, ...)                                            \
  do {                                                                         \
    std::string msg = errorOf([&] { (void)(expr); });                          \
    for (const char *part : {__VA_ARGS__})                                     \
      EXPECT_NE(msg.find(part), std::string::npos)                             \
          << "message: " << msg << "\nmissing: " << part;                      \
  } while (0)

void putU32(std::vector<uint8_t> &bytes, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    bytes[at + i] = uint8_t(v >> (8 * i));
}
void putU64(std::vector<uint8_t> &bytes, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    bytes[at + i] = uint8_t(v >> (8 * i));
}

/// Rewrites the header's body length and checksum to match the body, so a
/// test reaches the body parser with whatever body it made.
void resealHeader(std::vector<uint8_t> &bytes) {
  uint64_t len = bytes.size() - kPlanHeaderSize;
  putU64(bytes, 16, len);
  putU64(bytes, 24, fnv1a64(bytes.data() + kPlanHeaderSize, len));
}

Plan roundTrip(const Plan &plan) {
  std::vector<uint8_t> bytes = writePlan(plan);
  return readPlan(bytes.data(), bytes.size());
}

void expectEqual(const Plan &a, const Plan &b) {
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.vocabSize, b.vocabSize);
  EXPECT_EQ(a.seqLength, b.seqLength);
  EXPECT_EQ(a.microBatchSize, b.microBatchSize);
  EXPECT_EQ(a.microBatches, b.microBatches);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.gradNorm, b.gradNorm);
  EXPECT_EQ(a.learningRate, b.learningRate);
  EXPECT_EQ(a.gradientSeed, b.gradientSeed);
  ASSERT_EQ(a.mesh.size(), b.mesh.size());
  for (size_t i = 0; i < a.mesh.size(); ++i) {
    EXPECT_EQ(a.mesh[i].name, b.mesh[i].name);
    EXPECT_EQ(a.mesh[i].size, b.mesh[i].size);
  }
  ASSERT_EQ(a.arenas.size(), b.arenas.size());
  for (size_t i = 0; i < a.arenas.size(); ++i) {
    EXPECT_EQ(a.arenas[i].tier, b.arenas[i].tier);
    EXPECT_EQ(a.arenas[i].bytes, b.arenas[i].bytes);
  }
  ASSERT_EQ(a.buffers.size(), b.buffers.size());
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const Buffer &x = a.buffers[i], &y = b.buffers[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.arena, y.arena);
    EXPECT_EQ(x.offset, y.offset);
    EXPECT_EQ(x.bytes, y.bytes);
    EXPECT_EQ(x.dtype, y.dtype);
    EXPECT_EQ(x.shape, y.shape);
    EXPECT_EQ(x.role, y.role);
    EXPECT_EQ(x.init.kind, y.init.kind);
    EXPECT_EQ(x.init.std, y.init.std);
    EXPECT_EQ(x.init.value, y.init.value);
  }
  ASSERT_EQ(a.programs.size(), b.programs.size());
  for (size_t p = 0; p < a.programs.size(); ++p) {
    EXPECT_EQ(a.programs[p].name, b.programs[p].name);
    ASSERT_EQ(a.programs[p].instructions.size(),
              b.programs[p].instructions.size());
    for (size_t i = 0; i < a.programs[p].instructions.size(); ++i) {
      const Instruction &x = a.programs[p].instructions[i];
      const Instruction &y = b.programs[p].instructions[i];
      EXPECT_EQ(x.opcode, y.opcode);
      EXPECT_EQ(x.name, y.name);
      EXPECT_EQ(x.inputs, y.inputs);
      EXPECT_EQ(x.outputs, y.outputs);
      EXPECT_EQ(x.ints, y.ints);
      EXPECT_EQ(x.floats, y.floats);
    }
  }
  EXPECT_EQ(a.summary.peakBytesPerArena, b.summary.peakBytesPerArena);
  EXPECT_EQ(a.summary.flopsPerMicroBatch, b.summary.flopsPerMicroBatch);
  EXPECT_EQ(a.summary.collectiveBytesPerStep, b.summary.collectiveBytesPerStep);
}

Instruction &instructionNamed(Plan &plan, const std::string &name) {
  for (Program &p : plan.programs)
    for (Instruction &inst : p.instructions)
      if (inst.name == name)
        return inst;
  throw std::logic_error("no instruction " + name);
}

uint32_t bufferId(const Plan &plan, const std::string &name) {
  return uint32_t(plan.findBuffer(name));
}

/// The tiny plan on a dp=2 x tp=2 mesh, its gradients averaged over dp at
/// the start of the optimizer program.
Plan makeMeshPlan() {
  Plan plan = makeTinyPlan(DType::F32);
  plan.mesh = {{"dp", 2}, {"tp", 2}};
  uint32_t gWte = bufferId(plan, "wte.weight.grad");
  uint32_t gHead = bufferId(plan, "head.weight.grad");
  Program &opt = plan.programs[2];
  opt.instructions.insert(opt.instructions.begin(),
                          makeInst(Opcode::AllReduce, {gWte, gHead},
                                   {gWte, gHead}, "grads.all_reduce", {1, 1}));
  plan.summary.collectiveBytesPerStep = 4096;
  return plan;
}

//===----------------------------------------------------------------------===//
// Round trip
//===----------------------------------------------------------------------===//

TEST(PlanIO, RoundTripEqualsTheOriginal) {
  Plan plan = makeTinyPlan(DType::F32);
  plan.summary.collectiveBytesPerStep = 12345;
  plan.arenas.push_back({Tier::Host, 4096});
  plan.summary.peakBytesPerArena.push_back(4000);
  validatePlan(plan);
  Plan back = roundTrip(plan);
  expectEqual(plan, back);
  // Serializing again gives the same bytes (the format has one spelling).
  EXPECT_EQ(writePlan(plan), writePlan(back));
}

TEST(PlanIO, RoundTripOfAMeshAndAllReduce) {
  Plan plan = makeMeshPlan();
  validatePlan(plan);
  Plan back = roundTrip(plan);
  expectEqual(plan, back);
  EXPECT_EQ(meshString(back.mesh), "dp=2 tp=2");
  EXPECT_EQ(writePlan(plan), writePlan(back));
  std::string text = formatPlan(back);
  EXPECT_NE(text.find("mesh: dp=2 tp=2 (4 ranks)"), std::string::npos) << text;
  EXPECT_NE(text.find("AllReduce 'grads.all_reduce'"), std::string::npos)
      << text;
}

TEST(PlanIO, VersionOneIsRefusedNamingBoth) {
  EXPECT_EQ(kPlanFormatVersion, 15u);
  std::vector<uint8_t> bytes = writePlan(makeTinyPlan());
  putU32(bytes, 8, 1);
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size()),
                   "plan format version 1 is not supported",
                   "this runtime reads version 15");
}

TEST(PlanIO, FileRoundTrip) {
  Plan plan = makeTinyPlan();
  std::string path = uniqueTempPath(::testing::TempDir(), "roundtrip.plan");
  writePlanFile(plan, path);
  expectEqual(plan, readPlanFile(path));
  std::remove(path.c_str());
}

TEST(PlanIO, MissingFileIsAnError) {
  EXPECT_ERROR_HAS(readPlanFile("/nonexistent/dir/x.plan"),
                   "cannot open plan file '/nonexistent/dir/x.plan'");
}

TEST(PlanIO, DirectoryIsAnError) {
  EXPECT_ERROR_HAS(readPlanFile(::testing::TempDir()), "is a directory");
}

TEST(PlanIO, HeaderLayout) {
  std::vector<uint8_t> bytes = writePlan(makeTinyPlan());
  ASSERT_GT(bytes.size(), kPlanHeaderSize);
  EXPECT_EQ(std::memcmp(bytes.data(), "DSCPLAN\0", 8), 0);
  EXPECT_EQ(bytes[8], kPlanFormatVersion);
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i)
    len |= uint64_t(bytes[16 + i]) << (8 * i);
  EXPECT_EQ(len, bytes.size() - kPlanHeaderSize);
}

//===----------------------------------------------------------------------===//
// Corrupt files
//===----------------------------------------------------------------------===//

TEST(PlanIO, WrongMagic) {
  std::vector<uint8_t> bytes = writePlan(makeTinyPlan());
  bytes[0] = 'X';
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size(), "plan file 'p'"),
                   "plan file 'p'", "not a dsc plan", "DSCPLAN");
}

TEST(PlanIO, OtherVersionNamesBoth) {
  std::vector<uint8_t> bytes = writePlan(makeTinyPlan());
  putU32(bytes, 8, kPlanFormatVersion + 1);
  std::string other = "version " + std::to_string(kPlanFormatVersion + 1);
  std::string ours = "version " + std::to_string(kPlanFormatVersion);
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size()), other.c_str(),
                   ours.c_str(), "not supported");
}

TEST(PlanIO, CorruptChecksum) {
  std::vector<uint8_t> bytes = writePlan(makeTinyPlan());
  bytes[kPlanHeaderSize + 40] ^= 0x10;
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size()), "checksum mismatch",
                   "corrupt");
  bytes = writePlan(makeTinyPlan());
  bytes[30] ^= 1; // the stored checksum itself
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size()), "checksum mismatch");
}

TEST(PlanIO, EveryTruncationIsAnError) {
  std::vector<uint8_t> bytes = writePlan(makeTinyPlan());
  // As cut: the header's length no longer matches.
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + len);
    std::string msg = errorOf([&] { readPlan(cut.data(), cut.size()); });
    EXPECT_TRUE(msg.find("truncated") != std::string::npos ||
                msg.find("body length") != std::string::npos)
        << "prefix " << len << ": " << msg;
  }
  // With the header resealed, so that the body parser meets the end of
  // the data at every field.
  for (size_t len = kPlanHeaderSize; len < bytes.size(); ++len) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + len);
    resealHeader(cut);
    std::string msg = errorOf([&] { readPlan(cut.data(), cut.size()); });
    EXPECT_TRUE(msg.find("truncated in") != std::string::npos ||
                msg.find("remain") != std::string::npos)
        << "body prefix " << len - kPlanHeaderSize << ": " << msg;
  }
}

TEST(PlanIO, TruncationNamesTheField) {
  Plan plan = makeTinyPlan();
  std::vector<uint8_t> bytes = writePlan(plan);
  // Cut in the middle of the summary's last field (before the curriculum's
  // count, 4 bytes).
  bytes.resize(bytes.size() - 4 - 3);
  resealHeader(bytes);
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size()),
                   "truncated in summary pipelineBubble", "needs 8 bytes",
                   "5 remain");
}

TEST(PlanIO, TrailingBytesAreAnError) {
  std::vector<uint8_t> bytes = writePlan(makeTinyPlan());
  bytes.push_back(0);
  resealHeader(bytes);
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size()),
                   "1 unexpected bytes after the curriculum");
}

TEST(PlanIO, HugeCountIsCappedByTheRemainingBytes) {
  std::vector<uint8_t> bytes = writePlan(makeTinyPlan());
  // The string count follows the model (4 x i64), well-known fields
  // (3 x u32 + 7 x i64) and 0/1 Adam's (5 x i64, then 3 x (2 x i64 +
  // u64)).
  size_t at = kPlanHeaderSize + 32 + 12 + 56 + 40 + 72;
  putU32(bytes, at, 0xffffffffu);
  resealHeader(bytes);
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size()),
                   "strings count 4294967295 needs at least");
}

TEST(PlanIO, ZeroOneAdamFieldsRoundTripAndAreChecked) {
  // Without 0/1 Adam its fields are at rest, and a set policy is refused.
  Plan plan = makeTinyPlan();
  plan.zeroOneAdam.varFreezeStep = 5;
  std::vector<uint8_t> bytes = writePlan(plan);
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size()),
                   "0/1 Adam's policy is set, but the plan does not run it");
  // An enabled flag other than 0 or 1.
  bytes = writePlan(makeTinyPlan());
  putU32(bytes, kPlanHeaderSize + 32 + 12 + 56, 7);
  resealHeader(bytes);
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size()),
                   "zeroOneAdam enabled is 7, not 0 or 1");
  // Enabled without its programs.
  plan = makeTinyPlan();
  plan.zeroOneAdam.enabled = true;
  plan.zeroOneAdam.varFreezeStep = 5;
  plan.zeroOneAdam.varUpdateScaler = 16;
  bytes = writePlan(plan);
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size()),
                   "the plan runs 0/1 Adam but has no \"optimizer.onebit\" "
                   "program");
}

TEST(PlanIO, UnknownOpcodeNamesTheInstruction) {
  Plan plan = makeTinyPlan();
  plan.programs[0].instructions[1].opcode = Opcode(999);
  std::vector<uint8_t> bytes = writePlan(plan);
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size()),
                   "program 'forward' instruction 1 has unknown opcode 999");
}

TEST(PlanIO, UnknownEnumNamesTheBuffer) {
  Plan plan = makeTinyPlan();
  plan.buffers[2].dtype = DType(17);
  std::vector<uint8_t> bytes = writePlan(plan);
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size()),
                   "buffers[2] 'wte.weight' dtype has unknown value 17");
}

TEST(PlanIO, ValidationRunsOnRead) {
  Plan plan = makeTinyPlan();
  plan.buffers[bufferId(plan, "head.weight")].offset += 1u << 20;
  std::vector<uint8_t> bytes = writePlan(plan);
  EXPECT_ERROR_HAS(readPlan(bytes.data(), bytes.size(), "plan file 'x'"),
                   "plan file 'x'", "'head.weight'", "overflow arena 0");
}

TEST(PlanIO, RandomByteFlipsNeverCrash) {
  const std::vector<uint8_t> good = writePlan(makeMeshPlan());
  std::mt19937 rng(7);
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> bytes = good;
    int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f)
      bytes[kPlanHeaderSize + rng() % (bytes.size() - kPlanHeaderSize)] =
          uint8_t(rng());
    resealHeader(bytes);
    try {
      Plan p = readPlan(bytes.data(), bytes.size());
      validatePlan(p); // what is accepted is valid
      ++accepted;
    } catch (const Error &) {
    }
  }
  // Most flips land in names, floats or padding-free fields that stay valid
  // or fail; either way nothing crashed. Some must be refused.
  EXPECT_LT(accepted, 3000);
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

TEST(PlanValidate, TheTinyPlanIsValid) {
  EXPECT_NO_THROW(validatePlan(makeTinyPlan(DType::F64)));
  EXPECT_NO_THROW(validatePlan(makeTinyPlan(DType::F32)));
}

TEST(PlanValidate, BufferOverflowingItsArena) {
  Plan plan = makeTinyPlan();
  uint32_t id = bufferId(plan, "logits");
  plan.buffers[id].offset = plan.arenas[0].bytes - 8;
  std::string arenaSize = std::to_string(plan.arenas[0].bytes) + " bytes";
  EXPECT_ERROR_HAS(validatePlan(plan), "buffer", "'logits'", "overflow arena 0",
                   "device", arenaSize.c_str());
}

TEST(PlanValidate, ArenaIndexOutOfRange) {
  Plan plan = makeTinyPlan();
  plan.buffers[3].arena = 5;
  EXPECT_ERROR_HAS(validatePlan(plan), "'head.weight'",
                   "arena 5 does not exist", "1 arenas");
}

TEST(PlanValidate, BytesMustMatchTheShape) {
  Plan plan = makeTinyPlan();
  plan.buffers[2].bytes -= 8;
  EXPECT_ERROR_HAS(validatePlan(plan), "'wte.weight'", "[16, 8] x f64 needs",
                   "1024");
}

TEST(PlanValidate, MisalignedOffset) {
  Plan plan = makeTinyPlan();
  plan.buffers[2].offset += 4;
  EXPECT_ERROR_HAS(validatePlan(plan), "'wte.weight'",
                   "not a multiple of its 8-byte element");
}

TEST(PlanValidate, PersistentBuffersMayNotOverlap) {
  Plan plan = makeTinyPlan();
  uint32_t logits = bufferId(plan, "logits");
  plan.buffers[logits].offset =
      plan.buffers[bufferId(plan, "head.weight")].offset;
  EXPECT_ERROR_HAS(validatePlan(plan), "'logits'", "overlaps", "'head.weight'",
                   "persistent");
}

TEST(PlanValidate, TemporariesMayShareBytes) {
  Plan plan = makeTinyPlan();
  // x and dx share bytes in the tiny plan already.
  EXPECT_EQ(plan.buffers[bufferId(plan, "x")].offset,
            plan.buffers[bufferId(plan, "dx")].offset);
  EXPECT_NO_THROW(validatePlan(plan));
}

TEST(PlanValidate, WellKnownTokens) {
  Plan plan = makeTinyPlan();
  plan.microBatchSize = 3;
  EXPECT_ERROR_HAS(validatePlan(plan), "well-known tokens", "'tokens'",
                   "must be i32 [3, 4]");
  plan = makeTinyPlan();
  plan.loss = bufferId(plan, "x");
  EXPECT_ERROR_HAS(validatePlan(plan), "well-known loss", "'x'",
                   "role temporary, expected loss");
  plan = makeTinyPlan();
  plan.gradNorm = 1000;
  EXPECT_ERROR_HAS(validatePlan(plan), "well-known gradNorm buffer 1000",
                   "out of range");
}

TEST(PlanValidate, WrongOperandCount) {
  Plan plan = makeTinyPlan();
  instructionNamed(plan, "head.grad_input").inputs.pop_back();
  EXPECT_ERROR_HAS(validatePlan(plan),
                   "program 'forward_backward' instruction 5 "
                   "'head.grad_input' (Matmul)",
                   "expects 2 inputs but has 1", "in(a, b) out(c)");
}

TEST(PlanValidate, WrongIntCount) {
  Plan plan = makeTinyPlan();
  instructionNamed(plan, "wte.grad").ints.clear();
  EXPECT_ERROR_HAS(validatePlan(plan), "'wte.grad' (EmbeddingGrad)",
                   "expects 1 ints but has 0");
}

TEST(PlanValidate, OutOfRangeBufferId) {
  Plan plan = makeTinyPlan();
  instructionNamed(plan, "loss").inputs[1] = 99;
  std::string count =
      "the plan has " + std::to_string(plan.buffers.size()) + " buffers";
  EXPECT_ERROR_HAS(validatePlan(plan),
                   "program 'forward' instruction 2 'loss' (CrossEntropy)",
                   "input 1 is buffer 99", count.c_str());
}

TEST(PlanValidate, MatmulShapeMismatch) {
  Plan plan = makeTinyPlan();
  instructionNamed(plan, "head").ints[2] = 15; // n != vocab
  EXPECT_ERROR_HAS(validatePlan(plan), "instruction 1 'head' (Matmul)",
                   "has 128 elements, expected 120");
  plan = makeTinyPlan();
  instructionNamed(plan, "head").ints[5] = 1; // read head [8, 16] as [n, k]
  EXPECT_ERROR_HAS(validatePlan(plan), "'head' (Matmul)", "'head.weight'",
                   "must end in k = 8 (transB)");
}

TEST(PlanValidate, EmbeddingIdsMustBeI32) {
  Plan plan = makeTinyPlan();
  instructionNamed(plan, "wte").inputs[1] = bufferId(plan, "logits");
  EXPECT_ERROR_HAS(validatePlan(plan), "'wte' (Embedding)", "'logits'",
                   "holds token ids and must be i32");
}

TEST(PlanValidate, FloatOperandsShareOneDType) {
  Plan plan = makeTinyPlan(DType::F64);
  uint32_t head = bufferId(plan, "head.weight");
  plan.buffers[head].dtype = DType::F32;
  plan.buffers[head].bytes /= 2;
  EXPECT_ERROR_HAS(validatePlan(plan), "instruction 1 'head' (Matmul)",
                   "has dtype f32", "has f64", "share one dtype");
}

TEST(PlanValidate, InPlaceOnlyWhereAllowed) {
  Plan plan = makeTinyPlan();
  uint32_t logits = bufferId(plan, "logits");
  // Elementwise ops may run on the very same bytes...
  plan.programs.push_back(
      {"p", {makeInst(Opcode::Gelu, {logits}, {logits}, "gelu")}});
  EXPECT_NO_THROW(validatePlan(plan));
  // ...a row-wise one may not.
  plan.programs.back().instructions[0] =
      makeInst(Opcode::Softmax, {logits}, {logits}, "softmax");
  EXPECT_ERROR_HAS(validatePlan(plan), "instruction 0 'softmax' (Softmax)",
                   "output 0 buffer", "overlaps input 0",
                   "cannot run in place");
}

TEST(PlanValidate, Mesh) {
  Plan plan = makeMeshPlan();
  EXPECT_NO_THROW(validatePlan(plan));
  EXPECT_EQ(meshRanks(plan.mesh), 4);
  EXPECT_EQ(meshCoordinates(plan.mesh, 3), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(meshCoordinates(plan.mesh, 2), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(findMeshAxis(plan.mesh, "tp"), 1);
  EXPECT_EQ(findMeshAxis(plan.mesh, "pp"), -1);
  plan.mesh[1].name = "dp";
  EXPECT_ERROR_HAS(validatePlan(plan), "mesh axis 1 'dp' appears twice");
  plan.mesh[1].name = "";
  EXPECT_ERROR_HAS(validatePlan(plan), "mesh axis 1 has an empty name");
  plan.mesh[1] = {"tp", 0};
  EXPECT_ERROR_HAS(validatePlan(plan), "mesh axis 1 'tp' has size 0",
                   "sizes must be >= 1");
  plan.mesh[1] = {"tp", int64_t(1) << 31};
  EXPECT_ERROR_HAS(validatePlan(plan), "the mesh dp=2 tp=2147483648",
                   "more ranks than an int holds");
  plan.mesh[1] = {"tp", int64_t(1) << 62};
  EXPECT_EQ(meshRanks(plan.mesh), -1);
  EXPECT_ERROR_HAS(validatePlan(plan), "more ranks than an int holds");
}

TEST(PlanValidate, AllReduce) {
  Plan plan = makeMeshPlan();
  Instruction &ar = instructionNamed(plan, "grads.all_reduce");
  const std::string where = "program 'optimizer' instruction 0 "
                            "'grads.all_reduce' (AllReduce)";
  ar.ints[0] = 3; // over dp and tp
  EXPECT_NO_THROW(validatePlan(plan));
  for (int64_t bad : {0, 4, -1}) {
    ar.ints[0] = bad;
    EXPECT_ERROR_HAS(validatePlan(plan), where.c_str(),
                     ("int axes = " + std::to_string(bad)).c_str(),
                     "non-zero bit mask over the mesh's 2 axes (dp=2 tp=2)",
                     "[1, 3]");
  }
  ar.ints[0] = 1;
  ar.ints[1] = 4;
  EXPECT_ERROR_HAS(validatePlan(plan), "int reduce = 4 is outside [0, 3]");
  ar.ints[1] = 1;
  // In place: the same ids in the same order.
  std::swap(ar.outputs[0], ar.outputs[1]);
  EXPECT_ERROR_HAS(validatePlan(plan), where.c_str(),
                   "its outputs must be its inputs",
                   "output 0 is buffer 5 but input 0 is buffer 4");
  std::swap(ar.outputs[0], ar.outputs[1]);
  ar.outputs.pop_back();
  EXPECT_ERROR_HAS(validatePlan(plan), "2 inputs and 1 outputs");
  ar.outputs = ar.inputs;
  // One buffer twice is refused (it would be reduced twice).
  ar.inputs = ar.outputs = {ar.inputs[0], ar.inputs[0]};
  EXPECT_ERROR_HAS(validatePlan(plan), "overlaps");
  ar.inputs = ar.outputs = {};
  EXPECT_ERROR_HAS(validatePlan(plan), "expects one or more inputs");
  // Float buffers only.
  ar.inputs = ar.outputs = {plan.tokens};
  EXPECT_ERROR_HAS(validatePlan(plan), "must be a float buffer");
  ar.inputs = ar.outputs = {bufferId(plan, "wte.weight.grad")};
  EXPECT_NO_THROW(validatePlan(plan));
  // A collective needs a mesh.
  plan.mesh.clear();
  EXPECT_ERROR_HAS(validatePlan(plan), where.c_str(),
                   "a collective needs the plan's mesh, but the plan has "
                   "none");
}

TEST(PlanValidate, ConstantsAreNeverWritten) {
  Plan plan = makeTinyPlan();
  instructionNamed(plan, "loss").outputs[0] = bufferId(plan, "loss.grad_seed");
  EXPECT_ERROR_HAS(validatePlan(plan), "'loss.grad_seed'",
                   "is a constant; no instruction may write it");
}

TEST(PlanValidate, AttributeRanges) {
  Plan plan = makeTinyPlan();
  instructionNamed(plan, "wte.adamw").floats[1] = 1.5;
  EXPECT_ERROR_HAS(validatePlan(plan), "'wte.adamw' (AdamW)",
                   "float beta2 = 1.5");
  plan = makeTinyPlan();
  instructionNamed(plan, "lr").ints[0] = 9;
  EXPECT_ERROR_HAS(validatePlan(plan), "'lr' (LearningRate)", "int kind = 9");
  plan = makeTinyPlan();
  instructionNamed(plan, "clip").floats[0] = std::nan("");
  EXPECT_ERROR_HAS(validatePlan(plan), "'clip' (GlobalNormClip)",
                   "float 0 is not finite");
}

// --dsc-fuse's attention pair: the logsumexp is [batch, heads, seq] of f32
// (f64 for f64 q), written by AttentionLse and read by AttentionGradLse.
TEST(PlanValidate, AttentionLseShapes) {
  Plan plan = makeTinyPlan(DType::F32);
  const uint32_t x = bufferId(plan, "x"); // [2, 4, 8]
  const uint32_t o =
      addBuffer(plan, "o", DType::F32, {2, 4, 8}, BufferRole::Temporary);
  const uint32_t d =
      addBuffer(plan, "d", DType::F32, {2, 4, 8}, BufferRole::Temporary);
  const uint32_t dq =
      addBuffer(plan, "dq", DType::F32, {2, 4, 8}, BufferRole::Temporary);
  const uint32_t dk =
      addBuffer(plan, "dk", DType::F32, {2, 4, 8}, BufferRole::Temporary);
  const uint32_t dv =
      addBuffer(plan, "dv", DType::F32, {2, 4, 8}, BufferRole::Temporary);
  const uint32_t lse =
      addBuffer(plan, "lse", DType::F32, {2, 2, 4}, BufferRole::Temporary);
  const uint32_t rows =
      addBuffer(plan, "lse.rows", DType::F32, {2, 4, 2}, BufferRole::Temporary);
  const uint32_t wide =
      addBuffer(plan, "lse.f64", DType::F64, {2, 2, 4}, BufferRole::Temporary);
  // heads 2, causal, seed 0, no head axes, no window; no dropout.
  const std::vector<int64_t> ints = {2, 1, 0, 0, 0};
  Program p{"attention", {}};
  p.instructions.push_back(
      makeInst(Opcode::AttentionLse, {x, x, x}, {o, lse}, "fwd", ints, {0.0}));
  p.instructions.push_back(makeInst(Opcode::AttentionGradLse,
                                    {x, x, x, d, o, lse}, {dq, dk, dv}, "bwd",
                                    ints, {0.0}));
  plan.programs.push_back(p);
  EXPECT_NO_THROW(validatePlan(plan));
  plan.programs.back().instructions[0].outputs[1] = rows;
  EXPECT_ERROR_HAS(validatePlan(plan), "'fwd' (AttentionLse)",
                   "must be [batch, heads, seq] = [2, 2, 4]");
  plan.programs.back().instructions[0].outputs[1] = lse;
  plan.programs.back().instructions[1].inputs[5] = wide;
  EXPECT_ERROR_HAS(validatePlan(plan), "'bwd' (AttentionGradLse)",
                   "must be f32 (the scores' logsumexp of f32 q), got f64");
}

TEST(PlanValidate, DuplicateProgram) {
  Plan plan = makeTinyPlan();
  plan.programs.push_back(plan.programs[0]);
  EXPECT_ERROR_HAS(validatePlan(plan), "program 'forward' appears twice");
}

TEST(PlanValidate, LayoutOps) {
  Plan plan = makeTinyPlan();
  uint32_t x = bufferId(plan, "x");           // [2, 4, 8]
  uint32_t logits = bufferId(plan, "logits"); // [2, 4, 16]
  Program p{"layout", {}};
  // Slice [2, 4, 8] out of [2, 4, 16] at offset 8 in the last dim.
  p.instructions.push_back(
      makeInst(Opcode::Slice, {logits}, {x}, "slice", {0, 0, 8}));
  plan.programs.push_back(p);
  EXPECT_NO_THROW(validatePlan(plan));
  plan.programs.back().instructions[0].ints = {0, 0, 9};
  EXPECT_ERROR_HAS(validatePlan(plan), "'slice' (Slice)",
                   "offset 9 + size 8 in dim 2 exceeds");
  plan.programs.back().instructions[0] =
      makeInst(Opcode::Transpose, {x}, {x}, "t", {0, 2, 1});
  EXPECT_ERROR_HAS(validatePlan(plan), "'t' (Transpose)", "dim 1 must be 8");
}

//===----------------------------------------------------------------------===//
// The opcode table and the schedules
//===----------------------------------------------------------------------===//

TEST(PlanOpcodes, TableIsConsistent) {
  std::set<std::string> names;
  for (const OpcodeInfo &info : opcodeTable()) {
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_EQ(lookupOpcode(uint32_t(info.opcode)), &info);
    // A list attribute can only be the last.
    for (size_t i = 0; i + 1 < info.ints.size(); ++i)
      EXPECT_NE(info.ints[i].kind, IntKind::List) << info.name;
    // Collectives and group kernels name the group they run over.
    if (info.has(kCollective) || info.has(kGroupKernel)) {
      EXPECT_GE(info.groupAxesIndex(), 0) << info.name;
    }
  }
  EXPECT_EQ(describeOpcode(Opcode::Matmul),
            "Matmul: in(a, b) out(c) ints(batch m n k transA transB "
            "broadcastB accumulate)");
  EXPECT_EQ(describeOpcode(Opcode::AdamW),
            "AdamW: in(grad, lr) out(param, m, v) ints(decay) "
            "floats(beta1 beta2 eps wd)");
  EXPECT_EQ(lookupOpcode(999), nullptr);
  EXPECT_EQ(opcodeName(Opcode(999)), "opcode 999");
}

TEST(PlanSchedules, DeepSpeedWarmupAndDecay) {
  using K = LrScheduleKind;
  auto lr = [](K k, int64_t w, int64_t t, bool log, int64_t step) {
    return scheduledLearningRate(k, w, t, log, 1.0, 0.0, 0.1, step);
  };
  EXPECT_DOUBLE_EQ(lr(K::Constant, 4, 8, false, 1), 1.0);
  // WarmupLR, linear: i/W with i = step - 2, DeepSpeed's
  // last_batch_iteration at the step (its engine sets step 1's rate when it
  // builds the scheduler, at -1, and steps it after each optimizer step).
  EXPECT_DOUBLE_EQ(lr(K::WarmupConstant, 4, 8, false, 1), 0.0);
  EXPECT_DOUBLE_EQ(lr(K::WarmupConstant, 4, 8, false, 2), 0.0);
  EXPECT_DOUBLE_EQ(lr(K::WarmupConstant, 4, 8, false, 3), 0.25);
  EXPECT_DOUBLE_EQ(lr(K::WarmupConstant, 4, 8, false, 5), 0.75);
  EXPECT_DOUBLE_EQ(lr(K::WarmupConstant, 4, 8, false, 6), 1.0);
  EXPECT_DOUBLE_EQ(lr(K::WarmupConstant, 4, 8, false, 100), 1.0);
  // Steps 1 and 2 start at warmupStart.
  EXPECT_DOUBLE_EQ(
      scheduledLearningRate(K::WarmupConstant, 4, 8, false, 1.0, 0.2, 0.1, 1),
      0.2);
  EXPECT_DOUBLE_EQ(
      scheduledLearningRate(K::WarmupConstant, 4, 8, true, 1.0, 0.2, 0.1, 2),
      0.2);
  // WarmupLR, log (DeepSpeed's default): log(i+1)/log(W).
  EXPECT_DOUBLE_EQ(lr(K::WarmupConstant, 4, 8, true, 3),
                   std::log(2.0) / std::log(4.0));
  // WarmupDecayLR: decayEnd + (base - decayEnd) (T - i)/(T - W).
  EXPECT_DOUBLE_EQ(lr(K::WarmupLinearDecay, 4, 8, false, 6), 1.0);
  EXPECT_DOUBLE_EQ(lr(K::WarmupLinearDecay, 4, 8, false, 7),
                   0.1 + 0.9 * 3.0 / 4.0);
  EXPECT_DOUBLE_EQ(lr(K::WarmupLinearDecay, 4, 8, false, 50), 0.1);
  // WarmupCosineLR: (1 + cos(pi (i - W + 1)/(T - W)))/2, clamped past T;
  // step 1 at 0 (WarmupCosineLR's rate at -1), not warmupStart.
  EXPECT_DOUBLE_EQ(scheduledLearningRate(K::WarmupCosineDecay, 4, 8, false, 1.0,
                                         0.2, 0.1, 1),
                   0.0);
  EXPECT_DOUBLE_EQ(scheduledLearningRate(K::WarmupCosineDecay, 4, 8, false, 1.0,
                                         0.2, 0.1, 2),
                   0.2);
  EXPECT_DOUBLE_EQ(lr(K::WarmupCosineDecay, 4, 8, false, 6),
                   0.1 + 0.9 * (1 + std::cos(M_PI * 0.25)) / 2);
  EXPECT_DOUBLE_EQ(lr(K::WarmupCosineDecay, 4, 8, false, 9), 0.1);
  EXPECT_DOUBLE_EQ(lr(K::WarmupCosineDecay, 4, 8, false, 80), 0.1);
  // Without a warmup (dsc's warmup 0; DeepSpeed refuses it) step 1 is the
  // decay's first.
  EXPECT_DOUBLE_EQ(lr(K::WarmupCosineDecay, 0, 8, false, 1),
                   0.1 + 0.9 * (1 + std::cos(M_PI / 8)) / 2);
  // A warmup of one step is DeepSpeed's two.
  EXPECT_DOUBLE_EQ(lr(K::WarmupConstant, 1, 8, false, 3), 0.5);
}

TEST(PlanSchedules, MegatronDeepSpeedTokenDecay) {
  ops::LearningRate lr;
  lr.kind = uint32_t(LrScheduleKind::AnnealingLinear);
  lr.warmup = 2;
  lr.base = 1.0;
  lr.decayEnd = 0.1;
  TokenSchedule schedule;
  schedule.decayTokens = 1000;
  // Warm-up by steps (n = step - 1), 0 at the first step (Megatron-
  // DeepSpeed's n / W, not GPT-NeoX's max(1, n) / W).
  TokenCounts counts;
  EXPECT_DOUBLE_EQ(tokenLearningRate(lr, schedule, counts, 1), 0.0);
  EXPECT_DOUBLE_EQ(tokenLearningRate(lr, schedule, counts, 2), 0.5);
  // The scheduler reads the tokens before the previous step's: steps of
  // 100 tokens, the latch at 2 steps done holds step 1's 100.
  for (int64_t done = 1; done <= 2; ++done)
    countStepTokens(counts, &schedule, 2, 100, true, done);
  EXPECT_EQ(counts.consumed, 200);
  EXPECT_EQ(counts.scheduler, 100);
  EXPECT_EQ(counts.warmupEnd, 100);
  EXPECT_DOUBLE_EQ(tokenLearningRate(lr, schedule, counts, 3), 1.0);
  countStepTokens(counts, &schedule, 2, 100, true, 3);
  EXPECT_DOUBLE_EQ(tokenLearningRate(lr, schedule, counts, 4),
                   0.1 + 0.9 * (1.0 - 100.0 / 900.0));
  // A skipped step counts its tokens but does not step the scheduler.
  countStepTokens(counts, &schedule, 2, 100, false, 3);
  EXPECT_EQ(counts.consumed, 400);
  EXPECT_EQ(counts.scheduler, 200);
  // Past lr_decay_tokens: min_lr; cosine at half way: the mean.
  counts.scheduler = 1001;
  EXPECT_DOUBLE_EQ(tokenLearningRate(lr, schedule, counts, 9), 0.1);
  lr.kind = uint32_t(LrScheduleKind::AnnealingCosine);
  counts.scheduler = 550;
  EXPECT_NEAR(tokenLearningRate(lr, schedule, counts, 9), 0.55, 1e-15);
  // lr_warmup_tokens: base N / WT while N <= WT; no steps warm-up, no
  // latch.
  schedule.warmupTokens = 400;
  TokenCounts byTokens;
  byTokens.scheduler = 100;
  EXPECT_DOUBLE_EQ(tokenLearningRate(lr, schedule, byTokens, 1), 0.25);
  countStepTokens(byTokens, &schedule, 2, 100, true, 2);
  EXPECT_EQ(byTokens.warmupEnd, -1);
  // No warm-up at all: Megatron-DeepSpeed fails (lr_warmup_tokens stays
  // None); dsc decays from 0 tokens.
  schedule.warmupTokens.reset();
  lr.warmup = 0;
  TokenCounts none;
  EXPECT_DOUBLE_EQ(tokenLearningRate(lr, schedule, none, 1), 1.0);
}

TEST(PlanSchedules, TokenDecayNeedsADecayingSchedule) {
  auto error = [](LrScheduleKind kind, TokenSchedule schedule) {
    Plan plan;
    Program prog;
    prog.name = "optimizer";
    Instruction inst;
    inst.opcode = Opcode::LearningRate;
    ops::LearningRate lr;
    lr.kind = uint32_t(kind);
    lr.warmup = 3;
    lr.encode(inst);
    prog.instructions.push_back(inst);
    plan.programs.push_back(prog);
    try {
      EXPECT_EQ(checkTokenSchedule(plan, schedule), 3);
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  TokenSchedule ok;
  ok.decayTokens = 100;
  EXPECT_EQ(error(LrScheduleKind::AnnealingCosine, ok), "");
  EXPECT_NE(error(LrScheduleKind::AnnealingConstant, ok).find("no decay"),
            std::string::npos);
  EXPECT_NE(error(LrScheduleKind::WarmupLinearDecay, ok).find("counts steps"),
            std::string::npos);
  TokenSchedule zero;
  EXPECT_EQ(error(LrScheduleKind::AnnealingLinear, zero),
            "lr_decay_tokens: must be > 0, got 0");
  TokenSchedule late = ok;
  late.warmupTokens = 100;
  EXPECT_NE(error(LrScheduleKind::AnnealingLinear, late)
                .find("lr_warmup_tokens: 100 is not below lr_decay_tokens 100"),
            std::string::npos);
}

TEST(PlanSchedules, DeepSpeedCyclic) {
  // LRRangeTest: min (1 + rate i), i = (step - 1) / size, floored in stairs.
  auto range = [](bool stairs, int64_t step) {
    return cyclicLearningRate(0, 0, 0, stairs, 0.1, 0.1, 4, 4, 0, 0.5, step);
  };
  EXPECT_DOUBLE_EQ(range(false, 1), 0.1);
  EXPECT_DOUBLE_EQ(range(false, 3), 0.1 * (1 + 0.5 * 2.0 / 4.0));
  EXPECT_DOUBLE_EQ(range(true, 3), 0.1);
  EXPECT_DOUBLE_EQ(range(true, 9), 0.1 * (1 + 0.5 * 2));
  // OneCycle 0.1 -> 1.0 over 4 steps, back over 2, then min / (1 + 0.5 d / 2).
  auto cycle = [](int64_t stairs, int64_t step) {
    return cyclicLearningRate(1, stairs, stairs, false, 0.1, 1.0, 4, 2, 2, 0.5,
                              step);
  };
  EXPECT_DOUBLE_EQ(cycle(0, 1), 0.1);
  EXPECT_DOUBLE_EQ(cycle(0, 3), 0.1 + 0.9 * 0.5);
  EXPECT_DOUBLE_EQ(cycle(0, 5), 1.0);
  EXPECT_DOUBLE_EQ(cycle(0, 6), 0.1 + 0.9 * 0.5);
  EXPECT_DOUBLE_EQ(cycle(0, 7), 0.1); // b = 6: the cycle's last step
  EXPECT_DOUBLE_EQ(cycle(0, 8), 0.1 / (1 + 0.5 * 1 / 2.0));
  // Two stairs up: flat for two steps, then half way.
  EXPECT_DOUBLE_EQ(cycle(2, 2), 0.1);
  EXPECT_DOUBLE_EQ(cycle(2, 3), 0.1 + 0.9 * 0.5);
  EXPECT_DOUBLE_EQ(cycle(2, 5), 1.0);
}

TEST(PlanSchedules, NeoXAnnealing) {
  using K = LrScheduleKind;
  // base 1, min 0.1, warmup W = 4, total T = 12: n = step - 1.
  auto lr = [](K k, int64_t step) {
    return scheduledLearningRate(k, 4, 12, false, 1.0, 0.0, 0.1, step);
  };
  // Warmup: max(1, n)/W while n <= W, never below min.
  EXPECT_DOUBLE_EQ(lr(K::AnnealingCosine, 1), 0.25);
  EXPECT_DOUBLE_EQ(lr(K::AnnealingCosine, 2), 0.25);
  EXPECT_DOUBLE_EQ(lr(K::AnnealingCosine, 4), 0.75);
  EXPECT_DOUBLE_EQ(lr(K::AnnealingCosine, 5), 1.0);
  // Then m = n - W over E = T - W = 8.
  EXPECT_DOUBLE_EQ(lr(K::AnnealingCosine, 7),
                   0.1 + 0.9 / 2 * (std::cos(M_PI * 2 / 8) + 1));
  EXPECT_DOUBLE_EQ(lr(K::AnnealingCosine, 13), 0.1);
  // Not clamped past T: the cosine rises again, as GPT-NeoX's.
  EXPECT_DOUBLE_EQ(lr(K::AnnealingCosine, 17),
                   0.1 + 0.9 / 2 * (std::cos(M_PI * 12 / 8) + 1));
  EXPECT_DOUBLE_EQ(lr(K::AnnealingLinear, 7), 6.0 / 8.0);
  EXPECT_DOUBLE_EQ(lr(K::AnnealingLinear, 13), 0.1);
  EXPECT_DOUBLE_EQ(lr(K::AnnealingExponential, 7), std::exp(-0.693 * 2 / 8));
  EXPECT_DOUBLE_EQ(lr(K::AnnealingConstant, 7), 1.0);
  // Without warmup the decay starts at step 1.
  EXPECT_DOUBLE_EQ(
      scheduledLearningRate(K::AnnealingLinear, 0, 10, false, 1, 0, 0, 1), 1.0);
  // The warmup is not lifted to min: GPT-NeoX returns it before its max.
  EXPECT_DOUBLE_EQ(
      scheduledLearningRate(K::AnnealingLinear, 100, 200, false, 1, 0, 0.5, 2),
      0.01);
}

} // namespace

// ZeRO-1's instructions: the reduce-scatter and all-gather work in place on
// buffers the group divides; the sharded AdamW's moments are one chunk of
// the parameter; the sharded norm has one flag per gradient.
TEST(PlanValidate, ZeroStageOneInstructions) {
  Plan plan = makeMeshPlan();
  uint32_t gWte = bufferId(plan, "wte.weight.grad");
  uint32_t wte = bufferId(plan, "wte.weight");
  Program &opt = plan.programs[2];
  opt.instructions.insert(
      opt.instructions.begin() + 1,
      makeInst(Opcode::ReduceScatter, {gWte}, {gWte}, "rs", {1, 1}));
  opt.instructions.push_back(
      makeInst(Opcode::AllGather, {wte}, {wte}, "ag", {1}));
  EXPECT_NO_THROW(validatePlan(plan));
  Plan back = roundTrip(plan);
  expectEqual(plan, back);

  Instruction &rs = instructionNamed(plan, "rs");
  rs.outputs = {bufferId(plan, "head.weight.grad")};
  EXPECT_ERROR_HAS(validatePlan(plan), "'rs' (ReduceScatter)",
                   "its outputs must be its inputs");
  rs.outputs = rs.inputs;
  rs.ints[1] = 7;
  EXPECT_ERROR_HAS(validatePlan(plan), "int reduce = 7 is outside [0, 3]");
  rs.ints[1] = 1;

  // The norm of parts: axes plus (chunkAxes, inBuffer, splitAxes) per
  // gradient; the first is a ZeRO-1 gradient (whole, its chunk valid).
  Instruction &clip = instructionNamed(plan, "clip");
  clip.opcode = Opcode::GlobalNormClipParts;
  clip.ints = {1, 1, 0, 0, 0, 0, 0};
  EXPECT_NO_THROW(validatePlan(plan));
  clip.ints = {1, 1, 0, 0};
  EXPECT_ERROR_HAS(validatePlan(plan), "'clip' (GlobalNormClipParts)",
                   "expects 7 ints but has 4");
  clip.ints = {1, 1, 3, 0, 0, 0, 0};
  EXPECT_ERROR_HAS(validatePlan(plan), "int inBuffer = 3 is outside [0, 1]");
  clip.ints = {8, 1, 0, 0, 0, 0, 0};
  EXPECT_ERROR_HAS(validatePlan(plan), "int axes = 8 must be a non-zero bit "
                                       "mask over the mesh's 2 axes");
  clip.ints = {1, 1, 0, 0, 0, 0, 0};

  // A sharded AdamW whose moments are the whole parameter is refused: each
  // rank keeps 1/D of them.
  Instruction &adam = instructionNamed(plan, "wte.adamw");
  adam.opcode = Opcode::AdamWShard;
  adam.ints = {1, 1};
  EXPECT_ERROR_HAS(validatePlan(plan), "'wte.adamw' (AdamWShard)",
                   "a shard of 128 over 2 ranks has 64");
  adam.ints = {1};
  EXPECT_ERROR_HAS(validatePlan(plan), "expects 2 ints but has 1");
}

// ZeRO-2's accumulation: the reduced micro-batch gradient's chunk goes into
// a shard of numel/D elements.
TEST(PlanValidate, ReduceScatterAccumulate) {
  Plan plan = makeMeshPlan();
  uint32_t gWte = bufferId(plan, "wte.weight.grad");
  uint32_t mWte = bufferId(plan, "wte.weight.exp_avg");
  Program &fb = plan.programs[1];
  fb.instructions.push_back(
      makeInst(Opcode::ReduceScatterAccumulate, {gWte}, {mWte}, "rsa", {1, 1}));
  EXPECT_ERROR_HAS(validatePlan(plan), "'rsa' (ReduceScatterAccumulate)",
                   "has 128 elements; the chunk of", "over 2 ranks has 64");
  fb.instructions.back().ints = {0, 1};
  EXPECT_ERROR_HAS(validatePlan(plan), "int axes = 0 must be a non-zero");
}

// Sequence parallelism's chunked instructions: a gather into D times the
// elements, a reduce-scatter and a chunk into 1/D of them, a chunked
// dropout with its group; each refuses other sizes, naming them.
TEST(PlanValidate, SequenceParallelChunks) {
  Plan plan = makeMeshPlan();
  uint32_t rows =
      addBuffer(plan, "rows", DType::F32, {4, 8}, BufferRole::Temporary);
  uint32_t whole =
      addBuffer(plan, "whole", DType::F32, {8, 8}, BufferRole::Temporary);
  uint32_t other =
      addBuffer(plan, "other", DType::F32, {4, 8}, BufferRole::Temporary);
  Program &fb = plan.programs[1];
  fb.instructions.push_back(
      makeInst(Opcode::GatherChunks, {rows}, {whole}, "gather", {1}));
  fb.instructions.push_back(makeInst(Opcode::ReduceScatterChunks, {whole},
                                     {rows}, "scatter", {1, 0}));
  fb.instructions.push_back(
      makeInst(Opcode::TakeChunk, {whole}, {rows}, "take", {1}));
  Instruction dropout =
      makeInst(Opcode::DropoutChunk, {rows}, {other}, "dropout", {7, 1});
  dropout.floats = {0.1};
  fb.instructions.push_back(dropout);
  EXPECT_NO_THROW(validatePlan(plan));
  Plan back = roundTrip(plan);
  expectEqual(plan, back);

  instructionNamed(plan, "gather").outputs = {other};
  EXPECT_ERROR_HAS(validatePlan(plan), "'gather' (GatherChunks)",
                   "has 32 elements; the 2 chunks of",
                   "(32 elements each) make 64");
  instructionNamed(plan, "gather").outputs = {whole};
  instructionNamed(plan, "scatter").inputs = {other};
  EXPECT_ERROR_HAS(validatePlan(plan), "'scatter' (ReduceScatterChunks)",
                   "has 32 elements; the chunk of", "over 2 ranks has 16");
  instructionNamed(plan, "scatter").inputs = {whole};
  instructionNamed(plan, "take").inputs = {other};
  EXPECT_ERROR_HAS(validatePlan(plan), "'take' (TakeChunk)",
                   "over 2 ranks has 16");
  instructionNamed(plan, "take").inputs = {whole};
  instructionNamed(plan, "dropout").ints = {7, 0};
  EXPECT_ERROR_HAS(validatePlan(plan), "'dropout' (DropoutChunk)",
                   "int axes = 0 must be a non-zero");
  instructionNamed(plan, "dropout").ints = {7, 1};
  instructionNamed(plan, "dropout").floats = {1.5};
  EXPECT_ERROR_HAS(validatePlan(plan), "'dropout' (DropoutChunk)");
}

// Expert parallelism's all-to-all over dp x tp (4 ranks): x and y hold the
// same elements, sendOuter and recvOuter are >= 1 and, times the group's 4,
// divide them; x and y share a dtype and no byte; scaling is f32's. Each
// refusal names the numbers.
TEST(PlanValidate, AllToAll) {
  Plan plan = makeMeshPlan();
  uint32_t x =
      addBuffer(plan, "x", DType::F32, {8, 3, 2}, BufferRole::Temporary);
  uint32_t y =
      addBuffer(plan, "y", DType::F32, {2, 12, 2}, BufferRole::Temporary);
  uint32_t small =
      addBuffer(plan, "small", DType::F32, {4, 3, 2}, BufferRole::Temporary);
  uint32_t half =
      addBuffer(plan, "half", DType::BF16, {2, 12, 2}, BufferRole::Temporary);
  // A buffer on x's very bytes, as a wrong memory plan would have it.
  Buffer alias = plan.buffers[x];
  alias.name = "x.alias";
  plan.buffers.push_back(alias);
  uint32_t xAlias = uint32_t(plan.buffers.size() - 1);
  plan.programs[1].instructions.push_back(
      makeInst(Opcode::AllToAll, {x}, {y}, "a2a", {3, 1, 2}, {1.0}));
  plan.summary.peakBytesPerArena = {plan.arenas[0].bytes};
  EXPECT_NO_THROW(validatePlan(plan));
  Plan back = roundTrip(plan);
  expectEqual(plan, back);
  Instruction &a2a = instructionNamed(plan, "a2a");
  // Every rank's block: 48 = 2 x 4 x 6, and sendOuter may be E/D too.
  a2a.ints = {3, 2, 1};
  a2a.floats = {0.25};
  EXPECT_NO_THROW(validatePlan(plan));

  a2a.outputs = {small};
  EXPECT_ERROR_HAS(validatePlan(plan), "'a2a' (AllToAll)", "output 0 buffer",
                   "'small' (f32 [4, 3, 2]) has 24 elements but input 0",
                   "has 48; an all-to-all moves every element once");
  a2a.outputs = {y};
  a2a.ints = {3, 0, 1};
  EXPECT_ERROR_HAS(validatePlan(plan), "'a2a' (AllToAll)",
                   "int sendOuter = 0 is outside [1, ");
  a2a.ints = {3, 1, -2};
  EXPECT_ERROR_HAS(validatePlan(plan), "int recvOuter = -2 is outside [1, ");
  a2a.ints = {3, 5, 1};
  EXPECT_ERROR_HAS(validatePlan(plan), "'a2a' (AllToAll)",
                   "sendOuter 5 x group size 4 = 20 runs do not divide the "
                   "48 elements of input 0");
  // The group is the mask's: 8 x 2 (dp) divides 48, 8 x 4 (dp x tp) not.
  a2a.ints = {1, 1, 8};
  EXPECT_NO_THROW(validatePlan(plan));
  a2a.ints = {3, 1, 8};
  EXPECT_ERROR_HAS(validatePlan(plan),
                   "recvOuter 8 x group size 4 = 32 runs do not divide the "
                   "48 elements of input 0");
  a2a.ints = {3, std::numeric_limits<int64_t>::max(), 1};
  EXPECT_ERROR_HAS(validatePlan(plan), "sendOuter 9223372036854775807 x "
                                       "group size 4 overflows");
  a2a.ints = {0, 1, 2};
  EXPECT_ERROR_HAS(validatePlan(plan), "int axes = 0 must be a non-zero");
  a2a.ints = {3, 1, 2};

  a2a.outputs = {half};
  EXPECT_ERROR_HAS(validatePlan(plan), "'half' (bf16 [2, 12, 2]) has dtype "
                                       "bf16 but input 0");
  a2a.inputs = {y};
  a2a.outputs = {x};
  EXPECT_NO_THROW(validatePlan(plan)); // the combine's way back
  a2a.outputs = {xAlias};
  a2a.inputs = {x};
  a2a.ints = {3, 1, 1};
  EXPECT_ERROR_HAS(validatePlan(plan), "'x.alias'", "overlaps input 0",
                   "this op cannot run in place");
}

// ZeRO-3's gather: a parameter chunk (its layout chunked over the gather's
// axes) into a temporary of D times its elements.
TEST(PlanValidate, GatherParameter) {
  Plan plan = makeMeshPlan();
  uint32_t chunk = addBuffer(plan, "w", DType::F32, {64}, BufferRole::Parameter,
                             {InitKind::Zeros, 0.0, 0.0});
  plan.buffers[chunk].layout.view = {16, 8};
  plan.buffers[chunk].layout.viewSplit = {0, 0};
  plan.buffers[chunk].layout.chunkAxes = 1;
  uint32_t whole =
      addBuffer(plan, "w.gathered", DType::F32, {16, 8}, BufferRole::Temporary);
  Program &fb = plan.programs[1];
  fb.instructions.insert(
      fb.instructions.begin(),
      makeInst(Opcode::GatherParameter, {chunk}, {whole}, "gather", {1}));
  EXPECT_NO_THROW(validatePlan(plan));
  Plan back = roundTrip(plan);
  expectEqual(plan, back);

  Instruction &gather = instructionNamed(plan, "gather");
  gather.ints = {3};
  EXPECT_ERROR_HAS(validatePlan(plan), "'gather' (GatherParameter)",
                   "is chunked over mesh axes mask 1 but the gather runs over "
                   "mask 3");
  gather.ints = {4};
  EXPECT_ERROR_HAS(validatePlan(plan), "int axes = 4 must be a non-zero bit "
                                       "mask over the mesh's 2 axes");
  gather.ints = {1};
  plan.buffers[whole].shape = {8, 8};
  plan.buffers[whole].bytes = 256;
  EXPECT_ERROR_HAS(validatePlan(plan), "'gather' (GatherParameter)",
                   "has 64 elements; the 2 chunks of",
                   "(64 elements each) make 128");
  plan.buffers[whole].shape = {16, 8};
  plan.buffers[whole].bytes = 512;
  gather.inputs = {bufferId(plan, "wte.weight.exp_avg")};
  EXPECT_ERROR_HAS(validatePlan(plan), "has role optimizer state; only a "
                                       "parameter's chunk (or its fetched "
                                       "copy) is gathered");
  // ZeRO-Infinity: the device copy of an offloaded chunk, a temporary
  // that carries the chunk's layout.
  uint32_t fetched =
      addBuffer(plan, "w.fetched", DType::F32, {64}, BufferRole::Temporary);
  gather.inputs = {fetched};
  EXPECT_ERROR_HAS(validatePlan(plan), "is chunked over mesh axes mask 0 but "
                                       "the gather runs over mask 1");
  plan.buffers[fetched].layout = plan.buffers[chunk].layout;
  EXPECT_NO_THROW(validatePlan(plan));
  gather.inputs = {chunk};
  gather.outputs = {bufferId(plan, "wte.weight")};
  EXPECT_ERROR_HAS(validatePlan(plan), "the gathered parameter must be a "
                                       "temporary");
  plan.mesh.clear();
  gather.outputs = {whole};
  EXPECT_ANY_THROW(validatePlan(plan));
}
