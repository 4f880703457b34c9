//go:build !(linux && (amd64 || arm64))

package matmul

import (
	"errors"
	"fmt"
)

// EvictFromCache would drop the named file from the page cache; it is only
// implemented on 64-bit Linux (amd64, arm64).
func EvictFromCache(name string) error {
	return fmt.Errorf("matmul: evicting %s from the page cache: %w", name, errors.ErrUnsupported)
}
