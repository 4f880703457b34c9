#!/usr/bin/env bash
# patsab.sh (issue 34, for the call after the tenth session): the storage
# on the cores (b) and one P more than the cores (c: GOMAXPROCS = cores +
# 1, the 15 CPU workers unchanged) against the default (a), alternated in
# separate processes (a1 b1 c1 a2 b2 c2), each pats.sh with CONFIGS
# (default fcfs,pats,dl,wrong100), logs under $OUT/patsab/{a1,...}/pats/. Why: in the tenth session's first call
# the one run with -storage-on-cores gave the call's best FCFS (3.64 s
# against 3.75-3.89), PATS+DL+prefetch at 75% and 100% wrong (1.72, 2.57
# against 1.77, 2.69), commits at 3.4-3.9 GB/s against 2.0-3.4 with the
# storage on goroutines of its own, and half the Go scheduler's waits in
# FCFS (0.78 s sampled against 1.21-1.24): the stagers and committers
# beside 15 busy CPU workers leave the GPU's worker waiting for a thread,
# and the simulator's errors follow the commit rate (docs/pats/hardware.md,
# tenth session). Measured once; this is the A/B that would make it the
# default or not. The spare P is the other way to keep a thread for the
# GPU's worker (the eighth session's GOMAXPROCS=18 halved the old
# worker's held-back computations, makespan unchanged; never tried on
# FCFS, whose replay is 5-16% short).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
base="$OUT/patsab"
mkdir -p "$base"
: "${CONFIGS:=fcfs,pats,dl,wrong100}"
procs=$(($(nproc) + 1))
for round in 1 2; do
	for v in a b c; do
		sc=0 gmp=${GOMAXPROCS:-}
		[[ $v == b ]] && sc=1
		[[ $v == c ]] && gmp=$procs
		env ${gmp:+GOMAXPROCS=$gmp} OUT="$base/$v$round" STORECORES=$sc CONFIGS="$CONFIGS" BUDGET=46 HWLIMIT=43 bash scripts/device/pats.sh >"$base/$v$round.log" 2>&1
		echo "== $v$round (storage on the cores: $sc, GOMAXPROCS ${gmp:-default}): rc=$?"
		grep -E '^(FCFS|PATS)[^:]* +[0-9.]+ +[0-9.]+ \(' "$base/$v$round/pats/summary.txt" | cut -c1-80
	done
done
