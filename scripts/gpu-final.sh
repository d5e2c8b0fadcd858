#!/usr/bin/env bash
# The session's last pass on the H200, within a ~8-minute budget: GPU tests,
# tuning of both LM-head shapes (exported as the shipped defaults), and the
# benchmarks with those defaults.  At most 8 files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
log=$out/run.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv > "$log"
timeout 110 ctest --test-dir build -L gpu --output-on-failure -j1 > "$out/gpu-tests.log" 2>&1
tail -12 "$out/gpu-tests.log"
db=/tmp/fs-final.db; rm -f $db*
for m in qwen3-8b llama3-70b; do
  timeout 75 ./build/fs-tune --model $m --db $db --budget 55 2>&1 | tail -13
done 2>&1 | tee -a "$log"
./build/fs-tune export "$out/defaults.db" --db $db 2>&1 | tail -2 | tee -a "$log"
export FS_TUNING_DB=off FS_DEFAULTS_DB="$out/defaults.db"
timeout 70 ./build/fs-bench --model qwen3-8b --reps 10 --csv "$out/bench-qwen3-8b-bf16.csv" 2>&1 | tee -a "$log"
timeout 60 ./build/fs-bench --model llama3-70b --reps 8 --csv "$out/bench-llama3-70b-bf16.csv" 2>&1 | tee -a "$log"
timeout 45 ./build/fs-bench --model qwen3-8b --dtype fp16 --batch 1,16,64,256 --reps 8 \
  --csv "$out/bench-qwen3-8b-fp16.csv" 2>&1 | tee -a "$log"
timeout 90 ./build/fs-bench --all-models --reps 6 --csv "$out/bench-sweep.csv" 2>&1 | tee -a "$log" | tail -30
