//===- KernelCases.h - Every CPU kernel as a testable case ------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Wraps each forward/backward kernel pair as a generic (float or double)
// function of its differentiable inputs, so one harness can FD-check all.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TEST_RUNTIME_KERNELCASES_H
#define DSC_TEST_RUNTIME_KERNELCASES_H

#include <cstdint>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace dsc::rt::test {

template <typename T> using Tensors = std::vector<std::vector<T>>;

/// One kernel under test. Inputs are the differentiable operands only; ids,
/// targets, seeds and shapes are captured by the closures. `bwd` must honour
/// `accumulate` exactly like the kernel it wraps.
struct KernelCase {
  std::string name;
  std::vector<size_t> inSizes;
  size_t outSize = 0;
  std::function<void(const Tensors<double> &, std::vector<double> &)> fwd64;
  std::function<void(const Tensors<float> &, std::vector<float> &)> fwd32;
  std::function<void(const Tensors<double> &, const std::vector<double> &,
                     Tensors<double> &, bool)>
      bwd64;
  std::function<void(const Tensors<float> &, const std::vector<float> &,
                     Tensors<float> &, bool)>
      bwd32;
};

/// gtest prints a parameter with this; the default dumps its bytes.
inline void PrintTo(const KernelCase &c, std::ostream *os) { *os << c.name; }

/// Builds a case from generic lambdas fwd(in, out) and bwd(in, dOut, dIn,
/// accumulate), instantiating both for float and double.
template <typename F, typename B>
KernelCase makeCase(std::string name, std::vector<size_t> inSizes,
                    size_t outSize, F fwd, B bwd) {
  KernelCase c;
  c.name = std::move(name);
  c.inSizes = std::move(inSizes);
  c.outSize = outSize;
  c.fwd64 = [fwd](const Tensors<double> &in, std::vector<double> &out) {
    fwd(in, out);
  };
  c.fwd32 = [fwd](const Tensors<float> &in, std::vector<float> &out) {
    fwd(in, out);
  };
  c.bwd64 = [bwd](const Tensors<double> &in, const std::vector<double> &d,
                  Tensors<double> &dIn, bool acc) { bwd(in, d, dIn, acc); };
  c.bwd32 = [bwd](const Tensors<float> &in, const std::vector<float> &d,
                  Tensors<float> &dIn, bool acc) { bwd(in, d, dIn, acc); };
  return c;
}

/// Every differentiable kernel, at small shapes, including each matmul
/// transpose/broadcast combination.
std::vector<KernelCase> allKernelCases();

/// n draws of a standard normal (the finite-difference tests' inputs and
/// probe directions).
inline std::vector<double> randomVector(size_t n, std::mt19937_64 &rng) {
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> v(n);
  for (double &x : v)
    x = dist(rng);
  return v;
}

inline double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

} // namespace dsc::rt::test

#endif // DSC_TEST_RUNTIME_KERNELCASES_H
