#!/usr/bin/env bash
# pack.sh builds what scripts/device/run-all.sh runs on a GPU machine that
# has no Go: the cuda-tagged test binaries (scripts/build-cuda-tests.sh,
# without the -race ones) and the CLIs stitch, matmul and pathology built
# with -tags cuda, packed into .device-pack/carry.tar.xz (the device tool
# carries at most 64 MiB). Needs cgo and the CUDA headers
# (scripts/install-cuda-headers.sh); no GPU.
#
# Then, with the device tool: carry [".device-pack"], command
#     "scripts/device/run-all.sh"
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export GOFLAGS="${GOFLAGS:-} -trimpath -ldflags=-s" # -s drops DWARF too (Go >= 1.22)
NORACE=1 scripts/build-cuda-tests.sh .device-carry >/dev/null
mkdir -p .device-carry/bin .device-pack
for p in stitch matmul pathology; do
	CGO_ENABLED=1 go build -tags cuda -o ".device-carry/bin/$p" "./examples/$p"
done
(cd .device-carry && tar -cf - ./*.test run.sh packages.txt bin) | xz -T2 -9 >.device-pack/carry.tar.xz.tmp
mv .device-pack/carry.tar.xz.tmp .device-pack/carry.tar.xz
ls -la .device-carry .device-carry/bin .device-pack
