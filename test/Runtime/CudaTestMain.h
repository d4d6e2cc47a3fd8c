//===- CudaTestMain.h - main() of the test binaries that need a GPU -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Without a CUDA device the binary says so and exits 77, which ctest's
// SKIP_RETURN_CODE reports as skipped rather than as a pass of tests that
// ran nothing. Listing the tests (ctest's discovery) works without one.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TEST_RUNTIME_CUDATESTMAIN_H
#define DSC_TEST_RUNTIME_CUDATESTMAIN_H

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>

namespace dsc::rt::test {

constexpr int kCudaSkipCode = 77;

inline int cudaDevicesVisible() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

/// The body of main(): `what` names the suite in the skip message.
inline int runCudaTests(int argc, char **argv, const char *what) {
  ::testing::InitGoogleTest(&argc, argv);
#ifdef GTEST_FLAG_GET
  const bool listing = GTEST_FLAG_GET(list_tests);
#else
  const bool listing = ::testing::GTEST_FLAG(list_tests);
#endif
  if (!listing && cudaDevicesVisible() == 0) {
    std::printf("no CUDA device: %s skipped\n", what);
    return kCudaSkipCode;
  }
  return RUN_ALL_TESTS();
}

} // namespace dsc::rt::test

#endif // DSC_TEST_RUNTIME_CUDATESTMAIN_H
