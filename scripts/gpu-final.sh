#!/usr/bin/env bash
# The session's last kernel pass on the H200: the GPU tests (TESTS=<regex>:
# only those, e.g. when a development pass already ran the rest on this very
# build; ~6 minutes for all of them), then tuning of both LM-head shapes
# (bf16, and Qwen3-8B in fp16; ~5 minutes), exported as the shipped defaults
# ($OUT/defaults.db: copy it to tuning-db/defaults/), then run
# scripts/gpu-bench.sh with them in a second call.  At most 8 files under $OUT.
# The whole suite and the tuning no longer fit one 10-minute device call:
# run TESTS=... here after a full pass in scripts/gpu-dev.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
log=$out/run.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv > "$log"
timeout 400 ctest --test-dir build -L gpu ${TESTS:+-R "$TESTS"} --output-on-failure -j1 \
  > "$out/gpu-tests.log" 2>&1
tail -14 "$out/gpu-tests.log"
db=/tmp/fs-final.db; rm -f $db*
export FS_TUNING_DB=off
timeout 150 ./build/fs-tune --model qwen3-8b --db $db --budget 110 \
  --report "$out/tune-qwen3-8b.csv" 2>&1 | tail -13 | tee -a "$log"
timeout 170 ./build/fs-tune --model llama3-70b --db $db --budget 130 \
  --report "$out/tune-llama3-70b.csv" 2>&1 | tail -13 | tee -a "$log"
timeout 100 ./build/fs-tune --model qwen3-8b --dtype fp16 --db $db --budget 60 \
  --report "$out/tune-qwen3-8b-fp16.csv" 2>&1 | tail -13 | tee -a "$log"
./build/fs-tune export "$out/defaults.db" --db $db 2>&1 | tail -2 | tee -a "$log"
