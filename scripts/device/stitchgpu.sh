#!/usr/bin/env bash
# stitchgpu.sh: issue 38's GPU checks of stitching on a lent GPU machine (no
# Go there). Expected wall time about 110 s (limit 150 s); logs (small)
# under $OUT/stitchgpu/. Needs, built with -tags cuda:
#     .device-carry/stitching.test  (scripts/build-cuda-tests.sh, or
#                                    CGO_ENABLED=1 go test -c -tags cuda -o .device-carry/stitching.test ./stitching)
#     .device-carry/bin/stitch      (CGO_ENABLED=1 go build -tags cuda -o .device-carry/bin/stitch ./examples/stitch)
#
#  1. the cuda-tagged stitching tests (GPU box NCC against align.NCC bit
#     for bit, GPU refinement against the CPU's on a small grid) and the
#     GPU-graph tests on host memory posing as GPUs;
#  2. generates the paper grid (42 x 59 tiles of 1392 x 1040) into
#     $PAPER_GRID (default /dev/shm/paper; kept for stitchcpu.sh);
#  3. stitch -gpu -workers 16 -mosaic=false, then the CPU path (16
#     workers), and compares their positions byte for byte;
#  4. dd of the disk's write rate under /tmp, then stitch -gpu with the
#     pyramidal mosaic into /tmp (deleted afterwards);
#  5. if time is left (under 95 s so far), BenchmarkStitchGPU once (phase
#     times, bus bytes, GPU busy share).
# Prints PASS/FAIL lines against issue 38's targets; -profile phases go to
# $OUT/stitchgpu/profile-*/ (files over 512 KiB deleted).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
o="$OUT/stitchgpu"
mkdir -p "$o"
c="$PWD/.device-carry"
grid="${PAPER_GRID:-/dev/shm/paper}"
rows="${ROWS:-42}" cols="${COLS:-59}" tile="${TILE:-1392x1040}" # smaller for a dry run only
tm=()
[[ -x /usr/bin/time ]] && tm=(/usr/bin/time -f "peak RSS %M KiB")
t0=$(date +%s)
stamp() { echo "[+$(($(date +%s) - t0))s] $*"; }
secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}'; }
verdict() { # verdict NAME OK(0/1) DETAIL
	if [[ $2 == 1 ]]; then echo "PASS $1: $3"; else echo "FAIL $1: $3"; fi
}
lt() { awk -v a="$1" -v b="$2" 'BEGIN{exit !(a < b)}'; }
{
	date -u +%FT%TZ
	nproc
	nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
	df -h /tmp /dev/shm | tail -2
} >"$o/machine.log" 2>&1
cat "$o/machine.log"
for f in "$c/stitching.test" "$c/bin/stitch"; do
	[[ -x $f ]] || echo "FAIL setup: missing $f"
done

# 1. Tests.
stamp "tests"
(cd stitching && timeout -k 5 60 "$c/stitching.test" -test.count=1 -test.v \
	-test.run 'CUDA|GPU' 2>&1) | grep -vE '^=== (RUN|PAUSE|CONT)' >"$o/tests.log"
echo "stitching cuda tests: $(grep -c -- '^--- PASS' "$o/tests.log") pass, $(grep -c -- '^--- FAIL' "$o/tests.log") fail, $(grep -c -- '^--- SKIP' "$o/tests.log") skip; $(tail -n 1 "$o/tests.log")"
grep -E -- '^--- FAIL|refine_cuda_test|panic' "$o/tests.log" | head -30
grep -q -- '^--- PASS: TestCUDARefineMatchesCPU' "$o/tests.log" && grep -q -- '^--- PASS: TestCUDABoxNCC' "$o/tests.log"
verdict "GPU refinement tests" $((! $?)) "TestCUDABoxNCC and TestCUDARefineMatchesCPU"

# 2. The paper grid.
if [[ $(ls "$grid" 2>/dev/null | grep -c '\.tif$') -ne $((rows * cols)) ]]; then
	stamp "generating the paper grid into $grid"
	rm -rf "$grid"
	s=$(date +%s.%N)
	"$c/bin/stitch" -generate "$grid" -rows "$rows" -cols "$cols" -tile "$tile" >"$o/generate.log" 2>&1
	echo "generated: rc=$? in $(secs "$s") s, $(du -sh "$grid" | cut -f1)"
