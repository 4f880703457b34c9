#!/usr/bin/env bash
# dgemm.sh: issue 35's GPU checks of matmul on a lent GPU machine (no Go
# there). Expected wall time about 95 s; each step has its own time limit
# (at most 190 s in all; give it 150 s: run-all.sh dgemm:150); logs under
# $OUT/dgemm/. Needs, built with -tags cuda (scripts/device/pack.sh or
# scripts/build-cuda-tests.sh, plus the CLI):
#     .device-carry/matmul.test
#     .device-carry/bin/matmul   (CGO_ENABLED=1 go build -tags cuda -o .device-carry/bin/matmul ./examples/matmul)
#
#  1. the cuda-tagged matmul tests (and the offload tests on fake GPUs);
#  2. TestCUDASweep at n=8192 (blocks of 2048) and n=16384 (4096): each
#     host-copy strategy from ordinary memory (staging with 16 and with 8
#     packing goroutines, staging with sleeping GPU waits, register,
#     pipelined with 4 and 8 registering goroutines) and PinHost, best of 2
#     timed runs each;
#  3. matmul -compare-xt at n=16384 and at n=8192 (-verify there), with the
#     strategy the sweep found best at that size: graph vs cuBLASXt from
#     ordinary and page-locked memory, and resident cuBLAS, in one process;
#  4. the out-of-core .npy path on the GPU (n=8192, -mem 1GiB), its disk
#     rate against dd on the same folder.
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
} >"$o/machine.log" 2>&1
cat "$o/machine.log"

# 1. Tests.
stamp "tests"
(cd matmul && timeout -k 5 25 "$c/matmul.test" -test.count=1 -test.v \
	-test.run 'CUDA|Offload|HostPin|HostCopy|PinHost' 2>&1) >"$o/tests.log"
echo "matmul cuda tests: rc=$? $(grep -c -- '--- PASS' "$o/tests.log") pass, $(grep -c -- '--- FAIL' "$o/tests.log") fail, $(grep -c -- '--- SKIP' "$o/tests.log") skip"
grep -E -- '--- (FAIL|SKIP)' "$o/tests.log" | head -n 10

# 2. Strategies, one process.
stamp "sweep"
(cd matmul && HTGS_SWEEP=1 HTGS_SWEEP_N=8192,16384 HTGS_SWEEP_BS8192=2048 HTGS_SWEEP_BS16384=4096 \
	HTGS_SWEEP_RUNS=2 HTGS_SWEEP_VARIANTS=staging,pack8,blocksync,regchunks,pipelined,pipelined-w8,pinhost \
	timeout -k 5 45 "$c/matmul.test" -test.count=1 -test.v -test.run 'CUDASweep' 2>&1) >"$o/sweep.log"
echo "sweep rc=$?"
grep '^SWEEP' "$o/sweep.log"
grep -E -- '--- FAIL|sweep_cuda_test' "$o/sweep.log" | head -n 5

# best N: the fastest strategy from ordinary memory at size N.
best() {
	grep "^SWEEP n=$1 " "$o/sweep.log" | grep -v pinhost | awk '{print $4, $5}' | sort -k2 -g -r | head -n 1 | cut -d' ' -f1
}
# env for a sweep variant's name.
variant_env() {
	case "$1" in
	pack8) echo "HTGS_MATMUL_HOSTCOPY=staging HTGS_MATMUL_PACK=8" ;;
	regchunks) echo "HTGS_MATMUL_HOSTCOPY=register" ;;
	pipelined-w8) echo "HTGS_MATMUL_HOSTCOPY=pipelined HTGS_MATMUL_PINWORKERS=8" ;;
	pipelined) echo "HTGS_MATMUL_HOSTCOPY=pipelined" ;;
	blocksync) echo "HTGS_MATMUL_HOSTCOPY=staging HTGS_MATMUL_BLOCKSYNC=1" ;;
	*) echo "HTGS_MATMUL_HOSTCOPY=staging" ;;
	esac
}

# 3. Graph vs cuBLASXt vs resident cuBLAS.
for n in 16384 8192; do
	v=$(best "$n")
	extra=()
	[[ $n == 8192 ]] && extra=(-verify)
	stamp "compare n=$n with ${v:-staging} ($(variant_env "$v"))"
	env $(variant_env "$v") timeout -k 5 35 "$c/bin/matmul" -n "$n" -kernel cuda -compare-xt "${extra[@]}" >"$o/compare-$n.log" 2>&1
	echo "compare n=$n rc=$?"
	grep -E '^(time|GPUs|cuBLASXt|graph|cuBLAS|page-locked|compare|  |COMPARE|verify)' "$o/compare-$n.log"
done

# Targets (issue 35).
awk '/^COMPARE/ {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	n = v["n"]; go = v["graph_ordinary"]; xo = v["xt_ordinary"]; gp = v["graph_pinned"]; r = v["resident"]
	want = (n >= 16384) ? 40 : 25
	printf "%s: n=%d ordinary memory %.2f TFLOP/s >= %d\n", (go >= want ? "PASS" : "FAIL"), n, go, want
	printf "%s: n=%d ordinary memory graph/cuBLASXt %.2fx >= 1.2 (cuBLASXt %.2f)\n", (go >= 1.2 * xo ? "PASS" : "FAIL"), n, go / xo, xo
	if (n >= 16384) {
		printf "%s: n=%d page-locked %.2f TFLOP/s >= 55\n", (gp >= 55 ? "PASS" : "FAIL"), n, gp
		printf "%s: n=%d page-locked / resident cuBLAS %.2f >= 0.85 (resident %.2f)\n", (gp >= 0.85 * r ? "PASS" : "FAIL"), n, gp / r, r
	}
}' "$o"/compare-*.log | tee "$o/targets.log"

# 4. Out of core on the GPU, and dd on the same disk.
d=$(mktemp -d /tmp/dgemm-ooc.XXXXXX)
stamp "out of core in $d ($(df -h "$d" | tail -n 1))"
timeout -k 5 25 "$c/bin/matmul" -n 8192 -kernel cuda -mem 1GiB -tmp "$d" >"$o/ooc.log" 2>&1
echo "out of core rc=$?"
grep -E '^(C = |time|GPUs|kernel)' "$o/ooc.log"
{
	echo "dd write 2 GiB (direct):"
	timeout 10 dd if=/dev/zero of="$d/dd.bin" bs=16M count=128 oflag=direct conv=fsync 2>&1 | tail -n 1
	echo "dd read 2 GiB (direct):"
	timeout 10 dd if="$d/dd.bin" of=/dev/null bs=16M iflag=direct 2>&1 | tail -n 1
	echo "dd read 2 GiB (page cache as it is):"
	timeout 10 dd if="$d/dd.bin" of=/dev/null bs=16M 2>&1 | tail -n 1
} >"$o/dd.log" 2>&1
cat "$o/dd.log"
rm -rf "$d"
stamp "done"
