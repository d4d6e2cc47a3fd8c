//===- InferenceKernels.cpp - kernels of the inference programs -----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Paged attention reads a row's context block by block through the block
// table, with the running-maximum softmax of flash attention (one pass over
// the keys, accumulators in double for double and float otherwise), so
// decode's cost is the context's bytes, not a padded maximum. Sampling
// follows GPT-NeoX's generate: its filters, then a draw the driver supplies,
// so a seed fixes every token.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/InferenceKernels.h"

#include "KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

using namespace dsc::rt;

namespace {

/// The block holding position `p` of sequence `s`, or -1 when the table
/// has none there (the caller names which).
int64_t blockOf(const int32_t *table, const PagedCacheShape &s, int64_t seq,
                int64_t p) {
  const int64_t column = p / s.blockSize;
  if (column >= s.tableWidth)
    return -1;
  const int32_t block = table[seq * s.tableWidth + column];
  return block >= 0 && block < s.blocks ? block : -1;
}

} // namespace

template <typename T>
std::string dsc::rt::pagedAttention(const T *q, const T *k, const T *v,
                                    const int32_t *positions,
                                    const int32_t *sequences,
                                    const int32_t *table, T *y, T *cache,
                                    const PagedCacheShape &s) {
  const int64_t kvCols = s.kvHeads * s.headDim, cols = s.heads * s.headDim;
  const int64_t maxContext = s.tableWidth * s.blockSize;
  // Every id first, so that a bad request changes nothing.
  for (int64_t i = 0; i < s.rows; ++i) {
    const int64_t seq = sequences[i], p = positions[i];
    if (seq < 0)
      continue;
    const std::string row = "row " + std::to_string(i) + ": ";
    if (seq >= s.sequences)
      return row + "sequence " + std::to_string(seq) +
             " is outside the block table's " + std::to_string(s.sequences) +
             " rows";
    if (p < 0 || p >= maxContext)
      return row + "position " + std::to_string(p) +
             " is outside the planned context of " +
             std::to_string(maxContext) + " tokens (" +
             std::to_string(s.tableWidth) + " blocks of " +
             std::to_string(s.blockSize) + ")";
    const int64_t first =
        s.window > 0 ? std::max<int64_t>(0, p - s.window + 1) : 0;
    for (int64_t b = first / s.blockSize; b <= p / s.blockSize; ++b)
      if (blockOf(table, s, seq, b * s.blockSize) < 0)
        return row + "sequence " + std::to_string(seq) + "'s block " +
               std::to_string(b) + " is " +
               std::to_string(table[seq * s.tableWidth + b]) +
               ", not one of the cache's " + std::to_string(s.blocks) +
               " blocks";
  }
  const int64_t blockStride = 2 * s.blockSize * kvCols;
  for (int64_t i = 0; i < s.rows; ++i) {
    const int64_t seq = sequences[i], p = positions[i];
    if (seq < 0)
      continue;
    T *slot = cache + blockOf(table, s, seq, p) * blockStride +
              (p % s.blockSize) * kvCols;
    std::copy(k + i * kvCols, k + (i + 1) * kvCols, slot);
    std::copy(v + i * kvCols, v + (i + 1) * kvCols,
              slot + s.blockSize * kvCols);
  }

  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const Acc scale = Acc(1) / std::sqrt(Acc(s.headDim));
  const int64_t group = s.heads / s.kvHeads;
#pragma omp parallel
  {
    std::vector<Acc> acc(static_cast<size_t>(s.headDim));
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t i = 0; i < s.rows; ++i)
      for (int64_t h = 0; h < s.heads; ++h) {
        T *out = y + i * cols + h * s.headDim;
        const int64_t seq = sequences[i], p = positions[i];
        if (seq < 0) {
          std::fill(out, out + s.headDim, T(0));
          continue;
        }
        const T *qh = q + i * cols + h * s.headDim;
        const int64_t kvOffset = (h / group) * s.headDim;
        const int64_t first =
            s.window > 0 ? std::max<int64_t>(0, p - s.window + 1) : 0;
        Acc running = -std::numeric_limits<Acc>::infinity(), total = 0;
        std::fill(acc.begin(), acc.end(), Acc(0));
        for (int64_t t = first; t <= p; ++t) {
          const T *base = cache + blockOf(table, s, seq, t) * blockStride +
                          (t % s.blockSize) * kvCols + kvOffset;
          const T *kt = base, *vt = base + s.blockSize * kvCols;
          Acc dot = 0;
          for (int64_t d = 0; d < s.headDim; ++d)
            dot += Acc(qh[d]) * Acc(kt[d]);
          const Acc score = dot * scale;
          if (score > running) {
            const Acc shrink = std::exp(running - score);
            total *= shrink;
            for (int64_t d = 0; d < s.headDim; ++d)
              acc[size_t(d)] *= shrink;
            running = score;
          }
          const Acc w = std::exp(score - running);
          total += w;
          for (int64_t d = 0; d < s.headDim; ++d)
            acc[size_t(d)] += w * Acc(vt[d]);
        }
        for (int64_t d = 0; d < s.headDim; ++d)
          out[d] = T(acc[size_t(d)] / total);
      }
  }
  return {};
}

