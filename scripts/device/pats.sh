#!/usr/bin/env bash
# pats.sh (engineer pats, issue 34): the GPU checks of the pathology
# operations and the PATS experiment again on a real GPU. Run on the GPU
# machine (no Go there) from the repository root, after
# scripts/device/pack.sh (or by hand) built, with cgo and -tags cuda:
#
#     .device-carry/examples_pathology.test   scripts/build-cuda-tests.sh
#     .device-carry/bin/pathology             CGO_ENABLED=1 go build -tags cuda \
#                                                 -o .device-carry/bin/pathology ./examples/pathology
#
# Steps, each under its own time limit, logs in $OUT/pats/ as they go:
#  1. tests.log: the cuda-tagged pathology tests (every GPU kernel against
#     its CPU kernel on edge cases and generated tiles, the calibration's
#     check at 1..2048 px, a small hardware run) plus the host mirrors.
#  2. hardware.log, hw/hardware.md: pathology -hardware, TILES (default 40)
#     tiles of 4096^2, all cores but one + the GPU: per operation CPU ms
#     (one core alone and under load), GPU ms, speedup; FCFS, PATS,
#     PATS+DL+prefetch, learned, 50%-wrong, simulator errors.
#  3. cpuops.log, opencv.log: pathology -cpu-ops at 4096^2 (one core) and,
#     where python3 has cv2, testdata/opencv_ops.py on the same inputs (one
#     thread, thread CPU time).
#  4. summary.txt: per operation CPU, GPU, OpenCV ms and the GPU's speedups
#     against both CPUs; PASS/FAIL lines.
# Expected wall time about 60 s (bounded at 85 s; run-all gives it 90).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
: "${TILES:=40}"
: "${BUDGET:=85}"
log="$OUT/pats"
mkdir -p "$log"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
left() { echo $((BUDGET - (SECONDS - start))); }
say() { echo "$*" | tee -a "$log/summary.txt"; }
bin=.device-carry/bin/pathology
tbin=.device-carry/examples_pathology.test

{
	echo "== $(date -u +%FT%TZ) $(uname -nr) cores=$(nproc)"
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
	python3 -c 'import cv2; print("python3 cv2", cv2.__version__)' 2>&1 | tail -1
	ls -la "$tbin" "$bin" 2>&1
} | tee "$log/machine.txt"

# 1. Tests.
if [[ -x "$tbin" ]]; then
	t=$SECONDS
	(cd examples/pathology && timeout -k 2 25 "../../$tbin" -test.v -test.count=1 \
		-test.run 'TestCUDA|TestHostKernelEdgeCases|TestGPUMirrorsMatchCPU|TestDiskTable') >"$log/tests.log" 2>&1
	rc=$?
	grep -E -e '^(--- |ok|FAIL|PASS)' -e 'differ' "$log/tests.log" | head -40 | tee -a "$log/summary.txt"
	if [[ $rc -eq 0 ]] && ! grep -q -e '--- SKIP: TestCUDA' "$log/tests.log"; then
		say "PASS tests (cuda-tagged pathology tests, $((SECONDS - t)) s)"
	else
		say "FAIL tests: rc=$rc (124: timed out; a SKIP of TestCUDA means no GPU was found) in $((SECONDS - t)) s"
	fi
else
	say "FAIL tests: no $tbin"
fi

# 2. The PATS experiment on the GPU.
if [[ -x "$bin" ]]; then
	t=$SECONDS
	lim=$(($(left) - 22)) # leave room for steps 3 and 4
	lim=$((lim > 60 ? 60 : lim))
	if [[ $lim -lt 20 ]]; then
		say "FAIL hardware: skipped, ${lim}s left"
	else
		timeout -k 2 "$lim" "$bin" -hardware -tiles "$TILES" -tile-size 4096 -out "$log/hw" >"$log/hardware.log" 2>&1
		rc=$?
		say "hardware: rc=$rc in $((SECONDS - t)) s (limit ${lim}s, $TILES tiles of 4096^2)"
		if [[ $rc -eq 0 ]] && grep -q "every GPU output equals the CPU's" "$log/hardware.log"; then
			say "PASS hardware: every GPU output equals the CPU's"
		else
			say "FAIL hardware: rc=$rc; $(grep -o 'GPU outputs DIFFER[^.]*' "$log/hardware.log" | head -1)"
		fi
	fi
