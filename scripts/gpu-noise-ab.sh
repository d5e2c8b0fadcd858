#!/usr/bin/env bash
# gpu-noise-ab.sh: FS_NOISE_TOKEN against FS_NOISE_GROUP16 on one machine
# (perf-notes 18).  For each round and case, fs-bench's table row with
# --noise token, then with --noise group16 (the two alternating, so that the
# card's clock and power drift falls on both), each the median of REPS runs
# with L2 flushed; the shipped defaults choose the kernel (FS_DEFAULTS_DB
# may name another export, e.g. a re-measure of this call).
#
#   CASES="qwen3-8b:1,64,128,256 llama3-70b:128,256" ROUNDS=2 REPS=10 \
#   TEMPERATURE=1 OUT=dir bash scripts/gpu-noise-ab.sh
#
# Prints and appends to $OUT/noise-ab.txt one line per (round, case, batch,
# noise): the row's fused, mm, mm+gumbel and mm+multinomial microseconds.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CASES:?CASES=\"model:B[,B...] ...\" is required}"
ROUNDS=${ROUNDS:-2}; REPS=${REPS:-10}; T=${TEMPERATURE:-1}
OUT=${OUT:-$(mktemp -d /tmp/gpu-noise-ab.XXXXXX)}
mkdir -p "$OUT"
log=$OUT/noise-ab.txt
export FS_TUNING_DB=off
echo "# round case B noise fused_us mm_us mm_gumbel_us mm_multinomial_us variant (T=$T, reps $REPS)" >> "$log"
for r in $(seq 1 "$ROUNDS"); do
  for c in $CASES; do
    model=${c%%:*}; batches=${c#*:}
    for n in token group16; do
      timeout 300 ./build/fs-bench --model "$model" --batch "$batches" --reps "$REPS" \
        --temperature "$T" --noise "$n" 2>&1 |
        awk -v r="$r" -v m="$model" -v n="$n" \
          '$1 ~ /^[0-9]+$/ && NF >= 10 { print r, m, $1, n, $2, $3, $4, $5, $10 }' |
        tee -a "$log"
    done
  done
done
