#!/usr/bin/env bash
#===- scripts/run-tests.sh - set up, build, and run every test ------------===#
#
# Runs the lit suite (IR tests) and the C++ unit tests through ctest.
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${DSC_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh" "$BUILD"
cd "$BUILD"
ctest --output-on-failure -j "$(nproc)" "$@"
