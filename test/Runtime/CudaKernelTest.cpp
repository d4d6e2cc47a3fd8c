//===- CudaKernelTest.cpp - CUDA kernels against the CPU kernels ----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Every CUDA kernel against its CPU twin (CpuKernels.h, MoeKernels.h) on
// random inputs: fp32 within ~1e-5, TF32 within ~1e-3, bf16 within ~1e-2
// relative L2 norm; MoE routing decisions (slots, drops) exactly.
// Without a device the program exits 77 (CudaTestMain.h), which ctest
// reports as skipped (SKIP_RETURN_CODE).
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/CudaKernels.h"
#include "dsc/Runtime/MoeKernels.h"
#include "dsc/Runtime/SplitMix64.h"

#include "CudaTestMain.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace dsc::rt;
namespace cu = dsc::rt::cuda;

namespace {

bool haveDevice() { return dsc::rt::test::cudaDevicesVisible() > 0; }

#define CUDA_OK(...) ASSERT_EQ(cudaSuccess, (__VA_ARGS__)) << #__VA_ARGS__
#define LT_OK(...)                                                             \
  ASSERT_EQ(CUBLAS_STATUS_SUCCESS, (__VA_ARGS__)) << #__VA_ARGS__

// Host conversions: the CPU reference sees exactly the rounded inputs the
// device sees, so only the kernels' own rounding is measured.
template <typename T> T fromFloat(float x);
template <> float fromFloat<float>(float x) { return x; }
template <> __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __half fromFloat<__half>(float x) { return __float2half_rn(x); }
inline float toFloat(float x) { return x; }
inline float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float toFloat(__half x) { return __half2float(x); }

/// A device copy of a host vector of floats, stored as T.
template <typename T> class Dev {
public:
  explicit Dev(size_t n) : n(n) {
    if (cudaMalloc((void **)&p, std::max<size_t>(n, 1) * sizeof(T)) !=
        cudaSuccess)
      p = nullptr;
  }
  explicit Dev(const std::vector<float> &h) : Dev(h.size()) { upload(h); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev &) = delete;
  Dev &operator=(const Dev &) = delete;
  void upload(const std::vector<float> &h) {
    std::vector<T> t(h.size());
    for (size_t i = 0; i < h.size(); ++i)
      t[i] = fromFloat<T>(h[i]);
    cudaMemcpy(p, t.data(), t.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<float> download() const {
    cudaDeviceSynchronize();
    std::vector<T> t(n);
    cudaMemcpy(t.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    std::vector<float> h(n);
    for (size_t i = 0; i < n; ++i)
      h[i] = toFloat(t[i]);
    return h;
  }
  T *get() const { return p; }

private:
  T *p = nullptr;
  size_t n;
};

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(g);
  return v;
}

/// Rounds through T, so the CPU gets what the device stores.
template <typename T> std::vector<float> rounded(std::vector<float> v) {
  for (float &x : v)
    x = toFloat(fromFloat<T>(x));
  return v;
}

double relNorm(const std::vector<float> &got, const std::vector<float> &want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double d = double(got[i]) - double(want[i]);
    num += d * d;
    den += double(want[i]) * double(want[i]);
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

/// relNorm, measured against at least `floor`: for results that can be zero
/// exactly (attention over one key has zero dq and dk, whatever the
/// inputs), where the relative error of rounding noise is unbounded.
double relNormAtLeast(const std::vector<float> &got,
                      const std::vector<float> &want, double floor) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double d = double(got[i]) - double(want[i]);
    num += d * d;
    den += double(want[i]) * double(want[i]);
  }
  return std::sqrt(num) / std::max(std::sqrt(den), floor);
}

double norm(const std::vector<float> &x) {
  double s = 0;
  for (float v : x)
    s += double(v) * double(v);
  return std::sqrt(s);
}

template <typename T> double tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-2;
}

class CudaKernel : public ::testing::Test {
protected:
  void SetUp() override {
    if (!haveDevice())
      GTEST_SKIP() << "no CUDA device: CUDA kernel tests skipped";
    cudaStreamCreate(&stream);
  }
  void TearDown() override {
    if (stream)
      cudaStreamDestroy(stream);
  }
  cudaStream_t stream = nullptr;
};

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

template <typename T>
void checkMatmul(cudaStream_t stream, cu::MathMode math, double tolerance) {
  cu::MatmulContext ctx;
  LT_OK(cu::createMatmulContext(ctx, size_t(32) << 20, math));
  for (int variant = 0; variant < 8; ++variant) {
    MatmulShape s;
    s.batch = 3;
    s.m = 17;
    s.n = 24;
    s.k = 40;
    s.transA = variant & 1;
    s.transB = variant & 2;
    s.broadcastB = variant & 4;
    SCOPED_TRACE("variant " + std::to_string(variant));
    const size_t na = s.batch * s.m * s.k,
                 nb = (s.broadcastB ? 1 : s.batch) * s.k * s.n,
                 nc = s.batch * s.m * s.n;
    auto a = rounded<T>(randn(na, 1)), b = rounded<T>(randn(nb, 2)),
         dC = rounded<T>(randn(nc, 3)), c0 = rounded<T>(randn(nc, 4));
    for (bool acc : {false, true}) {
      std::vector<float> c = c0;
      matmulForward(a.data(), b.data(), c.data(), s, acc);
      Dev<T> da(a), db(b), dc(c0);
      LT_OK(
          cu::matmulForward(ctx, da.get(), db.get(), dc.get(), s, acc, stream));
      EXPECT_LT(relNorm(dc.download(), c), tolerance) << "forward acc=" << acc;

      std::vector<float> gA = rounded<T>(randn(na, 5)),
                         gB = rounded<T>(randn(nb, 6));
      Dev<T> dgA(gA), dgB(gB), ddC(dC);
      matmulBackward(a.data(), b.data(), dC.data(), gA.data(), gB.data(), s,
                     acc);
      LT_OK(cu::matmulBackward(ctx, da.get(), db.get(), ddC.get(), dgA.get(),
                               dgB.get(), s, acc, stream));
      EXPECT_LT(relNorm(dgA.download(), gA), tolerance) << "dA acc=" << acc;
      EXPECT_LT(relNorm(dgB.download(), gB), tolerance) << "dB acc=" << acc;
    }
  }
  cu::destroyMatmulContext(ctx);
}

TEST_F(CudaKernel, MatmulFp32) {
  checkMatmul<float>(stream, cu::MathMode::Fp32, 1e-5);
}
TEST_F(CudaKernel, MatmulTf32) {
  checkMatmul<float>(stream, cu::MathMode::Tf32, 2e-3);
}
TEST_F(CudaKernel, MatmulBf16) {
  checkMatmul<__nv_bfloat16>(stream, cu::MathMode::Fp32, 1e-2);
}
TEST_F(CudaKernel, MatmulFp16) {
  checkMatmul<__half>(stream, cu::MathMode::Fp32, 1e-2);
}

TEST_F(CudaKernel, MatmulGeluBiasEpilogue) {
  cu::MatmulContext ctx;
  LT_OK(cu::createMatmulContext(ctx));
  MatmulShape s;
  s.batch = 1;
  s.m = 64;
  s.n = 96;
  s.k = 32;
  auto a = rounded<__nv_bfloat16>(randn(s.m * s.k, 1));
  auto b = rounded<__nv_bfloat16>(randn(s.k * s.n, 2, 0.2f));
  auto bias = rounded<__nv_bfloat16>(randn(s.n, 3));
  std::vector<float> pre(s.m * s.n), y(s.m * s.n);
  matmulForward(a.data(), b.data(), pre.data(), s);
  biasAddForward(pre.data(), bias.data(), pre.data(), s.m, s.n);
  geluForward(pre.data(), y.data(), s.m * s.n);
  Dev<__nv_bfloat16> da(a), db(b), dbias(bias), dy(s.m * s.n), daux(s.m * s.n),
      dyb(s.m * s.n);
  LT_OK(cu::gemm(ctx, da.get(), db.get(), dy.get(), s, 1.0f, 0.0f, stream,
                 cu::Epilogue::GeluBias, dbias.get(), daux.get()));
  EXPECT_LT(relNorm(dy.download(), y), 1e-2);
  EXPECT_LT(relNorm(daux.download(), pre), 1e-2);
  LT_OK(cu::gemm(ctx, da.get(), db.get(), dyb.get(), s, 1.0f, 0.0f, stream,
                 cu::Epilogue::Bias, dbias.get()));
  EXPECT_LT(relNorm(dyb.download(), pre), 1e-2);
  cu::destroyMatmulContext(ctx);
}

//===----------------------------------------------------------------------===//
// Elementwise, GELU, dropout
//===----------------------------------------------------------------------===//

template <typename T> void checkElementwise(cudaStream_t stream) {
  const int64_t rows = 37, cols = 129, n = rows * cols;
  auto x = rounded<T>(randn(n, 1, 2.0f)), dy = rounded<T>(randn(n, 2));
  auto bias = rounded<T>(randn(cols, 3));
  Dev<T> dx(x), ddy(dy), dout(n), dbias(bias), dg(cols);
  std::vector<float> y(n), g(n);
  geluForward(x.data(), y.data(), n);
  ASSERT_EQ(cudaSuccess, cu::geluForward(dx.get(), dout.get(), n, stream));
  EXPECT_LT(relNorm(dout.download(), y), tol<T>());
  geluBackward(x.data(), dy.data(), g.data(), n, false);
  ASSERT_EQ(cudaSuccess, cu::geluBackward(dx.get(), ddy.get(), dout.get(), n,
                                          false, stream));
  EXPECT_LT(relNorm(dout.download(), g), tol<T>());

  biasAddForward(x.data(), bias.data(), y.data(), rows, cols);
  ASSERT_EQ(cudaSuccess, cu::biasAddForward(dx.get(), dbias.get(), dout.get(),
                                            rows, cols, stream));
  EXPECT_LT(relNorm(dout.download(), y), tol<T>());
  std::vector<float> gb(cols), gx(n);
  biasAddBackward(dy.data(), gx.data(), gb.data(), rows, cols, false);
  ASSERT_EQ(cudaSuccess,
            cu::biasGrad(ddy.get(), dg.get(), rows, cols, false, stream));
  EXPECT_LT(relNorm(dg.download(), gb), tol<T>());

  // Dropout: the same mask bits as the CPU, offsets included.
  for (uint64_t offset : {uint64_t(0), uint64_t(12345)}) {
    dropoutForward(x.data(), y.data(), n, 0.3f, 42, offset);
    ASSERT_EQ(cudaSuccess, cu::dropoutForward(dx.get(), dout.get(), n, 0.3f, 42,
                                              offset, stream));
    auto got = dout.download();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i] == 0.0f, y[i] == 0.0f) << "mask differs at " << i;
    EXPECT_LT(relNorm(got, y), tol<T>());
    dropoutBackward(dy.data(), g.data(), n, 0.3f, 42, false, offset);
    ASSERT_EQ(cudaSuccess, cu::dropoutBackward(ddy.get(), dout.get(), n, 0.3f,
                                               42, false, offset, stream));
    EXPECT_LT(relNorm(dout.download(), g), tol<T>());
  }
}
TEST_F(CudaKernel, ElementwiseFp32) { checkElementwise<float>(stream); }
TEST_F(CudaKernel, ElementwiseBf16) { checkElementwise<__nv_bfloat16>(stream); }

