#!/usr/bin/env bash
# Builds everything and runs the tests: `cpu` always; `gpu` tests skip (with
# their reason) where no GPU is usable.  Usage: scripts/test.sh [ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs" "$@"
