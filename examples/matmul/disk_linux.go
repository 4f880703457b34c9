//go:build linux

package main

import (
	"math"
	"syscall"
)

// diskFree returns the bytes available to this user on the file system
// holding dir, and the file system's device number.
func diskFree(dir string) (free int64, id uint64, ok bool) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return 0, 0, false
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0, 0, false
	}
	bsize := uint64(fs.Bsize)
	if bsize != 0 && uint64(fs.Bavail) > math.MaxInt64/bsize {
		return math.MaxInt64, uint64(st.Dev), true
	}
	return int64(uint64(fs.Bavail) * bsize), uint64(st.Dev), true
}
