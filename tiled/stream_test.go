package tiled

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// The stream's cutting goroutines and background writes end with each
// call and Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A streamed BigTIFF is byte for byte WriteBigTIFF's file of the same
// pixels, for odd and even sizes, uneven bands and one level or all.
func TestBigTIFFStreamEqualsWriteBigTIFF(t *testing.T) {
	for _, tc := range []struct{ w, h, levels int }{{101, 77, 0}, {100, 64, 0}, {37, 20, 1}, {130, 200, 2}} {
		dir := t.TempDir()
		im, err := CreateTemp(dir, tc.w, tc.h, 32, 16, 4*32*16*2)
		if err != nil {
			t.Fatal(err)
		}
		ref := fill(t, im, 8)
		want := filepath.Join(dir, "want.tif")
		if err := WriteBigTIFF(want, im, tc.levels, dir, 4*32*16*2); err != nil {
			t.Fatal(err)
		}
		im.Close()
		got := filepath.Join(dir, "got.tif")
		s, err := CreateBigTIFF(got, tc.w, tc.h, 32, 16, tc.levels, dir, 4*32*16*2)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, 1))
		for y := 0; y < tc.h; {
			n := min(16*(1+int(r.IntN(3))), tc.h-y)
			if err := s.WriteRows(y, n, ref[y*tc.w:]); err != nil {
				t.Fatal(err)
			}
			y += n
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(want)
		b, _ := os.ReadFile(got)
		if !bytes.Equal(a, b) {
			t.Fatalf("%+v: streamed file differs (%d vs %d bytes)", tc, len(b), len(a))
		}
	}
}

