#!/usr/bin/env bash
# run-all.sh runs the GPU checks of this round on a lent GPU machine (no Go
# there), from the binaries that scripts/device/pack.sh built and packed
# into .device-carry/carry.tar.xz. Each engineer's script (scripts/device/
# NAME.sh) writes its logs under $OUT/NAME/; this one unpacks the carry,
# records the machine and runs them in order, each under its own time limit.
#
# Usage on the GPU machine, from the repository root:
#     scripts/device/run-all.sh [NAME:SECONDS ...]
# The default runs what the open issues (34, 35) still need measured:
# base:30 pathtests:30 dgemmprobe:20 patsab:320 dgemm:110 dgemmcli:40 (550
# s of limits, under the 600 s a call may run: give the call a timeout of
# 590 s; patssweep.sh, run three times in the
# tenth session, is left out). The tenth session's first call took 234 s
# with pats:98 patssweep:98 patssync:70 patscores:70 in patsab's place
# (pats 40 s, patssweep 30 s, dgemm 67 s, dgemmcli 30 s). dgemmprobe, 20 s
# and issue 35's deciding measurement, runs before patsab's 320 s, so
# that a call cut short keeps it.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
# At most 8 files come back from $OUT: the scripts write under $work, and
# after each one everything is packed into $OUT/logs.tar.gz.
final="$OUT"
work=/tmp/devout
rm -rf "$work"
mkdir -p "$final" "$work"
OUT="$work"
t0=$(date +%s)
log="$OUT/machine.log"
{
	echo "== $(date -u +%FT%TZ) $(uname -nr) cores=$(nproc)"
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
	lscpu | grep -E '^(Model name|Socket|Core|Thread|NUMA node\(s\)|L2|L3)' 2>&1
	free -g | head -2
	df -h /tmp /dev/shm . 2>&1 | tail -3
} | tee "$log"
if [[ -f .device-pack/carry.tar.xz ]]; then
	mkdir -p .device-carry
	if command -v xz >/dev/null; then
		tar -xJf .device-pack/carry.tar.xz -C .device-carry
	else
		python3 -c 'import tarfile; tarfile.open(".device-pack/carry.tar.xz").extractall(".device-carry")'
	fi
fi
ls -la .device-carry .device-carry/bin 2>&1 | tee -a "$log"
export OUT
jobs=("$@")
if [[ ${#jobs[@]} -eq 0 ]]; then
	jobs=(base:30 pathtests:30 dgemmprobe:20 patsab:320 dgemm:110 dgemmcli:40)
fi
for j in "${jobs[@]}"; do
	name=${j%%:*}
	limit=${j#*:}
	s="scripts/device/$name.sh"
	mkdir -p "$OUT/$name"
	if [[ ! -x "$s" ]]; then
		echo "== $name: no script $s" | tee -a "$log"
		continue
	fi
	b=$(date +%s)
	echo "== $name: start (limit ${limit}s, at +$((b - t0))s)" | tee -a "$log"
	timeout -k 5 "$limit" bash "$s" >"$OUT/$name/console.log" 2>&1
	rc=$?
	echo "== $name: rc=$rc in $(($(date +%s) - b))s" | tee -a "$log"
	tail -n 25 "$OUT/$name/console.log"
	tar -czf "$final/logs.tar.gz.tmp" -C "$work" . && mv "$final/logs.tar.gz.tmp" "$final/logs.tar.gz"
	cp "$log" "$final/machine.log"
done
echo "== all done in $(($(date +%s) - t0))s" | tee -a "$log"