/// The packed elementwise kernels (8 elements an access) against the host's
/// per-element arithmetic, bit for bit: whole packs and a tail (n = 8k + 5),
/// and pointers one element off 16-byte alignment (the element-by-element
/// path); a bias add whose columns are a multiple of 8 (packed) and not.
template <typename T> void checkPackedElementwise(cudaStream_t stream) {
  auto round = [](float v) { return toFloat(fromFloat<T>(v)); };
  for (int64_t off : {int64_t(0), int64_t(1)}) {
    SCOPED_TRACE("offset " + std::to_string(off));
    const int64_t n = 8 * 125 + 5;
    auto a = rounded<T>(randn(n + 1, 21)), b = rounded<T>(randn(n + 1, 22)),
         y0 = rounded<T>(randn(n + 1, 23));
    Dev<T> da(a), db(b), dy(y0);
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = round(a[off + i] + b[off + i]);
    CUDA_OK(cu::addForward(da.get() + off, db.get() + off, dy.get() + off, n,
                           stream));
    auto got = dy.download();
    EXPECT_EQ(
        relNorm(std::vector<float>(got.begin() + off, got.begin() + off + n),
                want),
        0.0)
        << "add";
    // y += 0.5 * a (the axb kernel accumulating; 0.5 a is exact, so a
    // fused multiply-add rounds as the host's two operations do).
    dy.upload(y0);
    for (int64_t i = 0; i < n; ++i)
      want[i] = round(y0[off + i] + 0.5f * a[off + i]);
    CUDA_OK(cu::scaleBackward(da.get() + off, dy.get() + off, n, 0.5f, true,
                              stream));
    got = dy.download();
    EXPECT_EQ(
        relNorm(std::vector<float>(got.begin() + off, got.begin() + off + n),
                want),
        0.0)
        << "scale backward, accumulating";
    for (int64_t i = 0; i < n; ++i)
      want[i] = round(3.0f * a[off + i]);
    CUDA_OK(cu::scaleForward(da.get() + off, dy.get() + off, n, 3.0f, stream));
    got = dy.download();
    EXPECT_EQ(
        relNorm(std::vector<float>(got.begin() + off, got.begin() + off + n),
                want),
        0.0)
        << "scale";
    Dev<float> df(n + 1);
    CUDA_OK(cu::convert(da.get() + off, df.get() + off, n, stream));
    auto f = df.download();
    EXPECT_EQ(relNorm(std::vector<float>(f.begin() + off, f.begin() + off + n),
                      std::vector<float>(a.begin() + off, a.begin() + off + n)),
              0.0)
        << "convert";
  }
  for (int64_t cols : {int64_t(64), int64_t(70)}) {
    SCOPED_TRACE("bias add over " + std::to_string(cols) + " columns");
    const int64_t rows = 9, n = rows * cols;
    auto x = rounded<T>(randn(n, 24)), bias = rounded<T>(randn(cols, 25));
    Dev<T> dx(x), dbias(bias), dout(n);
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = round(x[i] + bias[i % cols]);
    CUDA_OK(cu::biasAddForward(dx.get(), dbias.get(), dout.get(), rows, cols,
                               stream));
    EXPECT_EQ(relNorm(dout.download(), want), 0.0);
  }
}
TEST_F(CudaKernel, PackedElementwiseFp32) {
  checkPackedElementwise<float>(stream);
}
TEST_F(CudaKernel, PackedElementwiseBf16) {
  checkPackedElementwise<__nv_bfloat16>(stream);
}

TEST_F(CudaKernel, DropoutMaskIsBitExactInFp32) {
  const int64_t n = 100003;
  auto x = randn(n, 9);
  std::vector<float> y(n);
  dropoutForward(x.data(), y.data(), n, 0.1f, 7, 3);
  Dev<float> dx(x), dy(n);
  CUDA_OK(cu::dropoutForward(dx.get(), dy.get(), n, 0.1f, 7, 3, stream));
  auto got = dy.download();
  EXPECT_EQ(0, std::memcmp(got.data(), y.data(), n * sizeof(float)));
}

TEST_F(CudaKernel, MulAddScaleBackwardFp32) {
  const int64_t n = 5000;
  auto a = randn(n, 1), b = randn(n, 2), dy = randn(n, 3), base = randn(n, 4);
  Dev<float> da(a), db(b), ddy(dy), dy2(n);
  std::vector<float> y(n);
  mulForward(a.data(), b.data(), y.data(), n);
  CUDA_OK(cu::mulForward(da.get(), db.get(), dy2.get(), n, stream));
  EXPECT_EQ(relNorm(dy2.download(), y), 0.0);
  for (bool acc : {false, true}) {
    std::vector<float> ga = base, gb = base;
    Dev<float> dga(base), dgb(base);
    mulBackward(a.data(), b.data(), dy.data(), ga.data(), gb.data(), n, acc);
    CUDA_OK(cu::mulBackward(da.get(), db.get(), ddy.get(), dga.get(), dgb.get(),
                            n, acc, stream));
    EXPECT_LT(relNorm(dga.download(), ga), 1e-6);
    EXPECT_LT(relNorm(dgb.download(), gb), 1e-6);
    ga = base, gb = base;
    dga.upload(base), dgb.upload(base);
    addBackward(dy.data(), ga.data(), gb.data(), n, acc);
    CUDA_OK(cu::addBackward(ddy.get(), dga.get(), dgb.get(), n, acc, stream));
    EXPECT_LT(relNorm(dga.download(), ga), 1e-6);
    EXPECT_LT(relNorm(dgb.download(), gb), 1e-6);
    ga = base;
    dga.upload(base);
    scaleBackward(dy.data(), ga.data(), n, 0.25f, acc);
    CUDA_OK(cu::scaleBackward(ddy.get(), dga.get(), n, 0.25f, acc, stream));
    EXPECT_LT(relNorm(dga.download(), ga), 1e-6);
  }
  std::vector<float> acc = base;
  for (int64_t i = 0; i < n; ++i)
    acc[i] += dy[i];
  Dev<float> dacc(base);
  CUDA_OK(cu::accumulate(ddy.get(), dacc.get(), n, stream));
  EXPECT_EQ(relNorm(dacc.download(), acc), 0.0);
}

