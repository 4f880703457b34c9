#!/usr/bin/env bash
# install-cuda-headers.sh installs the CUDA headers (nvidia-cuda-dev: cuda.h,
# cufft.h, cublas_api.h, ...; CUDA 11.8 on Debian bookworm) and nvcc
# (nvidia-cuda-toolkit) from Debian's contrib/non-free components, so that
# `go build -tags cuda` and scripts/gen-cuda-ptx.sh work on a machine without a
# GPU.
#
# It names no mirror of its own: it reads the machine's apt sources (the
# deb822 *.sources files in /etc/apt/sources.list.d, such as debian.sources,
# and the one-line "deb URI suite components" entries of sources.list and
# *.list), keeps the entries of this Debian release that carry "main", and
# writes one sources file of its own with the same URIs, suites and keys
# but only the contrib, non-free and (bookworm and later) non-free-firmware
# components that those entries do not carry yet. So it works behind
# whatever mirror or proxy the machine is set up with. It never edits the
# distribution's files.
#
# Then it runs apt-get update and installs the packages. Running it again is
# harmless: the sources file is rewritten with identical content and apt-get
# skips what is already installed. Needs root (or sudo) and access to the
# machine's mirror; the download is about 5 GB and takes a few minutes.
#
# Usage: scripts/install-cuda-headers.sh [--headers-only | --print-sources]
#   --headers-only   install nvidia-cuda-dev only (no nvcc).
#   --print-sources  print the sources file it would write, and stop (no
#                    root, no apt-get).
#
# Environment (for testing and unusual setups):
#   APT_SOURCES_DIR   folder of *.sources and *.list files (/etc/apt/sources.list.d)
#   APT_SOURCES_LIST  one-line sources file (/etc/apt/sources.list)
#   OS_RELEASE        os-release file giving VERSION_CODENAME (/etc/os-release)
#   DEB_CODENAME      the release's code name, instead of OS_RELEASE's
#   HTGS_SOURCES_FILE the file to write ($APT_SOURCES_DIR/htgs-nonfree.sources)
set -euo pipefail

prog=install-cuda-headers
APT_SOURCES_DIR=${APT_SOURCES_DIR:-/etc/apt/sources.list.d}
APT_SOURCES_LIST=${APT_SOURCES_LIST:-/etc/apt/sources.list}
OS_RELEASE=${OS_RELEASE:-/etc/os-release}
SOURCES=${HTGS_SOURCES_FILE:-$APT_SOURCES_DIR/htgs-nonfree.sources}

mode=install
PKGS=(nvidia-cuda-dev nvidia-cuda-toolkit)
for arg in "$@"; do
	case "$arg" in
	--headers-only) PKGS=(nvidia-cuda-dev) ;;
	--print-sources) mode=print ;;
	-h | --help)
		sed -n 's/^# \{0,1\}//; /^Usage:/,/^$/p' "$0"
		exit 0
		;;
	*)
		echo "$prog: unknown argument $arg" >&2
		echo "Run '$0 --help' for usage." >&2
		exit 2
		;;
	esac
done

codename=${DEB_CODENAME:-}
if [[ -z "$codename" && -r "$OS_RELEASE" ]]; then
	codename=$(sed -n 's/^VERSION_CODENAME=//p' "$OS_RELEASE" | tr -d '"'"'" | head -n 1)
fi
if [[ -z "$codename" ]]; then
	echo "$prog: no VERSION_CODENAME in $OS_RELEASE; set DEB_CODENAME (such as bookworm)" >&2
	exit 1
fi

# The components to add. non-free-firmware exists from bookworm on.
want="contrib non-free non-free-firmware"
case "$codename" in
jessie | stretch | buster | bullseye) want="contrib non-free" ;;
esac

