#!/usr/bin/env bash
# pats.sh (engineer pats, issue 34), GPU call 3: does PATS beat FCFS on
# the issue's 96 tiles of 4096^2, and where does the simulator's time go?
# Call 2 had FCFS 8.31 s, PATS 8.89 s, one run each, and the simulator
# 9-25% short of every makespan, even replaying the runs' own op times.
# Run on the GPU machine (no Go there) from the repository root, after
# scripts/device/pack.sh (or by hand) built, with cgo and -tags cuda:
#
#     .device-carry/bin/pathology             CGO_ENABLED=1 go build -tags cuda \
#                                                 -o .device-carry/bin/pathology ./examples/pathology
#     .device-carry/pathology.test            scripts/build-cuda-tests.sh (only with TESTS=1)
#
# Steps, each under its own time limit, logs in $OUT/pats/ as they go:
#  1. hardware.log, hw/hardware.md, hw/trace.csv: pathology -hardware
#     -tiles TILES (default 96) -tile-size 4096 -hw-configs CONFIGS
#     (default fcfs,pats,fcfs,pats,dl: FCFS and PATS alternated twice on
#     the same tiles, then PATS+DL+prefetch), all cores but one + the GPU.
#     The calibration now also measures the host-GPU bandwidth and the
#     staging rate under the load of every core (the simulator uses those,
#     as it uses the CPU costs under load). Per configuration: makespan,
#     the simulator's prediction and its replay of the run's own op times,
#     cores busy, the GPU's share computing or moving data (measured and
#     simulated), the process's CPU time against 16 cores x makespan and
#     the Go runtime's GC share. trace.csv: every operation instance and
#     GPU transfer with its unit, start and end, and (issue 34, the
#     simulator's error: docs/pats/simulator-error.md) every staging and
#     commit to storage. Since then the runs start on a warm heap with the
#     output regions made (a few seconds more before the first run), and
#     the simulator models commits and waits on another worker's staging.
#  2. idle.txt: testdata/trace_idle.py splits each run's idle core time
#     by what was ready then (CPU-only work waiting: dispatch delay the
#     simulator lacks; only GPU work: left to the GPU; nothing).
#  3. With TESTS=1: tests.log; with CPUOPS=1: cpuops.log, opencv.log
#     (both measured in call 1, unchanged kernels).
#  4. summary.txt: the per-operation table, per-configuration lines, the
#     FCFS/PATS ratio of each pair, PASS/FAIL lines for issue 34's targets.
# Expected wall time about 55 s (call 2: 49 s for five configurations);
# the experiment is cut at 60 s (then the last configuration, dl, is the
# one lost; the finished ones are in hardware.log and trace.csv), the
# whole script bounded at 67 s (BUDGET). TILES=72 if less time is given.
# Since GPU call 4 (issue 34, docs/pats/hardware.md, "Why PATS gains a
# sixth here"): the default CONFIGS add patsx, PATS ranking by the
# effective speedup that counts the data movement a GPU placement causes
# (pats.Config.TransferAware), with its own PASS/FAIL line beside PATS's.
# By default six runs (fcfs,pats,patsx twice; call 4 took 70 s for six
# runs) within BUDGET=95 (run-all.sh gives pats 98 s); with BUDGET under
# 85, five runs, fcfs,pats,patsx,fcfs,patsx (the last may be cut at 60 s). dlx is PATS+DL+prefetch with the same ranking
# (CONFIGS=fcfs,dl,dlx,fcfs,dl,dlx to compare them).
# Since the fifth session (no GPU): the tiles' image regions live in the
# GPU's page-locked host memory by default (pathology.Hardware.GoMemory),
# so its transfers need no staging copy; GOMEM=1 passes -go-memory, the
# Go-memory path of calls 1 to 4 (patsgo.sh: the same three runs there,
# to compare in one call). The default CONFIGS add patst, PATS given the
# speedups counting each operation's transfers (seed 001's Fig. 5,
# "computation+data transfer"), each of the four twice (8 runs, about
# 40-60 s with ten operations on the GPU, before Watershed had one; the
# last may be cut at the limit).
# Since the sixth session (no GPU): Watershed has GPU kernels, and every
# configuration stages each tile from its admission in the background
# (pathology.Hardware.StageOnFirstUse false: no GPU worker waits on
# storage); FIRSTUSE=1 passes -stage-on-first-use, the staging of calls
# 1 to 4 (the first reader's worker stages).
# Since the seventh session (one H200: PATS 1.35-1.47x FCFS, the
# simulator within 15% of FCFS and the PATS variants in calls 2 and 4,
# not of PATS+DL+prefetch in call 3, before the GPU worker's waits and the
# manager's dispatch were fixed): the default CONFIGS run FCFS, PATS,
# PATS+DL+prefetch and its learned-speedups variant in one process, each
# pair twice but learned (7 runs, about 55 s), so that every
# configuration issue 34 names is simulated against its own run.
# Since the ninth session (no GPU; docs/pats/hardware.md, "The GPU worker
# on one thread"): a prefetching GPU worker is one goroutine that queues
# its copies on the GPU's streams (pats.Queuer) by default; SYNCUP=1
# passes -sync-uploads, the upload, compute and download goroutines of the
# sessions before (patssync.sh runs it on the sweep's points to compare in
# one call).
# STORECORES=1 passes -storage-on-cores (the CPU workers stage and
# commit; patscores.sh). SERIAL=1 passes -serial-commits (the output
# storage writes one tile's outputs at a time, the default until the
# eleventh session; patsab.sh). rates.txt: testdata/run_rates.py, the rates of
# the runs' own stagings and commits. overlap.txt: testdata/gpu_overlap.py, whether
# the GPU's uploads overlapped its kernels, and the computations held
# back.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
: "${TILES:=96}"
: "${BUDGET:=95}" # run-all.sh gives pats 98 s
if [[ -n ${SWEEP:-} ]]; then
	# The sensitivity sweep (the paper's Fig. 11) on this machine:
	# PATS+DL+prefetch with the estimates 0, 25, 50, 75 and 100% wrong.
	: "${CONFIGS:=dl,wrong25,wrong50,wrong75,wrong100}"
