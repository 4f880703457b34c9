package tileio

import (
	"image"
	"strings"
	"testing"
)

func TestLiveTiles(t *testing.T) {
	l, err := NewLiveTiles(2, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w, h := l.TileSize(); w != 0 || h != 0 {
		t.Errorf("size %dx%d before any tile", w, h)
	}
	if _, err := l.Load(1, 2); err == nil || !strings.Contains(err.Error(), "tile_r1_c2 has not been added") {
		t.Errorf("Load before Add: %v", err)
	}
	a := image.NewGray16(image.Rect(0, 0, 8, 6))
	a.Pix[0] = 7
	if err := l.Add(1, 2, a); err != nil {
		t.Fatal(err)
	}
	if w, h := l.TileSize(); w != 8 || h != 6 {
		t.Errorf("size %dx%d, want 8x6", w, h)
	}
	if got, err := l.Load(1, 2); err != nil || got != a {
		t.Errorf("Load(1, 2) = %p, %v; want the tile added", got, err)
	}
	for _, bad := range []struct {
		row, col int
		img      *image.Gray16
		want     string
	}{
		{2, 0, a, "outside a 2x3 grid"},
		{1, 2, a, "tile_r1_c2 added twice"},
		{0, 0, image.NewGray16(image.Rect(0, 0, 9, 6)), "is 9x6 but the first tile is 8x6"},
		{0, 0, image.NewGray16(image.Rect(1, 1, 9, 7)), "want origin (0,0)"},
		{0, 0, nil, "is nil"},
	} {
		if err := l.Add(bad.row, bad.col, bad.img); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Add(%d, %d): %v, want %q", bad.row, bad.col, err, bad.want)
		}
	}
	if err := l.Add(0, 1, image.NewGray16(image.Rect(0, 0, 8, 6))); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l.Close()
	if err := l.Add(0, 0, image.NewGray16(image.Rect(0, 0, 8, 6))); err == nil {
		t.Error("Add after Close: no error")
	}
	var got []Arrival
	for a := range l.Arrivals() {
		got = append(got, a)
	}
	if len(got) != 2 || got[0] != (Arrival{1, 2}) || got[1] != (Arrival{0, 1}) {
		t.Errorf("arrivals %v, want (1,2) then (0,1)", got)
	}
	if _, err := NewLiveTiles(2, 2, []string{"a"}); err == nil {
		t.Error("1 name for 4 tiles: no error")
	}
}
