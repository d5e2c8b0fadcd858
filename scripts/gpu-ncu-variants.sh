#!/usr/bin/env bash
# ncu of forced variants, one launch each (clocks as found): for each case
# "variant:T" of CASES (the variant without its fsamp_<dtype>_sm90a_ prefix),
# fs-demo at MODEL (default qwen3-8b), B (default 256), temperature T, runs
# under ncu with the speed-of-light, memory, compute, warp-state, source and
# instruction sections.  $OUT/ncu-<variant>-t<T>.txt gets ncu's details page;
# the per-SASS-line source counters (stall samples by reason, instructions
# executed) come back as one src.tgz of CSVs (perf-notes 19a read them).
#   CASES="wt_v128_b256_k64_g2_s4_c1:0 wg_v128_b256_k64_g2_s4_c1_co_e64:0" \
#   OUT=dir bash scripts/gpu-ncu-variants.sh
set -uo pipefail
cd "$(dirname "$0")/.."
: "${CASES:?CASES=\"variant:T ...\" is required}"
out=${OUT:-out}; mkdir -p "$out"
export FS_TUNING_DB=off
csvs=()
for c in $CASES; do
  IFS=: read -r v t <<< "$c"
  tag=$v-t$t
  FS_VARIANT=fsamp_${DTYPE:-bf16}_sm90a_$v timeout 150 ncu --clock-control none -k fsamp_main \
    --launch-skip 3 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section ComputeWorkloadAnalysis --section WarpStateStats --section SourceCounters \
    --section InstructionStats -o "/tmp/n-$tag" \
    ./build/fs-demo --model "${MODEL:-qwen3-8b}" --batch "${B:-256}" --temperature "$t" --iters 5 \
    --check 0 > "/tmp/n-$tag.log" 2>&1
  ncu --import "/tmp/n-$tag.ncu-rep" --page details > "$out/ncu-$tag.txt" 2>&1
  ncu --import "/tmp/n-$tag.ncu-rep" --page source --csv --print-source sass > "/tmp/src-$tag.csv" 2>&1
  csvs+=("src-$tag.csv")
done
tar czf "$out/src.tgz" -C /tmp "${csvs[@]}"
grep -E "Duration|SM Frequency|Executed Instructions  " "$out"/ncu-*.txt
