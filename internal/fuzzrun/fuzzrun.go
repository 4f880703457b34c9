// Package fuzzrun prepares a fuzz target's run so that
//
//	go test -run '^$' -fuzz '^FuzzX$' -fuzztime 60s ./pkg
//
// fuzzes for the minute and ends green unless an input fails, on a small,
// busy machine. It changes nothing when the tests only run the seeds.
package fuzzrun

import (
	"flag"
	"runtime"
	"testing"
	"time"
)

// MinimizeTime is the -fuzzminimizetime Prepare sets when the command line
// gives none: the time the fuzzer spends shrinking each input that finds
// new coverage (the default, 60 s, outlasts a 60 s run, during which the
// fuzzer shows 0 execs/s).
const MinimizeTime = 3 * time.Second

// Prepare is called first in a fuzz target. When fuzzing (-fuzz), it
//
//   - bounds minimization to MinimizeTime per input, unless
//     -fuzzminimizetime is given;
//   - runs the process with one P (GOMAXPROCS 1) until the target ends.
//     The fuzzing coordinator treats the end of -fuzztime as normal only
//     if, when it wakes on the deadline, the deadline has already reached
//     the context its workers run under; with several Ps it can wake in
//     between, on a loaded machine, and fail the target with "context
//     deadline exceeded" and no input. With one P the goroutine that
//     cancels runs to its end before the coordinator runs.
func Prepare(f *testing.F) {
	fz := flag.Lookup("test.fuzz")
	if fz == nil || fz.Value.String() == "" {
		return
	}
	given := false
	flag.Visit(func(fl *flag.Flag) { given = given || fl.Name == "test.fuzzminimizetime" })
	if !given {
		if err := flag.Set("test.fuzzminimizetime", MinimizeTime.String()); err != nil {
			f.Fatalf("fuzzrun: -fuzzminimizetime: %v", err)
		}
	}
	prev := runtime.GOMAXPROCS(1)
	f.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}
