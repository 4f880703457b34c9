#!/usr/bin/env bash
# gen.sh compiles the CUDA C kernels of package stitching
# (stitching/kernels/*.cu) to PTX (stitching/kernels/*.ptx), which the
# package embeds (-tags cuda) and loads with cuda.Device.LoadModule. Run it
# after changing a .cu file and commit the .ptx; it needs nvcc, no GPU.
# The target and the header filtering are those of scripts/gen-cuda-ptx.sh.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
kdir="$here"
NVCC="${NVCC:-nvcc}"
ARCH="${NVCC_ARCH:-compute_70}"

if ! command -v "$NVCC" >/dev/null; then
	echo "gen-stitching-ptx: $NVCC not found (run scripts/install-cuda-headers.sh)" >&2
	exit 1
fi

shopt -s nullglob
for cu in "$kdir"/*.cu; do
	ptx="${cu%.cu}.ptx"
	tmp="$ptx.tmp"
	"$NVCC" -ptx -arch="$ARCH" -O3 -o "$tmp" "$cu"
	grep -v -e '^// Compiler Build ID' -e '^// Based on' -e '^// Cuda compilation tools' "$tmp" >"$ptx"
	rm -f "$tmp"
	echo "gen-stitching-ptx: $(basename "$cu") -> $(basename "$ptx") ($ARCH)"
done
