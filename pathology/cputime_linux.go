package pathology

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPUTime returns the CPU time the calling OS thread has used
// (clock_gettime of CLOCK_THREAD_CPUTIME_ID), and true; the caller must be
// locked to its thread.
func threadCPUTime() (time.Duration, bool) {
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// processCPUTime returns the CPU time (user and system) every thread of
// the process has used, and true.
func processCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
