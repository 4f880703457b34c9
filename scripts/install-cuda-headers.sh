#!/usr/bin/env bash
# install-cuda-headers.sh installs the CUDA 11.8 headers (nvidia-cuda-dev:
# cuda.h, cufft.h, cublas_api.h, ...) and nvcc (nvidia-cuda-toolkit) from
# Debian bookworm's contrib/non-free components, so that `go build -tags cuda`
# and `go generate ./cuda/` work on a machine without a GPU.
#
# It adds one sources file of its own (it never edits the distribution's
# files), runs apt-get update, and installs the packages. Running it again is
# harmless: the sources file is rewritten with identical content and apt-get
# skips what is already installed. Needs root (or sudo) and network access;
# the download is about 5 GB and takes a few minutes.
#
# Usage: scripts/install-cuda-headers.sh [--headers-only]
#   --headers-only  install nvidia-cuda-dev only (no nvcc).
set -euo pipefail

SOURCES=/etc/apt/sources.list.d/htgs-nonfree.sources
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
PKGS=(nvidia-cuda-dev nvidia-cuda-toolkit)
if [[ "${1:-}" == "--headers-only" ]]; then
	PKGS=(nvidia-cuda-dev)
fi

SUDO=""
if [[ "$(id -u)" != 0 ]]; then
	SUDO=sudo
fi

if [[ -r /usr/include/cuda.h ]] && { [[ "${PKGS[*]}" == nvidia-cuda-dev ]] || command -v nvcc >/dev/null; }; then
	echo "install-cuda-headers: already installed ($(command -v nvcc || echo 'no nvcc'))"
	exit 0
fi

if ! grep -q 'VERSION_CODENAME=bookworm' /etc/os-release; then
	echo "install-cuda-headers: warning: written for Debian bookworm, found: $(grep PRETTY_NAME /etc/os-release)" >&2
fi

content="# Added by htgs scripts/install-cuda-headers.sh: CUDA headers and nvcc.
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free non-free-firmware
Signed-By: ${KEYRING}

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: contrib non-free non-free-firmware
Signed-By: ${KEYRING}
"
if [[ ! -f "$SOURCES" ]] || [[ "$(cat "$SOURCES")" != "$(printf '%s' "$content")" ]]; then
	printf '%s' "$content" | $SUDO tee "$SOURCES" >/dev/null
	echo "install-cuda-headers: wrote $SOURCES"
fi

$SUDO apt-get update
# The packages ask to accept the NVIDIA licence only for some components;
# answer non-interactively.
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${PKGS[@]}"

test -r /usr/include/cuda.h
echo "install-cuda-headers: done: $(grep -m1 '#define CUDA_VERSION' /usr/include/cuda.h)"
command -v nvcc >/dev/null && nvcc --version | tail -n 2 || true
