//===- AttentionTensorCore.cu - Tensor-core attention for bf16/fp16 -------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// FlashAttention-2 style attention on tensor cores for bf16/fp16 q/k/v with
// head dim 64 or 128, through the portable nvcuda::wmma API (16x16x16
// fragments, fp32 accumulators). Same contract as the SIMT kernels of
// Attention.cu: layout, causal mask, scaling, dropout indices, fp32 lse,
// fixed-order sums and no float atomics.
//
// Tiles are 64 rows by 64 columns (kRows x kCols). Fragment layouts are not
// documented, so every row-wise step (softmax, masks, dropout) goes through
// shared memory: a warp stores its score fragments as fp32, lanes work on
// rows, and probabilities come back as T fragments. The one exception is
// the online-softmax rescale of the output accumulators: a 16x16 tile whose
// row r holds corr_r is loaded as an accumulator fragment and multiplied
// element by element, which relies only on two fragments of one type
// sharing a layout (the CUDA guide's alpha/beta example does the same).
//
//  - forward: one CTA (4 warps) per 64 query rows; a warp owns 16 rows, its
//    Q fragments and its O accumulators; K/V tiles of 64 keys are streamed
//    through shared memory; causal tiles past the diagonal are skipped.
//    With dOut it also writes D_i = dO_i . O_i (the backward's row term).
//  - dq: one CTA per 64 query rows, streaming K/V tiles; dS in shared memory.
//  - dk/dv: one CTA per 64 key rows, streaming Q/dO tiles from the first
//    one that can see the keys.
// dq and dk/dv are separate kernels so every sum has one owner (no atomics).
// In the backward kernels (HD / 64) warps share a 16-row group, splitting
// the score columns and the output columns, to bound registers at HD = 128.
//
// DscCudaKernelTests compares these kernels with the CPU's on an H200
// (docs/cuda-backend.md, "Measured results": correct, about 35 TFLOP/s);
// test/Runtime/CudaMirror/attention_tc_mirror.py mirrors the loops (with
// the shared-memory strides) in numpy for machines without a GPU.
//
//===----------------------------------------------------------------------===//

#include "AttentionCommon.cuh"

#include <mma.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

using namespace dsc::rt;
using namespace dsc::rt::cuda;
using namespace dsc::rt::cuda::detail;

namespace {
namespace wmma = nvcuda::wmma;

constexpr int kRows = 64; // rows a CTA owns (queries; keys for dk/dv)
constexpr int kCols = 64; // rows of each streamed tile (keys; queries)
constexpr int kFrag = 16; // wmma tile edge

// Shared-memory row strides (in elements). The pads move consecutive rows
// to other banks for the fragment loads; they keep every fragment's first
// element 32-byte aligned (16-row starts) as load_matrix_sync requires.
template <int HD> struct Ld {
  static constexpr int T = HD + 8;    // [rows, HD] tiles of T
  static constexpr int P = kCols + 8; // [rows, kCols] tiles of T (P, dS)
  static constexpr int S = kCols + 4; // [rows, kCols] fp32 scores
  static constexpr int O = HD + 4;    // [rows, HD] fp32 output staging
};

template <typename T>
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <typename T>
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
template <typename T>
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

constexpr size_t align128(size_t n) { return (n + 127) / 128 * 128; }

/// Rows [r0, r0 + 64) of the head's HD columns into shared `dst` (stride
/// Ld::T) as 16-byte vectors, zero past the sequence.
template <int HD, typename T>
__device__ __forceinline__ void loadTile(T *dst, const T *src, int64_t off,
                                         int64_t r0, const AttentionParams &p) {
  constexpr int V = 16 / sizeof(T), PerRow = HD / V;
  for (int e = threadIdx.x; e < kRows * PerRow; e += blockDim.x) {
    const int r = e / PerRow, c = (e % PerRow) * V;
    const int64_t row = r0 + r;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (row < p.seq)
      x = *reinterpret_cast<const uint4 *>(src + off + row * p.hidden + c);
    *reinterpret_cast<uint4 *>(dst + r * Ld<HD>::T + c) = x;
  }
}

/// Per-row fp32 values [r0, r0 + 64) of a [batch * heads, seq] array, zero
/// past the sequence.
__device__ __forceinline__ void loadRows(float *dst, const float *src,
                                         int64_t bh, int64_t r0,
                                         const AttentionParams &p) {
  for (int t = threadIdx.x; t < kRows; t += blockDim.x)
    dst[t] = r0 + t < p.seq ? src[bh * p.seq + r0 + t] : 0.0f;
}

/// dst[16 x 16 N] (fp32, stride Ld::S) = A[16 x HD] (fragments) times B^T,
/// B = rows [0, 16 N) of a [., HD] shared tile, read as a column-major B^T.
/// One accumulator at a time, stored as soon as it is done (registers).
template <typename T, int HD, int N>
__device__ __forceinline__ void
rowsTimesTileT(float *dst, const FragA<T> (&a)[HD / kFrag], const T *b) {
#pragma unroll
  for (int n = 0; n < N; ++n) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < HD / kFrag; ++kk) {
      FragBCol<T> bf;
      wmma::load_matrix_sync(bf, b + n * kFrag * Ld<HD>::T + kk * kFrag,
                             Ld<HD>::T);
      wmma::mma_sync(acc, a[kk], bf, acc);
    }
    wmma::store_matrix_sync(dst + n * kFrag, acc, Ld<HD>::S,
                            wmma::mem_row_major);
  }
}

