#!/usr/bin/env bash
# A development pass on the H200 after kernel work, within ~10 minutes:
# fs-tune restricted to the family under work at the batch buckets where it
# should win (CSV report), fs-bench with those winners, sampling (T = 1) and
# greedy (T = 0: no noise, so the difference is what the noise costs), with
# NCU_B=<batch> ncu's stall reasons for that bucket's winner, then the GPU
# tests (TESTS=<regex>: only those).  Usage: scripts/gpu-dev.sh [FILTER] [BATCHES]
# (defaults _wg_ and 64,128,256; logs under ${OUT:-out}, at most 8 files)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
log=$out/dev.log
filter=${1:-_wg_}
batches=${2:-64,128,256}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$log"
db=/tmp/fs-dev.db; rm -f $db*
export FS_TUNING_DB=off
timeout 90 ./build/fs-tune --model qwen3-8b --db $db --batch "$batches" --filter "$filter" \
  --budget 70 --report "$out/tune-dev.csv" 2>&1 | tail -8 | tee -a "$log"
for t in 1 0; do
  FS_TUNING_DB=$db timeout 45 ./build/fs-bench --model qwen3-8b --batch "$batches" --reps 8 \
    --temperature $t --csv "$out/bench-dev-t$t.csv" 2>&1 | tee -a "$log" | tail -6
done
if [ -n "${NCU_B:-}" ]; then # one launch of the bucket's winner under ncu (stall reasons)
  # forced by name: with a database, fs_prepare may first launch kernels to
  # re-validate nearest-shape winners of smaller buckets, and ncu -c 1 would
  # profile one of those instead
  v=$(FS_TUNING_DB=$db ./build/fs-demo --model qwen3-8b --batch "$NCU_B" --iters 1 |
      sed -n 's/^variant: \(fsamp_[^ ]*\).*/\1/p')
  FS_VARIANT=$v timeout 70 ncu --clock-control none --section SpeedOfLight \
    --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    -k fsamp_main -c 1 ./build/fs-demo --model qwen3-8b --batch "$NCU_B" --iters 1 \
    > "$out/ncu-b$NCU_B.txt" 2>&1
fi
timeout 420 ctest --test-dir build -L gpu ${TESTS:+-R "$TESTS"} --output-on-failure -j1 \
  > "$out/gpu-tests.log" 2>&1
tail -24 "$out/gpu-tests.log" | tee -a "$log"
