//===- CurriculumPlan.cpp - one plan for a curriculum's lengths -----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Per arena, the joined plan's bytes are laid out as
//
//   [ the longest plan's persistent buffers | temporaries ............ ]
//   [ ...............................        | the shorter lengths' own ]
//
// where the temporaries region holds the longest plan's (as it planned them)
// and, overlapping them, each shorter length's step-scoped buffers — its
// temporaries and what lives only through its step (a pipeline's boundary
// buffers and slot banks, the ids and the loss) — moved as one block to
// start where the longest plan's temporaries may start: no two lengths'
// steps run at once, and the optimizer runs after the step, so they share
// it (validatePlan's curriculum scopes). A shorter length's other buffers
// (its constants, which must survive every other program) go after the
// largest block's end.
//
//===----------------------------------------------------------------------===//

#include "dsc/Conversion/CurriculumPlan.h"

#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/SeqlenReshape.h"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>

using namespace dsc::rt;

namespace {

constexpr uint64_t kAlign = 4096;

uint64_t alignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

/// The roles a shorter length's program shares with the plan (by name):
/// what the optimizer and checkpoints own.
bool shared(BufferRole role) {
  switch (role) {
  case BufferRole::Parameter:
  case BufferRole::Gradient:
  case BufferRole::OptimizerState:
  case BufferRole::OffloadCopy:
  case BufferRole::CompressionError:
    return true;
  default:
    return false;
  }
}

std::string lengthName(int64_t length) {
  return "sequence length " + std::to_string(length);
}

} // namespace

