#!/usr/bin/env bash
# dgemm.sh: issue 35's GPU checks of matmul on a lent GPU machine (no Go
# there), second call. Expected wall time about 65 s; each step has its own
# time limit (their sum is 100 s: run-all.sh dgemm:110); logs under
# $OUT/dgemm/. Needs, built with -tags cuda (scripts/device/pack.sh or
# scripts/build-cuda-tests.sh, plus the CLI):
#     .device-carry/matmul.test
#     .device-carry/bin/matmul   (CGO_ENABLED=1 go build -tags cuda -o .device-carry/bin/matmul ./examples/matmul)
#
#  1. the cuda-tagged matmul tests: TestCUDAHostCopyStrategies now runs
#     register and pipelined with blocks across several registered chunks
#     (call 1: CUDA_ERROR_INVALID_VALUE; each block now goes in one copy
#     per chunk);
#  2. TestCUDAProbe: staging's pack/unpack rate by goroutines, the bus from
#     pinned memory (each way, both at once), the driver's pageable copy,
#     cuMemHostRegister/unregister rates by goroutines, resident DGEMM on
#     blocks of 2048/4096/8192: what bounds each strategy;
#  3. TestCUDASweep at n=8192 (blocks of 2048) and n=16384 (4096), in this
#     order: staging, pipelined, PinHost, pipelined with 8 and 16
#     registering goroutines, register; PinHost also at n=16384 with blocks
#     of 8192 and at 8192 with 4096; best of 2 timed runs each (a SWEEP
#     line per run, so a timeout keeps those done);
#  4. matmul -compare-xt at n=16384 and 8192 with the strategy the sweep
#     found best at that size: graph vs cuBLASXt from ordinary memory (as
#     it is and with cuBLASXt's pinning mode) and page-locked, and resident
#     cuBLAS, in one process;
#  5. matmul -n 4096 -verify with that strategy (bound 2·γ_k).
# Prints PASS/FAIL against issue 35's targets.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
o="$OUT/dgemm"
mkdir -p "$o"
c="$PWD/.device-carry"
t0=$(date +%s)
stamp() { echo "[+$(($(date +%s) - t0))s] $*"; }
{
	date -u +%FT%TZ
	nproc
	uptime
	nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,utilization.gpu --format=csv,noheader
	grep -H . /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null
} >"$o/machine.log" 2>&1
cat "$o/machine.log"

# 1. Tests (about 3 s).
stamp "tests"
(cd matmul && timeout -k 2 10 "$c/matmul.test" -test.count=1 -test.v \
	-test.run 'CUDA|Offload|HostPin|HostCopy|PinHost' 2>&1) >"$o/tests.log"
rc=$?
echo "matmul cuda tests: rc=$rc $(grep -c -- '--- PASS' "$o/tests.log") pass, $(grep -c -- '--- FAIL' "$o/tests.log") fail, $(grep -c -- '--- SKIP' "$o/tests.log") skip"
grep -E -- '--- (FAIL|SKIP)|cuda_test.go:.*(straight|error|INVALID)' "$o/tests.log" | head -n 12
[[ $rc == 0 ]] && echo "PASS: matmul cuda tests" || echo "FAIL: matmul cuda tests (rc=$rc)"

# 2. Rates on their own (about 8 s).
stamp "probe"
(cd matmul && HTGS_SWEEP=1 timeout -k 2 12 "$c/matmul.test" -test.count=1 -test.v -test.run 'CUDAProbe' 2>&1) >"$o/probe.log"
echo "probe rc=$?"
grep -E '^PROBE|--- FAIL|probe_cuda_test' "$o/probe.log"

# 3. Strategies, one process (about 30 s).
stamp "sweep"
(cd matmul && HTGS_SWEEP=1 HTGS_SWEEP_N=8192,16384 HTGS_SWEEP_BS8192=2048 HTGS_SWEEP_BS16384=4096 HTGS_SWEEP_RUNS=2 \
	HTGS_SWEEP_VARIANTS=staging,pipelined,pinhost,pipelined-w8,pipelined-w16,regchunks,pinhost@16384/8192,pinhost@8192/4096 \
	timeout -k 2 35 "$c/matmul.test" -test.count=1 -test.v -test.run 'CUDASweep' 2>&1) >"$o/sweep.log"
