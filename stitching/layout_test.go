package stitching_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// acquisition lists the grid cells in the order a microscope visits them:
// from the origin corner, along rows (horizontal) or columns (vertical),
// every line in the same direction (combing) or turning back at each end
// (continuous). It is written as a walk, independently of Layout.Index.
func acquisition(l tileio.Layout, rows, cols int) [][2]int {
	rowStep, colStep, r0, c0 := 1, 1, 0, 0
	if l.Origin == tileio.LowerLeft || l.Origin == tileio.LowerRight {
		rowStep, r0 = -1, rows-1
	}
	if l.Origin == tileio.UpperRight || l.Origin == tileio.LowerRight {
		colStep, c0 = -1, cols-1
	}
	horizontal := l.Numbering == tileio.HorizontalCombing || l.Numbering == tileio.HorizontalContinuous
	snake := l.Numbering == tileio.HorizontalContinuous || l.Numbering == tileio.VerticalContinuous
	// walk visits n lines from o0 by oStep, each of m cells from i0 by
	// iStep, turning back on odd lines when snake.
	walk := func(n, o0, oStep, m, i0, iStep int, cell func(o, i int) [2]int) [][2]int {
		var out [][2]int
		for k, o := 0, o0; k < n; k, o = k+1, o+oStep {
			for j := range m {
				i := i0 + j*iStep
				if snake && k%2 == 1 {
					i = i0 + (m-1-j)*iStep
				}
				out = append(out, cell(o, i))
			}
		}
		return out
	}
	if horizontal {
		return walk(rows, r0, rowStep, cols, c0, colStep, func(r, c int) [2]int { return [2]int{r, c} })
	}
	return walk(cols, c0, colStep, rows, r0, rowStep, func(c, r int) [2]int { return [2]int{r, c} })
}

// TestSequentialLayoutsStitchExactly writes one generated grid under file
// names numbered in the acquisition order of every MIST numbering and
// origin, opens each folder with a sequential pattern of that layout, and
// checks that the stitched positions are exact against the generator's
// truth: a wrong layout puts tiles in the wrong grid cells.
func TestSequentialLayoutsStitchExactly(t *testing.T) {
	cfg := synth.ConfigFor(synth.Realistic)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 3, 4, 256, 192, 1
	g, err := synth.Generate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	last := tileio.VerticalContinuous
	if stitching.RaceEnabled {
		last = tileio.HorizontalCombing // the layouts are numeric: one numbering's four origins under -race
	}
	for n := tileio.HorizontalCombing; n <= last; n++ {
		for o := tileio.UpperLeft; o <= tileio.LowerRight; o++ {
			pat, err := tileio.ParsePattern("F_t{t}_{ppp}.tif", 1)
			if err != nil {
				t.Fatal(err)
			}
			pat.Layout = tileio.Layout{Numbering: n, Origin: o}
			pat = pat.AtTime(2)
			index := map[[2]int]int{}
			for i, cell := range acquisition(pat.Layout, cfg.Rows, cfg.Cols) {
				index[cell] = i
			}
			dir := t.TempDir()
			if err := g.WriteDir(dir, func(r, c int) string { return fmt.Sprintf("F_t2_%03d.tif", index[[2]int{r, c}]+1) }); err != nil {
				t.Fatal(err)
			}
			src, err := tileio.OpenTileSet(dir, pat, cfg.Rows, cfg.Cols)
			if err != nil {
				t.Fatalf("%v %v: %v", n, o, err)
			}
			res, err := stitching.Stitch(context.Background(), src, align.Options{}, stitching.GraphOptions{Workers: 2})
			if err != nil {
				t.Fatalf("%v %v: %v", n, o, err)
			}
			if a := stitching.Evaluate(res, g.X, g.Y); a.ExactOptimal != a.Pairs || a.MaxTileError != 0 {
				t.Errorf("%v %v: %d of %d pairs exact, worst tile %d px off", n, o, a.ExactOptimal, a.Pairs, a.MaxTileError)
			}
		}
	}
}
