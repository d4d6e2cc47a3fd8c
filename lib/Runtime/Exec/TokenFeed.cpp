//===- TokenFeed.cpp - Token and target ids into the plan's buffers -------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The ids' checks and copies, and the host mirrors of a device backend.
//
//===----------------------------------------------------------------------===//

#include "TokenFeed.h"

#include "dsc/Runtime/InstructionArgs.h"
#include "dsc/Runtime/Instructions.h"
#include "dsc/Runtime/SeqlenReshape.h"
#include "dsc/Runtime/ShardLayout.h"

#include <algorithm>
#include <string>

using namespace dsc::rt;

int64_t TokenFeed::vocabularyReading(uint32_t ids) const {
  // The vocabulary of the first instruction that reads `ids` as token or
  // target ids (a vocabulary-parallel one holds 1/group of it).
  for (const Program &prog : plan.programs)
    for (const Instruction &inst : prog.instructions) {
      if (inst.inputs.size() < 2 || inst.inputs[1] != ids)
        continue;
      const Buffer &first = plan.buffers[inst.inputs[0]];
      switch (inst.opcode) {
      case Opcode::Embedding:
        return first.shape[0];
      case Opcode::CrossEntropy:
      case Opcode::CrossEntropyGrad:
        return lastDim(first);
      case Opcode::VocabParallelEmbedding:
        return first.shape[0] * groupSize(plan.mesh, groupAxesOf(inst));
      case Opcode::VocabParallelCrossEntropy:
      case Opcode::VocabParallelCrossEntropyGrad:
        return lastDim(first) * groupSize(plan.mesh, groupAxesOf(inst));
      default:
        break;
      }
    }
  return 0;
}

void TokenFeed::set(uint32_t id, const int32_t *data, size_t count,
                    const char *what) {
  BufferView v = arenas.view(id);
  if (int64_t(count) != v.size())
    throw Error(std::string("set") + what + ": got " + std::to_string(count) +
                " ids for a buffer of " + std::to_string(v.size()));
  // The CPU kernels check ids where they read them and name the
  // instruction; a device backend's are checked here, on the host, so the
  // error names the position without a wait.
  if (!backend.hostAddressable())
    if (int64_t vocab = vocabularyReading(id))
      for (size_t i = 0; i < count; ++i)
        if (data[i] < 0 || data[i] >= vocab)
          throw Error("buffer '" + v.desc->name + "': id " +
                      std::to_string(data[i]) + " at position " +
                      std::to_string(i) + " is outside the vocabulary [0, " +
                      std::to_string(vocab) + ")");
  if (v.data) // else another pipeline rank's
    backend.copyIn(v.data, data, count * sizeof(int32_t));
  // A device backend's host mirror (fill) follows the buffer.
  if (!backend.hostAddressable() && (id == plan.tokens || id == plan.targets)) {
    std::vector<int32_t> &mirror = id == plan.tokens ? hostTokens : hostTargets;
    if (mirror.data() != data)
      mirror.assign(data, data + count);
  }
}

int32_t *TokenFeed::hostView(uint32_t id) {
  if (!backend.hostAddressable())
    throw Error("buffer '" + plan.buffers[id].name + "' is in " +
                backend.name() +
                " memory: use setTokens/setTargets to write it");
  return arenas.view(id).as<int32_t>();
}

void TokenFeed::fill(const Fill &fill, int64_t microBatchInStep) {
  // Host memory: `fill` writes the buffers themselves (or, for a buffer
  // another pipeline rank holds, a scratch copy nothing reads).
  if (backend.hostAddressable()) {
    auto ids = [&](uint32_t id, std::vector<int32_t> &unheld) {
      if (arenas.holds(id))
        return hostView(id);
      unheld.resize(size_t(numElements(plan.buffers[id].shape)));
      return unheld.data();
    };
    fill(microBatchInStep, ids(plan.tokens, unheldTokens),
         ids(plan.targets, unheldTargets));
    return;
  }
  // Device memory: `fill` writes host mirrors of the buffers (set keeps
  // them equal; read once, the first time), which are then copied in.
  const BufferView tok = arenas.view(plan.tokens);
  const BufferView tgt = arenas.view(plan.targets);
  if (hostTokens.empty() || hostTargets.empty()) {
    hostTokens.resize(size_t(tok.size()));
    hostTargets.resize(size_t(tgt.size()));
    if (tok.data)
      backend.copyOut(hostTokens.data(), tok.data, tok.desc->bytes);
    if (tgt.data)
      backend.copyOut(hostTargets.data(), tgt.data, tgt.desc->bytes);
  }
  fill(microBatchInStep, hostTokens.data(), hostTargets.data());
  set(plan.tokens, hostTokens.data(), hostTokens.size(), "Tokens");
  set(plan.targets, hostTargets.data(), hostTargets.size(), "Targets");
}

void TokenFeed::fillAt(const Fill &fill, int64_t microBatchInStep,
                       const CurriculumLength *length) {
  if (length && length->seqLength != plan.seqLength)
    fillCut(fill, microBatchInStep, *length);
  else
    this->fill(fill, microBatchInStep);
}

void TokenFeed::fillCut(const Fill &fill, int64_t microBatchInStep,
                        const CurriculumLength &length) {
  const size_t rows = size_t(plan.microBatchSize);
  const size_t whole = size_t(plan.seqLength);
  wholeTokens.resize(rows * whole);
  wholeTargets.resize(rows * whole);
  fill(microBatchInStep, wholeTokens.data(), wholeTargets.data());
  cutSamples(wholeTokens.data(), wholeTargets.data(), plan.microBatchSize,
             plan.seqLength, length.seqLength, length.reshape, cutTokens,
             cutTargets);
  set(length.tokens, cutTokens.data(), cutTokens.size(), "Tokens");
  set(length.targets, cutTargets.data(), cutTargets.size(), "Targets");
}
