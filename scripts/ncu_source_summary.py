#!/usr/bin/env python3
"""ncu_source_summary.py CSV...: where a wg kernel's warps wait, from ncu's
source page (`ncu --import R --page source --csv --print-source sass` of a
report with the SourceCounters section), one block per file: warp
instructions (generic ST.E / LD.E against STS / LDS), the share of stall
samples on BAR.SYNC, and the samples and instructions of three regions found
by address: the mainloop (the k-step bodies, from 60 lines before the first
HGMMA to 5 after the last), the producer (its per-k-step loop around its TMA
copies, and its try-wait spin) and the epilogue (everything else: staging,
noise, fold, tail); the consumers' waits for a stage's data (long_scoreboard samples on
the mainloop's branches after the full-barrier try-wait), and the epilogue's
long_scoreboard and lg_throttle samples (perf-notes 15a)."""
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXEC = "Instructions Executed"


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = next((i for i, r in enumerate(rows) if SAMPLES in r), None)
    if head is None:
        return None, []
    ix = {h: i for i, h in enumerate(rows[head])}
    return ix, [r for r in rows[head + 1:] if len(r) >= len(ix)]


def num(r, ix, key):
    return float(r[ix[key]] or 0) if key in ix else 0.0


def summary(path):
    ix, data = load(path)
    if ix is None:
        print(f"{path}: no source counters in it (ncu failed, or no SourceCounters section?)")
        return
    src = [r[ix["Source"]].strip() for r in data]
    hg = [k for k, s in enumerate(src) if "HGMMA" in s]
    if not hg:
        print(f"{path}: no HGMMA in the source page (not a wg kernel?)")
        return
    lo, hi = hg[0] - 60, hg[-1] + 5
    # the producer: its loop body, which runs as often as its TMA copies (once
    # per k-step), within 60 lines of them, and its try-wait spin placed after them
    tma = [k for k, s in enumerate(src) if "UTMALDG" in s]
    per_kstep = num(data[tma[0]], ix, EXEC) if tma else -1.0

    def producer(k, n, op):
        if not tma:
            return False
        near = min(abs(k - t) for t in tma) <= 60
        return (near and n == per_kstep) or ("SYNCS.PHASECHK" in op and k > tma[-1])
    tot = sum(num(r, ix, SAMPLES) for r in data) or 1.0
    toti = sum(num(r, ix, EXEC) for r in data) or 1.0
    agg, aggi = {}, {}
    waits = ep_lsb = ep_lg = bar = gen = shared = 0.0
    for k, r in enumerate(data):
        s, n, op = num(r, ix, SAMPLES), num(r, ix, EXEC), src[k]
        if lo <= k <= hi:
            g = "mainloop"
        elif producer(k, n, op):
            g = "producer"
        else:
            g = "epilogue"
        agg[g] = agg.get(g, 0.0) + s
        aggi[g] = aggi.get(g, 0.0) + n
        if g == "mainloop" and "BRA" in op:
            waits += num(r, ix, "stall_long_sb")
        if g == "epilogue":
            ep_lsb += num(r, ix, "stall_long_sb")
            ep_lg += num(r, ix, "stall_lg")
        if "BAR.SYNC" in op:
            bar += s
        if op.startswith(("ST.E", "LD.E")):
            gen += n
        elif op.startswith(("STS", "LDS")):
            shared += n
    consumers = tot - agg.get("producer", 0.0) or 1.0
    print(f"{path}: warp instructions {toti / 1e6:.1f} M (generic ST.E/LD.E {gen / 1e6:.2f} M, "
          f"STS/LDS {shared / 1e6:.2f} M); stall samples {int(tot)}; bar.sync share "
          f"{bar / tot * 100:.1f}%")
    print("   share of samples / instructions: " +
          ", ".join(f"{g} {agg[g] / tot * 100:.1f}% / {aggi[g] / toti * 100:.1f}%" for g in sorted(agg)))
    print(f"   data waits {waits / tot * 100:.1f}% of all samples ({waits / consumers * 100:.1f}% of "
          f"the consumers'); epilogue long_scoreboard {ep_lsb / tot * 100:.1f}%, lg_throttle "
          f"{ep_lg / tot * 100:.1f}%")


def main(paths):
    if not paths:
        print(__doc__)
        return 2
    for p in paths:
        summary(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