TEST_F(CudaKernel, LayoutMatchesCpu) {
  // Transpose [3, 5, 7] by (2, 0, 1), and back.
  const int64_t shape[3] = {3, 5, 7};
  const int perm[3] = {2, 0, 1};
  const int64_t n = 105;
  auto x = randn(n, 1), dy = randn(n, 2), base = randn(n, 3);
  std::vector<float> y(n);
  transposeForward(x.data(), y.data(), shape, perm, 3);
  Dev<float> dx(x), dout(n), ddy(dy);
  CUDA_OK(cu::transposeForward(dx.get(), dout.get(), shape, perm, 3, stream));
  EXPECT_EQ(relNorm(dout.download(), y), 0.0);
  for (bool acc : {false, true}) {
    std::vector<float> g = base;
    Dev<float> dg(base);
    transposeBackward(dy.data(), g.data(), shape, perm, 3, acc);
    CUDA_OK(cu::transposeBackward(ddy.get(), dg.get(), shape, perm, 3, acc,
                                  stream));
    EXPECT_EQ(relNorm(dg.download(), g), 0.0) << acc;
  }
  // Slice a [2, 3, 4] box at (1, 1, 2) out of [4, 6, 9].
  const int64_t inShape[3] = {4, 6, 9}, outShape[3] = {2, 3, 4},
                offsets[3] = {1, 1, 2};
  auto big = randn(216, 4), small = randn(24, 5), bigBase = randn(216, 6);
  std::vector<float> sl(24);
  sliceForward(big.data(), sl.data(), inShape, outShape, offsets, 3);
  Dev<float> dbig(big), dsl(24), dsmall(small);
  CUDA_OK(cu::sliceForward(dbig.get(), dsl.get(), inShape, outShape, offsets, 3,
                           stream));
  EXPECT_EQ(relNorm(dsl.download(), sl), 0.0);
  for (bool acc : {false, true}) {
    std::vector<float> g = bigBase;
    Dev<float> dg(bigBase);
    sliceBackward(small.data(), g.data(), inShape, outShape, offsets, 3, acc);
    CUDA_OK(cu::sliceBackward(dsmall.get(), dg.get(), inShape, outShape,
                              offsets, 3, acc, stream));
    EXPECT_EQ(relNorm(dg.download(), g), 0.0) << acc;
  }
  // Concat [2, {3, 1, 4}, 5]; the middle gradient is not wanted.
  const int64_t dims[3] = {3, 1, 4}, outer = 2, inner = 5;
  std::vector<std::vector<float>> parts = {randn(30, 7), randn(10, 8),
                                           randn(40, 9)};
  std::vector<float> cat(80);
  const float *hostIns[3] = {parts[0].data(), parts[1].data(), parts[2].data()};
  concatForward(hostIns, dims, 3, cat.data(), outer, inner);
  Dev<float> p0(parts[0]), p1(parts[1]), p2(parts[2]), dcat(80);
  const float *devIns[3] = {p0.get(), p1.get(), p2.get()};
  CUDA_OK(cu::concatForward(devIns, dims, 3, dcat.get(), outer, inner, stream));
  EXPECT_EQ(relNorm(dcat.download(), cat), 0.0);
  std::vector<float> g0 = parts[0], g2 = parts[2];
  float *hostGrads[3] = {g0.data(), nullptr, g2.data()};
  concatBackward(cat.data(), hostGrads, dims, 3, outer, inner, true);
  float *devGrads[3] = {p0.get(), nullptr, p2.get()};
  CUDA_OK(cu::concatBackward(dcat.get(), devGrads, dims, 3, outer, inner, true,
                             stream));
  EXPECT_EQ(relNorm(p0.download(), g0), 0.0);
  EXPECT_EQ(relNorm(p2.download(), g2), 0.0);
}

// GPT-shaped layouts in bf16 (exact copies): the head split [b, s, heads,
// hd] -> [b, heads, s, hd] and back, the K third of a fused QKV [b, s, 3h],
// a box whose last dimension is not the tensor's (a strided row), and a
// rank-1 slice. The kernels go by rows with 32-bit indices.
TEST_F(CudaKernel, LayoutGptShapesBf16) {
  using B = __nv_bfloat16;
  const int64_t b = 2, sq = 100, heads = 3, hd = 64, h = heads * hd;
  {
    const int64_t shape[4] = {b, sq, heads, hd};
    const int perm[4] = {0, 2, 1, 3};
    const int64_t n = b * sq * h;
    auto x = rounded<B>(randn(n, 11)), dy = rounded<B>(randn(n, 12));
    std::vector<float> y(n), g(n, 0.0f);
    transposeForward(x.data(), y.data(), shape, perm, 4);
    transposeBackward(dy.data(), g.data(), shape, perm, 4, false);
    Dev<B> dx(x), dout(n), ddy(dy), dg(n);
    CUDA_OK(cu::transposeForward(dx.get(), dout.get(), shape, perm, 4, stream));
    CUDA_OK(cu::transposeBackward(ddy.get(), dg.get(), shape, perm, 4, false,
                                  stream));
    EXPECT_EQ(relNorm(dout.download(), y), 0.0) << "head split";
    EXPECT_EQ(relNorm(dg.download(), g), 0.0) << "head split backward";
  }
  struct Case {
    std::vector<int64_t> in, out, off;
  };
  for (const Case &c : {Case{{b, sq, 3 * h}, {b, sq, h}, {0, 0, h}},
                        Case{{b, sq, 3 * h}, {1, 7, 1}, {1, 50, 2 * h + 5}},
                        Case{{1000}, {300}, {650}}}) {
    const int rank = int(c.in.size());
    int64_t nIn = 1, nOut = 1;
    for (int i = 0; i < rank; ++i)
      nIn *= c.in[i], nOut *= c.out[i];
    SCOPED_TRACE("slice of rank " + std::to_string(rank) + " to " +
                 std::to_string(nOut));
    auto big = rounded<B>(randn(nIn, 13)), small = rounded<B>(randn(nOut, 14)),
         base = rounded<B>(randn(nIn, 15));
    std::vector<float> sl(nOut);
    sliceForward(big.data(), sl.data(), c.in.data(), c.out.data(), c.off.data(),
                 rank);
    Dev<B> dbig(big), dsl(nOut), dsmall(small);
    CUDA_OK(cu::sliceForward(dbig.get(), dsl.get(), c.in.data(), c.out.data(),
                             c.off.data(), rank, stream));
    EXPECT_EQ(relNorm(dsl.download(), sl), 0.0);
    for (bool acc : {false, true}) {
      std::vector<float> g = base;
      Dev<B> dg(base);
      sliceBackward(small.data(), g.data(), c.in.data(), c.out.data(),
                    c.off.data(), rank, acc);
      CUDA_OK(cu::sliceBackward(dsmall.get(), dg.get(), c.in.data(),
                                c.out.data(), c.off.data(), rank, acc, stream));
      // bf16 accumulation rounds: the CPU's sum rounded the same way.
      auto want = rounded<B>(g);
      EXPECT_EQ(relNorm(dg.download(), want), 0.0) << acc;
    }
  }
}

//===----------------------------------------------------------------------===//
// LayerNorm, softmax
//===----------------------------------------------------------------------===//

template <typename T> void checkLayerNorm(cudaStream_t stream) {
  const int64_t rows = 300, cols = 200, n = rows * cols; // 3 row chunks
  const float eps = 1e-5f;
  auto x = rounded<T>(randn(n, 1, 3.0f)), dy = rounded<T>(randn(n, 2));
  for (float &v : x)
    v += 5.0f; // a large mean: the two-pass variance matters
  x = rounded<T>(x);
  auto gamma = rounded<T>(randn(cols, 3)), beta = rounded<T>(randn(cols, 4));
  std::vector<float> y(n), mean(rows), rstd(rows);
  layerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(),
                   rstd.data(), rows, cols, eps);
  Dev<T> dx(x), dg(gamma), db(beta), dout(n), ddy(dy);
  Dev<float> dmean(rows), drstd(rows);
  ASSERT_EQ(cudaSuccess,
            cu::layerNormForward(dx.get(), dg.get(), db.get(), dout.get(),
                                 dmean.get(), drstd.get(), rows, cols, eps,
                                 stream));
  EXPECT_LT(relNorm(dout.download(), y), tol<T>());
  EXPECT_LT(relNorm(dmean.download(), mean), 1e-5);
  EXPECT_LT(relNorm(drstd.download(), rstd), 1e-5);
  for (bool saved : {true, false}) {
    for (uint32_t accBits : {0u, 7u}) {
      SCOPED_TRACE(std::string("saved=") + (saved ? "1" : "0") +
                   " acc=" + std::to_string(accBits));
      std::vector<float> gx = dy, gg = gamma, gb = beta; // accumulate bases
      layerNormBackward(x.data(), gamma.data(), mean.data(), rstd.data(),
                        dy.data(), gx.data(), gg.data(), gb.data(), rows, cols,
                        eps, AccumulateMask(accBits));
      Dev<T> dgx(dy), dgg(gamma), dgb(beta);
      ASSERT_EQ(cudaSuccess,
                cu::layerNormBackward(
                    dx.get(), dg.get(), saved ? dmean.get() : nullptr,
                    saved ? drstd.get() : nullptr, ddy.get(), dgx.get(),
                    dgg.get(), dgb.get(), rows, cols, eps,
                    AccumulateMask(accBits), stream));
      EXPECT_LT(relNorm(dgx.download(), gx), tol<T>());
      EXPECT_LT(relNorm(dgg.download(), gg), tol<T>());
      EXPECT_LT(relNorm(dgb.download(), gb), tol<T>());
    }
  }
}
TEST_F(CudaKernel, LayerNormFp32) { checkLayerNorm<float>(stream); }

template <typename T> void checkRmsNorm(cudaStream_t stream) {
  const int64_t rows = 300, cols = 200, n = rows * cols; // 3 row chunks
  const float eps = 1e-2f;
  auto x = rounded<T>(randn(n, 1, 3.0f)), dy = rounded<T>(randn(n, 2));
  auto gamma = rounded<T>(randn(cols, 3));
  Dev<T> dx(x), dg(gamma), dout(n), ddy(dy);
  for (bool outside : {false, true}) {
    SCOPED_TRACE(outside ? "eps outside" : "eps inside");
    std::vector<float> y(n);
    rmsNormForward(x.data(), gamma.data(), y.data(), rows, cols, eps, outside);
    ASSERT_EQ(cudaSuccess,
              cu::rmsNormForward(dx.get(), dg.get(), dout.get(), rows, cols,
                                 eps, outside, stream));
    EXPECT_LT(relNorm(dout.download(), y), tol<T>());
    for (uint32_t accBits : {0u, 3u}) {
      SCOPED_TRACE("acc=" + std::to_string(accBits));
      std::vector<float> gx = dy, gg = gamma; // accumulate bases
      rmsNormBackward(x.data(), gamma.data(), dy.data(), gx.data(), gg.data(),
                      rows, cols, eps, outside, AccumulateMask(accBits));
      Dev<T> dgx(dy), dgg(gamma);
      ASSERT_EQ(cudaSuccess,
                cu::rmsNormBackward(dx.get(), dg.get(), ddy.get(), dgx.get(),
                                    dgg.get(), rows, cols, eps, outside,
                                    AccumulateMask(accBits), stream));
      EXPECT_LT(relNorm(dgx.download(), gx), tol<T>());
      EXPECT_LT(relNorm(dgg.download(), gg), tol<T>());
    }
  }
}
TEST_F(CudaKernel, RmsNormFp32) { checkRmsNorm<float>(stream); }
TEST_F(CudaKernel, RmsNormBf16) { checkRmsNorm<__nv_bfloat16>(stream); }
TEST_F(CudaKernel, LayerNormBf16) { checkLayerNorm<__nv_bfloat16>(stream); }

