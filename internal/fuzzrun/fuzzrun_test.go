package fuzzrun

import (
	"flag"
	"runtime"
	"testing"
)

// Without -fuzz, Prepare changes neither the minimization time nor
// GOMAXPROCS.
func TestPrepareWithoutFuzzing(t *testing.T) {
	if fz := flag.Lookup("test.fuzz"); fz == nil || fz.Value.String() != "" {
		t.Skip("run with -fuzz")
	}
	before := flag.Lookup("test.fuzzminimizetime").Value.String()
	procs := runtime.GOMAXPROCS(0)
	var f testing.F
	Prepare(&f)
	if got := flag.Lookup("test.fuzzminimizetime").Value.String(); got != before || runtime.GOMAXPROCS(0) != procs {
		t.Errorf("minimize time %s (was %s), GOMAXPROCS %d (was %d)", got, before, runtime.GOMAXPROCS(0), procs)
	}
}
