#!/usr/bin/env bash
# Filters in the tensor-parallel calls on one GPU (fsamp_filter.cu's
# fsamp_ftp_*, runtime/filter.c's fs_filter_tp):
#  1. compute-sanitizer (TOOLS: memcheck racecheck synccheck, at once) over
#     gpu_test_tp_filter (ranks as threads on GPU 0; every draw checked
#     against the unsharded call; racecheck on RACE_CASES=0,6 only, whole it
#     ran past 400 s);
#  2. fs-bench-tp --ranks 1 (NCCL on one GPU): the fused call unfiltered,
#     with top-k 50, top-p 0.9 and both, at BATCHES;
#     (its one_us column: the one-GPU call, fs_sample_ex, on the same data);
#  3. with DEMO=1 (the default), fs-demo (one GPU, fs_sample_ex) with the
#     same filters on its peaked logits (another harness: back-to-back calls).
# MODEL (qwen3-8b), BATCHES (1,16,64,256), REPS (50).  Writes $OUT/tp-filter.log;
# exits 1 if a sanitizer run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"; out=$(cd "$out" && pwd)
log=$out/tp-filter.log; : > "$log"
model=${MODEL:-qwen3-8b} batches=${BATCHES:-1,16,64,256}
bad=0
for tool in ${TOOLS:-memcheck racecheck synccheck}; do
  cases=""; [ "$tool" = racecheck ] && cases=${RACE_CASES:-0,6} # racecheck: two cases
  ( cd build/tests && FS_TEST_CASES=$cases FS_TEST_SOURCE_DIR=$PWD/../.. FS_TEST_BINARY_DIR=$PWD/.. timeout 400 \
      compute-sanitizer --tool "$tool" --error-exitcode 99 ./gpu_test_tp_filter \
      > "$out/san-$tool.txt" 2>&1; echo "sanitize $tool rc=$?" >> "$out/san-rc.txt" ) &
done
wait
cat "$out/san-rc.txt" >> "$log"
for t in ${TOOLS:-memcheck racecheck synccheck}; do
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|check\(s\) failed|passed" "$out/san-$t.txt" | tail -3 \
    | sed "s/^/$t: /" >> "$log"
done
grep -q "rc=[1-9]" "$out/san-rc.txt" && bad=1
for f in "0 1" "50 1" "0 0.9" "50 0.9"; do
  set -- $f
  timeout 300 ./build/fs-bench-tp --ranks 1 --model "$model" --batch "$batches" \
    --reps "${REPS:-50}" --top-k "$1" --top-p "$2" --csv "$out/tp-filter.csv" 2>&1 | tee -a "$log"
done
[ "${DEMO:-1}" = 1 ] && for b in ${batches//,/ }; do
  for f in "" "--top-k 50" "--top-p 0.9" "--top-k 50 --top-p 0.9"; do
    t=$(timeout 120 ./build/fs-demo --model "$model" --batch "$b" $f --iters 300 --check 0 2>&1 \
          | sed -n 's/.*: \([0-9.]*\) us per call.*/\1/p')
    echo "fs-demo B=$b ${f:-unfiltered}: ${t:-FAIL} us per call" | tee -a "$log"
  done
done
exit $bad
