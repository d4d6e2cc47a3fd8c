//===- SplitMix64.h - The counter-based RNG of the runtime ------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// splitmix64 and what is derived from it: the dropout streams' seeds, the
// dropout keep bit, the sampler's Feistel keys, the parameter streams. One
// definition for host and device code, because the CPU and CUDA masks and
// every rank's draws must agree bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_SPLITMIX64_H
#define DSC_RUNTIME_SPLITMIX64_H

#include <cstdint>

// Callable from CUDA kernels as well as from host code.
#if defined(__CUDACC__)
#define DSC_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define DSC_HOST_DEVICE inline
#endif

namespace dsc::rt {

/// splitmix64 (Steele, Lea, Flood 2014; Vigna's reference constants) as a
/// stateless finalizer: the generator's output for state `z` before its
/// increment. A bijection on 64 bits with full avalanche, so f(seed ^ i) or
/// f(key + i) is a counter-based stream: no state, any rank, thread or
/// backward pass recomputes the same draws.
constexpr DSC_HOST_DEVICE uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The seed of one dropout op's mask: fresh per (run seed, step,
/// micro-batch, the instruction's own seed), so the backward, run in the
/// same program, derives the forward's mask.
constexpr DSC_HOST_DEVICE uint64_t dropoutStreamSeed(uint64_t runSeed,
                                                     int64_t step,
                                                     int64_t microBatch,
                                                     int64_t instructionSeed) {
  return splitmix64(uint64_t(instructionSeed) ^
                    splitmix64(runSeed ^ splitmix64(uint64_t(step) * 1024 +
                                                    uint64_t(microBatch))));
}

/// The mask key of a dropout seed; element i's bit hashes key + i, so a
/// tensor split across ranks adds its offset to the key and reproduces the
/// unsplit mask.
constexpr DSC_HOST_DEVICE uint64_t dropoutKey(uint64_t seed) {
  return splitmix64(seed);
}

/// Keep iff the top 24 bits of the hash, read as a fraction in [0, 1), are
/// >= p; the threshold is an integer so hot loops have no float compare.
constexpr DSC_HOST_DEVICE uint64_t dropoutThreshold(float p) {
  const double t = double(p) * double(1u << 24);
  return t <= 0 ? 0 : (t >= double(1u << 24) ? (1u << 24) : uint64_t(t + 0.5));
}

/// The keep bit of element `index` under `key` = dropoutKey(seed).
constexpr DSC_HOST_DEVICE bool dropoutKeepBit(uint64_t key, uint64_t index,
                                              uint64_t threshold) {
  return (splitmix64(key + index) >> 40) >= threshold;
}

/// A uniform draw in [0, 1) (24 bits) for element `index` under `key` =
/// dropoutKey(seed): an MoE router's random token selection (MoeRoute's
/// drop policy `random`, element t * E + e), the same on every backend.
constexpr DSC_HOST_DEVICE float uniformDraw(uint64_t key, uint64_t index) {
  return float(splitmix64(key ^ splitmix64(index)) >> 40) * 0x1p-24f;
}

} // namespace dsc::rt

#endif // DSC_RUNTIME_SPLITMIX64_H
