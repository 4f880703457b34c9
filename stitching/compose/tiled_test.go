package compose

import (
	"bytes"
	"context"
	"errors"
	"image"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gohtgs/htgs/tiled"
)

// ComposeTiled's out-of-core mosaic equals the in-memory one in every
// blend mode, with a tile cache far smaller than the mosaic, for
// overlapping tiles and for tiles with gaps between them (whose pixels
// must be 0 in every band, the band buffer being reused).
func TestComposeTiledEqualsInMemory(t *testing.T) {
	for _, step := range [][2]int{{130, 115}, {170, 160}} {
		composeTiledEqualsInMemory(t, step[0], step[1])
	}
}

func composeTiledEqualsInMemory(t *testing.T, sx, sy int) {
	r := rand.New(rand.NewPCG(5, 5))
	var tiles []Placement
	var slots []Slot
	for gy := 0; gy < 3; gy++ {
		for gx := 0; gx < 4; gx++ {
			img := image.NewGray16(image.Rect(0, 0, 150, 130))
			for i := range img.Pix {
				img.Pix[i] = byte(r.UintN(256))
			}
			x, y := gx*sx+int(r.UintN(7)), gy*sy+int(r.UintN(7))
			tiles = append(tiles, Placement{Image: img, X: x, Y: y})
			slots = append(slots, Slot{X: x, Y: y, Width: 150, Height: 130})
		}
	}
	for _, mode := range []Blend{Overlay, Average, Linear} {
		want, err := Compose(context.Background(), tiles, mode)
		if err != nil {
			t.Fatal(err)
		}
		mw, mh, _ := MosaicSize(slots)
		dst, err := tiled.CreateTemp(t.TempDir(), mw, mh, 64, 64, 12*64*64*2)
		if err != nil {
			t.Fatal(err)
		}
		load := func(i int) (*image.Gray16, error) { return tiles[i].Image, nil }
		if err := ComposeTiled(context.Background(), slots, load, mode, dst); err != nil {
			t.Fatal(err)
		}
		got := make([]uint16, mw*mh)
		if err := dst.ReadRect(0, 0, mw, mh, got, tiled.Zero); err != nil {
			t.Fatal(err)
		}
		for y := 0; y < mh; y++ {
			for x := 0; x < mw; x++ {
				if w := want.Gray16At(x, y).Y; got[y*mw+x] != w {
					t.Fatalf("step %dx%d, %v: pixel (%d,%d) = %d, in memory %d", sx, sy, mode, x, y, got[y*mw+x], w)
				}
			}
		}
		if st := dst.CacheStats(); st.Peak > st.Capacity {
			t.Fatalf("cache over budget %+v", st)
		}
		dst.Close()
	}
}

// benchGrid is a gx x gy grid of tw x th random tiles overlapping by
// about 10%, with small jitter, as a stitched acquisition gives.
func benchGrid(gx, gy, tw, th int) ([]Slot, []*image.Gray16) {
	r := rand.New(rand.NewPCG(7, 7))
	var slots []Slot
	var imgs []*image.Gray16
	for y := 0; y < gy; y++ {
		for x := 0; x < gx; x++ {
			img := image.NewGray16(image.Rect(0, 0, tw, th))
			for i := range img.Pix {
				img.Pix[i] = byte(r.UintN(256))
			}
			imgs = append(imgs, img)
			slots = append(slots, Slot{X: x*tw*9/10 + int(r.UintN(5)), Y: y*th*9/10 + int(r.UintN(5)), Width: tw, Height: th})
		}
	}
	return slots, imgs
}

// BenchmarkComposeTiled composes a 4 x 3 grid of 1392 x 1040 tiles out of
// core (linear blending) into 512 x 512 tiles with a 64 MiB cache and
// writes the pyramidal BigTIFF; bytes are the full-resolution mosaic's.
func BenchmarkComposeTiled(b *testing.B) {
	slots, imgs := benchGrid(4, 3, 1392, 1040)
	mw, mh, _ := MosaicSize(slots)
	dir := b.TempDir()
	load := func(i int) (*image.Gray16, error) { return imgs[i], nil }
	b.SetBytes(int64(2 * mw * mh))
	for b.Loop() {
		dst, err := tiled.CreateTemp(dir, mw, mh, 512, 512, 64<<20)
		if err != nil {
			b.Fatal(err)
		}
		if err := ComposeTiled(context.Background(), slots, load, Linear, dst); err != nil {
			b.Fatal(err)
		}
		if err := tiled.WriteBigTIFF(dir+"/m.tif", dst, 0, dir, 16<<20); err != nil {
			b.Fatal(err)
		}
		dst.Close()
	}
}