/// acc[16 x 16 N] += A[16 x kCols] (shared, stride Ld::P) times
/// B[kCols x 16 N] (shared, stride Ld::T).
template <typename T, int HD, int N>
__device__ __forceinline__ void tileTimesTile(FragC (&acc)[N], const T *a,
                                              const T *b) {
#pragma unroll
  for (int kk = 0; kk < kCols / kFrag; ++kk) {
    FragA<T> af;
    wmma::load_matrix_sync(af, a + kk * kFrag, Ld<HD>::P);
#pragma unroll
    for (int n = 0; n < N; ++n) {
      FragBRow<T> bf;
      wmma::load_matrix_sync(bf, b + kk * kFrag * Ld<HD>::T + n * kFrag,
                             Ld<HD>::T);
      wmma::mma_sync(acc[n], af, bf, acc[n]);
    }
  }
}

/// Whether probability (i, j) survives attention dropout (true without).
__device__ __forceinline__ bool
kept(const AttentionParams &p, const AttentionHead &hv, int64_t i, int64_t j) {
  return !p.drop ||
         dropoutKeepBit(p.key, hv.maskRow + uint64_t(i * p.seq + j), p.thr);
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

constexpr int kFwdWarps = kRows / kFrag; // a warp per 16 query rows

template <typename T, int HD> struct FwdSmem {
  // ks, vs: [kCols, Ld::T] T; sc: [kRows, Ld::S] fp32 scores (Q staging
  // before the loop); pr: [kRows, Ld::P] T probabilities; corr: a 16x16 fp32
  // tile per warp. After the loop the fp32 output is staged over ks/vs.
  static constexpr size_t ks = 0;
  static constexpr size_t vs = ks + align128(kCols * Ld<HD>::T * sizeof(T));
  static constexpr size_t sc = vs + align128(kCols * Ld<HD>::T * sizeof(T));
  static constexpr size_t pr = sc + align128(kRows * Ld<HD>::S * 4);
  static constexpr size_t corr = pr + align128(kRows * Ld<HD>::P * sizeof(T));
  static constexpr size_t bytes = corr + kFwdWarps * kFrag * kFrag * 4;
  static_assert(kRows * Ld<HD>::T * sizeof(T) <= kRows * Ld<HD>::S * 4,
                "Q is staged in the score buffer");
  static_assert(kRows * Ld<HD>::O * 4 <= sc, "O is staged over K and V");
};

/// out (when non-null), lse (when non-null) and, when dRow is non-null,
/// D_i = dO_i . O_i from the unrounded fp32 O.
template <typename T, int HD>
__global__ void __launch_bounds__(kFwdWarps * 32)
    tcForwardKernel(const T *q, const T *k, const T *v, T *out, float *lse,
                    const T *dOut, float *dRow, AttentionParams p) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using L = Ld<HD>;
  using M = FwdSmem<T, HD>;
  constexpr int Dn = HD / kFrag, Nn = kCols / kFrag;
  extern __shared__ __align__(128) unsigned char smem[];
  T *ks = reinterpret_cast<T *>(smem + M::ks);
  T *vs = reinterpret_cast<T *>(smem + M::vs);
  float *sc = reinterpret_cast<float *>(smem + M::sc);
  T *pr = reinterpret_cast<T *>(smem + M::pr);
  float *corrs = reinterpret_cast<float *>(smem + M::corr);

  const AttentionHead hv = attentionHeadOf<HD>(p);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t i0 = int64_t(blockIdx.x) * kRows;

  // Q fragments of this warp's 16 rows, staged through the score buffer.
  T *qs = reinterpret_cast<T *>(sc);
  loadTile<HD>(qs, q, hv.off, i0, p);
  __syncthreads();
  FragA<T> qf[Dn];
#pragma unroll
  for (int kk = 0; kk < Dn; ++kk)
    wmma::load_matrix_sync(qf[kk], qs + warp * kFrag * L::T + kk * kFrag, L::T);
  FragC of[Dn];
#pragma unroll
  for (int d = 0; d < Dn; ++d)
    wmma::fill_fragment(of[d], 0.0f);

  // Softmax ownership: lanes 2r and 2r + 1 share row r of the warp's 16,
  // taking the even and the odd columns (fewer bank conflicts than halves).
  const int r = lane >> 1, half = lane & 1;
  const int64_t i = i0 + warp * kFrag + r;
  float *sw = sc + warp * kFrag * L::S;
  T *pw = pr + warp * kFrag * L::P;
  float *cw = corrs + warp * kFrag * kFrag;
  float m = -INFINITY, l = 0.0f;
  const int64_t keyEnd = p.causal ? min(p.seq, i0 + kRows) : p.seq;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kCols) {
    __syncthreads(); // the previous tile (or the Q staging) is consumed
    loadTile<HD>(ks, k, hv.off, j0, p);
    loadTile<HD>(vs, v, hv.off, j0, p);
    __syncthreads();
    rowsTimesTileT<T, HD, Nn>(sw, qf, ks);
    __syncwarp();
    // Scaled, masked scores are written back in place for the second pass.
    constexpr int Per = kCols / 2;
    float tileMax = -INFINITY;
#pragma unroll 8
    for (int c = 0; c < Per; ++c) {
      const int jj = 2 * c + half;
      const int64_t j = j0 + jj;
      float x = sw[r * L::S + jj] * p.scale;
      if (keyMasked(p, i, j))
        x = -INFINITY;
      sw[r * L::S + jj] = x;
      tileMax = fmaxf(tileMax, x);
    }
    tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 1));
    // -inf while every key so far is masked (a sliding window's early
    // tiles): safeMax keeps the exponentials 0 instead of NaN.
    const float newM = fmaxf(m, tileMax);
    const float corr = expf(m - safeMax(newM));
    float sum = 0.0f;
