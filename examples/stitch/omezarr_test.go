package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/tiled"
)

// -format ome-zarr writes the mosaic as an OME-Zarr NGFF 0.5 folder named
// PREFIXstitched-T.ome.zarr, in memory and out of core alike: every level
// equals the OME-TIFF's of the same run options, the preview is the same,
// and a second run replaces the folder whole.
func TestMosaicOMEZarr(t *testing.T) {
	dir := generateSmall(t)
	tifOut := t.TempDir()
	tifPath := stitchSmall(t, dir, tifOut, "-tile-size", "64", "-pixel-size", "0.65")
	ref, err := tiled.OpenBigTIFF(tifPath)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	refPreview, err := os.ReadFile(filepath.Join(tifOut, defNames.preview))
	if err != nil {
		t.Fatal(err)
	}
	zname := strings.TrimSuffix(defNames.mosaic, ".ome.tif") + ".ome.zarr"
	for _, mem := range []string{"4GiB", "1MiB"} {
		out := t.TempDir()
		stitchSmall(t, dir, out, "-tile-size", "64", "-pixel-size", "0.65", "-format", "ome-zarr", "-compression", "zstd", "-mem", mem)
		zdir := filepath.Join(out, zname)
		if _, err := os.Stat(filepath.Join(out, defNames.mosaic)); err == nil {
			t.Errorf("-mem %s: an OME-TIFF was written too", mem)
		}
		z, err := tiled.OpenOMEZarr(zdir)
		if err != nil {
			t.Fatalf("-mem %s: %v", mem, err)
		}
		if len(z.Levels) != len(ref.Levels) {
			t.Fatalf("-mem %s: %d levels, the OME-TIFF has %d", mem, len(z.Levels), len(ref.Levels))
		}
		want := make([]uint16, 64*64)
		for l, lv := range z.Levels {
			if rl := ref.Levels[l]; lv.W != rl.W || lv.H != rl.H || lv.Scale != 0.65*float64(int(1)<<l) {
				t.Fatalf("-mem %s level %d: %+v, the OME-TIFF's %d x %d", mem, l, lv, rl.W, rl.H)
			}
			for ty := 0; ty*lv.TH < lv.H; ty++ {
				for tx := 0; tx*lv.TW < lv.W; tx++ {
					got, err := z.ReadChunk(l, tx, ty)
					if err != nil {
						t.Fatal(err)
					}
					if err := ref.ReadTile(l, tiled.Coord{X: tx, Y: ty}, want); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("-mem %s level %d chunk (%d, %d) differs from the OME-TIFF", mem, l, tx, ty)
					}
				}
			}
		}
		prev, err := os.ReadFile(filepath.Join(out, defNames.preview))
		if err != nil || !bytes.Equal(prev, refPreview) {
			t.Errorf("-mem %s: preview differs from the OME-TIFF run's (%v)", mem, err)
		}
		// A second run replaces the folder whole, and leaves nothing else.
		stale := filepath.Join(zdir, "0", "c", "0", "99")
		if err := os.MkdirAll(stale, 0o755); err != nil {
			t.Fatal(err)
		}
		stitchSmall(t, dir, out, "-tile-size", "64", "-format", "ome-zarr", "-mem", mem)
		if _, err := os.Stat(stale); err == nil {
			t.Errorf("-mem %s: the old folder's content survived a second run", mem)
		}
		noTemp(t, out)
	}
	r := runArgs(t, context.Background(), "-dir", dir, "-rows", "2", "-cols", "3", "-out", t.TempDir(), "-format", "zarr")
	if r.code != 2 || !strings.Contains(r.stderr, "-format zarr") {
		t.Errorf("-format zarr: exit %d, %s", r.code, r.stderr)
	}
}

// -format ome-zarr-0.4 writes the same levels as an OME-Zarr NGFF 0.4
// folder (Zarr v2, uncompressed), for readers without Zarr v3; the
// preview is the OME-TIFF run's, and a compression is refused.
func TestMosaicOMEZarr04(t *testing.T) {
	dir := generateSmall(t)
	tifOut := t.TempDir()
	ref, err := tiled.OpenBigTIFF(stitchSmall(t, dir, tifOut, "-tile-size", "64"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	out := t.TempDir()
	stitchSmall(t, dir, out, "-tile-size", "64", "-format", "ome-zarr-0.4")
	zdir := filepath.Join(out, strings.TrimSuffix(defNames.mosaic, ".ome.tif")+".ome.zarr")
	if _, err := os.Stat(filepath.Join(zdir, ".zattrs")); err != nil {
		t.Fatalf("not a Zarr v2 group: %v", err)
	}
	z, err := tiled.OpenOMEZarr(zdir)
	if err != nil {
		t.Fatal(err)
	}
	if len(z.Levels) != len(ref.Levels) {
		t.Fatalf("%d levels, the OME-TIFF has %d", len(z.Levels), len(ref.Levels))
	}
	want := make([]uint16, 64*64)
	for l, lv := range z.Levels {
		for ty := 0; ty*lv.TH < lv.H; ty++ {
			for tx := 0; tx*lv.TW < lv.W; tx++ {
				got, err := z.ReadChunk(l, tx, ty)
				if err != nil {
					t.Fatal(err)
				}
				if err := ref.ReadTile(l, tiled.Coord{X: tx, Y: ty}, want); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("level %d chunk (%d, %d) differs from the OME-TIFF", l, tx, ty)
				}
			}
		}
	}
	a, err1 := os.ReadFile(filepath.Join(tifOut, defNames.preview))
	b, err2 := os.ReadFile(filepath.Join(out, defNames.preview))
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		t.Errorf("preview differs from the OME-TIFF run's (%v, %v)", err1, err2)
	}
	noTemp(t, out)
	r := runArgs(t, context.Background(), "-dir", dir, "-rows", "2", "-cols", "3", "-out", t.TempDir(), "-format", "ome-zarr-0.4", "-compression", "zstd")
	if r.code != 2 || !strings.Contains(r.stderr, "uncompressed") {
		t.Errorf("-format ome-zarr-0.4 -compression zstd: exit %d, %s", r.code, r.stderr)
	}
}