// ComposeBigTIFF's streamed file is byte for byte WriteBigTIFF of
// ComposeTiled's image, in every blend mode.
func TestComposeBigTIFFEqualsComposeTiled(t *testing.T) {
	slots, imgs := benchGrid(4, 8, 150, 130) // 4 bands: both band buffers used twice
	load := func(i int) (*image.Gray16, error) { return imgs[i], nil }
	mw, mh, _ := MosaicSize(slots)
	for _, mode := range []Blend{Overlay, Average, Linear} {
		dir := t.TempDir()
		dst, err := tiled.CreateTemp(dir, mw, mh, 64, 64, 12*64*64*2)
		if err != nil {
			t.Fatal(err)
		}
		if err := ComposeTiled(context.Background(), slots, load, mode, dst); err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(dir, "want.tif")
		if err := tiled.WriteBigTIFF(want, dst, 0, dir, 8*64*64*2); err != nil {
			t.Fatal(err)
		}
		dst.Close()
		out := testStream(t, slots, dir, "got.tif")
		closeStream(t, out, ComposeBigTIFF(context.Background(), slots, load, mode, out))
		a, _ := os.ReadFile(want)
		b, _ := os.ReadFile(filepath.Join(dir, "got.tif"))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Fatalf("%v: streamed BigTIFF differs (%d vs %d bytes)", mode, len(b), len(a))
		}
	}
	out, err := tiled.CreateBigTIFF(filepath.Join(t.TempDir(), "x.tif"), mw+1, mh, 64, 64, 0, t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := ComposeBigTIFF(context.Background(), slots, load, Linear, out); err == nil {
		t.Fatal("wrong-size output accepted")
	}
	if err := out.Close(); err == nil {
		t.Fatal("incomplete stream closed without error")
	}
}

// A tile that fails to load in a later band, while the band before it is
// being written, fails ComposeBigTIFF with that error, and the write in
// flight is waited for (goleak checks the package).
// ComposeBigTIFFTerms counts the bands and times each stage: a loader
// that takes 2 ms a tile shows in Load and nowhere else.
func TestComposeBigTIFFTerms(t *testing.T) {
	slots, imgs := benchGrid(4, 8, 150, 130)
	const pause = 2 * time.Millisecond
	load := func(i int) (*image.Gray16, error) {
		time.Sleep(pause)
		return imgs[i], nil
	}
	_, mh, _ := MosaicSize(slots)
	out := testStream(t, slots, t.TempDir(), "m.tif")
	terms, err := ComposeBigTIFFTerms(context.Background(), slots, load, Linear, out)
	closeStream(t, out, err)
	band := 64 * ((bandHeight + 63) / 64)
	if want := (mh + band - 1) / band; terms.Bands != want {
		t.Errorf("%d bands, want %d (%d rows in bands of %d)", terms.Bands, want, mh, band)
	}
	if least := time.Duration(len(slots)) * pause; terms.Load < least {
		t.Errorf("Load %v, want at least the loader's %v", terms.Load, least)
	}
	if terms.Compose <= 0 || terms.Write <= 0 {
		t.Errorf("Compose %v, Write %v: want both timed", terms.Compose, terms.Write)
	}
	if terms.Compose >= time.Duration(len(slots))*pause {
		t.Errorf("Compose %v includes the loader's pauses", terms.Compose)
	}
}

// testStream creates a BigTIFF stream of 64 x 64 tiles at dir/name for the
// mosaic of slots.
func testStream(t *testing.T, slots []Slot, dir, name string) *tiled.BigTIFFStream {
	t.Helper()
	mw, mh, err := MosaicSize(slots)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tiled.CreateBigTIFF(filepath.Join(dir, name), mw, mh, 64, 64, 0, dir, 8*64*64*2)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// closeStream closes out after composing into it returned err, and fails
// the test on either error.
func closeStream(t *testing.T, out *tiled.BigTIFFStream, err error) {
	t.Helper()
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestComposeBigTIFFLoadErrorMidway(t *testing.T) {
	slots, imgs := benchGrid(4, 8, 150, 130)
	bad := len(slots) - 1
	boom := errors.New("disk gone")
	load := func(i int) (*image.Gray16, error) {
		if i == bad {
			return nil, boom
		}
		return imgs[i], nil
	}
	out := testStream(t, slots, t.TempDir(), "m.tif")
	err := ComposeBigTIFF(context.Background(), slots, load, Linear, out)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the loader's", err)
	}
	_ = out.Close()
}

// BenchmarkComposeBigTIFF is BenchmarkComposeTiled streamed: no tile file.
func BenchmarkComposeBigTIFF(b *testing.B) {
	slots, imgs := benchGrid(4, 3, 1392, 1040)
	mw, mh, _ := MosaicSize(slots)
	dir := b.TempDir()
	load := func(i int) (*image.Gray16, error) { return imgs[i], nil }
	b.SetBytes(int64(2 * mw * mh))
	for b.Loop() {
		out, err := tiled.CreateBigTIFF(dir+"/m.tif", mw, mh, 512, 512, 0, dir, 16<<20)
		if err != nil {
			b.Fatal(err)
		}
		if err := ComposeBigTIFF(context.Background(), slots, load, Linear, out); err != nil {
			b.Fatal(err)
		}
		if err := out.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
