#!/usr/bin/env bash
# dgemmpin.sh: issue 35, tenth session: the page-locked default order
# (slab lead 2 where it applies, else slab first; matmul/offload_tuning.go
# defaultPinnedSlabLead) as a user gets it. Steps: the cuda-tagged matmul
# tests under the new default; -verify from page-locked memory at n=4096;
# -compare-xt at n=16384 with default flags (graph vs cuBLASXt vs resident
# cuBLAS in one process; its page-locked row is the target's); the CLI
# with -pin at n=16384, alternated with the old panel order
# (HTGS_MATMUL_SLABLEAD=0 HTGS_MATMUL_SLABFIRST=0), 3 rounds. Logs under
# $OUT/dgemmpin/.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
o="$OUT/dgemmpin"
mkdir -p "$o"
c="$PWD/.device-carry"
bin=$c/bin/matmul
(cd matmul && timeout -k 2 20 "$c/matmul.test" -test.count=1 -test.v -test.run 'CUDA' 2>&1) >"$o/tests.log"
echo "matmul cuda tests: rc=$? $(grep -c -- '--- PASS' "$o/tests.log") pass, $(grep -c -- '--- FAIL' "$o/tests.log") fail"
grep -- '--- FAIL' "$o/tests.log" | head -5
timeout -k 2 10 "$bin" -n 4096 -kernel cuda -pin -verify >"$o/verify.log" 2>&1
echo "verify -pin n=4096: rc=$? $(grep -hE '^(C = |time|verify)' "$o/verify.log" | tr '\n' ' ' | cut -c1-400)"
timeout -k 2 25 "$bin" -n 16384 -kernel cuda -compare-xt >"$o/compare-16384.log" 2>&1
echo "compare n=16384 rc=$?"
grep -E '^(cuBLAS|graph|page-locked|compare|  |COMPARE)' "$o/compare-16384.log"
for round in 1 2 3; do
	for v in default panel; do
		e=""
		[[ $v == panel ]] && e="HTGS_MATMUL_SLABLEAD=0 HTGS_MATMUL_SLABFIRST=0"
		env $e timeout -k 2 20 "$bin" -n 16384 -kernel cuda -pin >"$o/pin-$v-$round.log" 2>&1
		echo "round $round -pin $v: rc=$? $(grep -hE '^(time|GPUs)' "$o/pin-$v-$round.log" | tr '\n' ' ' | cut -c1-130)"
	done
done
grep -hE '^C = ' "$o/pin-default-1.log" "$o/pin-panel-1.log" | head -3
