//===- CompressedAllReduce.cpp - 1-bit error-compensated all-reduce -------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CompressedAllReduce.h"

#include "dsc/Runtime/Communicator.h"
#include "dsc/Runtime/Error.h"

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

using namespace dsc::rt;

namespace {

/// ‖x‖₂ / √count in f32, the norm's sum in f64 rounded once.
float rmsScale(const float *x, int64_t count) {
  double sum = 0;
  for (int64_t i = 0; i < count; ++i)
    sum += double(x[i]) * double(x[i]);
  const float norm = float(std::sqrt(sum));
  return norm / std::sqrt(float(count));
}

bool signOf(const uint32_t *signs, int64_t i) {
  return (signs[i / 32] >> (i % 32)) & 1u;
}

} // namespace

float dsc::rt::compressWithError(float *x, float *error, uint32_t *signs,
                                 int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    x[i] += error[i];
  const float scale = rmsScale(x, n);
  std::fill(signs, signs + signWords(n), 0u);
  for (int64_t i = 0; i < n; ++i) {
    const bool positive = x[i] >= 0 || std::isnan(x[i]);
    if (positive)
      signs[i / 32] |= 1u << (i % 32);
    error[i] = x[i] - (positive ? scale : -scale);
  }
  return scale;
}

void dsc::rt::expandSigns(const uint32_t *signs, float scale, int64_t count,
                          float *out) {
  for (int64_t i = 0; i < count; ++i)
    out[i] = signOf(signs, i) ? scale : -scale;
}

void dsc::rt::compressedAllReduce(Communicator &comm, float *x,
                                  float *workerError, float *serverError,
                                  int64_t n) {
  const int64_t p = comm.size();
  if (n <= 0 || n % (p * std::lcm(p, int64_t(8))) != 0)
    throw Error("compressed all-reduce: " + std::to_string(n) +
                " elements are not padded to a multiple of p·lcm(p, 8) = " +
                std::to_string(p * std::lcm(p, int64_t(8))) + " for " +
                std::to_string(p) + " ranks");
  const int64_t c = n / p, words = signWords(c);
  // Worker: compress, then lay the chunks' signs out word-aligned.
  std::vector<uint32_t> all(static_cast<size_t>(signWords(n)));
  const float workerScale = compressWithError(x, workerError, all.data(), n);
  std::vector<uint32_t> send(size_t(p * words), 0u), recv(send.size());
  for (int64_t j = 0; j < p; ++j)
    for (int64_t k = 0; k < c; ++k)
      if (signOf(all.data(), j * c + k))
        send[size_t(j * words + k / 32)] |= 1u << (k % 32);
  // Phase 1: chunk j of every rank to rank j; every rank's scale to all.
  comm.allToAll(send.data(), recv.data(), size_t(words), DType::I32);
  std::vector<float> scales(static_cast<size_t>(p));
  comm.allGather(&workerScale, scales.data(), 1, DType::F32);
  // Server of chunk rank(): the average of the ranks' compressed chunks.
  const float inverse = 1.0f / float(p);
  std::vector<float> m(size_t(c), 0.0f);
  for (int64_t i = 0; i < p; ++i) {
    const float term = scales[size_t(i)] * inverse;
    const uint32_t *signs = recv.data() + i * words;
    for (int64_t k = 0; k < c; ++k)
      m[size_t(k)] += signOf(signs, k) ? term : -term;
  }
  std::vector<uint32_t> serverSigns(static_cast<size_t>(words));
  const float serverScale =
      compressWithError(m.data(), serverError, serverSigns.data(), c);
  // Phase 2: every server's signs and scale to all.
  std::vector<uint32_t> gathered(static_cast<size_t>(p * words));
  comm.allGather(serverSigns.data(), gathered.data(), size_t(words),
                 DType::I32);
  std::vector<float> serverScales(static_cast<size_t>(p));
  comm.allGather(&serverScale, serverScales.data(), 1, DType::F32);
  for (int64_t j = 0; j < p; ++j)
    expandSigns(gathered.data() + j * words, serverScales[size_t(j)], c,
                x + j * c);
}

void dsc::rt::compressedAllReduceUnpadded(Communicator &comm, float *x,
                                          int64_t n, float *workerError,
                                          float *serverError) {
  const int64_t padded = onebitPaddedSize(n, comm.size());
  if (padded == n)
    return compressedAllReduce(comm, x, workerError, serverError, n);
  std::vector<float> whole(size_t(padded), 0.0f);
  std::copy(x, x + n, whole.begin());
  compressedAllReduce(comm, whole.data(), workerError, serverError, padded);
  std::copy(whole.begin(), whole.begin() + n, x);
}
