#!/usr/bin/env python3
"""ab_summary.py AB.TXT...: the table of a gpu-ab.sh run (its ab.txt lines).

Per case (model, B, T, variant) and arm: the runs, their median in µs, min and
max, and the median against the first arm's (the baseline, as named first in
BINS).  Then, per arm, the median of its ratio to the other arms' median in
the same case and round, split by whether it ran first in that case (gpu-ab.sh
rotates the leading arm): a gap between the two columns is the order's effect
(perf-notes 26b), which a control arm (one binary under two names) measures.
A FAILED line is counted and left out."""
import re
import statistics
import sys
from collections import OrderedDict, defaultdict

LINE = re.compile(r"^round=(\d+) model=(\S+) B=(\d+) T=(\S+) (\w+) (\S+) :: (.*)$")
DEMO = re.compile(r": ([0-9.]+) us per call")


def us_of(result):
    """The fused call's µs: fs-demo's 'per call' figure, else fs-bench's row (B, fused, ...)."""
    m = DEMO.search(result)
    if m:
        return float(m.group(1))
    f = result.split()
    return float(f[1]) if len(f) > 1 and re.match(r"^[0-9.]+$", f[1]) else None


def main(paths):
    runs = []  # (round, case, arm, µs, position in its case and round)
    failed = 0
    for path in paths:
        pos = defaultdict(int)
        with open(path) as f:
            for line in f:
                m = LINE.match(line.strip())
                if not m:
                    continue
                rnd, model, b, t, arm, variant, result = m.groups()
                case = (path, model, int(b), t, variant)
                key = (case, rnd)
                us = None if result.startswith("FAILED") else us_of(result)
                if us is None:
                    failed += 1
                else:
                    runs.append((rnd, case, arm, us, pos[key]))
                pos[key] += 1
    if not runs:
        sys.exit("ab_summary.py: no timed lines in " + ", ".join(paths))
    by = OrderedDict()
    for rnd, case, arm, us, _ in runs:
        by.setdefault(case, OrderedDict()).setdefault(arm, []).append(us)
    print("| case | arm | runs | median µs | min–max | vs first arm |")
    print("|---|---|---|---|---|---|")
    for (path, model, b, t, variant), arms in by.items():
        base = statistics.median(next(iter(arms.values())))
        for arm, xs in arms.items():
            med = statistics.median(xs)
            print(f"| {model} B={b} T={t} {variant} | {arm} | {len(xs)} | {med:.1f} | "
                  f"{min(xs):.1f}–{max(xs):.1f} | {med / base - 1:+.2%} |")
    # the order: each run against the other arms' median of its case and round
    cell = defaultdict(list)
    for rnd, case, arm, us, p in runs:
        cell[(case, rnd)].append((arm, us, p))
    order = defaultdict(lambda: ([], []))
    for entries in cell.values():
        for arm, us, p in entries:
            others = [u for a, u, _ in entries if a != arm]
            if others:
                order[arm][0 if p == 0 else 1].append(us / statistics.median(others) - 1)
    print("\n| arm | vs the others when first (runs) | when not first (runs) |")
    print("|---|---|---|")
    for arm, (first, later) in order.items():
        f = f"{statistics.median(first):+.2%} ({len(first)})" if first else "–"
        l = f"{statistics.median(later):+.2%} ({len(later)})" if later else "–"
        print(f"| {arm} | {f} | {l} |")
    if failed:
        print(f"\n{failed} FAILED run(s) left out")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
