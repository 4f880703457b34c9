#!/usr/bin/env bash
# pathtests.sh: the cuda-tagged tests of package pathology on a lent GPU
# machine (its kernels, loaded from the embedded fat binary, against the
# CPU's; a small hardware run). Logs under $OUT/pathtests/. Needs
# .device-carry/pathology.test (scripts/device/pack.sh).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
o="$OUT/pathtests"
mkdir -p "$o"
(cd pathology && timeout -k 2 50 ../.device-carry/pathology.test -test.count=1 -test.v \
	-test.run 'CUDA' 2>&1) | grep -E '^(--- |PASS|FAIL|ok|panic)' >"$o/tests.log"
echo "pathology CUDA tests: $(grep -c '^--- PASS' "$o/tests.log") pass, $(grep -c '^--- FAIL' "$o/tests.log") fail, $(grep -c '^--- SKIP' "$o/tests.log") skip; $(tail -n 1 "$o/tests.log")"
grep -E '^--- (FAIL|SKIP)' "$o/tests.log" | head || true
