#!/usr/bin/env bash
# Where the B = 128 / 256 winners' warps wait (perf-notes 14d: is the
# staging's barrier a large share, or the noise's ALU work?): ncu's warp-state
# and scheduler sections of one launch of the shipped Qwen3-8B winner at
# B = 128 and 256, T = 1 and T = 0 (the same kernel without the noise), clocks
# left as found.  One text file per case under ${OUT:-out}; ~1-2 minutes.
# Then (SOURCE=0: not) ncu's source counters of B = 256 at T = 1 and 0, per
# SASS line, as CSV (source-b256.tgz) and summarised by region
# (scripts/ncu_source_summary.py: mainloop, epilogue, producer, data waits;
# perf-notes 15a) in source-summary.txt.  Run in the tenth session (call 1,
# the source step by hand: docs/data/ncu-s10-b256-source.txt).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
export FS_TUNING_DB=off
# the per-reason stall shares: the sections' text pages give only their totals
stalls=""
for r in barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle \
         lg_throttle not_selected selected dispatch_stall branch_resolving no_instruction \
         membar sleeping; do
  stalls+="${stalls:+,}smsp__warp_issue_stalled_${r}_per_warp_active.pct"
done
for b in 128 256; do
  for t in 1 0; do
    timeout 120 ncu --clock-control none -k fsamp_main --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats --metrics "$stalls" \
      ./build/fs-demo --model qwen3-8b --batch $b --temperature $t --iters 5 --check 0 \
      > "$out/ncu-stalls-qwen3-8b-b$b-t$t.txt" 2>&1
    grep -E "variant:|stalled_|Warp Cycles|Eligible|Issue Slots|Duration|rror" "$out/ncu-stalls-qwen3-8b-b$b-t$t.txt" |
      sed "s/^/B=$b T=$t: /"
  done
done
[ "${SOURCE:-1}" = 0 ] && exit 0
: > "$out/source-summary.txt"
for t in 1 0; do
  rm -f "/tmp/fs-src-t$t.ncu-rep"
  timeout 120 ncu --clock-control none -k fsamp_main --launch-skip 3 --launch-count 1 \
    --section SourceCounters --section InstructionStats --section SpeedOfLight -o "/tmp/fs-src-t$t" \
    ./build/fs-demo --model qwen3-8b --batch 256 --temperature $t --iters 5 --check 0 \
    > "/tmp/fs-src-t$t.log" 2>&1
  ncu --import "/tmp/fs-src-t$t.ncu-rep" --page source --csv --print-source sass \
    > "/tmp/source-b256-t$t.csv" 2>&1
  ncu --import "/tmp/fs-src-t$t.ncu-rep" --page details 2>&1 | grep -E "Duration|SM Frequency" |
    sed "s/^/B=256 T=$t: /" >> "$out/source-summary.txt"
done
python3 scripts/ncu_source_summary.py /tmp/source-b256-t1.csv /tmp/source-b256-t0.csv \
  >> "$out/source-summary.txt" 2>&1
tar czf "$out/source-b256.tgz" -C /tmp source-b256-t1.csv source-b256-t0.csv
cat "$out/source-summary.txt"
