package align

import (
	"context"
	"image"
	"testing"

	"github.com/gohtgs/htgs/stitching/synth"
)

// testGrid is a synthetic grid with ground truth.
type testGrid struct {
	rows, cols int
	tiles      []*image.Gray16
	x, y       []int // true positions, row-major
}

// tile returns tile i (row-major), as EstimateFlatField's loader.
func (g *testGrid) tile(i int) (*image.Gray16, error) { return g.tiles[i], nil }

// trueTranslation is the exact translation of pair p.
func (g *testGrid) trueTranslation(p Pair) (x, y int) {
	i := p.Row*g.cols + p.Col
	nr, nc := p.Neighbor()
	j := nr*g.cols + nc
	return g.x[i] - g.x[j], g.y[i] - g.y[j]
}

// synthGrid generates a grid with stitching/synth.
func synthGrid(t testing.TB, cfg synth.Config) *testGrid {
	t.Helper()
	sg, err := synth.Generate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &testGrid{rows: cfg.Rows, cols: cfg.Cols, tiles: sg.Tiles, x: sg.X, y: sg.Y}
}

func synthConfig(level synth.Level, seed uint64, rows, cols, w, h int) synth.Config {
	cfg := synth.ConfigFor(level)
	cfg.Seed = seed
	cfg.Rows, cfg.Cols = rows, cols
	cfg.TileWidth, cfg.TileHeight = w, h
	return cfg
}
