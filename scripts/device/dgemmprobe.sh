#!/usr/bin/env bash
# dgemmprobe.sh (issue 35, added in the eleventh session): TestCUDAProbe,
# the rates that bound the offload on their own (host copies, the bus,
# registration) and cuBLAS DGEMM on device-resident operands, square
# blocks and 4096 x 4096 blocks of C with k of 8192 and 16384. Why: from
# page-locked memory at n = 16384 the graph's 64 products of 4096-blocks
# run at 55.6 TFLOP/s while busy against 65 for one resident DGEMM of the
# whole matrix, and 55 TFLOP/s overall would need them at about 58
# (docs/matmul.md, tenth session). If a C block's whole k-sum in one call
# (k = 16384, over a row panel of A and a column panel of B laid out
# contiguously on the device) runs well above 58, that layout is worth
# building; if it runs like the 4096-blocks, the 55 target is out of
# reach of block products on this card. About 6 s; logs under
# $OUT/dgemmprobe/.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
o="$OUT/dgemmprobe"
mkdir -p "$o"
(cd matmul && HTGS_SWEEP=1 timeout -k 2 25 ../.device-carry/matmul.test -test.count=1 -test.v -test.run 'TestCUDAProbe$' 2>&1) >"$o/probe.log"
echo "probe: rc=$?"
grep PROBE "$o/probe.log"
