//===- CpuKernels.h - CPU forward/backward kernels --------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The CPU backend's compute kernels: one forward and one backward entry point
// per graph op, so the executor can bind a plan instruction to a call.
//
// Conventions shared by every kernel in this header:
//  - Tensors are raw pointers to contiguous row-major storage; shapes are
//    passed explicitly as element counts. Nothing here throws; shape and
//    range preconditions are the caller's (the plan verifier's) job. The
//    only allocations are small per-call scratch where the caller passes
//    none (LayerNorm/CrossEntropy statistics, attention blocks).
//  - Templates are explicitly instantiated for `float` (training) and
//    `double` (the finite-difference oracle in test/Runtime). The float
//    instantiations use a vectorized exp (< 2 ulp) instead of libm's.
//  - Backward kernels take `accumulate`: false overwrites each gradient
//    output, true adds into it (fan-out of a value, micro-batch
//    accumulation); LayerNorm and attention take a per-result
//    AccumulateMask, as the plan encodes it. A gradient pointer may be null
//    when that gradient is not needed.
//  - Threading is OpenMP with a static schedule; every reduction is done in a
//    fixed order, so results are bitwise reproducible for a given thread
//    count (most are independent of the thread count; see each kernel).
//  - The kernels own CPU threading: on first use they make OpenBLAS
//    single-threaded and split GEMMs across OpenMP threads themselves (one
//    thread pool; per-head GEMMs run concurrently). Set OMP_NUM_THREADS.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_CPUKERNELS_H
#define DSC_RUNTIME_CPUKERNELS_H

#include "dsc/Runtime/ShapeMath.h"

#include <algorithm>
#include <cstdint>

namespace dsc::rt {

/// Per-result accumulate flags of a backward kernel with several results,
/// the plan's `accumulate` bit mask: bit i set makes result i add into its
/// buffer. Explicit, so a stray `true` cannot mean "result 0 only".
struct AccumulateMask {
  uint32_t bits = 0;
  constexpr explicit AccumulateMask(uint32_t bits = 0) : bits(bits) {}
  static constexpr AccumulateMask all(bool accumulate) {
    return AccumulateMask(accumulate ? ~0u : 0u);
  }
  constexpr bool operator[](int result) const { return (bits >> result) & 1u; }
};

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

/// out[n, :] = table[ids[n], :] for a table [vocab, hidden] and ids [n].
/// Returns the number of ids outside [0, vocab); their rows are zeroed, so a
/// bad id can never read out of bounds. The executor turns a nonzero count
/// into an error naming the vocab.
template <typename T>
int64_t embeddingForward(const T *table, const int32_t *ids, T *out, int64_t n,
                         int64_t vocab, int64_t hidden);

/// dTable[ids[n], :] += dOut[n, :] (after zeroing dTable unless accumulate).
/// Deterministic independent of the thread count: threads own column blocks
/// and visit ids in order. Out-of-range ids are skipped.
template <typename T>
void embeddingBackward(const T *dOut, const int32_t *ids, T *dTable, int64_t n,
                       int64_t vocab, int64_t hidden, bool accumulate);

/// out[b, s, :] = table[s, :] for b < batch, s < seq (learned positions;
/// table has at least seq rows).
template <typename T>
void positionEmbeddingForward(const T *table, T *out, int64_t batch,
                              int64_t seq, int64_t hidden);
/// dTable [positions, hidden]: row s < seq (+)= sum over b of dOut[b, s, :]
/// in batch order; rows >= seq get zero (or are left, when accumulating).
template <typename T>
void positionEmbeddingBackward(const T *dOut, T *dTable, int64_t batch,
                               int64_t seq, int64_t positions, int64_t hidden,
                               bool accumulate);

//===----------------------------------------------------------------------===//
// Matmul (cblas_sgemm / cblas_dgemm)
//===----------------------------------------------------------------------===//

/// Shape of a batched matmul C[b] = op(A[b]) * op(B[b]), b in [0, batch).
/// op(A[b]) is [m, k] (stored [k, m] when transA), op(B[b]) is [k, n] (stored
/// [n, k] when transB), C[b] is [m, n]. With broadcastB one B serves every
/// batch entry.
struct MatmulShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transA = false, transB = false, broadcastB = false;
};

/// C = op(A) * op(B) (C += ... when accumulate).
template <typename T>
void matmulForward(const T *a, const T *b, T *c, const MatmulShape &s,
                   bool accumulate = false);

