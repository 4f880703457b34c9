package pathology

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"
)

// This file holds the hardware experiment's cost model of a tile's CPU
// operations. A tile's costs depend on what it shows: the generator draws
// between 4 and w*h/1500 nuclei per tile, and on the H200 machine of call
// 1 the operations that follow the nuclei (the watershed, labelling, the
// features) took several times longer on a crowded tile than on an empty
// one. Giving every tile the calibration sample's mean cost left the
// simulator with the sample's content (tiles 0..14 of seed 1 hold 12%
// more nuclei than the 40 tiles of the run) and without the imbalance of
// the last tiles. So each operation's cost under load is fitted, over the
// calibration's tiles, as a line in the tile's dark-pixel share, a
// one-pass measure of every tile taken before the runs (tileContent); the
// simulator and FinishAware's initial times get each tile's predicted
// cost.

// darkLevel is the least darkness (255 - mean of R, G, B) of a pixel the
// content measure counts: nuclei (darkness about 180) and red blood cells
// (165) pass, the pink background (about 40) does not.
const darkLevel = 128

// darkShare returns the share of the pixels of the planar w*h RGB image
// rgb whose darkness is at least darkLevel.
func darkShare(rgb []uint8, n int) float64 {
	if n == 0 {
		return 0
	}
	R, G, B := rgb[:n], rgb[n:2*n], rgb[2*n:3*n]
	cnt := 0
	for i, r := range R {
		if 255-(int(r)+int(G[i])+int(B[i]))/3 >= darkLevel { // darkness as darkness() computes it
			cnt++
		}
	}
	return float64(cnt) / float64(n)
}

// tileContent returns the dark-pixel share of every tile of s, read from
// its input storage on all cores.
func tileContent(ctx context.Context, s *Slide) ([]float64, error) {
	out := make([]float64, s.tiles)
	workers := min(s.tiles, runtime.GOMAXPROCS(0))
	next := make(chan int)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	n := s.size * s.size
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]uint8, 3*n)
			for i := range next {
				if errs[k] != nil {
					continue
				}
				b := s.Box(i)
				if err := s.in.Read(ctx, rgbID(), region.Cube(b.Lo[0], b.Lo[1], 0, b.Hi[0], b.Hi[1], 3), buf); err != nil {
					errs[k] = fmt.Errorf("content of tile %d: %w", i, err)
					continue
				}
				out[i] = darkShare(buf, n)
			}
		}()
	}
	for i := range s.tiles {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// costFit is an operation's cost as a line in a tile's content, fitted by
// least squares; the content is clamped to the range of the fit's sample,
// so the line is never extrapolated.
type costFit struct {
	a, b   float64 // nanoseconds: a + b*content
	lo, hi float64 // the sample's content range
	n      int     // sample size
}

// fitCost fits t against x (same length, at least one point). The line
// keeps its slope only where the content explains the costs: at least 4
// points and a slope at least twice its standard error (a t-test at about
// 95%); otherwise, with a single content value, or for an operation whose
// cost does not follow the content, the fit is the mean, which noise in a
// few loaded tiles cannot tilt.
func fitCost(x []float64, t []time.Duration) costFit {
	n := float64(len(x))
	var mx, mt float64
	for i := range x {
		mx += x[i] / n
		mt += float64(t[i]) / n
	}
	var sxx, sxt float64
	for i := range x {
		sxx += (x[i] - mx) * (x[i] - mx)
		sxt += (x[i] - mx) * (float64(t[i]) - mt)
	}
	f := costFit{a: mt, lo: slices.Min(x), hi: slices.Max(x), n: len(x)}
	if sxx <= 0 || len(x) < 4 {
		return f
	}
	b := sxt / sxx
	a := mt - b*mx
	var sse float64
	for i := range x {
		e := float64(t[i]) - (a + b*x[i])
		sse += e * e
	}
	if se := math.Sqrt(sse / (n - 2) / sxx); math.Abs(b) >= 2*se {
		f.a, f.b = a, b
	}
	return f
}

// at returns the fitted cost at content x (never below zero).
func (f costFit) at(x float64) time.Duration {
	x = min(max(x, f.lo), f.hi)
	return time.Duration(max(f.a+f.b*x, 0))
}

// cpuCost returns the predicted CPU cost under load of op on tile i: the
// content fit where the calibration has one, else its mean.
func (c *calibration) cpuCost(op string, tile int) time.Duration {
	f, ok := c.fit[op]
	if !ok || tile < 0 || tile >= len(c.content) {
		return c.cpu[op]
	}
	return f.at(c.content[tile])
}

// gpuCost returns the predicted GPU compute time of op on tile i: the
// content fit where the calibration has one, else the sequential pass's
// mean.
func (c *calibration) gpuCost(op string, tile int) time.Duration {
	if _, ok := c.gpu[op]; !ok {
		return 0
	}
	f, ok := c.gfit[op]
	if !ok || tile < 0 || tile >= len(c.content) {
		return c.gpu[op]
	}
	return f.at(c.content[tile])
}

// predictedMean returns the mean predicted CPU cost of op over tiles
// 0..tiles-1.
func (c *calibration) predictedMean(op string, tiles int) time.Duration {
	var sum time.Duration
	for i := range tiles {
		sum += c.cpuCost(op, i)
	}
	return sum / time.Duration(max(tiles, 1))
}

// instKey names one operation instance of a run: its tile and operation.
type instKey struct {
	tile int
	op   string
}

// instTimes records the compute time of every operation instance of a run
// on the kind of unit it ran on; safe for concurrent use.
type instTimes struct {
	mu       sync.Mutex
	cpu, gpu map[instKey]time.Duration
	t0       time.Time    // the run's start, the origin of events
	events   []traceEvent // every computation and transfer (a queued upload when waited for)
}

func newInstTimes() *instTimes {
	return &instTimes{cpu: map[instKey]time.Duration{}, gpu: map[instKey]time.Duration{}, t0: time.Now()}
}

// wrap returns impl timing each call into the CPU or the GPU record.
func (r *instTimes) wrap(op string, gpu bool, impl pats.Impl[*tileJob]) pats.Impl[*tileJob] {
	return func(ctx context.Context, dev device.Device, j *tileJob) error {
		t0 := time.Now()
		err := impl(ctx, dev, j)
		d := time.Since(t0)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, traceEvent{unit: dev.Name(), what: "compute", tile: j.index, op: op, start: t0.Sub(r.t0), end: t0.Add(d).Sub(r.t0)})
		if gpu {
			r.gpu[instKey{j.index, op}] = d
		} else {
			r.cpu[instKey{j.index, op}] = d
		}
		return err
	}
}

