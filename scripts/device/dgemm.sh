#!/usr/bin/env bash
# dgemm.sh: issue 35's GPU checks of matmul on a lent GPU machine (no Go
# there). Expected wall time about 75 s; each step has its own time limit
# (their sum is 104 s); logs under $OUT/dgemm/. Needs, built with -tags cuda
# (scripts/device/pack.sh or scripts/build-cuda-tests.sh, plus the CLI):
#     .device-carry/matmul.test
#     .device-carry/bin/matmul   (CGO_ENABLED=1 go build -tags cuda -o .device-carry/bin/matmul ./examples/matmul)
#
# The last H200 call (2026-11-27) left from ordinary memory 22.7-24.2
# TFLOP/s at n=8192 (target 25; the copy-in ran 37 of 47 ms) and, from
# page-locked memory, 49.6 at n=16384 (target 55; resident cuBLAS 65.3).
# This call measures:
#  - chunk mode (HTGS_MATMUL_CHUNK, HTGS_MATMUL_RING): blocks staged
#    through a ring of small pinned buffers that should stay in the host's
#    cache, instead of block-sized buffers that go out to memory and are
#    read back by the bus (on the 2-core dev VM, host side alone, 4 MiB
#    chunks staged 2x faster than the default: BenchmarkStagingHost);
#  - the device trace (HTGS_MATMUL_TRACE, via HTGS_SWEEP_TRACE): per
#    variant, one more run timed by the GPU's own events: fill, drain,
#    product rate beside copies and alone, bus busy time. It says where the
#    page-locked run loses to resident cuBLAS;
#  - the slab-first order (HTGS_MATMUL_SLABFIRST, Plan.SlabFirst; off by
#    default): products slab by slab along k with every block of C open on
#    the device, so that uploads keep pace from the start (a model gives
#    +4-5% page-locked at 16384: docs/matmul.md).
# Steps:
#  1. the cuda-tagged matmul tests in chunk mode (2 MiB chunks, ring 4)
#     and the cuda package's timing-event test;
#  2. TestCUDASweep at n=8192 and 16384, blocks of 4096: the default
#     (base), chunk1m..chunk16m, ring 8, non-temporal, 8 packers, slab
#     first (sf, chunk4m-sf), and pinhost with and without slab first;
#     C filled with NaN before each variant and each result
#     checked against the first; best of 3 timed runs after a warm-up,
#     then the traced run (TRACE lines);
#  3. matmul -compare-xt at n=16384 and 8192 with the sweep's best from
#     ordinary memory (graph vs cuBLASXt vs page-locked vs resident), the
#     page-locked run slab first where pinhost-sf beat pinhost;
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

# 1. Tests in chunk mode, then slab first (about 6 s). TestOffloadSlabs
# counts the bands of the block staging, which chunk mode replaces.
stamp "tests (chunk mode; slab first)"
(cd matmul && HTGS_MATMUL_CHUNK=2048 HTGS_MATMUL_RING=4 timeout -k 2 8 "$c/matmul.test" -test.count=1 -test.v \
	-test.run 'CUDA|Offload|HostCopy|PinHost|ParallelCopy|CopyStream' -test.skip 'TestOffloadSlabs' 2>&1) >"$o/tests.log"
rc=$?
(cd matmul && HTGS_MATMUL_SLABFIRST=1 timeout -k 2 8 "$c/matmul.test" -test.count=1 -test.v \
	-test.run 'CUDA|Offload|PinHost' 2>&1) >"$o/tests-sf.log"
rc2=$?
(cd matmul && HTGS_MATMUL_SLABLEAD=2 timeout -k 2 8 "$c/matmul.test" -test.count=1 -test.v \
	-test.run 'CUDA|Offload|PinHost' -test.skip 'TestOffloadSlabFirst' 2>&1) >"$o/tests-lead.log"
rc3=$?
echo "matmul cuda tests, slab lead 2: rc=$rc3 $(grep -c -- '--- PASS' "$o/tests-lead.log") pass, $(grep -c -- '--- FAIL' "$o/tests-lead.log") fail"
echo "matmul cuda tests, chunk mode: rc=$rc $(grep -c -- '--- PASS' "$o/tests.log") pass, $(grep -c -- '--- FAIL' "$o/tests.log") fail, $(grep -c -- '--- SKIP' "$o/tests.log") skip"
echo "matmul cuda tests, slab first: rc=$rc2 $(grep -c -- '--- PASS' "$o/tests-sf.log") pass, $(grep -c -- '--- FAIL' "$o/tests-sf.log") fail, $(grep -c -- '--- SKIP' "$o/tests-sf.log") skip"
grep -hE -- '--- FAIL' "$o/tests.log" "$o/tests-sf.log" | head -n 8
[[ $rc == 0 && $rc2 == 0 ]] && echo "PASS: matmul cuda tests in chunk mode and slab first" || echo "FAIL: matmul cuda tests (chunk mode rc=$rc, slab first rc=$rc2)"
(cd cuda && timeout -k 2 6 "$c/cuda.test" -test.count=1 -test.v -test.run 'TimingEvents' 2>&1) >"$o/timing.log"
echo "timing events: rc=$? $(grep -E 'upload:|--- ' "$o/timing.log" | tr '\n' ' ')"

