package main

import (
	"context"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/gohtgs/htgs/cluster/natsserver"
	"github.com/gohtgs/htgs/stitching/synth"
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
	srv, err := natsserver.Start()
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

// BenchmarkStagedBand copies tiles of an 8 x 10 grid of 512 x 384 tiles
// (80 files, 30 MiB) from the object store as a worker of -tiles-via store
// does, into a new folder each time: the whole grid one tile at a time (as
// a worker did before it copied only its bands), the whole grid 4 at a
// time, and the second of two bands (rows 4 to 7 and the row above: 50
// tiles) 4 at a time.
func BenchmarkStagedBand(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	cfg := synth.DefaultConfig()
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight = 8, 10, 512, 384
	if err := synth.GenerateToDir(ctx, cfg, dir, synth.DefaultName); err != nil {
		b.Fatal(err)
	}
	const pattern = "img_r{rrr}_c{ccc}.tif"
	pat, err := tileio.ParsePattern(pattern, 1)
	if err != nil {
		b.Fatal(err)
	}
	src, err := tileio.OpenTileSet(dir, pat, 8, 10)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := natsserver.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect()
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	bucket, drop, err := (&distributed{nc: nc}).putTiles(ctx, src, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	defer drop()
	for _, c := range []struct {
		name     string
		r0, r1   int
		parallel int
		tiles    float64
	}{{"grid-1-at-a-time", 0, 8, 1, 80}, {"grid", 0, 8, 0, 80}, {"band-rows-4-7", 4, 8, 0, 50}} {
		b.Run(c.name, func(b *testing.B) {
			var sets tileSets
			for b.Loop() {
				st := stagedTiles{parallel: c.parallel}
				j := bandJob{Pattern: pattern, Start: 1, Numbering: "HORIZONTALCOMBING", Origin: "UL", Rows: 8, Cols: 10, MaxTilePixels: -1, Store: bucket, Row0: c.r0, Row1: c.r1}
				if _, err := st.band(ctx, nc, &sets, &j); err != nil {
					b.Fatal(err)
				}
				st.close()
			}
			b.ReportMetric(c.tiles*float64(b.N)/b.Elapsed().Seconds(), "tiles/s")
		})
	}
}
