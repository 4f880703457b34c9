#!/usr/bin/env bash
# patscores.sh (issue 34): the storage on the cores, for comparison in the
# same call: pats.sh with STORECORES=1 (-storage-on-cores: the CPU workers
# stage the tiles and commit their outputs, pats.Config.StorageOnCores,
# and the simulator models it) on FCFS and PATS+DL+prefetch with the
# estimates 0, 75 and 100% wrong, logs under $OUT/patscores/pats/.
# pats.sh and patssweep.sh run the same points with stagers and
# committers on goroutines of their own. With the cores busy (FCFS, 100%
# wrong) the eighth session's iterative GPU operations took 25-30% longer
# on average than alone, the likely cause the GPU worker's polling
# goroutine preempted behind those goroutines (docs/pats/hardware.md);
# on the CPU harness the storage on the cores removes that and costs the
# cores the copying instead.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:=/tmp/out}"
OUT="$OUT/patscores" STORECORES=1 CONFIGS="${CONFIGS:-fcfs,dl,wrong75,wrong100}" BUDGET="${BUDGET:-66}" HWLIMIT="${HWLIMIT:-58}" exec bash scripts/device/pats.sh
