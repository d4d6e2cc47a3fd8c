//===- Matmul.cu - Batched GEMMs through cuBLASLt
//--------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Row-major MatmulShape products mapped onto column-major cuBLASLt calls
// (C^T = op(B)^T op(A)^T), with bias/GELU epilogues and the backward's GEMMs.
//
//===----------------------------------------------------------------------===//

#include "CudaSupport.cuh"

using namespace dsc::rt;
using namespace dsc::rt::cuda;

namespace {
template <typename T> constexpr cudaDataType_t dataType();
template <> constexpr cudaDataType_t dataType<float>() { return CUDA_R_32F; }
template <> constexpr cudaDataType_t dataType<__nv_bfloat16>() {
  return CUDA_R_16BF;
}
template <> constexpr cudaDataType_t dataType<__half>() { return CUDA_R_16F; }

#define LT_CHECK(expr)                                                         \
  do {                                                                         \
    cublasStatus_t st_ = (expr);                                               \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                          \
      return st_;                                                              \
  } while (0)

/// The descriptors of one call, destroyed on every path out.
struct Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descs() {
    if (pref)
      cublasLtMatmulPreferenceDestroy(pref);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (op)
      cublasLtMatmulDescDestroy(op);
  }
};

cublasStatus_t layout(cublasLtMatrixLayout_t &desc, cudaDataType_t type,
                      int64_t rows, int64_t cols, int64_t batch,
                      int64_t stride) {
  LT_CHECK(cublasLtMatrixLayoutCreate(&desc, type, uint64_t(rows),
                                      uint64_t(cols), rows));
  if (batch > 1) {
    const int32_t count = int32_t(batch);
    LT_CHECK(cublasLtMatrixLayoutSetAttribute(
        desc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    LT_CHECK(cublasLtMatrixLayoutSetAttribute(
        desc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
        sizeof(stride)));
  }
  return CUBLAS_STATUS_SUCCESS;
}

/// The largest power of two (<= 256) dividing the address: cuBLASLt's
/// heuristic assumes 256-byte operands unless told, and per-entry loops pass
/// interior pointers.
uint32_t alignmentOf(const void *p) {
  uint32_t a = 256;
  while (a > 1 && (reinterpret_cast<uintptr_t>(p) % a))
    a >>= 1;
  return a;
}

MatmulShape shape(int64_t batch, int64_t m, int64_t n, int64_t k, bool ta,
                  bool tb, bool bcast) {
  MatmulShape s;
  s.batch = batch;
  s.m = m;
  s.n = n;
  s.k = k;
  s.transA = ta;
  s.transB = tb;
  s.broadcastB = bcast;
  return s;
}
} // namespace

cublasStatus_t dsc::rt::cuda::createMatmulContext(MatmulContext &ctx,
                                                  size_t workspaceBytes,
                                                  MathMode math) {
  ctx.math = math;
  LT_CHECK(cublasLtCreate(&ctx.handle));
  if (workspaceBytes &&
      cudaMalloc(&ctx.workspace, workspaceBytes) != cudaSuccess) {
    cublasLtDestroy(ctx.handle);
    ctx.handle = nullptr;
    return CUBLAS_STATUS_ALLOC_FAILED;
  }
  ctx.workspaceSize = workspaceBytes;
  return CUBLAS_STATUS_SUCCESS;
}

void dsc::rt::cuda::destroyMatmulContext(MatmulContext &ctx) {
  if (ctx.workspace)
    cudaFree(ctx.workspace);
  if (ctx.handle)
    cublasLtDestroy(ctx.handle);
  ctx = MatmulContext();
}

template <typename T>
cublasStatus_t dsc::rt::cuda::gemm(MatmulContext &ctx, const T *a, const T *b,
                                   T *c, const MatmulShape &s, float alpha,
                                   float beta, cudaStream_t stream,
                                   Epilogue epilogue, const T *bias, T *aux) {
  if (s.batch == 0 || s.m == 0 || s.n == 0)
    return CUBLAS_STATUS_SUCCESS;
  int64_t batch = s.batch, m = s.m;
  // One B for all entries and A's rows contiguous across the batch: a
  // single GEMM with M = batch * m is faster than a batch of small ones.
  if (s.broadcastB && !s.transA && batch > 1) {
    m *= batch;
    batch = 1;
  }
  const int64_t n = s.n, k = s.k;
  constexpr cudaDataType_t type = dataType<T>();
  const cublasComputeType_t compute =
      (type == CUDA_R_32F && ctx.math == MathMode::Tf32)
          ? CUBLAS_COMPUTE_32F_FAST_TF32
          : CUBLAS_COMPUTE_32F;
  Descs d;
  LT_CHECK(cublasLtMatmulDescCreate(&d.op, compute, CUDA_R_32F));
  // Column-major view: C^T [n, m] = op(B)^T [n, k] * op(A)^T [k, m]; the
  // row-major B is cuBLASLt's "A" and keeps its transpose flag.
  const cublasOperation_t opA = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                          &opA, sizeof(opA)));
  LT_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                          &opB, sizeof(opB)));
  LT_CHECK(layout(d.a, type, s.transB ? k : n, s.transB ? n : k, batch,
                  s.broadcastB ? 0 : k * n));
  LT_CHECK(layout(d.b, type, s.transA ? m : k, s.transA ? k : m, batch, m * k));
  LT_CHECK(layout(d.c, type, n, m, batch, m * n));

  if (epilogue != Epilogue::None) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    switch (epilogue) {
    case Epilogue::Bias:
      epi = CUBLASLT_EPILOGUE_BIAS;
      break;
    case Epilogue::Gelu:
      epi = aux ? CUBLASLT_EPILOGUE_GELU_AUX : CUBLASLT_EPILOGUE_GELU;
      break;
    case Epilogue::GeluBias:
      epi = aux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
      break;
    case Epilogue::None:
      break;
    }
    LT_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                            &epi, sizeof(epi)));
    if (epilogue == Epilogue::Bias || epilogue == Epilogue::GeluBias) {
      // The bias runs along the column-major rows (n): one per column of C.
      LT_CHECK(cublasLtMatmulDescSetAttribute(
          d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
      const cudaDataType_t biasType = type;
      LT_CHECK(cublasLtMatmulDescSetAttribute(
          d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
          sizeof(biasType)));
    }
    if (aux && epilogue != Epilogue::Bias) {
      const int64_t ld = n, stride = m * n;
      LT_CHECK(cublasLtMatmulDescSetAttribute(
          d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
      LT_CHECK(cublasLtMatmulDescSetAttribute(
          d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
      if (batch > 1)
        LT_CHECK(cublasLtMatmulDescSetAttribute(
            d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &stride,
            sizeof(stride)));
    }
  }

  LT_CHECK(cublasLtMatmulPreferenceCreate(&d.pref));
  const uint64_t ws = ctx.workspaceSize;
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const uint32_t alignA = alignmentOf(b), alignB = alignmentOf(a),
                 alignC = alignmentOf(c);
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA,
      sizeof(alignA)));
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB,
      sizeof(alignB)));
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC,
      sizeof(alignC)));
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignC,
      sizeof(alignC)));
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  LT_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx.handle, d.op, d.a, d.b, d.c, d.c,
                                          d.pref, 1, &result, &found));
  if (found == 0)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return cublasLtMatmul(ctx.handle, d.op, &alpha, b, d.a, a, d.b, &beta, c, d.c,
                        c, d.c, &result.algo, ctx.workspace, ctx.workspaceSize,
                        stream);
}

