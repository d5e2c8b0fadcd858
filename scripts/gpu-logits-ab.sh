#!/usr/bin/env bash
# The calls that write their logits out (perf-notes 47): fs-demo's time per
# call (300 calls back to back, MODEL, default qwen3-8b) for each of ROUNDS
# (2) rounds alternating, at each of BATCHES (16 64 256):
#  - ranks beside top logprobs (N, default 20) counted by fsamp_toplp (the
#    default) and by fsamp_rank (FS_TOPLP_RANKS=0), top logprobs alone;
#  - the logits' L2 policy (runtime/filter.c's zout_keep) by its rule and
#    off (FS_ZOUT_KEEP=0), for top logprobs, top logprobs with ranks, ranks
#    alone and top-k 50 (at B = 256 the rule keeps nothing: those only once);
# then fs-demo --check 1 of top logprobs with ranks at B = 16 and 64 (each
# draw's rank against the reference); then (perf-notes 48a; TP=0 skips it)
# fs-bench-tp with one NCCL rank, without and with ranks (--draw-ranks),
# its one_us column the one-GPU call with the same options.  Writes
# $OUT/logits-ab.log.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"; out=$(cd "$out" && pwd)
log=$out/logits-ab.log; : > "$log"
n=${N:-20}
demo() { # env (a=b,c=d), label, fs-demo flags...
  local env=$1 label=$2; shift 2
  local t
  t=$(env ${env//,/ } timeout 120 ./build/fs-demo --model "${MODEL:-qwen3-8b}" --iters 300 \
        --check 0 "$@" 2>&1 | sed -n 's/.*: \([0-9.]*\) us per call.*/\1/p')
  echo "$label: ${t:-FAIL} us per call" >> "$log"
}
for r in $(seq 1 "${ROUNDS:-2}"); do
  for b in ${BATCHES:-16 64 256}; do
    keeps="rule off"; [ "$b" -ge 128 ] && keeps=rule
    for k in $keeps; do
      e=FS_ZOUT_KEEP=; [ "$k" = off ] && e=FS_ZOUT_KEEP=0
      demo "$e" "round=$r B=$b keep=$k top$n" --batch "$b" --top-logprobs "$n"
      demo "$e" "round=$r B=$b keep=$k top$n+ranks fused" --batch "$b" --top-logprobs "$n" --ranks 1
      [ "$k" = rule ] &&
        demo "$e,FS_TOPLP_RANKS=0" "round=$r B=$b keep=$k top$n+ranks fsamp_rank" --batch "$b" \
          --top-logprobs "$n" --ranks 1
      demo "$e" "round=$r B=$b keep=$k ranks" --batch "$b" --ranks 1
      [ "$b" -lt 128 ] && demo "$e" "round=$r B=$b keep=$k top-k 50" --batch "$b" --top-k 50
    done
  done
done
for b in 16 64; do
  echo "== fs-demo --check 1 --top-logprobs $n --ranks 1 B=$b" >> "$log"
  timeout 120 ./build/fs-demo --model "${MODEL:-qwen3-8b}" --batch "$b" --iters 20 --check 1 \
    --top-logprobs "$n" --ranks 1 2>&1 | grep -iE "rank|check|match|error" | head -8 >> "$log"
done
if [ "${TP:-1}" != 0 ] && [ -x ./build/fs-bench-tp ]; then
  for dr in 0 1; do
    echo "== fs-bench-tp --ranks 1 --draw-ranks $dr" >> "$log"
    timeout 300 ./build/fs-bench-tp --ranks 1 --model "${MODEL:-qwen3-8b}" --batch 1,16,64,256 \
      --reps 50 --draw-ranks "$dr" >> "$log" 2>&1
  done
fi
cat "$log"
