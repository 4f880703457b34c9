package align

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSolvePositionsOptimal checks on random grids with a tenth of the
// pairs wrong by up to 6 px that the fit's cost is no more than the cost
// of the true positions nor the tree's (the fit reaches the L1 optimum,
// or as good as the truth), and that Solution.Cost is that cost.
func TestSolvePositionsOptimal(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 31))
		rows, cols := 3+rng.IntN(6), 3+rng.IntN(6)
		x := make([]int, rows*cols)
		y := make([]int, rows*cols)
		for i := range x {
			x[i] = (i%cols)*100 + rng.IntN(7) - 3
			y[i] = (i/cols)*80 + rng.IntN(7) - 3
		}
		tr := NewTranslations(rows, cols)
		truth := NewTranslations(rows, cols)
		for _, p := range Pairs(rows, cols) {
			nr, nc := p.Neighbor()
			a, b := nr*cols+nc, p.Row*cols+p.Col
			tt := Translation{X: x[b] - x[a], Y: y[b] - y[a], Corr: 0.5 + 0.4*rng.Float64()}
			truth.Set(p, tt)
			if rng.IntN(10) == 0 {
				tt.X += rng.IntN(13) - 6
				tt.Y += rng.IntN(13) - 6
			}
			tr.Set(p, tt)
		}
		tree := GlobalPositions(tr)
		sol := SolvePositions(tr, nil, tree)
		cost := func(pos []Position) float64 {
			c := 0.0
			for _, p := range Pairs(rows, cols) {
				nr, nc := p.Neighbor()
				a, b := pos[nr*cols+nc], pos[p.Row*cols+p.Col]
				m := tr.At(p)
				c += m.Corr * (math.Abs(float64(b.X-a.X-m.X)) + math.Abs(float64(b.Y-a.Y-m.Y)))
			}
			return c
		}
		truePos := make([]Position, len(x))
		for i := range x {
			truePos[i] = Position{X: x[i], Y: y[i]}
		}
		if c, ct, cr := cost(sol.Positions), cost(truePos), cost(tree); c > ct+1e-9 || c > cr+1e-9 {
			t.Errorf("seed %d (%dx%d): cost %.4f, true positions %.4f, tree %.4f", seed, rows, cols, c, ct, cr)
		} else if math.Abs(c-sol.Cost) > 1e-9 && c > 0 {
			t.Errorf("seed %d: Solution.Cost %.4f, recomputed %.4f", seed, sol.Cost, c)
		}
	}
}