/// dA = dC * op(B)^T and dB = op(A)^T * dC (in the stored layouts). With
/// broadcastB, dB sums over the batch in batch order.
template <typename T>
void matmulBackward(const T *a, const T *b, const T *dC, T *dA, T *dB,
                    const MatmulShape &s, bool accumulate);

//===----------------------------------------------------------------------===//
// Elementwise: add, mul, bias_add, scale
//===----------------------------------------------------------------------===//

/// y = a + b over n elements.
template <typename T> void addForward(const T *a, const T *b, T *y, int64_t n);
/// dA = dB = dY.
template <typename T>
void addBackward(const T *dY, T *dA, T *dB, int64_t n, bool accumulate);

/// y = a * b over n elements.
template <typename T> void mulForward(const T *a, const T *b, T *y, int64_t n);
/// dA = dY * b, dB = dY * a.
template <typename T>
void mulBackward(const T *a, const T *b, const T *dY, T *dA, T *dB, int64_t n,
                 bool accumulate);

/// y[r, :] = x[r, :] + bias[:] for x [rows, cols].
template <typename T>
void biasAddForward(const T *x, const T *bias, T *y, int64_t rows,
                    int64_t cols);
/// dX = dY; dBias = sum over rows of dY (thread-count independent).
template <typename T>
void biasAddBackward(const T *dY, T *dX, T *dBias, int64_t rows, int64_t cols,
                     bool accumulate);

/// y = alpha * x (y may alias x: this is also grad clipping's scale).
template <typename T> void scaleForward(const T *x, T *y, int64_t n, T alpha);
/// dX = alpha * dY.
template <typename T>
void scaleBackward(const T *dY, T *dX, int64_t n, T alpha, bool accumulate);

//===----------------------------------------------------------------------===//
// GELU (tanh approximation, as in GPT-2)
//===----------------------------------------------------------------------===//

/// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <typename T> void geluForward(const T *x, T *y, int64_t n);
/// dX = dY * gelu'(x).
template <typename T>
void geluBackward(const T *x, const T *dY, T *dX, int64_t n, bool accumulate);

/// y = 0.5 x (1 + erf(x / sqrt 2)), the exact GELU.
template <typename T> void geluExactForward(const T *x, T *y, int64_t n);
/// dX = dY * (Phi(x) + x phi(x)).
template <typename T>
void geluExactBackward(const T *x, const T *dY, T *dX, int64_t n,
                       bool accumulate);

/// y[r, :] = gelu(x[r, :] + bias[:]) for x [rows, cols] (exact: erf, else
/// tanh), the sum rounded to T and not stored: bias add + GELU bit for bit.
template <typename T>
void biasGeluForward(const T *x, const T *bias, T *y, int64_t rows,
                     int64_t cols, bool exact);
/// dX[r, :] = dY[r, :] * gelu'(x[r, :] + bias[:]), the sum recomputed.
template <typename T>
void biasGeluBackward(const T *x, const T *bias, const T *dY, T *dX,
                      int64_t rows, int64_t cols, bool exact, bool accumulate);

//===----------------------------------------------------------------------===//
// SwiGLU and grouped-query attention's head repeat
//===----------------------------------------------------------------------===//

/// x [rows, 2 cols] = [up | gate] -> y [rows, cols] = up * silu(gate).
template <typename T>
void swigluForward(const T *x, T *y, int64_t rows, int64_t cols);
/// dX [rows, 2 cols] = [dY * silu(gate) | dY * up * silu'(gate)].
template <typename T>
void swigluBackward(const T *x, const T *dY, T *dX, int64_t rows,
                    int64_t cols);
/// x [rows, kvHeads * headDim] -> y [rows, kvHeads * repeats * headDim],
/// y's head j a copy of x's head j / repeats.
template <typename T>
void repeatHeadsForward(const T *x, T *y, int64_t rows, int64_t kvHeads,
                        int64_t headDim, int64_t repeats);
/// dX's head h = the sum of dY's heads h * repeats .. h * repeats + repeats
/// - 1, in that order.
template <typename T>
void repeatHeadsBackward(const T *dY, T *dX, int64_t rows, int64_t kvHeads,
                         int64_t headDim, int64_t repeats);

//===----------------------------------------------------------------------===//
// Rotary position embedding
//===----------------------------------------------------------------------===//

