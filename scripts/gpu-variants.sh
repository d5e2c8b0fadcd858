#!/usr/bin/env bash
# Spot checks of named variants on a GPU: fs-demo --check with FS_VARIANT
# forced, each under a timeout (a hung kernel is reported, not waited on).
# Usage: scripts/gpu-variants.sh "ARGS" VARIANT...   (logs to ${OUT:-.})
set -uo pipefail
cd "$(dirname "$0")/.."
args=$1; shift
for v in "$@"; do
  echo "== $v $args"
  FS_VARIANT=$v timeout 120 ./build/fs-demo $args --check 1 --iters 20 2>&1 |
    grep -E "variant:|us per call|floor|check|fs-demo|error" || echo "(exit ${PIPESTATUS[0]})"
done