#pragma unroll 8
    for (int c = 0; c < Per; ++c) {
      const int jj = 2 * c + half;
      float e = expf(sw[r * L::S + jj] - safeMax(newM));
      sum += e;
      if (p.drop)
        e = kept(p, hv, i, j0 + jj) ? e * p.inv : 0.0f;
      pw[r * L::P + jj] = fromF<T>(e);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * corr + sum;
    m = newM;
#pragma unroll
    for (int c = 0; c < kFrag / 2; ++c)
      cw[r * kFrag + half * (kFrag / 2) + c] = corr;
    __syncwarp();
    FragC cf;
    wmma::load_matrix_sync(cf, cw, kFrag, wmma::mem_row_major);
#pragma unroll
    for (int d = 0; d < Dn; ++d)
#pragma unroll
      for (int t = 0; t < cf.num_elements; ++t)
        of[d].x[t] *= cf.x[t];
    tileTimesTile<T, HD, Dn>(of, pw, vs);
  }

  // Epilogue: O / l staged as fp32 over K/V, written by rows.
  __syncthreads();
  float *os = reinterpret_cast<float *>(smem + M::ks) + warp * kFrag * L::O;
#pragma unroll
  for (int d = 0; d < Dn; ++d)
    wmma::store_matrix_sync(os + d * kFrag, of[d], L::O, wmma::mem_row_major);
  if (half == 0) {
    cw[r] = 1.0f / l;
    if (lse && i < p.seq)
      lse[hv.bh * p.seq + i] = m + logf(l);
  }
  __syncwarp();
  for (int rr = 0; rr < kFrag; ++rr) {
    const int64_t row = i0 + warp * kFrag + rr;
    if (row >= p.seq)
      break;
    const float invL = cw[rr];
    const int64_t e0 = hv.off + row * p.hidden;
    float dot = 0.0f;
    for (int c = lane; c < HD; c += 32) {
      const float o = os[rr * L::O + c] * invL;
      if (out)
        out[e0 + c] = fromF<T>(o);
      if (dRow)
        dot += o * toF(dOut[e0 + c]);
    }
    if (dRow) {
      dot = warpSum(dot);
      if (lane == 0)
        dRow[hv.bh * p.seq + row] = dot;
    }
  }
