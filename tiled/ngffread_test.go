package tiled

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// OpenOMEZarr reads the NGFF 0.5 images CreateOMEZarr writes, in each
// compression: the levels' sizes and scales are the OME-TIFF's, and every
// chunk equals the OME-TIFF's tile.
func TestOpenOMEZarrNGFF05(t *testing.T) {
	dir := t.TempDir()
	w, h := 300, 170
	px, _ := smooth(w, h, 5)
	ref := refOMETIFF(t, dir, w, h, 32, px)
	want := make([]uint16, 32*32)
	for _, c := range []Compression{CompressionNone, CompressionDeflate, CompressionZstd} {
		zdir := filepath.Join(dir, c.String()+".ome.zarr")
		s, err := CreateOMEZarr(zdir, w, h, OMETIFFOptions{TileW: 32, TileH: 32, Compression: c, PhysicalSizeX: 0.5, PhysicalSizeY: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		writeStream(t, s, px)
		z, err := OpenOMEZarr(zdir)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if len(z.Levels) != len(ref.Levels) {
			t.Fatalf("%v: %d levels, the OME-TIFF has %d", c, len(z.Levels), len(ref.Levels))
		}
		for l, lv := range z.Levels {
			rl := ref.Levels[l]
			if lv.W != rl.W || lv.H != rl.H || lv.TW != 32 || lv.TH != 32 || lv.Scale != 0.5*float64(int(1)<<l) {
				t.Fatalf("%v level %d: %+v, the OME-TIFF's is %d x %d", c, l, lv, rl.W, rl.H)
			}
			for ty := 0; ty*lv.TH < lv.H; ty++ {
				for tx := 0; tx*lv.TW < lv.W; tx++ {
					got, err := z.ReadChunk(l, tx, ty)
					if err != nil {
						t.Fatalf("%v level %d chunk (%d, %d): %v", c, l, tx, ty, err)
					}
					if err := ref.ReadTile(l, Coord{tx, ty}, want); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%v level %d chunk (%d, %d) differs from the OME-TIFF's tile", c, l, tx, ty)
					}
				}
			}
		}
	}
}

// FuzzOpenNGFF05 writes a fuzzed group zarr.json, one array zarr.json
// shared by every dataset, and a fuzzed chunk file, then opens the image
// and reads a chunk: nothing panics, metadata errors wrap ErrZarr, and a
// chunk read is TW*TH values (a chunk that does not decode to exactly that
// is refused with ErrZarr).
func FuzzOpenNGFF05(f *testing.F) {
	fuzzrun.Prepare(f)
	group := `{"zarr_format":3,"node_type":"group","attributes":{"ome":{"version":"0.5","multiscales":[{"axes":[{"name":"c","type":"channel"},{"name":"y","type":"space"},{"name":"x","type":"space"}],"datasets":[{"path":"0","coordinateTransformations":[{"type":"scale","scale":[1,1,1]}]}]}]}}}`
	arr := func(codec string) string {
		return `{"zarr_format":3,"node_type":"array","shape":[1,5,7],"data_type":"uint16","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[1,4,4]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0,"codecs":[{"name":"bytes","configuration":{"endian":"little"}}` + codec + `]}`
	}
	f.Add([]byte(group), []byte(arr("")), make([]byte, 32), uint8(1), uint8(1))
	f.Add([]byte(group), []byte(arr(`,{"name":"zstd","configuration":{"level":3}}`)), []byte("\x28\xb5\x2f\xfd\x00\x58\x01\x00\x00\x00"), uint8(0), uint8(0))
	f.Add([]byte(group), []byte(arr(`,{"name":"gzip","configuration":{"level":1}}`)), []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, zgroup, zarray, chunk []byte, cx, cy uint8) {
		zgroup, zarray, chunk = zgroup[:min(len(zgroup), 1024)], zarray[:min(len(zarray), 1024)], chunk[:min(len(chunk), 4096)]
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "zarr.json"), zgroup, 0o644); err != nil {
			t.Fatal(err)
		}
		paths, _, err := ParseNGFF05(zgroup)
		if err == nil {
			for _, p := range paths {
				d := filepath.Join(dir, p)
				if os.MkdirAll(d, 0o755) != nil || os.WriteFile(filepath.Join(d, "zarr.json"), zarray, 0o644) != nil {
					return // a path that cannot be made
				}
			}
		}
		z, err := OpenOMEZarr(dir)
		if err != nil {
			if !errors.Is(err, ErrZarr) && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("OpenOMEZarr: %v", err)
			}
			return
		}
		lv := z.Levels[0]
		if lv.TW*lv.TH > 1<<16 {
			return
		}
		x, y := int(cx)%4, int(cy)%4
		cp := filepath.Join(dir, lv.Path, "c", "0", strconv.Itoa(y), strconv.Itoa(x))
		if os.MkdirAll(filepath.Dir(cp), 0o755) != nil || os.WriteFile(cp, chunk, 0o644) != nil {
			return
		}
		px, err := z.ReadChunk(0, x, y)
		inside := x < (lv.W-1)/lv.TW+1 && y < (lv.H-1)/lv.TH+1
		switch {
		case !inside:
			if err == nil {
				t.Fatalf("chunk (%d, %d) outside the level read", x, y)
			}
		case err != nil:
			if !errors.Is(err, ErrZarr) {
				t.Fatalf("chunk error %v does not wrap ErrZarr", err)
			}
		case len(px) != lv.TW*lv.TH:
			t.Fatalf("%d values for %d x %d", len(px), lv.TW, lv.TH)
		}
	})
}
