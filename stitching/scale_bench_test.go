package stitching

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gohtgs/htgs/internal/stat"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// scaleRounds is the least number of sequential, graph rounds
// benchInterleaved runs.
const scaleRounds = 5

// BenchmarkStitchScale measures the task graph (2 workers) against the
// sequential baseline on grids of growing size (4x5, 8x10 and 16x20 tiles
// of 512x384, and 8x10 of 1392x1040, realistic content generated in
// memory), as issue 15 asks:
//
//	go test -c ./stitching && ./stitching.test -test.run '^$' -test.bench StitchScale -test.benchtime 5x -test.v
//
// Each grid runs N rounds (-test.benchtime Nx; at least 5) of one
// sequential stitch then one graph stitch (A, B, A, B, ...), after one
// untimed run of each (FFTW plans), so that both see the same machine load;
// it reports for each the best and the median rate (tiles/s), and the
// median and the lowest of the rounds' graph/sequential ratios. -test.v
// logs every round with the load average.
//
// Each round also runs two sequential stitches at once, one per core, with
// nothing shared ("2seq", its rate counting both grids). Its ratio to one
// sequential stitch ("ceiling-ratio") is what the two cores give this
// work when nothing waits for anything: the most any scheduling of it can
// reach on the machine. "of-ceiling" is the graph's rate against it.
func BenchmarkStitchScale(b *testing.B) {
	for _, sz := range []struct{ rows, cols, w, h int }{
		{4, 5, 512, 384}, {8, 10, 512, 384}, {16, 20, 512, 384}, {8, 10, 1392, 1040},
	} {
		cfg := synth.DefaultConfig()
		cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight = sz.rows, sz.cols, sz.w, sz.h
		b.Run(fmt.Sprintf("%dx%d_of_%dx%d", sz.rows, sz.cols, sz.w, sz.h), func(b *testing.B) {
			g := synthGrid(b, cfg)
			benchInterleaved(b, g.source(b), 2)
		})
	}
}

// benchInterleaved runs b.N rounds (at least scaleRounds) of Sequential then
// Stitch with the given workers on src and reports their rates and ratio
// (see BenchmarkStitchScale).
func benchInterleaved(b *testing.B, src tileio.TileSource, workers int) {
	ctx := context.Background()
	tiles := float64(src.Rows() * src.Cols())
	runs := []struct {
		name string
		run  func() (*Result, error)
	}{
		{"seq", func() (*Result, error) { return Sequential(ctx, src, align.Options{}) }},
		{"graph", func() (*Result, error) { return Stitch(ctx, src, align.Options{}, GraphOptions{Workers: workers}) }},
		{"2seq", func() (*Result, error) {
			return concurrently(workers, func() (*Result, error) { return Sequential(ctx, src, align.Options{}) })
		}},
	}
	perRun := []float64{tiles, tiles, tiles * float64(workers)}
	timed := func(run func() (*Result, error)) time.Duration {
		t0 := time.Now()
		if _, err := run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for _, r := range runs {
		timed(r.run) // untimed: FFTW plans, first allocations
	}
	rates := make([][]float64, len(runs))
	var ratios, ceilings []float64
	round := func() {
		for k, r := range runs {
			rates[k] = append(rates[k], perRun[k]/timed(r.run).Seconds())
		}
		i := len(ratios)
		ratios = append(ratios, rates[1][i]/rates[0][i])
		ceilings = append(ceilings, rates[2][i]/rates[0][i])
		b.Logf("round %d: sequential %.1f tiles/s, graph %.1f tiles/s, ratio %.2f; %d sequential at once %.1f tiles/s, ratio %.2f; load %s",
			i+1, rates[0][i], rates[1][i], ratios[i], workers, rates[2][i], ceilings[i], loadAverage())
	}
	for b.Loop() {
		round()
	}
	for len(ratios) < scaleRounds {
		round()
	}
	for k, r := range runs {
		b.ReportMetric(slices.Max(rates[k]), r.name+"-best-tiles/s")
		b.ReportMetric(median(rates[k]), r.name+"-median-tiles/s")
	}
	b.ReportMetric(median(ratios), "median-ratio")
	b.ReportMetric(slices.Min(ratios), "min-ratio")
	b.ReportMetric(median(ceilings), "ceiling-ratio")
	b.ReportMetric(median(rates[1])/median(rates[2]), "of-ceiling")
}

// concurrently runs n copies of run at once and returns the first error.
func concurrently(n int, run func() (*Result, error)) (*Result, error) {
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := run()
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return nil, first
}

// median is the median of x, which it leaves as it is.
func median(x []float64) float64 { return stat.Median(slices.Clone(x)) }

// loadAverage returns the 1, 5 and 15 minute load averages of a Linux
// machine, "?" elsewhere.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