else
	say "FAIL hardware: no $bin"
fi

# 3. CPU operations on one core, and OpenCV on the same inputs.
if [[ -x "$bin" && $(left) -gt 12 ]]; then
	lim=$(($(left) - 10))
	lim=$((lim > 15 ? 15 : lim))
	timeout -k 2 "$lim" "$bin" -cpu-ops -tile-size 4096 -out "$tmp/ops" >"$log/cpuops.log" 2>&1
	echo "cpu-ops rc=$?" >>"$log/cpuops.log"
	if python3 -c 'import cv2, numpy' 2>/dev/null && [[ $(left) -gt 5 ]]; then
		lim=$(($(left) - 3))
		lim=$((lim > 15 ? 15 : lim))
		timeout -k 2 "$lim" python3 examples/pathology/testdata/opencv_ops.py "$tmp/ops" --rounds 2 --cpu-time >"$log/opencv.log" 2>&1
		echo "opencv rc=$?" >>"$log/opencv.log"
	else
		echo "no python3 cv2 or no time left" >"$log/opencv.log"
	fi
fi

# 4. Summary: per operation, and the PATS targets of issue 34.
python3 - "$log" >>"$log/summary.txt" 2>&1 <<'PY'
import os, re, sys
d = sys.argv[1]
def read(name):
    try:
        return open(os.path.join(d, name)).read()
    except OSError:
        return ""
def ops(text):
    return {m[0]: float(m[1]) for m in re.findall(r"(?m)^op (\w+): ([0-9.]+) ms$", text)}
hw, cpu, cv = read("hardware.log"), ops(read("cpuops.log")), ops(read("opencv.log"))
cal = {}
for m in re.finditer(r"(?m)^\| (\w+) \| ([0-9.]+) \| ([0-9.]+) \| ([^|]+) \| ([^|]+) \|$", hw):
    g = m[4].strip()
    cal[m[1]] = (float(m[2]), float(m[3]), None if g == "CPU only" else float(g))
print("\nper operation at 4096^2, ms: CPU one core (-cpu-ops median; the calibration's alone / under load), GPU compute, OpenCV one thread; the GPU's speedups against each")
print("%-16s %9s %9s %9s %9s %9s %9s %9s %9s" % ("op", "cpu-ops", "cal", "loaded", "gpu", "opencv", "x alone", "x loaded", "x opencv"))
for op in (list(cal) or list(cpu)):
    c = cpu.get(op)
    a, l, g = cal.get(op, (None, None, None))
    o = cv.get(op)
    f = lambda v, p=1: "-" if v is None else ("%.*f" % (p, v))
    sp = None if g in (None, 0) or a is None else a / g
    spl = None if g in (None, 0) or l is None else l / g
    spc = None if g in (None, 0) or o is None else o / g
    print("%-16s %9s %9s %9s %9s %9s %9s %9s %9s" % (op, f(c), f(a), f(l), f(g, 2), f(o), f(sp), f(spl), f(spc)))
ratio = re.search(r"PATS over FCFS ([0-9.]+)x \(PATS\+DL\+prefetch ([0-9.]+)x\)", hw)
err = re.search(r"Largest simulator error: ([0-9.]+)%", hw)
if ratio:
    p, dl = float(ratio[1]), float(ratio[2])
    print("%s PATS >= 1.3x FCFS: %.2fx" % ("PASS" if p >= 1.3 else "FAIL", p))
    print("%s PATS+DL+prefetch better than PATS: %.2fx vs %.2fx" % ("PASS" if dl > p else "FAIL", dl, p))
else:
    print("FAIL no PATS/FCFS ratio in hardware.log")
if err:
    e = float(err[1])
    print("%s simulator within 15%% of every makespan: largest error %.1f%%" % ("PASS" if e <= 15 else "FAIL", e))
PY
say "pats.sh done in $((SECONDS - start)) s"
