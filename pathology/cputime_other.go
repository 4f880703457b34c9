//go:build !linux

package pathology

import "time"

// threadCPUTime reports that the thread's CPU time is not available on
// this platform.
func threadCPUTime() (time.Duration, bool) { return 0, false }

// processCPUTime reports that the process's CPU time is not available on
// this platform.
func processCPUTime() (time.Duration, bool) { return 0, false }
