#!/usr/bin/env bash
# Where a filtered call's time goes (perf-notes 35): fs-demo's time per call
# for each case of CASES="B:filters ..." (filters as fs-demo flags joined by
# commas, "none" for none), then ncu's duration, instructions and DRAM bytes
# of the logits' pass (fsamp_main) and of the filter kernels (fsamp_filter*)
# of a few launches, clocks as found.  Output under ${OUT:-out}.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
cases=${CASES:-"1:none 1:--top-k,50 1:--min-p,0.1 1:--top-p,0.9 64:--top-k,50 256:none 256:--top-k,50 256:--top-p,0.9"}
model=${MODEL:-qwen3-8b}
m=gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread
for c in $cases; do
  IFS=: read -r b f <<< "$c"
  flags=()
  [ "$f" != none ] && IFS=, read -r -a flags <<< "$f"
  echo "=== B=$b filters: $f"
  timeout 120 ./build/fs-demo --model "$model" --batch "$b" "${flags[@]}" --iters 200 --check 1 2>&1 |
    grep -E "per call|check|filters|variant" | head -6
  timeout 150 ncu --clock-control none -k regex:'fsamp_main|fsamp_filter' --launch-skip 8 \
    --launch-count ${NLAUNCH:-4} --metrics "$m" --csv ./build/fs-demo --model "$model" --batch "$b" \
    "${flags[@]}" --iters 12 --check 0 2>/dev/null | grep '^"' | python3 -c '
import csv, sys
rows = {}
for r in csv.DictReader(sys.stdin):
    rows.setdefault(r["ID"], {"k": r["Kernel Name"]})[r["Metric Name"]] = r["Metric Value"]
for i, r in rows.items():
    print("  %-14s " % r.pop("k")[:14] + " ".join("%s=%s" % (k.split("__")[1][:22], v) for k, v in sorted(r.items())))
'
done 2>&1 | tee "$out/filter-prof.txt"
# the filter kernel's stall reasons at B = 1 and 256 (top-k 50)
for b in ${DETAIL-1 256}; do
  echo "=== detail B=$b --top-k 50"
  timeout 150 ncu --clock-control none -k regex:fsamp_filter --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    --section MemoryWorkloadAnalysis ./build/fs-demo --model "$model" --batch "$b" --top-k 50 \
    --iters 6 --check 0 2>&1 | grep -vE '^==PROF==|^ *-+ *$' | grep -E '[0-9]' | head -70
done 2>&1 | tee -a "$out/filter-prof.txt"
