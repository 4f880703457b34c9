package tileio

import (
	"context"
	"image"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// The last line of an acquisition is the row (numbering by rows) or the
// column (by columns) farthest from the origin corner, combing or snake.
func TestLayoutLastLine(t *testing.T) {
	for _, g := range [][2]int{{1, 1}, {1, 4}, {4, 1}, {3, 5}, {6, 8}, {8, 6}} {
		rows, cols := g[0], g[1]
		for num := range 4 {
			for org := range 4 {
				l := Layout{Numbering: Numbering(num), Origin: Origin(org)}
				byRows := l.Numbering == HorizontalCombing || l.Numbering == HorizontalContinuous
				lastRow, lastCol := rows-1, cols-1
				if l.Origin == LowerLeft || l.Origin == LowerRight {
					lastRow = 0
				}
				if l.Origin == UpperRight || l.Origin == LowerRight {
					lastCol = 0
				}
				for r := range rows {
					for c := range cols {
						want := (byRows && r == lastRow) || (!byRows && c == lastCol)
						if got := l.LastLine(r, c, rows, cols); got != want {
							t.Errorf("%dx%d, %v from %v: LastLine(%d, %d) = %v, want %v", rows, cols, l.Numbering, l.Origin, r, c, got, want)
						}
					}
				}
			}
		}
	}
	// A numbering that is not MIST's counts as row by row, as in Index.
	if l := (Layout{Numbering: 9}); !l.LastLine(2, 0, 3, 4) || l.LastLine(0, 3, 3, 4) {
		t.Error("an unknown numbering does not end with the last row")
	}
}

// A TileSet and a Watcher are acquired in their pattern's layout; other
// sources row by row from the upper left, unless WithAcquisition says
// otherwise.
func TestAcquisition(t *testing.T) {
	defer goleak.VerifyNone(t)
	snake := Layout{Numbering: VerticalContinuous, Origin: LowerRight}
	pat, err := ParsePattern("img_{pp}.tif", 1)
	if err != nil {
		t.Fatal(err)
	}
	pat.Layout = snake
	dir := t.TempDir()
	for r := range 2 {
		for c := range 3 {
			writeImage(t, filepath.Join(dir, pat.Name(r, c, 2, 3)), gray16Ramp(10, 8), "tif")
		}
	}
	ts, err := OpenTileSet(dir, pat, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := WatchTiles(ctx, t.TempDir(), pat, 2, 3, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tiles := make([]*image.Gray16, 6)
	for i := range tiles {
		tiles[i] = gray16Ramp(4, 3)
	}
	mem, err := NewMemoryTiles(2, 3, tiles, nil)
	if err != nil {
		t.Fatal(err)
	}
	given := WithAcquisition(mem, snake)
	for _, tc := range []struct {
		src  TileSource
		want Layout
	}{{ts, snake}, {w, snake}, {mem, Layout{}}, {given, snake}} {
		if got := Acquisition(tc.src); got != tc.want {
			t.Errorf("%T: acquired %+v, want %+v", tc.src, got, tc.want)
		}
	}
	// WithAcquisition's source is mem's.
	img, err := given.Load(1, 2)
	if err != nil || img != tiles[5] || given.Name(1, 2) != "tile_r1_c2" || given.Rows() != 2 || given.Cols() != 3 {
		t.Errorf("WithAcquisition's tile (1, 2): %p (%v), %q; mem's %p", img, err, given.Name(1, 2), tiles[5])
	}
	if tw, th := given.TileSize(); tw != 4 || th != 3 {
		t.Errorf("WithAcquisition's tiles are %dx%d, want 4x3", tw, th)
	}
}
