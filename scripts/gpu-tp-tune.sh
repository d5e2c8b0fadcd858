#!/usr/bin/env bash
# Tensor-parallel shards tuned, then fs-bench-tp with and without them, on a
# host of 4 GPUs (~4 minutes): fs-tune of each rank's shard shape of Llama 3
# 70B and Qwen3-8B at 2 and 4 ranks (V/R rows; D=8192 V=64128, 32064 and
# D=4096 V=75968, 37984) at B = 16, 64, 256, one shape per GPU at a time,
# BUDGET seconds each (default 90), merged into $OUT/tp-tuned.db; then the
# tensor-parallel table at 2 and 4 ranks with the shipped defaults only and
# with the tuned shards (FS_TUNING_DB), into bench-tp-{shipped,tuned}.csv.
# NVLink multicast stays off.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
log=$out/tp-tune.log
ngpu=$(nvidia-smi -L | grep -c '^GPU')
shapes=("8192 64128" "8192 32064" "4096 75968" "4096 37984")
rm -f /tmp/fs-tp-*.db*
i=0
for s in "${shapes[@]}"; do
  read -r d v <<< "$s"
  dev=$(( i % ngpu ))
  FS_TUNING_DB=off timeout $(( ${BUDGET:-90} + 150 )) ./build/fs-tune --shape "D=$d,V=$v" \
    --batch 16,64,256 --budget "${BUDGET:-90}" --device "$dev" --jobs 16 \
    --db "/tmp/fs-tp-$i.db" > "$out/tune-$d-$v.log" 2>&1 &
  i=$(( i + 1 ))
  if [ $(( i % ngpu )) = 0 ]; then wait; fi
done
wait
tail -n 8 "$out"/tune-*.log >> "$log"
./build/fs-tune merge /tmp/fs-tp-*.db --db /tmp/fs-tp-merged.db >> "$log" 2>&1
./build/fs-tune export "$out/tp-tuned.db" --db /tmp/fs-tp-merged.db >> "$log" 2>&1
for db in shipped tuned; do
  tdb=off; [ $db = tuned ] && tdb=$out/tp-tuned.db
  for m in llama3-70b qwen3-8b; do
    for r in 2 4; do
      [ "$r" -le "$ngpu" ] || continue
      FS_TUNING_DB=$tdb FS_LOG=${FS_LOG_TP:-0} timeout 120 ./build/fs-bench-tp --ranks "$r" --model "$m" \
        --batch 16,64,256 --reps 50 --csv "$out/bench-tp-$db.csv" >> "$log" 2>&1
    done
  done
done
tar czf "$out/tune-logs.tgz" -C "$out" $(cd "$out" && ls tune-*.log) && rm -f "$out"/tune-*.log
cat "$out"/bench-tp-*.csv
