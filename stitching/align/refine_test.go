package align

import (
	"image"
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

// exactBox is a BoxNCC from direct NCC evaluations (exact sums), as a
// GPU computes them.
func exactBox(t1, t2 *image.Gray16, calls *int) BoxNCC {
	return func(x0, x1, y0, y1 int, dst []float64) error {
		*calls++
		bw := x1 - x0 + 1
		for y := y0; y <= y1; y++ {
			for x := x0; x <= x1; x++ {
				dst[(y-y0)*bw+x-x0] = NCC(t1, t2, x, y)
			}
		}
		return nil
	}
}

// TestRefineIsExact checks that Refine, whose surface comes from an FFT
// correlation, returns to the last bit (X, Y, Corr, Margin, Spread) what
// RefineBox returns from the exact NCC of every displacement: the
// translation the GPU's refinement computes from exact sums. The cases
// include smooth random content, coarsely quantized content (exact ties
// of the NCC between displacements) and constant tiles (NCC 0
// everywhere).
func TestRefineIsExact(t *testing.T) {
	const w, h = 64, 48
	smooth := cutTiles(11, w, h, [][2]int{{0, 0}, {45, 2}}, 300)
	quant := cutTiles(12, w, h, [][2]int{{0, 0}, {44, -3}}, 0)
	for _, q := range quant {
		for i := 0; i+1 < len(q.Pix); i += 2 {
			v := (uint16(q.Pix[i])<<8 | uint16(q.Pix[i+1])) &^ 0x3fff // 4 levels
			q.Pix[i], q.Pix[i+1] = uint8(v>>8), uint8(v)
		}
	}
	flat := []*image.Gray16{image.NewGray16(image.Rect(0, 0, w, h)), image.NewGray16(image.Rect(0, 0, w, h))}
	for i := range flat[1].Pix {
		flat[1].Pix[i] = 0x40
	}
	rng := rand.New(rand.NewPCG(3, 4))
	r, rb := NewRefiner(), NewRefiner()
	ties := 0
	for name, tl := range map[string][]*image.Gray16{"smooth": smooth, "quantized": quant, "flat": flat} {
		t1, t2 := tl[0], tl[1]
		for it := 0; it < 150; it++ {
			start := Translation{X: 40 + rng.IntN(11), Y: rng.IntN(11) - 5}
			if it%3 == 0 {
				start = Translation{X: rng.IntN(2*w+1) - w, Y: rng.IntN(2*h+1) - h}
			}
			rad := 2 + rng.IntN(6)
			mx, my := 1+rng.IntN(10), 1+rng.IntN(10)
			got := r.Refine(t1, t2, start, rad, mx, my)
			calls := 0
			want, err := rb.RefineBox(w, h, exactBox(t1, t2, &calls), start, rad, mx, my)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%s: start %+v radius %d min overlap %d,%d: Refine %+v, RefineBox on exact NCC %+v", name, start, rad, mx, my, got, want)
			}
			if want.Spread > 0 {
				ties++
			}
		}
	}
	if ties == 0 {
		t.Error("no case with a spread: the ties are not tested")
	}
}

// rowSum and crossRow give the sums of a plain loop, for every length
// (the words and the tail) and for rows long enough to need rowSum's
// lanes flushed.
func TestRowSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, n := range []int{0, 1, 3, 4, 5, 7, 8, 9, 1391, 1<<17 + 5} {
		p1, p2 := make([]byte, 2*n), make([]byte, 2*n)
		for i := range p1 {
			p1[i], p2[i] = byte(rng.IntN(256)), byte(rng.IntN(256))
		}
		if n > 1000 {
			for i := range p1 {
				p1[i] = 0xff // the largest sums
			}
		}
		var s, c uint64
		for i := 0; i < 2*n; i += 2 {
			a, b := uint64(p1[i])<<8|uint64(p1[i+1]), uint64(p2[i])<<8|uint64(p2[i+1])
			s += a
			c += a * b
		}
		if got := rowSum(p1); got != s {
			t.Errorf("rowSum of %d pixels: %d, want %d", n, got, s)
		}
		if got := crossRow(p1, p2); got != c {
			t.Errorf("crossRow of %d pixels: %d, want %d", n, got, c)
		}
	}
}