// cpuFactor returns the run's CPU compute time over the time the content
// model predicted for the same instances: above 1, the cores were slower
// under this run's mix of operations than under the calibration's load.
// It is 0 when nothing ran on a core.
func (r *instTimes) cpuFactor(c *calibration) float64 {
	var got, want time.Duration
	for k, d := range r.cpu {
		got += d
		want += c.cpuCost(k.op, k.tile)
	}
	if want == 0 {
		return 0
	}
	return float64(got) / float64(want)
}

// costs returns each instance's cost as the run had it: its measured
// time on the unit it ran on; on the other kind of unit, the content
// model's prediction scaled by the run's ratio of measured to predicted
// time for that operation on CPU cores, or the run's mean GPU time of the
// operation (the calibration's where it never ran on a GPU).
func (r *instTimes) costs(c *calibration) func(tile int, op string) pats.Cost {
	ratio := map[string]float64{}
	got, want := map[string]time.Duration{}, map[string]time.Duration{}
	gpuSum, gpuN := map[string]time.Duration{}, map[string]int{}
	for k, d := range r.cpu {
		got[k.op] += d
		want[k.op] += c.cpuCost(k.op, k.tile)
	}
	for op, w := range want {
		if w > 0 {
			ratio[op] = float64(got[op]) / float64(w)
		}
	}
	for k, d := range r.gpu {
		gpuSum[k.op] += d
		gpuN[k.op]++
	}
	return func(tile int, op string) pats.Cost {
		k := instKey{tile, op}
		cost := pats.Cost{CPU: r.cpu[k], GPU: r.gpu[k]}
		if _, ok := r.cpu[k]; !ok {
			f, ok := ratio[op]
			if !ok {
				f = 1
			}
			cost.CPU = time.Duration(f * float64(c.cpuCost(op, tile)))
		}
		if _, ok := r.gpu[k]; !ok {
			cost.GPU = c.gpuCost(op, tile)
			if n := gpuN[op]; n > 0 {
				cost.GPU = gpuSum[op] / time.Duration(n)
			}
		}
		return cost
	}
}
