//go:build !unix

package cap

import "time"

// cpuTime is unknown here: 0, and the overhead's processor time with it.
func cpuTime() time.Duration { return 0 }
