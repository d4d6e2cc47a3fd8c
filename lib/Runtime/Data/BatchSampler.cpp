//===- BatchSampler.cpp - Seeded [B, S+1] windows over a token stream -----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Sample order is a keyed Feistel permutation of the windows per epoch: O(1)
// memory, a pure function of (seed, sample), so resuming needs only a count.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Data.h"
#include "dsc/Runtime/SplitMix64.h"

#include <algorithm>
#include <vector>

using namespace dsc::rt;

namespace {
/// A bijection on [0, n): a 4-round Feistel network on the smallest even
/// bit width covering n, cycle-walked back into range (expected < 4 walks).
uint64_t permute(uint64_t x, uint64_t n, uint64_t key) {
  if (n <= 1)
    return 0;
  int bits = 0;
  while ((uint64_t(1) << bits) < n)
    ++bits;
  int half = (bits + 1) / 2;
  if (half < 1)
    half = 1;
  const uint64_t mask = (uint64_t(1) << half) - 1;
  do {
    uint64_t l = x >> half, r = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      uint64_t f = splitmix64(r ^ splitmix64(key + round)) & mask;
      uint64_t nl = r;
      r = l ^ f;
      l = nl;
    }
    x = (l << half) | r;
  } while (x >= n);
  return x;
}
} // namespace

std::pair<TokenRange, TokenRange>
dsc::rt::splitTrainValid(int64_t total, double validFraction) {
  if (!(validFraction >= 0.0 && validFraction < 1.0))
    throw Error("validation fraction must be in [0, 1), got " +
                std::to_string(validFraction));
  const int64_t valid = int64_t(double(total) * validFraction);
  return {TokenRange{0, total - valid}, TokenRange{total - valid, total}};
}

BatchSampler::BatchSampler(const TokenSource &source, int64_t batch,
                           int64_t seq, uint64_t seed, int64_t modelVocab,
                           TokenRange range)
    : source(source), batch(batch), seq(seq), windows(0), begin(range.begin),
      seed(seed) {
  if (batch <= 0 || seq <= 0)
    throw Error("batch size and sequence length must be positive, got batch " +
                std::to_string(batch) + " and sequence length " +
                std::to_string(seq));
  if (source.vocabSize() > modelVocab)
    throw Error(source.describe() + " has token ids up to " +
                std::to_string(source.vocabSize() - 1) +
                ", but the model's vocab is " + std::to_string(modelVocab));
  const int64_t end = range.end < 0 ? source.size() : range.end;
  if (range.begin < 0 || range.begin > end || end > source.size())
    throw Error("token range [" + std::to_string(range.begin) + ", " +
                std::to_string(end) + ") is not inside " + source.describe() +
                " (" + std::to_string(source.size()) + " tokens)");
  if (end - range.begin < seq + 1)
    throw Error(source.describe() + " has " +
                std::to_string(end - range.begin) +
                (end - range.begin == source.size() ? " tokens"
                                                    : " tokens in its range") +
                ", fewer than one training window of sequence length " +
                std::to_string(seq) + " + 1");
  windows = (end - range.begin - 1) / seq;
}

int64_t BatchSampler::windowOf(int64_t sample) const {
  const uint64_t epoch = uint64_t(sample / windows);
  const uint64_t within = uint64_t(sample % windows);
  return int64_t(
      permute(within, uint64_t(windows), splitmix64(seed) ^ splitmix64(epoch)));
}

void BatchSampler::sample(int64_t firstSample, int64_t count, int32_t *inputs,
                          int32_t *targets) const {
  std::vector<int32_t> window(seq + 1);
  for (int64_t b = 0; b < count; ++b) {
    source.read(windowStart(windowOf(firstSample + b)), seq + 1, window.data());
    std::copy(window.begin(), window.end() - 1, inputs + b * seq);
    std::copy(window.begin() + 1, window.end(), targets + b * seq);
  }
}
