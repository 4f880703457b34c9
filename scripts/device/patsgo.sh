#!/usr/bin/env bash
# patsgo.sh (issue 34): the baseline of the page-locked tile regions and
# of the staging from admission, pats.sh as GPU calls 1 to 4 ran it: the
# regions in Go memory (-go-memory) and each tile staged by its first
# reader's worker (-stage-on-first-use): FCFS, PATS and PATS+xfer once
# each (about 45 s, BUDGET 68), logs under $OUT/patsgo/pats/. Compare its
# host-GPU bandwidth and makespans with pats.sh's in the same call (the
# replay of both logs separates the two changes).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
OUT="$OUT/patsgo" GOMEM=1 FIRSTUSE="${FIRSTUSE:-1}" BUDGET="${BUDGET:-68}" CONFIGS="${CONFIGS:-fcfs,pats,patsx}" exec bash scripts/device/pats.sh
