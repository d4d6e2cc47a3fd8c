//===- Embedding.cu - Token and position embeddings on CUDA ---------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Gather forward; the scatter-add backward sorts ids (stable radix sort) so
// each table row is summed by one warp in position order: no atomics.
//
//===----------------------------------------------------------------------===//

#include "CudaSupport.cuh"

#include <cub/device/device_radix_sort.cuh>

using namespace dsc::rt::cuda;
using namespace dsc::rt::cuda::detail;

namespace {
constexpr int kWarpsPerBlock = 8;

template <typename T>
__global__ void gatherKernel(const T *table, const int32_t *ids, T *out,
                             int64_t n, int64_t vocab, int64_t hidden,
                             int64_t *badCount) {
  const int64_t i = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (i >= n)
    return;
  const int64_t id = ids[i];
  const bool bad = id < 0 || id >= vocab;
  T *dst = out + i * hidden;
  for (int64_t c = threadIdx.x & 31; c < hidden; c += 32)
    dst[c] = bad ? fromF<T>(0.0f) : table[id * hidden + c];
  // One count per bad id; an integer atomic is order independent.
  if (bad && badCount && (threadIdx.x & 31) == 0)
    atomicAdd((unsigned long long *)badCount, 1ull);
}

/// A warp per sorted position that starts a run of equal ids sums the run's
/// dOut rows in position order (the sort is stable) into the table row.
template <typename T>
__global__ void scatterRunsKernel(const T *dOut, const int32_t *sortedIds,
                                  const int32_t *sortedPos, T *dTable,
                                  int64_t n, int64_t vocab, int64_t hidden) {
  const int64_t p = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (p >= n)
    return;
  const int32_t id = sortedIds[p];
  if (id < 0 || id >= vocab || (p > 0 && sortedIds[p - 1] == id))
    return;
  int64_t end = p + 1;
  while (end < n && sortedIds[end] == id)
    ++end;
  T *dst = dTable + int64_t(id) * hidden;
  for (int64_t c = threadIdx.x & 31; c < hidden; c += 32) {
    float s = toF(dst[c]);
    for (int64_t q = p; q < end; ++q)
      s += toF(dOut[int64_t(sortedPos[q]) * hidden + c]);
    dst[c] = fromF<T>(s);
  }
}

__global__ void iotaKernel(int32_t *p, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = int32_t(i);
}

template <typename T>
__global__ void positionKernel(const T *table, T *out, int64_t total,
                               int64_t seq, int64_t hidden) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / hidden, c = i % hidden;
    out[i] = table[(row % seq) * hidden + c];
  }
}

/// dTable[s, c] (+)= sum over b of dOut[b, s, c] in batch order; rows past
/// seq are zeroed unless accumulating.
template <typename T>
__global__ void positionGradKernel(const T *dOut, T *dTable, int64_t batch,
                                   int64_t seq, int64_t positions,
                                   int64_t hidden, bool acc) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       i < positions * hidden; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t s = i / hidden, c = i % hidden;
    if (s >= seq) {
      if (!acc)
        dTable[i] = fromF<T>(0.0f);
      continue;
    }
    float v = acc ? toF(dTable[i]) : 0.0f;
    for (int64_t b = 0; b < batch; ++b)
      v += toF(dOut[(b * seq + s) * hidden + c]);
    dTable[i] = fromF<T>(v);
  }
}
} // namespace

template <typename T>
cudaError_t dsc::rt::cuda::embeddingForward(const T *table, const int32_t *ids,
                                            T *out, int64_t n, int64_t vocab,
                                            int64_t hidden, int64_t *badCount,
                                            cudaStream_t stream) {
  if (badCount)
    if (cudaError_t e = cudaMemsetAsync(badCount, 0, sizeof(int64_t), stream))
      return e;
  if (n == 0)
    return cudaSuccess;
  gatherKernel<<<unsigned((n + kWarpsPerBlock - 1) / kWarpsPerBlock),
                 32 * kWarpsPerBlock, 0, stream>>>(table, ids, out, n, vocab,
                                                   hidden, badCount);
  return cudaGetLastError();
}

