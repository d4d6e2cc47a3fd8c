//===- SeqlenReshape.cpp - a curriculum's samples cut to a length ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/SeqlenReshape.h"

#include "dsc/Runtime/Error.h"

#include <algorithm>
#include <string>

using namespace dsc::rt;

namespace {

/// The pieces of L + 1 tokens a sample's text of S + 1 makes whole.
int64_t wholePieces(int64_t seqLength, int64_t length) {
  return (seqLength + 1) / (length + 1);
}

} // namespace

int64_t dsc::rt::seqlenReshapeRows(int64_t microBatch, int64_t seqLength,
                                   int64_t length) {
  if (microBatch < 1 || length < 1 || length > seqLength)
    throw Error("seqlen_reshape: a micro-batch of " +
                std::to_string(microBatch) + " samples of " +
                std::to_string(seqLength) + " ids cannot be cut to length " +
                std::to_string(length));
  if (length == seqLength)
    return microBatch;
  const int64_t tokens = microBatch * (seqLength + 1);
  const int64_t available = microBatch * (wholePieces(seqLength, length) + 1);
  int64_t rows = std::min((tokens + length) / (length + 1), available);
  if (rows > 1 && rows % 2 != 0)
    --rows;
  return rows;
}

void dsc::rt::cutSamples(const int32_t *wholeTokens,
                         const int32_t *wholeTargets, int64_t microBatch,
                         int64_t seqLength, int64_t length, bool reshape,
                         std::vector<int32_t> &tokens,
                         std::vector<int32_t> &targets) {
  const size_t S = size_t(seqLength), L = size_t(length);
  const int64_t rows =
      reshape ? seqlenReshapeRows(microBatch, seqLength, length) : microBatch;
  tokens.resize(size_t(rows) * L);
  targets.resize(size_t(rows) * L);
  // Sample r's text: its ids, then its last target (the token after them).
  auto text = [&](size_t r, size_t j) {
    return j < S ? wholeTokens[r * S + j] : wholeTargets[r * S + S - 1];
  };
  auto emit = [&](size_t row, size_t r, size_t from) {
    for (size_t j = 0; j < L; ++j) {
      tokens[row * L + j] = text(r, from + j);
      targets[row * L + j] = text(r, from + j + 1);
    }
  };
  if (!reshape || length == seqLength) {
    for (size_t r = 0; r < size_t(microBatch); ++r)
      emit(r, r, 0);
    return;
  }
  // Each sample's whole pieces in order, then each sample's last L + 1
  // tokens; the first `rows` of those.
  const size_t pieces = size_t(wholePieces(seqLength, length));
  size_t row = 0;
  for (size_t r = 0; r < size_t(microBatch) && row < size_t(rows); ++r)
    for (size_t k = 0; k < pieces && row < size_t(rows); ++k)
      emit(row++, r, k * (L + 1));
  for (size_t r = 0; r < size_t(microBatch) && row < size_t(rows); ++r)
    emit(row++, r, S - L);
}
