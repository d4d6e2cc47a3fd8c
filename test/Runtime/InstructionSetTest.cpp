//===- InstructionSetTest.cpp - The instruction set is defined once -------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Instructions.def is the only definition of the plan's instruction set.
// These tests show it two ways: a definition of the test's own (one line for
// a made-up opcode) generates a working encoder, decoder and verifier entry
// with no other code; and every opcode of the real definition is encoded by
// the lowering and has a case in each backend, read from the sources.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Instructions.h"
#include "dsc/Runtime/PlanIO.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace testops {
#define DSC_INSTRUCTION_FILE "Inputs/TestInstructions.def"
#define DSC_GEN_STRUCTS
#include "dsc/Runtime/InstructionSetGen.inc"
#undef DSC_GEN_STRUCTS
#undef DSC_INSTRUCTION_FILE
} // namespace testops

using namespace dsc::rt;

namespace {

const std::vector<OpcodeInfo> &testTable() {
  static const std::vector<OpcodeInfo> table = [] {
    std::vector<OpcodeInfo> table;
#define DSC_INSTRUCTION_FILE "Inputs/TestInstructions.def"
#define DSC_GEN_TABLE
#include "dsc/Runtime/InstructionSetGen.inc"
#undef DSC_GEN_TABLE
#undef DSC_INSTRUCTION_FILE
    return table;
  }();
  return table;
}

TEST(InstructionSet, OwnDefinitionEncodesAndDecodesByName) {
  testops::Dummy d;
  d.count = -7;
  d.flag = true;
  d.axes = 2;
  d.mode = 1;
  d.accumulate = 3;
  d.offsets = {4, 5};
  d.scale = 0.25;
  Instruction inst;
  d.encode(inst);
  EXPECT_EQ(uint32_t(inst.opcode), 250u);
  EXPECT_EQ(inst.ints, (std::vector<int64_t>{-7, 1, 2, 1, 3, 4, 5}));
  EXPECT_EQ(inst.floats, (std::vector<double>{0.25}));
  testops::Dummy back = testops::Dummy::decode(inst);
  EXPECT_EQ(back.count, -7);
  EXPECT_TRUE(back.flag);
  EXPECT_EQ(back.axes, 2);
  EXPECT_EQ(back.mode, 1);
  EXPECT_EQ(back.accumulate, 3u);
  EXPECT_EQ(back.offsets, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(back.scale, 0.25);
}

TEST(InstructionSet, OwnDefinitionMakesTheTableEntry) {
  ASSERT_EQ(testTable().size(), 2u);
  const OpcodeInfo &info = testTable()[0];
  EXPECT_STREQ(info.name, "Dummy");
  EXPECT_EQ(describeOpcode(info),
            "Dummy: in(a, ids) out(y, loss) ints(count flag axes mode "
            "accumulate offsets...) floats(scale)");
  EXPECT_EQ(info.inputKind(1), OperandKind::Ids);
  EXPECT_EQ(info.outputKind(1), OperandKind::OwnFloat);
  EXPECT_EQ(info.groupAxesIndex(), 2);
  const OpcodeInfo &reduce = testTable()[1];
  EXPECT_TRUE(reduce.has(kCollective));
  EXPECT_TRUE(reduce.inPlace);
  EXPECT_EQ(describeOpcode(reduce), "DummyReduce: in(x...) out(x...) ints(axes)");
}

/// A plan on a dp=2 tp=2 mesh with the buffers the dummy needs.
Plan dummyPlan() {
  Plan plan;
  plan.vocabSize = 8;
  plan.seqLength = 2;
  plan.microBatchSize = 1;
  plan.mesh = {{"dp", 2}, {"tp", 2}};
  plan.arenas = {{Tier::Device, 4096}};
  auto add = [&](const char *name, DType dtype, std::vector<int64_t> shape) {
    Buffer b;
    b.name = name;
    b.dtype = dtype;
    b.shape = shape;
    b.offset = plan.buffers.empty()
                   ? 0
                   : plan.buffers.back().offset + plan.buffers.back().bytes;
    b.bytes = uint64_t(numElements(shape)) * dtypeSize(dtype);
    plan.buffers.push_back(b);
  };
  add("a", DType::BF16, {2, 3});
  add("ids", DType::I32, {2});
  add("y", DType::BF16, {2, 3});
  add("loss", DType::F32, {});
  add("notFloat", DType::I32, {2, 3});
  plan.programs.push_back({"forward", {}});
  return plan;
}

Instruction dummyInstruction() {
  testops::Dummy d;
  d.axes = 1;
  d.offsets = {0, 1};
  Instruction inst;
  d.encode(inst);
  inst.inputs = {0, 1};
  inst.outputs = {2, 3};
  inst.name = "dummy";
  return inst;
}

/// checkInstructionSignature's message for the dummy, "" when it passes.
std::string check(const Plan &plan, const Instruction &inst) {
  Program prog{"forward", {inst}};
  try {
    checkInstructionSignature(plan, prog, 0, testTable()[0]);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

TEST(InstructionSet, OwnDefinitionIsVerified) {
  Plan plan = dummyPlan();
  EXPECT_EQ(check(plan, dummyInstruction()), "");

  auto expectError = [&](Instruction inst, const std::string &want) {
    std::string got = check(plan, inst);
    EXPECT_NE(got.find(want), std::string::npos) << got;
    EXPECT_NE(got.find("'dummy'"), std::string::npos) << got;
  };
  Instruction inst = dummyInstruction();
  inst.inputs.pop_back();
  expectError(inst, "expects 2 inputs but has 1");
  inst = dummyInstruction();
  inst.ints.pop_back(); // the list is one per dim of input 0
  expectError(inst, "expects 7 ints but has 6");
  inst = dummyInstruction();
  inst.ints[1] = 2;
  expectError(inst, "int flag = 2 is outside [0, 1]");
  inst = dummyInstruction();
  inst.ints[3] = 3;
  expectError(inst, "int mode = 3 is outside [0, 2]");
  inst = dummyInstruction();
  inst.ints[4] = 4; // two outputs: bits 0 and 1 only
  expectError(inst, "int accumulate = 4 is outside [0, 3]");
  inst = dummyInstruction();
  inst.ints[2] = 4;
  expectError(inst, "non-zero bit mask over the mesh's 2 axes");
  inst = dummyInstruction();
  inst.inputs = {4, 1};
  expectError(inst, "must be a float buffer");
  inst = dummyInstruction();
  inst.inputs = {0, 0};
  expectError(inst, "holds token ids and must be i32");
  inst = dummyInstruction();
  inst.floats[0] = std::numeric_limits<double>::infinity();
  expectError(inst, "float 0 is not finite");

  Plan oneRank = dummyPlan();
  oneRank.mesh.clear();
  std::string got = check(oneRank, dummyInstruction());
  EXPECT_NE(got.find("needs the plan's mesh"), std::string::npos) << got;
}

//===----------------------------------------------------------------------===//
// The real definition: every opcode is lowered and run by each backend.
//===----------------------------------------------------------------------===//

std::string readSource(const std::string &path) {
  std::ifstream is(std::string(DSC_SOURCE_DIR) + "/" + path);
  EXPECT_TRUE(is) << "cannot read " << path;
  std::stringstream ss;
  ss << is.rdbuf();
  return ss.str();
}

TEST(InstructionSet, EveryOpcodeIsLoweredAndHasAKernelInEachBackend) {
  const std::string lowering = readSource("lib/Conversion/DscToPlan.cpp");
  const std::string cpu = readSource("lib/Runtime/Cpu/CpuBackend.cpp");
  // The CUDA backend converts casts before its dispatch (CudaBackend.cpp)
  // and runs the rest in CudaInstructions.cpp.
  const std::string cuda = readSource("lib/Runtime/Cuda/CudaBackend.cpp") +
                           readSource("lib/Runtime/Cuda/CudaInstructions.cpp");
  const std::string executor = readSource("lib/Runtime/Exec/ProgramRunner.cpp");
  const std::string pipelineStep =
      readSource("lib/Runtime/Exec/PipelineStep.cpp");
  auto has = [](const std::string &text, const std::string &what) {
    return text.find(what) != std::string::npos;
  };
  for (const OpcodeInfo &info : opcodeTable()) {
    const std::string name = info.name;
    // The instruction type used as a template argument (first or last),
    // declared, or constructed.
    EXPECT_TRUE(has(lowering, "ops::" + name + ">") ||
                has(lowering, "ops::" + name + ",") ||
                has(lowering, "ops::" + name + " ") ||
                has(lowering, "ops::" + name + "("))
        << name << " is never encoded by the lowering";
    const std::string kase = "case Opcode::" + name + ":";
    // Collectives run in the executor over the communicator, and so do
    // the transfers between tiers (an NVMe side through its file) and the
    // delayed parameter update's hand-off to a host thread; the backends
    // compute.
    const bool executorRuns = info.has(kCollective) || name == "Zero" ||
                              name == "Transfer" || name == "OverlapNextStep";
    if (executorRuns) {
      EXPECT_TRUE(has(executor, kase)) << name << " has no case in the executor";
      continue;
    }
    // A pipeline stage's step runs in the executor's pipelined step.
    if (info.has(kPipelineStep)) {
      EXPECT_TRUE(has(pipelineStep, kase))
          << name << " has no case in the executor's pipelined step";
      continue;
    }
    EXPECT_TRUE(has(cpu, kase)) << name << " has no CPU kernel";
    // The CUDA backend refuses the vocabulary-parallel ops by their flag,
    // and the inference programs' ops by name, when it loads a plan
    // (tensor slicing and inference are not on CUDA yet).
    EXPECT_TRUE(has(cuda, kase) ||
                has(cuda, "inst.opcode == Opcode::" + name + ")") ||
                info.has(kGroupKernel))
        << name << " has no CUDA kernel";
  }
}

} // namespace
