#!/usr/bin/env bash
# The benchmarks of docs/benchmarks.md on the H200 (~4 minutes), with the
# shipped defaults only (no user tuning database): both LM-head shapes in
# bf16 at every bucket, Qwen3-8B in fp16 and greedy (T = 0: no noise, so
# the difference to T = 1 is what the noise costs), and every model preset
# at B = 1, 8, 64, 256 (SWEEP=0: not; SWEEP=only: the sweep alone;
# SWEEP_BATCH=<list>: the sweep at those batches instead, e.g. 1,8 after
# re-tuning those buckets).  CSV and the log under ${OUT:-out}.
# FLUSH=write times after a 256 MiB memset instead of a 256 MiB read (the
# tables before perf-notes 13a; fs-bench's header says what each costs).
# NOISE=group16 times the fused calls with FS_NOISE_GROUP16 (files get a
# -group16 suffix; the greedy table is skipped: T = 0 is the same).
# On a host of 2+ GPUs it also runs fs-bench-tp (the tensor-parallel table:
# Llama 3 70B and Qwen3-8B at B = 16, 64, 256 for 1, 2, 4, 8 ranks, as many
# as there are GPUs; NVLink multicast off) into bench-tp.csv; TP=0: not,
# TP=only: that table alone.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
sfx=; [ "${FLUSH:-read}" = write ] && sfx=-writeflush # a write-flush run keeps the read run's files
[ "${NOISE:-token}" = group16 ] && sfx=$sfx-group16
log=$out/bench$sfx.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv > "$log"
export FS_TUNING_DB=off
flush=(--flush "${FLUSH:-read}" --noise "${NOISE:-token}")
sweep_batch=(); sweep_s=100 # 10 presets x 4 batches
if [ -n "${SWEEP_BATCH:-}" ]; then
  sweep_batch=(--batch "$SWEEP_BATCH"); sweep_s=$(( 25 * ($(tr -cd , <<< "$SWEEP_BATCH" | wc -c) + 1) + 10 ))
fi
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${TP:-1}" != 0 ] && [ "${ngpu:-0}" -ge 2 ]; then
  export NCCL_NVLS_ENABLE=0
  for m in llama3-70b qwen3-8b; do
    for r in 1 2 4 8; do
      [ "$r" -le "$ngpu" ] || continue
      timeout 120 ./build/fs-bench-tp --ranks "$r" --model "$m" --batch 16,64,256 --reps 50 \
        --csv "$out/bench-tp.csv" 2>&1 | tee -a "$log"
    done
  done
fi
[ "${TP:-1}" = only ] && exit 0
if [ "${SWEEP:-1}" != only ]; then
timeout 80 ./build/fs-bench "${flush[@]}" --model qwen3-8b --reps 10 --csv "$out/bench-qwen3-8b-bf16$sfx.csv" 2>&1 | tee -a "$log"
timeout 80 ./build/fs-bench "${flush[@]}" --model llama3-70b --reps 8 --csv "$out/bench-llama3-70b-bf16$sfx.csv" 2>&1 | tee -a "$log"
timeout 45 ./build/fs-bench "${flush[@]}" --model qwen3-8b --dtype fp16 --batch 1,16,64,256 --reps 8 \
  --csv "$out/bench-qwen3-8b-fp16$sfx.csv" 2>&1 | tee -a "$log"
[ "${NOISE:-token}" = group16 ] ||
timeout 50 ./build/fs-bench "${flush[@]}" --model qwen3-8b --batch 1,16,64,128,256 --temperature 0 --reps 8 \
  --csv "$out/bench-qwen3-8b-greedy$sfx.csv" 2>&1 | tee -a "$log"
fi
[ "${SWEEP:-1}" = 0 ] || timeout $sweep_s ./build/fs-bench "${flush[@]}" --all-models "${sweep_batch[@]}" --reps 6 \
  --csv "$out/bench-sweep$sfx.csv" 2>&1 | tee -a "$log" | tail -30
