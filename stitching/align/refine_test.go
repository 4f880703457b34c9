package align

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRefinerMatchesBruteForce compares the FFT-based NCC surface search
// with direct NCC evaluation of every admissible displacement of the box,
// for random boxes anywhere (negative displacements, boxes clipped by the
// minimum overlap, empty boxes).
func TestRefinerMatchesBruteForce(t *testing.T) {
	const w, h = 60, 44
	tiles := cutTiles(5, w, h, [][2]int{{0, 0}, {41, 3}}, 300)
	t1, t2 := tiles[0], tiles[1]
	rng := rand.New(rand.NewPCG(1, 2))
	r := NewRefiner()
	for it := 0; it < 300; it++ {
		start := Translation{X: rng.IntN(2*w+1) - w, Y: rng.IntN(2*h+1) - h}
		rad := rng.IntN(8)
		mx, my := 1+rng.IntN(10), 1+rng.IntN(10)
		got := r.Refine(t1, t2, start, rad, mx, my)
		best := Translation{Corr: math.Inf(-1)}
		for y := start.Y - rad; y <= start.Y+rad; y++ {
			for x := start.X - rad; x <= start.X+rad; x++ {
				if admissible(x, y, w, h, mx, my) {
					best = better(best, Translation{X: x, Y: y, Corr: NCC(t1, t2, x, y)}, start)
				}
			}
		}
		if math.IsInf(best.Corr, -1) {
			best = Translation{X: start.X, Y: start.Y, Corr: -1}
		}
		if got.X != best.X || got.Y != best.Y || math.Abs(got.Corr-best.Corr) > 1e-9 {
			t.Fatalf("start %+v radius %d min overlap %d,%d: got %+v, want %+v", start, rad, mx, my, got, best)
		}
	}
	// From a start off by a few pixels the true translation is found.
	if got := r.Refine(t1, t2, Translation{X: 45, Y: 0}, 5, 8, 8); got.X != 41 || got.Y != 3 {
		t.Errorf("refine from (45,0): %+v, want (41,3)", got)
	}
}

// TestRefineEscapesLocalMaxima is failure mode 3 of issue 15: a pair whose
// NCC surface has local maxima near the truth (a refinement had ended at
// NCC 0.719 while the truth, 7 px away, scored 0.807). Refine searches its
// box exhaustively, so from every local maximum within 7 px of the truth
// it returns the truth.
func TestRefineEscapesLocalMaxima(t *testing.T) {
	const w, h, mx, my = 120, 90, 8, 8
	truth := Translation{X: 96, Y: 4} // t2 to the east of t1, 24 px of overlap
	tiles := cutTiles(7, w, h, [][2]int{{0, 0}, {truth.X, truth.Y}}, 600)
	t1, t2 := tiles[0], tiles[1]
	r := NewRefiner()
	locals := 0
	for y := truth.Y - 7; y <= truth.Y+7; y++ {
		for x := truth.X - 7; x <= truth.X+7; x++ {
			if x == truth.X && y == truth.Y || !admissible(x, y, w, h, mx, my) {
				continue
			}
			c := NCC(t1, t2, x, y)
			local := true
			for dy := -1; dy <= 1 && local; dy++ {
				for dx := -1; dx <= 1; dx++ {
					if (dx != 0 || dy != 0) && admissible(x+dx, y+dy, w, h, mx, my) && NCC(t1, t2, x+dx, y+dy) > c {
						local = false
						break
					}
				}
			}
			if !local {
				continue
			}
			locals++
			got := r.Refine(t1, t2, Translation{X: x, Y: y}, 7, mx, my)
			if got.X != truth.X || got.Y != truth.Y {
				t.Errorf("from the local maximum (%d,%d), NCC %.3f: refined to (%d,%d), NCC %.3f; want the truth (%d,%d), NCC %.3f",
					x, y, c, got.X, got.Y, got.Corr, truth.X, truth.Y, NCC(t1, t2, truth.X, truth.Y))
			}
		}
	}
	if locals == 0 {
		t.Fatal("no local maximum near the truth: the case does not test anything")
	}
	t.Logf("%d local maxima within 7 px of the truth, each refined to it", locals)
}

func TestGoodSize(t *testing.T) {
	for n, want := range map[int]int{0: 1, 1: 1, 7: 8, 11: 12, 97: 100, 1040: 1080, 1392: 1440} {
		if got := goodSize(n); got != want {
			t.Errorf("goodSize(%d) = %d, want %d", n, got, want)
		}
	}
}