Plan dsc::rt::joinCurriculumPlans(std::vector<CurriculumPart> parts,
                                  bool reshape) {
  if (parts.empty())
    throw Error("a curriculum needs at least one length");
  Plan joined = std::move(parts.back().plan);
  const int64_t lastFrom = parts.back().fromStep;
  parts.pop_back();
  const bool pipelined = !joined.stages.empty();
  if (!pipelined && !joined.findProgram("forward_backward"))
    throw Error("the plan at " + lengthName(joined.seqLength) +
                " has no \"forward_backward\" program to train with");
  // The delayed parameter update runs the optimizer beside the next step's
  // forward and backward, whose temporaries the planner kept apart from
  // the optimizer's; a shorter length's, moved here, would not be.
  for (const Program &prog : joined.programs)
    for (const Instruction &inst : prog.instructions)
      if (inst.opcode == Opcode::OverlapNextStep)
        throw Error("curriculum learning with the delayed parameter update "
                    "(dpu=1) is not built: its optimizer runs beside the next "
                    "step, whose length may change");

  std::unordered_map<std::string, uint32_t> sharedIds;
  for (uint32_t id = 0; id < joined.buffers.size(); ++id)
    if (shared(joined.buffers[id].role))
      sharedIds.emplace(joined.buffers[id].name, id);

  // What lives only through the longest plan's own step (its programs
  // alone use it: no optimizer, evaluation or loss program) is dead while
  // a shorter length's step runs, so a shorter length's block may start
  // below it, above everything else.
  std::set<std::string> longestStep;
  if (pipelined) {
    for (const PipelineStage &st : joined.stages)
      for (const std::string &name : st.stepPrograms())
        longestStep.insert(name);
  } else {
    longestStep.insert("forward_backward");
  }
  std::vector<char> inStep(joined.buffers.size(), 0),
      elsewhere(joined.buffers.size(), 0);
  for (const Program &prog : joined.programs)
    for (const Instruction &inst : prog.instructions)
      for (const std::vector<uint32_t> *ids : {&inst.inputs, &inst.outputs})
        for (uint32_t id : *ids)
          (longestStep.count(prog.name) ? inStep : elsewhere)[id] = 1;

  // Where a shorter length's block may start, and how far anything
  // reaches, per arena.
  const size_t arenas = joined.arenas.size();
  std::vector<uint64_t> temporariesFrom(arenas, 0), top(arenas, 0);
  for (uint32_t id = 0; id < joined.buffers.size(); ++id) {
    const Buffer &b = joined.buffers[id];
    if (b.role == BufferRole::Temporary ||
        (livesWithinOneStep(b.role) && inStep[id] && !elsewhere[id]))
      continue;
    temporariesFrom[b.arena] =
        std::max(temporariesFrom[b.arena], b.offset + b.bytes);
  }
  for (size_t a = 0; a < arenas; ++a) {
    temporariesFrom[a] = alignUp(temporariesFrom[a]);
    top[a] = std::max<uint64_t>(joined.arenas[a].bytes, temporariesFrom[a]);
  }

  // Each shorter length's programs and the buffers they use; its own
  // persistent buffers are placed once every length's block is in.
  struct Pending {
    uint32_t id;
    uint64_t bytes;
  };
  std::vector<Pending> persistent;
  std::vector<CurriculumLength> lengths;
  for (CurriculumPart &part : parts) {
    Plan &p = part.plan;
    const int64_t length = p.seqLength;
    const std::string what = lengthName(length);
    if (p.mesh.size() != joined.mesh.size() ||
        meshString(p.mesh) != meshString(joined.mesh) ||
        p.microBatchSize != (reshape
                                 ? seqlenReshapeRows(joined.microBatchSize,
                                                     joined.seqLength, length)
                                 : joined.microBatchSize) ||
        p.vocabSize != joined.vocabSize || p.arenas.size() != arenas ||
        p.stages.size() != joined.stages.size() ||
        p.schedule != joined.schedule)
      throw Error("the plan at " + what + " is not the same plan as at " +
                  lengthName(joined.seqLength) +
                  " (mesh, micro-batch rows, vocabulary, arenas, stages or "
                  "schedule differ)");
    for (size_t a = 0; a < arenas; ++a)
      if (p.arenas[a].tier != joined.arenas[a].tier ||
          p.arenas[a].pipelineRank != joined.arenas[a].pipelineRank)
        throw Error("the plan at " + what + " has arena " + std::to_string(a) +
                    " in another memory tier or on another pipeline rank");

    // The programs a step at this length runs, under their joined names.
    std::vector<std::pair<const Program *, std::string>> programs;
    auto take = [&](const std::string &name, const std::string &as) {
      const Program *prog = p.findProgram(name);
      if (!prog)
        throw Error("the plan at " + what + " has no \"" + name + "\"");
      programs.push_back({prog, as});
    };
    if (pipelined) {
      for (const PipelineStage &st : p.stages)
        for (const std::string &name : st.stepPrograms())
          take(name, curriculumStageProgramName(name, length));
    } else {
      take("forward_backward", curriculumProgramName(length));
    }

    // The buffers those programs and the executor use at this length.
    std::vector<char> used(p.buffers.size(), 0);
    for (const auto &[prog, as] : programs)
      for (const Instruction &inst : prog->instructions)
        for (const std::vector<uint32_t> *ids : {&inst.inputs, &inst.outputs})
          for (uint32_t id : *ids)
            used[id] = 1;
    used[p.tokens] = used[p.targets] = used[p.loss] = 1;
    if (p.gradientSeed >= 0)
      used[size_t(p.gradientSeed)] = 1;
    for (const PipelineStage &st : p.stages) {
      std::vector<int64_t> ids = st.activationBuffers();
      for (const std::vector<int64_t> *more : {&st.weightStash, &st.residuals})
        ids.insert(ids.end(), more->begin(), more->end());
      for (int64_t id : {st.output, st.outputGrad, st.inputGrad, st.loss})
        ids.push_back(id);
      for (int64_t id : ids)
        if (id >= 0)
          used[size_t(id)] = 1;
    }

    std::vector<int64_t> idMap(p.buffers.size(), -1);
    std::vector<uint64_t> lowestIn(arenas, ~uint64_t(0));
    for (uint32_t id = 0; id < p.buffers.size(); ++id) {
      if (!used[id])
        continue;
      const Buffer &b = p.buffers[id];
      if (shared(b.role)) {
        auto it = sharedIds.find(b.name);
        if (it == sharedIds.end())
          throw Error("the program at " + what + " uses " + roleName(b.role) +
                      " '" + b.name + "', which the plan at " +
                      lengthName(joined.seqLength) + " does not have");
        const Buffer &mine = joined.buffers[it->second];
        if (mine.dtype != b.dtype || mine.shape != b.shape ||
            mine.role != b.role || mine.bytes != b.bytes ||
            mine.arena != b.arena)
          throw Error(std::string(roleName(b.role)) + " '" + b.name +
                      "' differs between " + what + " and " +
                      lengthName(joined.seqLength) +
                      " (dtype, shape, size or arena): a length may change "
                      "only the activations");
        idMap[id] = it->second;
        continue;
      }
      if (livesWithinOneStep(b.role))
        lowestIn[b.arena] = std::min(lowestIn[b.arena], b.offset);
    }
    for (const PipelineStage &st : p.stages)
      for (auto [bank, ids] :
           {std::pair{&st.activationSlots, st.activationBuffers()},
            std::pair{&st.gradientSlots, st.gradientBuffers()},
            std::pair{&st.weightSlots, st.weightStash}})
        if (!ids.empty()) {
          const uint32_t a = p.buffers[size_t(ids[0])].arena;
          lowestIn[a] = std::min(lowestIn[a], bank->offset);
        }
    // The step-scoped block moves by one offset per arena, so it keeps
    // the length's own layout (its slot banks included).
    auto moved = [&](uint32_t arena, uint64_t offset) {
      return temporariesFrom[arena] + (offset - lowestIn[arena]);
    };
    for (uint32_t id = 0; id < p.buffers.size(); ++id) {
      if (!used[id] || idMap[id] >= 0)
        continue;
      Buffer b = p.buffers[id];
      b.name = b.name.rfind("forward_backward", 0) == 0
                   ? curriculumProgramName(length) +
                         b.name.substr(std::string("forward_backward").size())
                   : "seq" + std::to_string(length) + "." + b.name;
      const uint32_t newId = uint32_t(joined.buffers.size());
      if (livesWithinOneStep(b.role)) {
        b.offset = moved(b.arena, b.offset);
        top[b.arena] = std::max(top[b.arena], b.offset + b.bytes);
      } else {
        persistent.push_back({newId, b.bytes});
      }
      idMap[id] = newId;
      joined.buffers.push_back(std::move(b));
    }
    auto mapId = [&](int64_t id) { return id < 0 ? id : idMap[size_t(id)]; };

    for (const auto &[prog, as] : programs) {
      Program copy;
      copy.name = as;
      copy.instructions = prog->instructions;
      for (Instruction &inst : copy.instructions)
        for (std::vector<uint32_t> *ids : {&inst.inputs, &inst.outputs})
          for (uint32_t &id : *ids)
            id = uint32_t(idMap[id]);
      joined.programs.push_back(std::move(copy));
    }

    CurriculumLength entry;
    entry.seqLength = length;
    entry.fromStep = part.fromStep;
    entry.program = pipelined ? "" : curriculumProgramName(length);
    entry.rows = p.microBatchSize;
    entry.reshape = reshape;
    entry.tokens = uint32_t(idMap[p.tokens]);
    entry.targets = uint32_t(idMap[p.targets]);
    entry.loss = uint32_t(idMap[p.loss]);
    entry.gradientSeed = mapId(p.gradientSeed);
    entry.flopsPerMicroBatch = p.summary.flopsPerMicroBatch;
    entry.collectiveBytesPerStep = p.summary.collectiveBytesPerStep;
    // Each stage at this length: its programs and step-scoped buffers,
    // the plan's optimizer and scalars.
    for (size_t k = 0; k < p.stages.size(); ++k) {
      PipelineStage st = p.stages[k];
      const PipelineStage &own = joined.stages[k];
      for (std::string *name :
           {&st.forward, &st.forwardBackward, &st.backwardWeight, &st.step})
        if (!name->empty())
          *name = curriculumStageProgramName(*name, length);
      for (int64_t *id :
           {&st.input, &st.output, &st.outputGrad, &st.inputGrad, &st.loss})
        *id = mapId(*id);
      for (std::vector<int64_t> *ids : {&st.residuals, &st.weightStash})
        for (int64_t &id : *ids)
          id = mapId(id);
      const PipelineStage &was = p.stages[k];
      for (auto [bank, ids] :
           {std::pair{&st.activationSlots, was.activationBuffers()},
            std::pair{&st.gradientSlots, was.gradientBuffers()},
            std::pair{&st.weightSlots, was.weightStash}}) {
        if (ids.empty())
          continue;
        const uint32_t a = p.buffers[size_t(ids[0])].arena;
        bank->offset = moved(a, bank->offset);
        top[a] = std::max(top[a],
                          bank->offset + bank->stride * uint64_t(bank->slots));
      }
      st.optimizer = own.optimizer;
      st.compressedOptimizer = own.compressedOptimizer;
      st.gradNorm = own.gradNorm;
      st.learningRate = own.learningRate;
      st.compressedGradNorm = own.compressedGradNorm;
      st.compressedLearningRate = own.compressedLearningRate;
      entry.stages.push_back(std::move(st));
    }
    lengths.push_back(std::move(entry));
  }

  // The shorter lengths' own persistent buffers, above every length's
  // block.
  for (const Pending &pending : persistent) {
    Buffer &b = joined.buffers[pending.id];
    b.offset = alignUp(top[b.arena]);
    top[b.arena] = b.offset + pending.bytes;
  }
  for (size_t a = 0; a < arenas; ++a) {
    joined.arenas[a].bytes = std::max(joined.arenas[a].bytes, top[a]);
    if (a < joined.summary.peakBytesPerArena.size())
      joined.summary.peakBytesPerArena[a] = joined.arenas[a].bytes;
  }

  CurriculumLength longest;
  longest.seqLength = joined.seqLength;
  longest.fromStep = lastFrom;
  longest.program = pipelined ? "" : "forward_backward";
  longest.rows = joined.microBatchSize;
  longest.reshape = reshape;
  longest.tokens = joined.tokens;
  longest.targets = joined.targets;
  longest.loss = joined.loss;
  longest.gradientSeed = joined.gradientSeed;
  longest.flopsPerMicroBatch = joined.summary.flopsPerMicroBatch;
  longest.collectiveBytesPerStep = joined.summary.collectiveBytesPerStep;
  lengths.push_back(longest);
  joined.curriculum = std::move(lengths);
  validatePlan(joined);
  return joined;
}
