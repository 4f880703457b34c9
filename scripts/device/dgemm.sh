#!/usr/bin/env bash
# dgemm.sh: issue 35's GPU checks of matmul on a lent GPU machine (no Go
# there), third call: only what settles the default for ordinary memory.
# Expected wall time about 50 s; each step has its own time limit (their
# sum is 72 s); logs under $OUT/dgemm/. Needs, built with -tags cuda
# (scripts/device/pack.sh or scripts/build-cuda-tests.sh, plus the CLI):
#     .device-carry/matmul.test
#     .device-carry/bin/matmul   (CGO_ENABLED=1 go build -tags cuda -o .device-carry/bin/matmul ./examples/matmul)
#
# Call 2 found staging (pack into pinned buffers) the best from ordinary
# memory: 35.35 TFLOP/s at n=16384 (target 40), 17.2 at 8192 (target 25);
# register and pipelined far worse; staging's host copies ran at 25 GB/s
# against 54 in the probe. This call measures two changes to staging, at
# 8192 with blocks of 2048 and of 4096, and at 16384 with 4096:
# HTGS_MATMUL_SLABS (a block packed and uploaded in bands of rows, each
# band on the bus while the next is packed; downloads likewise) and
# HTGS_MATMUL_STREAM (pack and unpack with non-temporal stores: a third
# less memory traffic; 1.2-1.9x on the 2-core dev VM). Matrices now have
# transparent huge pages (NewDense), for every variant: slabs1 is call 2's
# staging on huge pages.
#  1. the cuda-tagged matmul tests with every staged block split in bands
#     and non-temporal copies (HTGS_MATMUL_SLABS=4, bands down to 4096
#     elements, HTGS_MATMUL_STREAM=1): results exact;
#  2. TestCUDASweep: slabs1 (call 2's staging), nt, slabs4/8/16 with nt,
#     slabs4 without, slabs4-nt with one copy-out, and pipelined and
#     register again: A, B and C now come from NewDense, which asks for
#     transparent huge pages (THP is at "madvise" there), and page-locking
#     huge pages may be much faster than call 2's 17-24 GB/s; C filled with
#     NaN before each variant, each result checked against the first; best
#     of 2 timed runs after a warm-up; each line ends with where the copy
#     tasks' time went;
#  3. matmul -compare-xt at n=16384 and 8192 with the sweep's best (graph vs
#     cuBLASXt from ordinary memory, with and without its pinning mode, and
#     page-locked, and resident cuBLAS, one process each);
#  4. matmul -n 4096 -verify with the best of 8192 (bound 2*gamma_k).
# Prints PASS/FAIL against issue 35's targets and a BEST line per size.
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

# 1. Tests with bands (about 3 s).
stamp "tests (slabs 4)"
(cd matmul && HTGS_MATMUL_SLABS=4 HTGS_MATMUL_SLABMIN=4096 HTGS_MATMUL_STREAM=1 timeout -k 2 6 "$c/matmul.test" -test.count=1 -test.v \
	-test.run 'CUDA|Offload|HostCopy|PinHost|ParallelCopy|CopyStream' 2>&1) >"$o/tests.log"
rc=$?
echo "matmul cuda tests: rc=$rc $(grep -c -- '--- PASS' "$o/tests.log") pass, $(grep -c -- '--- FAIL' "$o/tests.log") fail, $(grep -c -- '--- SKIP' "$o/tests.log") skip"
grep -E -- '--- FAIL' "$o/tests.log" | head -n 8
[[ $rc == 0 ]] && echo "PASS: matmul cuda tests with slabs" || echo "FAIL: matmul cuda tests with slabs (rc=$rc)"

# 2. Bands, one process (about 20 s).
stamp "sweep"
(cd matmul && HTGS_SWEEP=1 HTGS_SWEEP_N=8192,16384 HTGS_SWEEP_BS8192=2048 HTGS_SWEEP_BS16384=4096 HTGS_SWEEP_RUNS=2 \
	HTGS_SWEEP_VARIANTS=slabs1,nt,slabs4-nt,slabs8-nt,slabs4,pipelined,regchunks,slabs4-nt-co1,slabs16-nt,slabs1@8192/4096,nt@8192/4096,slabs4-nt@8192/4096,slabs8-nt@8192/4096 \
	timeout -k 2 34 "$c/matmul.test" -test.count=1 -test.v -test.run 'CUDASweep' 2>&1) >"$o/sweep.log"
echo "sweep rc=$?"
grep '^SWEEP' "$o/sweep.log"
grep -E -- '--- FAIL|sweep_cuda_test' "$o/sweep.log" | head -n 8

# best N: "variant block rate" of the fastest from ordinary memory at size N.
best() {
	grep -E "^SWEEP n=$1 " "$o/sweep.log" | grep -v pinhost | awk '{print $4, $3, $5}' | sed 's/bs=//' | sort -k3 -g -r | head -n 1
}
# env for a sweep variant's name: slabsN (bands), nt (non-temporal stores),
# -co1 (one copy-out task), -s5 (5 staging buffers, 3 copy-outs).
variant_env() {
	case "${1:-}" in
	pipelined) echo "HTGS_MATMUL_HOSTCOPY=pipelined" && return ;;
	regchunks) echo "HTGS_MATMUL_HOSTCOPY=register" && return ;;
	esac
	local v=${1:-slabs1} e="HTGS_MATMUL_HOSTCOPY=staging" s=1 nt=0
	[[ $v =~ ^slabs([0-9]+) ]] && s=${BASH_REMATCH[1]}
	[[ $v == nt || $v == *-nt* ]] && nt=1
	e+=" HTGS_MATMUL_SLABS=$s HTGS_MATMUL_STREAM=$nt"
	[[ $v == *-co1 ]] && e+=" HTGS_MATMUL_COPYOUT=1"
	[[ $v == *-s5 ]] && e+=" HTGS_MATMUL_STAGING=5 HTGS_MATMUL_COPYOUT=3"
	echo "$e"
}
for n in 8192 16384; do
	read -r v bs rate <<<"$(best "$n")"
	base=$(grep -E "^SWEEP n=$n +bs=[0-9]+ +slabs1 " "$o/sweep.log" | awk '{print $5}' | sort -g -r | head -n 1)
	echo "BEST n=$n variant=${v:-none} block=${bs:-0} rate=${rate:-0} slabs1_best=${base:-0}"
done

# 3. Graph vs cuBLASXt vs resident cuBLAS (about 17 s).
for nl in 16384:20 8192:6; do
	IFS=: read -r n lim <<<"$nl"
	read -r v bs rate <<<"$(best "$n")"
	stamp "compare n=$n with ${v:-slabs1} block ${bs:-default} ($(variant_env "$v"))"
	env $(variant_env "$v") timeout -k 2 "$lim" "$c/bin/matmul" -n "$n" ${bs:+-block "$bs"} -kernel cuda -compare-xt >"$o/compare-$n.log" 2>&1
	echo "compare n=$n rc=$?"
	grep -E '^(time|GPUs|cuBLASXt|graph|cuBLAS|page-locked|compare|  |COMPARE)' "$o/compare-$n.log"
done

# 4. Accuracy with the bands of n=8192's best (about 5 s).
read -r v bs rate <<<"$(best 8192)"
stamp "verify n=4096 with ${v:-slabs1}"
env $(variant_env "$v") timeout -k 2 6 "$c/bin/matmul" -n 4096 -kernel cuda -verify >"$o/verify.log" 2>&1
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
