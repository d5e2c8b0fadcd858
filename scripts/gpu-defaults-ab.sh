#!/usr/bin/env bash
# gpu-defaults-ab.sh: same-machine A/B of two shipped-defaults databases
# through fs_sample itself (no FS_VARIANT): fs-bench's table rows of each
# model at each batch, the databases alternating within a case and the
# rounds repeating the list, so that drift falls on both alike.
#
#   DBS="old=/tmp/old.db new=tuning-db/defaults/defaults.db" \
#   MODELS="qwen3-8b llama3-70b" BATCH=128,256 \
#   CALLS="t0 g16" ROUNDS=2 OUT=dir bash scripts/gpu-defaults-ab.sh
#
# A call kind is t1 (sampled, per-token noise), t0 (greedy, temperature 0)
# or g16 (sampled, FS_NOISE_GROUP16).  The user's tuning database is off,
# so each row's kernel is the named database's winner for that call (the
# row names it).  Lines go to $OUT/ab.txt, whole outputs to $OUT/ab-runs.log.
set -euo pipefail
: "${DBS:?DBS=\"name=path ...\" is required}"
MODELS=${MODELS:-qwen3-8b llama3-70b}
BATCH=${BATCH:-128,256}
CALLS=${CALLS:-t1 t0 g16}
ROUNDS=${ROUNDS:-2}
OUT=${OUT:-$(mktemp -d /tmp/gpu-defaults-ab.XXXXXX)}
mkdir -p "$OUT"
log="$OUT/ab.txt"
runs="$OUT/ab-runs.log"
: > "$log"
: > "$runs"
for nd in $DBS; do
  [ -f "${nd#*=}" ] || { echo "gpu-defaults-ab.sh: DBS: $nd: no such file" >&2; exit 2; }
done
for c in $CALLS; do
  case $c in t1|t0|g16) ;; *) echo "gpu-defaults-ab.sh: CALLS: '$c' is not t1, t0 or g16" >&2; exit 2 ;; esac
done
export FS_TUNING_DB=off
unset FS_VARIANT
for ((r = 1; r <= ROUNDS; r++)); do
  for model in $MODELS; do
    for c in $CALLS; do
      case $c in
        t1) args=(--temperature 1) ;;
        t0) args=(--temperature 0) ;;
        g16) args=(--temperature 1 --noise group16) ;;
      esac
      for nd in $DBS; do
        name=${nd%%=*}
        out=$(FS_DEFAULTS_DB=${nd#*=} ./build/fs-bench --model "$model" --batch "$BATCH" \
              --reps 10 "${args[@]}" 2>&1) || true
        printf '%s\n' "$out" >> "$runs"
        # the table's rows: they start with the batch size
        grep -E '^ *[0-9]+ ' <<< "$out" | sed "s/^/round=$r model=$model call=$c db=$name :: /" |
          tee -a "$log"
      done
    done
  done
done