/// x and y are [rows, heads * headDim], row r at position r % seq. In each
/// head, pairs (i, i + rotaryDims/2) rotate by pos * base^(-2i/rotaryDims)
/// (backwards with `inverse`); the head's other features are copied. y may
/// alias x.
template <typename T>
void rotaryForward(const T *x, T *y, int64_t rows, int64_t seq, int64_t cols,
                   int64_t headDim, int64_t rotaryDims, double base,
                   bool inverse);

//===----------------------------------------------------------------------===//
// LayerNorm over the last dimension
//===----------------------------------------------------------------------===//

/// y = (x - mean) * rstd * gamma + beta per row of x [rows, cols], with
/// rstd = 1/sqrt(var + eps). Saves mean [rows] and rstd [rows] for the
/// backward when they are non-null.
template <typename T>
void layerNormForward(const T *x, const T *gamma, const T *beta, T *y, T *mean,
                      T *rstd, int64_t rows, int64_t cols, T eps);
/// Results dX (0), dGamma (1), dBeta (2); any may be null. Uses the saved
/// mean/rstd when both are non-null, else recomputes them from x and eps
/// (one more pass over a row that is in cache anyway). dGamma/dBeta reduce
/// over rows by column-block threads (thread-count independent).
template <typename T>
void layerNormBackward(const T *x, const T *gamma, const T *mean, const T *rstd,
                       const T *dY, T *dX, T *dGamma, T *dBeta, int64_t rows,
                       int64_t cols, T eps, AccumulateMask accumulate);

//===----------------------------------------------------------------------===//
// RMS norm over the last dimension
//===----------------------------------------------------------------------===//

/// y = x * r * gamma per row of x [rows, cols], with r = 1/sqrt(ms + eps),
/// or with `epsOutside` r = 1/(sqrt(ms) + eps); ms = mean(x^2).
template <typename T>
void rmsNormForward(const T *x, const T *gamma, T *y, int64_t rows,
                    int64_t cols, T eps, bool epsOutside);
/// Results dX (0), dGamma (1); either may be null. dGamma reduces over rows
/// by column-block threads (thread-count independent).
template <typename T>
void rmsNormBackward(const T *x, const T *gamma, const T *dY, T *dX,
                     T *dGamma, int64_t rows, int64_t cols, T eps,
                     bool epsOutside, AccumulateMask accumulate);

//===----------------------------------------------------------------------===//
// Softmax over the last dimension
//===----------------------------------------------------------------------===//

/// y = softmax(x) per row of x [rows, cols] (max-subtracted).
template <typename T>
void softmaxForward(const T *x, T *y, int64_t rows, int64_t cols);
/// dX = y * (dY - sum(dY * y)) per row; needs only the forward's output.
template <typename T>
void softmaxBackward(const T *y, const T *dY, T *dX, int64_t rows, int64_t cols,
                     bool accumulate);

//===----------------------------------------------------------------------===//
// Fused multi-head self-attention (causal or not, with optional dropout)
//===----------------------------------------------------------------------===//

/// q, k, v, out are [batch, seq, hidden] with `heads` heads of hidden/heads
/// columns each (head h is columns [h*hd, (h+1)*hd), as after a QKV split).
/// out = dropout(softmax(mask(q k^T / sqrt(hd)))) v per (batch, head).
struct AttentionShape {
  int64_t batch = 1, seq = 0, hidden = 0, heads = 1;
  bool causal = true;
  /// With causal, a sliding window of W > 0: query i sees keys
  /// i - W + 1 .. i (Mistral); 0: keys 0 .. i.
  int64_t window = 0;
  /// Dropout on the probabilities (GPT-2's attn_pdrop), 0 for none. The mask
  /// of probability (b, h, i, j) is dropoutKeep(seed, index) with
  /// index = (((batchOffset + b) * H + headOffset + h) * seq + i) * seq + j,
  /// H = totalHeads (0: heads), so a rank holding a slice of the batch or of
  /// the heads (tensor parallelism) draws the same mask as one rank would.
  float dropout = 0.0f;
  uint64_t seed = 0;
  int64_t batchOffset = 0, headOffset = 0, totalHeads = 0;
  /// Query rows per block; 0 picks the kernel's default (128). Tests set
  /// it small so short sequences still cross block boundaries.
  int64_t rowBlock = 0;

  int64_t headDim() const { return hidden / heads; }
  /// The first key query row i sees.
  int64_t firstKey(int64_t i) const {
    return causal && window > 0 && i >= window ? i - window + 1 : 0;
  }
  /// Elements of the optional per-row logsumexp: batch * heads * seq.
  int64_t lseSize() const { return batch * heads * seq; }
};

