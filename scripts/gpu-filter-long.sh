#!/usr/bin/env bash
# fsamp_filter's long way (the passes over the row where the kept set does
# not fit in shared memory) between two builds: gpu-filter-ab.sh with the
# fs-demo in OLD (a directory holding an earlier build's) against build/'s,
# alternated call by call.  Its peaked rows gather (top-p 0.9, top-k 50 +
# top-p 0.9); at T = 20 the rows are flat and top-p overflows the gather;
# top-k above 512 has no bound to gather by (both the long way).  BATCHES
# (1 64 256), ROUNDS (1), MODEL (qwen3-8b).  Writes $OUT/filter-ab.txt with
# a table of medians.
set -uo pipefail
cd "$(dirname "$0")/.."
cases=""
for b in ${BATCHES:-1 64 256}; do
  for f in --top-p,0.9 --top-k,50,--top-p,0.9 --top-p,0.9,--temperature,20 \
           --top-k,1000,--temperature,20; do
    cases="$cases $b:$f"
  done
done
CONFIGS="old:BIN=${OLD:-build/old}/fs-demo;new:" CASES=$cases ROUNDS=${ROUNDS:-1} \
  exec bash scripts/gpu-filter-ab.sh
