#!/usr/bin/env bash
# Top logprobs' cost (perf-notes 42): fs-demo at MODEL (qwen3-8b), each the
# mean of ITERS (30) back-to-back calls, T = 1: the plain call (the fused
# kernel), the same with --top-logprobs N for N in TOPS (1 20 256), a top-k
# 50 call (the filters' path without lists) and top-k 50 with 20 top
# logprobs.  Writes $OUT/toplp-MODEL.txt, a table in microseconds.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
model=${MODEL:-qwen3-8b}; iters=${ITERS:-30}; tops=${TOPS:-1 20 256}
us() { # fs-demo's arguments: the call's microseconds, or "-"
  timeout 120 ./build/fs-demo --model "$model" --iters "$iters" --check 0 "$@" 2>&1 |
    awk '/us per call/ { for (i = 1; i <= NF; i++) if ($i == "us") print $(i - 1) }' | tail -1
}
{
  printf "| B | plain |"; for n in $tops; do printf " top %s |" "$n"; done
  echo " top-k 50 | top-k 50 + top 20 |"
  printf "|---:|---:|"; for n in $tops; do printf -- "---:|"; done; echo "---:|---:|"
  for b in ${BATCHES:-1 16 64 256}; do
    printf "| %s | %s |" "$b" "$(us --batch "$b")"
    for n in $tops; do printf " %s |" "$(us --batch "$b" --top-logprobs "$n")"; done
    printf " %s |" "$(us --batch "$b" --top-k 50)"
    echo " $(us --batch "$b" --top-k 50 --top-logprobs 20) |"
  done
} | tee "$out/toplp-$model.txt"
