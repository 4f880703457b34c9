#!/usr/bin/env bash
# stitchcpu.sh: the stitching check of issue 31 that needs the paper-size
# grid and 16 cores: the CPU stitch with the global solve (the default)
# against MIST's spanning tree, on the grid that stitchgpu.sh generated (if
# it is still there; PAPER_GRID names it). Logs under $OUT/stitchcpu/.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
o="$OUT/stitchcpu"
mkdir -p "$o"
c=.device-carry
grid="${PAPER_GRID:-/dev/shm/paper}"
if [[ -d "$grid" ]]; then
	for i in 1; do
		for mode in default tree; do
			extra=()
			[[ $mode == tree ]] && extra=(-spanning-tree)
			rm -rf "/tmp/base-$mode"
			s=$(date +%s.%N)
			"$c/bin/stitch" -dir "$grid" -rows 42 -cols 59 -out "/tmp/base-$mode" -workers 16 -mosaic=false -profile "$o/profile-$mode" "${extra[@]}" >"$o/stitch-$mode-$i.log" 2>&1
			rc=$?
			find "$o/profile-$mode" -type f -size +512k -delete 2>/dev/null
			echo "cpu stitch $mode round $i: rc=$rc $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}') s"
		done
	done
	cmp /tmp/base-default/img-global-positions-1.txt /tmp/base-tree/img-global-positions-1.txt && echo "positions: default == tree" || echo "positions: default != tree (see $o)"
	cp /tmp/base-default/img-statistics.txt "$o/statistics-default.txt" 2>/dev/null
else
	echo "no paper grid at $grid: skipped the CPU stitch comparison"
fi
