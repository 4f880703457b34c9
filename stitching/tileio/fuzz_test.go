package tileio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/image/tiff"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/compose"
	"github.com/gohtgs/htgs/stitching/synth"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// fuzzTilePixels is the tile limit of the fuzz targets: small, so that a
// header claiming a large image is refused instead of costing each
// execution a large allocation.
const fuzzTilePixels = 1 << 16

// fuzzGrid is a small synthetic grid for seeds, with records of its true
// positions as a stitcher writes them: the translations scored by NCC, the
// tiles placed by the spanning tree.
func fuzzGrid(f *testing.F) (tiles []*image.Gray16, global []GlobalPosition, relative []RelativePosition) {
	f.Helper()
	cfg := synth.ConfigFor(synth.Easy)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight = 2, 3, 64, 48
	sg, err := synth.Generate(context.Background(), cfg)
	if err != nil {
		f.Fatal(err)
	}
	rows, cols := cfg.Rows, cfg.Cols
	tr := align.NewTranslations(rows, cols)
	for _, p := range align.Pairs(rows, cols) {
		i := p.Row*cols + p.Col
		nr, nc := p.Neighbor()
		j := nr*cols + nc
		x, y := sg.X[i]-sg.X[j], sg.Y[i]-sg.Y[j]
		tr.Set(p, align.Translation{X: x, Y: y, Corr: align.NCC(sg.Tiles[j], sg.Tiles[i], x, y)})
	}
	name := func(row, col int) string { return fmt.Sprintf("tile_r%d_c%d", row, col) }
	for i, p := range align.GlobalPositions(tr) {
		global = append(global, GlobalPosition{Name: name(i/cols, i%cols), Corr: p.Corr, X: p.X, Y: p.Y, Col: i % cols, Row: i / cols})
	}
	return sg.Tiles, global, RelativePositions(tr, name)
}

// tileSeeds are tile files written by the package's writers (compose's
// TIFF encoder, the PNG encoder), in both bit depths, and headers that
// claim huge sizes or colour.
func tileSeeds(f *testing.F) [][]byte {
	f.Helper()
	tiles, _, _ := fuzzGrid(f)
	// Crops of a synthetic tile: small seeds mutate and minimize fast.
	tile := tiles[0].SubImage(image.Rect(0, 0, 16, 12)).(*image.Gray16)
	small := tiles[1].SubImage(image.Rect(3, 2, 8, 5)).(*image.Gray16)
	g8 := image.NewGray(image.Rect(0, 0, 7, 4))
	for i := range g8.Pix {
		g8.Pix[i] = uint8(37 * i)
	}
	var seeds [][]byte
	for _, img := range []image.Image{tile, small, g8, image.NewRGBA(image.Rect(0, 0, 2, 2))} {
		var tb, pb bytes.Buffer
		if g16, ok := img.(*image.Gray16); ok {
			if err := compose.EncodeTIFF(&tb, g16); err != nil {
				f.Fatal(err)
			}
			seeds = append(seeds, tb.Bytes())
		} else {
			writeFuzzTIFF(f, &tb, img)
			seeds = append(seeds, tb.Bytes())
		}
		if err := png.Encode(&pb, img); err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, pb.Bytes())
	}
	return append(seeds, hugeTIFF(f, 60000, 60000), hugePNG(f, 60000, 60000), []byte("II*\x00"), []byte("\x89PNG\r\n\x1a\n"), nil)
}

// checkTile checks what a decoder returned for data.
func checkTile(t *testing.T, img *image.Gray16, err error) {
	t.Helper()
	if err != nil {
		if img != nil {
			t.Fatalf("image and error %v", err)
		}
		return
	}
	b := img.Bounds()
	if b.Min != (image.Point{}) || b.Dx() <= 0 || b.Dy() <= 0 || int64(b.Dx())*int64(b.Dy()) > fuzzTilePixels {
		t.Fatalf("bounds %v (limit %d pixels)", b, fuzzTilePixels)
	}
	if len(img.Pix) < 2*b.Dx()*b.Dy() || img.Stride < 2*b.Dx() {
		t.Fatalf("%d bytes, stride %d for %v", len(img.Pix), img.Stride, b)
	}
}

// FuzzDecodeTile: any input gives an error or a well-formed tile within the
// size limit, never a panic, and decoding is deterministic.
func FuzzDecodeTile(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, s := range tileSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := DecodeTileLimit(bytes.NewReader(data), fuzzTilePixels)
		checkTile(t, img, err)
		again, err2 := DecodeTileLimit(bytes.NewReader(data), fuzzTilePixels)
		if (err == nil) != (err2 == nil) || (err == nil && !bytes.Equal(img.Pix, again.Pix)) {
			t.Fatalf("not deterministic: %v, then %v", err, err2)
		}
		if errors.Is(err, ErrTileTooLarge) && !strings.Contains(err.Error(), "limit") {
			t.Fatalf("size error without the limit: %v", err)
		}
	})
}

