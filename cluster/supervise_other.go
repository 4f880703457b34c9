//go:build !linux

package cluster

import "syscall"

// workerProcAttr returns the defaults: elsewhere than on Linux a local
// worker whose supervisor died stops when its standard input closes.
func workerProcAttr() *syscall.SysProcAttr { return nil }
