package stitching

import (
	"context"
	"testing"
	"time"

	"github.com/gohtgs/htgs/internal/native"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
)

// BenchmarkStitchFFT stitches an 8 x 10 grid of 1392 x 1040 tiles (the
// paper's tile size, synthetic realistic content) with the task graph,
// gonum's FFTs against FFTW's, alternating within each iteration so that
// both see the same machine load; it reports both rates and their ratio
// (fftw-tiles/s over gonum-tiles/s):
//
//	go test -run '^$' -bench StitchFFT -benchtime 2x ./stitching
func BenchmarkStitchFFT(b *testing.B) {
	if _, err := native.LoadFFTW(); err != nil {
		b.Skipf("FFTW is not installed (apt-get install libfftw3-double3): %v", err)
	}
	cfg := synth.DefaultConfig()
	cfg.TileWidth, cfg.TileHeight = 1392, 1040
	g := synthGrid(b, cfg)
	src := g.source(b)
	kernels := []align.FFTKernel{align.FFTGonum, align.FFTFFTW}
	total := make([]time.Duration, len(kernels))
	b.ResetTimer()
	for range b.N {
		for i, k := range kernels {
			t0 := time.Now()
			if _, err := Stitch(context.Background(), src, align.Options{FFT: k}, GraphOptions{}); err != nil {
				b.Fatal(err)
			}
			total[i] += time.Since(t0)
		}
	}
	n := float64(len(g.tiles) * b.N)
	b.ReportMetric(n/total[0].Seconds(), "gonum-tiles/s")
	b.ReportMetric(n/total[1].Seconds(), "fftw-tiles/s")
	b.ReportMetric(total[0].Seconds()/total[1].Seconds(), "ratio")
}