#else
  __trap();
#endif
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// Warps per 16-row group: at HD = 128 two warps split the columns.
template <int HD> constexpr int kSplit = HD / 64;
template <int HD> constexpr int kBwdThreads = kRows / kFrag *kSplit<HD> * 32;

template <typename T, int HD> struct BwdSmem {
  // a, b: [kCols, Ld::T] T streamed tiles (dq: K, V; dk/dv: Q, dO);
  // s, dp: [kRows, Ld::S] fp32 scores and dP (the own rows' Q/dO, or K/V,
  // are staged here first); x, y: [kRows, Ld::P] T (dq: dS; dk/dv: dropped
  // P^T and dS^T); lse, dr: the streamed tile's (dk/dv) or own (dq) rows.
  static constexpr size_t a = 0;
  static constexpr size_t b = a + align128(kCols * Ld<HD>::T * sizeof(T));
  static constexpr size_t s = b + align128(kCols * Ld<HD>::T * sizeof(T));
  static constexpr size_t dp = s + align128(kRows * Ld<HD>::S * 4);
  static constexpr size_t x = dp + align128(kRows * Ld<HD>::S * 4);
  static constexpr size_t y = x + align128(kRows * Ld<HD>::P * sizeof(T));
  static constexpr size_t lse = y + align128(kRows * Ld<HD>::P * sizeof(T));
  static constexpr size_t dr = lse + kCols * 4;
  static constexpr size_t bytes = dr + kCols * 4;
  static_assert(kRows * Ld<HD>::T * sizeof(T) <= kRows * Ld<HD>::S * 4,
                "own rows are staged in the score buffers");
  static_assert(kRows * Ld<HD>::O * 4 <= s - a &&
                    kRows * Ld<HD>::O * 4 <= x - s,
                "dq/dk is staged over a/b, dv over s/dp");
};

/// dq = scale * sum_j dS_ij K_j per query row, over key tiles in order.
template <typename T, int HD>
__global__ void __launch_bounds__(kBwdThreads<HD>)
    tcDqKernel(const T *q, const T *k, const T *v, const float *lse,
               const float *dRow, const T *dOut, T *dq, bool acc,
               AttentionParams p) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using L = Ld<HD>;
  using M = BwdSmem<T, HD>;
  constexpr int W = kSplit<HD>, Dn = HD / kFrag;
  constexpr int SCols = kCols / W, QCols = HD / W; // per warp
  extern __shared__ __align__(128) unsigned char smem[];
  T *ks = reinterpret_cast<T *>(smem + M::a);
  T *vs = reinterpret_cast<T *>(smem + M::b);
  float *ss = reinterpret_cast<float *>(smem + M::s);
  float *dps = reinterpret_cast<float *>(smem + M::dp);
  T *dss = reinterpret_cast<T *>(smem + M::x);
  float *ls = reinterpret_cast<float *>(smem + M::lse);
  float *drs = reinterpret_cast<float *>(smem + M::dr);

  const AttentionHead hv = attentionHeadOf<HD>(p);
  const int warp = threadIdx.x / 32, g = warp / W, part = warp % W;
  const int64_t i0 = int64_t(blockIdx.x) * kRows;

  T *qs = reinterpret_cast<T *>(ss), *dos = reinterpret_cast<T *>(dps);
  loadTile<HD>(qs, q, hv.off, i0, p);
  loadTile<HD>(dos, dOut, hv.off, i0, p);
  loadRows(ls, lse, hv.bh, i0, p);
  loadRows(drs, dRow, hv.bh, i0, p);
  __syncthreads();
  FragA<T> qf[Dn], dof[Dn];
#pragma unroll
  for (int kk = 0; kk < Dn; ++kk) {
    wmma::load_matrix_sync(qf[kk], qs + g * kFrag * L::T + kk * kFrag, L::T);
    wmma::load_matrix_sync(dof[kk], dos + g * kFrag * L::T + kk * kFrag, L::T);
  }
  FragC gf[QCols / kFrag];
