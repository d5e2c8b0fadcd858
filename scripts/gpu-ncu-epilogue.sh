#!/usr/bin/env bash
# ncu's source counters (per SASS line: stall samples by reason, executed
# instructions) of one launch of the shipped Qwen3-8B winner for each case
# CASES="B:T:noise ..." (default: B = 256 greedy, B = 256 and 128 with
# FS_NOISE_GROUP16), clocks as found; the CSVs come back as one
# source-epilogue.tgz under ${OUT:-out}, with the region summary of
# scripts/ncu_source_summary.py in source-summary.txt (perf-notes 18).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
export FS_TUNING_DB=off
cases=${CASES:-"256:0:token 256:1:group16 128:1:group16"}
csvs=()
: > "$out/source-summary.txt"
for c in $cases; do
  IFS=: read -r b t n <<< "$c"
  tag=b$b-t$t-$n
  rm -f "/tmp/fs-src-$tag.ncu-rep"
  timeout 150 ncu --clock-control none -k fsamp_main --launch-skip 3 --launch-count 1 \
    --section SourceCounters --section InstructionStats --section SpeedOfLight -o "/tmp/fs-src-$tag" \
    ./build/fs-demo --model qwen3-8b --batch "$b" --temperature "$t" --noise "$n" --iters 5 \
    --check 0 > "/tmp/fs-src-$tag.log" 2>&1
  ncu --import "/tmp/fs-src-$tag.ncu-rep" --page source --csv --print-source sass \
    > "/tmp/source-$tag.csv" 2>&1
  ncu --import "/tmp/fs-src-$tag.ncu-rep" --page details 2>&1 | grep -E "Duration|SM Frequency" |
    sed "s/^/$tag: /" >> "$out/source-summary.txt"
  csvs+=("source-$tag.csv")
done
(cd /tmp && python3 "$OLDPWD/scripts/ncu_source_summary.py" "${csvs[@]}") >> "$out/source-summary.txt" 2>&1
tar czf "$out/source-epilogue.tgz" -C /tmp "${csvs[@]}"
cat "$out/source-summary.txt"
