#!/usr/bin/env python3
"""The rates a hardware run's own copies went at, against the calibration's.

Reads the trace.csv of `pathology -hardware -out DIR` and prints, per run:
  stage   the median and the mean-time rate of the tiles' stagings (the
          RGB, 3 bytes a pixel, over each staging's span)
  commit  the labels' bytes (2 a pixel; the feature tables, 3 MiB a tile,
          left out) over the union of the commits' spans: the time the
          storage was writing (the rate of a storage that writes one
          tile's outputs at a time, -serial-commits), and the median of
          each labels commit's own rate (a commit's rate when the storage
          writes the tiles' outputs at the same time, the default since
          the eleventh session)
The simulator takes both from the calibration (hardware.log: "staging
... per core", "committed to storage ... under load"); with data locality
the makespan moves with the commit rate (docs/pats/hardware.md, tenth
session). Usage: run_rates.py TRACE [TILE_SIZE (default 4096)]
"""
import csv
import statistics
import sys

from trace_idle import union  # the same folder


def main():
    path = sys.argv[1]
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    rgb, labels = 3 * size * size, 2 * size * size
    rows = list(csv.DictReader(open(path)))
    runs = []
    for r in rows:
        if r["run"] not in runs:
            runs.append(r["run"])
    for run in runs:
        rs = [r for r in rows if r["run"] == run]
        stg = [float(r["end_ms"]) - float(r["start_ms"]) for r in rs if r["what"] == "stage"]
        com = sorted((float(r["start_ms"]), float(r["end_ms"])) for r in rs if r["what"] == "commit")
        if not stg or not com:
            print(f"{run}: no stagings or commits in the trace")
            continue
        busy = sum(e - s for s, e in union(com))
        lab = [float(r["end_ms"]) - float(r["start_ms"]) for r in rs if r["what"] == "commit" and r["op"] == "labels"]
        tiles = len(lab)
        each = labels / statistics.median(lab) / 1e6 if lab and statistics.median(lab) > 0 else 0.0
        med = rgb / statistics.median(stg) / 1e6
        mean = rgb / statistics.mean(stg) / 1e6
        print(f"{run}: stage median {med:.2f} GB/s (mean time {mean:.2f}); "
              f"commit {tiles * labels / busy / 1e6:.2f} GB/s over {busy:.0f} ms of storage busy ({tiles} tiles), "
              f"each labels commit median {each:.2f} GB/s")


if __name__ == "__main__":
    main()
