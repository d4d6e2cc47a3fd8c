//===- CudaKernels.h - CUDA forward/backward kernels ------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The CUDA backend's compute kernels, one entry point per CpuKernels.h kernel
// with the same semantics, so a plan runs on either backend.
//
// Conventions (differences from CpuKernels.h are listed, the rest is equal):
//  - Every pointer is device memory unless named `host*`; every call is
//    asynchronous on the `stream` it takes and returns the launch status.
//    Nothing here synchronizes the device or throws.
//  - Element type T is float, __nv_bfloat16 or __half for activations and
//    gradients; arithmetic is fp32. Saved statistics (LayerNorm mean/rstd,
//    logsumexps) are always fp32 so a bf16 forward does not round them.
//  - Scalars the CPU kernels return (cross-entropy loss, sum of squares)
//    are written to device memory instead, so a step never waits on the host.
//  - Reductions are deterministic (fixed order, no float atomics): a step
//    gives the same bits on every run on the same GPU and launch config.
//  - Scratch comes from the stream-ordered allocator (cudaMallocAsync), which
//    is pooled; the executor's device arena replaces it later.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_CUDAKERNELS_H
#define DSC_RUNTIME_CUDAKERNELS_H

#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/MoeKernels.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dsc::rt::cuda {

//===----------------------------------------------------------------------===//
// Matmul (cuBLASLt)
//===----------------------------------------------------------------------===//

/// How fp32 GEMMs multiply: exact fp32, or TF32 tensor cores (10-bit
/// mantissa inputs, fp32 accumulation). bf16/fp16 inputs always accumulate
/// in fp32 and ignore this.
enum class MathMode { Fp32, Tf32 };

/// cuBLASLt's handle and workspace, one per stream that runs GEMMs (the
/// workspace must not be shared by concurrent GEMMs).
struct MatmulContext {
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  size_t workspaceSize = 0;
  MathMode math = MathMode::Fp32;
};

/// Creates the handle and a workspace of `workspaceBytes` (32 MiB is what
/// cuBLAS recommends for Hopper).
cublasStatus_t createMatmulContext(MatmulContext &ctx,
                                   size_t workspaceBytes = size_t(32) << 20,
                                   MathMode math = MathMode::Fp32);
void destroyMatmulContext(MatmulContext &ctx);

/// cuBLASLt epilogues fused into the forward GEMM. Bias is [n] (per column
/// of the row-major C). GeluBias with `aux` non-null also stores the
/// pre-GELU values [batch*m, n] there for the backward (geluBackward).
enum class Epilogue { None, Bias, Gelu, GeluBias };

/// C = alpha * op(A) op(B) + beta * C, the general form the forward and
/// backward share. Row-major, MatmulShape as on the CPU (broadcastB: one B
/// for every batch entry).
template <typename T>
cublasStatus_t gemm(MatmulContext &ctx, const T *a, const T *b, T *c,
                    const MatmulShape &s, float alpha, float beta,
                    cudaStream_t stream, Epilogue epilogue = Epilogue::None,
                    const T *bias = nullptr, T *aux = nullptr);

/// C = op(A) op(B) (C += ... when accumulate), as matmulForward.
template <typename T>
cublasStatus_t matmulForward(MatmulContext &ctx, const T *a, const T *b, T *c,
                             const MatmulShape &s, bool accumulate,
                             cudaStream_t stream);

