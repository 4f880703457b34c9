#!/bin/sh
# Alternates this program built on two revisions of htgs, measure by
# measure, the order rotated each iteration, and prints per measure the
# medians and minima of each and the median of the per-pair ratios B / A.
#
#   bench/taskflow/streaming/ab.sh REV_A REV_B [ITERATIONS] [MEASURES]
#
# e.g. ab.sh 066096d HEAD 20 stream/tree15,once/tree15,stream/chain8
# REV_A and REV_B are checked out with git worktree in a temporary
# folder (removed at the end). Note the load (printed) beside the numbers.
set -eu
if [ $# -lt 2 ]; then
	echo "usage: $0 REV_A REV_B [ITERATIONS] [MEASURES]" >&2
	exit 2
fi
a=$1 b=$2 n=${3:-10}
what=${4:-stream/tree15,once/tree15,stream/tree127,once/tree127,stream/chain8,once/chain8}
here=$(cd "$(dirname "$0")" && pwd)
root=$(git -C "$here" rev-parse --show-toplevel)
tmp=$(mktemp -d)
cleanup() {
	git -C "$root" worktree remove --force "$tmp/A" 2>/dev/null || true
	git -C "$root" worktree remove --force "$tmp/B" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
for side in A B; do
	rev=$a
	[ "$side" = B ] && rev=$b
	git -C "$root" worktree add --detach "$tmp/$side" "$rev" >/dev/null 2>&1
	mkdir "$tmp/src$side"
	cp "$here/main.go" "$here/go.mod" "$tmp/src$side/"
	(cd "$tmp/src$side" && go mod edit -replace "github.com/gohtgs/htgs=$tmp/$side" && go build -o "$tmp/$side.bin" .)
done
out=$tmp/out.txt
echo "load before: $(cat /proc/loadavg)"
i=0
while [ $i -lt "$n" ]; do
	i=$((i + 1))
	for m in $(echo "$what" | tr , ' '); do
		if [ $((i % 2)) = 0 ]; then order="A B"; else order="B A"; fi
		for side in $order; do
			"$tmp/$side.bin" -what "$m" | sed "s|^|$side $i |" >>"$out"
		done
	done
done
echo "load after: $(cat /proc/loadavg)"
echo "A = $a, B = $b, $n iterations; ns per item and task (stream), per task (once, run)"
med() { sort -n | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
for m in $(awk '{print $3}' "$out" | sort -u); do
	ma=$(awk -v m="$m" '$1=="A" && $3==m {print $4}' "$out" | med)
	mb=$(awk -v m="$m" '$1=="B" && $3==m {print $4}' "$out" | med)
	na=$(awk -v m="$m" '$1=="A" && $3==m {print $4}' "$out" | sort -n | head -1)
	nb=$(awk -v m="$m" '$1=="B" && $3==m {print $4}' "$out" | sort -n | head -1)
	r=$(awk -v m="$m" '$3==m {v[$1" "$2]=$4} END {for (k in v) {split(k, p, " "); if (p[1]=="B" && ("A " p[2]) in v) print v[k]/v["A " p[2]]}}' "$out" | med)
	printf '%-20s A %8s (%s)  B %8s (%s)  B/A %.3f\n' "$m" "$ma" "$na" "$mb" "$nb" "$r"
done
