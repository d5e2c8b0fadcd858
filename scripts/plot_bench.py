#!/usr/bin/env python3
"""plot_bench.py CSV OUT.svg [GROUP16_CSV]: time against batch size for the
fused kernel, cuBLAS's matmul alone, mm + Gumbel, mm + multinomial and the
HBM floor, one panel per (model, dtype) in fs-bench's CSV; with GROUP16_CSV
(fs-bench --noise group16 rows of the same shapes) also the fused kernel with
FS_NOISE_GROUP16.  Plain SVG, no dependencies."""
import csv
import math
import sys
from collections import defaultdict

SERIES = [("fused_us", "fused (fs_sample)", "#d62728"), ("mm_us", "cuBLAS mm only", "#1f77b4"),
          ("mm_gumbel_us", "mm + Gumbel-max", "#2ca02c"),
          ("mm_multinomial_us", "mm + softmax/CDF", "#9467bd"), ("floor_us", "HBM floor", "#7f7f7f"),
          ("group16_us", "fused, FS_NOISE_GROUP16", "#ff7f0e")]


def main(src, dst, group16=None):
    panels = defaultdict(list)
    with open(src) as f:
        for row in csv.DictReader(f):
            row["group16_us"] = "0"
            panels[(row["model"], row["dtype"])].append(row)
    if group16:
        with open(group16) as f:
            g = {(r["model"], r["dtype"], r["B"]): r["fused_us"] for r in csv.DictReader(f)}
        for key, data in panels.items():
            for row in data:
                row["group16_us"] = g.get((key[0], key[1], row["B"]), "0")
    series = [x for x in SERIES if group16 or x[0] != "group16_us"]
    W, H, PAD = 460, 300, 55
    cols = 2
    rows = (len(panels) + cols - 1) // cols
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{cols * W}" height="{rows * H + 56}" '
           'font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>']
    for i, ((model, dtype), data) in enumerate(sorted(panels.items())):
        ox, oy = (i % cols) * W, (i // cols) * H
        data.sort(key=lambda r: int(r["B"]))
        bs = [int(r["B"]) for r in data]
        ys = [float(r[k]) for r in data for k, _, _ in series if float(r[k]) > 0]
        ymin, ymax = 0.0, max(ys) * 1.05
        bx0, bx1 = math.log2(min(bs)), math.log2(max(bs)) if max(bs) > min(bs) else 1

        def px(b):
            return ox + PAD + (math.log2(b) - bx0) / max(bx1 - bx0, 1e-9) * (W - 2 * PAD)

        def py(y):
            return oy + H - PAD + 10 - (y - ymin) / (ymax - ymin) * (H - 2 * PAD)
        out.append(f'<text x="{ox + W / 2}" y="{oy + 18}" text-anchor="middle" font-size="13">'
                   f'{model} ({data[0]["D"]} x {data[0]["V"]}, {dtype})</text>')
        out.append(f'<line x1="{ox + PAD}" y1="{py(0)}" x2="{ox + W - PAD}" y2="{py(0)}" stroke="black"/>')
        out.append(f'<line x1="{ox + PAD}" y1="{py(0)}" x2="{ox + PAD}" y2="{py(ymax)}" stroke="black"/>')
        for b in bs:
            out.append(f'<text x="{px(b)}" y="{py(0) + 14}" text-anchor="middle">{b}</text>')
        for t in range(5):
            y = ymax * t / 4
            out.append(f'<text x="{ox + PAD - 4}" y="{py(y) + 4}" text-anchor="end">{y:.0f}</text>')
        out.append(f'<text x="{ox + W / 2}" y="{py(0) + 28}" text-anchor="middle">batch size B</text>')
        out.append(f'<text x="{ox + 12}" y="{oy + H / 2}" transform="rotate(-90 {ox + 12} {oy + H / 2})" '
                   'text-anchor="middle">µs (median)</text>')
        for k, label, color in series:
            pts = [(px(int(r["B"])), py(float(r[k]))) for r in data if float(r[k]) > 0]
            if pts:
                d = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
                dash = ' stroke-dasharray="4,3"' if k == "floor_us" else ""
                out.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
    for j, (_, label, color) in enumerate(series):  # legend: rows of three
        x, y = 20 + (j % 3) * 200, rows * H + 15 + (j // 3) * 16
        out.append(f'<rect x="{x}" y="{y}" width="14" height="4" fill="{color}"/>')
        out.append(f'<text x="{x + 18}" y="{y + 6}">{label}</text>')
    out.append("</svg>")
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        sys.exit(2)
    main(*sys.argv[1:])
