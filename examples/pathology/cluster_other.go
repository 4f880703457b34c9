//go:build !linux

package main

import "syscall"

// childProcAttr returns the defaults: elsewhere than on Linux a worker
// process whose run died without stopping it exits when it loses the
// connection to the run's server.
func childProcAttr() *syscall.SysProcAttr { return nil }
