package tiled

import (
	"os"
	"syscall"
)

// openDirect opens path for writes that bypass the page cache
// (O_DIRECT), or fails where the file system refuses them (tmpfs).
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT, 0)
}
