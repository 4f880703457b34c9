//go:build !unix

package cputime

import "time"

// Process is 0: this platform's processor time is not read.
func Process() time.Duration { return 0 }
