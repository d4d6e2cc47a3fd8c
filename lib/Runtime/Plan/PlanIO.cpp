//===- PlanIO.cpp - Writing and reading binary plan files -----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The plan file format (see PlanIO.h for the layout). The reader treats the
// bytes as hostile: every read is bounds-checked, every count is capped by
// what the remaining bytes could hold, and every error names the field.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/PlanIO.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unordered_map>

using namespace dsc::rt;

namespace {

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

class Writer {
public:
  std::vector<uint8_t> out;

  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i)
      out.push_back(uint8_t(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i)
      out.push_back(uint8_t(v >> (8 * i)));
  }
  void i64(int64_t v) { u64(uint64_t(v)); }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    u64(bits);
  }
  void bytes(const void *p, size_t n) {
    const uint8_t *b = static_cast<const uint8_t *>(p);
    out.insert(out.end(), b, b + n);
  }
};

/// Interns names so each is stored once.
class StringTable {
public:
  uint32_t intern(const std::string &s) {
    auto [it, inserted] = index.try_emplace(s, uint32_t(strings.size()));
    if (inserted)
      strings.push_back(s);
    return it->second;
  }
  std::vector<std::string> strings;

private:
  std::unordered_map<std::string, uint32_t> index;
};

//===----------------------------------------------------------------------===//
// Reader
//===----------------------------------------------------------------------===//

class Reader {
public:
  Reader(const uint8_t *data, size_t size, size_t base, std::string what)
      : data(data), size(size), base(base), what(std::move(what)) {}

  [[noreturn]] void fail(const std::string &msg) const {
    throw Error(what + ": " + msg);
  }

  size_t remaining() const { return size - pos; }

  void need(size_t n, const std::string &field) const {
    if (remaining() < n)
      fail("truncated in " + field + ": needs " + std::to_string(n) +
           " bytes at offset " + std::to_string(base + pos) + ", " +
           std::to_string(remaining()) + " remain");
  }
  uint64_t le(int n, const std::string &field) {
    need(n, field);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i)
      v |= uint64_t(data[pos + i]) << (8 * i);
    pos += n;
    return v;
  }
  uint32_t u32(const std::string &field) { return uint32_t(le(4, field)); }
  uint64_t u64(const std::string &field) { return le(8, field); }
  int64_t i64(const std::string &field) { return int64_t(le(8, field)); }
  double f64(const std::string &field) {
    uint64_t bits = le(8, field);
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  /// A count of items at least `minItemBytes` each: refuses counts the rest
  /// of the body cannot hold, so a corrupt count never drives a huge
  /// allocation.
  uint32_t count(const std::string &field, size_t minItemBytes) {
    uint32_t n = u32(field + " count");
    if (minItemBytes && uint64_t(n) * minItemBytes > remaining())
      fail(field + " count " + std::to_string(n) + " needs at least " +
           std::to_string(uint64_t(n) * minItemBytes) + " bytes but only " +
           std::to_string(remaining()) + " remain");
    return n;
  }
  std::string str(const std::string &field) {
    uint32_t n = count(field + " length", 1);
    std::string s(reinterpret_cast<const char *>(data + pos), n);
    pos += n;
    return s;
  }

  const uint8_t *data;
  size_t size, pos = 0, base;
  std::string what;
};

template <typename E>
E checkedEnum(Reader &r, const std::string &field, uint32_t maxValue) {
  uint32_t v = r.u32(field);
  if (v > maxValue)
    r.fail(field + " has unknown value " + std::to_string(v));
  return E(v);
}

std::string bufferField(size_t i, const char *field) {
  return "buffers[" + std::to_string(i) + "]." + field;
}

