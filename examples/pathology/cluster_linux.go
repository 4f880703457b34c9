package main

import "syscall"

// childProcAttr puts a worker process in its own process group, so that a
// Ctrl-C in the terminal reaches the run, which stops its workers in
// order, and has the kernel send it SIGTERM if the run dies without
// stopping it (SIGKILL, a crash).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
