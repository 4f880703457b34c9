package stitching

import (
	"context"
	"fmt"
	"testing"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
)

// BenchmarkStitchScale reports tiles/s of the task graph (2 workers) and of
// the sequential baseline on grids of growing size, generated in memory:
//
//	go test -run '^$' -bench StitchScale -benchtime 1x ./stitching
//
// Run it several times, alternating, and compare graph/sequential per grid.
func BenchmarkStitchScale(b *testing.B) {
	for _, sz := range []struct{ rows, cols, w, h int }{
		{4, 5, 512, 384}, {8, 10, 512, 384}, {16, 20, 512, 384}, {8, 10, 1392, 1040},
	} {
		cfg := synth.DefaultConfig()
		cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight = sz.rows, sz.cols, sz.w, sz.h
		name := fmt.Sprintf("%dx%d_of_%dx%d", sz.rows, sz.cols, sz.w, sz.h)
		var g *testGrid
		for _, mode := range []string{"sequential", "graph"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				if g == nil {
					g = synthGrid(b, cfg)
				}
				src := g.source(b)
				b.ResetTimer()
				for range b.N {
					var err error
					if mode == "graph" {
						_, err = Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2})
					} else {
						_, err = Sequential(context.Background(), src, align.Options{})
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(g.tiles)*b.N)/b.Elapsed().Seconds(), "tiles/s")
			})
		}
	}
}