/// A list of pipeline stages: per stage four program names, seven buffer
/// ids, the residuals, the weight-gradient program and its stash, three
/// slot banks and the compressed optimizer's program and scalars.
void writeStages(Writer &body, StringTable &names,
                 const std::vector<PipelineStage> &stages) {
  body.u32(uint32_t(stages.size()));
  for (const PipelineStage &st : stages) {
    body.u32(names.intern(st.forward));
    body.u32(names.intern(st.forwardBackward));
    body.u32(names.intern(st.optimizer));
    body.u32(names.intern(st.step));
    for (int64_t id : {st.input, st.output, st.outputGrad, st.inputGrad,
                       st.loss, st.gradNorm, st.learningRate})
      body.i64(id);
    body.u32(uint32_t(st.residuals.size()));
    for (int64_t id : st.residuals)
      body.i64(id);
    body.u32(names.intern(st.backwardWeight));
    body.u32(uint32_t(st.weightStash.size()));
    for (int64_t id : st.weightStash)
      body.i64(id);
    for (const PipelineStage::SlotBank *bank :
         {&st.activationSlots, &st.gradientSlots, &st.weightSlots}) {
      body.i64(bank->slots);
      body.u64(bank->offset);
      body.u64(bank->stride);
    }
    body.u32(names.intern(st.compressedOptimizer));
    body.i64(st.compressedGradNorm);
    body.i64(st.compressedLearningRate);
  }
}

} // namespace

std::vector<uint8_t> dsc::rt::writePlan(const Plan &plan) {
  StringTable names;
  for (const Plan::MeshAxis &axis : plan.mesh)
    names.intern(axis.name);
  for (const Buffer &b : plan.buffers)
    names.intern(b.name);
  for (const Program &p : plan.programs) {
    names.intern(p.name);
    for (const Instruction &inst : p.instructions)
      names.intern(inst.name);
  }
  auto internStages = [&](const std::vector<PipelineStage> &stages) {
    for (const PipelineStage &st : stages)
      for (const std::string *n :
           {&st.forward, &st.forwardBackward, &st.optimizer, &st.step,
            &st.backwardWeight, &st.compressedOptimizer})
        names.intern(*n);
  };
  internStages(plan.stages);
  for (const CurriculumLength &c : plan.curriculum) {
    names.intern(c.program);
    internStages(c.stages);
  }

  Writer body;
  body.i64(plan.vocabSize);
  body.i64(plan.seqLength);
  body.i64(plan.microBatchSize);
  body.i64(plan.microBatches);
  body.u32(plan.tokens);
  body.u32(plan.targets);
  body.u32(plan.loss);
  body.i64(plan.gradNorm);
  body.i64(plan.learningRate);
  body.i64(plan.gradientSeed);
  body.i64(plan.compressionFromStep);
  body.i64(plan.compressedGradNorm);
  body.i64(plan.compressedLearningRate);
  body.i64(plan.beta1);
  const ZeroOneAdamPlan &zo = plan.zeroOneAdam;
  body.i64(zo.enabled ? 1 : 0);
  for (int64_t v : {zo.varFreezeStep, zo.varUpdateScaler, zo.localStepScaler,
                    zo.localStepClipper})
    body.i64(v);
  for (int k = 0; k < 3; ++k) {
    body.i64(zo.gradNorm[k]);
    body.i64(zo.learningRate[k]);
    body.u64(zo.collectiveBytes[k]);
  }

  body.u32(uint32_t(names.strings.size()));
  for (const std::string &s : names.strings) {
    body.u32(uint32_t(s.size()));
    body.bytes(s.data(), s.size());
  }

  body.u32(uint32_t(plan.mesh.size()));
  for (const Plan::MeshAxis &axis : plan.mesh) {
    body.u32(names.intern(axis.name));
    body.i64(axis.size);
  }

  body.u32(uint32_t(plan.arenas.size()));
  for (const Arena &a : plan.arenas) {
    body.u32(uint32_t(a.tier));
    body.u64(a.bytes);
    body.i64(a.pipelineRank);
  }
  body.u32(uint32_t(plan.nvmePath.size()));
  body.bytes(plan.nvmePath.data(), plan.nvmePath.size());
  body.u64(plan.nvmeBlockBytes);
  body.i64(plan.nvmeQueueDepth);

  body.u32(uint32_t(plan.buffers.size()));
  for (const Buffer &b : plan.buffers) {
    body.u32(names.intern(b.name));
    body.u32(b.arena);
    body.u64(b.offset);
    body.u64(b.bytes);
    body.u32(uint32_t(b.dtype));
    body.u32(uint32_t(b.role));
    body.u32(uint32_t(b.init.kind));
    body.f64(b.init.std);
    body.f64(b.init.value);
    body.u32(uint32_t(b.shape.size()));
    for (int64_t d : b.shape)
      body.i64(d);
    body.u32(uint32_t(b.layout.view.size()));
    for (size_t d = 0; d < b.layout.view.size(); ++d) {
      body.i64(b.layout.view[d]);
      body.i64(d < b.layout.viewSplit.size() ? b.layout.viewSplit[d] : 0);
    }
    body.i64(b.layout.chunkAxes);
    body.u32(uint32_t(b.layout.shape.size()));
    for (int64_t d : b.layout.shape)
      body.i64(d);
  }

  body.u32(uint32_t(plan.programs.size()));
  for (const Program &p : plan.programs) {
    body.u32(names.intern(p.name));
    body.u32(uint32_t(p.instructions.size()));
    for (const Instruction &inst : p.instructions) {
      body.u32(uint32_t(inst.opcode));
      body.u32(names.intern(inst.name));
      body.u32(uint32_t(inst.inputs.size()));
      for (uint32_t id : inst.inputs)
        body.u32(id);
      body.u32(uint32_t(inst.outputs.size()));
      for (uint32_t id : inst.outputs)
        body.u32(id);
      body.u32(uint32_t(inst.ints.size()));
      for (int64_t v : inst.ints)
        body.i64(v);
      body.u32(uint32_t(inst.floats.size()));
      for (double v : inst.floats)
        body.f64(v);
    }
  }

  body.u32(uint32_t(plan.schedule));
  writeStages(body, names, plan.stages);

  body.u32(uint32_t(plan.summary.peakBytesPerArena.size()));
  for (uint64_t v : plan.summary.peakBytesPerArena)
    body.u64(v);
  body.u64(plan.summary.flopsPerMicroBatch);
  body.u64(plan.summary.collectiveBytesPerStep);
  body.u64(plan.summary.collectiveBytesPerCompressedStep);
  body.f64(plan.summary.pipelineBubble);

  // The curriculum's lengths: length, first step, rows and how samples are
  // cut, program, the ids of its tokens, targets and loss, its gradient
  // seed, FLOPs and collective bytes, its stages.
  body.u32(uint32_t(plan.curriculum.size()));
  for (const CurriculumLength &c : plan.curriculum) {
    body.i64(c.seqLength);
    body.i64(c.fromStep);
    body.i64(c.rows);
    body.u32(c.reshape ? 1 : 0);
    body.u32(names.intern(c.program));
    body.u32(c.tokens);
    body.u32(c.targets);
    body.u32(c.loss);
    body.i64(c.gradientSeed);
    body.u64(c.flopsPerMicroBatch);
    body.u64(c.collectiveBytesPerStep);
    writeStages(body, names, c.stages);
  }

  Writer file;
  file.bytes(kPlanMagic, sizeof(kPlanMagic));
  file.u32(kPlanFormatVersion);
  file.u32(0);
  file.u64(body.out.size());
  file.u64(fnv1a64(body.out.data(), body.out.size()));
  file.bytes(body.out.data(), body.out.size());
  return std::move(file.out);
}