template <typename T> void checkRotary(cudaStream_t stream) {
  // 3 sequences of 37 positions, 4 heads of 24 features; partial (8 of 24
  // rotated) and whole-head, both directions, out of place and in place.
  const int64_t seq = 37, rows = 3 * seq, headDim = 24, cols = 4 * headDim;
  const int64_t n = rows * cols;
  auto x = rounded<T>(randn(n, 1, 2.0f));
  for (int64_t rotary : {int64_t(8), headDim})
    for (bool inverse : {false, true}) {
      SCOPED_TRACE("rotary " + std::to_string(rotary) +
                   (inverse ? " inverse" : ""));
      std::vector<float> y(n);
      rotaryForward(x.data(), y.data(), rows, seq, cols, headDim, rotary,
                    10000.0, inverse);
      Dev<T> dx(x), dy(n);
      ASSERT_EQ(cudaSuccess,
                cu::rotaryForward(dx.get(), dy.get(), rows, seq, cols, headDim,
                                  rotary, 10000.0, inverse, stream));
      EXPECT_LT(relNorm(dy.download(), y), tol<T>());
      ASSERT_EQ(cudaSuccess,
                cu::rotaryForward(dx.get(), dx.get(), rows, seq, cols, headDim,
                                  rotary, 10000.0, inverse, stream));
      EXPECT_LT(relNorm(dx.download(), y), tol<T>());
    }
}
TEST_F(CudaKernel, RotaryFp32) { checkRotary<float>(stream); }
TEST_F(CudaKernel, RotaryBf16) { checkRotary<__nv_bfloat16>(stream); }

template <typename T> void checkGatedMlp(cudaStream_t stream) {
  const int64_t rows = 77, cols = 150, n = rows * cols;
  auto x = rounded<T>(randn(2 * n, 1, 2.0f)), g = rounded<T>(randn(n, 2));
  std::vector<float> y(n), dx(2 * n);
  swigluForward(x.data(), y.data(), rows, cols);
  swigluBackward(x.data(), g.data(), dx.data(), rows, cols);
  Dev<T> dxv(x), dyv(n), dg(g), ddx(2 * n);
  ASSERT_EQ(cudaSuccess,
            cu::swigluForward(dxv.get(), dyv.get(), rows, cols, stream));
  ASSERT_EQ(cudaSuccess, cu::swigluBackward(dxv.get(), dg.get(), ddx.get(),
                                            rows, cols, stream));
  EXPECT_LT(relNorm(dyv.download(), y), tol<T>());
  EXPECT_LT(relNorm(ddx.download(), dx), tol<T>());
  // 3 key/value heads of 24 repeated 4 times, and the sum back.
  const int64_t kv = 3, hd = 24, reps = 4, narrow = rows * kv * hd;
  auto k = rounded<T>(randn(narrow, 3)),
       dk = rounded<T>(randn(narrow * reps, 4));
  std::vector<float> wide(narrow * reps), back(narrow);
  repeatHeadsForward(k.data(), wide.data(), rows, kv, hd, reps);
  repeatHeadsBackward(dk.data(), back.data(), rows, kv, hd, reps);
  Dev<T> dkv(k), dwide(narrow * reps), ddk(dk), dback(narrow);
  ASSERT_EQ(cudaSuccess, cu::repeatHeadsForward(dkv.get(), dwide.get(), rows,
                                                kv, hd, reps, stream));
  ASSERT_EQ(cudaSuccess, cu::repeatHeadsBackward(ddk.get(), dback.get(), rows,
                                                 kv, hd, reps, stream));
  EXPECT_LT(relNorm(dwide.download(), wide), tol<T>());
  EXPECT_LT(relNorm(dback.download(), back), tol<T>());
}
TEST_F(CudaKernel, GatedMlpFp32) { checkGatedMlp<float>(stream); }
TEST_F(CudaKernel, GatedMlpBf16) { checkGatedMlp<__nv_bfloat16>(stream); }

template <typename T> void checkGeluExact(cudaStream_t stream) {
  const int64_t n = 10007;
  auto x = rounded<T>(randn(n, 1, 3.0f)), g = rounded<T>(randn(n, 2));
  std::vector<float> y(n), dx(n);
  geluExactForward(x.data(), y.data(), n);
  geluExactBackward(x.data(), g.data(), dx.data(), n, false);
  Dev<T> dxv(x), dyv(n), dg(g), ddx(n);
  ASSERT_EQ(cudaSuccess, cu::geluExactForward(dxv.get(), dyv.get(), n, stream));
  ASSERT_EQ(cudaSuccess, cu::geluExactBackward(dxv.get(), dg.get(), ddx.get(),
                                               n, false, stream));
  EXPECT_LT(relNorm(dyv.download(), y), tol<T>());
  EXPECT_LT(relNorm(ddx.download(), dx), tol<T>());
}
TEST_F(CudaKernel, GeluExactFp32) { checkGeluExact<float>(stream); }
TEST_F(CudaKernel, GeluExactBf16) { checkGeluExact<__nv_bfloat16>(stream); }

/// --dsc-fuse's bias_gelu and bias_gelu_grad against the CPU's unfused
/// chain: bias_add (its sum rounded to T, as the GPU's bias add stores it),
/// then gelu and gelu_grad, both forms.
template <typename T> void checkBiasGelu(cudaStream_t stream) {
  const int64_t rows = 97, cols = 103, n = rows * cols;
  auto x = rounded<T>(randn(n, 1, 2.0f)), b = rounded<T>(randn(cols, 2)),
       g = rounded<T>(randn(n, 3));
  std::vector<float> sum(n);
  biasAddForward(x.data(), b.data(), sum.data(), rows, cols);
  sum = rounded<T>(sum);
  for (bool exact : {false, true}) {
    std::vector<float> y(n), dx(n);
    if (exact) {
      geluExactForward(sum.data(), y.data(), n);
      geluExactBackward(sum.data(), g.data(), dx.data(), n, false);
    } else {
      geluForward(sum.data(), y.data(), n);
      geluBackward(sum.data(), g.data(), dx.data(), n, false);
    }
    Dev<T> dxv(x), db(b), dyv(n), dg(g), ddx(n);
    ASSERT_EQ(cudaSuccess, cu::biasGeluForward(dxv.get(), db.get(), dyv.get(),
                                               rows, cols, exact, stream));
    ASSERT_EQ(cudaSuccess,
              cu::biasGeluBackward(dxv.get(), db.get(), dg.get(), ddx.get(),
                                   rows, cols, exact, false, stream));
    EXPECT_LT(relNorm(dyv.download(), y), tol<T>()) << "exact=" << exact;
    EXPECT_LT(relNorm(ddx.download(), dx), tol<T>()) << "exact=" << exact;
  }
}
TEST_F(CudaKernel, BiasGeluFp32) { checkBiasGelu<float>(stream); }
TEST_F(CudaKernel, BiasGeluBf16) { checkBiasGelu<__nv_bfloat16>(stream); }

template <typename T> void checkSoftmax(cudaStream_t stream) {
  for (int64_t cols : {int64_t(7), int64_t(1000), int64_t(5000)}) {
    const int64_t rows = 33, n = rows * cols;
    auto x = rounded<T>(randn(n, 1, 3.0f)), dy = rounded<T>(randn(n, 2));
    std::vector<float> y(n), g(n);
    softmaxForward(x.data(), y.data(), rows, cols);
    Dev<T> dx(x), dyv(n), ddy(dy), dg(n);
    ASSERT_EQ(cudaSuccess,
              cu::softmaxForward(dx.get(), dyv.get(), rows, cols, stream));
    EXPECT_LT(relNorm(dyv.download(), y), tol<T>()) << cols;
    // The backward from the device's own forward output, as in training.
    auto yd = dyv.download();
    softmaxBackward(yd.data(), dy.data(), g.data(), rows, cols, false);
    ASSERT_EQ(cudaSuccess, cu::softmaxBackward(dyv.get(), ddy.get(), dg.get(),
                                               rows, cols, false, stream));
    EXPECT_LT(relNorm(dg.download(), g), tol<T>()) << cols;
  }
}
TEST_F(CudaKernel, SoftmaxFp32) { checkSoftmax<float>(stream); }
TEST_F(CudaKernel, SoftmaxBf16) { checkSoftmax<__nv_bfloat16>(stream); }

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