fi
if [[ $BUDGET -ge 85 ]]; then
	: "${CONFIGS:=fcfs,pats,dl,learned,fcfs,pats,dl}"
	: "${HWLIMIT:=$((BUDGET - 7))}"
else
	: "${CONFIGS:=fcfs,pats,patsx,patst,fcfs}"
fi
: "${TESTS:=0}"
: "${GOMEM:=0}"
: "${FIRSTUSE:=0}"
mem=()
if [[ $GOMEM == 1 ]]; then
	mem=(-go-memory)
fi
if [[ $FIRSTUSE == 1 ]]; then
	mem+=(-stage-on-first-use)
fi
if [[ ${SYNCUP:-0} == 1 ]]; then
	mem+=(-sync-uploads)
fi
if [[ ${STORECORES:-0} == 1 ]]; then
	mem+=(-storage-on-cores)
fi
if [[ ${SERIAL:-0} == 1 ]]; then
	mem+=(-serial-commits)
fi
: "${CPUOPS:=0}"
log="$OUT/pats"
mkdir -p "$log"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
left() { echo $((BUDGET - (SECONDS - start))); }
say() { echo "$*" | tee -a "$log/summary.txt"; }
bin=.device-carry/bin/pathology
tbin=.device-carry/pathology.test

{
	echo "== $(date -u +%FT%TZ) $(uname -nr) cores=$(nproc)"
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
	free -g | head -2
	ls -la "$bin" 2>&1
} | tee "$log/machine.txt"

# 1. The PATS experiment on the GPU.
if [[ -x "$bin" ]]; then
	t=$SECONDS
	lim=$(($(left) - 7)) # leave room for the trace analysis and the summary
	lim=$((lim > ${HWLIMIT:-60} ? ${HWLIMIT:-60} : lim))
	if [[ $lim -lt 20 ]]; then
		say "FAIL hardware: skipped, ${lim}s left"
	else
		say "command: $bin -hardware -tiles $TILES -tile-size 4096 -hw-configs $CONFIGS ${mem[*]} -out $log/hw"
		timeout -k 2 "$lim" "$bin" -hardware -tiles "$TILES" -tile-size 4096 -hw-configs "$CONFIGS" "${mem[@]}" -out "$log/hw" >"$log/hardware.log" 2>&1
		rc=$?
		say "hardware: rc=$rc in $((SECONDS - t)) s (limit ${lim}s, $TILES tiles of 4096^2; 124: cut short, see the configuration lines below)"
		if [[ $rc -eq 0 ]] && grep -q "every GPU output equals the CPU's" "$log/hardware.log"; then
			say "PASS hardware: every GPU output equals the CPU's"
		else
			say "FAIL hardware: rc=$rc; $(grep -o 'GPU outputs DIFFER[^.]*' "$log/hardware.log" | head -1)"
		fi
	fi
