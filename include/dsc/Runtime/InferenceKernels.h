//===- InferenceKernels.h - kernels of the inference programs ---*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The CPU kernels of an inference plan's programs (docs/inference.md):
// attention over a paged key/value cache, rotary and learned position
// embeddings at given positions, gathering the rows to sample, and
// GPT-NeoX's sampling. Token rows are [N, C] (the programs' [1, N, C]); row
// i belongs to sequence sequences[i] (-1: unused) at positions[i].
//
// The conventions of CpuKernels.h hold (raw row-major pointers, float and
// double instantiations, deterministic results), except that the kernels
// that index memory by ids from the driver check them and return what is
// wrong (empty when nothing is), which the backend raises as the
// instruction's error.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_INFERENCEKERNELS_H
#define DSC_RUNTIME_INFERENCEKERNELS_H

#include <cstdint>
#include <string>

namespace dsc::rt {

/// The paged cache and block table of one attention layer.
struct PagedCacheShape {
  int64_t rows = 0;       // N token rows
  int64_t heads = 0;      // query heads
  int64_t kvHeads = 0;    // key/value heads (heads % kvHeads == 0)
  int64_t headDim = 0;    // features per head
  int64_t window = 0;     // sliding window (0: the whole context)
  int64_t blocks = 0;     // the cache's blocks
  int64_t blockSize = 0;  // positions per block
  int64_t sequences = 0;  // the block table's rows
  int64_t tableWidth = 0; // blocks per sequence (the table's columns)
};

/// Writes the used rows' k and v ([N, kvHeads * headDim]) into `cache`
/// ([blocks, 2, blockSize, kvHeads, headDim]) through `table` ([sequences,
/// tableWidth] block ids), then y [N, heads * headDim] = each used row's
/// causal attention over its sequence's cached positions (the last
/// `window` of them when window > 0), scaled by 1/sqrt(headDim); unused
/// rows of y are zeros. Returns the first bad id, named, before writing
/// anything.
template <typename T>
std::string pagedAttention(const T *q, const T *k, const T *v,
                           const int32_t *positions, const int32_t *sequences,
                           const int32_t *table, T *y, T *cache,
                           const PagedCacheShape &s);

/// x, y [N, cols], row i rotated as Rotary (CpuKernels.h) rotates position
/// positions[i]; y may alias x.
template <typename T>
void rotaryAt(const T *x, const int32_t *positions, T *y, int64_t rows,
              int64_t cols, int64_t headDim, int64_t rotaryDims, double base);

/// y [N, H] = rows positions[i] of table [P, H]; a position outside [0, P)
/// is returned as the error.
template <typename T>
std::string positionEmbeddingAt(const T *table, const int32_t *positions, T *y,
                                int64_t rows, int64_t tableRows, int64_t cols);

/// y [R, H] = rows rows[j] of x [N, H], zeros for -1; an id outside [-1,
/// N) is returned as the error.
template <typename T>
std::string gatherRows(const T *x, const int32_t *rows, T *y, int64_t count,
                       int64_t inputRows, int64_t cols);

/// The next token of each of `count` rows of logits [shards, count, width]
/// (row r's vocabulary is its `shards` pieces of `width` in order): params
/// [count, 3] (temperature, top_k, top_p), draws [count] in [0, 1). GPT-NeoX's
/// order (megatron/text_generation_utils.py): greedy argmax (the first
/// largest) when all three are 0; else logits / temperature (when > 0) in
/// f32, top-k (every logit below the k-th largest removed, ties kept),
/// top-p (the sorted probabilities past the first whose running sum exceeds
/// top_p removed), softmax, and the first token whose running probability
/// exceeds the draw. Columns >= classes (when classes > 0) never win. A
/// negative temperature, top_k or top_p outside [0, 1] is returned as the
/// error.
template <typename T>
std::string sampleTokens(const T *logits, const float *params,
                         const float *draws, int32_t *tokens, int64_t count,
                         int64_t shards, int64_t width, int64_t classes);

} // namespace dsc::rt

#endif // DSC_RUNTIME_INFERENCEKERNELS_H