# list_entries prints one line per (URI, suite) of the machine's enabled
# "deb" entries: URI, suite, components, Signed-By and architectures,
# separated by tabs. A Signed-By holding an embedded key (several lines) is
# dropped: the distribution's keyring, which apt also trusts, signs the
# same archive.
list_entries() {
	local f deb822=() oneline=()
	if [[ -r "$APT_SOURCES_LIST" ]]; then
		oneline+=("$APT_SOURCES_LIST")
	fi
	if [[ -d "$APT_SOURCES_DIR" ]]; then
		for f in "$APT_SOURCES_DIR"/*.list; do
			[[ -r "$f" ]] && oneline+=("$f")
		done
		for f in "$APT_SOURCES_DIR"/*.sources; do
			# Never read back a file this script wrote.
			[[ -r "$f" && "$f" != "$SOURCES" && "${f##*/}" != htgs-nonfree.sources ]] && deb822+=("$f")
		done
	fi
	if ((${#deb822[@]})); then
		awk '
		function set(k, v) {
			if (k == "types") types = types " " v
			else if (k == "uris") uris = uris " " v
			else if (k == "suites") suites = suites " " v
			else if (k == "components") comps = comps " " v
			else if (k == "signed-by") signed = v
			else if (k == "architectures") arch = v
			else if (k == "enabled") enabled = tolower(v)
		}
		function flush(   n, m, i, j, U, S, c) {
			c = comps; sub(/^ +/, "", c)
			if ((" " types " ") ~ / deb / && enabled != "no" && uris != "" && suites != "") {
				n = split(uris, U, " "); m = split(suites, S, " ")
				for (i = 1; i <= n; i++) for (j = 1; j <= m; j++)
					printf "%s\t%s\t%s\t%s\t%s\n", U[i], S[j], c, (multikey ? "" : signed), arch
			}
			types = uris = suites = comps = signed = arch = enabled = key = ""; multikey = 0
		}
		FNR == 1 { flush() }
		/^#/ { next }
		/^[ \t]*$/ { flush(); next }
		/^[ \t]/ {
			if (key == "signed-by") multikey = 1
			else if (key != "") { v = $0; gsub(/[ \t]+/, " ", v); set(key, v) }
			next
		}
		{
			i = index($0, ":"); if (i == 0) { key = ""; next }
			key = tolower(substr($0, 1, i - 1)); v = substr($0, i + 1)
			gsub(/[ \t]+/, " ", v); sub(/^ /, "", v); sub(/ $/, "", v)
			set(key, v)
		}
		END { flush() }
		' "${deb822[@]}"
	fi
	if ((${#oneline[@]})); then
		awk '
		/^[ \t]*#/ { next }
		{
			line = $0; sub(/#.*/, "", line)
			sub(/^[ \t]+/, "", line)
			if (line !~ /^deb[ \t]/) next
			sub(/^deb[ \t]+/, "", line)
			signed = arch = ""
			if (substr(line, 1, 1) == "[") {
				e = index(line, "]"); if (e == 0) next
				n = split(substr(line, 2, e - 2), O, /[ \t]+/)
				for (i = 1; i <= n; i++) {
					k = tolower(O[i]); v = O[i]; sub(/=.*/, "", k); sub(/^[^=]*=/, "", v)
					gsub(/,/, " ", v)
					if (k == "signed-by") signed = v
					else if (k == "arch") arch = v
				}
				line = substr(line, e + 1)
			}
			sub(/^[ \t]+/, "", line); sub(/[ \t]+$/, "", line)
			n = split(line, F, /[ \t]+/)
			if (n < 3) next
			c = F[3]; for (i = 4; i <= n; i++) c = c " " F[i]
			printf "%s\t%s\t%s\t%s\t%s\n", F[1], F[2], c, signed, arch
		}
		' "${oneline[@]}"
	fi
}

# sources_content prints the sources file: for the entries of this release
# that carry main, the same URIs, suites, keys and architectures with the
# wanted components they lack.
sources_content() {
	list_entries | awk -F '\t' -v codename="$codename" -v want="$want" '
	BEGIN { nw = split(want, W, " ") }
	{
		uri = $1; suite = $2; comps = " " $3 " "
		if (uri ~ /^cdrom:/) next
		if (suite != codename && index(suite, codename "-") != 1) next
		if (comps !~ / main /) next
		need = ""
		for (i = 1; i <= nw; i++)
			if (index(comps, " " W[i] " ") == 0) need = need (need == "" ? "" : " ") W[i]
		if (need == "") next
		k = uri SUBSEP $4 SUBSEP $5 SUBSEP need
		if (!(k in suites)) { n++; key[n] = k; U[n] = uri; SB[n] = $4; AR[n] = $5; NE[n] = need; suites[k] = "" }
		if (index(" " suites[k] " ", " " suite " ") == 0) suites[k] = suites[k] (suites[k] == "" ? "" : " ") suite
	}
	END {
		if (n == 0) exit 1
		print "# Added by htgs scripts/install-cuda-headers.sh: the " want " components"
		print "# of this machine'"'"'s own Debian " codename " sources, for the CUDA headers and nvcc."
		for (i = 1; i <= n; i++) {
			printf "\nTypes: deb\nURIs: %s\nSuites: %s\nComponents: %s\n", U[i], suites[key[i]], NE[i]
			if (SB[i] != "") printf "Signed-By: %s\n", SB[i]
			if (AR[i] != "") printf "Architectures: %s\n", AR[i]
		}
	}'
}

if [[ "$mode" == install ]] && [[ -r /usr/include/cuda.h ]] && { [[ "${PKGS[*]}" == nvidia-cuda-dev ]] || command -v nvcc >/dev/null; }; then
	echo "$prog: already installed ($(command -v nvcc || echo 'no nvcc'))"
	exit 0
fi

if [[ "$codename" != bookworm ]]; then
	echo "$prog: warning: written for Debian bookworm, found $codename" >&2
fi

if ! content=$(sources_content); then
	echo "$prog: found no enabled 'deb' entry of $codename with component main in $APT_SOURCES_LIST or $APT_SOURCES_DIR/*.sources, *.list;" >&2
	echo "$prog: enable contrib and non-free there yourself, then run apt-get install ${PKGS[*]}" >&2
	exit 1
fi
if [[ "$mode" == print ]]; then
	printf '%s\n' "$content"
	exit 0
fi

SUDO=""
if [[ "$(id -u)" != 0 ]]; then
	SUDO=sudo
fi

if [[ ! -f "$SOURCES" ]] || [[ "$(cat "$SOURCES")" != "$content" ]]; then
	printf '%s\n' "$content" | $SUDO tee "$SOURCES" >/dev/null
	echo "$prog: wrote $SOURCES"
fi

$SUDO apt-get update
# The packages ask to accept the NVIDIA licence only for some components;
# answer non-interactively.
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${PKGS[@]}"

test -r /usr/include/cuda.h
echo "$prog: done: $(grep -m1 '#define CUDA_VERSION' /usr/include/cuda.h)"
command -v nvcc >/dev/null && nvcc --version | tail -n 2 || true