template <typename T>
cublasStatus_t
dsc::rt::cuda::matmulForward(MatmulContext &ctx, const T *a, const T *b, T *c,
                             const MatmulShape &s, bool accumulate,
                             cudaStream_t stream) {
  return gemm(ctx, a, b, c, s, 1.0f, accumulate ? 1.0f : 0.0f, stream);
}

template <typename T>
cublasStatus_t
dsc::rt::cuda::matmulBackward(MatmulContext &ctx, const T *a, const T *b,
                              const T *dC, T *dA, T *dB, const MatmulShape &s,
                              bool accumulate, cudaStream_t stream) {
  const float beta = accumulate ? 1.0f : 0.0f;
  const int64_t B = s.batch, m = s.m, n = s.n, k = s.k;
  if (dA) {
    if (!s.transA) {
      // dA [m, k] = dC op(B)^T.
      LT_CHECK(gemm(ctx, dC, b, dA,
                    shape(B, m, k, n, false, !s.transB, s.broadcastB), 1.0f,
                    beta, stream));
    } else if (!s.broadcastB) {
      // dA stored [k, m] = op(B) dC^T.
      LT_CHECK(gemm(ctx, b, dC, dA, shape(B, k, m, n, s.transB, true, false),
                    1.0f, beta, stream));
    } else {
      // One shared B as the left operand: per entry (rare: transA with a
      // broadcast B).
      for (int64_t i = 0; i < B; ++i)
        LT_CHECK(gemm(ctx, b, dC + i * m * n, dA + i * k * m,
                      shape(1, k, m, n, s.transB, true, false), 1.0f, beta,
                      stream));
    }
  }
  if (!dB)
    return CUBLAS_STATUS_SUCCESS;
  if (!s.broadcastB) {
    if (!s.transB)
      return gemm(ctx, a, dC, dB, shape(B, k, n, m, !s.transA, false, false),
                  1.0f, beta, stream);
    return gemm(ctx, dC, a, dB, shape(B, n, k, m, true, s.transA, false), 1.0f,
                beta, stream);
  }
  if (!s.transA) {
    // Summing over the batch is a GEMM over the flattened rows (K = B*m).
    if (!s.transB)
      return gemm(ctx, a, dC, dB, shape(1, k, n, B * m, true, false, false),
                  1.0f, beta, stream);
    return gemm(ctx, dC, a, dB, shape(1, n, k, B * m, true, false, false), 1.0f,
                beta, stream);
  }
  for (int64_t i = 0; i < B; ++i) {
    const float bi = i == 0 ? beta : 1.0f;
    if (!s.transB)
      LT_CHECK(gemm(ctx, a + i * m * k, dC + i * m * n, dB,
                    shape(1, k, n, m, false, false, false), 1.0f, bi, stream));
    else
      LT_CHECK(gemm(ctx, dC + i * m * n, a + i * m * k, dB,
                    shape(1, n, k, m, true, true, false), 1.0f, bi, stream));
  }
  return CUBLAS_STATUS_SUCCESS;
}

#define INSTANTIATE(T)                                                         \
  template cublasStatus_t dsc::rt::cuda::gemm<T>(                              \
      MatmulContext &, const T *, const T *, T *, const MatmulShape &, float,  \
      float, cudaStream_t, Epilogue, const T *, T *);                          \
  template cublasStatus_t dsc::rt::cuda::matmulForward<T>(                     \
      MatmulContext &, const T *, const T *, T *, const MatmulShape &, bool,   \
      cudaStream_t);                                                           \
  template cublasStatus_t dsc::rt::cuda::matmulBackward<T>(                    \
      MatmulContext &, const T *, const T *, const T *, T *, T *,              \
      const MatmulShape &, bool, cudaStream_t);
DSC_CUDA_INSTANTIATE_ALL(INSTANTIATE)
