#!/usr/bin/env bash
# gpu-ab.sh: same-machine A/B of fs-demo builds (perf-notes: "A/B" figures).
# Each build's fs-demo runs each case forced to one variant, the builds
# alternating within a case and the rounds repeating the whole list, so that
# the clock and power drift of the machine falls on all builds alike.
#
#   BINS="old=build-base/fs-demo new=build/fs-demo" \
#   CASES="qwen3-8b:256:1:wg_v128_b256_k64_g2_s4_c1_co_e64 ..." \
#   ROUNDS=2 ITERS=1000 DTYPE=bf16 OUT=dir bash scripts/gpu-ab.sh
#
# With BENCH=1 the builds' paths name fs-bench instead: each run prints its
# table row (fused, cuBLAS's matmul and the separate samplers on fs-bench's
# tensors, median of REPS=10 with L2 flushed), so the logits have fs-bench's
# spread (std ~1, fs-demo's ~21) and the mm column is the same run's.
#
# A case is model:batch:temperature:variant (the variant without its
# fsamp_<dtype>_sm90a_ prefix).  Prints one line per (round, case, build)
# and writes them to $OUT/ab.txt; the tuning database is off (FS_TUNING_DB=off),
# so only FS_VARIANT chooses the kernel.
set -euo pipefail
: "${BINS:?BINS=\"name=path ...\" is required}"
: "${CASES:?CASES=\"model:B:T:variant ...\" is required}"
ROUNDS=${ROUNDS:-2}
ITERS=${ITERS:-1000}
DTYPE=${DTYPE:-bf16}
OUT=${OUT:-.}
mkdir -p "$OUT"
log="$OUT/ab.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv | tee "$log"
for r in $(seq 1 "$ROUNDS"); do
  for c in $CASES; do
    IFS=: read -r model b t v <<<"$c"
    for nb in $BINS; do
      name=${nb%%=*} bin=${nb#*=}
      if [ "${BENCH:-0}" = 1 ]; then
        res=$(FS_TUNING_DB=off FS_VARIANT="fsamp_${DTYPE}_sm90a_$v" \
              "$bin" --model "$model" --batch "$b" --dtype "$DTYPE" --temperature "$t" \
              --reps "${REPS:-10}" 2>&1 | grep -E "^ *$b " || echo "FAILED")
      else
        res=$(FS_TUNING_DB=off FS_VARIANT="fsamp_${DTYPE}_sm90a_$v" \
              "$bin" --model "$model" --batch "$b" --dtype "$DTYPE" --temperature "$t" \
              --iters "$ITERS" --check 0 2>&1 | grep 'per call' || echo "FAILED")
      fi
      echo "round=$r model=$model B=$b T=$t $name $v :: $res" | tee -a "$log"
    done
  done
done
