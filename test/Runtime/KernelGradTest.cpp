//===- KernelGradTest.cpp - Finite-difference checks of every VJP ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// In fp64, each backward kernel's vector-Jacobian product must match central
// differences of loss = sum(u * forward(x)); also checks accumulate mode and
// that the fp32 instantiation agrees with fp64.
//
//===----------------------------------------------------------------------===//

#include "KernelCases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <omp.h>
#include <random>
#include <sstream>

using namespace dsc::rt::test;

namespace {

/// Relative error on the norm that a correct VJP stays well under (central
/// differences with h = 1e-5 in fp64 give ~1e-9) and that a wrong sign, a
/// missing term or a transposed operand exceeds by orders of magnitude.
constexpr double kGradTolerance = 1e-6;

template <typename T>
double relativeError(const std::vector<T> &got, const std::vector<T> &want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double d = double(got[i]) - double(want[i]);
    num += d * d;
    den += double(want[i]) * double(want[i]);
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
}

struct GradCheckResult {
  /// Per input: ||analytic - fd|| / ||fd||.
  std::vector<double> relErr;
  /// Per input: the analytic gradient, kept for the accumulate check.
  Tensors<double> analytic;
};

/// The fp64 finite-difference check. `bwd` defaults to the case's own
/// backward; the sanity test passes a deliberately broken one.
GradCheckResult
checkGradient(const KernelCase &c, const Tensors<double> &x,
              const std::vector<double> &u,
              const decltype(KernelCase::bwd64) *bwdOverride = nullptr) {
  const auto &bwd = bwdOverride ? *bwdOverride : c.bwd64;
  GradCheckResult r;
  // NaN prefill: an overwrite-mode backward must write every element.
  r.analytic.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    r.analytic[i].assign(x[i].size(), std::numeric_limits<double>::quiet_NaN());
  bwd(x, u, r.analytic, /*accumulate=*/false);

  const double h = 1e-5;
  Tensors<double> xp = x;
  std::vector<double> out(c.outSize);
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> fd(x[i].size());
    for (size_t j = 0; j < x[i].size(); ++j) {
      xp[i][j] = x[i][j] + h;
      c.fwd64(xp, out);
      double lp = dot(u, out);
      xp[i][j] = x[i][j] - h;
      c.fwd64(xp, out);
      double lm = dot(u, out);
      xp[i][j] = x[i][j];
      fd[j] = (lp - lm) / (2 * h);
    }
    r.relErr.push_back(relativeError(r.analytic[i], fd));
  }
  return r;
}

class KernelGrad : public ::testing::TestWithParam<KernelCase> {
protected:
  void SetUp() override {
    std::mt19937_64 rng(std::hash<std::string>()(GetParam().name));
    for (size_t n : GetParam().inSizes)
      x.push_back(randomVector(n, rng));
    u = randomVector(GetParam().outSize, rng);
  }
  Tensors<double> x;
  std::vector<double> u;
};

TEST_P(KernelGrad, MatchesCentralDifferences) {
  const KernelCase &c = GetParam();
  GradCheckResult r = checkGradient(c, x, u);
  double worst = 0;
  for (double e : r.relErr)
    worst = std::max(worst, e);
  // Kept in the XML report, so a drift toward the tolerance is visible.
  std::ostringstream os;
  os << std::scientific << worst;
  RecordProperty("worst_rel_err", os.str());
  for (size_t i = 0; i < r.relErr.size(); ++i)
    EXPECT_LT(r.relErr[i], kGradTolerance)
        << c.name << ": gradient of input " << i << " is off";
}

TEST_P(KernelGrad, AccumulateAddsToExistingGradient) {
  const KernelCase &c = GetParam();
  Tensors<double> fresh(x.size()), acc(x.size());
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < x.size(); ++i) {
    fresh[i].assign(x[i].size(), 0.0);
    acc[i] = randomVector(x[i].size(), rng);
  }
  Tensors<double> prior = acc;
  c.bwd64(x, u, fresh, false);
  c.bwd64(x, u, acc, true);
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t j = 0; j < x[i].size(); ++j)
      ASSERT_NEAR(acc[i][j], prior[i][j] + fresh[i][j], 1e-12)
          << c.name << ": input " << i << " element " << j;
}

