#!/usr/bin/env bash
# Builds everything and runs the tests: `cpu` always; `gpu` tests skip (with
# their reason, printed at the end) where no GPU is usable.
# Usage: scripts/test.sh [ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs"
rc=0
ctest --test-dir build --output-on-failure -j "$jobs" "$@" || rc=$?
# ctest does not show a skipped test's output: print the reasons.
log=build/Testing/Temporary/LastTest.log
if [ -f "$log" ] && grep -q '^SKIPPED' "$log"; then
  echo "Skipped tests said:"
  grep -h '^SKIPPED' "$log" | sort | uniq -c
fi
exit $rc
