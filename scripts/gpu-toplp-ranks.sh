#!/usr/bin/env bash
# Ranks beside top logprobs (perf-notes 47a): fs-demo's time per call (300
# calls back to back, MODEL, default qwen3-8b) at each of BATCHES (1 16 64
# 256), ROUNDS (2) rounds alternating: plain, --top-logprobs N (20), with
# --ranks 1 counted by fsamp_toplp (the default) and by fsamp_rank
# (FS_TOPLP_RANKS=0), and --ranks 1 alone; then fs-demo --check 1 of the
# fused way at B = 16 and 64 (every draw's rank against the reference).
# Writes $OUT/toplp-ranks.log.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"; out=$(cd "$out" && pwd)
log=$out/toplp-ranks.log; : > "$log"
n=${N:-20}
demo() { # env, label, fs-demo flags...
  local env=$1 label=$2; shift 2
  local t
  t=$(env $env timeout 120 ./build/fs-demo --model "${MODEL:-qwen3-8b}" --iters 300 --check 0 "$@" \
        2>&1 | sed -n 's/.*: \([0-9.]*\) us per call.*/\1/p')
  echo "$label: ${t:-FAIL} us per call" >> "$log"
}
for r in $(seq 1 "${ROUNDS:-2}"); do
  for b in ${BATCHES:-1 16 64 256}; do
    demo "FS_TOPLP_RANKS=4" "round=$r B=$b plain" --batch "$b"
    demo "FS_TOPLP_RANKS=4" "round=$r B=$b top$n" --batch "$b" --top-logprobs "$n"
    demo "FS_TOPLP_RANKS=4" "round=$r B=$b top$n+ranks fused" --batch "$b" --top-logprobs "$n" --ranks 1
    demo "FS_TOPLP_RANKS=0" "round=$r B=$b top$n+ranks fsamp_rank" --batch "$b" --top-logprobs "$n" --ranks 1
    demo "FS_TOPLP_RANKS=4" "round=$r B=$b ranks" --batch "$b" --ranks 1
  done
done
for b in 16 64; do
  echo "== fs-demo --check 1 --top-logprobs $n --ranks 1 B=$b" >> "$log"
  timeout 120 ./build/fs-demo --model "${MODEL:-qwen3-8b}" --batch "$b" --iters 20 --check 1 \
    --top-logprobs "$n" --ranks 1 2>&1 | grep -iE "rank|check|match|error" | head -8 >> "$log"
done
cat "$log"
