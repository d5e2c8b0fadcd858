#!/bin/bash
# gpu-tp-toplp-stress.sh OUTDIR [ROUNDS]: test_tp_toplp's cases run as three
# concurrent processes on one GPU, ROUNDS times (default 4), beside
# test_toplp, to catch what a lone run does not (perf-notes 51b): each
# process's output to OUTDIR/stress-R-P.out, a summary line a process.
set -u
out=${1:?usage: gpu-tp-toplp-stress.sh OUTDIR [ROUNDS]}
rounds=${2:-4}
bin=build/tests
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for p in 1 2 3; do
    (cd "$bin" && timeout 120 ./gpu_test_tp_toplp > "$out/stress-$r-$p.out" 2>&1;
     echo "round $r proc $p rc=$?") &
  done
  (cd "$bin" && timeout 120 ./gpu_test_toplp > "$out/stress-$r-toplp.out" 2>&1;
   echo "round $r test_toplp rc=$?") &
  wait
done
