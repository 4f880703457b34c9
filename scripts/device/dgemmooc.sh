#!/usr/bin/env bash
# dgemmooc.sh: issue 35's out-of-core product on the GPU, never run on one
# before: matmul -a A.npy -b B.npy -o C.npy -kernel cuda with a RAM budget
# (-mem) below |A| + |B| + |C|, so that the blocks are read from and
# written to the .npy files as the product needs them, the inputs out of
# the page cache first; beside it the disk's own read rate (dd with
# O_DIRECT) and the same product with no budget (in memory). Logs under
# $OUT/dgemmooc/.
#
# N (default 16384: 2 GiB a matrix), MEM (default 3GiB), KERNEL (default
# cuda), BIN (default .device-carry/bin/matmul) and DIR (default
# /tmp/dgemmooc, on the machine's disk: /dev/shm would not be a disk) may
# be set. It runs anywhere with a small N and KERNEL=gonum, which is how
# it is checked without a GPU:
#     N=1024 MEM=8MiB KERNEL=gonum BIN=./matmul OUT=/tmp/o scripts/device/dgemmooc.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
: "${N:=16384}"
: "${MEM:=3GiB}"
: "${KERNEL:=cuda}"
: "${BIN:=.device-carry/bin/matmul}"
: "${DIR:=/tmp/dgemmooc}"
o="$OUT/dgemmooc"
mkdir -p "$o"
rm -rf "$DIR"
mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT
df -h "$DIR" | tail -1 | tee "$o/disk.txt"

# drop FILE...: the files' pages out of the page cache (GNU dd's nocache,
# posix_fadvise DONTNEED; dirty pages are written first by the sync).
drop() {
	sync
	for f in "$@"; do
		dd if="$f" iflag=nocache count=0 status=none
	done
}

# The inputs: two random products written as .npy files.
for f in A B; do
	timeout -k 2 90 "$BIN" -n "$N" -kernel "$KERNEL" -o "$DIR/$f.npy" >"$o/make-$f.log" 2>&1
	echo "make $f.npy (n=$N): rc=$? $(grep -hE '^time' "$o/make-$f.log")"
done
ls -la "$DIR" | tee -a "$o/disk.txt"

# The disk's read rate, O_DIRECT, the file out of the cache.
drop "$DIR/A.npy"
echo "dd A.npy O_DIRECT: $(dd if="$DIR/A.npy" of=/dev/null bs=64M iflag=direct 2>&1 | tail -n 1)" | tee "$o/dd.txt"

# Out of core, the inputs out of the cache.
drop "$DIR/A.npy" "$DIR/B.npy"
timeout -k 2 150 "$BIN" -a "$DIR/A.npy" -b "$DIR/B.npy" -o "$DIR/C.npy" -kernel "$KERNEL" -mem "$MEM" >"$o/ooc.log" 2>&1
echo "out of core, -mem $MEM: rc=$? $(grep -hE '^(C =|time|GPUs|disk)' "$o/ooc.log" | tr '\n' ' ')"
rm -f "$DIR/C.npy"

# In memory (no budget), the inputs out of the cache again: reading them
# is in its time too.
drop "$DIR/A.npy" "$DIR/B.npy"
timeout -k 2 150 "$BIN" -a "$DIR/A.npy" -b "$DIR/B.npy" -o "$DIR/C.npy" -kernel "$KERNEL" >"$o/inmem.log" 2>&1
echo "in memory: rc=$? $(grep -hE '^(C =|time|GPUs|disk)' "$o/inmem.log" | tr '\n' ' ')"