template <typename T>
void checkAttention(cudaStream_t stream, AttentionShape s) {
  SCOPED_TRACE("batch " + std::to_string(s.batch) + " seq " +
               std::to_string(s.seq) + " hidden " + std::to_string(s.hidden) +
               " heads " + std::to_string(s.heads) +
               (s.causal ? " causal" : "") + " dropout " +
               std::to_string(s.dropout));
  const int64_t n = s.batch * s.seq * s.hidden;
  auto q = rounded<T>(randn(n, 1)), k = rounded<T>(randn(n, 2)),
       v = rounded<T>(randn(n, 3)), dO = rounded<T>(randn(n, 4));
  std::vector<float> out(n), lse(s.lseSize());
  ASSERT_TRUE(attentionForward(q.data(), k.data(), v.data(), out.data(),
                               lse.data(), (float *)nullptr, 0, s));
  Dev<T> dq(q), dk(k), dv(v), ddO(dO), dout(n);
  Dev<float> dlse(s.lseSize());
  ASSERT_EQ(cudaSuccess,
            cu::attentionForward(dq.get(), dk.get(), dv.get(), dout.get(),
                                 dlse.get(), s, stream));
  EXPECT_LT(relNorm(dout.download(), out), tol<T>());
  EXPECT_LT(relNorm(dlse.download(), lse),
            (std::is_same_v<T, float> ? 1e-5 : 1e-3));

  // Saved lse; recomputed lse; saved lse and the forward's output (D_i
  // from dO . O instead of a pass over the keys).
  for (int mode = 0; mode < 3; ++mode) {
    const bool savedLse = mode != 1, withOut = mode == 2;
    for (uint32_t accBits : {0u, 5u}) {
      SCOPED_TRACE("mode=" + std::to_string(mode) +
                   " acc=" + std::to_string(accBits));
      std::vector<float> gq = dO, gk = q, gv = k; // accumulate bases
      ASSERT_TRUE(attentionBackward(q.data(), k.data(), v.data(), lse.data(),
                                    dO.data(), gq.data(), gk.data(), gv.data(),
                                    (float *)nullptr, 0, s,
                                    AccumulateMask(accBits)));
      Dev<T> dgq(dO), dgk(q), dgv(k);
      ASSERT_EQ(cudaSuccess,
                cu::attentionBackward(dq.get(), dk.get(), dv.get(),
                                      savedLse ? dlse.get() : nullptr,
                                      ddO.get(), dgq.get(), dgk.get(),
                                      dgv.get(), s, AccumulateMask(accBits),
                                      stream, withOut ? dout.get() : nullptr));
      // One key (seq 1, causal) makes dq and dk zero exactly: the CPU's
      // are rounding noise near 1e-24; measured against dO's norm.
      const double floor = norm(dO);
      EXPECT_LT(relNormAtLeast(dgq.download(), gq, floor), tol<T>()) << "dq";
      EXPECT_LT(relNormAtLeast(dgk.download(), gk, floor), tol<T>()) << "dk";
      EXPECT_LT(relNorm(dgv.download(), gv), tol<T>()) << "dv";
    }
  }
}

AttentionShape attnShape(int64_t batch, int64_t seq, int64_t hidden,
                         int64_t heads, bool causal, float dropout) {
  AttentionShape s;
  s.batch = batch;
  s.seq = seq;
  s.hidden = hidden;
  s.heads = heads;
  s.causal = causal;
  s.dropout = dropout;
  s.seed = 1234;
  return s;
}

TEST_F(CudaKernel, AttentionFp32) {
  // Sequences that end mid-tile; head dims 16, 32, 64, 128.
  checkAttention<float>(stream, attnShape(2, 77, 64, 4, true, 0.0f));
  checkAttention<float>(stream, attnShape(2, 77, 64, 4, false, 0.0f));
  checkAttention<float>(stream, attnShape(1, 130, 64, 2, true, 0.0f));
  checkAttention<float>(stream, attnShape(1, 70, 128, 2, true, 0.0f));
  checkAttention<float>(stream, attnShape(1, 65, 128, 1, false, 0.0f));
}
TEST_F(CudaKernel, AttentionDropoutSlicedFp32) {
  // Dropout masks must match the CPU's, also for a rank holding a slice of
  // the batch and heads.
  AttentionShape s = attnShape(2, 50, 64, 2, true, 0.2f);
  s.batchOffset = 3;
  s.headOffset = 2;
  s.totalHeads = 8;
  checkAttention<float>(stream, s);
}
TEST_F(CudaKernel, AttentionBf16) {
  checkAttention<__nv_bfloat16>(stream, attnShape(2, 150, 128, 2, true, 0.0f));
  checkAttention<__nv_bfloat16>(stream, attnShape(1, 99, 64, 4, true, 0.1f));
}
// bf16/fp16 at head dims 64 and 128 take the tensor-core kernels
// (AttentionTensorCore.cu) unless DSC_ATTENTION_SIMT=1.
TEST_F(CudaKernel, AttentionTensorCoreBf16) {
  // hd 64 and 128, causal and not, sequences ending mid-tile (64-row tiles)
  // and an exact tile.
  checkAttention<__nv_bfloat16>(stream, attnShape(2, 100, 128, 2, true, 0.0f));
  checkAttention<__nv_bfloat16>(stream, attnShape(1, 100, 128, 2, false, 0.0f));
  checkAttention<__nv_bfloat16>(stream, attnShape(2, 130, 256, 2, true, 0.0f));
  checkAttention<__nv_bfloat16>(stream, attnShape(1, 77, 256, 2, false, 0.0f));
  checkAttention<__nv_bfloat16>(stream, attnShape(1, 64, 128, 1, true, 0.0f));
  checkAttention<__nv_bfloat16>(stream, attnShape(1, 1, 128, 1, true, 0.0f));
}
TEST_F(CudaKernel, AttentionTensorCoreDropoutSlicedBf16) {
  checkAttention<__nv_bfloat16>(stream, attnShape(1, 150, 128, 2, true, 0.1f));
  checkAttention<__nv_bfloat16>(stream, attnShape(1, 90, 256, 2, false, 0.2f));
  AttentionShape s = attnShape(2, 70, 128, 2, true, 0.2f);
  s.batchOffset = 3;
  s.headOffset = 2;
  s.totalHeads = 8;
  checkAttention<__nv_bfloat16>(stream, s);
  s.hidden = 256;
  checkAttention<__nv_bfloat16>(stream, s);
}
// Mistral's sliding window: windows shorter than a tile (whole early tiles
// masked for the later rows), longer than one, and with dropout, on the
// SIMT kernels (fp32) and the tensor-core ones (bf16).
TEST_F(CudaKernel, AttentionSlidingWindow) {
  for (int64_t window : {int64_t(5), int64_t(40), int64_t(100)}) {
    SCOPED_TRACE("window " + std::to_string(window));
    AttentionShape s = attnShape(2, 150, 64, 2, true, 0.0f);
    s.window = window;
    checkAttention<float>(stream, s);
    s.hidden = 256;
    checkAttention<__nv_bfloat16>(stream, s);
    s.dropout = 0.1f;
    checkAttention<__nv_bfloat16>(stream, s);
  }
}
TEST_F(CudaKernel, AttentionTensorCoreFp16) {
  checkAttention<__half>(stream, attnShape(2, 100, 128, 2, true, 0.0f));
  checkAttention<__half>(stream, attnShape(1, 130, 256, 2, false, 0.0f));
  checkAttention<__half>(stream, attnShape(1, 99, 256, 2, true, 0.1f));
}

/// Sets an environment variable for a scope (POSIX setenv/unsetenv).
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name(name) {
    if (const char *old = std::getenv(name))
      saved = old, had = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name, saved.c_str(), 1);
    else
      unsetenv(name);
  }

private:
  const char *name;
  std::string saved;
  bool had = false;
};

/// The tensor-core path against the SIMT path (DSC_ATTENTION_SIMT=1) on the
/// same device inputs: forward, lse and all three gradients.
template <typename T>
void checkTensorCoreVsSimt(cudaStream_t stream, AttentionShape s) {
  const int64_t n = s.batch * s.seq * s.hidden;
  Dev<T> q(randn(n, 11)), k(randn(n, 12)), v(randn(n, 13)), dO(randn(n, 14));
  struct Result {
    std::vector<float> out, lse, dq, dk, dv;
  };
  auto run = [&](bool simt) {
    std::unique_ptr<ScopedEnv> env;
    if (simt)
      env = std::make_unique<ScopedEnv>("DSC_ATTENTION_SIMT", "1");
    Dev<T> out(n), dq(n), dk(n), dv(n);
    Dev<float> lse(s.lseSize());
    Result r;
    EXPECT_EQ(cudaSuccess,
              cu::attentionForward(q.get(), k.get(), v.get(), out.get(),
                                   lse.get(), s, stream));
    EXPECT_EQ(cudaSuccess,
              cu::attentionBackward(q.get(), k.get(), v.get(), lse.get(),
                                    dO.get(), dq.get(), dk.get(), dv.get(), s,
                                    AccumulateMask(0), stream));
    r.out = out.download();
    r.lse = lse.download();
    r.dq = dq.download();
    r.dk = dk.download();
    r.dv = dv.download();
    return r;
  };
  const Result tc = run(false), simt = run(true);
  EXPECT_LT(relNorm(tc.out, simt.out), 1e-2) << "out";
  EXPECT_LT(relNorm(tc.lse, simt.lse), 1e-3) << "lse";
  EXPECT_LT(relNorm(tc.dq, simt.dq), 1e-2) << "dq";
  EXPECT_LT(relNorm(tc.dk, simt.dk), 1e-2) << "dk";
  EXPECT_LT(relNorm(tc.dv, simt.dv), 1e-2) << "dv";
}
TEST_F(CudaKernel, AttentionTensorCoreMatchesSimt) {
  checkTensorCoreVsSimt<__nv_bfloat16>(stream,
                                       attnShape(2, 200, 128, 2, true, 0.1f));
  checkTensorCoreVsSimt<__nv_bfloat16>(stream,
                                       attnShape(1, 130, 256, 2, false, 0.0f));
  checkTensorCoreVsSimt<__half>(stream, attnShape(1, 77, 256, 2, true, 0.2f));
}
TEST_F(CudaKernel, AttentionRejectsOddHeadDim) {
  AttentionShape s = attnShape(1, 8, 24, 1, true, 0.0f);
  EXPECT_FALSE(cu::attentionSupported(s));
  EXPECT_EQ(cudaErrorInvalidValue,
            cu::attentionForward<float>(nullptr, nullptr, nullptr, nullptr,
                                        nullptr, s, stream));
}