TEST_P(KernelGrad, Fp32MatchesFp64) {
  const KernelCase &c = GetParam();
  Tensors<float> x32(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    x32[i].assign(x[i].begin(), x[i].end());
  std::vector<float> u32(u.begin(), u.end());

  std::vector<double> out64(c.outSize);
  std::vector<float> out32(c.outSize);
  c.fwd64(x, out64);
  c.fwd32(x32, out32);
  std::vector<double> out32d(out32.begin(), out32.end());
  EXPECT_LT(relativeError(out32d, out64), 1e-5) << c.name << " forward";

  Tensors<double> d64(x.size());
  Tensors<float> d32(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    d64[i].assign(x[i].size(), 0.0);
    d32[i].assign(x[i].size(), 0.0f);
  }
  c.bwd64(x, u, d64, false);
  c.bwd32(x32, u32, d32, false);
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> g(d32[i].begin(), d32[i].end());
    EXPECT_LT(relativeError(g, d64[i]), 1e-5)
        << c.name << " backward, input " << i;
  }
}

/// Every kernel gives the same bits on 1 and 3 threads (the kernels reduce
/// in fixed orders and split work only where each output has one owner).
TEST_P(KernelGrad, BitwiseIndependentOfThreadCount) {
  const KernelCase &c = GetParam();
  Tensors<float> x32(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    x32[i].assign(x[i].begin(), x[i].end());
  std::vector<float> u32(u.begin(), u.end());
  auto run = [&](int threads, std::vector<float> &out, Tensors<float> &d) {
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    out.assign(c.outSize, 0.0f);
    c.fwd32(x32, out);
    d.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      d[i].assign(x[i].size(), 0.0f);
    c.bwd32(x32, u32, d, false);
    omp_set_num_threads(saved);
  };
  std::vector<float> out1, out3;
  Tensors<float> d1, d3;
  run(1, out1, d1);
  run(3, out3, d3);
  EXPECT_EQ(std::memcmp(out1.data(), out3.data(), out1.size() * sizeof(float)),
            0)
      << c.name << " forward";
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(
        std::memcmp(d1[i].data(), d3[i].data(), d1[i].size() * sizeof(float)),
        0)
        << c.name << " backward, input " << i;
}

INSTANTIATE_TEST_SUITE_P(Cpu, KernelGrad, ::testing::ValuesIn(allKernelCases()),
                         [](const ::testing::TestParamInfo<KernelCase> &info) {
                           return info.param.name;
                         });

/// The check must be able to fail: a sign flip on one element, a 0.1% error
/// on one element and a transposed operand each exceed the tolerance.
TEST(KernelGradSanity, DetectsWrongGradients) {
  std::vector<KernelCase> cases = allKernelCases();
  auto find = [&](const std::string &name) -> const KernelCase & {
    for (const KernelCase &c : cases)
      if (c.name == name)
        return c;
    ADD_FAILURE() << "no case " << name;
    return cases.front();
  };
  std::mt19937_64 rng(42);

  const KernelCase &ln = find("layer_norm");
  Tensors<double> x;
  for (size_t n : ln.inSizes)
    x.push_back(randomVector(n, rng));
  std::vector<double> u = randomVector(ln.outSize, rng);
  ASSERT_LT(checkGradient(ln, x, u).relErr[1], kGradTolerance);

  decltype(KernelCase::bwd64) flipSign = [&](const Tensors<double> &in,
                                             const std::vector<double> &d,
                                             Tensors<double> &dIn, bool acc) {
    ln.bwd64(in, d, dIn, acc);
    dIn[1][3] = -dIn[1][3]; // dgamma[3]
  };
  EXPECT_GT(checkGradient(ln, x, u, &flipSign).relErr[1], kGradTolerance);

  decltype(KernelCase::bwd64) nudge = [&](const Tensors<double> &in,
                                          const std::vector<double> &d,
                                          Tensors<double> &dIn, bool acc) {
    ln.bwd64(in, d, dIn, acc);
    dIn[0][7] *= 1.001; // dx[7]
  };
  EXPECT_GT(checkGradient(ln, x, u, &nudge).relErr[0], kGradTolerance);

  // A transposed operand: feed matmul_tA0_tB0's backward the gradient of the
  // transB case, i.e. B^T where B belongs.
  const KernelCase &mm = find("matmul_tA0_tB0_bcast0");
  const KernelCase &mmT = find("matmul_tA0_tB1_bcast0");
  Tensors<double> xm;
  for (size_t n : mm.inSizes)
    xm.push_back(randomVector(n, rng));
  std::vector<double> um = randomVector(mm.outSize, rng);
  ASSERT_LT(checkGradient(mm, xm, um).relErr[0], kGradTolerance);
  GradCheckResult wrong = checkGradient(mm, xm, um, &mmT.bwd64);
  EXPECT_GT(wrong.relErr[0], kGradTolerance);
}

} // namespace
