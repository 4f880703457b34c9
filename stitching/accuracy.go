package stitching

import (
	"math"

	"github.com/gohtgs/htgs/stitching/align"
)

// Accuracy compares a stitching result with the true tile positions.
type Accuracy struct {
	Pairs         int     // adjacent pairs in the grid
	ExactRelative int     // pairs whose PCIAM+CCF translation is exact
	ExactOptimal  int     // pairs whose optimized translation is exact
	MaxTileError  int     // worst tile position error in pixels (Chebyshev), after the best global shift
	FracRelative  float64 // ExactRelative / Pairs (1 for a grid without pairs)
	FracOptimal   float64 // ExactOptimal / Pairs
}

// Evaluate measures res against the true top-left positions (trueX[i],
// trueY[i]) of the tiles, row-major. The translation of a pair is exact when
// it equals the difference of the true positions of its two tiles; tile
// errors are taken after the integer global shift that minimises the worst
// one, since a stitcher can only recover positions up to such a shift.
func Evaluate(res *Result, trueX, trueY []int) Accuracy {
	a := Accuracy{FracRelative: 1, FracOptimal: 1}
	cols := res.Cols
	for _, p := range align.Pairs(res.Rows, res.Cols) {
		a.Pairs++
		i := p.Row*cols + p.Col
		nr, nc := p.Neighbor()
		j := nr*cols + nc
		tx, ty := trueX[i]-trueX[j], trueY[i]-trueY[j]
		if t := res.Relative.At(p); t.X == tx && t.Y == ty {
			a.ExactRelative++
		}
		if t := res.Optimized.At(p); t.X == tx && t.Y == ty {
			a.ExactOptimal++
		}
	}
	if a.Pairs > 0 {
		a.FracRelative = float64(a.ExactRelative) / float64(a.Pairs)
		a.FracOptimal = float64(a.ExactOptimal) / float64(a.Pairs)
	}
	pos := res.Positions
	spread := func(d func(int) int) int {
		lo, hi := math.MaxInt, math.MinInt
		for i := range pos {
			lo, hi = min(lo, d(i)), max(hi, d(i))
		}
		return (hi - lo + 1) / 2
	}
	a.MaxTileError = max(spread(func(i int) int { return pos[i].X - trueX[i] }), spread(func(i int) int { return pos[i].Y - trueY[i] }))
	return a
}