#pragma unroll
  for (int d = 0; d < QCols / kFrag; ++d)
    wmma::fill_fragment(gf[d], 0.0f);

  const int64_t keyEnd = p.causal ? min(p.seq, i0 + kRows) : p.seq;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kCols) {
    __syncthreads();
    loadTile<HD>(ks, k, hv.off, j0, p);
    loadTile<HD>(vs, v, hv.off, j0, p);
    __syncthreads();
    // S and dP of the group's 16 rows, this warp's SCols columns.
    rowsTimesTileT<T, HD, SCols / kFrag>(ss + g * kFrag * L::S + part * SCols,
                                         qf, ks + part * SCols * L::T);
    rowsTimesTileT<T, HD, SCols / kFrag>(dps + g * kFrag * L::S + part * SCols,
                                         dof, vs + part * SCols * L::T);
    __syncthreads();
    for (int e = threadIdx.x; e < kRows * kCols; e += blockDim.x) {
      const int ii = e / kCols, jj = e % kCols;
      const int64_t i = i0 + ii, j = j0 + jj;
      float ds = 0.0f;
      if (i < p.seq && !keyMasked(p, i, j)) {
        const float pij = expf(ss[ii * L::S + jj] * p.scale - ls[ii]);
        float dp = dps[ii * L::S + jj];
        if (p.drop)
          dp = kept(p, hv, i, j) ? dp * p.inv : 0.0f;
        ds = pij * (dp - drs[ii]);
      }
      dss[ii * L::P + jj] = fromF<T>(ds);
    }
    __syncthreads();
    tileTimesTile<T, HD, QCols / kFrag>(gf, dss + g * kFrag * L::P,
                                        ks + part * QCols);
  }

  __syncthreads();
  float *os = reinterpret_cast<float *>(smem + M::a);
#pragma unroll
  for (int d = 0; d < QCols / kFrag; ++d)
    wmma::store_matrix_sync(os + g * kFrag * L::O + part * QCols + d * kFrag,
                            gf[d], L::O, wmma::mem_row_major);
  __syncthreads();
  for (int e = threadIdx.x; e < kRows * HD; e += blockDim.x) {
    const int ii = e / HD, c = e % HD;
    const int64_t i = i0 + ii;
    if (i < p.seq)
      put(dq + hv.off + i * p.hidden + c, os[ii * L::O + c] * p.scale, acc);
  }
#else
  __trap();
#endif
}

/// dk = scale * sum_i dS_ij Q_i and dv = sum_i dropout(P)_ij dO_i per key
/// row, over query tiles in order from the first that can see the keys.
template <typename T, int HD>
__global__ void __launch_bounds__(kBwdThreads<HD>)
    tcDkvKernel(const T *q, const T *k, const T *v, const float *lse,
                const float *dRow, const T *dOut, T *dk, T *dv, bool accK,
                bool accV, AttentionParams p) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using L = Ld<HD>;
  using M = BwdSmem<T, HD>;
  constexpr int W = kSplit<HD>, Dn = HD / kFrag;
  constexpr int SCols = kCols / W, QCols = HD / W; // per warp
  extern __shared__ __align__(128) unsigned char smem[];
  T *qs = reinterpret_cast<T *>(smem + M::a);
  T *dos = reinterpret_cast<T *>(smem + M::b);
  float *ss = reinterpret_cast<float *>(smem + M::s);
  float *dps = reinterpret_cast<float *>(smem + M::dp);
  T *pds = reinterpret_cast<T *>(smem + M::x);
  T *dss = reinterpret_cast<T *>(smem + M::y);
  float *ls = reinterpret_cast<float *>(smem + M::lse);
  float *drs = reinterpret_cast<float *>(smem + M::dr);

  const AttentionHead hv = attentionHeadOf<HD>(p);
  const int warp = threadIdx.x / 32, g = warp / W, part = warp % W;
  const int64_t j0 = int64_t(blockIdx.x) * kRows;

  T *kst = reinterpret_cast<T *>(ss), *vst = reinterpret_cast<T *>(dps);
  loadTile<HD>(kst, k, hv.off, j0, p);
  loadTile<HD>(vst, v, hv.off, j0, p);
  __syncthreads();
  FragA<T> kf[Dn], vf[Dn];
#pragma unroll
  for (int kk = 0; kk < Dn; ++kk) {
    wmma::load_matrix_sync(kf[kk], kst + g * kFrag * L::T + kk * kFrag, L::T);
    wmma::load_matrix_sync(vf[kk], vst + g * kFrag * L::T + kk * kFrag, L::T);
  }
  FragC gk[QCols / kFrag], gv[QCols / kFrag];
