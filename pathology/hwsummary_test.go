package pathology

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gohtgs/htgs/pats"
)

// hwRunOf is a run of the named configuration with the given makespan in
// seconds.
func hwRunOf(name string, s float64) hwRun {
	return hwRun{name: name, rep: &pats.Report{Makespan: time.Duration(s * float64(time.Second))}}
}

// TestHWSummaryFindsRunsByName checks that the comparison line takes the
// runs by configuration (means of repeats), whatever -hw-configs order
// made them, and says nothing of configurations not run (GPU call 3 ran
// fcfs,pats,fcfs,pats,dl and the line, taken by position, compared the
// wrong runs and reported learned and 50%-wrong runs that were not made).
func TestHWSummaryFindsRunsByName(t *testing.T) {
	cf := hwConfigs(0, 0, nil, nil, false)
	runs := []hwRun{
		hwRunOf(cf["fcfs"].name, 8), hwRunOf(cf["pats"].name, 6),
		hwRunOf(cf["fcfs"].name+" #2", 6), hwRunOf(cf["pats"].name+" #2", 4),
		hwRunOf(cf["dl"].name, 3.5),
	}
	got := hwSummary(runs)
	// FCFS mean 7 s, PATS mean 5 s, PATS+DL+prefetch 3.5 s.
	if want := "PATS over FCFS 1.40x (PATS+DL+prefetch 2.00x)."; !strings.Contains(got, want) {
		t.Errorf("summary %q, want it to contain %q", got, want)
	}
	for _, absent := range []string{"learned", "wrong", "speedup order", "xfer"} {
		if strings.Contains(got, absent) {
			t.Errorf("summary %q mentions %q, which was not run", got, absent)
		}
	}

	runs = append(runs, hwRunOf(cf["learned"].name, 3.85), hwRunOf(cf["wrong50"].name, 3.15), hwRunOf(cf["order"].name, 5.6),
		hwRunOf(cf["patsx"].name, 4.8), hwRunOf(cf["patsx"].name+" #2", 5.2), hwRunOf(cf["dlx"].name, 3.5))
	got = hwSummary(runs)
	for _, want := range []string{"PATS+xfer (effective speedups with data movement) over FCFS 1.40x", "PATS+xfer+DL+prefetch over FCFS 2.00x", "learned speedups +10.0%", "50%-wrong estimates -10.0%", "speedup order only (cores take any operation when nothing ranks lower) over FCFS 1.25x"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q, want it to contain %q", got, want)
		}
	}

	if got := hwSummary([]hwRun{hwRunOf(cf["pats"].name, 5)}); got != "" {
		t.Errorf("summary without an FCFS run %q, want none", got)
	}
}

// The sensitivity sweep's line compares each wrongN run with
// PATS+DL+prefetch on the measured speedups, and the sweep's points
// beyond 50% run only when named.
func TestHWSummarySensitivitySweep(t *testing.T) {
	cf := hwConfigs(0, 0, nil, nil, false)
	runs := []hwRun{hwRunOf(cf["dl"].name, 4), hwRunOf(cf["wrong25"].name, 4.2), hwRunOf(cf["wrong50"].name, 4.4),
		hwRunOf(cf["wrong75"].name, 5), hwRunOf(cf["wrong100"].name, 6)}
	got := hwSummary(runs)
	if want := "PATS+DL+prefetch's makespan against its own with the measured speedups: 25% +5.0%, 50% +10.0%, 75% +25.0%, 100% +50.0%."; !strings.Contains(got, want) {
		t.Errorf("summary %q, want it to contain %q", got, want)
	}
	if got := hwSummary(runs[:3:3]); strings.Contains(got, "75%") {
		t.Errorf("summary %q reports a 75%% point that was not run", got)
	}
	def := defaultHardwareConfigs(false)
	for _, n := range []string{"wrong25", "wrong75", "wrong100"} {
		if _, ok := cf[n]; !ok {
			t.Errorf("no configuration %q", n)
		}
		if slices.Contains(def, n) {
			t.Errorf("the default configurations %v run %q", def, n)
		}
	}
	if d := defaultHardwareConfigs(true); slices.Contains(d, "order") || len(d) != len(def)-1 {
		t.Errorf("default without order %v, with it %v", d, def)
	}
	// wrongN moves each estimate N% away from the median, in opposite
	// directions below and above it.
	sp := map[string]float64{"a": 2, "b": 10, "c": 100}
	w := wrongEstimates(sp, 75)
	if w["a"] != 3.5 || w["b"] != 2.5 || w["c"] != 25 {
		t.Errorf("75%% wrong estimates %v of %v", w, sp)
	}
}

// TestSchedWaits checks the summary of the scheduler's wait histogram:
// the difference of two readings, the waits of at least 1 and 10 ms, and
// the lower bound of their total; and that the runtime has the metric.
func TestSchedWaits(t *testing.T) {
	inf := math.Inf(1)
	b := []float64{math.Inf(-1), 0, 1e-6, 1e-3, 10e-3, inf}
	before := schedWaits{counts: []uint64{0, 5, 1, 0, 0}, buckets: b}
	after := schedWaits{counts: []uint64{0, 9, 3, 4, 1}, buckets: b}
	n, ms1, ms10, total := after.sub(before).summary()
	if n != 11 || ms1 != 5 || ms10 != 1 || total != 4*time.Millisecond+10*time.Millisecond+2*time.Microsecond {
		t.Errorf("summary: %d waits, %d >= 1 ms, %d >= 10 ms, %v in all", n, ms1, ms10, total)
	}
	if w := readSchedWaits(); len(w.counts) == 0 || len(w.buckets) != len(w.counts)+1 {
		t.Errorf("the runtime's /sched/latencies histogram: %d counts, %d boundaries", len(w.counts), len(w.buckets))
	}
}
