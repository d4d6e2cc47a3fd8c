//===- Generator.cpp - continuous batching over an inference plan ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Generator.h"

#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/Opcode.h"
#include "dsc/Runtime/SplitMix64.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

using namespace dsc::rt;

namespace {

const Buffer &bufferNamed(const Plan &plan, const std::string &name) {
  for (const Buffer &b : plan.buffers)
    if (b.name == name)
      return b;
  throw Error("the inference plan has no buffer '" + name + "'");
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace

Generator::Generator(Executor &executor) : ex(executor) {
  const Plan &plan = ex.plan();
  if (!isInferencePlan(plan))
    throw Error("the plan is not an inference plan (no prefill and decode "
                "programs); compile it with --dsc-compile-inference");
  const Buffer &table = bufferNamed(plan, "decode.block_table");
  sequenceSlots = table.shape[0];
  tableWidth = table.shape[1];
  budget = bufferNamed(plan, "prefill.tokens").shape[1];
  prefillSamples = bufferNamed(plan, "prefill.sample_rows").shape[0];
  vocab = plan.vocabSize;
  for (const Buffer &b : plan.buffers)
    if (b.role == BufferRole::KvCache) {
      totalBlocks = b.shape[0];
      blockLen = b.shape[2];
    }
  if (totalBlocks == 0)
    throw Error("the inference plan has no KV cache");
  contextLimit = tableWidth * blockLen;
  // A learned position table has no row past its last.
  for (const Program &p : plan.programs)
    for (const Instruction &inst : p.instructions)
      if (inst.opcode == Opcode::PositionEmbeddingAt)
        contextLimit =
            std::min(contextLimit, plan.buffers[inst.inputs[0]].shape[0]);
  for (int64_t b = totalBlocks - 1; b >= 0; --b)
    freeBlocks.push_back(int32_t(b));
  for (int64_t s = sequenceSlots - 1; s >= 0; --s)
    freeSlots.push_back(int32_t(s));
}

std::string Generator::refusal(const GenerationRequest &request) const {
  const int64_t prompt = int64_t(request.prompt.size());
  if (prompt == 0)
    return "a request needs at least one prompt token";
  if (request.maxNewTokens < 1)
    return "a request must ask for at least one new token, not " +
           std::to_string(request.maxNewTokens);
  for (int32_t t : request.prompt)
    if (t < 0 || t >= vocab)
      return "prompt token " + std::to_string(t) +
             " is outside the vocabulary [0, " + std::to_string(vocab) + ")";
  const SamplingSettings &sampling = request.sampling;
  if (!(sampling.temperature >= 0) || sampling.topK < 0 ||
      !(sampling.topP >= 0 && sampling.topP <= 1))
    return "temperature and top_k must be >= 0 and top_p in [0, 1]";
  const int64_t context = prompt + request.maxNewTokens;
  if (context > contextLimit)
    return "the prompt's " + std::to_string(prompt) + " tokens and " +
           std::to_string(request.maxNewTokens) +
           " new tokens make a context of " + std::to_string(context) +
           ", beyond the plan's maximum context of " +
           std::to_string(contextLimit) + " tokens";
  // The last new token is never fed back: it needs no cache position.
  if (ceilDiv(context - 1, blockLen) > totalBlocks)
    return "a context of " + std::to_string(context) + " tokens needs " +
           std::to_string(ceilDiv(context - 1, blockLen)) +
           " KV-cache blocks of " + std::to_string(blockLen) +
           "; the plan's cache has " + std::to_string(totalBlocks);
  return {};
}

int64_t Generator::submit(GenerationRequest request) {
  if (std::string why = refusal(request); !why.empty())
    throw Error(why);
  Sequence s;
  s.id = nextId++;
  s.tokens = request.prompt;
  s.request = std::move(request);
  waiting.push_back(std::move(s));
  return waiting.back().id;
}

void Generator::admit() {
  // First come, first served: a request that does not fit yet holds back
  // the ones behind it, so none starves.
  while (!waiting.empty() && !freeSlots.empty()) {
    Sequence &s = waiting.front();
    const int64_t need = ceilDiv(
        int64_t(s.request.prompt.size()) + s.request.maxNewTokens - 1,
        blockLen);
    if (totalBlocks - reservedBlocks < need)
      return;
    reservedBlocks += need;
    s.reserved = need;
    s.slot = freeSlots.back();
    freeSlots.pop_back();
    running.push_back(std::move(s));
    waiting.pop_front();
  }
}

void Generator::ensureBlocks(Sequence &s, int64_t positions) {
  while (int64_t(s.blocks.size()) * blockLen < positions) {
    // The reservation guarantees a free block.
    s.blocks.push_back(freeBlocks.back());
    freeBlocks.pop_back();
    ++counters.blocksInUse;
  }
  counters.peakBlocksInUse =
      std::max(counters.peakBlocksInUse, counters.blocksInUse);
}

float Generator::drawFor(const Sequence &s) const {
  // A pure function of the request's seed and the token's index: the same
  // request samples the same tokens however it is batched.
  const uint64_t index =
      uint64_t(s.tokens.size() - s.request.prompt.size()) + 1;
  const uint64_t bits = splitmix64(s.request.seed ^ splitmix64(index));
  return float(bits >> 40) * (1.0f / 16777216.0f);
}

void Generator::runProgram(
    const std::string &program, const std::vector<int32_t> &tokens, const std::vector<int32_t> &positions,
    const std::vector<int32_t> &sequences,
    const std::vector<std::pair<Sequence *, int32_t>> &sampled) {
  const int64_t samples =
      program == "prefill" ? prefillSamples : sequenceSlots;
  std::vector<int32_t> table(size_t(sequenceSlots * tableWidth), -1);
  for (const Sequence &s : running)
    std::copy(s.blocks.begin(), s.blocks.end(),
              table.begin() + s.slot * tableWidth);
  std::vector<int32_t> sampleRows(size_t(samples), -1);
  std::vector<float> settings(size_t(samples * 3), 0.0f),
      draws(size_t(samples), 0.0f);
  for (size_t j = 0; j < sampled.size(); ++j) {
    const Sequence &s = *sampled[j].first;
    sampleRows[j] = sampled[j].second;
    settings[3 * j] = float(s.request.sampling.temperature);
    settings[3 * j + 1] = float(s.request.sampling.topK);
    settings[3 * j + 2] = float(s.request.sampling.topP);
    draws[j] = drawFor(s);
  }
  auto put = [&](const std::string &input, const void *data, size_t bytes) {
    BufferView view = ex.buffer(program + "." + input);
    if (uint64_t(bytes) != view.desc->bytes)
      throw Error("inference input '" + program + "." + input + "' holds " +
                  std::to_string(view.desc->bytes) + " bytes, not " +
                  std::to_string(bytes));
    ex.backend().copyIn(view.data, data, bytes);
  };
  put("tokens", tokens.data(), 4 * tokens.size());
  put("positions", positions.data(), 4 * positions.size());
  put("sequences", sequences.data(), 4 * sequences.size());
  put("block_table", table.data(), 4 * table.size());
  put("sample_rows", sampleRows.data(), 4 * sampleRows.size());
  put("sampling", settings.data(), 4 * settings.size());
  put("draws", draws.data(), 4 * draws.size());
  ex.runProgram(program);
  std::vector<int32_t> next(static_cast<size_t>(samples));
  BufferView out = ex.buffer(program + ".next_tokens");
  ex.backend().copyOut(next.data(), out.data, 4 * next.size());
  ++counters.forwards;
  for (size_t j = 0; j < sampled.size(); ++j) {
    Sequence &s = *sampled[j].first;
    s.tokens.push_back(next[j]);
    s.result.tokens.push_back(next[j]);
  }
}

void Generator::finishIfDone(Sequence &s) {
  if (s.result.tokens.empty())
    return;
  const int32_t last = s.result.tokens.back();
  const auto &stops = s.request.stopTokens;
  if (std::find(stops.begin(), stops.end(), last) != stops.end())
    s.result.finishReason = "stop";
  else if (int64_t(s.result.tokens.size()) >= s.request.maxNewTokens)
    s.result.finishReason = "length";
}

bool Generator::step() {
  admit();
  if (running.empty())
    return false;
  const bool prompting = std::any_of(
      running.begin(), running.end(), [](const Sequence &s) {
        return int64_t(s.tokens.size()) - s.computed > 1;
      });
  const std::string program = prompting ? "prefill" : "decode";
  const int64_t rows = prompting ? budget : sequenceSlots;
  const int64_t samples = prompting ? prefillSamples : sequenceSlots;
  std::vector<int32_t> tokens(size_t(rows), 0), positions(size_t(rows), 0),
      sequences(size_t(rows), -1);
  std::vector<std::pair<Sequence *, int32_t>> sampled;
  int64_t row = 0;
  auto place = [&](Sequence &s, int64_t count, bool sample) {
    for (int64_t i = 0; i < count; ++i, ++row) {
      const int64_t p = s.computed + i;
      tokens[size_t(row)] = s.tokens[size_t(p)];
      positions[size_t(row)] = int32_t(p);
      sequences[size_t(row)] = int32_t(s.slot);
    }
    ensureBlocks(s, s.computed + count);
    s.computed += count;
    if (sample)
      sampled.push_back({&s, int32_t(row - 1)});
  };
  // Decode tokens first (one row each), then prompt chunks in arrival
  // order within the budget; a chunk that ends its prompt samples.
  for (Sequence &s : running)
    if (int64_t(s.tokens.size()) - s.computed == 1 && row < rows &&
        int64_t(sampled.size()) < samples)
      place(s, 1, true);
  if (prompting)
    for (Sequence &s : running) {
      const int64_t pending = int64_t(s.tokens.size()) - s.computed;
      if (pending <= 1 || row >= rows)
        continue;
      const bool canSample = int64_t(sampled.size()) < samples;
      int64_t chunk = std::min(pending, rows - row);
      if (chunk == pending && !canSample)
        --chunk;
      if (chunk > 0)
        place(s, chunk, chunk == pending);
    }
  const auto start = std::chrono::steady_clock::now();
  runProgram(program, tokens, positions, sequences, sampled);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (prompting) {
    ++counters.prefills;
    counters.prefillSeconds += seconds;
    counters.prefillTokens += int64_t(sampled.size());
  } else {
    ++counters.decodes;
    counters.decodeSeconds += seconds;
    counters.decodeTokens += int64_t(sampled.size());
  }

  // The cache's waste: blocks held past the positions the tokens need.
  for (const Sequence &s : running)
    counters.worstWasteBlocks =
        std::max(counters.worstWasteBlocks,
                 int64_t(s.blocks.size()) - ceilDiv(s.computed, blockLen));
  for (auto it = running.begin(); it != running.end();) {
    finishIfDone(*it);
    if (it->result.finishReason.empty()) {
      ++it;
      continue;
    }
    release(*it);
    it = running.erase(it);
  }
  return true;
}

void Generator::release(Sequence &s) {
  for (int32_t b : s.blocks)
    freeBlocks.push_back(b);
  counters.blocksInUse -= int64_t(s.blocks.size());
  reservedBlocks -= s.reserved;
  freeSlots.push_back(int32_t(s.slot));
  finished[s.id] = std::move(s.result);
}

bool Generator::cancel(int64_t id) {
  for (auto it = waiting.begin(); it != waiting.end(); ++it)
    if (it->id == id) {
      it->result.finishReason = "cancelled";
      finished[id] = std::move(it->result);
      waiting.erase(it);
      return true;
    }
  for (auto it = running.begin(); it != running.end(); ++it)
    if (it->id == id) {
      it->result.finishReason = "cancelled";
      release(*it);
      running.erase(it);
      return true;
    }
  return false;
}

std::vector<int32_t> Generator::generatedSoFar(int64_t id) const {
  for (const Sequence &s : running)
    if (s.id == id)
      return s.result.tokens;
  if (auto it = finished.find(id); it != finished.end())
    return it->second.tokens;
  return {};
}

void Generator::runToCompletion() {
  while (step()) {
  }
}

std::map<int64_t, GenerationResult> Generator::takeFinished() {
  return std::exchange(finished, {});
}
