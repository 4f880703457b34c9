#!/usr/bin/env bash
# compare-numpy.sh: the default matmul CLI (OpenBLAS loaded at run time)
# against numpy's a @ b on the same OpenBLAS, alternated round by round,
# with the median rate of each and their ratio. numpy is run only if the
# Python found has it (Debian's python3-numpy links libblas.so.3, which
# the alternatives system points at OpenBLAS when libopenblas0-pthread is
# installed: check with `readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3`).
# OpenBLAS picks its CPU kernels from OPENBLAS_CORETYPE: when it is unset,
# the CLI sets it from the CPU's features, and this script passes numpy
# the core the CLI reports, so both run the same kernels.
#
# Usage: examples/matmul/compare-numpy.sh [N ...]     (default: 2048 4096)
#   ROUNDS=5 (rounds per size), PYTHON=/usr/bin/python3, MATMUL=path of a
#   built CLI (default: go build ./examples/matmul into a temporary folder),
#   MATMUL_FLAGS=extra CLI flags (say "-block 512" for the old default).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
rounds=${ROUNDS:-5}
py=${PYTHON:-/usr/bin/python3}
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(2048 4096)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mm=${MATMUL:-}
if [[ -z "$mm" ]]; then
	mm="$tmp/matmul"
	go build -o "$mm" ./examples/matmul
fi
cat >"$tmp/np.py" <<'EOF'
import sys, time
import numpy as np
n = int(sys.argv[1])
rng = np.random.default_rng(1)
a, b = rng.random((n, n)) * 2 - 1, rng.random((n, n)) * 2 - 1
t = time.perf_counter()
c = a @ b
dt = time.perf_counter() - t
print(f"time: {dt:.3f} s, {2 * n**3 / dt / 1e9:.2f} GFLOP/s")
EOF
havenp=1
if ! "$py" -c 'import numpy' 2>/dev/null; then
	echo "compare-numpy: $py has no numpy: the CLI alone"
	havenp=0
fi
core=${OPENBLAS_CORETYPE:-$("$mm" -n 64 | sed -n 's/^BLAS: OpenBLAS [^ ]* \([^ ]*\) .*/\1/p')}
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); OPENBLAS_CORETYPE for numpy: ${core:-unset}"
rate() { sed -n 's/^time: .*, \([0-9.]*\) GFLOP\/s.*/\1/p' | tail -n 1; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for n in "${sizes[@]}"; do
	: >"$tmp/cli" && : >"$tmp/np"
	for r in $(seq "$rounds"); do
		# shellcheck disable=SC2086
		"$mm" -n "$n" ${MATMUL_FLAGS:-} | rate >>"$tmp/cli"
		if [[ $havenp == 1 ]]; then
			OPENBLAS_CORETYPE=$core "$py" "$tmp/np.py" "$n" | rate >>"$tmp/np"
		fi
	done
	c=$(median <"$tmp/cli")
	echo "n=$n CLI GFLOP/s: $(tr '\n' ' ' <"$tmp/cli")-> median $c"
	if [[ $havenp == 1 ]]; then
		p=$(median <"$tmp/np")
		echo "n=$n numpy GFLOP/s: $(tr '\n' ' ' <"$tmp/np")-> median $p"
		awk -v c="$c" -v p="$p" -v n="$n" 'BEGIN {printf "n=%d CLI / numpy: %.2fx\n", n, c / p}'
	fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
