#!/usr/bin/env python3
"""Where the CPU cores' idle time went in a pathology -hardware run.

Reads the trace.csv that `pathology -hardware -out DIR` writes (a line per
operation instance computed and per GPU transfer) and, per run, splits the
cores' idle core-seconds (cores x makespan minus compute) by what was ready
at that moment (all of an instance's inputs computed, the instance not yet
started):
  cpu-only ready   an instance only a core can run was waiting, its inputs
                   computed on cores: dispatch delay the simulator does not
                   have (it starts it at once)
  ..., input from the GPU   the same, an input computed on the GPU: its
                   download, or the dispatch
  gpu-able ready   only instances with a GPU kernel were waiting (the cores
                   left them to the GPU: FinishAware, or the GPU's queue)
  nothing ready    the tiles in flight had nothing to run (pipeline, window;
                   the first operations' admission is not traced, so they
                   never count as ready)
Also the GPU unit's share of the makespan computing or moving data, how
long the tiles' RGB took to stage from storage (by whichever goroutine) and
their outputs to commit to it (unit "storage", what "commit"), and how many
uploads were of data the GPU had sent down earlier in the run. Then the
GPU's dispatch: the time the GPU sat idle (no upload, kernel or download)
while an instance it can run was ready, and how many instances a core
began while the GPU was idle, with their core-seconds (in FCFS an instance
goes to whichever worker asks first: a GPU worker late to ask, waiting for
a thread, leaves it to a core, at a CPU's cost). Only the standard
library; 1 ms resolution (the GPU's idle: exact).
"""
import collections, csv, sys

DEPS = {  # operation -> operations whose outputs it reads (pathology/workload.go)
    "RBCDetection": [], "MorphOpen": [],
    "ReconToNuclei": ["MorphOpen", "RBCDetection"], "AreaThreshold": ["ReconToNuclei"],
    "FillHoles": ["AreaThreshold"], "PreWatershed": ["FillHoles"],
    "Watershed": ["PreWatershed", "FillHoles"], "BWLabel": ["Watershed"],
    "FeatIntensity": ["BWLabel"], "FeatGradient": ["BWLabel"], "FeatMorphometry": ["BWLabel"],
}
# Every operation has a GPU kernel since the sixth session (a run leaves to
# the cores only one whose GPU output differed from the CPU's).
GPU_ABLE = set(DEPS)


