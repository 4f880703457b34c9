#!/usr/bin/env bash
# patssweep.sh (issue 34): the paper's sensitivity sweep on real hardware,
# PATS+DL+prefetch with the operations' speedup estimates 0, 25, 50, 75
# and 100% wrong (pats.sh with SWEEP=1; about 60 s, BUDGET 95), logs under
# $OUT/patssweep/pats/. The summary line compares each point with the run
# on the measured speedups.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
OUT="$OUT/patssweep" SWEEP=1 exec bash scripts/device/pats.sh
