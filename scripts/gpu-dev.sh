#!/usr/bin/env bash
# A development pass on the H200 after kernel work, within ~9 minutes: the GPU
# tests, then fs-tune restricted to the family under work at the batch
# buckets where it should win (CSV report), then fs-bench with those winners.
# Usage: scripts/gpu-dev.sh   (logs under ${OUT:-out}, at most 8 files)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
log=$out/dev.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$log"
timeout 330 ctest --test-dir build -L gpu --output-on-failure -j1 > "$out/gpu-tests.log" 2>&1
tail -16 "$out/gpu-tests.log" | tee -a "$log"
db=/tmp/fs-dev.db; rm -f $db*
export FS_TUNING_DB=off
timeout 100 ./build/fs-tune --model qwen3-8b --db $db --batch 64,128,256 --filter _wg_ --budget 75 \
  --report "$out/wg.csv" 2>&1 | tail -8 | tee -a "$log"
FS_TUNING_DB=$db timeout 60 ./build/fs-bench --model qwen3-8b --batch 64,128,256 --reps 10 \
  --csv "$out/bench-dev.csv" 2>&1 | tee -a "$log" | tail -14
