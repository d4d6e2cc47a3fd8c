//===- Attention.cu - Fused causal attention forward and backward ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// FlashAttention-style on [B, S, H] q/k/v: key (or query) tiles are staged
// in shared memory and scores exist only in registers, so nothing of size
// S x S is ever stored. Same masks, dropout indices and lse as the CPU.
//
// Work split: the forward and dq give each query row to TPR adjacent lanes
// (each owning DPT = HD / TPR dims, dot products reduced by shuffles); dk/dv
// give each key row to TPR lanes and loop over query tiles. dq and dk/dv are
// separate kernels so every sum has one owner and a fixed order (no float
// atomics). The backward's D_i = sum_j P_ij dP_ij is computed in the dq
// kernel's first pass, because the CPU contract gives the backward no `out`.
// These are SIMT kernels (fp32 FMA). bf16/fp16 with head dim 64 or 128 go
// to the tensor-core kernels of AttentionTensorCore.cu instead (unless
// DSC_ATTENTION_SIMT=1); fp32 and the other head dims stay here.
//
//===----------------------------------------------------------------------===//

#include "AttentionCommon.cuh"

#include <type_traits>

using namespace dsc::rt;
using namespace dsc::rt::cuda;
using namespace dsc::rt::cuda::detail;

namespace {
constexpr int kRows = 64; // query (or key) rows per block
constexpr int kTile = 32; // key (or query) rows per shared-memory tile

using Params = AttentionParams;

Params paramsOf(const AttentionShape &s) { return attentionParamsOf(s); }

template <int HD> struct Split {
  static constexpr int DPT = HD < 32 ? HD : 32; // dims per thread
  static constexpr int TPR = HD / DPT;          // threads per row
  static constexpr int Threads = kRows * TPR;
  // Each thread's segment of a shared-memory row is padded by 4 floats:
  // the TPR lanes of a row hit different banks, and segments stay 16-byte
  // aligned so they are read as float4 (one LDS.128 per 4 FMAs; a warp's
  // lanes read at most TPR distinct addresses, which are broadcast).
  static constexpr int Pad = DPT + 4;
  static constexpr int Stride = TPR * Pad;
  __device__ static int at(int row, int part, int d) {
    return row * Stride + part * Pad + d;
  }
};

/// sum_d r[d] * seg[d] over a 16-byte aligned shared-memory segment.
template <int N>
__device__ __forceinline__ float dotSeg(const float *r, const float *seg) {
  static_assert(N % 4 == 0, "segments are read as float4");
  const float4 *s4 = reinterpret_cast<const float4 *>(seg);
  float acc = 0.0f;
#pragma unroll
  for (int d = 0; d < N / 4; ++d) {
    const float4 x = s4[d];
    acc += r[4 * d] * x.x;
    acc += r[4 * d + 1] * x.y;
    acc += r[4 * d + 2] * x.z;
    acc += r[4 * d + 3] * x.w;
  }
  return acc;
}

/// acc[d] += a * seg[d] over a 16-byte aligned shared-memory segment.
template <int N>
__device__ __forceinline__ void axpySeg(float a, const float *seg, float *acc) {
  const float4 *s4 = reinterpret_cast<const float4 *>(seg);
#pragma unroll
  for (int d = 0; d < N / 4; ++d) {
    const float4 x = s4[d];
    acc[4 * d] += a * x.x;
    acc[4 * d + 1] += a * x.y;
    acc[4 * d + 2] += a * x.z;
    acc[4 * d + 3] += a * x.w;
  }
}

/// Sum over the TPR adjacent lanes of a row (all lanes call it).
template <int TPR> __device__ __forceinline__ float rowSum(float v) {
#pragma unroll
  for (int o = TPR / 2; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// The per-(batch, head) offsets both kernels share (as headOf on the CPU).
using Head = AttentionHead;
template <int HD> __device__ Head headOf(const Params &p) {
  return attentionHeadOf<HD>(p);
}

/// Loads rows [r0, r0 + kTile) of the head's columns into shared `dst` as
/// fp32 (zero past the sequence).
template <int HD, typename T>
__device__ void loadTile(float *dst, const T *src, int64_t off, int64_t r0,
                         const Params &p) {
  using S = Split<HD>;
  for (int e = threadIdx.x; e < kTile * HD; e += blockDim.x) {
    const int r = e / HD, c = e % HD;
    const int64_t row = r0 + r;
    dst[S::at(r, c / S::DPT, c % S::DPT)] =
        row < p.seq ? toF(src[off + row * p.hidden + c]) : 0.0f;
  }
}

template <typename T, int HD>
__global__ void __launch_bounds__(Split<HD>::Threads)
    forwardKernel(const T *q, const T *k, const T *v, T *out, float *lse,
                  Params p) {
  using S = Split<HD>;
  constexpr int DPT = S::DPT, TPR = S::TPR;
  __shared__ __align__(16) float ks[kTile * S::Stride], vs[kTile * S::Stride];
  const Head hv = headOf<HD>(p);
  const int row = threadIdx.x / TPR, part = threadIdx.x % TPR;
  const int64_t i = int64_t(blockIdx.x) * kRows + row;
  const bool valid = i < p.seq;
  float qr[DPT], acc[DPT];
#pragma unroll
  for (int d = 0; d < DPT; ++d) {
    qr[d] =
        valid ? toF(q[hv.off + i * p.hidden + part * DPT + d]) * p.scale : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int64_t keyEnd =
      p.causal ? min(p.seq, int64_t(blockIdx.x + 1) * kRows) : p.seq;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kTile) {
    __syncthreads();
    loadTile<HD>(ks, k, hv.off, j0, p);
    loadTile<HD>(vs, v, hv.off, j0, p);
    __syncthreads();
    float sc[kTile];
    float tileMax = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < kTile; ++jj) {
      float s = rowSum<TPR>(dotSeg<DPT>(qr, ks + S::at(jj, part, 0)));
      const int64_t j = j0 + jj;
      if (keyMasked(p, i, j))
        s = -INFINITY;
      sc[jj] = s;
      tileMax = fmaxf(tileMax, s);
    }
    // All masked so far (a sliding window's early tiles): newM is -inf and
    // safeMax keeps the exponentials 0 instead of NaN.
    const float newM = fmaxf(m, tileMax);
    const float corr = expf(m - safeMax(newM));
    l *= corr;
#pragma unroll
    for (int d = 0; d < DPT; ++d)
      acc[d] *= corr;
    m = newM;
#pragma unroll
    for (int jj = 0; jj < kTile; ++jj) {
      float pr = expf(sc[jj] - safeMax(m));
      l += pr;
      if (p.drop)
        pr = dropoutKeepBit(p.key, hv.maskRow + uint64_t(i * p.seq + j0 + jj),
                            p.thr)
                 ? pr * p.inv
                 : 0.0f;
      axpySeg<DPT>(pr, vs + S::at(jj, part, 0), acc);
    }
  }
  if (!valid)
    return;
  const float invL = 1.0f / l;
  if (out) {
#pragma unroll
    for (int d = 0; d < DPT; ++d)
      out[hv.off + i * p.hidden + part * DPT + d] = fromF<T>(acc[d] * invL);
  }
  if (lse && part == 0)
    lse[hv.bh * p.seq + i] = m + logf(l);
}

/// dq per query row, and D_i (saved for the dk/dv kernel). Pass 1 over the
/// key tiles sums D_i = sum_j P_ij dP_ij; pass 2 sums dq. With haveD, D_i
/// was computed from the forward's output (attentionDRowKernel): pass 2 only.
template <typename T, int HD>
__global__ void __launch_bounds__(Split<HD>::Threads)
    dqKernel(const T *q, const T *k, const T *v, const float *lse,
             const T *dOut, T *dq, float *dRow, bool haveD, bool acc,
             Params p) {
  using S = Split<HD>;
  constexpr int DPT = S::DPT, TPR = S::TPR;
  __shared__ __align__(16) float ks[kTile * S::Stride], vs[kTile * S::Stride];
  const Head hv = headOf<HD>(p);
  const int row = threadIdx.x / TPR, part = threadIdx.x % TPR;
  const int64_t i = int64_t(blockIdx.x) * kRows + row;
  const bool valid = i < p.seq;
  float qr[DPT], dor[DPT], g[DPT];
#pragma unroll
  for (int d = 0; d < DPT; ++d) {
    const int64_t e = hv.off + i * p.hidden + part * DPT + d;
    qr[d] = valid ? toF(q[e]) * p.scale : 0.0f;
    dor[d] = valid ? toF(dOut[e]) : 0.0f;
    g[d] = 0.0f;
  }
  const float li = valid ? lse[hv.bh * p.seq + i] : 0.0f;
  const int64_t keyEnd =
      p.causal ? min(p.seq, int64_t(blockIdx.x + 1) * kRows) : p.seq;
  float D = haveD && valid ? dRow[hv.bh * p.seq + i] : 0.0f;
  // Without dq only D_i is wanted: skip the second pass.
  for (int pass = haveD ? 1 : 0; pass < (dq ? 2 : 1); ++pass) {
    for (int64_t j0 = 0; j0 < keyEnd; j0 += kTile) {
      __syncthreads();
      loadTile<HD>(ks, k, hv.off, j0, p);
      loadTile<HD>(vs, v, hv.off, j0, p);
      __syncthreads();
#pragma unroll 4
      for (int jj = 0; jj < kTile; ++jj) {
        const float s = rowSum<TPR>(dotSeg<DPT>(qr, ks + S::at(jj, part, 0)));
        float dp = rowSum<TPR>(dotSeg<DPT>(dor, vs + S::at(jj, part, 0)));
        const int64_t j = j0 + jj;
        const bool masked = keyMasked(p, i, j);
        const float pr = masked ? 0.0f : expf(s - li);
        if (p.drop)
          dp =
              dropoutKeepBit(p.key, hv.maskRow + uint64_t(i * p.seq + j), p.thr)
                  ? dp * p.inv
                  : 0.0f;
        if (pass == 0) {
          D += pr * dp;
        } else {
          const float ds = pr * (dp - D);
          axpySeg<DPT>(ds, ks + S::at(jj, part, 0), g);
        }
      }
    }
  }
  if (!valid)
    return;
  if (part == 0 && !haveD)
    dRow[hv.bh * p.seq + i] = D;
  if (dq) {
#pragma unroll
    for (int d = 0; d < DPT; ++d)
      put(dq + hv.off + i * p.hidden + part * DPT + d, g[d] * p.scale, acc);
  }
}

/// dk and dv per key row: loops over the query tiles that can see it.
template <typename T, int HD>
__global__ void __launch_bounds__(Split<HD>::Threads)
    dkvKernel(const T *q, const T *k, const T *v, const float *lse,
              const float *dRow, const T *dOut, T *dk, T *dv, bool accK,
              bool accV, Params p) {
  using S = Split<HD>;
  constexpr int DPT = S::DPT, TPR = S::TPR;
  __shared__ __align__(16) float qs[kTile * S::Stride], dos[kTile * S::Stride];
  __shared__ float ls[kTile], ds_[kTile];
  const Head hv = headOf<HD>(p);
  const int row = threadIdx.x / TPR, part = threadIdx.x % TPR;
  const int64_t j = int64_t(blockIdx.x) * kRows + row;
  const bool valid = j < p.seq;
  float kr[DPT], vr[DPT], gk[DPT], gv[DPT];
#pragma unroll
  for (int d = 0; d < DPT; ++d) {
    const int64_t e = hv.off + j * p.hidden + part * DPT + d;
    kr[d] = valid ? toF(k[e]) * p.scale : 0.0f;
    vr[d] = valid ? toF(v[e]) : 0.0f;
    gk[d] = gv[d] = 0.0f;
  }
  // Causal: queries before this block's first key see none of its keys.
  const int64_t qStart =
      p.causal ? (int64_t(blockIdx.x) * kRows / kTile) * kTile : 0;
  for (int64_t i0 = qStart; i0 < p.seq; i0 += kTile) {
    __syncthreads();
    loadTile<HD>(qs, q, hv.off, i0, p);
    loadTile<HD>(dos, dOut, hv.off, i0, p);
    for (int t = threadIdx.x; t < kTile; t += blockDim.x) {
      const int64_t i = i0 + t;
      ls[t] = i < p.seq ? lse[hv.bh * p.seq + i] : 0.0f;
      ds_[t] = i < p.seq ? dRow[hv.bh * p.seq + i] : 0.0f;
    }
    __syncthreads();
#pragma unroll 4
    for (int ii = 0; ii < kTile; ++ii) {
      const float s = rowSum<TPR>(dotSeg<DPT>(kr, qs + S::at(ii, part, 0)));
      const float dp = rowSum<TPR>(dotSeg<DPT>(vr, dos + S::at(ii, part, 0)));
      const int64_t i = i0 + ii;
      const bool masked = i >= p.seq || !valid || keyMasked(p, i, j);
      const float pr = masked ? 0.0f : expf(s - ls[ii]);
      float keep = 1.0f;
      if (p.drop)
        keep =
            dropoutKeepBit(p.key, hv.maskRow + uint64_t(i * p.seq + j), p.thr)
                ? p.inv
                : 0.0f;
      const float pd = pr * keep;
      const float dsij = pr * (dp * keep - ds_[ii]);
      axpySeg<DPT>(pd, dos + S::at(ii, part, 0), gv);
      axpySeg<DPT>(dsij, qs + S::at(ii, part, 0), gk);
    }
  }
  if (!valid)
    return;
#pragma unroll
  for (int d = 0; d < DPT; ++d) {
    const int64_t e = hv.off + j * p.hidden + part * DPT + d;
    if (dk)
      put(dk + e, gk[d] * p.scale, accK);
    if (dv)
      put(dv + e, gv[d], accV);
  }
}

template <typename T, int HD>
cudaError_t forwardHd(const T *q, const T *k, const T *v, T *out, float *lse,
                      const AttentionShape &s, cudaStream_t stream) {
  const dim3 grid(unsigned((s.seq + kRows - 1) / kRows),
                  unsigned(s.batch * s.heads));
  forwardKernel<T, HD>
      <<<grid, Split<HD>::Threads, 0, stream>>>(q, k, v, out, lse, paramsOf(s));
  return cudaGetLastError();
}

template <typename T, int HD>
cudaError_t backwardHd(const T *q, const T *k, const T *v, const float *lse,
                       const T *dOut, T *dq, T *dk, T *dv,
                       const AttentionShape &s, AccumulateMask accumulate,
                       cudaStream_t stream, const T *out) {
  const int64_t rows = s.lseSize();
  float *scratch = nullptr;
  if (cudaError_t e = cudaMallocAsync(
          (void **)&scratch, (lse ? 1 : 2) * rows * sizeof(float), stream))
    return e;
  float *dRow = scratch;
  const Params p = paramsOf(s);
  const dim3 grid(unsigned((s.seq + kRows - 1) / kRows),
                  unsigned(s.batch * s.heads));
  if (!lse) {
    float *own = scratch + rows;
    forwardKernel<T, HD>
        <<<grid, Split<HD>::Threads, 0, stream>>>(q, k, v, nullptr, own, p);
    lse = own;
  }
  // D_i is needed by dk/dv even when dq is not.
  const bool haveD = out != nullptr;
  if (haveD)
    attentionDRowKernel<<<unsigned((rows + 7) / 8), 256, 0, stream>>>(
        out, dOut, dRow, rows, s.seq, s.hidden, s.heads, HD);
  if (dq || !haveD)
    dqKernel<T, HD><<<grid, Split<HD>::Threads, 0, stream>>>(
        q, k, v, lse, dOut, dq, dRow, haveD, accumulate[0], p);
  if (dk || dv)
    dkvKernel<T, HD><<<grid, Split<HD>::Threads, 0, stream>>>(
        q, k, v, lse, dRow, dOut, dk, dv, accumulate[1], accumulate[2], p);
  cudaError_t launch = cudaGetLastError();
  cudaError_t freed = cudaFreeAsync(scratch, stream);
  return launch ? launch : freed;
}
} // namespace

bool dsc::rt::cuda::attentionSupported(const AttentionShape &s) {
  if (s.heads <= 0 || s.hidden % s.heads)
    return false;
  const int64_t hd = s.headDim();
  return hd == 16 || hd == 32 || hd == 64 || hd == 128;
}

template <typename T>
cudaError_t dsc::rt::cuda::attentionForward(const T *q, const T *k, const T *v,
                                            T *out, float *lse,
                                            const AttentionShape &s,
                                            cudaStream_t stream) {
  if (!attentionSupported(s))
    return cudaErrorInvalidValue;
  if (s.batch * s.seq == 0)
    return cudaSuccess;
  if constexpr (!std::is_same_v<T, float>)
    if (attentionTensorCoreEligible(s, {q, k, v, out}))
      return attentionForwardTensorCore(q, k, v, out, lse, s, stream);
  switch (s.headDim()) {
  case 16:
    return forwardHd<T, 16>(q, k, v, out, lse, s, stream);
  case 32:
    return forwardHd<T, 32>(q, k, v, out, lse, s, stream);
  case 64:
    return forwardHd<T, 64>(q, k, v, out, lse, s, stream);
  default:
    return forwardHd<T, 128>(q, k, v, out, lse, s, stream);
  }
}

template <typename T>
cudaError_t dsc::rt::cuda::attentionBackward(
    const T *q, const T *k, const T *v, const float *lse, const T *dOut, T *dq,
    T *dk, T *dv, const AttentionShape &s, AccumulateMask accumulate,
    cudaStream_t stream, const T *out) {
  if (!attentionSupported(s))
    return cudaErrorInvalidValue;
  if (s.batch * s.seq == 0 || (!dq && !dk && !dv))
    return cudaSuccess;
  if constexpr (!std::is_same_v<T, float>)
    if (attentionTensorCoreEligible(s, {q, k, v, dOut, dq, dk, dv, out}))
      return attentionBackwardTensorCore(q, k, v, lse, dOut, dq, dk, dv, s,
                                         accumulate, stream, out);
  switch (s.headDim()) {
  case 16:
    return backwardHd<T, 16>(q, k, v, lse, dOut, dq, dk, dv, s, accumulate,
                             stream, out);
  case 32:
    return backwardHd<T, 32>(q, k, v, lse, dOut, dq, dk, dv, s, accumulate,
                             stream, out);
  case 64:
    return backwardHd<T, 64>(q, k, v, lse, dOut, dq, dk, dv, s, accumulate,
                             stream, out);
  default:
    return backwardHd<T, 128>(q, k, v, lse, dOut, dq, dk, dv, s, accumulate,
                              stream, out);
  }
}

#define INSTANTIATE(T)                                                         \
  template cudaError_t dsc::rt::cuda::attentionForward<T>(                     \
      const T *, const T *, const T *, T *, float *, const AttentionShape &,   \
      cudaStream_t);                                                           \
  template cudaError_t dsc::rt::cuda::attentionBackward<T>(                    \
      const T *, const T *, const T *, const float *, const T *, T *, T *,     \
      T *, const AttentionShape &, AccumulateMask, cudaStream_t, const T *);
DSC_CUDA_INSTANTIATE_ALL(INSTANTIATE)
