#!/usr/bin/env bash
# The one-GPU filtered call through the ranks' path (FS_FILTER_RANKS=1,
# runtime/tp.c fs_sample_ranks: fsamp_ftp_* with a collective of one rank)
# against fsamp_filter: gpu_test_filter under it (every draw against the CPU
# reference), then fs-demo's time per call (its peaked rows, 300 calls back
# to back) for each of BATCHES (1 64 256) and filters, both ways.  MODEL
# (qwen3-8b).  Writes $OUT/filter-ranks.log.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"; out=$(cd "$out" && pwd)
log=$out/filter-ranks.log; : > "$log"
( cd build/tests && FS_FILTER_RANKS=1 FS_TEST_SOURCE_DIR=$PWD/../.. FS_TEST_BINARY_DIR=$PWD/.. \
    timeout 300 ./gpu_test_filter > "$out/test-filter-ranks.txt" 2>&1; echo "test_filter under FS_FILTER_RANKS=1: rc=$?" ) >> "$log"
grep -E "check\(s\) failed|all checks passed" "$out/test-filter-ranks.txt" >> "$log"
for b in ${BATCHES:-1 64 256}; do
  for f in "--top-k 50" "--top-p 0.9" "--top-k 50 --top-p 0.9"; do
    for r in 0 1; do
      t=$(FS_FILTER_RANKS=$r timeout 120 ./build/fs-demo --model "${MODEL:-qwen3-8b}" --batch "$b" $f \
            --iters 300 --check 0 2>&1 | sed -n 's/.*: \([0-9.]*\) us per call.*/\1/p')
      echo "fs-demo B=$b $f ranks=$r: ${t:-FAIL} us per call" >> "$log"
    done
  done
done
cat "$log"
