//go:build unix

package infile

import (
	"os"
	"syscall"
)

// nonBlock makes the open of a FIFO return at once instead of waiting for
// a writer.
const nonBlock = syscall.O_NONBLOCK

// blocking clears O_NONBLOCK on a regular file's descriptor (it has no
// effect on regular files on Linux, but other systems may differ).
func blocking(f *os.File) error {
	return syscall.SetNonblock(int(f.Fd()), false)
}