else
	say "FAIL hardware: no $bin"
fi

# 2. Where the cores' idle time went, from the trace.
if [[ -s "$log/hw/trace.csv" ]]; then
	timeout -k 1 4 python3 pathology/testdata/trace_idle.py "$log/hw/trace.csv" >"$log/idle.txt" 2>&1
	echo "idle rc=$?" >>"$log/idle.txt"
	timeout -k 1 3 python3 pathology/testdata/gpu_overlap.py "$log/hw/trace.csv" >"$log/overlap.txt" 2>&1
	echo "overlap rc=$?" >>"$log/overlap.txt"
	timeout -k 1 3 python3 pathology/testdata/run_rates.py "$log/hw/trace.csv" >"$log/rates.txt" 2>&1
	echo "rates rc=$?" >>"$log/rates.txt"
fi

# 3. Optional: the tests, and the CPU operations beside OpenCV.
if [[ $TESTS == 1 && -x "$tbin" && $(left) -gt 15 ]]; then
	(cd pathology && timeout -k 2 10 "../$tbin" -test.v -test.count=1 \
		-test.run 'TestCUDA|TestHostKernelEdgeCases|TestGPUMirrorsMatchCPU|TestDiskTable') >"$log/tests.log" 2>&1
	say "tests: rc=$? (0: PASS)"
fi
if [[ $CPUOPS == 1 && -x "$bin" && $(left) -gt 20 ]]; then
	timeout -k 2 10 "$bin" -cpu-ops -tile-size 4096 -out "$tmp/ops" >"$log/cpuops.log" 2>&1
	echo "cpu-ops rc=$?" >>"$log/cpuops.log"
	if python3 -c 'import cv2, numpy' 2>/dev/null && [[ $(left) -gt 8 ]]; then
		timeout -k 2 $(($(left) - 4)) python3 pathology/testdata/opencv_ops.py "$tmp/ops" --rounds 2 --cpu-time >"$log/opencv.log" 2>&1
		echo "opencv rc=$?" >>"$log/opencv.log"
	fi
fi

# 4. Summary: per operation, per configuration, and the targets of issue 34.
timeout -k 1 3 python3 - "$log" >>"$log/summary.txt" 2>&1 <<'PY'
import os, re, sys
d = sys.argv[1]
def read(name):
    try:
        return open(os.path.join(d, name)).read()
    except OSError:
        return ""
hw = read("hardware.log")
print("\nper operation at 4096^2, ms: CPU one core alone, under load (mean of the loaded tiles), the content fit at the lightest..heaviest tile and its mean over the slide, GPU compute; the GPU's speedup against the CPU under load")
print("%-16s %9s %9s %17s %9s %9s %9s" % ("op", "alone", "loaded", "fit lo..hi", "fit mean", "gpu", "x loaded"))
for m in re.finditer(r"(?m)^\| (\w+) \| ([0-9.]+) \| ([0-9.]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", hw):
    g = m[6].strip()
    x = "-" if g.endswith("CPU only") else "%.1f" % (float(m[3]) / float(g))
    print("%-16s %9s %9s %17s %9s %9s %9s" % (m[1], m[2], m[3], m[4].strip(), m[5].strip(), g, x))
for line in hw.splitlines():
    if line.startswith(("generated ", "calibrated ", "the tiles' regions are")) or "dark-pixel share (" in line:
        print(re.sub(r"^.*(A tile's CPU cost)", r"\1", line))
    if line.startswith("Measured op by op"):
        print(re.sub(r"^.*?(host-GPU bandwidth)", r"\1", re.sub(r" A tile's CPU cost.*$", "", line)))