/// Elements of `scratch` the attention kernels use on `threads` threads: two
/// blocks of query rows by seq per thread (~1 MB at S=1024), independent
/// of the batch.
int64_t attentionScratchSize(const AttentionShape &s, int threads);

/// FlashAttention-style: scores and probabilities exist only per block of
/// query rows in scratch; nothing of size S^2 is stored. When `lse` is
/// non-null it receives the per-row logsumexp [batch, heads, seq] of the
/// scaled, masked scores, which spares the backward one softmax per row.
/// Heads run in parallel, one thread each, a block of query rows at a time
/// (causal: only over the key prefix), so the bits do not depend on the
/// thread count. With scratch == null the kernel allocates its own;
/// otherwise it uses as many threads as scratchSize has room for and returns
/// false, writing nothing, if it has room for none.
template <typename T>
[[nodiscard]] bool attentionForward(const T *q, const T *k, const T *v, T *out,
                                    T *lse, T *scratch, int64_t scratchSize,
                                    const AttentionShape &s);

/// Results dq (0), dk (1), dv (2); any may be null. Recomputes each block of
/// probabilities from q and k (and lse when non-null). Same threading and
/// scratch contract as the forward.
template <typename T>
[[nodiscard]] bool attentionBackward(const T *q, const T *k, const T *v,
                                     const T *lse, const T *dOut, T *dq, T *dk,
                                     T *dv, T *scratch, int64_t scratchSize,
                                     const AttentionShape &s,
                                     AccumulateMask accumulate);

//===----------------------------------------------------------------------===//
// Cross entropy (fused with a stable log-softmax)
//===----------------------------------------------------------------------===//

/// Returns mean over rows of -log softmax(logits[r])[targets[r]] for logits
/// [rows, vocab]. Saves lse [rows] (the per-row logsumexp) for the backward
/// when non-null. `classes` (0: all) is how many of the vocab columns are
/// classes: the softmax leaves the columns at and past it out (a padded
/// vocabulary's rows).
/// A target outside [0, classes) makes the loss NaN (loud, never out of
/// bounds). The mean is summed in row order: thread-count independent.
template <typename T>
T crossEntropyForward(const T *logits, const int32_t *targets, T *lse,
                      int64_t rows, int64_t vocab, int64_t classes = 0);
/// dLogits = (softmax(logits) - onehot(targets)) * dLoss / rows, zero in the
/// columns at and past `classes` (0: none); recomputes the logsumexp per
/// row when lse is null.
template <typename T>
void crossEntropyBackward(const T *logits, const int32_t *targets, const T *lse,
                          T dLoss, T *dLogits, int64_t rows, int64_t vocab,
                          bool accumulate, int64_t classes = 0);

/// Megatron-LM's vocabulary-parallel cross-entropy, per rank: logits are
/// [rows, cols], this rank's columns [colBegin, colBegin + cols) of the
/// whole vocabulary. The caller max-reduces `max` over the group after
/// vocabShardRowMax, sum-reduces `sumExp` and `targetLogit` after
/// vocabShardRowSums (targetLogit is 0 where the target is another rank's);
/// the loss is then mean(max + log(sumExp) - targetLogit). `classes` (0:
/// all) counts the whole vocabulary's classes: the global columns at and
/// past it are left out, so a rank whose columns are all padding
/// contributes a max of -inf and a sum of 0.
template <typename T>
void vocabShardRowMax(const T *logits, int64_t rows, int64_t cols,
                      int64_t colBegin, int64_t classes, double *max);
template <typename T>
void vocabShardRowSums(const T *logits, const int32_t *targets,
                       const double *max, int64_t rows, int64_t cols,
                       int64_t colBegin, int64_t classes, double *sumExp,
                       double *targetLogit);
/// dLogits = (exp(logits - lse) - onehot(targets)) * dLoss / rows over this
/// rank's columns, with lse the whole rows' logsumexp; zero in the global
/// columns at and past `classes` (0: none).
template <typename T>
void vocabShardCrossEntropyBackward(const T *logits, const int32_t *targets,
                                    const double *lse, T dLoss, T *dLogits,
                                    int64_t rows, int64_t cols,
                                    int64_t colBegin, int64_t classes,
                                    bool accumulate);

/// The columns of [colBegin, colBegin + cols) that are classes when the
/// whole vocabulary has `classes` of them (0: all): a prefix of the range.
inline int64_t classColumns(int64_t cols, int64_t colBegin, int64_t classes) {
  if (classes <= 0)
    return cols;
  return std::max<int64_t>(0, std::min(cols, classes - colBegin));
}

