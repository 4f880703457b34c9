#!/usr/bin/env bash
# dgemmcli.sh: issue 35's GPU figures as a user gets them: the matmul CLI
# -kernel cuda and otherwise its default flags (ordinary Go memory, no
# -pin, the default block), n = 8192 and 16384 alternated, 3 rounds; then
# -verify at n = 4096. (-kernel auto, the default, picks OpenBLAS on the
# CPUs.) Logs under $OUT/dgemmcli/.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
o="$OUT/dgemmcli"
mkdir -p "$o"
bin=.device-carry/bin/matmul
for round in 1 2 3; do
	for n in 8192 16384; do
		for k in cuda; do
			timeout -k 2 20 "$bin" -n "$n" -kernel "$k" >"$o/n$n-$k-$round.log" 2>&1
			echo "round $round n=$n -kernel $k: rc=$? $(grep -hE '^(time|GPUs|rate|kernel)' "$o/n$n-$k-$round.log" | tr '\n' ' ')"
		done
	done
done
timeout -k 2 10 "$bin" -n 4096 -kernel cuda -verify >"$o/verify.log" 2>&1
echo "verify n=4096: rc=$? $(grep -hE '^(time|verify)' "$o/verify.log" | tr '\n' ' ')"