def analyse(name, rows):
    comp = [r for r in rows if r["what"] == "compute"]
    cpus = sorted({r["unit"] for r in comp if r["unit"].startswith("cpu")})
    gpus = sorted({r["unit"] for r in rows if not r["unit"].startswith("cpu") and r["unit"] != "storage"})
    end = max(float(r["end_ms"]) for r in rows)
    n = int(end) + 2
    inst = {(int(r["tile"]), r["op"]): r for r in comp}
    busy = [0] * (n + 1)
    ready = {"cpu": [0] * (n + 1), "down": [0] * (n + 1), "gpu": [0] * (n + 1)}
    for r in comp:
        if r["unit"].startswith("cpu"):
            busy[int(float(r["start_ms"]))] += 1
            busy[int(float(r["end_ms"]))] -= 1
    waits = []  # (ready, start) of each instance that waited
    for (tile, op), r in inst.items():
        deps = DEPS.get(op, [])
        if not deps or any((tile, d) not in inst for d in deps):
            continue
        t_ready = max(float(inst[(tile, d)]["end_ms"]) for d in deps)
        t_start = float(r["start_ms"])
        if t_start > t_ready:
            waits.append((t_ready, t_start))
            k = "gpu" if op in GPU_ABLE else "cpu"
            if k == "cpu" and any(not inst[(tile, d)]["unit"].startswith("cpu") for d in deps):
                k = "down"  # an input computed on the GPU: its download or the dispatch
            ready[k][int(t_ready)] += 1
            ready[k][int(t_start)] -= 1
    idle = collections.Counter()
    b = rc = rd = rg = 0
    for t in range(n):
        b += busy[t]; rc += ready["cpu"][t]; rd += ready["down"][t]; rg += ready["gpu"][t]
        free = max(0, len(cpus) - b)
        a = min(free, rc)
        d = min(free - a, rd)
        g = min(free - a - d, rg)
        idle["cpu-only ready"] += a
        idle["cpu-only ready, input from the GPU"] += d
        idle["gpu-able ready"] += g
        idle["nothing ready"] += free - a - d - g
    total = sum(idle.values())
    cap = len(cpus) * end
    gbusy = collections.Counter()
    for r in rows:
        if r["unit"] in gpus:
            gbusy[r["what"]] += float(r["end_ms"]) - float(r["start_ms"])
    st = [float(r["end_ms"]) - float(r["start_ms"]) for r in rows if r["what"] == "stage"]
    stage = "; staging %d tiles, %.0f ms each on average, %.0f ms the longest (%.1f s in all)" % (
        len(st), sum(st) / len(st), max(st), sum(st) / 1e3) if st else ""
    # A tile's outputs are committed (labels, feature tables) before its
    # place in the window is free: the commits of a tile, first start to
    # last end.
    commits = collections.defaultdict(list)
    for r in rows:
        if r["what"] == "commit":
            commits[r["tile"]].append((float(r["start_ms"]), float(r["end_ms"])))
    ct = [max(e for _, e in v) - min(s for s, _ in v) for v in commits.values()]
    if ct:
        stage += "; commits of %d tiles, %.0f ms each on average, %.0f ms the longest" % (len(ct), sum(ct) / len(ct), max(ct))
    # The GPU's worker stages a tile's RGB itself when it takes the tile's
    # first operation (without Prefetch): the staging that ends right
    # before an upload of that RGB, while the GPU had nothing else going,
    # is time the GPU's worker spent (or waited) staging.
    stages = {int(r["tile"]): (float(r["start_ms"]), float(r["end_ms"])) for r in rows if r["what"] == "stage"}
    blocked = 0.0
    for u in gpus:
        evs = sorted((float(r["start_ms"]), float(r["end_ms"]), r) for r in rows if r["unit"] == u)
        prev = 0.0
        for a, e, r in evs:
            if r["what"] == "up" and r["op"].endswith("/rgb"):
                tile = int(r["op"].split("/")[0].removeprefix("tile"))
                sp = stages.get(tile)
                if sp and prev <= sp[1] <= a + 1:
                    blocked += sp[1] - max(sp[0], prev)
            prev = max(prev, e)
    if gpus:
        gbusy["staging before an upload"] = blocked
    # Re-uploads: uploads of a datum the GPU had sent down earlier in the
    # run (it dropped its copy and needed it again).
    down_seen, reup = set(), 0
    for r in sorted((r for r in rows if r["unit"] in gpus and r["what"] in ("up", "down")), key=lambda r: float(r["start_ms"])):
        if r["what"] == "down":
            down_seen.add(r["op"])
        elif r["op"] in down_seen:
            reup += 1
    if gpus:
        stage += "; %d uploads, %d of data the GPU had sent down before" % (
            sum(1 for r in rows if r["unit"] in gpus and r["what"] == "up"), reup)
    stage += dispatch(rows, gpus, waits)
    parts = ", ".join("%s %.1f s (%.0f%%)" % (k, v / 1e3, 100 * v / cap) for k, v in idle.items())
    g = ", ".join("%s %.0f%%" % (k, 100 * v / end / max(1, len(gpus))) for k, v in sorted(gbusy.items()))
    print("%s: makespan %.2f s, %d cores idle %.1f core-s (%.0f%% of cores x makespan): %s; GPU: %s%s" %
          (name, end / 1e3, len(cpus), total / 1e3, 100 * total / cap, parts, g or "-", stage))


def union(spans):
    """The union of (start, end) spans, as sorted disjoint [start, end]."""
    out = []
    for a, e in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([a, e])
    return out


def covered(spans, lo, hi):
    """How much of [lo, hi) the disjoint sorted spans cover."""
    return sum(max(0.0, min(e, hi) - max(a, lo)) for a, e in spans if a < hi and e > lo)


def dispatch(rows, gpus, waits):
    """The GPUs' idle time while an instance was ready (every operation has
    a GPU kernel), and the instances the cores began while a GPU was idle.
    waits are the (ready, start) spans of the instances that waited (from
    their inputs' computation to their start); with one GPU's idle gaps
    they give the dispatch's delay."""
    if not gpus:
        return ""
    ready = union(waits)
    out = []
    for u in gpus:
        busy = union((float(r["start_ms"]), float(r["end_ms"])) for r in rows if r["unit"] == u)
        waited, gaps = 0.0, []
        for (_, e), (a, _) in zip(busy, busy[1:]):
            w = covered(ready, e, a)
            if w > 0:
                waited += w
                gaps.append(w)
        taken = [r for r in rows if r["what"] == "compute" and r["unit"].startswith("cpu")
                 and busy[0][0] < float(r["start_ms"]) < busy[-1][1]
                 and covered(busy, float(r["start_ms"]), float(r["start_ms"]) + 1e-3) == 0]
        long = [g for g in gaps if g >= 10]
        out.append("; %s idle with an instance ready %.0f ms in %d gaps (%d of 10 ms or more, %.0f ms; "
                   "the longest %.0f ms), %d instances begun by a core while it was idle (%.1f core-s)" % (
                       u, waited, len(gaps), len(long), sum(long), max(gaps, default=0), len(taken),
                       sum(float(r["end_ms"]) - float(r["start_ms"]) for r in taken) / 1e3))
    return "".join(out)


def main():
    runs = collections.OrderedDict()
    with open(sys.argv[1]) as f:
        for r in csv.DictReader(f):
            runs.setdefault(r["run"], []).append(r)
    for name, rows in runs.items():
        analyse(name, rows)


if __name__ == "__main__":
    main()
