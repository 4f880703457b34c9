#!/usr/bin/env python3
"""Whether a prefetching GPU worker overlapped its uploads with its kernels.

Reads the trace.csv of `pathology -hardware -out DIR` and prints, per run
and GPU, at 0.1 ms resolution:
  compute, up            the time the GPU computed, and uploaded
  up beside compute      uploads during a computation (the overlap
                         prefetch exists for)
  up alone               uploads while the GPU computed nothing
  idle                   neither computing nor moving data
  held back              computations that started right after (within
                         0.05 ms) another operation's upload ended, more
                         than 0.1 ms after their own inputs were on the GPU
                         and the GPU's previous computation ended: the
                         worker's compute goroutine did not run until the
                         upload goroutine stopped (they shared one thread);
                         the time is what those computations waited
  late uploads           operations whose inputs were computed before the
                         GPU's previous computation began, but whose first
                         upload began only after it ended: the worker took
                         the operation only then; the time is the wait
  downloads after        from the end of a GPU computation to the start of
                         the download of its output (median, 90th
                         percentile): the scheduler's write-back timing,
                         and a download goroutine waiting for a thread
The simulator's GPU has an upload engine beside its compute engine, so it
has neither held-back computations nor late uploads. With the uploads
queued from one goroutine (the default since the ninth session, pats.Queuer)
an 'up' span is when the GPU ran the copy, timed by CUDA events. Only the
standard library.
"""
import bisect, collections, csv, sys

from trace_idle import DEPS  # operation -> operations whose outputs it reads

OUTPUT = {  # operation -> the datum it writes (pathology/workload.go)
    "RBCDetection": "rbc", "MorphOpen": "opened", "ReconToNuclei": "candidates",
    "AreaThreshold": "area", "FillHoles": "filled", "PreWatershed": "distance",
    "Watershed": "watershed", "BWLabel": "labels", "FeatIntensity": "featIntensity",
    "FeatGradient": "featGradient", "FeatMorphometry": "featMorph",
}


def tile_of_key(key):
    """The tile index of a transfer's datum key, tileNNN/datum."""
    name = key.split("/")[0]
    return int(name[4:]) if name.startswith("tile") and name[4:].isdigit() else None


def analyse(run, rows):
    comp = [r for r in rows if r["what"] == "compute"]
    inst = {(int(r["tile"]), r["op"]): r for r in comp}
    gpus = sorted({r["unit"] for r in rows if r["what"] in ("up", "down")})
    end = max(float(r["end_ms"]) for r in rows)
    for g in gpus:
        G = sorted((r for r in rows if r["unit"] == g), key=lambda r: float(r["start_ms"]))
        n = int(end * 10) + 2
        occ = {k: bytearray(n) for k in ("compute", "up", "down")}
        for r in G:
            for i in range(int(float(r["start_ms"]) * 10), int(float(r["end_ms"]) * 10)):
                occ[r["what"]][i] = 1
        c, u, d = occ["compute"], occ["up"], occ["down"]
        both = sum(1 for i in range(n) if u[i] and c[i]) / 10
        alone = sum(1 for i in range(n) if u[i] and not c[i]) / 10
        idle = sum(1 for i in range(n) if not (u[i] or c[i] or d[i])) / 10
        ups = [r for r in G if r["what"] == "up"]
        comps = [r for r in G if r["what"] == "compute"]
        by_tile = collections.defaultdict(list)  # tile -> its uploads' (start, end)
        for x in ups:
            by_tile[tile_of_key(x["op"])].append((float(x["start_ms"]), float(x["end_ms"])))
        uends = sorted((float(r["end_ms"]), tile_of_key(r["op"])) for r in ups)
        ue = [x[0] for x in uends]
        held, held_ms = 0, 0.0
        late, late_ms = 0, 0.0
        prev_end = None
        for k, r in enumerate(comps):
            s, tile = float(r["start_ms"]), int(r["tile"])
            own = [e for _, e in by_tile[tile] if e <= s]
            i = bisect.bisect_right(ue, s) - 1
            if own and i >= 0 and s - ue[i] < 0.05 and uends[i][1] != tile:
                ref = max(own + ([prev_end] if prev_end is not None else []))
                if s - ref > 0.1:
                    held += 1
                    held_ms += s - ref
            if k > 0:
                pk = comps[k - 1]
                sk, ek = float(pk["start_ms"]), float(pk["end_ms"])
                mine = [b for b, _ in by_tile[tile] if sk <= b <= s]
                deps = DEPS.get(r["op"], [])
                ready = max([float(inst[(tile, x)]["end_ms"]) for x in deps if (tile, x) in inst] + [0.0])
                if mine and min(mine) >= ek and ready <= sk:
                    late += 1
                    late_ms += s - ek
            prev_end = float(r["end_ms"])
        wrote = {(int(r["tile"]), OUTPUT.get(r["op"])): float(r["end_ms"]) for r in comps}
        after = []
        for x in G:
            if x["what"] != "down":
                continue
            t, key = tile_of_key(x["op"]), x["op"].split("/")[-1]
            if (t, key) in wrote and float(x["start_ms"]) >= wrote[(t, key)]:
                after.append(float(x["start_ms"]) - wrote[(t, key)])
        after.sort()
        dl = "downloads after %.2f / %.2f ms (median / 90th pct of %d)" % (
            after[len(after) // 2], after[int(0.9 * len(after))], len(after)) if after else "no downloads of GPU outputs"
        print("%s on %s: makespan %.0f ms; compute %.0f, up %.0f ms (beside compute %.0f, alone %.0f), idle %.0f ms; "
              "held back %d computations (%.0f ms), late uploads %d (%.0f ms); %s"
              % (run, g, end, sum(c) / 10, sum(u) / 10, both, alone, idle, held, held_ms, late, late_ms, dl))


def main(path):
    runs = collections.OrderedDict()
    with open(path) as f:
        for r in csv.DictReader(f):
            runs.setdefault(r["run"], []).append(r)
    for run, rows in runs.items():
        analyse(run, rows)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gpu_overlap.py trace.csv")
    main(sys.argv[1])
