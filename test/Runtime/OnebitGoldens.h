//===- OnebitGoldens.h - Reading the 1-bit optimizers' goldens --*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What the tests of the 1-bit optimizers (CompressedAllReduceTest,
// OnebitOptimizersTest) share to read the independent numpy reference's
// goldens (test/Runtime/Inputs/onebit, written by scripts/onebit-reference)
// and compare against them.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TEST_RUNTIME_ONEBITGOLDENS_H
#define DSC_TEST_RUNTIME_ONEBITGOLDENS_H

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace dsc::rt::onebit_goldens {

using Rows = std::vector<std::vector<float>>;

/// A JSON array of numbers as floats (the goldens' values are f32 exactly).
inline std::vector<float> row(const llvm::json::Value &v) {
  std::vector<float> out;
  for (const llvm::json::Value &x : *v.getAsArray())
    out.push_back(float(*x.getAsNumber()));
  return out;
}

inline Rows rows(const llvm::json::Value &v) {
  Rows out;
  for (const llvm::json::Value &r : *v.getAsArray())
    out.push_back(row(r));
  return out;
}

/// A JSON array of numbers kept as doubles (the Python-double values).
inline std::vector<double> doubles(const llvm::json::Value &v) {
  std::vector<double> out;
  for (const llvm::json::Value &x : *v.getAsArray())
    out.push_back(*x.getAsNumber());
  return out;
}

/// max |a - b| over max |b| (1 when b is all zeros).
inline double relativeError(const std::vector<float> &a,
                            const std::vector<float> &b) {
  double diff = 0, top = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    top = std::max(top, std::abs(double(b[i])));
  }
  return diff / (top > 0 ? top : 1.0);
}

/// |a - b| / |b| (absolute when b is 0).
inline double relativeError(double a, double b) {
  return std::abs(a - b) / (b != 0 ? std::abs(b) : 1.0);
}

/// The golden `file` of DSC_ONEBIT_GOLDENS_DIR, parsed; null (with a test
/// failure) when it cannot be read.
inline llvm::json::Value readGolden(const char *file) {
  auto buffer = llvm::MemoryBuffer::getFile(
      std::string(DSC_ONEBIT_GOLDENS_DIR) + "/" + file);
  EXPECT_TRUE(bool(buffer)) << file;
  if (!buffer)
    return nullptr;
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  EXPECT_TRUE(bool(json)) << llvm::toString(json.takeError());
  return json ? std::move(*json) : llvm::json::Value(nullptr);
}

} // namespace dsc::rt::onebit_goldens

#endif // DSC_TEST_RUNTIME_ONEBITGOLDENS_H
