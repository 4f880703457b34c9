#!/usr/bin/env python3
"""Draw a GPU's lanes (upload, compute, download) from traces, as SVG.

usage: gpu_lanes.py FROM_MS TO_MS TITLE TRACE.csv RUN [TITLE TRACE.csv RUN ...] > out.svg

Each (TITLE, TRACE.csv, RUN) is one panel: the spans of the run's GPU unit
(any unit other than cpu* and storage) between FROM_MS and TO_MS, one lane
per kind of span. The traces are those of `pathology -hardware -out DIR`
(trace.csv) or a simulator replay in the same columns. Only the standard
library.
"""
import csv, sys

LANES = [("up", "upload", "#4c78a8"), ("compute", "compute", "#f58518"), ("down", "download", "#54a24b")]


def spans(path, run, t0, t1):
    out = {k: [] for k, _, _ in LANES}
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["run"] != run or r["unit"].startswith("cpu") or r["unit"] == "storage":
                continue
            a, b = float(r["start_ms"]), float(r["end_ms"])
            if r["what"] in out and b > t0 and a < t1:
                out[r["what"]].append((max(a, t0), min(b, t1)))
    return out


def main(argv):
    if len(argv) < 6 or (len(argv) - 3) % 3:
        sys.exit(__doc__)
    t0, t1 = float(argv[1]), float(argv[2])
    panels = [argv[i:i + 3] for i in range(3, len(argv), 3)]
    W, left, lane, gap, top = 760, 80, 16, 4, 24
    ph = top + len(LANES) * (lane + gap) + 18
    H = ph * len(panels) + 24
    x = lambda t: left + (t - t0) / (t1 - t0) * (W - left - 10)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>']
    for p, (title, path, run) in enumerate(panels):
        y0 = p * ph
        out.append('<text x="4" y="%d" font-weight="bold">%s</text>' % (y0 + 15, title))
        s = spans(path, run, t0, t1)
        for i, (k, name, colour) in enumerate(LANES):
            y = y0 + top + i * (lane + gap)
            out.append('<text x="4" y="%d">%s</text>' % (y + 12, name))
            out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="#f0f0f0"/>' % (left, y, W - left - 10, lane))
            for a, b in s[k]:
                out.append('<rect x="%.1f" y="%d" width="%.2f" height="%d" fill="%s"/>' % (x(a), y, max(x(b) - x(a), 0.5), lane, colour))
        ya = y0 + top + len(LANES) * (lane + gap) + 10
        for t in range(int(t0), int(t1) + 1):
            if t % 5 == 0:
                out.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#666">%d ms</text>' % (x(t), ya, t))
    out.append('</svg>')
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv)