template <typename T>
void dsc::rt::rotaryAt(const T *x, const int32_t *positions, T *y, int64_t rows,
                       int64_t cols, int64_t headDim, int64_t rotaryDims,
                       double base) {
  const int64_t half = rotaryDims / 2;
  std::vector<double> frequency(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    frequency[size_t(i)] =
        std::pow(base, -2.0 * double(i) / double(rotaryDims));
  const int64_t heads = cols / headDim;
#pragma omp parallel
  {
    std::vector<T> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle = double(positions[r]) * frequency[size_t(i)];
        c[size_t(i)] = T(std::cos(angle));
        s[size_t(i)] = T(std::sin(angle));
      }
      for (int64_t h = 0; h < heads; ++h) {
        const T *xh = x + r * cols + h * headDim;
        T *yh = y + r * cols + h * headDim;
        for (int64_t i = 0; i < half; ++i) {
          const T a = xh[i], b = xh[i + half];
          yh[i] = a * c[size_t(i)] - b * s[size_t(i)];
          yh[i + half] = b * c[size_t(i)] + a * s[size_t(i)];
        }
        if (yh != xh)
          for (int64_t i = rotaryDims; i < headDim; ++i)
            yh[i] = xh[i];
      }
    }
  }
}

template <typename T>
std::string
dsc::rt::positionEmbeddingAt(const T *table, const int32_t *positions, T *y,
                             int64_t rows, int64_t tableRows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    if (positions[i] < 0 || positions[i] >= tableRows)
      return "row " + std::to_string(i) + ": position " +
             std::to_string(positions[i]) +
             " is outside the position embedding's " +
             std::to_string(tableRows) + " rows";
  for (int64_t i = 0; i < rows; ++i)
    std::copy(table + positions[i] * cols, table + (positions[i] + 1) * cols,
              y + i * cols);
  return {};
}

template <typename T>
std::string dsc::rt::gatherRows(const T *x, const int32_t *rows, T *y,
                                int64_t count, int64_t inputRows,
                                int64_t cols) {
  for (int64_t j = 0; j < count; ++j)
    if (rows[j] < -1 || rows[j] >= inputRows)
      return "gathered row " + std::to_string(j) + " names row " +
             std::to_string(rows[j]) + " of " + std::to_string(inputRows);
  for (int64_t j = 0; j < count; ++j) {
    if (rows[j] < 0)
      std::fill(y + j * cols, y + (j + 1) * cols, T(0));
    else
      std::copy(x + rows[j] * cols, x + (rows[j] + 1) * cols, y + j * cols);
  }
  return {};
}

