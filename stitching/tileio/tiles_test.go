package tileio

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/image/tiff"

	"github.com/gohtgs/htgs/stitching/synth"
)

func writeImage(t *testing.T, path string, img image.Image, format string) {
	t.Helper()
	var buf bytes.Buffer
	var err error
	if format == "png" {
		err = png.Encode(&buf, img)
	} else {
		err = tiff.Encode(&buf, img, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func gray16Ramp(w, h int) *image.Gray16 {
	img := image.NewGray16(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetGray16(x, y, color.Gray16{Y: uint16(1000*y + 7*x + 60000*((x+y)%2))})
		}
	}
	return img
}

func TestLoadTileFormats(t *testing.T) {
	dir := t.TempDir()
	g16 := gray16Ramp(9, 7)
	g8 := image.NewGray(image.Rect(0, 0, 9, 7))
	for i := range g8.Pix {
		g8.Pix[i] = uint8(3 * i)
	}
	for _, format := range []string{"tif", "png"} {
		p16 := filepath.Join(dir, "g16."+format)
		writeImage(t, p16, g16, format)
		got, err := LoadTile(p16)
		if err != nil {
			t.Fatalf("%s 16-bit: %v", format, err)
		}
		if !bytes.Equal(got.Pix, g16.Pix) || got.Bounds() != g16.Bounds() {
			t.Errorf("%s 16-bit: pixels differ", format)
		}
		p8 := filepath.Join(dir, "g8."+format)
		writeImage(t, p8, g8, format)
		got, err = LoadTile(p8)
		if err != nil {
			t.Fatalf("%s 8-bit: %v", format, err)
		}
		for y := 0; y < 7; y++ {
			for x := 0; x < 9; x++ {
				if want := uint16(g8.GrayAt(x, y).Y); got.Gray16At(x, y).Y != want {
					t.Fatalf("%s 8-bit: pixel (%d,%d) = %d, want %d (by value, not scaled)", format, x, y, got.Gray16At(x, y).Y, want)
				}
			}
		}
		// Colour is rejected, naming the file and the pixel type.
		rgb := image.NewRGBA(image.Rect(0, 0, 4, 4))
		pc := filepath.Join(dir, "rgb."+format)
		writeImage(t, pc, rgb, format)
		_, err = LoadTile(pc)
		if err == nil || !strings.Contains(err.Error(), pc) || !strings.Contains(err.Error(), "unsupported pixel type") {
			t.Errorf("%s RGB: error %v", format, err)
		}
	}
}

func TestLoadTileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.tif")
	if _, err := LoadTile(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	junk := filepath.Join(dir, "junk.tif")
	os.WriteFile(junk, []byte("not an image at all"), 0o644)
	if _, err := LoadTile(junk); err == nil || !strings.Contains(err.Error(), junk) {
		t.Errorf("junk file: %v", err)
	}
	// A TIFF cut short: valid header, missing data.
	var buf bytes.Buffer
	tiff.Encode(&buf, gray16Ramp(64, 64), nil)
	trunc := filepath.Join(dir, "trunc.tif")
	os.WriteFile(trunc, buf.Bytes()[:buf.Len()/2], 0o644)
	if _, err := LoadTile(trunc); err == nil || !strings.Contains(err.Error(), trunc) {
		t.Errorf("truncated file: %v", err)
	}
}

func TestOpenTileSet(t *testing.T) {
	dir := t.TempDir()
	pat, err := ParsePattern("img_r{rrr}_c{ccc}.tif", 1)
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 2; r++ {
		for c := 0; c < 3; c++ {
			writeImage(t, filepath.Join(dir, pat.Name(r, c, 2, 3)), gray16Ramp(10, 8), "tif")
		}
	}
	ts, err := OpenTileSet(dir, pat, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if w, h := ts.TileSize(); w != 10 || h != 8 || ts.Rows() != 2 || ts.Cols() != 3 {
		t.Fatalf("size %dx%d grid %dx%d", w, h, ts.Rows(), ts.Cols())
	}
	if ts.Name(1, 2) != "img_r002_c003.tif" {
		t.Errorf("Name = %q", ts.Name(1, 2))
	}
	img, err := ts.Load(1, 1)
	if err != nil || img.Bounds().Dx() != 10 {
		t.Fatalf("Load: %v", err)
	}

	// A tile of another size is named.
	odd := filepath.Join(dir, pat.Name(1, 1, 2, 3))
	writeImage(t, odd, gray16Ramp(11, 8), "tif")
	_, err = OpenTileSet(dir, pat, 2, 3)
	if err == nil || !strings.Contains(err.Error(), odd) || !strings.Contains(err.Error(), "11x8") {
		t.Errorf("size mismatch: %v", err)
	}
	// Load also checks the size (file changed after opening).
	if _, err := ts.Load(1, 1); err == nil || !strings.Contains(err.Error(), odd) {
		t.Errorf("Load of resized tile: %v", err)
	}
	// A missing tile is named.
	os.Remove(odd)
	_, err = OpenTileSet(dir, pat, 2, 3)
	if err == nil || !strings.Contains(err.Error(), odd) {
		t.Errorf("missing tile: %v", err)
	}
	// An RGB tile is rejected from its header.
	writeImage(t, odd, image.NewRGBA(image.Rect(0, 0, 10, 8)), "png")
	_, err = OpenTileSet(dir, pat, 2, 3)
	if err == nil || !strings.Contains(err.Error(), odd) || !strings.Contains(err.Error(), "unsupported pixel type") {
		t.Errorf("RGB tile: %v", err)
	}
	if _, err := OpenTileSet(dir, pat, 0, 3); err == nil {
		t.Error("empty grid accepted")
	}
}

func TestMemoryTiles(t *testing.T) {
	a, b := gray16Ramp(8, 6), gray16Ramp(8, 6)
	m, err := NewMemoryTiles(1, 2, []*image.Gray16{a, b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name(0, 1) != "tile_r0_c1" {
		t.Errorf("default name %q", m.Name(0, 1))
	}
	if got, _ := m.Load(0, 1); got != b {
		t.Error("Load returned the wrong tile")
	}
	if _, err := m.Load(1, 0); err == nil {
		t.Error("Load outside the grid succeeded")
	}
	if _, err := NewMemoryTiles(1, 2, []*image.Gray16{a, gray16Ramp(9, 6)}, nil); err == nil || !strings.Contains(err.Error(), "9x6") {
		t.Errorf("size mismatch: %v", err)
	}
	if _, err := NewMemoryTiles(1, 2, []*image.Gray16{a}, nil); err == nil {
		t.Error("wrong tile count accepted")
	}
	if _, err := NewMemoryTiles(1, 2, []*image.Gray16{a, b}, []string{"x"}); err == nil {
		t.Error("wrong name count accepted")
	}
	sub := gray16Ramp(10, 8).SubImage(image.Rect(1, 1, 9, 7)).(*image.Gray16)
	if _, err := NewMemoryTiles(1, 2, []*image.Gray16{a, sub}, nil); err == nil {
		t.Error("non-zero origin accepted")
	}
}

// BenchmarkLoadTile decodes a 16-bit 1392x1040 TIFF.
func BenchmarkLoadTile(b *testing.B) {
	cfg := synth.ConfigFor(synth.Realistic)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight = 1, 2, 1392, 1040
	sg, err := synth.Generate(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	path := b.TempDir() + "/t.tif"
	if err := synth.WriteTIFF(path, sg.Tiles[0]); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := LoadTile(path); err != nil {
			b.Fatal(err)
		}
	}
}

// TileSet.Load reads each tile with a reused buffer and gives what
// LoadTile gives, for several files in turn and from several
// goroutines; an empty file is an error naming it.
func TestTileSetLoadReusesBuffers(t *testing.T) {
	dir := t.TempDir()
	sizes := [][2]int{{40, 30}, {40, 30}, {40, 30}, {40, 30}}
	for i, sz := range sizes {
		img := image.NewGray16(image.Rect(0, 0, sz[0], sz[1]))
		for j := range img.Pix {
			img.Pix[j] = byte(j*7 + i)
		}
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("t_%d.tif", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := tiff.Encode(f, img, nil); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	pat, err := ParsePattern("t_{i}.tif", 0)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := OpenTileSet(dir, pat, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 20 {
				r, c := (g+k)/2%2, (g+k)%2
				got, err := ts.Load(r, c)
				if err != nil {
					t.Error(err)
					return
				}
				want, err := LoadTile(ts.Path(r, c))
				if err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(got.Pix, want.Pix) {
					t.Errorf("tile (%d, %d): Load and LoadTile differ", r, c)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := os.WriteFile(ts.Path(1, 1), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Load(1, 1); err == nil || !strings.Contains(err.Error(), "t_3.tif") {
		t.Fatalf("empty file: %v, want an error naming it", err)
	}
}