/// dA, dB as matmulBackward (either may be null). With broadcastB, dB sums
/// over the batch.
template <typename T>
cublasStatus_t matmulBackward(MatmulContext &ctx, const T *a, const T *b,
                              const T *dC, T *dA, T *dB, const MatmulShape &s,
                              bool accumulate, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename T>
cudaError_t addForward(const T *a, const T *b, T *y, int64_t n,
                       cudaStream_t stream);
/// y[r, :] = x[r, :] + bias[:].
template <typename T>
cudaError_t biasAddForward(const T *x, const T *bias, T *y, int64_t rows,
                           int64_t cols, cudaStream_t stream);
/// dBias = sum over rows of dY (fixed order); dX is not touched (it is dY).
template <typename T>
cudaError_t biasGrad(const T *dY, T *dBias, int64_t rows, int64_t cols,
                     bool accumulate, cudaStream_t stream);
/// y = alpha * x (may alias).
template <typename T>
cudaError_t scaleForward(const T *x, T *y, int64_t n, float alpha,
                         cudaStream_t stream);
/// y = x converted (fp32 master weights to bf16/fp16 compute copies and back).
template <typename From, typename To>
cudaError_t convert(const From *x, To *y, int64_t n, cudaStream_t stream);

/// dA = dB = dY (either may be null).
template <typename T>
cudaError_t addBackward(const T *dY, T *dA, T *dB, int64_t n, bool accumulate,
                        cudaStream_t stream);
/// y = a * b; its backward dA = dY * b, dB = dY * a.
template <typename T>
cudaError_t mulForward(const T *a, const T *b, T *y, int64_t n,
                       cudaStream_t stream);
template <typename T>
cudaError_t mulBackward(const T *a, const T *b, const T *dY, T *dA, T *dB,
                        int64_t n, bool accumulate, cudaStream_t stream);
/// dX = alpha * dY.
template <typename T>
cudaError_t scaleBackward(const T *dY, T *dX, int64_t n, float alpha,
                          bool accumulate, cudaStream_t stream);
/// y += x (the plan's Accumulate).
template <typename T>
cudaError_t accumulate(const T *x, T *y, int64_t n, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Layout: transpose, slice, concat (shapes and pointer lists are host arrays)
//===----------------------------------------------------------------------===//

template <typename T>
cudaError_t transposeForward(const T *in, T *out, const int64_t *inShape,
                             const int *perm, int rank, cudaStream_t stream);
template <typename T>
cudaError_t transposeBackward(const T *dOut, T *dIn, const int64_t *inShape,
                              const int *perm, int rank, bool accumulate,
                              cudaStream_t stream);
template <typename T>
cudaError_t sliceForward(const T *in, T *out, const int64_t *inShape,
                         const int64_t *outShape, const int64_t *offsets,
                         int rank, cudaStream_t stream);
template <typename T>
cudaError_t sliceBackward(const T *dOut, T *dIn, const int64_t *inShape,
                          const int64_t *outShape, const int64_t *offsets,
                          int rank, bool accumulate, cudaStream_t stream);
/// `ins`/`dIns` are host arrays of device pointers (null dIns are skipped).
template <typename T>
cudaError_t concatForward(const T *const *ins, const int64_t *dims, int count,
                          T *out, int64_t outer, int64_t inner,
                          cudaStream_t stream);
template <typename T>
cudaError_t concatBackward(const T *dOut, T *const *dIns, const int64_t *dims,
                           int count, int64_t outer, int64_t inner,
                           bool accumulate, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// GELU (tanh approximation, and exact)
//===----------------------------------------------------------------------===//

template <typename T>
cudaError_t geluForward(const T *x, T *y, int64_t n, cudaStream_t stream);
template <typename T>
cudaError_t geluBackward(const T *x, const T *dY, T *dX, int64_t n,
                         bool accumulate, cudaStream_t stream);
/// The exact (erf) GELU.
template <typename T>
cudaError_t geluExactForward(const T *x, T *y, int64_t n, cudaStream_t stream);
template <typename T>
cudaError_t geluExactBackward(const T *x, const T *dY, T *dX, int64_t n,
                              bool accumulate, cudaStream_t stream);
/// gelu(x + bias) over x [rows, cols], bias [cols] (exact: erf, else tanh),
/// and its gradient dY * gelu'(x + bias), the sum recomputed: --dsc-fuse's
/// bias_gelu and bias_gelu_grad.
template <typename T>
cudaError_t biasGeluForward(const T *x, const T *bias, T *y, int64_t rows,
                            int64_t cols, bool exact, cudaStream_t stream);
template <typename T>
cudaError_t biasGeluBackward(const T *x, const T *bias, const T *dY, T *dX,
                             int64_t rows, int64_t cols, bool exact,
                             bool accumulate, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// SwiGLU and grouped-query attention's head repeat (the CPU kernels')
//===----------------------------------------------------------------------===//

template <typename T>
cudaError_t swigluForward(const T *x, T *y, int64_t rows, int64_t cols,
                          cudaStream_t stream);
template <typename T>
cudaError_t swigluBackward(const T *x, const T *dY, T *dX, int64_t rows,
                           int64_t cols, cudaStream_t stream);
template <typename T>
cudaError_t repeatHeadsForward(const T *x, T *y, int64_t rows, int64_t kvHeads,
                               int64_t headDim, int64_t repeats,
                               cudaStream_t stream);
template <typename T>
cudaError_t repeatHeadsBackward(const T *dY, T *dX, int64_t rows,
                                int64_t kvHeads, int64_t headDim,
                                int64_t repeats, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Rotary position embedding (the CPU kernel's pairing and angles)
//===----------------------------------------------------------------------===//

/// x, y [rows, cols], row r at position r % seq; y may alias x.
template <typename T>
cudaError_t rotaryForward(const T *x, T *y, int64_t rows, int64_t seq,
                          int64_t cols, int64_t headDim, int64_t rotaryDims,
                          double base, bool inverse, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// LayerNorm (one warp per row)
//===----------------------------------------------------------------------===//

template <typename T>
cudaError_t layerNormForward(const T *x, const T *gamma, const T *beta, T *y,
                             float *mean, float *rstd, int64_t rows,
                             int64_t cols, float eps, cudaStream_t stream);
/// dGamma/dBeta reduce over rows in two fixed-order passes (row chunks, then
/// chunk partials), so no atomics.
template <typename T>
cudaError_t layerNormBackward(const T *x, const T *gamma, const float *mean,
                              const float *rstd, const T *dY, T *dX, T *dGamma,
                              T *dBeta, int64_t rows, int64_t cols, float eps,
                              AccumulateMask accumulate, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// RMS norm (one warp per row; the CPU kernel's formulas)
//===----------------------------------------------------------------------===//

template <typename T>
cudaError_t rmsNormForward(const T *x, const T *gamma, T *y, int64_t rows,
                           int64_t cols, float eps, bool epsOutside,
                           cudaStream_t stream);
/// dGamma reduces over rows in two fixed-order passes, so no atomics.
template <typename T>
cudaError_t rmsNormBackward(const T *x, const T *gamma, const T *dY, T *dX,
                            T *dGamma, int64_t rows, int64_t cols, float eps,
                            bool epsOutside, AccumulateMask accumulate,
                            cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Softmax over the last dimension
//===----------------------------------------------------------------------===//

template <typename T>
cudaError_t softmaxForward(const T *x, T *y, int64_t rows, int64_t cols,
                           cudaStream_t stream);
template <typename T>
cudaError_t softmaxBackward(const T *y, const T *dY, T *dX, int64_t rows,
                            int64_t cols, bool accumulate, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Fused attention (FlashAttention-style: no S x S matrix in memory)
//===----------------------------------------------------------------------===//

/// True when the kernels support this head dim (16, 32, 64, 128).
bool attentionSupported(const AttentionShape &s);

/// Same layout, mask, dropout indices and saved logsumexp [batch, heads,
/// seq] as the CPU kernel (lse may be null). Online softmax over key tiles.
/// Returns cudaErrorInvalidValue for an unsupported head dim. bf16/fp16
/// at head dim 64 or 128 (16-byte aligned pointers, sm_80+) run on tensor
/// cores (bf16/fp16 products, fp32 accumulation and softmax); everything
/// else, or any call while DSC_ATTENTION_SIMT=1, runs the fp32 SIMT kernels.
template <typename T>
cudaError_t attentionForward(const T *q, const T *k, const T *v, T *out,
                             float *lse, const AttentionShape &s,
                             cudaStream_t stream);

/// dq, dk, dv (any may be null). dq is computed per query row and dk/dv per
/// key row, each summing in a fixed order (no atomics). Without a saved lse
/// it is recomputed into scratch first. `out`, the forward's output, is
/// optional (the CPU kernel does not take it): when given, the softmax
/// backward's row terms D_i = dO_i . O_i come from it, saving the dq
/// kernel's first pass over the keys (about a fifth of the backward). The
/// tensor-core path, when it has to recompute the forward anyway (no `out`
/// or no `lse`), takes D_i from that forward's fp32 output instead.
template <typename T>
cudaError_t attentionBackward(const T *q, const T *k, const T *v,
                              const float *lse, const T *dOut, T *dq, T *dk,
                              T *dv, const AttentionShape &s,
                              AccumulateMask accumulate, cudaStream_t stream,
                              const T *out = nullptr);

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

/// As on the CPU; the count of out-of-range ids goes to `badCount` (device,
/// may be null) instead of being returned.
template <typename T>
cudaError_t embeddingForward(const T *table, const int32_t *ids, T *out,
                             int64_t n, int64_t vocab, int64_t hidden,
                             int64_t *badCount, cudaStream_t stream);
/// Deterministic scatter-add: ids are stably radix-sorted with their
/// positions, then each distinct id's rows are summed in position order by
/// one warp -- the CPU kernel's order, hence the same fp32 bits.
template <typename T>
cudaError_t embeddingBackward(const T *dOut, const int32_t *ids, T *dTable,
                              int64_t n, int64_t vocab, int64_t hidden,
                              bool accumulate, cudaStream_t stream);
template <typename T>
cudaError_t positionEmbeddingForward(const T *table, T *out, int64_t batch,
                                     int64_t seq, int64_t hidden,
                                     cudaStream_t stream);
template <typename T>
cudaError_t positionEmbeddingBackward(const T *dOut, T *dTable, int64_t batch,
                                      int64_t seq, int64_t positions,
                                      int64_t hidden, bool accumulate,
                                      cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Cross entropy fused with the logits' softmax
//===----------------------------------------------------------------------===//

/// *loss = mean over rows of lse - logits[target] (NaN for a bad target),
/// summed in row order in double. lse [rows] fp32 may be null. `classes`
/// (0: all) is how many of the vocab columns are classes: the softmax
/// leaves the rest (a padded vocabulary's rows) out, as the CPU kernel does.
template <typename T>
cudaError_t crossEntropyForward(const T *logits, const int32_t *targets,
                                float *lse, float *loss, int64_t rows,
                                int64_t vocab, int64_t classes,
                                cudaStream_t stream);
/// dLogits = (softmax - onehot) * dLoss / rows, zero past `classes`; dLoss
/// is a host scalar (the loss scale for fp16 training).
template <typename T>
cudaError_t crossEntropyBackward(const T *logits, const int32_t *targets,
                                 const float *lse, float dLoss, T *dLogits,
                                 int64_t rows, int64_t vocab, int64_t classes,
                                 bool accumulate, cudaStream_t stream);
/// Forward and backward in one kernel (each row read twice, not four times):
/// what a training step uses when nothing else needs the logits.
/// dLogits may alias logits.
template <typename T>
cudaError_t crossEntropyFused(const T *logits, const int32_t *targets,
                              float *loss, float dLoss, T *dLogits,
                              int64_t rows, int64_t vocab, int64_t classes,
                              cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Dropout (the CPU kernel's counter-based RNG: identical masks)
//===----------------------------------------------------------------------===//

template <typename T>
cudaError_t dropoutForward(const T *x, T *y, int64_t n, float p, uint64_t seed,
                           uint64_t offset, cudaStream_t stream);
template <typename T>
cudaError_t dropoutBackward(const T *dY, T *dX, int64_t n, float p,
                            uint64_t seed, bool accumulate, uint64_t offset,
                            cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Mixture of Experts (MoeKernels.h: the same routing decisions, bit for bit)
//===----------------------------------------------------------------------===//

/// moeRoute on the device: choices, slots and drops as the CPU kernel's for
/// the same logits (softmax and ranks in double). MoeDrop::Random's draw of
/// (token t, expert e) is the CPU backend's: uniformDraw(dropoutKey(seed),
/// t * E + e) (SplitMix64.h). `aux` may be null; the number of dropped
/// pairs goes to `dropped` and the CPU moeRoute's loads to `loads` [E]
/// (device, either may be null).
/// Every step is parallel except the aux loss's final sums (one thread, the
/// CPU's order); a Probability/Random drop ranks each pair of an over-full
/// expert against that expert's pairs, O(n_e^2) per expert.
template <typename T>
cudaError_t moeRoute(const MoeRouting &r, const T *logits, uint64_t seed,
                     int32_t *slots, T *gates, T *aux, int64_t *dropped,
                     int64_t *loads, cudaStream_t stream);
/// moeRouteBackward; dAux is a device scalar (null: 0).
template <typename T>
cudaError_t moeRouteBackward(const MoeRouting &r, const T *logits,
                             const int32_t *slots, const T *dGates,
                             const T *dAux, T *dLogits, bool accumulate,
                             cudaStream_t stream);
/// moeDispatch; the count of slots naming a token outside [0, tokens) goes
/// to `badCount` (device, may be null).
template <typename T>
cudaError_t moeDispatch(const T *x, const int32_t *slots, const T *gates, T *xe,
                        int64_t slotCount, int64_t hidden, int64_t tokens,
                        int64_t *badCount, cudaStream_t stream);
/// moeCombine: each token's slots in ascending order (a stable sort builds
/// the inverse map), summed in fp32 by one block per token; no atomics.
template <typename T>
cudaError_t moeCombine(const T *ye, const int32_t *slots, const T *gates, T *y,
                       int64_t slotCount, int64_t hidden, int64_t tokens,
                       bool accumulate, int64_t *badCount, cudaStream_t stream);
/// moeGatesGrad: one warp per slot, the dot product in double.
template <typename T>
cudaError_t moeGatesGrad(const T *ye, const int32_t *slots, const T *dy,
                         T *dGates, int64_t slotCount, int64_t hidden,
                         int64_t tokens, bool accumulate, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Optimizer, grad norm, clipping
//===----------------------------------------------------------------------===//

/// One AdamW step over fp32 master weights and fp32 moments, with the CPU
/// kernel's operation order. The gradient (fp32 or bf16/fp16) is first
/// multiplied by `gradScale` (1/lossScale times the clip factor). When
/// `lowp` is non-null, the updated weights are also written there rounded
/// to its type (the compute copy for the next forward).
template <typename G, typename Low = __nv_bfloat16>
cudaError_t adamwStep(float *param, const G *grad, float *m, float *v,
                      int64_t n, const AdamWConfig &cfg, int64_t step,
                      bool decay, float gradScale, Low *lowp,
                      cudaStream_t stream);

/// torch.optim.SGD over fp32 master weights and momentum, as sgdStep; the
/// gradient is multiplied by `gradScale` first, `lowp` as in adamwStep.
template <typename G, typename Low = __nv_bfloat16>
cudaError_t sgdStep(float *param, const G *grad, float *momentumBuf, int64_t n,
                    const SgdConfig &cfg, float gradScale, Low *lowp,
                    cudaStream_t stream);

/// *out = sum of squares over `count` device buffers (host arrays of device
/// pointers and sizes), in double over the CPU kernel's 4096-element blocks.
/// A non-finite gradient makes it non-finite (the overflow check of loss
/// scaling reads it).
template <typename T>
cudaError_t sumOfSquares(const T *const *hostBuffers, const int64_t *hostSizes,
                         int count, double *out, cudaStream_t stream);

/// Multiplies every buffer by clipScale(sqrt(*sumSq) * normScale, maxNorm),
/// computed on the device (no host round trip). A non-finite norm leaves
/// the buffers unchanged (the step will be skipped).
template <typename T>
cudaError_t clipGradients(T *const *hostBuffers, const int64_t *hostSizes,
                          int count, const double *sumSq, double normScale,
                          double maxNorm, cudaStream_t stream);

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_CUDAKERNELS_H
