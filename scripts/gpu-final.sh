#!/usr/bin/env bash
# The session's last kernel pass on the H200 (~8 minutes): the GPU tests, then
# tuning of both LM-head shapes (bf16, and Qwen3-8B in fp16), exported as the
# shipped defaults
# ($OUT/defaults.db: copy it to tuning-db/defaults/), then run
# scripts/gpu-bench.sh with them in a second call.  At most 8 files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
log=$out/run.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv > "$log"
timeout 300 ctest --test-dir build -L gpu --output-on-failure -j1 > "$out/gpu-tests.log" 2>&1
tail -14 "$out/gpu-tests.log"
db=/tmp/fs-final.db; rm -f $db*
export FS_TUNING_DB=off
for m in qwen3-8b llama3-70b; do
  timeout 95 ./build/fs-tune --model $m --db $db --budget 65 --report "$out/tune-$m.csv" 2>&1 | tail -13
done 2>&1 | tee -a "$log"
timeout 60 ./build/fs-tune --model qwen3-8b --dtype fp16 --db $db --budget 40 \
  --report "$out/tune-qwen3-8b-fp16.csv" 2>&1 | tail -13 | tee -a "$log"
./build/fs-tune export "$out/defaults.db" --db $db 2>&1 | tail -2 | tee -a "$log"
