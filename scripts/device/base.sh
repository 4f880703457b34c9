#!/usr/bin/env bash
# base.sh: the cuda package's own tests on the GPU machine. Logs under
# $OUT/base/.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
o="$OUT/base"
mkdir -p "$o"
c=.device-carry
(cd cuda && "../$c/cuda.test" -test.count=1 -test.v 2>&1 | grep -E '^(--- |PASS|FAIL|ok|panic)') >"$o/cuda-tests.log" 2>&1
echo "cuda tests: $(grep -c '^--- PASS' "$o/cuda-tests.log") pass, $(grep -c '^--- FAIL' "$o/cuda-tests.log") fail, $(grep -c '^--- SKIP' "$o/cuda-tests.log") skip; $(tail -n 1 "$o/cuda-tests.log")"
