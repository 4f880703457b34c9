//go:build unix

package outfile

import (
	"errors"
	"syscall"
)

// alive reports whether process pid exists (EPERM: it exists, owned by
// someone else).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
