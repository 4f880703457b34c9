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

// unwritable says why no file can be written on the file system holding
// dir, "" when nothing but its free space speaks against it: a read-only
// mount, or a virtual file system with no storage (proc, sysfs), whose
// free space reads 0 and where "not enough space" would be the wrong
// reason.
func unwritable(dir string) string {
	var fs syscall.Statfs_t
	if syscall.Statfs(dir, &fs) != nil {
		return ""
	}
	const stRdonly = 1 // ST_RDONLY in statfs(2)'s f_flags
	switch {
	case fs.Flags&stRdonly != 0:
		return "its file system is read-only"
	case fs.Type == 0x9fa0: // PROC_SUPER_MAGIC
		return "it is in /proc, a virtual file system that holds no files"
	case fs.Type == 0x62656572: // SYSFS_MAGIC
		return "it is in /sys, a virtual file system that holds no files"
	case fs.Blocks == 0:
		return "its file system has no storage (a virtual file system)"
	}
	return ""
}
