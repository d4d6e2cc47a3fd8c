//===- CudaSupport.cuh - Helpers shared by the CUDA kernels -----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Private helpers for lib/Runtime/Cuda: fp32 load/store of any element type,
// warp and block reductions, the dropout mask (SplitMix64.h), instantiation
// macros.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_CUDA_CUDASUPPORT_CUH
#define DSC_LIB_RUNTIME_CUDA_CUDASUPPORT_CUH

#include "dsc/Runtime/CudaKernels.h"
#include "dsc/Runtime/SplitMix64.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

namespace dsc::rt::cuda::detail {

/// Every kernel computes in fp32; these are its only loads and stores.
__device__ __forceinline__ float toF(float x) { return x; }
__device__ __forceinline__ float toF(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float toF(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T fromF(float x);
template <> __device__ __forceinline__ float fromF<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 fromF(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half fromF(float x) {
  return __float2half_rn(x);
}

/// The overwrite-or-accumulate store of the CPU kernels (`put`).
template <typename T>
__device__ __forceinline__ void put(T *p, float v, bool acc) {
  *p = fromF<T>(acc ? toF(*p) + v : v);
}

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// Sum (or max) over a block of at most 1024 threads; every thread gets the
/// result. `shared` holds 32 floats. The order is fixed by the launch shape,
/// so results are reproducible.
template <bool IsMax>
__device__ __forceinline__ float blockReduce(float v, float *shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = IsMax ? warpMax(v) : warpSum(v);
  __syncthreads(); // shared may still be read by a previous reduction
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  float r = lane < warps ? shared[lane] : (IsMax ? -INFINITY : 0.0f);
  return IsMax ? warpMax(r) : warpSum(r);
}

/// The CPU's dropout mask, bit for bit: one definition in SplitMix64.h.
using ::dsc::rt::dropoutKeepBit;
using ::dsc::rt::dropoutKey;
using ::dsc::rt::dropoutThreshold;

/// Blocks for a grid-stride loop over n elements.
inline unsigned gridFor(int64_t n, int threads = 256) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1)
    b = 1;
  return unsigned(b > 65535 * 16 ? 65535 * 16 : b);
}

/// Memory-bound kernels move kPack consecutive elements per access: one or
/// two 16-byte loads instead of eight 2- or 4-byte ones (a bf16 residual
/// add ran at a quarter of the H200's bandwidth one element per thread).
constexpr int kPack = 8;
template <typename T> struct alignas(16) Pack { T v[kPack]; };

/// Whether every pointer allows packed access (16-byte aligned; the
/// arenas' buffers are, at 64 bytes): else the kernels go element by
/// element.
inline bool packable(std::initializer_list<const void *> ptrs) {
  for (const void *p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16)
      return false;
  return true;
}

template <typename T> __device__ __forceinline__ Pack<T> loadPack(const T *p) {
  Pack<T> r;
  const uint4 *s = reinterpret_cast<const uint4 *>(p);
  uint4 *d = reinterpret_cast<uint4 *>(&r);
#pragma unroll
  for (int k = 0; k < int(sizeof(Pack<T>) / 16); ++k)
    d[k] = s[k];
  return r;
}

template <typename T>
__device__ __forceinline__ void storePack(T *p, const Pack<T> &x) {
  uint4 *d = reinterpret_cast<uint4 *>(p);
  const uint4 *s = reinterpret_cast<const uint4 *>(&x);
#pragma unroll
  for (int k = 0; k < int(sizeof(Pack<T>) / 16); ++k)
    d[k] = s[k];
}

} // namespace dsc::rt::cuda::detail

/// A grid-stride loop of `i` over [0, n) (launch with gridFor(n) blocks).
#define GRID_STRIDE(i, n)                                                      \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);    \
       i += int64_t(gridDim.x) * blockDim.x)

/// A grid-stride loop over n elements, packed when `packed`: `pack(p)`
/// for each whole pack (elements p*kPack .. p*kPack + kPack - 1), then
/// `one(i)` for the tail; `one(i)` for every element otherwise. Launch with
/// gridFor(packed ? n / kPack : n) blocks.
#define GRID_STRIDE_PACKED(n, packed, pack, one)                               \
  do {                                                                         \
    const int64_t whole_ =                                                     \
        (packed) ? (n) / ::dsc::rt::cuda::detail::kPack : 0;                   \
    GRID_STRIDE(p_, whole_) { pack(p_); }                                      \
    const int64_t done_ = whole_ * ::dsc::rt::cuda::detail::kPack;             \
    GRID_STRIDE(i_, (n)-done_) { one(done_ + i_); }                            \
  } while (0)

#define DSC_CUDA_INSTANTIATE_ALL(MACRO)                                        \
  MACRO(float)                                                                 \
  MACRO(__nv_bfloat16)                                                         \
  MACRO(__half)

#endif // DSC_LIB_RUNTIME_CUDA_CUDASUPPORT_CUH
