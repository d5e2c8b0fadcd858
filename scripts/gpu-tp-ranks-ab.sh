#!/usr/bin/env bash
# The tensor-parallel calls' ranks through the fused pass (0.3.15) against
# the filters' path (FS_TP_RANKS_PASS=0) and against no ranks (perf-notes
# 50a): fs-bench-tp with one NCCL rank, MODEL (qwen3-8b) at BATCHES
# (1,16,64,256), ROUNDS (2) rounds alternating.  Its one_us column is the
# one-GPU call with the same options.  Writes $OUT/tp-ranks-ab.log.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"; out=$(cd "$out" && pwd)
log=$out/tp-ranks-ab.log; : > "$log"
export NCCL_NVLS_ENABLE=0
for r in $(seq 1 "${ROUNDS:-2}"); do
  for how in pass path none; do
    dr=1; env=FS_TP_RANKS_PASS=1
    [ "$how" = path ] && env=FS_TP_RANKS_PASS=0
    [ "$how" = none ] && dr=0
    echo "== round $r: $how (--draw-ranks $dr, $env)" >> "$log"
    env "$env" timeout 150 ./build/fs-bench-tp --ranks 1 --model "${MODEL:-qwen3-8b}" \
      --batch "${BATCHES:-1,16,64,256}" --reps 50 --draw-ranks "$dr" >> "$log" 2>&1
  done
done
cat "$log"