echo "sweep rc=$?"
grep '^SWEEP' "$o/sweep.log"
grep -E -- '--- FAIL|sweep_cuda_test' "$o/sweep.log" | head -n 8
for v in regchunks pipelined; do
	if grep -qE "^SWEEP n=16384 +bs=4096 +$v " "$o/sweep.log"; then echo "PASS: $v runs on the GPU"; else echo "FAIL: $v did not run at n=16384"; fi
done

# best N: the fastest strategy from ordinary memory at size N, blocks of the default.
best() {
	grep -E "^SWEEP n=$1 +bs=$2 " "$o/sweep.log" | grep -v pinhost | awk '{print $4, $5}' | sort -k2 -g -r | head -n 1 | cut -d' ' -f1
}
# env for a sweep variant's name.
variant_env() {
	case "$1" in
	regchunks) echo "HTGS_MATMUL_HOSTCOPY=register" ;;
	pipelined-w8) echo "HTGS_MATMUL_HOSTCOPY=pipelined HTGS_MATMUL_PINWORKERS=8" ;;
	pipelined-w16) echo "HTGS_MATMUL_HOSTCOPY=pipelined HTGS_MATMUL_PINWORKERS=16" ;;
	pipelined) echo "HTGS_MATMUL_HOSTCOPY=pipelined" ;;
	*) echo "HTGS_MATMUL_HOSTCOPY=staging" ;;
	esac
}

# 4. Graph vs cuBLASXt vs resident cuBLAS (about 25 s).
for nb in 16384:4096:25 8192:2048:10; do
	IFS=: read -r n bs lim <<<"$nb"
	v=$(best "$n" "$bs")
	stamp "compare n=$n with ${v:-staging} ($(variant_env "$v"))"
	env $(variant_env "$v") timeout -k 2 "$lim" "$c/bin/matmul" -n "$n" -kernel cuda -compare-xt >"$o/compare-$n.log" 2>&1
	echo "compare n=$n rc=$?"
	grep -E '^(time|GPUs|cuBLASXt|graph|cuBLAS|page-locked|compare|  |COMPARE)' "$o/compare-$n.log"
done

# 5. Accuracy with the strategy of n=8192 (about 5 s).
v=$(best 8192 2048)
stamp "verify n=4096 with ${v:-staging}"
env $(variant_env "$v") timeout -k 2 8 "$c/bin/matmul" -n 4096 -kernel cuda -verify >"$o/verify.log" 2>&1
rc=$?
grep -E '^(time|GPUs|verify)' "$o/verify.log"
grep -q 'PASS' "$o/verify.log" && [[ $rc == 0 ]] && echo "PASS: -verify n=4096 ($v)" || echo "FAIL: -verify n=4096 ($v) rc=$rc"

# Targets (issue 35). The ratio to cuBLASXt is to its best from ordinary
# memory (with or without its pinning mode); both are printed.
awk '/^COMPARE/ {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	n = v["n"]; go = v["graph_ordinary"]; xo = v["xt_ordinary"]; xp = v["xt_ordinary_pinning"]; xb = v["xt_ordinary_best"]
	gp = v["graph_pinned"]; r = v["resident"]
	want = (n >= 16384) ? 40 : 25
	printf "%s: n=%d ordinary memory (%s) %.2f TFLOP/s >= %d\n", (go >= want ? "PASS" : "FAIL"), n, v["hostcopy"], go, want
	printf "%s: n=%d ordinary memory graph / best cuBLASXt %.2fx >= 1.2 (cuBLASXt %.2f, with its pinning %.2f)\n", (go >= 1.2 * xb ? "PASS" : "FAIL"), n, go / xb, xo, xp
	if (n >= 16384) {
		printf "%s: n=%d page-locked %.2f TFLOP/s >= 55\n", (gp >= 55 ? "PASS" : "FAIL"), n, gp
		printf "%s: n=%d page-locked / resident cuBLAS %.2f >= 0.85 (resident %.2f)\n", (gp >= 0.85 * r ? "PASS" : "FAIL"), n, gp / r, r
	}
}' "$o"/compare-*.log | tee "$o/targets.log"
stamp "done"
