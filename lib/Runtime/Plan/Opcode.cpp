//===- Opcode.cpp - The opcode table and plan name helpers ----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The opcode table, expanded from Instructions.def (validatePlan checks
// instructions against it, describeOpcode prints it), and the names
// messages use for dtypes, roles and tiers.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Plan.h"

#include <algorithm>
#include <limits>

using namespace dsc::rt;

const std::vector<OpcodeInfo> &dsc::rt::opcodeTable() {
  static const std::vector<OpcodeInfo> table = [] {
    std::vector<OpcodeInfo> table;
#define DSC_INSTRUCTION_FILE "dsc/Runtime/Instructions.def"
#define DSC_GEN_TABLE
#include "dsc/Runtime/InstructionSetGen.inc"
#undef DSC_GEN_TABLE
#undef DSC_INSTRUCTION_FILE
    return table;
  }();
  return table;
}

const OpcodeInfo *dsc::rt::lookupOpcode(uint32_t raw) {
  // Opcode values are small: one slot per value, built once.
  static const std::vector<const OpcodeInfo *> byValue = [] {
    std::vector<const OpcodeInfo *> slots;
    for (const OpcodeInfo &info : opcodeTable()) {
      size_t v = size_t(info.opcode);
      if (slots.size() <= v)
        slots.resize(v + 1, nullptr);
      slots[v] = &info;
    }
    return slots;
  }();
  return raw < byValue.size() ? byValue[raw] : nullptr;
}

std::string dsc::rt::opcodeName(Opcode op) {
  if (const OpcodeInfo *info = lookupOpcode(uint32_t(op)))
    return info->name;
  return "opcode " + std::to_string(uint32_t(op));
}

int OpcodeInfo::groupAxesIndex() const {
  for (size_t i = 0; i < ints.size(); ++i)
    if (ints[i].kind == IntKind::Axes)
      return int(i);
  return -1;
}

static OperandKind kindAt(const std::vector<OperandInfo> &list, size_t i) {
  return list[std::min(i, list.size() - 1)].kind;
}
OperandKind OpcodeInfo::inputKind(size_t i) const { return kindAt(inputs, i); }
OperandKind OpcodeInfo::outputKind(size_t i) const {
  return kindAt(outputs, i);
}

static std::string operandNames(const std::vector<OperandInfo> &list,
                                bool variadic) {
  std::string s;
  for (size_t i = 0; i < list.size(); ++i)
    s += std::string(i ? ", " : "") + list[i].name;
  return variadic ? s + "..." : s;
}
std::string OpcodeInfo::inputNames() const {
  return operandNames(inputs, variadicInputs);
}
std::string OpcodeInfo::outputNames() const {
  return operandNames(outputs, variadicOutputs);
}

std::string dsc::rt::describeOpcode(const OpcodeInfo &info) {
  std::string s = std::string(info.name) + ": in(" + info.inputNames() +
                  ") out(" + info.outputNames() + ")";
  auto join = [](const char *what, auto &names, auto nameOf) {
    if (names.empty())
      return std::string();
    std::string list;
    for (const auto &n : names)
      list += (list.empty() ? "" : " ") + nameOf(n);
    return std::string(" ") + what + "(" + list + ")";
  };
  s += join("ints", info.ints, [](const IntInfo &i) {
    return std::string(i.name) + (i.kind == IntKind::List ? "..." : "");
  });
  s += join("floats", info.floats, [](const char *f) { return std::string(f); });
  return s;
}

std::string dsc::rt::describeOpcode(Opcode op) {
  const OpcodeInfo *info = lookupOpcode(uint32_t(op));
  return info ? describeOpcode(*info) : opcodeName(op) + ": unknown";
}

bool dsc::rt::isCollective(Opcode op) {
  const OpcodeInfo *info = lookupOpcode(uint32_t(op));
  return info && info->has(kCollective);
}

bool dsc::rt::isVocabParallel(Opcode op) {
  const OpcodeInfo *info = lookupOpcode(uint32_t(op));
  return info && info->has(kGroupKernel);
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
  case BufferRole::OffloadCopy:
    return "offload copy";
  case BufferRole::Input:
    return "input";
  case BufferRole::Output:
    return "output";
  case BufferRole::KvCache:
    return "kv cache";
  case BufferRole::CompressionError:
    return "compression error";
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

DataParallelPlace
dsc::rt::dataParallelPlace(const std::vector<Plan::MeshAxis> &mesh,
                           const std::vector<int64_t> &coords) {
  DataParallelPlace place;
  for (const char *name : {"dp", "edp", "ep"}) {
    const int64_t axis = findMeshAxis(mesh, name);
    if (axis < 0)
      continue;
    place.index = place.index * mesh[size_t(axis)].size +
                  (size_t(axis) < coords.size() ? coords[size_t(axis)] : 0);
    place.size *= mesh[size_t(axis)].size;
  }
  return place;
}

const Program *Plan::findProgram(const std::string &name) const {
  for (const Program &p : programs)
    if (p.name == name)
      return &p;
  return nullptr;
}

const CurriculumLength *Plan::curriculumAt(int64_t step) const {
  // Few entries (a length each), in step order: the last that has begun.
  const CurriculumLength *at = nullptr;
  for (const CurriculumLength &c : curriculum)
    if (c.fromStep <= step || !at)
      at = &c;
  return at;
}

std::string dsc::rt::curriculumProgramName(int64_t seqLength) {
  return "forward_backward.seq" + std::to_string(seqLength);
}

std::string dsc::rt::curriculumStageProgramName(const std::string &name,
                                                int64_t seqLength) {
  return name + ".seq" + std::to_string(seqLength);
}

bool dsc::rt::livesWithinOneStep(BufferRole role) {
  switch (role) {
  case BufferRole::Temporary:
  case BufferRole::Boundary:
  case BufferRole::Tokens:
  case BufferRole::Targets:
  case BufferRole::Loss:
    return true;
  default:
    return false;
  }
}

int64_t Plan::pipelineRanks() const {
  const int64_t axis = findMeshAxis(mesh, "pp");
  return stages.empty() || axis < 0 ? 0 : mesh[size_t(axis)].size;
}

std::vector<int64_t> PipelineStage::activationBuffers() const {
  std::vector<int64_t> ids = {input};
  ids.insert(ids.end(), residuals.begin(), residuals.end());
  return ids;
}

std::vector<std::string> PipelineStage::stepPrograms() const {
  std::vector<std::string> names;
  for (const std::string *name :
       {&forward, &forwardBackward, &backwardWeight, &step})
    if (!name->empty())
      names.push_back(*name);
  return names;
}

std::vector<int64_t> PipelineStage::gradientBuffers() const {
  return outputGrad >= 0 ? std::vector<int64_t>{outputGrad}
                         : std::vector<int64_t>{};
}

int64_t Plan::findBuffer(const std::string &name) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == name)
      return int64_t(i);
  return -1;
}

bool dsc::rt::isInferencePlan(const Plan &plan) {
  bool prefill = false, decode = false;
  for (const Program &p : plan.programs) {
    prefill |= p.name == "prefill";
    decode |= p.name == "decode";
  }
  return prefill && decode;
}
