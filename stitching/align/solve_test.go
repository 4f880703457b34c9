package align

import (
	"fmt"
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

// TestSettleCorners: in a 3x3 grid whose corner tile (2,2) has a wrong
// west pair (a ghost 6 px off, NCC 0.9) and a right north pair (0.5), the
// fit follows the ghost: the corner's loop has no other loop to ask.
// The NCC of the two pairs decides: the ghost pair still correlates 0.75
// at the truth, the north pair only 0.05 at the ghost's displacement. On
// a flat surface (the sums within the pairs' tolerance) the tile stays.
func TestSettleCorners(t *testing.T) {
	west, north := Pair{Row: 2, Col: 2, Dir: West}, Pair{Row: 2, Col: 2, Dir: North}
	build := func() *Translations {
		tr := NewTranslations(3, 3)
		for _, p := range Pairs(3, 3) {
			x, y := 100, 0
			if p.Dir == North {
				x, y = 0, 80
			}
			tr.Set(p, Translation{X: x, Y: y, Corr: 0.6})
		}
		tr.Set(west, Translation{X: 106, Y: 0, Corr: 0.9})
		tr.Set(north, Translation{X: 0, Y: 80, Corr: 0.5})
		return tr
	}
	for _, c := range []struct {
		name       string
		atTruth    float64 // the west pair's NCC at the truth
		elsewhere  float64 // the north pair's NCC off the truth
		wantSettle bool
	}{
		{"ghost", 0.75, 0.05, true},
		{"flat", 0.895, 0.49, false}, // the truth better by 0.005, within the tolerances
	} {
		tr := build()
		sol := SolvePositions(tr, nil, GlobalPositions(tr))
		if x, _ := sol.Implied(west); x != 106 {
			t.Fatalf("%s: the fit puts west(2,2) at %d: the case does not exercise a corner", c.name, x)
		}
		score := func(p Pair, x, y int) (float64, uint64, error) {
			truth := (p.Dir == West && x == 100 && y == 0) || (p.Dir == North && x == 0 && y == 80)
			switch {
			case p == west && truth:
				return c.atTruth, 10000, nil
			case p == west && x == 106 && y == 0:
				return 0.9, 10000, nil
			case p == north && truth:
				return 0.5, 10000, nil
			case p == north:
				return c.elsewhere, 10000, nil
			case truth:
				return 0.6, 10000, nil
			}
			return 0, 10000, nil
		}
		moved, err := SettleCorners(sol, tr, nil, score)
		if err != nil {
			t.Fatal(err)
		}
		x, y := sol.Implied(west)
		settled := x == 100 && y == 0
		if settled != c.wantSettle || (settled && (len(moved) != 1 || moved[0] != 8)) {
			t.Errorf("%s: west(2,2) implied (%d,%d), moved %v; want settled %v", c.name, x, y, moved, c.wantSettle)
		}
		for i, p := range sol.Positions[:8] {
			if wx, wy := 100*(i%3), 80*(i/3); p.X != wx || p.Y != wy {
				t.Errorf("%s: tile %d at (%d,%d), want (%d,%d)", c.name, i, p.X, p.Y, wx, wy)
			}
		}
	}
}

// BenchmarkSolvePositions times the global fit alone (the spanning tree
// that starts it, SolvePositions and SettleCorners with a score that
// costs nothing) on the papers' grid of 42 x 59 tiles: translations from
// jittered positions with every pair right (a correctly registered grid:
// one pass over the pairs), with 1% and 5% of the pairs wrong by up to 6
// px, and with every pair's own error of up to 3 px ("noisy": no loop
// closes, the worst case of the fit):
//
//	go test ./stitching/align -run '^$' -bench SolvePositions
func BenchmarkSolvePositions(b *testing.B) {
	const rows, cols = 42, 59
	for _, c := range []struct {
		name         string
		wrong, noise int
	}{{"right", 0, 0}, {"1pct_wrong", 1, 0}, {"5pct_wrong", 5, 0}, {"noisy", 0, 3}} {
		rng := rand.New(rand.NewPCG(7, 31))
		x := make([]int, rows*cols)
		y := make([]int, rows*cols)
		for i := range x {
			x[i] = (i%cols)*1250 + rng.IntN(7) - 3
			y[i] = (i/cols)*930 + rng.IntN(7) - 3
		}
		tr := NewTranslations(rows, cols)
		for _, p := range Pairs(rows, cols) {
			nr, nc := p.Neighbor()
			a, bt := nr*cols+nc, p.Row*cols+p.Col
			tt := Translation{X: x[bt] - x[a], Y: y[bt] - y[a], Corr: 0.5 + 0.4*rng.Float64()}
			if rng.IntN(100) < c.wrong {
				tt.X += rng.IntN(13) - 6
				tt.Y += rng.IntN(13) - 6
			}
			if c.noise > 0 {
				tt.X += rng.IntN(2*c.noise+1) - c.noise
				tt.Y += rng.IntN(2*c.noise+1) - c.noise
			}
			tr.Set(p, tt)
		}
		score := func(Pair, int, int) (float64, uint64, error) { return 0.5, 10000, nil }
		b.Run(fmt.Sprintf("%dx%d_%s", rows, cols, c.name), func(b *testing.B) {
			for b.Loop() {
				sol := SolvePositions(tr, nil, GlobalPositions(tr))
				if _, err := SettleCorners(sol, tr, nil, score); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
