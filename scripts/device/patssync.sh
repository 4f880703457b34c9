#!/usr/bin/env bash
# patssync.sh (issue 34): the GPU worker of the sessions before the ninth,
# for comparison in the same call: pats.sh with SYNCUP=1 (-sync-uploads:
# an upload, a compute and a download goroutine, each waiting for its
# copies or kernels) on PATS+DL+prefetch with the estimates 0, 75 and
# 100% wrong, logs under $OUT/patssync/pats/. patssweep.sh runs the same
# points with the default worker (one goroutine queueing its copies).
# Those points were where the simulator missed by 24-29% in the eighth
# session: with the cores busy, the goroutines shared one thread and
# waited for each other (gpu_overlap.py).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
OUT="$OUT/patssync" SYNCUP=1 CONFIGS="${CONFIGS:-dl,wrong75,wrong100}" BUDGET="${BUDGET:-66}" HWLIMIT="${HWLIMIT:-58}" exec bash scripts/device/pats.sh
