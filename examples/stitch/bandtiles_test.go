package main

import (
	"context"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/gohtgs/htgs/cluster"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// With -tiles-via store a worker copies only the tiles of the bands it
// registers (its rows and the row above), once each, and its band's tile
// source gives those tiles as the client's folder has them and refuses the
// others.
func TestStagedBandCopiesOnlyItsTiles(t *testing.T) {
	ctx := context.Background()
	dir := generated(t, 6, 5, 1, nil)
	const pattern = "img_r{rrr}_c{ccc}.tif"
	pat, err := tileio.ParsePattern(pattern, 1)
	if err != nil {
		t.Fatal(err)
	}
	src, err := tileio.OpenTileSet(dir, pat, 6, 5)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := cluster.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	d := &distributed{nc: nc}
	bucket, drop, err := d.putTiles(ctx, src, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer drop()

	var (
		st   stagedTiles
		sets tileSets
	)
	defer st.close()
	job := bandJob{Dir: "/nowhere", Pattern: pattern, Start: 1, Numbering: "HORIZONTALCOMBING", Origin: "UL", Rows: 6, Cols: 5, MaxTilePixels: -1, Store: bucket}
	staged := func() []string {
		t.Helper()
		es, err := os.ReadDir(st.dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	}
	rowsOf := func(r0, r1 int) []string {
		var names []string
		for r := r0; r < r1; r++ {
			for c := range 5 {
				names = append(names, src.Name(r, c))
			}
		}
		slices.Sort(names)
		return names
	}

	j := job
	j.Row0, j.Row1 = 2, 4
	b, err := st.band(ctx, nc, &sets, &j)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := staged(), rowsOf(1, 4); !slices.Equal(got, want) {
		t.Fatalf("band [2, 4) copied %v, want rows 1 to 3: %v", got, want)
	}
	for r := 1; r < 4; r++ {
		for c := range 5 {
			got, err := b.Load(r, c)
			if err != nil {
				t.Fatal(err)
			}
			want, err := src.Load(r, c)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Pix, want.Pix) || got.Bounds() != want.Bounds() {
				t.Fatalf("tile (%d, %d) differs from the client's", r, c)
			}
		}
	}
	if _, err := b.Load(0, 0); err == nil {
		t.Error("the band's source loaded a tile of row 0, not one of its rows")
	}
	if w, h := b.TileSize(); b.Rows() != 6 || b.Cols() != 5 || w != 256 || h != 192 {
		t.Errorf("band source: %dx%d grid of %dx%d tiles", b.Rows(), b.Cols(), w, h)
	}

	// The next band copies rows 4 and 5 only: row 3 is there already
	// (a second copy of it would fail: files are created exclusively).
	j = job
	j.Row0, j.Row1 = 4, 6
	if _, err := st.band(ctx, nc, &sets, &j); err != nil {
		t.Fatal(err)
	}
	if got, want := staged(), rowsOf(1, 6); !slices.Equal(got, want) {
		t.Fatalf("after band [4, 6): %v, want rows 1 to 5: %v", got, want)
	}
}
