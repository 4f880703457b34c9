#!/usr/bin/env bash
# dgemmlead.sh: issue 35, tenth session. The first call of the session
# (H200) gave, from page-locked memory at n = 16384 in 4096-blocks,
# pinhost-lead2 (Plan.SlabLead 2) 53.49 TFLOP/s against 48.83 for the panel
# order and 50.34 slab first, 3 runs each, once. This script measures the
# slab lead against the other orders with more runs, in both sweep orders
# (forward then reversed, so that drift favours no variant), and then the
# CLI as a user runs it with -pin, alternated, with and without
# HTGS_MATMUL_SLABLEAD, to choose the page-locked default. Logs under
# $OUT/dgemmlead/.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
o="$OUT/dgemmlead"
mkdir -p "$o"
c="$PWD/.device-carry"
bin=$c/bin/matmul
fwd=pinhost-panel,pinhost,pinhost-sf,pinhost-lead1,pinhost-lead2,pinhost-lead3,base,lead1,lead2,lead3
rev=$(echo "$fwd" | tr ',' '\n' | tac | paste -sd,)
for pass in fwd rev; do
	vs=$fwd
	[[ $pass == rev ]] && vs=$rev
	(cd matmul && HTGS_SWEEP=1 HTGS_SWEEP_N=16384,8192 HTGS_SWEEP_BS16384=4096 HTGS_SWEEP_BS8192=4096 HTGS_SWEEP_RUNS=4 \
		HTGS_SWEEP_VARIANTS=$vs timeout -k 2 75 "$c/matmul.test" -test.count=1 -test.v -test.run 'CUDASweep' 2>&1) >"$o/sweep-$pass.log"
	echo "sweep $pass rc=$?"
	grep '^SWEEP' "$o/sweep-$pass.log" | cut -c1-120
done
# The CLI with -pin (page-locking not timed), alternated: the default
# order, slab lead 2, slab lead 3.
for round in 1 2 3; do
	for v in 0 2 3; do
		HTGS_MATMUL_SLABLEAD=$v timeout -k 2 20 "$bin" -n 16384 -kernel cuda -pin >"$o/pin-lead$v-$round.log" 2>&1
		echo "round $round -pin lead=$v: rc=$? $(grep -hE '^(time|GPUs)' "$o/pin-lead$v-$round.log" | tr '\n' ' ' | cut -c1-160)"
	done
done
