#!/usr/bin/env bash
# gen.sh compiles the CUDA C kernels of package stitching
# (stitching/kernels/*.cu) to PTX (stitching/kernels/*.ptx), which the
# package embeds (-tags cuda) and loads with cuda.Device.LoadModule. Run it
# after changing a .cu file and commit the .ptx; it needs nvcc, no GPU.
# It is scripts/gen-cuda-ptx.sh (same target, same header filtering) on
# this folder.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/../../scripts/gen-cuda-ptx.sh" "$here"
