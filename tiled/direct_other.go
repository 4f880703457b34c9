//go:build !linux

package tiled

import (
	"errors"
	"os"
)

// openDirect fails: direct writes are used on Linux only.
func openDirect(string) (*os.File, error) {
	return nil, errors.New("tiled: no direct writes on this system")
}
