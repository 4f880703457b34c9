package align_test

import (
	"context"
	"fmt"
	"log"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
)

// Register one adjacent pair: the spectra of both tiles, then phase
// correlation and cross-correlation factors. The tiles come from
// stitching/synth, which knows their true positions; at its Easy level
// registration alone finds them (on harder data some pairs come out wrong
// and the stage model of EstimateModel repairs them).
func ExampleAligner_Align() {
	cfg := synth.ConfigFor(synth.Easy)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 1, 2, 256, 192, 1
	g, err := synth.Generate(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	t1, t2 := g.Tile(0, 0), g.Tile(0, 1) // west neighbour, tile

	var opt align.Options // the defaults
	fft := align.NewTileFFT(256, 192, opt)
	f1, f2 := make([]complex128, fft.SpectrumLen()), make([]complex128, fft.SpectrumLen())
	fft.Forward(t1, f1)
	fft.Forward(t2, f2)
	tr := align.NewAligner(256, 192, opt).Align(t1, t2, f1, f2, align.West)

	x1, y1 := g.Position(0, 0)
	x2, y2 := g.Position(0, 1)
	fmt.Printf("translation (%d, %d), truth (%d, %d)\n", tr.X, tr.Y, x2-x1, y2-y1)
	// Output:
	// translation (230, -1), truth (230, -1)
}

// The stage model needs only the translations: here a row of 4 tiles
// whose middle pair got a wrong peak. The model marks it invalid and
// Repair replaces it by the median of the valid ones, with Corr = -1 (not
// measured: stitching.Optimize would now refine it on the tiles); the
// spanning tree then places the tiles.
func ExampleEstimateModel() {
	rel := align.NewTranslations(1, 4)
	rel.Set(align.Pair{Row: 0, Col: 1, Dir: align.West}, align.Translation{X: 230, Y: 2, Corr: 0.95})
	rel.Set(align.Pair{Row: 0, Col: 2, Dir: align.West}, align.Translation{X: 12, Y: -80, Corr: 0.2}) // a wrong peak
	rel.Set(align.Pair{Row: 0, Col: 3, Dir: align.West}, align.Translation{X: 231, Y: 1, Corr: 0.93})
	m, err := align.EstimateModel(rel, 256, 192, align.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fixed := m.Repair(rel)
	fmt.Printf("overlap %.1f%%, valid %d of %d\n", m.West.Overlap, m.West.Valid, m.West.Pairs)
	r := fixed.At(align.Pair{Row: 0, Col: 2, Dir: align.West})
	fmt.Println("repaired:", r.X, r.Y, r.Corr)
	fmt.Println("positions:", align.GlobalPositions(fixed))
	// Output:
	// overlap 10.0%, valid 2 of 3
	// repaired: 231 2 -1
	// positions: [{0 0 0.95} {230 2 0.95} {461 4 -1} {692 5 0.93}]
}
