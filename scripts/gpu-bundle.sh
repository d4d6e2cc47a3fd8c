#!/usr/bin/env bash
#===- scripts/gpu-bundle.sh - the device check's binaries, built here -------===#
#
# Part of the dsc project: a declarative graph compiler for parallel training.
#
# Builds the CUDA test and bench binaries on this machine (same CUDA as the
# lent GPU machine: 13.0) in a runtime-only tree at /tmp/dsc-gpu-build, and
# packs them with the shared libraries the GPU machine lacks (.gpudeps, from
# scripts/gpu-deps.sh) into <repo>/.gpucarry/bundle.tar.xz, small enough to
# carry (the device tool carries 64 MiB with the working tree).
#
# On the GPU machine (the binaries read test inputs by this checkout's
# absolute path, so the checkout is linked there under the same path):
#   mkdir -p "$(dirname <this checkout>)"; ln -sfn "$PWD" <this checkout>
#   mkdir -p /tmp/dsc-gpu-build && tar -xJf .gpucarry/bundle.tar.xz -C /tmp/dsc-gpu-build
#   LD_LIBRARY_PATH=/tmp/dsc-gpu-build/deps DSC_GPU_PREBUILT=1 \
#     DSC_GPU_BUILD=/tmp/dsc-gpu-build scripts/gpu-check.sh
#
#===------------------------------------------------------------------------===#
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${DSC_GPU_BUILD:-/tmp/dsc-gpu-build}
MA=x86_64-linux-gnu
[[ -d $ROOT/.gpudeps ]] || "$ROOT/scripts/gpu-deps.sh"
export LD_LIBRARY_PATH=$ROOT/.gpudeps/lib/$MA
cmake -G Ninja -S "$ROOT/bench/cuda" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$ROOT/.gpudeps" \
  >"$BUILD.configure.log"
ninja -C "$BUILD" dsc-bench-cuda-gpt2 dsc-bench-cuda-executor \
  DscCudaKernelTests DscNcclCommunicatorTests DscCudaBackendTests

STAGE=$(mktemp -d)
mkdir -p "$STAGE/bin" "$STAGE/deps"
cp "$BUILD"/bin/{dsc-bench-cuda-gpt2,dsc-bench-cuda-executor} "$STAGE/bin/"
cp "$BUILD"/bin/{DscCudaKernelTests,DscNcclCommunicatorTests} "$STAGE/bin/"
cp "$BUILD"/bin/DscCudaBackendTests "$STAGE/bin/"
strip "$STAGE"/bin/*
cp -P "$ROOT"/.gpudeps/lib/$MA/*.so* "$STAGE/deps/"
mkdir -p "$ROOT/.gpucarry"
tar -cJf "$ROOT/.gpucarry/bundle.tar.xz" -C "$STAGE" .
rm -rf "$STAGE"
ls -la "$ROOT/.gpucarry/bundle.tar.xz"
