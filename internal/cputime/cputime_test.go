package cputime

import (
	"runtime"
	"testing"
)

// Process grows while the process computes (where it can be read).
func TestProcessGrows(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("processor time not read on this platform")
	}
	t0 := Process()
	x := uint64(1)
	for i := range 50_000_000 {
		x = x*6364136223846793005 + uint64(i)
	}
	if d := Process() - t0; d <= 0 {
		t.Fatalf("processor time grew by %v over a busy loop (%d)", d, x)
	}
}
