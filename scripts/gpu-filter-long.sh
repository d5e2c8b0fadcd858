#!/usr/bin/env bash
# fsamp_filter's long way (the passes over the row where the kept set does
# not fit in shared memory) between two builds: fs-demo's time per call
# (300 calls back to back, --check 0) with the binaries in OLD (a directory
# holding an earlier build's fs-demo) and in build/, alternated call by
# call.  CASES are fs-demo flags joined by commas: its peaked rows gather
# (top-k 50, top-p 0.9); at T = 20 the rows are flat and top-p overflows
# the gather; top-k above 512 has no bound to gather by (both the long
# way).  BATCHES (1 64 256), ROUNDS (1), MODEL (qwen3-8b).  Writes
# $OUT/filter-long.txt with a table of medians.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
old=${OLD:-build/old}
cases=${CASES:-"--top-p,0.9 --top-k,50,--top-p,0.9 --top-p,0.9,--temperature,20 --top-k,1000,--temperature,20"}
{
for round in $(seq "${ROUNDS:-1}"); do
  for b in ${BATCHES:-1 64 256}; do
    for c in $cases; do
      IFS=, read -r -a flags <<< "$c"
      for bin in "$old/fs-demo" ./build/fs-demo; do
        t=$(timeout 120 "$bin" --model "${MODEL:-qwen3-8b}" --batch "$b" "${flags[@]}" --iters 300 \
              --check 0 2>&1 | sed -n 's/.*: \([0-9.]*\) us per call.*/\1/p')
        echo "row round=$round B=$b case=$c bin=$bin us=${t:-FAIL}"
      done
    done
  done
done
} | tee "$out/filter-long.txt"
python3 - "$out/filter-long.txt" <<'PY' | tee -a "$out/filter-long.txt"
import sys, statistics, collections
d = collections.defaultdict(list); bins = []
for line in open(sys.argv[1]):
    if not line.startswith("row "): continue
    kv = dict(x.split("=", 1) for x in line.split()[1:])
    if kv["bin"] not in bins: bins.append(kv["bin"])
    if kv["us"] != "FAIL": d[(kv["B"], kv["case"], kv["bin"])].append(float(kv["us"]))
print("median us per call | " + " | ".join(bins))
for key in sorted({(k[0], k[1]) for k in d}, key=lambda k: (int(k[0]), k[1])):
    v = [d.get(key + (b,)) for b in bins]
    cells = ["%.1f" % statistics.median(x) if x else "-" for x in v]
    if v[0] and v[-1]:
        cells[-1] += " (%+.1f%%)" % (100 * (statistics.median(v[-1]) / statistics.median(v[0]) - 1))
    print("B=%s %s | %s" % (key[0], key[1], " | ".join(cells)))
PY
