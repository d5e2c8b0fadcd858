#!/usr/bin/env bash
# A/B of the filter kernel's build switches (runtime/filter.c's FS_FILTER_*
# measurement variables) by fs-demo's time per call, on one machine, the
# configurations alternated round by round.
#   CONFIGS="name:VAR=x,VAR=y;name2:..."  (an empty list of variables is the default;
#                                          BIN=path runs that fs-demo instead of build/'s)
#   CASES="B:filters ..."                 (filters as fs-demo flags joined by commas)
#   ROUNDS=2 MODEL=qwen3-8b OUT=out
# Prints one line per (round, case, configuration) and a table of medians;
# writes $OUT/filter-ab.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
configs=${CONFIGS:-"base:;minb2:FS_FILTER_MINB=2;pipe:FS_FILTER_PIPE=1"}
cases=${CASES:-"64:none 64:--top-k,50 64:--top-p,0.9 256:none 256:--top-k,50 256:--top-p,0.9"}
model=${MODEL:-qwen3-8b}
IFS=';' read -r -a cfgs <<< "$configs"
{
for round in $(seq "${ROUNDS:-2}"); do
  for c in $cases; do
    IFS=: read -r b f <<< "$c"
    flags=()
    [ "$f" != none ] && IFS=, read -r -a flags <<< "$f"
    for cfg in "${cfgs[@]}"; do
      name=${cfg%%:*} vars=${cfg#*:}
      envs=() bin=./build/fs-demo kv=()
      [ -n "$vars" ] && IFS=, read -r -a kv <<< "$vars"
      for x in "${kv[@]}"; do
        case $x in BIN=*) bin=${x#BIN=} ;; *) envs+=("$x") ;; esac
      done
      t=$(env "${envs[@]}" timeout 120 "$bin" --model "$model" --batch "$b" "${flags[@]}" \
            --iters 300 --check 0 2>&1 | sed -n 's/.*: \([0-9.]*\) us per call.*/\1/p')
      echo "row round=$round B=$b filters=$f config=$name us=${t:-FAIL}"
    done
  done
done
} | tee "$out/filter-ab.txt"
python3 - "$out/filter-ab.txt" <<'PY' | tee -a "$out/filter-ab.txt"
import sys, statistics, collections
d = collections.defaultdict(list); cfgs = []
for line in open(sys.argv[1]):
    if not line.startswith("row "): continue
    kv = dict(x.split("=", 1) for x in line.split()[1:])
    if kv["config"] not in cfgs: cfgs.append(kv["config"])
    if kv["us"] != "FAIL": d[(kv["B"], kv["filters"], kv["config"])].append(float(kv["us"]))
print("median us per call | " + " | ".join(cfgs))
for key in sorted({(k[0], k[1]) for k in d}, key=lambda k: (int(k[0]), k[1])):
    base = d.get(key + (cfgs[0],))
    cells = []
    for c in cfgs:
        v = d.get(key + (c,))
        if not v: cells.append("-"); continue
        m = statistics.median(v)
        cells.append("%.1f" % m + ("" if c == cfgs[0] or not base else " (%+.1f%%)" % (100 * (m / statistics.median(base) - 1))))
    print("B=%s %s | %s" % (key[0], key[1], " | ".join(cells)))
PY
