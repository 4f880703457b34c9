package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// watchTile is a tile file to copy into a watched folder: from its path
// in a finished grid to its name in the acquisition.
type watchTile struct{ from, name string }

// gridTiles returns the tiles of the rows x cols grid in dir (named
// img_r{rrr}_c{ccc}.tif) in the order of layout, named as pattern names
// them.
func gridTiles(t *testing.T, dir string, rows, cols int, pattern string, layout tileio.Layout) []watchTile {
	t.Helper()
	src, err := tileio.ParsePattern("img_r{rrr}_c{ccc}.tif", 1)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := tileio.ParsePattern(pattern, 1)
	if err != nil {
		t.Fatal(err)
	}
	dst.Layout = layout
	out := make([]watchTile, rows*cols)
	for r := range rows {
		for c := range cols {
			out[layout.Index(r, c, rows, cols)] = watchTile{filepath.Join(dir, src.Name(r, c, rows, cols)), dst.Name(r, c, rows, cols)}
		}
	}
	return out
}

// acquire writes tiles into dir one by one, in place, as an acquisition
// does, pausing between them (longer after the first third); a tile in
// halves is written as two pieces, the file closed in between.
func acquire(t *testing.T, dir string, tiles []watchTile, pause time.Duration, halves map[int]bool) {
	t.Helper()
	for i, tl := range tiles {
		data, err := os.ReadFile(tl.from)
		if err != nil {
			t.Error(err)
			return
		}
		path := filepath.Join(dir, tl.name)
		if halves[i] {
			if err := os.WriteFile(path, data[:len(data)/2], 0o644); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(150 * time.Millisecond)
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			_, err = f.Write(data[len(data)/2:])
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Error(err)
				return
			}
		} else if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Error(err)
			return
		}
		if i == len(tiles)/3 {
			time.Sleep(10 * pause)
		}
		time.Sleep(pause)
	}
}