template <typename T>
cudaError_t
dsc::rt::cuda::embeddingBackward(const T *dOut, const int32_t *ids, T *dTable,
                                 int64_t n, int64_t vocab, int64_t hidden,
                                 bool accumulate, cudaStream_t stream) {
  // Zero is all bits zero in every element type: a memset, at bandwidth.
  if (!accumulate)
    if (cudaError_t e = cudaMemsetAsync(
            dTable, 0, size_t(vocab * hidden) * sizeof(T), stream))
      return e;
  if (n == 0)
    return cudaSuccess;
  // Scratch: positions, sorted ids, sorted positions, then cub's temp.
  size_t cubBytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, cubBytes, (const int32_t *)nullptr,
                                  (int32_t *)nullptr, (const int32_t *)nullptr,
                                  (int32_t *)nullptr, n, 0, 32, stream);
  const size_t idBytes = ((size_t(n) * sizeof(int32_t)) + 255) & ~size_t(255);
  char *scratch = nullptr;
  if (cudaError_t e =
          cudaMallocAsync((void **)&scratch, 3 * idBytes + cubBytes, stream))
    return e;
  int32_t *pos = (int32_t *)scratch;
  int32_t *sortedIds = (int32_t *)(scratch + idBytes);
  int32_t *sortedPos = (int32_t *)(scratch + 2 * idBytes);
  iotaKernel<<<gridFor(n), 256, 0, stream>>>(pos, n);
  // Negative ids sort first and are skipped; signed keys sort correctly.
  cudaError_t e = cub::DeviceRadixSort::SortPairs(scratch + 3 * idBytes,
                                                  cubBytes, ids, sortedIds, pos,
                                                  sortedPos, n, 0, 32, stream);
  if (!e) {
    scatterRunsKernel<<<unsigned((n + kWarpsPerBlock - 1) / kWarpsPerBlock),
                        32 * kWarpsPerBlock, 0, stream>>>(
        dOut, sortedIds, sortedPos, dTable, n, vocab, hidden);
    e = cudaGetLastError();
  }
  cudaError_t freed = cudaFreeAsync(scratch, stream);
  return e ? e : freed;
}

template <typename T>
cudaError_t dsc::rt::cuda::positionEmbeddingForward(const T *table, T *out,
                                                    int64_t batch, int64_t seq,
                                                    int64_t hidden,
                                                    cudaStream_t stream) {
  const int64_t total = batch * seq * hidden;
  if (total == 0)
    return cudaSuccess;
  positionKernel<<<gridFor(total), 256, 0, stream>>>(table, out, total, seq,
                                                     hidden);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::positionEmbeddingBackward(
    const T *dOut, T *dTable, int64_t batch, int64_t seq, int64_t positions,
    int64_t hidden, bool accumulate, cudaStream_t stream) {
  if (positions * hidden == 0)
    return cudaSuccess;
  positionGradKernel<<<gridFor(positions * hidden), 256, 0, stream>>>(
      dOut, dTable, batch, seq, positions, hidden, accumulate);
  return cudaGetLastError();
}

#define INSTANTIATE(T)                                                         \
  template cudaError_t dsc::rt::cuda::embeddingForward<T>(                     \
      const T *, const int32_t *, T *, int64_t, int64_t, int64_t, int64_t *,   \
      cudaStream_t);                                                           \
  template cudaError_t dsc::rt::cuda::embeddingBackward<T>(                    \
      const T *, const int32_t *, T *, int64_t, int64_t, int64_t, bool,        \
      cudaStream_t);                                                           \
  template cudaError_t dsc::rt::cuda::positionEmbeddingForward<T>(             \
      const T *, T *, int64_t, int64_t, int64_t, cudaStream_t);                \
  template cudaError_t dsc::rt::cuda::positionEmbeddingBackward<T>(            \
      const T *, T *, int64_t, int64_t, int64_t, int64_t, bool, cudaStream_t);
DSC_CUDA_INSTANTIATE_ALL(INSTANTIATE)