fi

# 3. GPU and CPU, no mosaic.
run() { # run NAME ARGS...: stitch into /tmp/sg-NAME, profile into $o/profile-NAME
	local name=$1
	shift
	rm -rf "/tmp/sg-$name"
	local s
	s=$(date +%s.%N)
	"${tm[@]}" "$c/bin/stitch" -dir "$grid" -rows "$rows" -cols "$cols" -out "/tmp/sg-$name" \
		-profile "$o/profile-$name" "$@" >"$o/stitch-$name.log" 2>&1
	local rc=$?
	local t
	t=$(secs "$s")
	find "$o/profile-$name" -type f \( -size +512k -o -name '*.svg' -o -name '*.dot' \) -delete 2>/dev/null
	echo "$name: rc=$rc $t s; $(grep -h 'stitched in\|peak RSS\|accuracy' "$o/stitch-$name.log" | tr '\n' ' ')"
	if ((rc != 0)); then
		tail -n 3 "$o/stitch-$name.log"
		t=999 # fails the targets
	fi
	eval "t_$name=$t"
}
stamp "stitch -gpu"
run gpu -gpu -workers 16 -mosaic=false
stamp "stitch on the CPU"
run cpu -workers 16 -mosaic=false
same=1
for f in global-positions relative-positions relative-positions-no-optimization; do
	if ! cmp -s "/tmp/sg-gpu/img-$f-1.txt" "/tmp/sg-cpu/img-$f-1.txt"; then
		same=0
		echo "differ: img-$f-1.txt"
		diff "/tmp/sg-gpu/img-$f-1.txt" "/tmp/sg-cpu/img-$f-1.txt" | head -20 >"$o/diff-$f.txt"
		head -8 "$o/diff-$f.txt"
	fi
done
verdict "positions GPU == CPU" $same "global, relative and unoptimized relative positions byte for byte"
lt "${t_gpu:-999}" 2.5
verdict "stitch -gpu -mosaic=false under 2.5 s" $((! $?)) "${t_gpu:-?} s (CPU ${t_cpu:-?} s)"
cp /tmp/sg-gpu/img-statistics.txt "$o/statistics-gpu.txt" 2>/dev/null

# 4. Disk rate and the mosaic.
stamp "dd"
dd if=/dev/zero of=/tmp/sg-dd bs=16M count=256 conv=fdatasync 2>"$o/dd.log"
rm -f /tmp/sg-dd
rate=$(grep -oE '[0-9.]+ [GM]B/s' "$o/dd.log" | tail -1)
echo "disk write rate (dd 4 GiB, fdatasync, /tmp): $rate"
stamp "stitch -gpu with the mosaic"
run mosaic -gpu -workers 16
size=$(du -sb /tmp/sg-mosaic/img-stitched-1.ome.tif 2>/dev/null | cut -f1)
gbs=$(echo "$rate" | awk '{v=$1; if ($2=="MB/s") v/=1000; print v}')
disk=$(awk -v s="${size:-0}" -v r="${gbs:-0}" 'BEGIN{if (r>0) printf "%.2f", s/1e9/r; else print 0}')
limit=$(awk -v d="$disk" 'BEGIN{l=1.3*d; if (l<6) l=6; printf "%.2f", l}')
lt "${t_mosaic:-999}" "$limit"
verdict "stitch -gpu with the mosaic" $((! $?)) "${t_mosaic:-?} s for $((${size:-0} / 1000000)) MB; disk alone ${disk} s at $rate; target max(6 s, 1.3 x disk) = $limit s"
rm -rf /tmp/sg-mosaic /tmp/sg-gpu /tmp/sg-cpu

# 5. The benchmark, if time is left.
if (($(date +%s) - t0 < 95)); then
	stamp "BenchmarkStitchGPU"
	(cd stitching && timeout -k 5 $((140 - ($(date +%s) - t0))) "$c/stitching.test" -test.run '^$' \
		-test.bench 'StitchGPU$' -test.benchtime 1x 2>&1) | tail -40 >"$o/bench.log"
	grep -E 'Benchmark|host|accuracy' "$o/bench.log"
else
	echo "skipped BenchmarkStitchGPU: no time left"
fi
stamp "done"