namespace {

/// One row of sampleTokens, on `work` (the row's logits as f32).
int32_t sampleRow(std::vector<float> &work, std::vector<int32_t> &order,
                  float temperature, int64_t topK, float topP, float draw) {
  const float negInf = -std::numeric_limits<float>::infinity();
  const int64_t n = int64_t(work.size());
  if (temperature == 0 && topK == 0 && topP == 0)
    return int32_t(std::max_element(work.begin(), work.end()) - work.begin());
  if (temperature > 0)
    for (float &x : work)
      x /= temperature;
  if (topK > 0 && topK < n) {
    std::vector<float> sorted(work);
    std::nth_element(sorted.begin(), sorted.begin() + (topK - 1), sorted.end(),
                     std::greater<float>());
    const float kth = sorted[size_t(topK - 1)];
    for (float &x : work)
      if (x < kth)
        x = negInf;
  }
  const float top = *std::max_element(work.begin(), work.end());
  std::vector<double> probs(work.size());
  double sum = 0;
  for (size_t j = 0; j < work.size(); ++j)
    sum += probs[j] = work[j] == negInf ? 0.0 : std::exp(double(work[j] - top));
  for (double &p : probs)
    p /= sum;
  if (topP > 0) {
    order.resize(work.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return work[size_t(a)] > work[size_t(b)];
    });
    // Keep the sorted prefix through the first token whose running sum
    // passes top_p (NeoX shifts its removal mask right by one).
    double running = 0;
    size_t keep = 0;
    for (; keep < order.size(); ++keep) {
      running += probs[size_t(order[keep])];
      if (running > double(topP)) {
        ++keep;
        break;
      }
    }
    double kept = 0;
    for (size_t j = 0; j < order.size(); ++j) {
      if (j >= keep)
        probs[size_t(order[j])] = 0;
      kept += probs[size_t(order[j])];
    }
    for (double &p : probs)
      p /= kept;
  }
  double running = 0;
  int32_t last = 0;
  for (size_t j = 0; j < probs.size(); ++j) {
    if (probs[j] == 0)
      continue;
    last = int32_t(j);
    running += probs[j];
    if (running > double(draw))
      return int32_t(j);
  }
  return last;
}

} // namespace

template <typename T>
std::string dsc::rt::sampleTokens(const T *logits, const float *params,
                                  const float *draws, int32_t *tokens,
                                  int64_t count, int64_t shards, int64_t width,
                                  int64_t classes) {
  const int64_t vocab = shards * width;
  const int64_t used = classes > 0 ? std::min(classes, vocab) : vocab;
  for (int64_t r = 0; r < count; ++r) {
    const float temperature = params[3 * r], topK = params[3 * r + 1],
                topP = params[3 * r + 2];
    if (!(temperature >= 0) || !(topK >= 0) || !(topP >= 0 && topP <= 1) ||
        !(draws[r] >= 0 && draws[r] < 1))
      return "row " + std::to_string(r) + ": temperature " +
             std::to_string(temperature) + ", top_k " + std::to_string(topK) +
             ", top_p " + std::to_string(topP) + ", draw " +
             std::to_string(draws[r]) +
             " (each must be >= 0, top_p and the draw at most 1)";
  }
#pragma omp parallel
  {
    std::vector<float> work(static_cast<size_t>(used));
    std::vector<int32_t> order;
#pragma omp for schedule(dynamic)
    for (int64_t r = 0; r < count; ++r) {
      for (int64_t j = 0; j < used; ++j)
        work[size_t(j)] =
            float(logits[((j / width) * count + r) * width + j % width]);
      tokens[r] =
          sampleRow(work, order, params[3 * r], int64_t(params[3 * r + 1]),
                    params[3 * r + 2], draws[r]);
    }
  }
  return {};
}

#define INSTANTIATE(T)                                                         \
  template std::string dsc::rt::pagedAttention<T>(                             \
      const T *, const T *, const T *, const int32_t *, const int32_t *,       \
      const int32_t *, T *, T *, const PagedCacheShape &);                     \
  template void dsc::rt::rotaryAt<T>(const T *, const int32_t *, T *, int64_t, \
                                     int64_t, int64_t, int64_t, double);       \
  template std::string dsc::rt::positionEmbeddingAt<T>(                        \
      const T *, const int32_t *, T *, int64_t, int64_t, int64_t);             \
  template std::string dsc::rt::gatherRows<T>(const T *, const int32_t *, T *, \
                                              int64_t, int64_t, int64_t);      \
  template std::string dsc::rt::sampleTokens<T>(                               \
      const T *, const float *, const float *, int32_t *, int64_t, int64_t,    \
      int64_t, int64_t);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
