#!/usr/bin/env bash
# The logit bias's two paths side by side (perf-notes 41): fs-demo at MODEL
# (qwen3-8b) with N random entries a row and a repetition penalty of 1.3,
# through the fused kernel's path (FS_BIAS_SHORT=16384: a dot product an
# entry, bias.c) and the long lists' (FS_BIAS_SHORT=0: fsamp_bias_dedup and
# the filters' path), each the mean of ITERS (30) back-to-back calls, and
# without a bias, and the library's own choice.  The fused path is skipped
# where its O(count^2) search for repeats would take seconds a call
# (N x B > 4096 x 64).  Writes $OUT/bias-paths.txt, a table in microseconds.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
model=${MODEL:-qwen3-8b}; iters=${ITERS:-30}
us() { # env, then fs-demo's arguments: the call's microseconds, or "-"
  local e=$1; shift
  env $e timeout 120 ./build/fs-demo --model "$model" --iters "$iters" --check 0 "$@" 2>&1 |
    awk '/us per call/ { for (i = 1; i <= NF; i++) if ($i == "us") print $(i - 1) }' | tail -1
}
# COLS: which of "fused long default" to run (default: the library's own
# choice, fs_filter_path's cost model; no FS_BIAS_SHORT)
cols=${COLS:-fused long}
has() { [[ " $cols " == *" $1 "* ]]; }
{
  echo "| B | N | no bias | fused path | long path | long / fused | default |"
  echo "|---:|---:|---:|---:|---:|---:|---:|"
  for b in ${BATCHES:-1 16 64 256}; do
    base=$(us FS_BIAS_SHORT=1024 --batch "$b")
    for n in ${COUNTS:-64 256 512 1024 4096 16384}; do
      f=- l=- d=-
      has fused && [ $((n * b)) -le $((4096 * 64)) ] &&
        f=$(us FS_BIAS_SHORT=16384 --batch "$b" --logit-bias "$n" --repetition-penalty 1.3)
      has long && l=$(us FS_BIAS_SHORT=0 --batch "$b" --logit-bias "$n" --repetition-penalty 1.3)
      has default && d=$(us "" --batch "$b" --logit-bias "$n" --repetition-penalty 1.3)
      r=$(awk -v f="${f:--}" -v l="${l:--}" 'BEGIN { if (f + 0 > 0 && l + 0 > 0) printf "%.2f", l / f; else print "-" }')
      echo "| $b | $n | ${base:--} | ${f:--} | ${l:--} | $r | ${d:--} |"
    done
  done
} | tee "$out/bias-paths.txt"
