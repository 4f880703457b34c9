package pathology

import (
	"context"
	"testing"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"
)

// TestFitCost: a line through exact points is found, and kept outside the
// sample's range clamped; costs that do not follow the content give the
// mean; fewer than 4 points give the mean.
func TestFitCost(t *testing.T) {
	x := []float64{0.01, 0.02, 0.03, 0.04, 0.05}
	line := make([]time.Duration, len(x))
	for i, v := range x {
		line[i] = time.Duration(10e6 + 4e9*v) // 10 ms + 4 ms per 0.1% dark
	}
	f := fitCost(x, line)
	if got, want := f.at(0.025), time.Duration(10e6+4e9*0.025); (got - want).Abs() > time.Microsecond {
		t.Errorf("line at 0.025: %v, want %v", got, want)
	}
	if got, want := f.at(0.5), line[len(line)-1]; (got - want).Abs() > time.Microsecond {
		t.Errorf("line beyond the sample: %v, want the value at its heaviest tile %v", got, want)
	}
	flat := []time.Duration{50e6, 40e6, 60e6, 45e6, 55e6} // no trend
	if f := fitCost(x, flat); f.b != 0 || f.at(0.01) != 50e6 {
		t.Errorf("untrended costs: slope %v, at 0.01 %v, want the mean 50ms", f.b, f.at(0.01))
	}
	if f := fitCost(x[:3], line[:3]); f.b != 0 || f.at(0.01) != (line[0]+line[1]+line[2])/3 {
		t.Errorf("3 points: slope %v, want the mean", f.b)
	}
	if f := fitCost([]float64{0.02, 0.02, 0.02, 0.02}, flat[:4]); f.b != 0 {
		t.Errorf("one content value: slope %v", f.b)
	}
}

// TestDarkShare counts the pixels as dark as a nucleus, not the pink
// background, and follows the generated tiles' nuclei.
func TestDarkShare(t *testing.T) {
	const w, h = 64, 32
	n := w * h
	rgb := make([]uint8, 3*n)
	for i := range n {
		rgb[i], rgb[n+i], rgb[2*n+i] = 235, 195, 215
	}
	if got := darkShare(rgb, n); got != 0 {
		t.Errorf("background: %v", got)
	}
	for i := range 100 {
		rgb[i], rgb[n+i], rgb[2*n+i] = 70, 40, 120
	}
	if got, want := darkShare(rgb, n), 100.0/float64(n); got != want {
		t.Errorf("100 nucleus pixels: %v, want %v", got, want)
	}
	// The generator draws 4..w*h/1500 nuclei per tile: on 512^2 tiles of
	// seed 1 the share must grow with the count drawn.
	ctx := context.Background()
	s, err := NewSlide(ctx, 6, 512, 1, region.NewMemory(), region.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	c, err := tileContent(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := 0, 0
	for i, v := range c {
		if v <= 0 || v >= 0.5 {
			t.Errorf("tile %d: dark share %v", i, v)
		}
		if v < c[lo] {
			lo = i
		}
		if v > c[hi] {
			hi = i
		}
	}
	buf := make([]uint8, 3*512*512)
	if genTile(buf, 512, 512, 1, lo) >= genTile(buf, 512, 512, 1, hi) {
		t.Errorf("darkest tile %d has no more nuclei drawn than the lightest %d (%v)", hi, lo, c)
	}
}

// TestInstTimesCosts: an instance's measured time is its cost on the unit
// it ran on; on the other, the prediction scaled by the run's ratio for
// the operation on cores, or the run's mean GPU time.
func TestInstTimesCosts(t *testing.T) {
	cal := &calibration{cpu: map[string]time.Duration{"A": 10e6}, gpu: map[string]time.Duration{"A": 1e6}}
	r := newInstTimes()
	cpuImpl := r.wrap("A", false, func(context.Context, device.Device, *tileJob) error { time.Sleep(20 * time.Millisecond); return nil })
	gpuImpl := r.wrap("A", true, func(context.Context, device.Device, *tileJob) error { return nil })
	if err := cpuImpl(context.Background(), device.Host{}, &tileJob{index: 0}); err != nil {
		t.Fatal(err)
	}
	if err := gpuImpl(context.Background(), device.Host{}, &tileJob{index: 1}); err != nil {
		t.Fatal(err)
	}
	ran := r.cpu[instKey{0, "A"}]
	if ran < 20*time.Millisecond {
		t.Fatalf("recorded %v for a 20 ms instance", ran)
	}
	cost := r.costs(cal)
	if c := cost(0, "A"); c.CPU != ran || c.GPU != r.gpu[instKey{1, "A"}] {
		t.Errorf("tile 0: %+v, want its measured CPU time %v and the run's mean GPU time", c, ran)
	}
	if c, want := cost(1, "A"), time.Duration(float64(ran)/float64(10e6)*10e6); (c.CPU - want).Abs() > time.Microsecond {
		t.Errorf("tile 1 on a core: %v, want the prediction scaled by the run's ratio, %v", c.CPU, want)
	}
	if f := r.cpuFactor(cal); f < 2 {
		t.Errorf("cpuFactor %v, want >= 2 (20 ms against 10 ms predicted)", f)
	}
}

// TestSimFlowsPerTileCost: the simulator's tiles cost what the cost
// function says for each: on one core, the makespan is the sum of every
// tile's costs.
func TestSimFlowsPerTileCost(t *testing.T) {
	h := &hwSetup{cpus: 1, tiles: 3, size: 8, specs: hardwareOperations(), regionBuf: realBytes(8)}
	cal := &calibration{cpu: map[string]time.Duration{}, gpu: map[string]time.Duration{}}
	cost := func(tile int, op string) pats.Cost { return pats.Cost{CPU: time.Duration(tile+1) * time.Millisecond} }
	rep, err := pats.Simulate(pats.Config{Policy: pats.FCFS}, pats.Machine{CPUs: 1}, h.simFlows(cal, nil, cost))
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Duration(len(h.specs)) * (1 + 2 + 3) * time.Millisecond; rep.Makespan != want {
		t.Errorf("makespan %v, want %v (each tile's own cost, every operation)", rep.Makespan, want)
	}
}

// TestGPUCostFollowsContent: a GPU operation's predicted time is its
// content fit at the tile's content where the calibration has one (the
// reconstructions' rounds grow with the tile), the sequential pass's mean
// where not, and nothing for an operation without a GPU implementation.
func TestGPUCostFollowsContent(t *testing.T) {
	x := []float64{0, 0.01, 0.02, 0.03, 0.04}
	ts := []time.Duration{1e6, 2e6, 3e6, 4e6, 5e6} // 1 ms + 100 ms per unit of dark share
	cal := &calibration{
		cpu:     map[string]time.Duration{"A": 50e6, "B": 50e6, "C": 50e6},
		gpu:     map[string]time.Duration{"A": 7e6, "B": 7e6},
		content: []float64{0.005, 0.035, 0.1},
		gfit:    map[string]costFit{"A": fitCost(x, ts)},
	}
	for tile, want := range []time.Duration{1.5e6, 4.5e6, 5e6} { // the last clamped to the fit's range
		if got := cal.predicted(tile, "A").GPU; (got - want).Abs() > time.Microsecond {
			t.Errorf("A on tile %d: %v, want %v", tile, got, want)
		}
	}
	if got := cal.predicted(1, "B").GPU; got != 7e6 {
		t.Errorf("B without a fit: %v, want the mean 7ms", got)
	}
	if got := cal.predicted(1, "C").GPU; got != 0 {
		t.Errorf("C, CPU only: %v, want 0", got)
	}
}
