#!/usr/bin/env bash
# build-cuda-tests.sh builds the test binaries of every package that has
# cuda-tagged tests (go test -c -tags cuda), so they can be carried to a GPU
# machine that has no Go toolchain, and writes a run script and a README
# next to them. The GPU benchmarks are in those binaries: matmul.test holds
# BenchmarkMatmulCUDA, stitching.test BenchmarkStitchGPU, cuda.test the
# cuda package's own.
#
# Usage: scripts/build-cuda-tests.sh [OUTDIR]     (default: .device-carry)
#        NORACE=1 scripts/build-cuda-tests.sh       (skip the -race binaries)
#
# Needs cgo and the CUDA headers (scripts/install-cuda-headers.sh); no GPU.
# The binaries link only libc: libcuda.so.1, cuBLAS and cuFFT are opened at
# run time, so they run with the GPU machine's driver and CUDA libraries
# (CUDA 11.8 headers here, CUDA 12/13 there). They need glibc >= 2.34 on
# the GPU machine.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${1:-.device-carry}"
mkdir -p "$out"
rm -f "$out"/*.test "$out/packages.txt" "$out/run.sh" "$out/README.txt"

# Packages (directories) with a test file whose build constraint names cuda.
mapfile -t dirs < <(grep -rlE --include='*_test.go' '^//go:build .*\bcuda\b' . |
	grep -v -e "^\./$out/" -e '/vendor/' | xargs -r -n1 dirname | sort -u)
if [[ ${#dirs[@]} -eq 0 ]]; then
	echo "build-cuda-tests: no cuda-tagged tests found" >&2
	exit 1
fi

for dir in "${dirs[@]}"; do
	rel="${dir#./}"
	name="$(echo "$rel" | tr / _).test" # matmul -> matmul.test
	if [[ "$rel" == "." ]]; then
		name="htgs.test" # the module root, were it to get cuda-tagged tests
	fi
	echo "build-cuda-tests: $rel -> $out/$name"
	CGO_ENABLED=1 go test -c -tags cuda -o "$out/$name" "./$rel"
	if [[ -z "${NORACE:-}" ]]; then
		# The same tests with the race detector (run.sh uses it with RACE=1).
		CGO_ENABLED=1 go test -c -race -tags cuda -o "$out/${name%.test}.race.test" "./$rel"
	fi
	echo "$rel $name" >>"$out/packages.txt"
done

cat >"$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# run.sh runs the carried cuda test binaries, each in its package directory.
# Run from anywhere in the repository copy on the GPU machine:
#
#     .device-carry/run.sh                 # tests, verbose
#     BENCH=1 .device-carry/run.sh         # tests, then benchmarks
#     BENCH=MatmulCUDA .device-carry/run.sh  # tests, then matching benchmarks
#     RACE=1 .device-carry/run.sh          # tests under the race detector
#     .device-carry/run.sh -test.run Dgemm # extra flags go to every binary
#
# Output is also written to $OUT/cuda-tests.log when $OUT is set.
set -uo pipefail
carry="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$carry")"
log=/dev/null
if [[ -n "${OUT:-}" ]]; then
	log="$OUT/cuda-tests.log"
fi
{
	echo "== $(date -u +%FT%TZ) $(uname -nr)"
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
} | tee -a "$log"
rc=0
while read -r pkg bin; do
	if [[ -n "${RACE:-}" ]]; then
		bin="${bin%.test}.race.test"
	fi
	echo "== $pkg ($bin)" | tee -a "$log"
	(cd "$root/$pkg" && "$carry/$bin" -test.v -test.count=1 "$@") 2>&1 | tee -a "$log"
	r=${PIPESTATUS[0]}
	[[ $r -ne 0 ]] && rc=$r
	if [[ -n "${BENCH:-}" ]]; then
		pattern=.
		if [[ "$BENCH" != 1 ]]; then
			pattern="$BENCH"
		fi
		(cd "$root/$pkg" && "$carry/$bin" -test.run '^$' -test.bench "$pattern" -test.benchmem -test.benchtime "${BENCHTIME:-2s}" "$@") 2>&1 | tee -a "$log"
		r=${PIPESTATUS[0]}
		[[ $r -ne 0 ]] && rc=$r
	fi
done <"$carry/packages.txt"
exit $rc
RUN
chmod +x "$out/run.sh"

cat >"$out/README.txt" <<README
CUDA test binaries built $(date -u +%FT%TZ) by scripts/build-cuda-tests.sh
from commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown) with $(go version | cut -d' ' -f3).

Run them on the GPU machine (no Go needed) from the repository copy:
    .device-carry/run.sh                  tests (skip cleanly without a GPU)
    BENCH=1 .device-carry/run.sh          tests and benchmarks
    BENCH=MatmulCUDA .device-carry/run.sh tests and the GPU DGEMM benchmark
                                          (matmul.test; BENCH is a -test.bench pattern)
    RACE=1 .device-carry/run.sh           tests under the race detector
    .device-carry/cuda.test -test.v -test.run TestDgemm   one test
With the session's run tool: carry [".device-carry"], command
    ".device-carry/run.sh"  (the log goes to \$OUT/cuda-tests.log).
If cuBLAS/cuFFT are not on the loader path, set HTGS_CUBLAS / HTGS_CUFFT to
the library files (e.g. /usr/local/cuda/lib64/libcublas.so.13).
README
echo "build-cuda-tests: done; see $out/README.txt"
ls -la "$out"