// FuzzLoadTile: a file gives what its bytes decode to; errors name the
// file; a tile that loads also opens as a one-tile TileSet of its size.
func FuzzLoadTile(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, s := range tileSeeds(f) {
		f.Add(s)
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "tile0.img")
	pat, err := ParsePattern("tile{i}.img", 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		img, err := LoadTileLimit(path, fuzzTilePixels)
		checkTile(t, img, err)
		if err != nil && !strings.Contains(err.Error(), path) {
			t.Fatalf("error does not name the file: %v", err)
		}
		want, werr := DecodeTileLimit(bytes.NewReader(data), fuzzTilePixels)
		if (err == nil) != (werr == nil) || (err == nil && !bytes.Equal(img.Pix, want.Pix)) {
			t.Fatalf("LoadTile %v, DecodeTile %v", err, werr)
		}
		ts, oerr := OpenTileSetLimit(dir, pat, 1, 1, fuzzTilePixels)
		if oerr != nil && !strings.Contains(oerr.Error(), path) {
			t.Fatalf("OpenTileSet error does not name the file: %v", oerr)
		}
		if err != nil {
			return
		}
		b := img.Bounds()
		if b.Dx() < 2 || b.Dy() < 2 {
			return // too small to stitch: OpenTileSet refuses it
		}
		if oerr != nil {
			t.Fatalf("the tile loads (%v) but OpenTileSet refuses it: %v", b, oerr)
		}
		if w, h := ts.TileSize(); w != b.Dx() || h != b.Dy() {
			t.Fatalf("header says %d x %d, pixels %v", w, h, b)
		}
		if got, err := ts.Load(0, 0); err != nil || !bytes.Equal(got.Pix, img.Pix) {
			t.Fatalf("TileSet.Load: %v", err)
		}
	})
}

// FuzzReadGlobalPositions: whatever the reader accepts and the writer can
// write reads back the same after one round (correlations are written with
// 10 decimals).
func FuzzReadGlobalPositions(f *testing.F) {
	fuzzrun.Prepare(f)
	_, global, _ := fuzzGrid(f)
	var buf bytes.Buffer
	if err := WriteGlobalPositions(&buf, global); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("file: a b.tif; corr: -1.5e-3; position: (-3, 7); grid: (0, 2);\n\n  file:x;corr:1;position:(1,2);grid:(3,4);  \n"))
	f.Add([]byte("file: a.tif; corr: NaN; position: (0, 0); grid: (0, 0);"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pos, err := ReadGlobalPositions(bytes.NewReader(data))
		if err != nil {
			if pos != nil {
				t.Fatalf("positions and error %v", err)
			}
			return
		}
		var w1 bytes.Buffer
		if WriteGlobalPositions(&w1, pos) != nil {
			return // names the reader tolerates but the writer refuses
		}
		once, err := ReadGlobalPositions(bytes.NewReader(w1.Bytes()))
		if err != nil || len(once) != len(pos) {
			t.Fatalf("written positions do not read back: %v\n%q", err, w1.Bytes())
		}
		for i := range pos {
			a, b := pos[i], once[i]
			if a.Name != b.Name || a.X != b.X || a.Y != b.Y || a.Col != b.Col || a.Row != b.Row {
				t.Fatalf("line %d: read %+v, after writing %+v", i+1, a, b)
			}
		}
		var w2 bytes.Buffer
		if err := WriteGlobalPositions(&w2, once); err != nil || !bytes.Equal(w1.Bytes(), w2.Bytes()) {
			t.Fatalf("second round differs (%v):\n%q\n%q", err, w1.Bytes(), w2.Bytes())
		}
	})
}

// FuzzReadRelativePositions is FuzzReadGlobalPositions for the relative
// positions format.
func FuzzReadRelativePositions(f *testing.F) {
	fuzzrun.Prepare(f)
	_, _, relative := fuzzGrid(f)
	var buf bytes.Buffer
	if err := WriteRelativePositions(&buf, relative); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("west, b, a, 0.5, 12, -3\n\nnorth,c,a,1e-2,0,9\n"))
	f.Add([]byte("east, b, a, 0.5, 1, 2"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rel, err := ReadRelativePositions(bytes.NewReader(data))
		if err != nil {
			if rel != nil {
				t.Fatalf("positions and error %v", err)
			}
			return
		}
		for i, r := range rel {
			if r.Dir != align.West && r.Dir != align.North {
				t.Fatalf("line %d: direction %v", i+1, r.Dir)
			}
		}
		var w1 bytes.Buffer
		if WriteRelativePositions(&w1, rel) != nil {
			return
		}
		once, err := ReadRelativePositions(bytes.NewReader(w1.Bytes()))
		if err != nil || len(once) != len(rel) {
			t.Fatalf("written positions do not read back: %v\n%q", err, w1.Bytes())
		}
		for i := range rel {
			a, b := rel[i], once[i]
			a.Corr, b.Corr = 0, 0
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("line %d: read %+v, after writing %+v", i+1, rel[i], once[i])
			}
		}
		var w2 bytes.Buffer
		if err := WriteRelativePositions(&w2, once); err != nil || !bytes.Equal(w1.Bytes(), w2.Bytes()) {
			t.Fatalf("second round differs (%v):\n%q\n%q", err, w1.Bytes(), w2.Bytes())
		}
	})
}

// writeFuzzTIFF writes a non-16-bit image with the TIFF encoder.
func writeFuzzTIFF(f *testing.F, buf *bytes.Buffer, img image.Image) {
	f.Helper()
	if err := tiff.Encode(buf, img, nil); err != nil {
		f.Fatal(err)
	}
}
