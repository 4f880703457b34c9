package tiled

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

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
