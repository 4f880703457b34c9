package cluster

import "syscall"

// workerProcAttr puts a local worker in its own process group, so that a
// Ctrl-C in the terminal reaches only the supervising program, which stops
// its workers in order, and has the kernel send the worker SIGTERM if the
// supervisor dies without stopping it (its standard input closes too).
func workerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
