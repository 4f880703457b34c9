#!/usr/bin/env bash
# gen-cuda-ptx.sh compiles the CUDA C kernels of a kernel folder (KERNEL.cu)
# to PTX (KERNEL.ptx, to read and to diff) and to a fat binary
# (KERNEL.fatbin), which the package beside it embeds: machine code (SASS)
# for Ampere (sm_80) and Hopper (sm_90), which the driver loads as it is,
# and the PTX, which it JIT-compiles for any other GPU. Without the SASS,
# the first run on a machine (no JIT cache yet) compiled every module
# first: about a second of the paper grid's 4 s cold stitch on an H200.
# The folders: stitching/kernels (stitching/kernels/gen.sh) and
# pathology/kernels; package cuda has no kernels of its own.
# Run it after changing a .cu file, and commit what it writes:
#
#     scripts/gen-cuda-ptx.sh [KERNEL_DIR ...]   (default: every folder above)
#
# from anywhere. It needs nvcc (scripts/install-cuda-headers.sh installs
# nvcc 11.8); no GPU is needed.
#
# Target: virtual architecture compute_70 (PTX ISA 7.8 with nvcc 11.8). PTX
# is forward compatible: a driver JIT-compiles it for any newer GPU, so
# the same file runs on Volta (sm_70) through Hopper (sm_90) and later, and
# a CUDA 13 driver (which supports every PTX ISA up to its own) accepts it.
# Override with NVCC_ARCH=compute_XY, the machine code's architectures with
# NVCC_SASS="80 90" and the compiler with NVCC=path.

set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The folders of .cu files.
if [[ $# -eq 0 ]]; then
	set -- "$here/../stitching/kernels" "$here/../pathology/kernels"
fi
NVCC="${NVCC:-nvcc}"
ARCH="${NVCC_ARCH:-compute_70}"
SASS="${NVCC_SASS:-80 90}"

if ! command -v "$NVCC" >/dev/null; then
	echo "gen-cuda-ptx: $NVCC not found (run scripts/install-cuda-headers.sh)" >&2
	exit 1
fi

shopt -s nullglob
cus=()
for dir in "$@"; do
	cus+=("$dir"/*.cu)
done
for cu in "${cus[@]}"; do
	ptx="${cu%.cu}.ptx"
	tmp="$ptx.tmp"
	# -lineinfo-free, deterministic output; --fmad=true is nvcc's default
	# (fused multiply-add), which the tests' tolerances allow for.
	"$NVCC" -ptx -arch="$ARCH" -O3 -o "$tmp" "$cu"
	# nvcc writes its build date and version into the header comment; keep
	# only the version so regenerating gives identical files.
	grep -v -e '^// Compiler Build ID' -e '^// Based on' -e '^// Cuda compilation tools' "$tmp" >"$ptx"
	rm -f "$tmp"
	fat="${cu%.cu}.fatbin"
	gencode=()
	for sm in $SASS; do
		gencode+=(-gencode "arch=compute_$sm,code=sm_$sm")
	done
	gencode+=(-gencode "arch=$ARCH,code=$ARCH")
	"$NVCC" -fatbin -O3 "${gencode[@]}" -o "$fat.tmp" "$cu"
	mv "$fat.tmp" "$fat"
	echo "gen-cuda-ptx: $(basename "$cu") -> $(basename "$ptx") ($ARCH), $(basename "$fat") (sm: $SASS; $ARCH)"
done
