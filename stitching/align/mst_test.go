package align

import "testing"

// TestGlobalPositionsMST: a 2x3 grid where one edge carries a wrong
// translation with a low correlation; the maximum spanning tree must route
// around it.
func TestGlobalPositionsMST(t *testing.T) {
	// True positions (x, y), row-major.
	xs := []int{10, 110, 212, 12, 111, 209}
	ys := []int{5, 7, 4, 85, 88, 86}
	tr := NewTranslations(2, 3)
	corr := map[Pair]float64{
		{0, 1, West}: 0.9, {0, 2, West}: 0.8,
		{1, 1, West}: 0.2, {1, 2, West}: 0.7,
		{1, 0, North}: 0.95, {1, 1, North}: 0.85, {1, 2, North}: 0.6,
	}
	for p, c := range corr {
		nr, nc := p.Neighbor()
		i, j := p.Row*3+p.Col, nr*3+nc
		tr.Set(p, Translation{X: xs[i] - xs[j], Y: ys[i] - ys[j], Corr: c})
	}
	// Corrupt the weak edge (1,0)-(1,1) and, to be sure it matters, the
	// second weakest (1,1)-(1,2) is kept correct.
	tr.Set(Pair{1, 1, West}, Translation{X: 50, Y: 40, Corr: 0.2})
	pos := GlobalPositions(tr)
	minX, minY := 10, 4
	for i := range pos {
		if pos[i].X != xs[i]-minX || pos[i].Y != ys[i]-minY {
			t.Errorf("tile %d at (%d,%d), want (%d,%d)", i, pos[i].X, pos[i].Y, xs[i]-minX, ys[i]-minY)
		}
	}
	// Tree edges by Prim from tile 0 (weights 0.95, 0.9, 0.85, 0.8, 0.7):
	// tile 3 via north 0.95, tile 1 via west 0.9, tile 4 via north 0.85,
	// tile 2 via west 0.8, tile 5 via west 0.7. The root gets its best
	// tree edge.
	wantCorr := []float64{0.95, 0.9, 0.8, 0.95, 0.85, 0.7}
	for i, c := range wantCorr {
		if pos[i].Corr != c {
			t.Errorf("tile %d corr %v, want %v", i, pos[i].Corr, c)
		}
	}
}

func TestGlobalPositionsSmall(t *testing.T) {
	pos := GlobalPositions(NewTranslations(1, 1))
	if len(pos) != 1 || pos[0] != (Position{}) {
		t.Errorf("1x1: %+v", pos)
	}
	// A column of three tiles with a negative x drift.
	tr := NewTranslations(3, 1)
	tr.Set(Pair{1, 0, North}, Translation{X: -4, Y: 90, Corr: 0.5})
	tr.Set(Pair{2, 0, North}, Translation{X: -3, Y: 91, Corr: 0.6})
	pos = GlobalPositions(tr)
	want := []Position{{X: 7, Y: 0, Corr: 0.5}, {X: 3, Y: 90, Corr: 0.5}, {X: 0, Y: 181, Corr: 0.6}}
	for i := range want {
		if pos[i] != want[i] {
			t.Errorf("tile %d: %+v, want %+v", i, pos[i], want[i])
		}
	}
}

// TestTreePositionsPart places only the tiles reachable through the pairs
// given: on a 2x3 grid with the pairs west(0,1) and north(1,1), tiles
// (0,0), (0,1) and (1,1) from root (0,1), the others left unplaced.
func TestTreePositionsPart(t *testing.T) {
	tr := NewTranslations(2, 3)
	w, n := Pair{0, 1, West}, Pair{1, 1, North}
	tr.Set(w, Translation{X: 90, Y: 2, Corr: 0.9})
	tr.Set(n, Translation{X: -3, Y: 70, Corr: 0.8})
	tr.Set(Pair{0, 2, West}, Translation{X: 90, Y: 0, Corr: 0.99}) // not given
	pos, placed := TreePositions(tr, 1, func(p Pair) bool { return p == w || p == n })
	want := []bool{true, true, false, false, true, false}
	for i := range want {
		if placed[i] != want[i] {
			t.Fatalf("placed %v, want %v", placed, want)
		}
	}
	// (0,0) at x 0; (0,1) 90 right and 2 down of it; (1,1) 3 left, 70 down of (0,1).
	got := [3][2]int{{pos[0].X, pos[0].Y}, {pos[1].X, pos[1].Y}, {pos[4].X, pos[4].Y}}
	if got != [3][2]int{{0, 0}, {90, 2}, {87, 72}} {
		t.Errorf("positions %v, want (0,0) (90,2) (87,72)", got)
	}
	if full, _ := TreePositions(tr, 0, nil); len(full) != 6 {
		t.Errorf("%d positions for the whole grid", len(full))
	}
}
