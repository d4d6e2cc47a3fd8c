#!/usr/bin/env bash
#===- scripts/setup.sh - install what is missing, configure, build --------===#
#
# Idempotent: installs Debian packages only when one is missing, configures
# only when there is no build tree, and lets ninja rebuild what changed.
# Usage: scripts/setup.sh [BUILD_DIR]   (default: build)
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-${DSC_BUILD_DIR:-$ROOT/build}}"

# Debian 12 packages: LLVM/MLIR 22 (bookworm-security), Open MPI, OpenBLAS,
# GoogleTest, numpy (the CUDA kernels' float64 mirrors), nlohmann/json (the
# checkpoint manifest and safetensors headers), xxHash (the checkpoint's
# checksums, in C++ and in the tests' Python reader), liburing (the NVMe
# tier's io_uring lane), ICU (the tokenizer's Unicode classes and NFC),
# cpp-httplib (dsc-serve's HTTP server), and
# the tools to build and test.
PACKAGES=(build-essential cmake ninja-build python3 ccache
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools libzstd-dev
  libopenmpi-dev openmpi-bin libopenblas-dev libgtest-dev python3-numpy
  nlohmann-json3-dev libxxhash-dev python3-xxhash liburing-dev libicu-dev
  libcpp-httplib-dev)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if ((${#missing[@]})); then
  echo "dsc setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "dsc setup: run as root or install sudo" >&2; exit 1; }
    SUDO="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ccache keys on the command line, which holds absolute include paths; a
# base dir makes them relative, so a fresh clone elsewhere reuses the cache.
export CCACHE_BASEDIR="$ROOT"

if [[ ! -f "$BUILD/build.ninja" ]]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
# Two cores on the reference machines; ninja picks the job count.
cmake --build "$BUILD"