#pragma unroll
  for (int d = 0; d < QCols / kFrag; ++d) {
    wmma::fill_fragment(gk[d], 0.0f);
    wmma::fill_fragment(gv[d], 0.0f);
  }

  // Causal: queries before the tile holding key j0 see none of its keys.
  const int64_t qStart = p.causal ? j0 / kCols * kCols : 0;
  for (int64_t i0 = qStart; i0 < p.seq; i0 += kCols) {
    __syncthreads();
    loadTile<HD>(qs, q, hv.off, i0, p);
    loadTile<HD>(dos, dOut, hv.off, i0, p);
    loadRows(ls, lse, hv.bh, i0, p);
    loadRows(drs, dRow, hv.bh, i0, p);
    __syncthreads();
    // S^T = K Q^T and dP^T = V dO^T: the group's 16 keys, this warp's
    // SCols queries.
    rowsTimesTileT<T, HD, SCols / kFrag>(ss + g * kFrag * L::S + part * SCols,
                                         kf, qs + part * SCols * L::T);
    rowsTimesTileT<T, HD, SCols / kFrag>(dps + g * kFrag * L::S + part * SCols,
                                         vf, dos + part * SCols * L::T);
    __syncthreads();
    for (int e = threadIdx.x; e < kRows * kCols; e += blockDim.x) {
      const int jj = e / kCols, ii = e % kCols;
      const int64_t j = j0 + jj, i = i0 + ii;
      float pd = 0.0f, ds = 0.0f;
      if (i < p.seq && !keyMasked(p, i, j)) {
        const float pij = expf(ss[jj * L::S + ii] * p.scale - ls[ii]);
        const float keep = p.drop ? (kept(p, hv, i, j) ? p.inv : 0.0f) : 1.0f;
        pd = pij * keep;
        ds = pij * (dps[jj * L::S + ii] * keep - drs[ii]);
      }
      pds[jj * L::P + ii] = fromF<T>(pd);
      dss[jj * L::P + ii] = fromF<T>(ds);
    }
    __syncthreads();
    tileTimesTile<T, HD, QCols / kFrag>(gv, pds + g * kFrag * L::P,
                                        dos + part * QCols);
    tileTimesTile<T, HD, QCols / kFrag>(gk, dss + g * kFrag * L::P,
                                        qs + part * QCols);
  }

  __syncthreads();
  float *oks = reinterpret_cast<float *>(smem + M::a);
  float *ovs = reinterpret_cast<float *>(smem + M::s);
#pragma unroll
  for (int d = 0; d < QCols / kFrag; ++d) {
    const int at = g * kFrag * L::O + part * QCols + d * kFrag;
    wmma::store_matrix_sync(oks + at, gk[d], L::O, wmma::mem_row_major);
    wmma::store_matrix_sync(ovs + at, gv[d], L::O, wmma::mem_row_major);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kRows * HD; e += blockDim.x) {
    const int jj = e / HD, c = e % HD;
    const int64_t j = j0 + jj;
    if (j >= p.seq)
      continue;
    const int64_t at = hv.off + j * p.hidden + c;
    if (dk)
      put(dk + at, oks[jj * L::O + c] * p.scale, accK);
    if (dv)
      put(dv + at, ovs[jj * L::O + c], accV);
  }
#else
  __trap();
#endif
}

/// Launches `Kernel` with `bytes` of dynamic shared memory, opting in past
/// the 48 KB default. The attribute is set once per device (the first call
/// on each of devices 0-63; any call past those), so a step captured into a
/// CUDA graph after a warm-up step makes no attribute call.
template <auto Kernel, typename... Args>
cudaError_t launch(dim3 grid, int threads, size_t bytes, cudaStream_t stream,
                   Args... args) {
  static std::atomic<uint64_t> opted{0};
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device))
    return e;
  const uint64_t bit = device < 64 ? uint64_t(1) << device : 0;
  if (!bit || !(opted.load(std::memory_order_relaxed) & bit)) {
    if (cudaError_t e = cudaFuncSetAttribute(
            Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)))
      return e;
    opted.fetch_or(bit, std::memory_order_relaxed);
  }
  Kernel<<<grid, threads, bytes, stream>>>(args...);
  return cudaGetLastError();
}

