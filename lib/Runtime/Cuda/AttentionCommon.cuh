//===- AttentionCommon.cuh - What both attention kernels share --*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The launch parameters, per-(batch, head) offsets and the D_i = dO_i . O_i
// kernel used by both the SIMT kernels (Attention.cu) and the tensor-core
// kernels (AttentionTensorCore.cu), and the latter's entry points.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_CUDA_ATTENTIONCOMMON_CUH
#define DSC_LIB_RUNTIME_CUDA_ATTENTIONCOMMON_CUH

#include "CudaSupport.cuh"

#include <initializer_list>

namespace dsc::rt::cuda::detail {

struct AttentionParams {
  int64_t seq, hidden, heads, totalHeads, batchOffset, headOffset;
  /// Causal with window > 0: query i sees keys i - window + 1 .. i.
  int64_t window;
  float scale, inv;
  bool causal, drop;
  uint64_t key, thr;
};

/// Whether query i does not see key j (past the sequence, after i when
/// causal, or before i's sliding window).
__device__ __forceinline__ bool keyMasked(const AttentionParams &p, int64_t i,
                                          int64_t j) {
  return j >= p.seq ||
         (p.causal && (j > i || (p.window > 0 && i - j >= p.window)));
}

/// The running maximum an online softmax subtracts: 0 while every key so far
/// was masked (-inf), so exp(-inf - 0) = 0 instead of exp(-inf + inf) = NaN.
__device__ __forceinline__ float safeMax(float m) {
  return m == -INFINITY ? 0.0f : m;
}

inline AttentionParams attentionParamsOf(const AttentionShape &s) {
  AttentionParams p;
  p.seq = s.seq;
  p.hidden = s.hidden;
  p.heads = s.heads;
  p.totalHeads = s.totalHeads ? s.totalHeads : s.heads;
  p.batchOffset = s.batchOffset;
  p.headOffset = s.headOffset;
  p.scale = 1.0f / sqrtf(float(s.headDim()));
  p.causal = s.causal;
  p.window = s.window;
  p.drop = s.dropout > 0.0f;
  p.inv = s.dropout < 1.0f ? 1.0f / (1.0f - s.dropout) : 0.0f;
  p.key = dropoutKey(s.seed);
  p.thr = dropoutThreshold(s.dropout);
  return p;
}

/// The per-(batch, head) offsets of blockIdx.y (as headOf on the CPU).
struct AttentionHead {
  int64_t off;      // element offset of the head's [S, hd] columns
  uint64_t maskRow; // dropout index of (i = 0, j = 0)
  int64_t bh;
};
template <int HD>
__device__ __forceinline__ AttentionHead
attentionHeadOf(const AttentionParams &p) {
  const int64_t bh = blockIdx.y, b = bh / p.heads, h = bh % p.heads;
  AttentionHead r;
  r.off = b * p.seq * p.hidden + h * HD;
  r.maskRow = uint64_t(((p.batchOffset + b) * p.totalHeads + p.headOffset + h) *
                       p.seq * p.seq);
  r.bh = bh;
  return r;
}

/// D_i = dO_i . O_i, which equals sum_j P_ij dP_ij (with dropout too: O is
/// the dropped P times V): one dot product per row instead of a pass over
/// the keys. A warp per (batch, head, row).
template <typename T>
__global__ void attentionDRowKernel(const T *out, const T *dOut, float *dRow,
                                    int64_t rows, int64_t seq, int64_t hidden,
                                    int64_t heads, int hd) {
  const int64_t r = int64_t(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (r >= rows)
    return;
  const int64_t bh = r / seq, i = r % seq, b = bh / heads, h = bh % heads;
  const int64_t off = (b * seq + i) * hidden + h * hd;
  float d = 0.0f;
  for (int c = threadIdx.x & 31; c < hd; c += 32)
    d += toF(out[off + c]) * toF(dOut[off + c]);
  d = warpSum(d);
  if ((threadIdx.x & 31) == 0)
    dRow[r] = d;
}

/// True when the tensor-core kernels take this call: bf16/fp16 (the caller
/// checks the type), head dim 64 or 128, a device of compute capability 8.0
/// or newer, every pointer 16-byte aligned (tiles move as 16-byte vectors),
/// and DSC_ATTENTION_SIMT is not "1" (read at every call, so one process
/// can compare both paths).
bool attentionTensorCoreEligible(const AttentionShape &s,
                                 std::initializer_list<const void *> ptrs);

/// The tensor-core forms of attentionForward/attentionBackward
/// (AttentionTensorCore.cu), for __nv_bfloat16 and __half; same contract.
template <typename T>
cudaError_t attentionForwardTensorCore(const T *q, const T *k, const T *v,
                                       T *out, float *lse,
                                       const AttentionShape &s,
                                       cudaStream_t stream);
template <typename T>
cudaError_t attentionBackwardTensorCore(const T *q, const T *k, const T *v,
                                        const float *lse, const T *dOut, T *dq,
                                        T *dk, T *dv, const AttentionShape &s,
                                        AccumulateMask accumulate,
                                        cudaStream_t stream, const T *out);

} // namespace dsc::rt::cuda::detail

#endif // DSC_LIB_RUNTIME_CUDA_ATTENTIONCOMMON_CUH