// A folder filled tile by tile while stitch -watch follows it gives the
// outputs of stitch on the finished folder, byte for byte, whatever the
// order of the tiles and however they are written.
func TestWatchEqualsOffline(t *testing.T) {
	const rows, cols = 6, 8
	grid := generated(t, rows, cols, 4, nil)
	random := gridTiles(t, grid, rows, cols, "img_r{rrr}_c{ccc}.tif", tileio.Layout{})
	rand.New(rand.NewPCG(3, 3)).Shuffle(len(random), func(i, j int) { random[i], random[j] = random[j], random[i] })
	// Out of order with the flat field known before the last tile: the
	// interior tiles in a random order, then the border's, the upper-left
	// tile last. The grid is acquired by rows from the lower right
	// (-origin LR), so its last line is the top row, which the flat
	// field's sample leaves out, and the upper-left tile is the last one
	// of the acquisition too. Until it comes the provisional mosaic's
	// origin is another tile's corner, so its arrival moves every tile
	// placed so far; the tiles kept for the mosaic do not depend on
	// where they are placed, and the mosaic is still the offline one.
	var interior, border []watchTile
	for i, tl := range gridTiles(t, grid, rows, cols, "img_r{rrr}_c{ccc}.tif", tileio.Layout{}) {
		r, c := i/cols, i%cols
		switch {
		case i == 0:
		case r == 0 || c == 0 || r == rows-1 || c == cols-1:
			border = append(border, tl)
		default:
			interior = append(interior, tl)
		}
	}
	shuffle := rand.New(rand.NewPCG(4, 4))
	shuffle.Shuffle(len(interior), func(i, j int) { interior[i], interior[j] = interior[j], interior[i] })
	shuffle.Shuffle(len(border), func(i, j int) { border[i], border[j] = border[j], border[i] })
	cornerLast := append(append(interior, border...), gridTiles(t, grid, rows, cols, "img_r{rrr}_c{ccc}.tif", tileio.Layout{})[0])
	snake := tileio.Layout{Numbering: tileio.HorizontalContinuous, Origin: tileio.UpperLeft}
	// The microscope's flat field, from an earlier acquisition.
	ffFile := filepath.Join(t.TempDir(), "flat.bin")
	if r := runArgs(t, context.Background(), "-dir", generated(t, rows, cols, 6, nil), "-rows", fmt.Sprint(rows), "-cols", fmt.Sprint(cols),
		"-out", t.TempDir(), "-mosaic=false", "-save-flat-field", ffFile); r.code != 0 || !strings.Contains(r.stdout, "saved in "+ffFile) {
		t.Fatalf("-save-flat-field: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	cases := []struct {
		name      string
		tiles     []watchTile
		args      []string
		halves    map[int]bool
		watchArgs []string
		retake    string // tile 0 is written again with this file's bytes after the 11th tile
	}{
		{"rows", gridTiles(t, grid, rows, cols, "img_r{rrr}_c{ccc}.tif", tileio.Layout{}), nil, nil, nil, ""},
		{"snake", gridTiles(t, grid, rows, cols, "tile_{ppp}.tif", snake),
			[]string{"-pattern", "tile_{ppp}.tif", "-numbering", "HORIZONTALCONTINUOUS"}, nil, nil, ""},
		// Named by row and column, acquired by columns from the lower
		// right: the flat field's sample leaves out the left column.
		{"columns", gridTiles(t, grid, rows, cols, "img_r{rrr}_c{ccc}.tif", tileio.Layout{Numbering: tileio.VerticalContinuous, Origin: tileio.LowerRight}),
			[]string{"-numbering", "VERTICALCONTINUOUS", "-origin", "LR"}, nil, nil, ""},
		{"out-of-order", random, nil, nil, nil, ""},
		{"corner-last", cornerLast, []string{"-origin", "LR"}, nil, nil, ""},
		{"halves", gridTiles(t, grid, rows, cols, "img_r{rrr}_c{ccc}.tif", tileio.Layout{}), nil, map[int]bool{5: true, rows*cols - 1: true}, nil, ""},
		{"halves-polling", gridTiles(t, grid, rows, cols, "img_r{rrr}_c{ccc}.tif", tileio.Layout{}), nil, map[int]bool{0: true, 20: true}, []string{"-watch-poll", "20ms"}, ""},
		{"no-flat-field", gridTiles(t, grid, rows, cols, "img_r{rrr}_c{ccc}.tif", tileio.Layout{}), []string{"-flat-field", "none"}, nil, nil, ""},
		{"flat-field-file", gridTiles(t, grid, rows, cols, "img_r{rrr}_c{ccc}.tif", tileio.Layout{}), []string{"-flat-field", ffFile}, nil, nil, ""},
		{"retake", gridTiles(t, grid, rows, cols, "img_r{rrr}_c{ccc}.tif", tileio.Layout{}), nil, nil, nil,
			filepath.Join(generated(t, rows, cols, 7, nil), "img_r001_c001.tif")},
	}
	for _, tc := range cases {
		if raceEnabled && tc.name != "out-of-order" && tc.name != "halves-polling" {
			continue // 10 times slower: the cases with the most concurrency
		}
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			// The finished folder, stitched offline.
			finished := t.TempDir()
			for _, tl := range tc.tiles {
				data, err := os.ReadFile(tl.from)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(finished, tl.name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.retake != "" {
				data, err := os.ReadFile(tc.retake)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(finished, tc.tiles[0].name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{"-rows", fmt.Sprint(rows), "-cols", fmt.Sprint(cols), "-workers", "2"}, tc.args...)
			offline := t.TempDir()
			if r := runArgs(t, ctx, append(args, "-dir", finished, "-out", offline)...); r.code != 0 {
				t.Fatalf("offline run: exit %d\n%s", r.code, r.stderr)
			}
			// The same tiles as an acquisition writes them.
			watched, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
			done := make(chan result)
			go func() {
				var o, e bytes.Buffer
				wargs := append(append(args, tc.watchArgs...), "-watch", "-watch-timeout", "1m", "-dir", watched, "-out", out)
				code := runMain(ctx, wargs, &o, &e)
				done <- result{code, o.String(), e.String()}
			}()
			var before []tileio.GlobalPosition // corner-last: the provisional positions before the last tile
			switch {
			case tc.name == "corner-last":
				n := len(tc.tiles)
				acquire(t, watched, tc.tiles[:n-1], 5*time.Millisecond, nil)
				before = waitPartial(t, filepath.Join(out, partialName(defNames)), n-1)
				acquire(t, watched, tc.tiles[n-1:], 0, nil)
			case tc.retake == "":
				acquire(t, watched, tc.tiles, 5*time.Millisecond, tc.halves)
			default:
				acquire(t, watched, tc.tiles[:11], 5*time.Millisecond, nil)
				acquire(t, watched, []watchTile{{tc.retake, tc.tiles[0].name}}, 0, nil)
				acquire(t, watched, tc.tiles[11:], 5*time.Millisecond, nil)
			}
			r := <-done
			if r.code != 0 {
				t.Fatalf("-watch: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			sameOutputs(t, offline, out)
			if before != nil {
				// The premise: the last tile moved tiles placed before it.
				final := readGlobal(t, filepath.Join(out, defNames.global))
				moved := 0
				for _, p := range before {
					if f := final[p.Row*cols+p.Col]; f.X != p.X || f.Y != p.Y {
						moved++
					}
				}
				if moved == 0 {
					t.Errorf("the upper-left tile, last, moved none of the %d tiles placed before it", len(before))
				}
				t.Logf("the last tile moved %d of the %d tiles placed before it", moved, len(before))
			}
			if tc.retake != "" {
				if !strings.Contains(r.stderr, "1 tile(s) changed after they arrived (img_r001_c001.tif): stitching the finished folder again") {
					t.Errorf("no word of the tile acquired again:\n%s", r.stderr)
				}
				// The tiles the live registration handed over are not the
				// folder's: the mosaic reads the files.
				if strings.Contains(r.stdout, "as the live registration corrected them") {
					t.Errorf("the mosaic took the tiles of a live registration stitched again:\n%s", r.stdout)
				}
				return
			}
			if !strings.Contains(r.stdout, "stitched live") || !strings.Contains(r.stderr, "watch: 48 of 48 tiles in, 82 of 82 pairs registered, 48 tiles placed") {
				t.Errorf("no live report:\n%s\n%s", r.stdout, r.stderr)
			}
			// The mosaic took every tile as the live registration had
			// corrected it, and its bytes are still the offline run's
			// (out of order, a sample tile of the flat field comes last:
			// the registration runs after it, on the files, and so does
			// the mosaic).
			want := "; 48 of 48 tiles as the live registration corrected them"
			if tc.name == "out-of-order" {
				want = "; 0 of 48 tiles as the live registration corrected them"
			}
			if !strings.Contains(r.stdout, want) {
				t.Errorf("the mosaic did not take the tiles of the live registration:\n%s", r.stdout)
			}
			for _, n := range []string{partialName(defNames), partialPreviewName(defNames)} {
				if _, err := os.Stat(filepath.Join(out, n)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the provisional %s is still there once the outputs are (%v)", n, err)
				}
			}
			noTemp(t, out)
		})
	}
}

// waitPartial waits for the provisional positions file at path to place
// n tiles, and returns them.
func waitPartial(t *testing.T, path string, n int) []tileio.GlobalPosition {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if data, err := os.ReadFile(path); err == nil {
			if pos, err := tileio.ReadGlobalPositions(bytes.NewReader(data)); err == nil && len(pos) == n {
				return pos
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not place %d tiles after 30 s", path, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Tiles that stop coming end the run with an error naming the missing
// ones, the provisional positions kept in a file marked partial:
// -watch-timeout, or Ctrl-C.
func TestWatchIncomplete(t *testing.T) {
	const rows, cols = 3, 4
	grid := generated(t, rows, cols, 5, nil)
	tiles := gridTiles(t, grid, rows, cols, "img_r{rrr}_c{ccc}.tif", tileio.Layout{})
	for _, interrupt := range []bool{false, true} {
		t.Run(fmt.Sprintf("interrupt=%v", interrupt), func(t *testing.T) {
			watched, out := t.TempDir(), t.TempDir()
			// 8 tiles, and half of a ninth.
			acquire(t, watched, tiles[:8], 0, nil)
			data, err := os.ReadFile(tiles[8].from)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(watched, tiles[8].name), data[:len(data)/2], 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			args := []string{"-watch", "-dir", watched, "-rows", fmt.Sprint(rows), "-cols", fmt.Sprint(cols), "-out", out, "-workers", "2"}
			if interrupt {
				// Cancelled once the 8 tiles are placed.
				w := &cancelAt{cancel: cancel, at: "8 tiles placed"}
				var o bytes.Buffer
				code := runMain(ctx, args, &o, w)
				r := result{code, o.String(), w.b.String()}
				checkIncomplete(t, r, "interrupted", out)
				return
			}
			r := runArgs(t, ctx, append(args, "-watch-timeout", "2s")...)
			checkIncomplete(t, r, "no new tile for 2s (-watch-timeout)", out)
		})
	}
}

// checkIncomplete checks the end of a run whose tiles stopped coming.
func checkIncomplete(t *testing.T, r result, why, out string) {
	t.Helper()
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	partial := filepath.Join(out, partialName(defNames))
	want := fmt.Sprintf("-watch: %s with 4 of 12 tiles missing: img_r003_c001.tif (there, but not complete: ", why)
	if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "img_r003_c002.tif, img_r003_c003.tif, img_r003_c004.tif; the provisional positions of the 8 tiles placed are kept in "+partial) {
		t.Errorf("stderr %q, want %q..., the missing tiles and the partial file", r.stderr, want)
	}
	pos := readGlobal(t, partial)
	if len(pos) != 8 || pos[0].Name != "img_r001_c001.tif" {
		t.Errorf("provisional positions %+v, want the 8 tiles in", pos)
	}
	for _, n := range outputNames {
		if _, err := os.Stat(filepath.Join(out, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("output %s written by an incomplete run (%v)", n, err)
		}
	}
	// The mosaic so far: 2 rows of 4 tiles of 256 x 192, overlapping by
	// about 10%, at full size (the whole grid fits in 2000 pixels).
	preview := filepath.Join(out, partialPreviewName(defNames))
	if !strings.Contains(r.stderr, "their mosaic's preview in "+preview) {
		t.Errorf("stderr %q does not name the preview", r.stderr)
	}
	pf, err := os.Open(preview)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	img, err := png.Decode(pf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 3*256 || b.Dx() > 4*256 || b.Dy() < 192 || b.Dy() > 2*192 {
		t.Errorf("preview of %v, want the extent of 2 x 4 tiles", b)
	}
	g, ok := img.(*image.Gray)
	if !ok {
		t.Fatalf("preview of %T, want 8-bit gray", img)
	}
	var lit int
	for _, v := range g.Pix {
		if v > 0 {
			lit++
		}
	}
	if lit < len(g.Pix)*9/10 {
		t.Errorf("%d of %d preview pixels are not black, want the tiles drawn", lit, len(g.Pix))
	}
}

// cancelAt is a writer that cancels when what it has been written
// contains at.
type cancelAt struct {
	b      bytes.Buffer
	at     string
	cancel context.CancelFunc
}

func (c *cancelAt) Write(p []byte) (int, error) {
	c.b.Write(p)
	if strings.Contains(c.b.String(), c.at) {
		c.cancel()
	}
	return len(p), nil
}

func TestWatchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-watch", "-rows", "2", "-cols", "2", "-out", "o"},
		{"-watch", "-dir", "d", "-rows", "2", "-cols", "2", "-out", "o", "-timeslices", "1-2", "-pattern", "i_{t}_{i}.tif"},
		{"-watch", "-dir", "d", "-rows", "2", "-cols", "2", "-out", "o", "-cluster", "2"},
		{"-watch", "-dir", "d", "-rows", "2", "-cols", "2", "-out", "o", "-watch-timeout", "-1s"},
		{"-dir", "d", "-rows", "2", "-cols", "2", "-out", "o", "-watch-timeout", "1s"},
	} {
		var out, errw bytes.Buffer
		err := run(context.Background(), args, &out, &errw)
		var ue cli.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: err = %v, want a usage error", args, err)
		}
	}
	// A folder that is not there is an error at once, naming it.
	missing := filepath.Join(t.TempDir(), "none")
	r := runArgs(t, context.Background(), "-watch", "-dir", missing, "-rows", "2", "-cols", "2", "-out", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, missing) {
		t.Errorf("watching a missing folder: exit %d, %q", r.code, r.stderr)
	}
}
