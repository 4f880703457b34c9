#!/usr/bin/env python3
"""One table for scripts/device/patsab.sh's arms and rounds.

Reads DIR/{a1,b1,c1,d1,a2,...}/pats/{hardware.log,rates.txt} (DIR is
$OUT/patsab of a device call) and prints, per process: each
configuration's makespan with the simulator's error and the replay's (the
run's own operation times), PATS and PATS+DL+prefetch over FCFS, the sum
of the mean GPU compute times in FCFS and in PATS over the operations
that ran on the GPU in both (the GPU's worker waiting for a thread shows
as FCFS above PATS), the Go
scheduler's sampled waits in FCFS and its GPU worker's wake-ups (woken
with work, how long it took to run again), FCFS's dispatch from idle.txt (the
GPU idle while an instance was ready, instances the cores began while it
was idle), and the commits' rates from rates.txt; then the medians per
arm. Usage: patsab_summary.py DIR
"""
import os
import re
import statistics
import sys

ARMS = {"a": "default (parallel commits)", "b": "-serial-commits", "c": "-storage-on-cores", "d": "GOMAXPROCS cores+1"}


def runs(hw):
    out = {}
    pat = (r"(?m)^(.+?): [0-9.]+ tiles/s, makespan ([0-9.]+) s \(simulated ([0-9.]+) s, ([-+0-9.]+)%; "
           r"from the run's op times ([0-9.]+) s, ([-+0-9.]+)%\)")
    for m in re.finditer(pat, hw):
        out[m[1]] = (float(m[2]), float(m[4]), float(m[6]))
    return out


def gpu_times(hw):
    """Each configuration's mean GPU compute time (ms) of each operation
    that ran there."""
    lines = hw.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Mean compute time of each operation"):
            head = [c.strip() for c in lines[i + 2].strip("|").split("|")][1:]
            times = {h: {} for h in head}
            for row in lines[i + 4:]:
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in row.strip("|").split("|")]
                for h, c in zip(head, cells[1:]):
                    g = c.split("/")[-1].strip()
                    if g not in ("-", ""):
                        times[h][cells[0]] = float(g)
            return times
    return {}


def common_sums(g, a, b):
    """The sums of a's and b's GPU times over the operations both ran."""
    if a not in g or b not in g:
        return None
    ops = set(g[a]) & set(g[b])
    return sum(g[a][o] for o in ops), sum(g[b][o] for o in ops), len(ops)


def waits(hw, name):
    m = re.search(r"(?m)^" + re.escape(name) + r": Go scheduler: .*?([0-9.]+) s in all", hw)
    return float(m[1]) if m else None


def wakes(hw, name):
    m = re.search(r"(?m)^" + re.escape(name) + r": wake-ups: the GPUs' workers woken with work ([0-9]+) times, "
                  r"([0-9.]+) ms in all to run again \(longest ([0-9.]+) ms\)", hw)
    return "GPU worker woken %s times, %s ms to run (longest %s)" % (m[1], m[2], m[3]) if m else "-"


def dispatch(idle, name):
    """FCFS's (name's) GPU dispatch figures from trace_idle.py's line."""
    for line in idle.splitlines():
        if line.startswith(name + ": "):
            m = re.search(r"idle with an instance ready ([0-9]+) ms .*?, ([0-9]+) instances begun by a core "
                          r"while it was idle \(([0-9.]+) core-s\)", line)
            if m:
                return "GPU idle with one ready %s ms, %s taken by cores (%s core-s)" % (m[1], m[2], m[3])
    return "-"


def main():
    d = sys.argv[1]
    rows = {}
    for p in sorted(os.listdir(d)):
        hwp = os.path.join(d, p, "pats", "hardware.log")
        if not os.path.isfile(hwp) or p[0] not in ARMS:
            continue
        hw = open(hwp).read()
        r = runs(hw)
        g = gpu_times(hw)
        rates = ""
        rp = os.path.join(d, p, "pats", "rates.txt")
        if os.path.isfile(rp):
            for line in open(rp):
                if line.startswith("PATS+DL+prefetch:"):
                    m = re.search(r"commit ([0-9.]+) GB/s.*each labels commit median ([0-9.]+) GB/s", line)
                    if m:
                        rates = "DL commits %s GB/s storage, %s each" % (m[1], m[2])
        ip = os.path.join(d, p, "pats", "idle.txt")
        disp = dispatch(open(ip).read(), "FCFS") if os.path.isfile(ip) else "-"
        rows[p] = (r, g, waits(hw, "FCFS"), rates)
        cells = []
        for name in ("FCFS", "PATS", "PATS+DL+prefetch"):
            if name in r:
                s, es, eo = r[name]
                cells.append("%s %.2f s (sim %+.1f%%, replay %+.1f%%)" % (name, s, es, eo))
        ratio = ""
        if "FCFS" in r and r.get("PATS", (0,))[0] > 0:
            ratio += " PATS %.2fx" % (r["FCFS"][0] / r["PATS"][0])
        if "FCFS" in r and r.get("PATS+DL+prefetch", (0,))[0] > 0:
            ratio += " DL %.2fx" % (r["FCFS"][0] / r["PATS+DL+prefetch"][0])
        gs = ""
        c = common_sums(g, "FCFS", "PATS")
        if c:
            gs = " GPU ms a tile, the %d operations both ran there: FCFS %.1f, PATS %.1f" % (c[2], c[0], c[1])
            # The operations whose kernels outlast the old 2 ms poll.
            long_ops = [o for o in ("PreWatershed", "Watershed") if o in g["FCFS"] and o in g["PATS"]]
            gs += "".join(" (%s %.1f/%.1f)" % (o, g["FCFS"][o], g["PATS"][o]) for o in long_ops) + ";"
        w = rows[p][2]
        print("%-3s %-28s %s;%s;%s FCFS sched waits %s s, %s, %s; %s" % (
            p, ARMS[p[0]], "; ".join(cells), ratio, gs, "-" if w is None else "%.2f" % w, wakes(hw, "FCFS"), disp, rates))
    print("\nmedians per arm (makespan s, |sim error| %):")
    for a, what in ARMS.items():
        mine = [v for k, v in rows.items() if k[0] == a]
        if not mine:
            continue
        parts = []
        for name in ("FCFS", "PATS", "PATS+DL+prefetch"):
            ms = [v[0][name][0] for v in mine if name in v[0]]
            es = [abs(v[0][name][1]) for v in mine if name in v[0]]
            if ms:
                parts.append("%s %.2f (%.1f%%)" % (name, statistics.median(ms), statistics.median(es)))
        print("%s %-28s %s" % (a, what, "; ".join(parts)))


if __name__ == "__main__":
    main()
