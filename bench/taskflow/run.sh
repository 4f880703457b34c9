#!/bin/sh
# Side by side: go-taskflow's Run().Wait() and htgs's g.Run of one item on
# the same shapes, in one process, interleaved rounds (medians and minima,
# ns per task).
#
#   bench/taskflow/run.sh /path/to/go-taskflow [-rounds 7]
#
# The first argument is a checkout of go-taskflow's source
# (github.com/noneback/go-taskflow; measured at v1.2.0-5-gfa25657). This
# folder is a module of its own, so that htgs does not depend on
# go-taskflow: it is copied to a temporary folder, pointed at the checkout
# and at this htgs tree, and run there. Note the load (cat /proc/loadavg)
# beside the numbers.
set -eu
if [ $# -lt 1 ] || [ ! -f "$1/go.mod" ]; then
	echo "usage: $0 /path/to/go-taskflow [flags]" >&2
	exit 2
fi
tf=$(cd "$1" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$here/go.mod" "$here/main.go" "$tmp/"
cd "$tmp"
go mod edit -replace "github.com/gohtgs/htgs=$root" -replace "github.com/noneback/go-taskflow=$tf"
GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
echo "load before: $(cat /proc/loadavg)"
GOFLAGS=-mod=mod go run . "$@"
echo "load after: $(cat /proc/loadavg)"