void dsc::rt::writePlanFile(const Plan &plan, const std::string &path) {
  std::vector<uint8_t> bytes = writePlan(plan);
  std::ofstream os(path, std::ios::binary | std::ios::trunc);
  if (!os)
    throw Error("cannot open plan file '" + path +
                "' for writing: " + std::strerror(errno));
  os.write(reinterpret_cast<const char *>(bytes.data()),
           std::streamsize(bytes.size()));
  os.close();
  if (!os)
    throw Error("cannot write plan file '" + path + "'");
}

Plan dsc::rt::readPlan(const uint8_t *data, size_t size,
                       const std::string &what) {
  if (size == 0 && data == nullptr)
    data = reinterpret_cast<const uint8_t *>("");
  Reader header(data, size, 0, what);
  header.need(sizeof(kPlanMagic),
              "header magic (file has " + std::to_string(size) + " bytes)");
  if (std::memcmp(data, kPlanMagic, sizeof(kPlanMagic)) != 0)
    header.fail("not a dsc plan: the file does not start with the magic "
                "\"DSCPLAN\\0\"");
  header.pos = sizeof(kPlanMagic);
  uint32_t version = header.u32("header version");
  if (version != kPlanFormatVersion)
    header.fail("plan format version " + std::to_string(version) +
                " is not supported: this runtime reads version " +
                std::to_string(kPlanFormatVersion) +
                " (recompile the model with a matching dsc)");
  uint32_t reserved = header.u32("header reserved field");
  if (reserved != 0)
    header.fail("header reserved field is " + std::to_string(reserved) +
                ", expected 0");
  uint64_t bodyLength = header.u64("header body length");
  uint64_t checksum = header.u64("header checksum");
  if (bodyLength != header.remaining())
    header.fail("body length in the header is " + std::to_string(bodyLength) +
                " bytes but " + std::to_string(header.remaining()) +
                " follow the header (truncated or padded file)");
  const uint8_t *bodyData = data + kPlanHeaderSize;
  uint64_t actual = fnv1a64(bodyData, bodyLength);
  if (actual != checksum) {
    char buf[96];
    std::snprintf(buf, sizeof(buf),
                  "checksum mismatch: header says %016llx, body hashes to "
                  "%016llx",
                  (unsigned long long)checksum, (unsigned long long)actual);
    header.fail(std::string(buf) + " (the file is corrupt)");
  }

  Reader r(bodyData, bodyLength, kPlanHeaderSize, what);
  Plan plan;
  plan.version = version;
  plan.vocabSize = r.i64("model vocabSize");
  plan.seqLength = r.i64("model seqLength");
  plan.microBatchSize = r.i64("model microBatchSize");
  plan.microBatches = r.i64("model microBatches");
  plan.tokens = r.u32("well-known tokens");
  plan.targets = r.u32("well-known targets");
  plan.loss = r.u32("well-known loss");
  plan.gradNorm = r.i64("well-known gradNorm");
  plan.learningRate = r.i64("well-known learningRate");
  plan.gradientSeed = r.i64("well-known gradientSeed");
  plan.compressionFromStep = r.i64("well-known compressionFromStep");
  plan.compressedGradNorm = r.i64("well-known compressedGradNorm");
  plan.compressedLearningRate = r.i64("well-known compressedLearningRate");
  plan.beta1 = r.i64("well-known beta1");
  {
    ZeroOneAdamPlan &zo = plan.zeroOneAdam;
    const int64_t enabled = r.i64("zeroOneAdam enabled");
    if (enabled != 0 && enabled != 1)
      r.fail("zeroOneAdam enabled is " + std::to_string(enabled) +
             ", not 0 or 1");
    zo.enabled = enabled == 1;
    zo.varFreezeStep = r.i64("zeroOneAdam varFreezeStep");
    zo.varUpdateScaler = r.i64("zeroOneAdam varUpdateScaler");
    zo.localStepScaler = r.i64("zeroOneAdam localStepScaler");
    zo.localStepClipper = r.i64("zeroOneAdam localStepClipper");
    for (int k = 0; k < 3; ++k) {
      const std::string f =
          std::string("zeroOneAdam ") + kZeroOneAdamPrograms[k];
      zo.gradNorm[k] = r.i64(f + " gradNorm");
      zo.learningRate[k] = r.i64(f + " learningRate");
      zo.collectiveBytes[k] = r.u64(f + " collectiveBytes");
    }
  }

  std::vector<std::string> strings(r.count("strings", 4));
  for (size_t i = 0; i < strings.size(); ++i)
    strings[i] = r.str("strings[" + std::to_string(i) + "]");
  auto name = [&](const std::string &field) -> std::string {
    uint32_t idx = r.u32(field);
    if (idx >= strings.size())
      r.fail(field + " is string " + std::to_string(idx) + " but there are " +
             std::to_string(strings.size()) + " strings");
    return strings[idx];
  };

  // name, size.
  plan.mesh.resize(r.count("mesh", 12));
  for (size_t i = 0; i < plan.mesh.size(); ++i) {
    std::string f = "mesh[" + std::to_string(i) + "]";
    plan.mesh[i].name = name(f + ".name");
    plan.mesh[i].size = r.i64(f + " '" + plan.mesh[i].name + "' size");
  }

  plan.arenas.resize(r.count("arenas", 20));
  for (size_t i = 0; i < plan.arenas.size(); ++i) {
    std::string f = "arenas[" + std::to_string(i) + "]";
    plan.arenas[i].tier =
        checkedEnum<Tier>(r, f + ".tier", uint32_t(Tier::Nvme));
    plan.arenas[i].bytes = r.u64(f + ".bytes");
    plan.arenas[i].pipelineRank = r.i64(f + ".pipelineRank");
  }
  plan.nvmePath = r.str("nvmePath");
  plan.nvmeBlockBytes = r.u64("nvmeBlockBytes");
  plan.nvmeQueueDepth = r.i64("nvmeQueueDepth");

  // name, arena, offset, bytes, dtype, role, init kind, std, value, rank,
  // layout view rank, chunk axes.
  constexpr size_t kMinBufferBytes =
      4 + 4 + 8 + 8 + 4 + 4 + 4 + 8 + 8 + 4 + 4 + 8;
  plan.buffers.resize(r.count("buffers", kMinBufferBytes));
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    Buffer &b = plan.buffers[i];
    b.name = name(bufferField(i, "name"));
    std::string f = "buffers[" + std::to_string(i) + "] '" + b.name + "'";
    b.arena = r.u32(f + " arena");
    b.offset = r.u64(f + " offset");
    b.bytes = r.u64(f + " bytes");
    b.dtype = checkedEnum<DType>(r, f + " dtype", uint32_t(DType::F16));
    b.role = checkedEnum<BufferRole>(r, f + " role", uint32_t(kLastBufferRole));
    b.init.kind = checkedEnum<InitKind>(r, f + " init kind",
                                        uint32_t(InitKind::Constant));
    b.init.std = r.f64(f + " init std");
    b.init.value = r.f64(f + " init value");
    b.shape.resize(r.count(f + " shape", 8));
    for (int64_t &d : b.shape)
      d = r.i64(f + " shape");
    // The shard layout: view rank, (dim, split mask) pairs, chunk mask,
    // whole shape rank and dims.
    b.layout.view.resize(r.count(f + " layout view", 16));
    b.layout.viewSplit.resize(b.layout.view.size());
    for (size_t d = 0; d < b.layout.view.size(); ++d) {
      b.layout.view[d] = r.i64(f + " layout view");
      b.layout.viewSplit[d] = r.i64(f + " layout split");
    }
    b.layout.chunkAxes = r.i64(f + " layout chunk axes");
    b.layout.shape.resize(r.count(f + " layout shape", 8));
    for (int64_t &d : b.layout.shape)
      d = r.i64(f + " layout shape");
  }

  // name, instruction count.
  plan.programs.resize(r.count("programs", 8));
  for (size_t p = 0; p < plan.programs.size(); ++p) {
    Program &prog = plan.programs[p];
    prog.name = name("programs[" + std::to_string(p) + "].name");
    std::string pf = "program '" + prog.name + "'";
    // opcode, name, and four counts.
    prog.instructions.resize(r.count(pf + " instructions", 24));
    for (size_t i = 0; i < prog.instructions.size(); ++i) {
      Instruction &inst = prog.instructions[i];
      std::string f = pf + " instruction " + std::to_string(i);
      uint32_t raw = r.u32(f + " opcode");
      if (!lookupOpcode(raw))
        r.fail(f + " has unknown opcode " + std::to_string(raw));
      inst.opcode = Opcode(raw);
      inst.name = name(f + " name");
      f += " '" + inst.name + "' (" + opcodeName(inst.opcode) + ")";
      inst.inputs.resize(r.count(f + " inputs", 4));
      for (uint32_t &id : inst.inputs)
        id = r.u32(f + " inputs");
      inst.outputs.resize(r.count(f + " outputs", 4));
      for (uint32_t &id : inst.outputs)
        id = r.u32(f + " outputs");
      inst.ints.resize(r.count(f + " ints", 8));
      for (int64_t &v : inst.ints)
        v = r.i64(f + " ints");
      inst.floats.resize(r.count(f + " floats", 8));
      for (double &v : inst.floats)
        v = r.f64(f + " floats");
    }
  }

  // Per stage: four program names, seven buffer ids, the residuals, the
  // weight-gradient program and its stash, three slot banks, the
  // compressed optimizer's program and scalars.
  auto readStages = [&](const std::string &of) {
    std::vector<PipelineStage> stages(
        r.count(of + "pipeline stages",
                4 * 4 + 7 * 8 + 4 + 4 + 4 + 3 * 24 + 4 + 2 * 8));
    for (size_t k = 0; k < stages.size(); ++k) {
      PipelineStage &st = stages[k];
      std::string f = of + "stages[" + std::to_string(k) + "]";
      st.forward = name(f + ".forward");
      st.forwardBackward = name(f + ".forwardBackward");
      st.optimizer = name(f + ".optimizer");
      st.step = name(f + ".step");
      for (int64_t *id : {&st.input, &st.output, &st.outputGrad, &st.inputGrad,
                          &st.loss, &st.gradNorm, &st.learningRate})
        *id = r.i64(f + " buffer id");
      st.residuals.resize(r.count(f + " residuals", 8));
      for (int64_t &id : st.residuals)
        id = r.i64(f + " residual buffer id");
      st.backwardWeight = name(f + ".backwardWeight");
      st.weightStash.resize(r.count(f + " weight stash", 8));
      for (int64_t &id : st.weightStash)
        id = r.i64(f + " weight stash buffer id");
      for (PipelineStage::SlotBank *bank :
           {&st.activationSlots, &st.gradientSlots, &st.weightSlots}) {
        bank->slots = r.i64(f + " slot bank slots");
        bank->offset = r.u64(f + " slot bank offset");
        bank->stride = r.u64(f + " slot bank stride");
      }
      st.compressedOptimizer = name(f + ".compressedOptimizer");
      st.compressedGradNorm = r.i64(f + " compressedGradNorm buffer id");
      st.compressedLearningRate =
          r.i64(f + " compressedLearningRate buffer id");
    }
    return stages;
  };
  plan.schedule = checkedEnum<PipelineSchedule>(
      r, "pipeline schedule", uint32_t(PipelineSchedule::ZeroBubbleH1));
  plan.stages = readStages("");

  plan.summary.peakBytesPerArena.resize(
      r.count("summary peakBytesPerArena", 8));
  for (uint64_t &v : plan.summary.peakBytesPerArena)
    v = r.u64("summary peakBytesPerArena");
  plan.summary.flopsPerMicroBatch = r.u64("summary flopsPerMicroBatch");
  plan.summary.collectiveBytesPerStep = r.u64("summary collectiveBytesPerStep");
  plan.summary.collectiveBytesPerCompressedStep =
      r.u64("summary collectiveBytesPerCompressedStep");
  plan.summary.pipelineBubble = r.f64("summary pipelineBubble");
  if (!std::isfinite(plan.summary.pipelineBubble) ||
      plan.summary.pipelineBubble < 0)
    r.fail("summary pipelineBubble " +
           std::to_string(plan.summary.pipelineBubble) +
           " is not a fraction >= 0");
  plan.curriculum.resize(
      r.count("curriculum lengths", 8 + 8 + 8 + 4 + 4 + 3 * 4 + 8 + 8 + 8 + 4));
  for (size_t k = 0; k < plan.curriculum.size(); ++k) {
    CurriculumLength &c = plan.curriculum[k];
    const std::string f = "curriculum[" + std::to_string(k) + "]";
    c.seqLength = r.i64(f + " seqLength");
    c.fromStep = r.i64(f + " fromStep");
    c.rows = r.i64(f + " rows");
    const uint32_t reshape = r.u32(f + " reshape");
    if (reshape > 1)
      r.fail(f + " reshape is " + std::to_string(reshape) + ", not 0 or 1");
    c.reshape = reshape == 1;
    c.program = name(f + ".program");
    c.tokens = r.u32(f + " tokens");
    c.targets = r.u32(f + " targets");
    c.loss = r.u32(f + " loss");
    c.gradientSeed = r.i64(f + " gradientSeed");
    c.flopsPerMicroBatch = r.u64(f + " flopsPerMicroBatch");
    c.collectiveBytesPerStep = r.u64(f + " collectiveBytesPerStep");
    c.stages = readStages(f + " ");
  }
  if (r.remaining() != 0)
    r.fail(std::to_string(r.remaining()) +
           " unexpected bytes after the curriculum");

  try {
    validatePlan(plan);
  } catch (const Error &e) {
    throw Error(what + ": " + e.what());
  }
  return plan;
}

Plan dsc::rt::readPlanFile(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("plan file '" + path + "' is a directory");
  std::ifstream is(path, std::ios::binary);
  if (!is)
    throw Error("cannot open plan file '" + path +
                "': " + std::strerror(errno));
  std::vector<uint8_t> bytes;
  try {
    bytes.assign(std::istreambuf_iterator<char>(is),
                 std::istreambuf_iterator<char>());
  } catch (const std::exception &e) {
    throw Error("cannot read plan file '" + path + "': " + e.what());
  }
  if (is.bad())
    throw Error("cannot read plan file '" + path + "'");
  return readPlan(bytes.data(), bytes.size(), "plan file '" + path + "'");
}