//===----------------------------------------------------------------------===//
// Embedding, cross entropy
//===----------------------------------------------------------------------===//

TEST_F(CudaKernel, EmbeddingFp32BitExact) {
  const int64_t vocab = 50, hidden = 70, n = 400;
  std::vector<int32_t> ids(n);
  std::mt19937 g(5);
  for (auto &id : ids)
    id = int32_t(g() % 20); // many repeats
  ids[7] = -1;
  ids[9] = int32_t(vocab); // out of range: zero row, skipped in backward
  auto table = randn(vocab * hidden, 1), dOut = randn(n * hidden, 2);
  std::vector<float> out(n * hidden), dTable(vocab * hidden);
  const int64_t bad =
      embeddingForward(table.data(), ids.data(), out.data(), n, vocab, hidden);
  int32_t *dIds = nullptr;
  CUDA_OK(cudaMalloc((void **)&dIds, n * sizeof(int32_t)));
  CUDA_OK(cudaMemcpy(dIds, ids.data(), n * sizeof(int32_t),
                     cudaMemcpyHostToDevice));
  int64_t *dBad = nullptr;
  CUDA_OK(cudaMalloc((void **)&dBad, sizeof(int64_t)));
  Dev<float> dtable(table), dout(n * hidden), ddOut(dOut), dgt(vocab * hidden);
  CUDA_OK(cu::embeddingForward(dtable.get(), dIds, dout.get(), n, vocab, hidden,
                               dBad, stream));
  auto got = dout.download();
  EXPECT_EQ(0, std::memcmp(got.data(), out.data(), got.size() * 4));
  int64_t gotBad = 0;
  CUDA_OK(cudaMemcpy(&gotBad, dBad, sizeof(int64_t), cudaMemcpyDeviceToHost));
  EXPECT_EQ(bad, gotBad);
  for (bool acc : {false, true}) {
    embeddingBackward(dOut.data(), ids.data(), dTable.data(), n, vocab, hidden,
                      acc);
    CUDA_OK(cu::embeddingBackward(ddOut.get(), dIds, dgt.get(), n, vocab,
                                  hidden, acc, stream));
    auto gt = dgt.download();
    // Same summation order as the CPU: the same bits.
    EXPECT_EQ(0, std::memcmp(gt.data(), dTable.data(), gt.size() * 4))
        << "acc=" << acc;
  }
  // Learned positions.
  const int64_t batch = 3, seq = 11, positions = 16;
  auto pt = randn(positions * hidden, 3), pd = randn(batch * seq * hidden, 4);
  std::vector<float> po(batch * seq * hidden), pg(positions * hidden);
  positionEmbeddingForward(pt.data(), po.data(), batch, seq, hidden);
  positionEmbeddingBackward(pd.data(), pg.data(), batch, seq, positions, hidden,
                            false);
  Dev<float> dpt(pt), dpo(po.size()), dpd(pd), dpg(pg.size());
  CUDA_OK(cu::positionEmbeddingForward(dpt.get(), dpo.get(), batch, seq, hidden,
                                       stream));
  CUDA_OK(cu::positionEmbeddingBackward(dpd.get(), dpg.get(), batch, seq,
                                        positions, hidden, false, stream));
  EXPECT_EQ(relNorm(dpo.download(), po), 0.0);
  EXPECT_LT(relNorm(dpg.download(), pg), 1e-6);
  cudaFree(dIds);
  cudaFree(dBad);
}