func TestBigTIFFStreamRefusals(t *testing.T) {
	dir := t.TempDir()
	if _, err := CreateBigTIFF(filepath.Join(dir, "a.tif"), 10, 10, 20, 16, 0, dir, 1<<20); err == nil {
		t.Fatal("tile width 20 accepted")
	}
	path := filepath.Join(dir, "b.tif")
	s, err := CreateBigTIFF(path, 50, 40, 16, 16, 0, dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	px := make([]uint16, 50*40)
	for _, c := range [][2]int{{16, 16}, {0, 10}, {0, 48}} {
		if err := s.WriteRows(c[0], c[1], px); err == nil {
			t.Fatalf("rows %v accepted", c)
		}
	}
	if err := s.WriteRows(0, 32, px); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err == nil {
		t.Fatal("closed with rows missing")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("incomplete file left: %v", err)
	}
}

// Every level of a streamed BigTIFF equals Downsample applied level after
// level to the image (the reference, tile by tile from a tiled image), the
// padding of edge tiles zero, and the reduced levels' rows of tiles are
// interleaved with the full resolution's as the stream goes.
func TestBigTIFFStreamLevelsMatchDownsample(t *testing.T) {
	// Whole rows in one run, and runs of two or three tiles (several
	// writes per row, each padded to the direct-write alignment).
	defer func(b int) { runBytes = b }(runBytes)
	for _, rb := range []int{4 << 20, 5000} {
		runBytes = rb
		streamLevelsMatchDownsample(t)
	}
}

func streamLevelsMatchDownsample(t *testing.T) {
	for _, tc := range []struct{ w, h, tw, th, levels int }{
		{101, 77, 32, 16, 0}, {100, 64, 16, 16, 0}, {37, 20, 16, 16, 1}, {130, 200, 32, 16, 2}, {515, 263, 64, 32, 0}, {1, 1, 16, 16, 3},
	} {
		dir := t.TempDir()
		im, err := CreateTemp(dir, tc.w, tc.h, tc.tw, tc.th, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		ref := fill(t, im, 9)
		path := filepath.Join(dir, "s.tif")
		s, err := CreateBigTIFF(path, tc.w, tc.h, tc.tw, tc.th, tc.levels, dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		pix := make([]byte, 2*len(ref)) // big-endian, as image.Gray16
		for i, v := range ref {
			pix[2*i], pix[2*i+1] = byte(v>>8), byte(v)
		}
		r := rand.New(rand.NewPCG(2, 2))
		for k, y := 0, 0; y < tc.h; k++ {
			n := min(tc.th*(1+int(r.IntN(3))), tc.h-y)
			if k%2 == 0 {
				err = s.WriteRows(y, n, ref[y*tc.w:])
			} else {
				err = s.WriteRowsBE(y, n, pix[2*y*tc.w:], 2*tc.w)
			}
			if err != nil {
				t.Fatal(err)
			}
			y += n
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		tf, err := OpenBigTIFF(path)
		if err != nil {
			t.Fatal(err)
		}
		want := tc.levels
		if want <= 0 {
			want = Levels(tc.w, tc.h, tc.tw, tc.th)
		}
		if len(tf.Levels) != want {
			t.Fatalf("%+v: %d levels, want %d", tc, len(tf.Levels), want)
		}
		got := make([]uint16, tc.tw*tc.th)
		exp := make([]uint16, tc.tw*tc.th)
		err = eachLevel(im, want, dir, 1<<20, func(l int, level *Image) error {
			lv := tf.Levels[l]
			if lv.W != level.W || lv.H != level.H || lv.Reduced != (l > 0) {
				t.Fatalf("%+v level %d: %+v, want %d x %d", tc, l, lv, level.W, level.H)
			}
			if l == 1 && len(tf.Levels[0].Offsets) > level.TilesX() && lv.Offsets[0] > tf.Levels[0].Offsets[len(tf.Levels[0].Offsets)-1] {
				t.Errorf("%+v: level 1 written after all of level 0, not interleaved", tc)
			}
			for _, c := range level.Tiles() {
				if err := tf.ReadTile(l, c, got); err != nil {
					return err
				}
				if err := level.ReadTile(c, exp); err != nil {
					return err
				}
				_, _, cw, ch := level.Rect(c)
				for y := range tc.th {
					for x := range tc.tw {
						e := exp[y*tc.tw+x]
						if x >= cw || y >= ch {
							e = 0
						}
						if got[y*tc.tw+x] != e {
							t.Fatalf("%+v level %d tile %v (%d,%d): %d want %d", tc, l, c, x, y, got[y*tc.tw+x], e)
						}
					}
				}
			}
			return nil
		})
		tf.Close()
		im.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Direct and buffered writes make the same file, byte for byte, and both
// read back as written.
func TestBigTIFFDirectEqualsBuffered(t *testing.T) {
	dir := t.TempDir()
	const w, h = 300, 170
	r := rand.New(rand.NewPCG(4, 4))
	px := make([]uint16, w*h)
	for i := range px {
		px[i] = uint16(r.Uint32())
	}
	write := func(direct bool) []byte {
		defer func(d bool) { useDirect = d }(useDirect)
		useDirect = direct
		path := filepath.Join(dir, fmt.Sprintf("direct-%v.tif", direct))
		s, err := CreateBigTIFF(path, w, h, 64, 32, 0, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if (s.t.direct != nil) && !direct {
			t.Fatal("direct writes on when turned off")
		}
		if direct && s.t.direct == nil {
			t.Log("this file system refuses direct writes: both files buffered")
		}
		for y := 0; y < h; y += 64 {
			if err := s.WriteRows(y, min(64, h-y), px[y*w:]); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		tf, err := OpenBigTIFF(path)
		if err != nil {
			t.Fatal(err)
		}
		defer tf.Close()
		tile := make([]uint16, 64*32)
		if err := tf.ReadTile(0, Coord{4, 5}, tile); err != nil {
			t.Fatal(err)
		}
		for y := range 10 { // rows 160..169 of columns 256..299
			for x := range 44 {
				if got, want := tile[y*64+x], px[(160+y)*w+256+x]; got != want {
					t.Fatalf("direct %v: pixel (%d, %d) = %d, want %d", direct, 256+x, 160+y, got, want)
				}
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := write(true), write(false)
	if !bytes.Equal(a, b) {
		t.Fatalf("direct and buffered files differ (%d and %d bytes)", len(a), len(b))
	}
}

// BenchmarkReduceRow reduces two 512-pixel rows (one tile's width).
func BenchmarkReduceRow(b *testing.B) {
	r0, r1, out := make([]uint16, 512), make([]uint16, 512), make([]uint16, 256)
	for i := range r0 {
		r0[i], r1[i] = uint16(i*7), uint16(i*13)
	}
	b.SetBytes(2 * 2 * 512)
	for b.Loop() {
		reduceRow(out, r0, r1)
	}
}

// BenchmarkSwapBE converts one 512-pixel big-endian row.
func BenchmarkSwapBE(b *testing.B) {
	src, d := make([]byte, 1024), make([]uint16, 512)
	b.SetBytes(1024)
	for b.Loop() {
		swapBE(d, src)
	}
}

// The level KeepLevel keeps is the level in the file, pixel for pixel, in
// odd and even sizes, for the first channel of several.
func TestBigTIFFStreamKeepLevel(t *testing.T) {
	for _, tc := range []struct{ w, h, level, channels int }{{101, 77, 1, 1}, {100, 64, 2, 1}, {130, 200, 1, 2}, {257, 33, 3, 1}} {
		dir := t.TempDir()
		path := filepath.Join(dir, "k.ome.tif")
		names := make([]string, tc.channels)
		for i := range names {
			names[i] = fmt.Sprint("c", i)
		}
		s, err := CreateOMETIFF(path, tc.w, tc.h, OMETIFFOptions{TileW: 32, TileH: 16, Channels: names})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.KeepLevel(0); err == nil {
			t.Error("KeepLevel(0) accepted")
		}
		if err := s.KeepLevel(tc.level); err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(tc.w), 3))
		for ch := range tc.channels {
			if ch > 0 {
				if err := s.NextChannel(); err != nil {
					t.Fatal(err)
				}
			}
			px := make([]uint16, tc.w*tc.h)
			for i := range px {
				px[i] = uint16(r.IntN(65536))
			}
			for y := 0; y < tc.h; y += 16 {
				if px, _, _ := s.Kept(); px != nil && ch == 0 {
					t.Fatalf("%+v: Kept before the level is complete", tc)
				}
				if err := s.WriteRows(y, min(16, tc.h-y), px[y*tc.w:]); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		kept, kw, kh := s.Kept()
		f, err := OpenBigTIFF(path)
		if err != nil {
			t.Fatal(err)
		}
		lv := f.Levels[tc.level]
		if kw != lv.W || kh != lv.H || len(kept) != kw*kh {
			t.Fatalf("%+v: kept %d x %d (%d pixels), the file's level is %d x %d", tc, kw, kh, len(kept), lv.W, lv.H)
		}
		tile := make([]uint16, lv.TW*lv.TH)
		for ty := 0; ty*lv.TH < lv.H; ty++ {
			for tx := 0; tx*lv.TW < lv.W; tx++ {
				if err := f.ReadTile(tc.level, Coord{X: tx, Y: ty}, tile); err != nil {
					t.Fatal(err)
				}
				for y := ty * lv.TH; y < min(lv.H, (ty+1)*lv.TH); y++ {
					for x := tx * lv.TW; x < min(lv.W, (tx+1)*lv.TW); x++ {
						if got, want := kept[y*kw+x], tile[(y-ty*lv.TH)*lv.TW+x-tx*lv.TW]; got != want {
							t.Fatalf("%+v: kept (%d, %d) = %d, the file has %d", tc, x, y, got, want)
						}
					}
				}
			}
		}
		f.Close()
	}
}
