#!/usr/bin/env bash
# One full pass on the H200: GPU tests, then benchmarks (and, with TUNE=1,
# tuning of both LM-head shapes).  Everything is logged under ${OUT:-out}.
# Usage: scripts/gpu-full.sh [tests] [bench] [tune] [sweep]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
what=${*:-tests bench}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv | tee "$out/smi.txt"
for w in $what; do case $w in
  tests)
    ctest --test-dir build -L gpu --output-on-failure -j1 2>&1 | tee "$out/gpu-tests.log" | tail -40 ;;
  bench)
    for dt in bf16 fp16; do
      ./build/fs-bench --model qwen3-8b --dtype $dt --reps 20 --csv "$out/bench-qwen3-8b-$dt.csv"
      ./build/fs-bench --model llama3-70b --dtype $dt --reps 15 --csv "$out/bench-llama3-70b-$dt.csv"
    done 2>&1 | tee "$out/bench.log" ;;
  sweep)
    ./build/fs-bench --all-models --reps 10 --csv "$out/bench-sweep.csv" 2>&1 | tee "$out/sweep.log" ;;
  tune)
    for m in qwen3-8b llama3-70b; do
      ./build/fs-tune --model $m --db "$out/tuning.db" --budget ${TUNE_BUDGET:-120} \
        --report "$out/tune-$m.csv" 2>&1 | tail -25
    done 2>&1 | tee "$out/tune.log" ;;
esac; done
