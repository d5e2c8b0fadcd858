#!/usr/bin/env python3
"""bench_tables.py CSV...: the Markdown tables of docs/benchmarks.md from
fs-bench CSV files (one table per (model, dtype) in the order met, each row's
fused / floor from its own floor; the sweep files, with --sweep, as one table
with one row per model of fused / mm at each B, where a (model, B) cell of a
later file replaces an earlier file's)."""
import csv
import sys
from collections import OrderedDict


def rows_of(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def short(variant):
    return variant.replace("fsamp_", "", 1)


def table(rows):
    r0 = rows[0]
    floor = float(r0["floor_us"])
    other = [r["B"] for r in rows if r["floor_us"] != r0["floor_us"]]
    more = (f" Rows B = {', '.join(other)} come from another run (their own probe and floor, "
            f"used for their fused / floor)." if other else "")
    print(f"{r0['model']}: D={r0['D']}, V={r0['V']}, {r0['dtype']}; floor {floor:.1f} µs "
          f"(W bytes / {float(r0['read_TBps']):.2f} TB/s, the in-binary probe of this run).{more} "
          f"Host cost of one `fs_sample` call: {min(float(r['host_us']) for r in rows):.2f}–"
          f"{max(float(r['host_us']) for r in rows):.2f} µs.\n")
    print("| B | fused | cuBLAS mm | mm + Gumbel | mm + softmax/CDF | fused / floor | fused / mm "
          "| (mm + Gumbel) / fused | variant (how chosen) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        f, mm, g, m = (float(r[k]) for k in ("fused_us", "mm_us", "mm_gumbel_us",
                                                "mm_multinomial_us"))
        print(f"| {r['B']} | {f:.1f} | {mm:.1f} | {g:.1f} | {m:.1f} | {f / float(r['floor_us']):.3f} | "
              f"{f / mm:.3f} | {g / f:.2f} | {short(r['variant'])} |")
    print()


def sweep(rows):
    by = OrderedDict()
    for r in rows:
        if r["dtype"] == "bf16":
            by.setdefault((r["model"], r["D"], r["V"]), OrderedDict())[int(r["B"])] = r
    bs = sorted({b for v in by.values() for b in v})
    print("| model | D | V | " + " | ".join(f"B={b}" for b in bs) + " | fused/mm at "
          + ", ".join(str(b) for b in bs) + " |")
    print("|---|---:|---:|" + "---:|" * len(bs) + "---|")
    for (m, d, v), cells in by.items():
        c = [cells.get(b) for b in bs]
        txt = [f"{float(x['fused_us']):.1f} / {float(x['mm_us']):.1f}" if x else "" for x in c]
        rat = [f"{float(x['fused_us']) / float(x['mm_us']):.3f}" if x else "" for x in c]
        print(f"| {m} | {d} | {v} | " + " | ".join(txt) + " | " + ", ".join(rat) + " |")
    print()


def main(args):
    if args and args[0] == "--sweep":
        # several files: one table, a later file's cell replacing an earlier one's
        sweep([r for p in args[1:] for r in rows_of(p)])
        return
    for p in args:
        groups = OrderedDict()
        for r in rows_of(p):
            groups.setdefault((r["model"], r["dtype"]), []).append(r)
        for rows in groups.values():
            table(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
