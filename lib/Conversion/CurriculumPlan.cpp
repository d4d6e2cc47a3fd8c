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
// and, overlapping them, each shorter length's, moved as a block to start
// where the longest plan's temporaries may start: no two programs run at
// once, so they share it. A shorter length's own persistent buffers (its
// ids, loss and constants, which must survive every other program) go
// after the largest temporaries' end.
//
//===----------------------------------------------------------------------===//

#include "dsc/Conversion/CurriculumPlan.h"

#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/PlanIO.h"

#include <algorithm>
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

Plan dsc::rt::joinCurriculumPlans(std::vector<CurriculumPart> parts) {
  if (parts.empty())
    throw Error("a curriculum needs at least one length");
  Plan joined = std::move(parts.back().plan);
  const int64_t lastFrom = parts.back().fromStep;
  parts.pop_back();
  if (!joined.stages.empty())
    throw Error("curriculum learning with pipeline stages (pp=" +
                std::to_string(joined.pipelineRanks()) +
                ") is not built: each stage's schedule would need a program "
                "per length; train the curriculum without pp");
  if (!joined.findProgram("forward_backward"))
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

  // Where temporaries may start, and how far they reach, per arena.
  const size_t arenas = joined.arenas.size();
  std::vector<uint64_t> temporariesFrom(arenas, 0), top(arenas, 0);
  for (const Buffer &b : joined.buffers)
    if (b.role != BufferRole::Temporary)
      temporariesFrom[b.arena] =
          std::max(temporariesFrom[b.arena], b.offset + b.bytes);
  for (size_t a = 0; a < arenas; ++a) {
    temporariesFrom[a] = alignUp(temporariesFrom[a]);
    top[a] = std::max<uint64_t>(joined.arenas[a].bytes, temporariesFrom[a]);
  }

  // Each shorter length's program and the buffers it uses; its own
  // persistent buffers are placed once every length's temporaries are in.
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
        p.microBatchSize != joined.microBatchSize ||
        p.vocabSize != joined.vocabSize || p.arenas.size() != arenas ||
        !p.stages.empty())
      throw Error("the plan at " + what + " is not the same plan as at " +
                  lengthName(joined.seqLength) +
                  " (mesh, micro-batch size, vocabulary, arenas or stages "
                  "differ)");
    for (size_t a = 0; a < arenas; ++a)
      if (p.arenas[a].tier != joined.arenas[a].tier)
        throw Error("the plan at " + what + " has arena " + std::to_string(a) +
                    " in another memory tier");
    const Program *fb = p.findProgram("forward_backward");
    if (!fb)
      throw Error("the plan at " + what + " has no \"forward_backward\"");
    const std::string program = curriculumProgramName(length);

    // The buffers the program and the executor use at this length.
    std::vector<char> used(p.buffers.size(), 0);
    for (const Instruction &inst : fb->instructions)
      for (const std::vector<uint32_t> *ids : {&inst.inputs, &inst.outputs})
        for (uint32_t id : *ids)
          used[id] = 1;
    used[p.tokens] = used[p.targets] = used[p.loss] = 1;
    if (p.gradientSeed >= 0)
      used[size_t(p.gradientSeed)] = 1;

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
            mine.role != b.role || mine.bytes != b.bytes)
          throw Error(std::string(roleName(b.role)) + " '" + b.name +
                      "' differs between " + what + " and " +
                      lengthName(joined.seqLength) +
                      " (dtype, shape or size): a length may change only "
                      "the activations");
        idMap[id] = it->second;
        continue;
      }
      if (b.role == BufferRole::Temporary)
        lowestIn[b.arena] = std::min(lowestIn[b.arena], b.offset);
    }
    for (uint32_t id = 0; id < p.buffers.size(); ++id) {
      if (!used[id] || idMap[id] >= 0)
        continue;
      Buffer b = p.buffers[id];
      b.name =
          b.name.rfind("forward_backward", 0) == 0
              ? program + b.name.substr(std::string("forward_backward").size())
              : "seq" + std::to_string(length) + "." + b.name;
      const uint32_t newId = uint32_t(joined.buffers.size());
      if (b.role == BufferRole::Temporary) {
        b.offset = temporariesFrom[b.arena] + (b.offset - lowestIn[b.arena]);
        top[b.arena] = std::max(top[b.arena], b.offset + b.bytes);
      } else {
        persistent.push_back({newId, b.bytes});
      }
      idMap[id] = newId;
      joined.buffers.push_back(std::move(b));
    }

    Program moved;
    moved.name = program;
    moved.instructions = fb->instructions;
    for (Instruction &inst : moved.instructions)
      for (std::vector<uint32_t> *ids : {&inst.inputs, &inst.outputs})
        for (uint32_t &id : *ids)
          id = uint32_t(idMap[id]);
    joined.programs.push_back(std::move(moved));

    CurriculumLength entry;
    entry.seqLength = length;
    entry.fromStep = part.fromStep;
    entry.program = program;
    entry.tokens = uint32_t(idMap[p.tokens]);
    entry.targets = uint32_t(idMap[p.targets]);
    entry.loss = uint32_t(idMap[p.loss]);
    entry.gradientSeed =
        p.gradientSeed >= 0 ? idMap[size_t(p.gradientSeed)] : -1;
    entry.flopsPerMicroBatch = p.summary.flopsPerMicroBatch;
    lengths.push_back(entry);
  }

  // The shorter lengths' own persistent buffers, above every program's
  // temporaries.
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
  longest.program = "forward_backward";
  longest.tokens = joined.tokens;
  longest.targets = joined.targets;
  longest.loss = joined.loss;
  longest.gradientSeed = joined.gradientSeed;
  longest.flopsPerMicroBatch = joined.summary.flopsPerMicroBatch;
  lengths.push_back(longest);
  joined.curriculum = std::move(lengths);
  validatePlan(joined);
  return joined;
}
