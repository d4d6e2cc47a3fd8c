//===- SeqlenReshape.h - a curriculum's samples cut to a length -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// How a curriculum step at sequence length L < S makes its ids from a
// micro-batch of b whole samples (docs/curriculum.md), in the two ways
// Megatron-DeepSpeed's data post-processing names:
//
// - seqlen_truncate: each sample's first L ids (its first L + 1 tokens of
//   text), the rest dropped; b rows.
// - seqlen_reshape: the samples' text (S + 1 tokens a sample) cut into rows
//   of L + 1 tokens, so a step keeps most of its tokens: each sample's
//   floor((S + 1) / (L + 1)) whole pieces in order, then each sample's last
//   L + 1 tokens, of which the first R rows are kept, R = min(ceil(b (S + 1)
//   / (L + 1)), b (floor((S + 1) / (L + 1)) + 1)), lowered by one when it is
//   odd and above 1. A row's ids are its first L tokens, its targets its
//   last L.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_SEQLENRESHAPE_H
#define DSC_RUNTIME_SEQLENRESHAPE_H

#include <cstdint>
#include <vector>

namespace dsc::rt {

/// The rows a micro-batch of `microBatch` samples of `seqLength` ids makes
/// at `length` under seqlen_reshape (`length` itself: the micro-batch).
int64_t seqlenReshapeRows(int64_t microBatch, int64_t seqLength,
                          int64_t length);

/// Cuts `microBatch` samples (row-major ids [microBatch, seqLength] and
/// their targets, the ids shifted by one) into `rows` x `length` ids and
/// targets: seqlen_reshape when `reshape`, else seqlen_truncate (`rows` =
/// `microBatch`). `tokens` and `targets` are resized.
void cutSamples(const int32_t *wholeTokens, const int32_t *wholeTargets,
                int64_t microBatch, int64_t seqLength, int64_t length,
                bool reshape, std::vector<int32_t> &tokens,
                std::vector<int32_t> &targets);

} // namespace dsc::rt

#endif // DSC_RUNTIME_SEQLENRESHAPE_H
