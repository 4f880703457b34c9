#!/usr/bin/env bash
# patsab.sh (issue 34, for the first GPU call after the eleventh session):
# the default (a: the output storage writes the completed tiles' disjoint
# boxes at the same time, new in the eleventh session) against the
# storage writing one tile's outputs at a time (b: -serial-commits, the
# default until then) and against the storage work on the CPU workers (c:
# -storage-on-cores) and against one P more than the cores (d: GOMAXPROCS
# = cores + 1, the 15 CPU workers unchanged), alternated in separate
# processes (a1 b1 c1 d1 a2 b2 c2 d2), each pats.sh with CONFIGS (default
# fcfs,pats,dl; about 30 s a process: the tenth session's pats.sh with
# four configurations took 25-30 s, with seven 40-50 s), logs under
# $OUT/patsab/{a1,...}/pats/. A process starts only while BUDGET (default
# 315 s, run-all gives 320) leaves 40 s for it.
#
# Why: in the tenth session's calls PATS+DL+prefetch's makespan followed
# the storage's serial commit rate (storage busy 0.95-1.3 s of 1.5-2.0 s
# runs; commits at 2.5-3.7 GB/s), and the simulator's errors with it.
# Replaying call 3's saved run with every tile's commit at once at 2.5
# GB/s each (-hwreplay-streams 96 -hwreplay-commit 2.5) puts
# PATS+DL+prefetch at 1.40 s against 1.92 s with one at a time (the run:
# 1.89 s): the A/B says whether the real runs follow, and whether the
# simulator, now calibrated with one commit's rate beside the busy cores,
# is within 15%. The one run with -storage-on-cores (tenth session, call
# 1) gave that call's best FCFS and half the Go scheduler's waits; c
# measures it beside both (every core may commit at once there too:
# pats.Config.CoreCommits). The spare P (d) is the other way to keep a
# thread for the GPU's worker beside 15 busy CPU workers and the
# goroutines that stage and commit (FCFS's replay is 5-16% short of its
# runs, whose GPU idled in gaps of 12-133 ms). Every arm has the twelfth
# session's dispatch fix (FCFS's serial GPU worker counts as waiting when
# its downloads end); summary.txt's "GPU idle with one ready" and "taken
# by cores" (from idle.txt) say whether FCFS's 20-37 operations a run
# begun by a core beside an idle GPU are gone.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
base="$OUT/patsab"
mkdir -p "$base"
: "${CONFIGS:=fcfs,pats,dl}"
: "${BUDGET:=315}"
procs=$(($(nproc) + 1))
start=$SECONDS
for round in 1 2; do
	for v in a b c d; do
		if ((BUDGET - (SECONDS - start) < 40)); then
			echo "== $v$round: skipped, $((BUDGET - (SECONDS - start))) s left"
			continue
		fi
		sc=0 serial=0 gmp=${GOMAXPROCS:-}
		[[ $v == b ]] && serial=1
		[[ $v == c ]] && sc=1
		[[ $v == d ]] && gmp=$procs
		env ${gmp:+GOMAXPROCS=$gmp} OUT="$base/$v$round" STORECORES=$sc SERIAL=$serial CONFIGS="$CONFIGS" BUDGET=46 HWLIMIT=44 bash scripts/device/pats.sh >"$base/$v$round.log" 2>&1
		echo "== $v$round (serial commits: $serial, storage on the cores: $sc, GOMAXPROCS ${gmp:-default}): rc=$?"
		grep -E '^(FCFS|PATS)[^:]* +[0-9.]+ +[0-9.]+ \(' "$base/$v$round/pats/summary.txt" | cut -c1-80
	done
done
timeout -k 1 5 python3 pathology/testdata/patsab_summary.py "$base" >"$base/summary.txt" 2>&1
cat "$base/summary.txt"
