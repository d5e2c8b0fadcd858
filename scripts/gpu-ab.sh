#!/usr/bin/env bash
# gpu-ab.sh: same-machine A/B of fs-demo builds (perf-notes: "A/B" figures).
# Each build's fs-demo runs each case forced to one variant, the builds
# alternating within a case (each build first in turn, by round and case) and
# the rounds repeating the whole list, so that the clock and power
# drift of the machine falls on all builds alike.  A control arm (the same
# binary under two names) shows what is left of the order's effect.
#
#   BINS="old=build-base/fs-demo new=build/fs-demo" \
#   CASES="qwen3-8b:256:1:wg_v128_b256_k64_g2_s4_c1_co_e64 ..." \
#   ROUNDS=2 ITERS=1000 DTYPE=bf16 OUT=dir bash scripts/gpu-ab.sh
#
# With BENCH=1 the builds' paths name fs-bench instead: each run prints its
# table row (fused, cuBLAS's matmul and the separate samplers on fs-bench's
# tensors, median of REPS=10 with L2 flushed), so the logits have fs-bench's
# spread (std ~1, fs-demo's ~21) and the mm column is the same run's.
# NOISE=group16 runs every call with FS_NOISE_GROUP16 (--noise).
# MASK=<density> draws every fs-demo call through a token mask of that density
# (fs-demo --mask-density; fs-bench has no mask, so not with BENCH=1).
# ENV_<name>="VAR=value ..." runs build <name> with those variables set, so that
# two arms can be one binary, e.g. the exact pruning (perf-notes 22g):
#   BINS="prune=build/fs-bench noprune=build/fs-bench" ENV_noprune="FS_PRUNE=0" BENCH=1 ...
# ARGS_<name>="--opt value ..." gives build <name> more of the tool's arguments,
# e.g. logprobs on and off in one fs-demo: ARGS_on="--logprobs 1".
#
# A case is model:batch:temperature:variant (the variant without its
# fsamp_<dtype>_sm90a_ prefix; "-" runs the shipped default of the shape,
# tuning-db/defaults).  Prints one line per (round, case, build)
# and writes them to $OUT/ab.txt (scripts/ab_summary.py $OUT/ab.txt: the table, and
# each arm's lead when it ran first against when it did not); the tuning database is off (FS_TUNING_DB=off),
# so FS_VARIANT (or for "-" the shipped defaults) chooses the kernel.  $OUT (default: a new temporary
# directory) also gets ab-runs.log, every run's whole output.
set -euo pipefail
: "${BINS:?BINS=\"name=path ...\" is required}"
: "${CASES:?CASES=\"model:B:T:variant ...\" is required}"
ROUNDS=${ROUNDS:-2}
ITERS=${ITERS:-1000}
DTYPE=${DTYPE:-bf16}
OUT=${OUT:-$(mktemp -d /tmp/gpu-ab.XXXXXX)}
mkdir -p "$OUT"
log="$OUT/ab.txt"
runs="$OUT/ab-runs.log" # every run's whole output, for a FAILED line's reason
: > "$runs"
for nb in $BINS; do # check everything before the first round
  name=${nb%%=*} bin=${nb#*=}
  [ -x "$bin" ] || { echo "gpu-ab.sh: BINS: $nb: $bin is not an executable" >&2; exit 2; }
  [[ $name =~ ^[A-Za-z0-9_]+$ ]] || { echo "gpu-ab.sh: BINS: $nb: a name is letters, digits and _" >&2; exit 2; }
  envs=ENV_$name
  for a in ${!envs:-}; do
    [[ $a =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || { echo "gpu-ab.sh: $envs: '$a' is not VAR=value" >&2; exit 2; }
  done
done
[ -z "${MASK:-}" ] || [ "${BENCH:-0}" != 1 ] ||
  { echo "gpu-ab.sh: MASK=$MASK: fs-bench has no token mask; MASK is for fs-demo (BENCH=0)" >&2; exit 2; }
for c in $CASES; do
  IFS=: read -r model b t v <<<"$c"
  [ -n "$model" ] && [ -n "$b" ] && [ -n "$t" ] && [ -n "$v" ] ||
    { echo "gpu-ab.sh: CASES: '$c' is not model:batch:temperature:variant" >&2; exit 2; }
done
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv 2>&1 || echo "(nvidia-smi not available)"; } | tee "$log"
bins=(); for nb in $BINS; do bins+=("$nb"); done # split as the checks above
for r in $(seq 1 "$ROUNDS"); do
  ci=0
  for c in $CASES; do
    # Case ci of round r starts with arm (r - 1 + ci) mod n: each arm leads in
    # turn, so that the first arm of a case, which follows the previous case's
    # heavier or lighter call, is not always the same one (perf-notes 26b:
    # identical cubins read 8% apart when one arm always ran first).
    rot=$(( (r - 1 + ci) % ${#bins[@]} )); ci=$((ci + 1))
    order=("${bins[@]:rot}" "${bins[@]:0:rot}")
    IFS=: read -r model b t v <<<"$c"
    fv=""; [ "$v" = "-" ] || fv="fsamp_${DTYPE}_sm90a_$v" # empty: not forced
    for nb in "${order[@]}"; do
      name=${nb%%=*} bin=${nb#*=}
      envs=ENV_$name
      read -r -a arm_env <<<"${!envs:-}" # this arm's variables (ENV_<name>)
      argv=ARGS_$name
      read -r -a arm_args <<<"${!argv:-}" # this arm's further arguments (ARGS_<name>)
      rc=0
      if [ "${BENCH:-0}" = 1 ]; then
        out=$(env FS_TUNING_DB=off FS_VARIANT="$fv" "${arm_env[@]}" \
              "$bin" --model "$model" --batch "$b" --dtype "$DTYPE" --temperature "$t" \
              --reps "${REPS:-10}" ${NOISE:+--noise "$NOISE"} "${arm_args[@]}" 2>&1) || rc=$?
        res=$(grep -E "^ *$b +[0-9]" <<<"$out" | head -1 || true)
      else
        out=$(env FS_TUNING_DB=off FS_VARIANT="$fv" "${arm_env[@]}" \
              "$bin" --model "$model" --batch "$b" --dtype "$DTYPE" --temperature "$t" \
              --iters "$ITERS" --check 0 ${NOISE:+--noise "$NOISE"} \
              ${MASK:+--mask-density "$MASK"} "${arm_args[@]}" 2>&1) || rc=$?
        res=$(grep 'per call' <<<"$out" | head -1 || true)
      fi
      printf '== round=%s %s %s %s\n%s\n' "$r" "$c" "$name" "rc=$rc" "$out" >> "$runs"
      [ "$rc" = 0 ] && [ -n "$res" ] || res="FAILED (rc $rc; $runs)"
      echo "round=$r model=$model B=$b T=$t $name $v :: $res" | tee -a "$log"
    done
  done
done