/// `classes` 0: every column; else a padded vocabulary's first `classes`.
template <typename T>
void checkCrossEntropy(cudaStream_t stream, int64_t classes = 0) {
  const int64_t rows = 37, vocab = 5003;
  auto logits = rounded<T>(randn(rows * vocab, 1, 2.0f));
  std::vector<int32_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r)
    targets[r] = int32_t((r * 131) % (classes ? classes : vocab));
  std::vector<float> lse(rows), g(rows * vocab);
  const float loss = crossEntropyForward(logits.data(), targets.data(),
                                         lse.data(), rows, vocab, classes);
  crossEntropyBackward(logits.data(), targets.data(), lse.data(), 2.0f,
                       g.data(), rows, vocab, false, classes);
  int32_t *dT = nullptr;
  float *dLoss = nullptr;
  CUDA_OK(cudaMalloc((void **)&dT, rows * sizeof(int32_t)));
  CUDA_OK(cudaMalloc((void **)&dLoss, sizeof(float)));
  CUDA_OK(cudaMemcpy(dT, targets.data(), rows * sizeof(int32_t),
                     cudaMemcpyHostToDevice));
  Dev<T> dl(logits), dg(rows * vocab), dfused(logits);
  Dev<float> dlse(rows);
  CUDA_OK(cu::crossEntropyForward(dl.get(), dT, dlse.get(), dLoss, rows, vocab,
                                  classes, stream));
  float got = 0;
  CUDA_OK(cudaMemcpy(&got, dLoss, sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_NEAR(got, loss, 1e-5 * std::abs(loss) + 1e-6);
  EXPECT_LT(relNorm(dlse.download(), lse), 1e-5);
  CUDA_OK(cu::crossEntropyBackward(dl.get(), dT, dlse.get(), 2.0f, dg.get(),
                                   rows, vocab, classes, false, stream));
  EXPECT_LT(relNorm(dg.download(), g), tol<T>());
  // Fused, in place over the logits.
  CUDA_OK(cu::crossEntropyFused(dfused.get(), dT, dLoss, 2.0f, dfused.get(),
                                rows, vocab, classes, stream));
  EXPECT_LT(relNorm(dfused.download(), g), tol<T>());
  CUDA_OK(cudaMemcpy(&got, dLoss, sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_NEAR(got, loss, 1e-5 * std::abs(loss) + 1e-6);
  // A bad target makes the loss NaN, as on the CPU.
  targets[3] = -2;
  CUDA_OK(cudaMemcpy(dT, targets.data(), rows * sizeof(int32_t),
                     cudaMemcpyHostToDevice));
  CUDA_OK(cu::crossEntropyForward(dl.get(), dT, nullptr, dLoss, rows, vocab,
                                  classes, stream));
  CUDA_OK(cudaMemcpy(&got, dLoss, sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::isnan(got));
  cudaFree(dT);
  cudaFree(dLoss);
}
// A 4,990-token vocabulary padded to 5,003 columns: the padding takes no
// probability and gets a zero gradient (the CPU reference's rule).
TEST_F(CudaKernel, CrossEntropyPaddedFp32) {
  checkCrossEntropy<float>(stream, 4990);
}
TEST_F(CudaKernel, CrossEntropyFp32) { checkCrossEntropy<float>(stream); }
TEST_F(CudaKernel, CrossEntropyBf16) {
  checkCrossEntropy<__nv_bfloat16>(stream);
}

//===----------------------------------------------------------------------===//
// Mixture of Experts
//===----------------------------------------------------------------------===//

/// An i32 device copy.
class DevIds {
public:
  explicit DevIds(const std::vector<int32_t> &h) : n(h.size()) {
    if (cudaMalloc((void **)&p, std::max<size_t>(n, 1) * sizeof(int32_t)) !=
        cudaSuccess)
      p = nullptr;
    else
      cudaMemcpy(p, h.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice);
  }
  ~DevIds() { cudaFree(p); }
  DevIds(const DevIds &) = delete;
  DevIds &operator=(const DevIds &) = delete;
  std::vector<int32_t> download() const {
    cudaDeviceSynchronize();
    std::vector<int32_t> h(n);
    cudaMemcpy(h.data(), p, n * sizeof(int32_t), cudaMemcpyDeviceToHost);
    return h;
  }
  int32_t *get() const { return p; }

private:
  int32_t *p = nullptr;
  size_t n;
};

/// A device int64 counter read back after the stream's work.
int64_t readCount(const int64_t *count, cudaStream_t stream) {
  int64_t h = -1;
  cudaStreamSynchronize(stream);
  cudaMemcpy(&h, count, sizeof h, cudaMemcpyDeviceToHost);
  return h;
}

/// Router logits with the cases that decide ties: repeated rows (equal
/// probabilities across tokens: ties to the lower token), a row of equal
/// logits (ties to the lower expert), a coarse grid (many equal logits).
std::vector<float> moeLogits(int64_t tokens, int64_t experts, uint32_t seed) {
  std::vector<float> v = randn(size_t(tokens * experts), seed, 1.5f);
  for (int64_t t = 0; t < tokens; ++t)
    if (t % 7 == 3)
      for (int64_t e = 0; e < experts; ++e)
        v[t * experts + e] = std::round(v[t * experts + e] * 4.0f) / 4.0f;
  for (int64_t e = 0; e < experts; ++e) {
    v[5 * experts + e] = v[2 * experts + e];
    v[9 * experts + e] = v[2 * experts + e];
    v[11 * experts + e] = 0.5f;
  }
  return v;
}

/// The CPU backend's draws for MoeDrop::Random (CpuBackend.cpp, MoeRoute).
std::vector<float> moeDraws(int64_t tokens, int64_t experts, uint64_t seed) {
  std::vector<float> d(size_t(tokens * experts));
  const uint64_t key = dropoutKey(seed);
  for (size_t i = 0; i < d.size(); ++i)
    d[i] = uniformDraw(key, i);
  return d;
}

/// Every routing rule the instruction encodes, over-full experts included.
std::vector<MoeRouting> moeRoutings(int64_t tokens, int64_t experts) {
  std::vector<MoeRouting> all;
  for (int64_t k : {1, 2, 3})
    for (int normalize = 0; normalize < 3; ++normalize)
      for (int drop = 0; drop < 3; ++drop)
        for (int order = 0; order < 2; ++order) {
          MoeRouting r;
          r.tokens = tokens;
          r.experts = experts;
          r.topK = k;
          r.capacity = std::max<int64_t>(1, tokens * k / experts * 3 / 4);
          r.normalize = MoeNormalize(normalize);
          r.drop = MoeDrop(drop);
          r.order = MoeSlotOrder(order);
          r.auxCounts = MoeAuxCounts((normalize + drop + order) % 2);
          r.auxCoeff = 0.01;
          r.zCoeff = 0.001 * double(order);
          all.push_back(r);
        }
  // Dropless: capacity T, nothing drops.
  MoeRouting dropless = all[4];
  dropless.dropTokens = false;
  dropless.capacity = tokens;
  all.push_back(dropless);
  return all;
}

template <typename T> void checkMoeRoute(cudaStream_t stream) {
  const int64_t tokens = 301, experts = 8;
  const uint64_t seed = 1234;
  const std::vector<float> logits = rounded<T>(moeLogits(tokens, experts, 7));
  const std::vector<float> draws = moeDraws(tokens, experts, seed);
  Dev<T> dLogits(logits);
  const bool fp32 = std::is_same_v<T, float>;
  const double valueTol = fp32 ? 1e-6 : 1e-2, gradTol = fp32 ? 1e-5 : 2e-2;
  int64_t *dDropped = nullptr, *dLoads = nullptr;
  CUDA_OK(cudaMalloc((void **)&dDropped, sizeof(int64_t)));
  CUDA_OK(cudaMalloc((void **)&dLoads, experts * sizeof(int64_t)));
  for (const MoeRouting &r : moeRoutings(tokens, experts)) {
    const std::string what = "k=" + std::to_string(r.topK) +
                             " normalize=" + std::to_string(int(r.normalize)) +
                             " drop=" + std::to_string(int(r.drop)) +
                             " order=" + std::to_string(int(r.order)) +
                             " dropTokens=" + std::to_string(r.dropTokens);
    const int64_t slotCount = r.experts * r.capacity;
    std::vector<int32_t> slots(slotCount);
    std::vector<float> gates(slotCount);
    float aux = 0;
    std::vector<int64_t> loads(static_cast<size_t>(experts));
    const int64_t dropped =
        moeRoute(r, logits.data(), draws.data(), slots.data(), gates.data(),
                 &aux, loads.data());
    if (r.dropTokens) {
      EXPECT_GT(dropped, 0) << what << ": the case should drop";
    }

    DevIds gotSlots(std::vector<int32_t>(slotCount, 7));
    Dev<T> gotGates(slotCount), gotAux(1);
    CUDA_OK(cu::moeRoute(r, dLogits.get(), seed, gotSlots.get(), gotGates.get(),
                         gotAux.get(), dDropped, dLoads, stream));
    EXPECT_EQ(readCount(dDropped, stream), dropped) << what;
    std::vector<int64_t> gotLoads(size_t(experts), -1);
    CUDA_OK(cudaMemcpy(gotLoads.data(), dLoads, experts * sizeof(int64_t),
                       cudaMemcpyDeviceToHost));
    EXPECT_EQ(gotLoads, loads) << what;
    // The same decisions, bit for bit; the weights to rounding.
    EXPECT_EQ(gotSlots.download(), slots) << what;
    EXPECT_LT(relNorm(gotGates.download(), gates), valueTol) << what;
    EXPECT_NEAR(gotAux.download()[0], aux, valueTol * std::abs(aux)) << what;

    // The VJP, overwriting and accumulating, for the CPU's slots.
    const std::vector<float> dGates = rounded<T>(randn(slotCount, 11));
    const float dAuxValue = 0.75f;
    DevIds dSlots(slots);
    Dev<T> ddGates(dGates), ddAux(std::vector<float>{dAuxValue});
    for (bool acc : {false, true}) {
      std::vector<float> want = rounded<T>(randn(tokens * experts, 13));
      Dev<T> got(want);
      moeRouteBackward(r, logits.data(), slots.data(), dGates.data(),
                       toFloat(fromFloat<T>(dAuxValue)), want.data(), acc);
      CUDA_OK(cu::moeRouteBackward(r, dLogits.get(), dSlots.get(),
                                   ddGates.get(), ddAux.get(), got.get(), acc,
                                   stream));
      EXPECT_LT(relNorm(got.download(), want), gradTol)
          << what << " acc=" << acc;
    }
  }
  cudaFree(dDropped);
  cudaFree(dLoads);
}
TEST_F(CudaKernel, MoeRouteFp32) { checkMoeRoute<float>(stream); }
TEST_F(CudaKernel, MoeRouteBf16) { checkMoeRoute<__nv_bfloat16>(stream); }

/// Dispatch, combine and the gates' gradient on slots that name tokens
/// several times, leave some empty, and (once) name a token out of range.
template <typename T> void checkMoeDispatchCombine(cudaStream_t stream) {
  const int64_t tokens = 97, slotCount = 6 * 40, hidden = 130;
  std::mt19937 g(3);
  std::vector<int32_t> slots(slotCount);
  for (int32_t &s : slots)
    s = g() % 5 == 0 ? -1 : int32_t(g() % tokens);
  const std::vector<float> x = rounded<T>(randn(tokens * hidden, 1));
  const std::vector<float> ye = rounded<T>(randn(slotCount * hidden, 2));
  const std::vector<float> gates = rounded<T>(randn(slotCount, 3));
  const std::vector<float> dy = rounded<T>(randn(tokens * hidden, 4));
  Dev<T> dx(x), dye(ye), dgates(gates), ddy(dy);
  DevIds dslots(slots);
  int64_t *bad = nullptr;
  CUDA_OK(cudaMalloc((void **)&bad, sizeof(int64_t)));
  const double tolerance = std::is_same_v<T, float> ? 1e-6 : 1e-2;

  for (bool scaled : {false, true}) {
    std::vector<float> want(slotCount * hidden);
    EXPECT_EQ(0, moeDispatch(x.data(), slots.data(),
                             scaled ? gates.data() : nullptr, want.data(),
                             slotCount, hidden, tokens));
    Dev<T> got(slotCount * hidden);
    CUDA_OK(cu::moeDispatch(dx.get(), dslots.get(),
                            scaled ? dgates.get() : nullptr, got.get(),
                            slotCount, hidden, tokens, bad, stream));
    EXPECT_EQ(readCount(bad, stream), 0);
    EXPECT_LT(relNorm(got.download(), want), tolerance) << scaled;
  }
  for (bool weighted : {false, true})
    for (bool acc : {false, true}) {
      std::vector<float> want = rounded<T>(randn(tokens * hidden, 5));
      Dev<T> got(want);
      EXPECT_EQ(0, moeCombine(ye.data(), slots.data(),
                              weighted ? gates.data() : nullptr, want.data(),
                              slotCount, hidden, tokens, acc));
      CUDA_OK(cu::moeCombine(dye.get(), dslots.get(),
                             weighted ? dgates.get() : nullptr, got.get(),
                             slotCount, hidden, tokens, acc, bad, stream));
      EXPECT_EQ(readCount(bad, stream), 0);
      EXPECT_LT(relNorm(got.download(), want), tolerance)
          << "weighted=" << weighted << " acc=" << acc;
    }
  for (bool acc : {false, true}) {
    std::vector<float> want = rounded<T>(randn(slotCount, 6));
    Dev<T> got(want);
    moeGatesGrad(ye.data(), slots.data(), dy.data(), want.data(), slotCount,
                 hidden, tokens, acc);
    CUDA_OK(cu::moeGatesGrad(dye.get(), dslots.get(), ddy.get(), got.get(),
                             slotCount, hidden, tokens, acc, stream));
    EXPECT_LT(relNorm(got.download(), want), tolerance) << "acc=" << acc;
  }

  // Bad slots are counted (and zeroed or skipped), as on the CPU.
  std::vector<int32_t> badSlots = slots;
  badSlots[3] = int32_t(tokens);
  badSlots[17] = -5;
  DevIds dbad(badSlots);
  std::vector<float> wantXe(slotCount * hidden), wantY(tokens * hidden);
  const int64_t wantBad = moeDispatch(x.data(), badSlots.data(), gates.data(),
                                      wantXe.data(), slotCount, hidden, tokens);
  EXPECT_EQ(wantBad, 2);
  Dev<T> gotXe(slotCount * hidden), gotY(tokens * hidden);
  CUDA_OK(cu::moeDispatch(dx.get(), dbad.get(), dgates.get(), gotXe.get(),
                          slotCount, hidden, tokens, bad, stream));
  EXPECT_EQ(readCount(bad, stream), wantBad);
  EXPECT_LT(relNorm(gotXe.download(), wantXe), tolerance);
  EXPECT_EQ(wantBad,
            moeCombine(ye.data(), badSlots.data(), gates.data(), wantY.data(),
                       slotCount, hidden, tokens, false));
  CUDA_OK(cu::moeCombine(dye.get(), dbad.get(), dgates.get(), gotY.get(),
                         slotCount, hidden, tokens, false, bad, stream));
  EXPECT_EQ(readCount(bad, stream), wantBad);
  EXPECT_LT(relNorm(gotY.download(), wantY), tolerance);
  cudaFree(bad);
}
TEST_F(CudaKernel, MoeDispatchCombineFp32) {
  checkMoeDispatchCombine<float>(stream);
}
TEST_F(CudaKernel, MoeDispatchCombineBf16) {
  checkMoeDispatchCombine<__nv_bfloat16>(stream);
}

/// Combine sums each token's slots in ascending slot order, as the CPU
/// does: fp32 results are the CPU's bits, and repeated runs agree.
TEST_F(CudaKernel, MoeCombineIsDeterministic) {
  const int64_t tokens = 64, slotCount = 2048, hidden = 96;
  std::vector<int32_t> slots(slotCount);
  for (int64_t s = 0; s < slotCount; ++s)
    slots[s] = int32_t((s * 37) % tokens); // 32 slots per token
  const std::vector<float> ye = randn(slotCount * hidden, 8);
  const std::vector<float> gates = randn(slotCount, 9);
  Dev<float> dye(ye), dgates(gates), y1(tokens * hidden), y2(tokens * hidden);
  DevIds dslots(slots);
  CUDA_OK(cu::moeCombine(dye.get(), dslots.get(), dgates.get(), y1.get(),
                         slotCount, hidden, tokens, false, nullptr, stream));
  CUDA_OK(cu::moeCombine(dye.get(), dslots.get(), dgates.get(), y2.get(),
                         slotCount, hidden, tokens, false, nullptr, stream));
  const std::vector<float> a = y1.download(), b = y2.download();
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  std::vector<float> want(tokens * hidden);
  moeCombine(ye.data(), slots.data(), gates.data(), want.data(), slotCount,
             hidden, tokens, false);
  EXPECT_LT(relNorm(a, want), 1e-6);
}

//===----------------------------------------------------------------------===//
// Optimizer, grad norm
//===----------------------------------------------------------------------===//

TEST_F(CudaKernel, AdamWMatchesCpu) {
  const int64_t n = 10007;
  AdamWConfig cfg;
  cfg.lr = 3e-3;
  cfg.weightDecay = 0.1;
  auto p = randn(n, 1), m = std::vector<float>(n, 0.0f), v = m;
  Dev<float> dp(p), dm(m), dv(v);
  Dev<__nv_bfloat16> dlow(n);
  for (int64_t step = 1; step <= 5; ++step) {
    auto g = randn(n, 100 + uint32_t(step));
    adamwStep(p.data(), g.data(), m.data(), v.data(), n, cfg, step, true);
    Dev<float> dg(g);
    CUDA_OK(cu::adamwStep(dp.get(), dg.get(), dm.get(), dv.get(), n, cfg, step,
                          true, 1.0f, dlow.get(), stream));
  }
  EXPECT_LT(relNorm(dp.download(), p), 1e-6);
  EXPECT_LT(relNorm(dm.download(), m), 1e-6);
  EXPECT_LT(relNorm(dv.download(), v), 1e-6);
  EXPECT_LT(relNorm(dlow.download(), p), 1e-2);

  // bf16 gradients, scaled by 1/1024 as after loss scaling.
  auto g = rounded<__nv_bfloat16>(randn(n, 200, 1024.0f));
  std::vector<float> unscaled = g;
  for (float &x : unscaled)
    x /= 1024.0f;
  adamwStep(p.data(), unscaled.data(), m.data(), v.data(), n, cfg, 6, false);
  Dev<__nv_bfloat16> dg(g);
  CUDA_OK(cu::adamwStep<__nv_bfloat16, __nv_bfloat16>(
      dp.get(), dg.get(), dm.get(), dv.get(), n, cfg, 6, false, 1.0f / 1024.0f,
      nullptr, stream));
  EXPECT_LT(relNorm(dp.download(), p), 1e-6);
}

TEST_F(CudaKernel, SgdMatchesCpu) {
  const int64_t n = 3001;
  for (bool nesterov : {false, true}) {
    SgdConfig cfg;
    cfg.lr = 0.05;
    cfg.weightDecay = 0.01;
    cfg.nesterov = nesterov;
    auto p = randn(n, 1), buf = std::vector<float>(n, 0.0f);
    Dev<float> dp(p), dbuf(buf);
    for (int step = 0; step < 3; ++step) {
      auto g = randn(n, 50 + uint32_t(step));
      sgdStep(p.data(), g.data(), buf.data(), n, cfg);
      Dev<float> dg(g);
      CUDA_OK(cu::sgdStep<float, __nv_bfloat16>(dp.get(), dg.get(), dbuf.get(),
                                                n, cfg, 1.0f, nullptr, stream));
    }
    EXPECT_LT(relNorm(dp.download(), p), 1e-6) << nesterov;
    EXPECT_LT(relNorm(dbuf.download(), buf), 1e-6) << nesterov;
  }
}

TEST_F(CudaKernel, GradNormAndClip) {
  std::vector<std::vector<float>> bufs = {randn(5000, 1), randn(4096, 2),
                                          randn(1, 3), randn(123457, 4)};
  std::vector<const float *> hostPtrs;
  std::vector<int64_t> sizes;
  std::vector<std::unique_ptr<Dev<float>>> devs;
  std::vector<float *> devPtrs;
  for (auto &b : bufs) {
    hostPtrs.push_back(b.data());
    sizes.push_back(int64_t(b.size()));
    devs.push_back(std::make_unique<Dev<float>>(b));
    devPtrs.push_back(devs.back()->get());
  }
  const double want = sumOfSquares(hostPtrs.data(), sizes.data(), 4);
  double *dSum = nullptr;
  CUDA_OK(cudaMalloc((void **)&dSum, sizeof(double)));
  CUDA_OK(
      cu::sumOfSquares<float>(devPtrs.data(), sizes.data(), 4, dSum, stream));
  double got = 0;
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaMemcpy(&got, dSum, sizeof(double), cudaMemcpyDeviceToHost));
  EXPECT_NEAR(got, want, 1e-12 * want);
  const double maxNorm = 1.0, coef = clipScale(std::sqrt(want), maxNorm);
  ASSERT_LT(coef, 1.0);
  CUDA_OK(cu::clipGradients<float>(devPtrs.data(), sizes.data(), 4, dSum, 1.0,
                                   maxNorm, stream));
  for (size_t b = 0; b < bufs.size(); ++b) {
    std::vector<float> w = bufs[b];
    for (float &x : w)
      x = float(x * float(coef));
    EXPECT_LT(relNorm(devs[b]->download(), w), 1e-6) << b;
  }
  // A non-finite gradient shows in the sum (the loss scaler's overflow).
  const float inf = INFINITY;
  CUDA_OK(cudaMemcpy(devPtrs[2], &inf, sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(
      cu::sumOfSquares<float>(devPtrs.data(), sizes.data(), 4, dSum, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaMemcpy(&got, dSum, sizeof(double), cudaMemcpyDeviceToHost));
  EXPECT_FALSE(std::isfinite(got));
  cudaFree(dSum);
}

// The multi-tensor launches (one grid over every buffer's blocks) with
// empty buffers first, between and last, a buffer of exactly one block and
// one of 148 small ones, as GPT-2's optimizer has: the sum and the clip of
// each buffer as the host computes them.
TEST_F(CudaKernel, GradNormAndClipManyBuffersWithEmptyOnes) {
  std::vector<int64_t> sizes = {0, 768, 0, 4096, 1};
  for (int i = 0; i < 148; ++i)
    sizes.push_back(i % 3 == 0 ? 768 : 3 + i);
  sizes.push_back(70000);
  sizes.push_back(0);
  const int count = int(sizes.size());
  std::vector<std::vector<float>> bufs;
  std::vector<const float *> hostPtrs;
  std::vector<std::unique_ptr<Dev<float>>> devs;
  std::vector<float *> devPtrs;
  for (int b = 0; b < count; ++b) {
    bufs.push_back(randn(sizes[size_t(b)], 100 + b));
    hostPtrs.push_back(bufs.back().data());
  }
  for (auto &b : bufs) {
    devs.push_back(std::make_unique<Dev<float>>(b));
    devPtrs.push_back(devs.back()->get());
  }
  const double want = sumOfSquares(hostPtrs.data(), sizes.data(), count);
  double *dSum = nullptr;
  CUDA_OK(cudaMalloc((void **)&dSum, sizeof(double)));
  CUDA_OK(cu::sumOfSquares<float>(devPtrs.data(), sizes.data(), count, dSum,
                                  stream));
  double got = 0;
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaMemcpy(&got, dSum, sizeof(double), cudaMemcpyDeviceToHost));
  EXPECT_NEAR(got, want, 1e-12 * want);
  const double maxNorm = 2.0, coef = clipScale(std::sqrt(want), maxNorm);
  ASSERT_LT(coef, 1.0);
  CUDA_OK(cu::clipGradients<float>(devPtrs.data(), sizes.data(), count, dSum,
                                   1.0, maxNorm, stream));
  for (int b = 0; b < count; ++b) {
    std::vector<float> w = bufs[size_t(b)];
    for (float &x : w)
      x = float(x * float(coef));
    EXPECT_EQ(relNorm(devs[size_t(b)]->download(), w), 0.0) << b;
  }
  cudaFree(dSum);
}
} // namespace

int main(int argc, char **argv) {
  return dsc::rt::test::runCudaTests(argc, argv, "CUDA kernel tests");
}