runs = {}
print("\nconfiguration: makespan s, simulated s (error), replay of the run's op times s (error), CPU time / predicted, cores busy (simulated)")
print("%-30s %6s  %6s (%6s%%)  %6s (%6s%%)  %5s  %4s (%4s)  %4s (%4s)" % ("", "s", "sim", "err", "replay", "err", "cpu/p", "busy", "sim", "gpu", "sim"))
for m in re.finditer(r"(?m)^(.+?): ([0-9.]+) tiles/s, makespan ([0-9.]+) s \(simulated ([0-9.]+) s, ([-+0-9.]+)%; from the run's op times ([0-9.]+) s, ([-+0-9.]+)%\); CPU time ([0-9.]+)x predicted(?:; cores busy ([0-9]+)% \(simulated ([0-9]+)%\))?(?:; GPU computing or moving ([0-9]+)% \(simulated ([0-9]+)%\))?$", hw):
    runs[m[1]] = (float(m[3]), float(m[5]), float(m[7]), float(m[8]))
    print("%-30s %6s  %6s (%6s%%)  %6s (%6s%%)  %4sx  %3s%% (%3s%%)  %3s%% (%3s%%)" % (m[1], m[3], m[4], m[5], m[6], m[7], m[8], m[9], m[10], m[11], m[12]))
for line in hw.splitlines():
    if ": CPU time over the run: " in line:
        print("  " + line)
def mk(prefix):
    return [v[0] for k, v in runs.items() if k == prefix or k.startswith(prefix + " #")]
fs, ps = mk("FCFS"), mk("PATS")
dls = mk("PATS+DL+prefetch")
if fs and ps:
    pairs = ["%.2fx" % (a / b) for a, b in zip(fs, ps)]
    f, p = sum(fs) / len(fs), sum(ps) / len(ps)
    print("FCFS %s s, PATS %s s; FCFS/PATS per pair: %s" % (" ".join("%.2f" % x for x in fs), " ".join("%.2f" % x for x in ps), " ".join(pairs)))
    r = f / p
    print("%s PATS >= 1.3x FCFS: %.2fx (means of %d and %d runs)" % ("PASS" if r >= 1.3 else "FAIL", r, len(fs), len(ps)))
    if dls:
        r2 = f / (sum(dls) / len(dls))
        print("%s PATS+DL+prefetch better than PATS: %.2fx vs %.2fx" % ("PASS" if r2 > r else "FAIL", r2, r))
else:
    print("FAIL no FCFS and PATS makespans in hardware.log")
xs = mk("PATS+xfer")
if fs and xs:
    f, x = sum(fs) / len(fs), sum(xs) / len(xs)
    print("FCFS %s s, PATS+xfer %s s" % (" ".join("%.2f" % v for v in fs), " ".join("%.2f" % v for v in xs)))
    print("%s PATS+xfer (patsx: effective speedups with data movement) >= 1.3x FCFS: %.2fx (means of %d and %d runs; simulated on call 4's calibration: 1.34x, call 3's: 1.25x)" % ("PASS" if f / x >= 1.3 else "FAIL", f / x, len(fs), len(xs)))
    if ps:
        print("info: PATS+xfer over PATS %.2fx" % ((sum(ps) / len(ps)) / x))
ts = mk("PATS, speedups with transfers")
if fs and ts:
    f, x = sum(fs) / len(fs), sum(ts) / len(ts)
    print("%s PATS, speedups with transfers (patst: Fig. 5's computation+transfer estimates) >= 1.3x FCFS: %.2fx (means of %d and %d runs)" % ("PASS" if f / x >= 1.3 else "FAIL", f / x, len(fs), len(ts)))
dxs = mk("PATS+xfer+DL+prefetch")
if fs and dxs:
    f, x = sum(fs) / len(fs), sum(dxs) / len(dxs)
    print("%s PATS+xfer+DL+prefetch (dlx) >= 1.3x FCFS: %.2fx (means of %d and %d runs)" % ("PASS" if f / x >= 1.3 else "FAIL", f / x, len(fs), len(dxs)))
if runs:
    e = max(abs(v[1]) for v in runs.values())
    worst = max(runs, key=lambda k: abs(runs[k][1]))
    print("%s simulator within 15%% of every makespan: largest error %.1f%% (%s; %d configurations)" % ("PASS" if e <= 15 else "FAIL", e, worst, len(runs)))
    e2 = max(abs(v[2]) for v in runs.values())
    print("info: the replay of the runs' own op times: largest error %.1f%% (the scheduling model's own)" % e2)
idle = read("idle.txt")
if idle:
    print("\nidle core time by what was ready (from trace.csv):")
    print(idle.rstrip())
PY
say "pats.sh done in $((SECONDS - start)) s"
