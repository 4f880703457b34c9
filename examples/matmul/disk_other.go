//go:build !linux

package main

// diskFree does not know the free space outside Linux: no disk check.
func diskFree(string) (int64, uint64, bool) { return 0, 0, false }

// unwritable does not know outside Linux.
func unwritable(string) string { return "" }
