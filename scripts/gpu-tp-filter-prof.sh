#!/usr/bin/env bash
# Where a tensor-parallel filtered call's time goes (one GPU, NCCL with one
# rank): ncu's duration of each kernel of the second fs_sample_nccl_ex call
# of fs-bench-tp --fused-only 1 (the logits' pass, fsamp_ftp_*, fsamp_finalize: seven
# launches), per
# CASES="B:--top-k,50 ..." (filters as fs-bench-tp flags joined by commas).
# MODEL (qwen3-8b).  Writes $OUT/tp-filter-prof.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
model=${MODEL:-qwen3-8b}
for c in ${CASES:-256:--top-p,0.9 256:--top-k,50 16:--top-p,0.9}; do
  IFS=: read -r b f <<< "$c"
  IFS=, read -r -a flags <<< "$f"
  echo "== B=$b $f"
  timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum \
    -k regex:fsamp --launch-skip 7 --launch-count 7 \
    ./build/fs-bench-tp --ranks 1 --model "$model" --batch "$b" --reps 1 --fused-only 1 \
      "${flags[@]}" 2>&1 \
    | grep -E "^  [a-z_0-9]+|gpu__time_duration" | sed -E 's/ +/ /g' | cut -c1-90
done 2>&1 | tee "$out/tp-filter-prof.txt"