dim3 gridOf(const AttentionShape &s) {
  return dim3(unsigned((s.seq + kRows - 1) / kRows),
              unsigned(s.batch * s.heads));
}

template <typename T, int HD>
cudaError_t forwardHd(const T *q, const T *k, const T *v, T *out, float *lse,
                      const T *dOut, float *dRow, const AttentionShape &s,
                      cudaStream_t stream) {
  return launch<tcForwardKernel<T, HD>>(
      gridOf(s), kFwdWarps * 32, FwdSmem<T, HD>::bytes, stream, q, k, v, out,
      lse, dOut, dRow, attentionParamsOf(s));
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
  cudaError_t err = cudaSuccess;
  // Without the forward's output or lse, run the forward again for what is
  // missing: D_i from its fp32 O (which the caller's bf16 `out` would only
  // approximate) and, without a saved lse, the lse.
  if (!lse || !out) {
    float *own = lse ? nullptr : scratch + rows;
    err = forwardHd<T, HD>(q, k, v, nullptr, own, dOut, dRow, s, stream);
    if (!lse)
      lse = own;
  } else {
    attentionDRowKernel<<<unsigned((rows + 7) / 8), 256, 0, stream>>>(
        out, dOut, dRow, rows, s.seq, s.hidden, s.heads, HD);
    err = cudaGetLastError();
  }
  const AttentionParams p = attentionParamsOf(s);
  const size_t bytes = BwdSmem<T, HD>::bytes;
  if (!err && dq)
    err = launch<tcDqKernel<T, HD>>(gridOf(s), kBwdThreads<HD>, bytes, stream,
                                    q, k, v, lse, (const float *)dRow, dOut, dq,
                                    bool(accumulate[0]), p);
  if (!err && (dk || dv))
    err =
        launch<tcDkvKernel<T, HD>>(gridOf(s), kBwdThreads<HD>, bytes, stream, q,
                                   k, v, lse, (const float *)dRow, dOut, dk, dv,
                                   bool(accumulate[1]), bool(accumulate[2]), p);
  cudaError_t freed = cudaFreeAsync(scratch, stream);
  return err ? err : freed;
}
} // namespace

bool dsc::rt::cuda::detail::attentionTensorCoreEligible(
    const AttentionShape &s, std::initializer_list<const void *> ptrs) {
  const int64_t hd = s.headDim();
  if (hd != 64 && hd != 128)
    return false;
  if (const char *e = std::getenv("DSC_ATTENTION_SIMT");
      e && std::strcmp(e, "1") == 0)
    return false;
  for (const void *ptr : ptrs)
    if (reinterpret_cast<uintptr_t>(ptr) % 16)
      return false;
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                             device) != cudaSuccess)
    return false;
  return major >= 8;
}

template <typename T>
cudaError_t dsc::rt::cuda::detail::attentionForwardTensorCore(
    const T *q, const T *k, const T *v, T *out, float *lse,
    const AttentionShape &s, cudaStream_t stream) {
  if (s.headDim() == 64)
    return forwardHd<T, 64>(q, k, v, out, lse, nullptr, nullptr, s, stream);
  return forwardHd<T, 128>(q, k, v, out, lse, nullptr, nullptr, s, stream);
}

template <typename T>
cudaError_t dsc::rt::cuda::detail::attentionBackwardTensorCore(
    const T *q, const T *k, const T *v, const float *lse, const T *dOut, T *dq,
    T *dk, T *dv, const AttentionShape &s, AccumulateMask accumulate,
    cudaStream_t stream, const T *out) {
  if (s.headDim() == 64)
    return backwardHd<T, 64>(q, k, v, lse, dOut, dq, dk, dv, s, accumulate,
                             stream, out);
  return backwardHd<T, 128>(q, k, v, lse, dOut, dq, dk, dv, s, accumulate,
                            stream, out);
}

#define INSTANTIATE(T)                                                         \
  template cudaError_t dsc::rt::cuda::detail::attentionForwardTensorCore<T>(   \
      const T *, const T *, const T *, T *, float *, const AttentionShape &,   \
      cudaStream_t);                                                           \
  template cudaError_t dsc::rt::cuda::detail::attentionBackwardTensorCore<T>(  \
      const T *, const T *, const T *, const float *, const T *, T *, T *,     \
      T *, const AttentionShape &, AccumulateMask, cudaStream_t, const T *);
INSTANTIATE(__nv_bfloat16)
INSTANTIATE(__half)
