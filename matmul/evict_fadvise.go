//go:build linux && (amd64 || arm64)

package matmul

import (
	"fmt"
	"os"
	"syscall"
)

// posixFadvDontNeed is POSIX_FADV_DONTNEED from <fcntl.h> on Linux.
const posixFadvDontNeed = 4

// EvictFromCache writes the named file's dirty pages to disk and asks the
// kernel to drop its pages from the page cache (posix_fadvise
// POSIX_FADV_DONTNEED), so that the next reads come from the disk: a
// benchmarking aid for honest out-of-core timings. Pages mapped or in use
// elsewhere may stay cached. On systems without fadvise it returns an error
// wrapping errors.ErrUnsupported.
func EvictFromCache(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, posixFadvDontNeed, 0, 0); errno != 0 {
		return fmt.Errorf("matmul: posix_fadvise %s: %w", name, errno)
	}
	return nil
}