# 2. The sweep, one process (about 40 s).
stamp "sweep"
# Chunk mode lost to the default everywhere on the H200 (seventh session,
# docs/matmul.md); the polling waits (HTGS_MATMUL_SPIN) gained 4-8% from
# ordinary memory in one sweep (eighth session). New: the slab lead
# (HTGS_MATMUL_SLABLEAD=2, Plan.SlabLead), against the panel order and
# slab first; at n = 8192 also in 2048-blocks, where the lead applies
# (4 block columns; matmul/testdata/order_model.py expects 2048-blocks
# with a lead of 2 to beat 4096-blocks from page-locked memory).
# Ninth session: fewer goroutines per staging copy with polling waits
# (pack12-spin, pack7-spin: the copy-in task's packers and the copy-out
# tasks' unpackers), for the Go scheduler's effect found on pathology's
# GPU worker (device tasks waiting for a P behind busy goroutines;
# docs/pats/hardware.md).
vs=base,spin,lead2,pinhost,pinhost-panel,pinhost-sf,pinhost-lead3
(cd matmul && HTGS_SWEEP=1 HTGS_SWEEP_N=8192,16384 HTGS_SWEEP_BS8192=2048,4096 HTGS_SWEEP_BS16384=4096 HTGS_SWEEP_RUNS=3 \
	HTGS_SWEEP_VARIANTS=$vs HTGS_SWEEP_TRACE="$o/trace" \
	timeout -k 2 60 "$c/matmul.test" -test.count=1 -test.v -test.run 'CUDASweep' 2>&1) >"$o/sweep.log"
echo "sweep rc=$?"
grep '^SWEEP' "$o/sweep.log"
grep -E '^TRACE .*(operations|products:|beside|idle|uploads:|downloads:)' "$o/sweep.log" | grep -E ' (base|lead2|pinhost|pinhost-lead2):' | head -n 40
grep -E -- '--- FAIL|sweep_cuda_test' "$o/sweep.log" | head -n 8

# best N: "variant block rate" of the fastest from ordinary memory at size N.
best() {
	grep -E "^SWEEP n=$1 " "$o/sweep.log" | grep -v pinhost | awk '{print $4, $3, $5}' | sed 's/bs=//' | sort -k3 -g -r | head -n 1
}
# env for a sweep variant's name: base (the defaults), chunkNm (chunk mode,
# N MiB), -rK (ring of K), -nt (non-temporal stores), -pP (P packers),
# sf (slab first). The page-locked runs of -compare-xt take the default
# page-locked order (tenth session: slab lead 2 where it applies, else slab
# first; pinhost-panel in the sweep is the panel order).
variant_env() {
	local v=${1:-base} e="HTGS_MATMUL_HOSTCOPY=staging"
	if [[ $v =~ ^chunk([0-9]+)m ]]; then
		e+=" HTGS_MATMUL_CHUNK=$((BASH_REMATCH[1] * 1024))"
		[[ $v =~ -r([0-9]+) ]] && e+=" HTGS_MATMUL_RING=${BASH_REMATCH[1]}"
		[[ $v =~ -p([0-9]+) ]] && e+=" HTGS_MATMUL_PACK=${BASH_REMATCH[1]}"
		[[ $v == *-nt* ]] && e+=" HTGS_MATMUL_STREAM=1"
	fi
	[[ $v == sf || $v == *-sf || $v == sf-* || $v == *-sf-* ]] && e+=" HTGS_MATMUL_SLABFIRST=1"
	[[ $v == *spin ]] && e+=" HTGS_MATMUL_SPIN=2000"
	[[ $v =~ (^|-)lead([0-9]+) ]] && e+=" HTGS_MATMUL_SLABLEAD=${BASH_REMATCH[2]}"
	echo "$e"
}
for n in 8192 16384; do
	read -r v bs rate <<<"$(best "$n")"
	base=$(grep -E "^SWEEP n=$n +bs=[0-9]+ +base " "$o/sweep.log" | awk '{print $5}' | sort -g -r | head -n 1)
	echo "BEST n=$n variant=${v:-none} block=${bs:-0} rate=${rate:-0} default=${base:-0}"
done

# 3. Graph vs cuBLASXt vs resident cuBLAS (about 17 s).
for nl in 16384:20 8192:6; do
	IFS=: read -r n lim <<<"$nl"
	read -r v bs rate <<<"$(best "$n")"
	e=$(variant_env "$v")
	stamp "compare n=$n with ${v:-base} block ${bs:-default} ($e)"
	env $e timeout -k 2 "$lim" "$c/bin/matmul" -n "$n" ${bs:+-block "$bs"} -kernel cuda -compare-xt >"$o/compare-$n.log" 2>&1
	echo "compare n=$n rc=$?"
	grep -E '^(time|GPUs|cuBLASXt|graph|cuBLAS|page-locked|compare|  |COMPARE)' "$o/compare-$n.log"
done

# 4. Accuracy with the bands of n=8192's best (about 5 s).
read -r v bs rate <<<"$(best 8192)"
stamp "verify n=4096 with ${v:-base}"
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
