#!/usr/bin/env bash
# gen-cuda-ptx.sh compiles the CUDA C kernels of the cuda package
# (cuda/kernels/*.cu) to PTX (cuda/kernels/*.ptx), which the package embeds
# and the driver JIT-compiles at run time. Run it through
#
#     go generate ./cuda/
#
# (or directly, from anywhere) after changing a .cu file, and commit the
# .ptx. It needs nvcc (scripts/install-cuda-headers.sh installs nvcc 11.8);
# no GPU is needed.
#
# Target: virtual architecture compute_70 (PTX ISA 7.8 with nvcc 11.8). PTX
# is forward compatible: a driver JIT-compiles it for any newer GPU, so
# the same file runs on Volta (sm_70) through Hopper (sm_90) and later, and
# a CUDA 13 driver (which supports every PTX ISA up to its own) accepts it.
# Override with NVCC_ARCH=compute_XY, and the compiler with NVCC=path.
#
# Usage: scripts/gen-cuda-ptx.sh [KERNEL_DIR]   (default: cuda/kernels)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The folder of .cu files: the cuda package's by default; other packages'
# kernel folders (stitching/kernels) pass theirs.
kdir="${1:-$here/../cuda/kernels}"
NVCC="${NVCC:-nvcc}"
ARCH="${NVCC_ARCH:-compute_70}"

if ! command -v "$NVCC" >/dev/null; then
	echo "gen-cuda-ptx: $NVCC not found (run scripts/install-cuda-headers.sh)" >&2
	exit 1
fi

shopt -s nullglob
for cu in "$kdir"/*.cu; do
	ptx="${cu%.cu}.ptx"
	tmp="$ptx.tmp"
	# -lineinfo-free, deterministic output; --fmad=true is nvcc's default
	# (fused multiply-add), which the tests' tolerances allow for.
	"$NVCC" -ptx -arch="$ARCH" -O3 -o "$tmp" "$cu"
	# nvcc writes its build date and version into the header comment; keep
	# only the version so regenerating gives identical files.
	grep -v -e '^// Compiler Build ID' -e '^// Based on' -e '^// Cuda compilation tools' "$tmp" >"$ptx"
	rm -f "$tmp"
	echo "gen-cuda-ptx: $(basename "$cu") -> $(basename "$ptx") ($ARCH)"
done
