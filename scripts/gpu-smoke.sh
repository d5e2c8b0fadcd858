#!/usr/bin/env bash
# First look on a GPU: correctness spot checks with fs-demo --check and a
# timing sweep of the two LM-head shapes.  Writes logs under ${OUT:-.}.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-.}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/smi.txt"
for args in "--shape D=64,V=1000 --batch 3" "--shape D=4096,V=151937 --batch 5 --temperature 0" \
            "--shape D=4096,V=151937 --batch 3" "--shape D=256,V=151937 --batch 300 --dtype fp16" \
            "--shape D=1024,V=151936 --batch 64 --temperature 2"; do
  echo "== fs-demo $args --check 1"
  FS_LOG=1 ./build/fs-demo $args --check 1 --iters 5 2>&1 | tail -8
done 2>&1 | tee "$out/check.log"
for shape in "D=4096,V=151936" "D=8192,V=128256"; do
  for b in 1 16 64 256; do
    echo "== $shape B=$b"
    ./build/fs-demo --shape $shape --batch $b --iters 50 2>&1 | grep -E "variant|us per call|floor"
  done
done 2>&1 | tee "$out/timing.log"
