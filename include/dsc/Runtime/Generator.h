//===- Generator.h - continuous batching over an inference plan -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Drives an inference plan's programs (--dsc-compile-inference): requests
// wait until a sequence slot and enough KV-cache blocks for their whole
// length are free (a reservation, so a running sequence never runs out),
// blocks are handed out as the sequence reaches them (so the cache's waste
// is under one block per sequence), and each step runs one forward:
// @prefill when prompt tokens are pending (prompt chunks within the token
// budget, fused with the running sequences' decode tokens: DeepSpeed-
// FastGen's Dynamic SplitFuse), else @decode. A request that can never fit
// (longer than the plan's context, or than its cache) is refused at submit
// with both numbers; nothing is ever truncated.
//
// Every rank of a tensor-parallel plan runs its own Generator on the same
// requests: the schedule is a pure function of them, and every rank samples
// the same tokens from the same gathered logits and draws.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_GENERATOR_H
#define DSC_RUNTIME_GENERATOR_H

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dsc::rt {

class Executor;

/// GPT-NeoX's sampling settings: greedy when all three are 0.
struct SamplingSettings {
  double temperature = 0;
  int64_t topK = 0;
  double topP = 0;
};

struct GenerationRequest {
  std::vector<int32_t> prompt; // at least one token
  int64_t maxNewTokens = 64;
  SamplingSettings sampling;
  uint64_t seed = 0;                // the draws' stream (SplitMix64)
  std::vector<int32_t> stopTokens;  // generation ends after one of these
};

struct GenerationResult {
  std::vector<int32_t> tokens; // the new tokens (a stop token included)
  std::string finishReason;    // "length", "stop" or "cancelled"
};

/// What the cache and the schedule did (the server's metrics).
struct GeneratorStats {
  int64_t forwards = 0, prefills = 0, decodes = 0;
  int64_t blocksInUse = 0, peakBlocksInUse = 0;
  /// The largest, over steps, of blocks held minus the blocks the held
  /// tokens need, per running sequence (the waste bound: < 1 block each).
  int64_t worstWasteBlocks = 0;
  /// Wall time in the programs, and the tokens they sampled.
  double prefillSeconds = 0, decodeSeconds = 0;
  int64_t prefillTokens = 0, decodeTokens = 0;
};

class Generator {
public:
  /// Reads the plan's shapes (the programs' inputs, the caches); Error when
  /// `executor`'s plan is not an inference plan.
  explicit Generator(Executor &executor);

  int64_t maxContext() const { return contextLimit; }
  int64_t blockSize() const { return blockLen; }
  int64_t blocks() const { return totalBlocks; }
  int64_t maxSequences() const { return sequenceSlots; }
  int64_t tokenBudget() const { return budget; }

  /// Queues `request`; returns its id. Throws Error naming the numbers when
  /// it can never run (prompt + max new tokens past the context or the
  /// cache, an empty prompt, a token outside the vocabulary).
  int64_t submit(GenerationRequest request);
  /// Why `request` can never run (submit's Error text), or empty.
  std::string refusal(const GenerationRequest &request) const;
  /// Ends request `id` now (waiting or running) with finish reason
  /// "cancelled" and frees its blocks; false when it is not in flight.
  bool cancel(int64_t id);
  /// The tokens request `id` has generated so far (running or finished and
  /// not yet taken), empty for an unknown one.
  std::vector<int32_t> generatedSoFar(int64_t id) const;
  int64_t waitingCount() const { return int64_t(waiting.size()); }
  int64_t runningCount() const { return int64_t(running.size()); }
  /// Runs one forward; false when nothing is waiting or running.
  bool step();
  /// Runs until every submitted request has finished.
  void runToCompletion();
  /// The finished requests' results, by id (taken: removed here).
  std::map<int64_t, GenerationResult> takeFinished();
  bool idle() const { return waiting.empty() && running.empty(); }
  const GeneratorStats &stats() const { return counters; }

private:
  struct Sequence {
    int64_t id = 0, slot = 0, reserved = 0;
    GenerationRequest request;
    std::vector<int32_t> tokens; // prompt then generated
    int64_t computed = 0;        // positions in the cache
    std::vector<int32_t> blocks;
    GenerationResult result;
  };

  void admit();
  void ensureBlocks(Sequence &s, int64_t positions);
  float drawFor(const Sequence &s) const;
  void runProgram(const std::string &program,
                  const std::vector<int32_t> &tokens,
                  const std::vector<int32_t> &positions,
                  const std::vector<int32_t> &sequences,
                  const std::vector<std::pair<Sequence *, int32_t>> &sampled);
  void finishIfDone(Sequence &s);
  void release(Sequence &s);

  Executor &ex;
  int64_t contextLimit = 0, blockLen = 0, totalBlocks = 0, sequenceSlots = 0;
  int64_t budget = 0, prefillSamples = 0, tableWidth = 0, vocab = 0;
  std::vector<int32_t> freeBlocks;
  int64_t reservedBlocks = 0;
  std::vector<int32_t> freeSlots;
  std::deque<Sequence> waiting;
  std::vector<Sequence> running;
  std::map<int64_t, GenerationResult> finished;
  int64_t nextId = 0;
  GeneratorStats counters;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_GENERATOR_H