//===----------------------------------------------------------------------===//
// Dropout (counter-based RNG: the mask is a pure function of seed and index)
//===----------------------------------------------------------------------===//

/// True when element `index` is kept under drop probability p and `seed`.
/// splitmix64 of (seed, index): no state, so the backward (and any rank or
/// thread) recomputes the same mask.
bool dropoutKeep(uint64_t seed, uint64_t index, float p);

/// y = keep ? x / (1 - p) : 0. `offset` is added to the element index, so a
/// tensor split across ranks can reproduce the unsplit mask.
template <typename T>
void dropoutForward(const T *x, T *y, int64_t n, float p, uint64_t seed,
                    uint64_t offset = 0);
/// dX = keep ? dY / (1 - p) : 0, with the same mask.
template <typename T>
void dropoutBackward(const T *dY, T *dX, int64_t n, float p, uint64_t seed,
                     bool accumulate, uint64_t offset = 0);

//===----------------------------------------------------------------------===//
// Layout: transpose, slice, concat (copies) and their adjoints
//===----------------------------------------------------------------------===//

/// out = permute(in): out.shape[i] = in.shape[perm[i]] for in of `rank`
/// dims (rank <= kMaxRank).
template <typename T>
void transposeForward(const T *in, T *out, const int64_t *inShape,
                      const int *perm, int rank);
/// dIn = permute(dOut, inverse(perm)); `inShape` is the forward's input shape.
template <typename T>
void transposeBackward(const T *dOut, T *dIn, const int64_t *inShape,
                       const int *perm, int rank, bool accumulate);

/// out = in[offsets[0] : offsets[0] + outShape[0], ...] for in of inShape
/// (rank <= kMaxRank); the caller has checked that the box lies inside.
template <typename T>
void sliceForward(const T *in, T *out, const int64_t *inShape,
                  const int64_t *outShape, const int64_t *offsets, int rank);
/// dIn is dOut inside the box and zero outside it (unless accumulate, which
/// adds dOut into the box and leaves the rest).
template <typename T>
void sliceBackward(const T *dOut, T *dIn, const int64_t *inShape,
                   const int64_t *outShape, const int64_t *offsets, int rank,
                   bool accumulate);

/// Concat shapes are collapsed around the concatenated dim:
/// out [outer, sum(dims), inner] = concat of ins[i] [outer, dims[i], inner].
template <typename T>
void concatForward(const T *const *ins, const int64_t *dims, int count, T *out,
                   int64_t outer, int64_t inner);
/// dIns[i] = the matching block of dOut (null entries are skipped).
template <typename T>
void concatBackward(const T *dOut, T *const *dIns, const int64_t *dims,
                    int count, int64_t outer, int64_t inner, bool accumulate);

//===----------------------------------------------------------------------===//
// Optimizers and gradient clipping
//===----------------------------------------------------------------------===//

struct AdamWConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.01;
};

/// One AdamW step (decoupled decay, bias correction) over a flat buffer, as in
/// torch.optim.AdamW: p -= lr*wd*p (only when `decay`); m, v moments;
/// p -= lr * mhat / (sqrt(vhat) + eps). `step` counts from 1.
template <typename T>
void adamwStep(T *param, const T *grad, T *m, T *v, int64_t n,
               const AdamWConfig &cfg, int64_t step, bool decay);

struct SgdConfig {
  double lr = 1e-2, momentum = 0.9, weightDecay = 0.0;
  bool nesterov = false;
};

/// torch.optim.SGD with zero-initialized momentum buffer (dampening 0):
/// g += wd*p; buf = momentum*buf + g; p -= lr * (nesterov ? g + momentum*buf
/// : buf).
template <typename T>
void sgdStep(T *param, const T *grad, T *momentumBuf, int64_t n,
             const SgdConfig &cfg);

/// Sum of squares over several buffers, accumulated in double over fixed
/// 4096-element blocks summed in order: the same bits for any thread count
/// .
template <typename T>
double sumOfSquares(const T *const *buffers, const int64_t *sizes, int count);

/// The factor grads are scaled by for clipping to maxNorm (<= 1; 1 if the
/// norm is within bounds), as in torch.nn.utils.clip_grad_norm_. A
/// non-finite norm is returned unchanged so the caller can skip the step.
double clipScale(double globalNorm, double maxNorm);

} // namespace dsc::rt

#endif // DSC_RUNTIME_CPUKERNELS_H
