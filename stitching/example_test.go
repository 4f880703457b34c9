package stitching_test

import (
	"context"
	"fmt"
	"log"

	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// grid generates a small realistic 3 x 4 grid of 256 x 192 tiles with
// stitching/synth and wraps it as a tile source.
func grid() (*synth.Grid, *tileio.MemoryTiles) {
	cfg := synth.ConfigFor(synth.Realistic)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 3, 4, 256, 192, 1
	g, err := synth.Generate(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	src, err := tileio.NewMemoryTiles(cfg.Rows, cfg.Cols, g.Tiles, nil)
	if err != nil {
		log.Fatal(err)
	}
	return g, src
}

// Stitch a grid with the task graphs and measure the result against the
// grid's true tile positions.
func ExampleStitch() {
	truth, src := grid()
	res, err := stitching.Stitch(context.Background(), src, align.Options{}, stitching.GraphOptions{Workers: 2})
	if err != nil {
		log.Fatal(err)
	}
	acc := stitching.Evaluate(res, truth.X, truth.Y)
	fmt.Printf("%d of %d pairs exact, worst tile %d px off\n", acc.ExactOptimal, acc.Pairs, acc.MaxTileError)
	fmt.Println("warnings:", len(res.Warnings()))
	// Output:
	// 17 of 17 pairs exact, worst tile 0 px off
	// warnings: 0
}

// Sequential is the single-goroutine reference: the same result as Stitch.
func ExampleSequential() {
	_, src := grid()
	seq, err := stitching.Sequential(context.Background(), src, align.Options{})
	if err != nil {
		log.Fatal(err)
	}
	par, err := stitching.Stitch(context.Background(), src, align.Options{}, stitching.GraphOptions{Workers: 2})
	if err != nil {
		log.Fatal(err)
	}
	same := true
	for i, p := range seq.Positions {
		same = same && p == par.Positions[i]
	}
	fmt.Println("same positions:", same)
	// Output:
	// same positions: true
}

// Quality needs no ground truth: it tells how far a result can be trusted.
// Here the stage model rejected one of the west translations as an
// outlier, to be repaired and refined.
func ExampleResult_Quality() {
	_, src := grid()
	res, err := stitching.Sequential(context.Background(), src, align.Options{Overlap: 10})
	if err != nil {
		log.Fatal(err)
	}
	q := res.Quality()
	fmt.Printf("%d pairs; overlap given: %v; %d of %d west translations valid\n", q.Pairs, q.West.OverlapGiven, q.West.Valid, q.West.Pairs)
	// Output:
	// 17 pairs; overlap given: true; 8 of 9 west translations valid
}

// MemoryEstimate sizes a run before reading a tile: here the grid of the
// MIST paper, 42 x 59 tiles of 1392 x 1040 pixels, on 8 workers.
func ExampleMemoryEstimate() {
	n := stitching.MemoryEstimate(42, 59, 1392, 1040, align.Options{}, stitching.GraphOptions{Workers: 8})
	fmt.Printf("about %d MiB\n", n>>20)
	// Output:
	// about 1233 MiB
}
