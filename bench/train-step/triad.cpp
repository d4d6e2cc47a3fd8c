//===- bench/train-step/triad.cpp - STREAM-like triad bandwidth ----------===//
//
// a[i] = b[i] + s * c[i] over three float arrays far larger than any cache
// (default 3 x 256 MiB), best of REPS repetitions, for each thread count on
// the command line (default: 1 and omp_get_max_threads()). Bytes are counted
// as STREAM counts them: 3 x 4 bytes per element (two reads, one write; the
// write-allocate read is not counted), the same accounting that
// kernel-classes.py applies to the step's kernels. A report, not a test.
//
// Build: g++ -O3 -march=native -fopenmp triad.cpp -o triad
// Usage: triad [--mib M] [--reps R] [THREADS...]
// Prints one line per thread count:  triad threads=T GB/s=X
//
//===----------------------------------------------------------------------===//
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char **argv) {
  long mib = 256;
  int reps = 30;
  std::vector<int> threads;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mib") && i + 1 < argc)
      mib = std::atol(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else
      threads.push_back(std::atoi(argv[i]));
  }
  if (threads.empty()) {
    threads.push_back(1);
    if (omp_get_max_threads() > 1)
      threads.push_back(omp_get_max_threads());
  }
  const long n = mib * (1L << 20) / long(sizeof(float));
  float *a = static_cast<float *>(std::aligned_alloc(64, n * sizeof(float)));
  float *b = static_cast<float *>(std::aligned_alloc(64, n * sizeof(float)));
  float *c = static_cast<float *>(std::aligned_alloc(64, n * sizeof(float)));
  if (!a || !b || !c) {
    std::fprintf(stderr, "triad: cannot allocate 3 x %ld MiB\n", mib);
    return 1;
  }
  const int maxThreads = *std::max_element(threads.begin(), threads.end());
  // First touch with the most threads, as the step's arena is touched.
#pragma omp parallel for schedule(static) num_threads(maxThreads)
  for (long i = 0; i < n; ++i) {
    a[i] = 0.0f;
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  const float s = 3.0f;
  for (int t : threads) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static) num_threads(t)
      for (long i = 0; i < n; ++i)
        a[i] = b[i] + s * c[i];
      auto t1 = std::chrono::steady_clock::now();
      best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
    }
    double gbs = 3.0 * double(n) * sizeof(float) / best / 1e9;
    std::printf("triad threads=%d GB/s=%.2f  (best of %d, 3 x %ld MiB, "
                "check %.1f)\n",
                t, gbs, reps, mib, double(a[n / 2]));
  }
  std::free(a);
  std::free(b);
  std::free(c);
  return 0;
}
