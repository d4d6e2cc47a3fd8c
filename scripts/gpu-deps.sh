#!/usr/bin/env bash
#===- scripts/gpu-deps.sh - what the GPU machine lacks, copied from here ----===#
#
# Part of the dsc project: a declarative graph compiler for parallel training.
#
# The lent GPU machine has CUDA, CMake, ninja and a C++ compiler but no
# package registry and none of the runtime's other dependencies. This copies
# them from this (Debian 12) machine into <repo>/.gpudeps, laid out as a
# prefix (include/, lib/x86_64-linux-gnu/, share/cmake/) that
# scripts/gpu-check.sh hands to CMake and the loader: OpenBLAS (its shared
# library with libgfortran and libquadmath, which it needs), nlohmann_json,
# xxhash and GTest/GMock. NCCL is not copied (218 MB): the GPU machine's
# PyTorch ships it, and gpu-check.sh finds it there.
#
# Usage: scripts/gpu-deps.sh   (then carry `.gpudeps` to the device run)
#
#===------------------------------------------------------------------------===#
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPS=$ROOT/.gpudeps
MA=x86_64-linux-gnu
rm -rf "$DEPS"
mkdir -p "$DEPS/include/$MA" "$DEPS/lib/$MA/cmake" "$DEPS/share/cmake"

# OpenBLAS: the real shared object under the names the linker and the
# loader look for, and the Fortran runtime it was linked against.
BLAS=$(readlink -f /usr/lib/$MA/libopenblas.so.0)
cp "$BLAS" "$DEPS/lib/$MA/libopenblas.so.0"
ln -s libopenblas.so.0 "$DEPS/lib/$MA/libopenblas.so"
cp -L /usr/lib/$MA/libgfortran.so.5 /usr/lib/$MA/libquadmath.so.0 \
  "$DEPS/lib/$MA/"
cp -rL /usr/include/$MA/openblas-pthread "$DEPS/include/$MA/"

# Binaries built here and carried (gpu-check.sh's DSC_GPU_PREBUILT) also
# load OpenMP's runtime and liburing; copied in case the machine lacks them.
cp -L /usr/lib/$MA/libgomp.so.1 /usr/lib/$MA/liburing.so.2 "$DEPS/lib/$MA/"

# nlohmann_json (header-only, CMake package) and xxhash (static).
cp -r /usr/include/nlohmann "$DEPS/include/"
cp -r /usr/share/cmake/nlohmann_json "$DEPS/share/cmake/"
cp /usr/include/xxhash.h "$DEPS/include/"
cp /usr/lib/$MA/libxxhash.a "$DEPS/lib/$MA/"

# GTest and GMock: static libraries and their CMake package.
cp -r /usr/include/gtest /usr/include/gmock "$DEPS/include/"
cp /usr/lib/$MA/libgtest*.a /usr/lib/$MA/libgmock*.a "$DEPS/lib/$MA/"
cp -r /usr/lib/$MA/cmake/GTest "$DEPS/lib/$MA/cmake/"

du -sh "$DEPS"
