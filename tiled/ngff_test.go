package tiled

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// readJSON decodes the JSON file at path into a generic value.
func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// An OME-Zarr NGFF 0.5 image carries the keys the specification requires
// (zarr_format 3, the "ome" attributes with version 0.5, axes c, y and x
// with the unit, one dataset per level with its scale; arrays of shape
// (1, h, w), uint16, the codecs named), and every chunk, decoded, equals
// the OME-TIFF's tile of the same level.
func TestOMEZarrNGFF05(t *testing.T) {
	dir := t.TempDir()
	w, h := 333, 250
	px, _ := smooth(w, h, 11)
	ref := refOMETIFF(t, dir, w, h, 64, px)
	for _, c := range []Compression{CompressionNone, CompressionDeflate, CompressionZstd} {
		zdir := filepath.Join(dir, c.String()+".ome.zarr")
		s, err := CreateOMEZarr(zdir, w, h, OMETIFFOptions{TileW: 64, TileH: 64, Compression: c, PhysicalSizeX: 0.5, PhysicalSizeY: 0.25, PhysicalSizeUnit: "nm", Name: "m"})
		if err != nil {
			t.Fatal(err)
		}
		writeStream(t, s, px)
		g := readJSON(t, filepath.Join(zdir, "zarr.json"))
		if g["zarr_format"] != 3.0 || g["node_type"] != "group" {
			t.Fatalf("%v: group %v", c, g)
		}
		ome := g["attributes"].(map[string]any)["ome"].(map[string]any)
		if ome["version"] != "0.5" {
			t.Fatalf("%v: ome version %v", c, ome["version"])
		}
		ms := ome["multiscales"].([]any)[0].(map[string]any)
		wantAxes := []any{
			map[string]any{"name": "c", "type": "channel"},
			map[string]any{"name": "y", "type": "space", "unit": "nanometer"},
			map[string]any{"name": "x", "type": "space", "unit": "nanometer"},
		}
		if !reflect.DeepEqual(ms["axes"], wantAxes) || ms["name"] != "m" {
			t.Fatalf("%v: multiscale %v", c, ms)
		}
		ds := ms["datasets"].([]any)
		if len(ds) != len(ref.Levels) {
			t.Fatalf("%v: %d datasets, %d levels", c, len(ds), len(ref.Levels))
		}
		for l, d := range ds {
			f := float64(int(1) << l)
			want := map[string]any{"path": strconv.Itoa(l), "coordinateTransformations": []any{
				map[string]any{"type": "scale", "scale": []any{1.0, 0.25 * f, 0.5 * f}}}}
			if !reflect.DeepEqual(d, want) {
				t.Fatalf("%v: dataset %d %v, want %v", c, l, d, want)
			}
			lv := ref.Levels[l]
			a := readJSON(t, filepath.Join(zdir, strconv.Itoa(l), "zarr.json"))
			codecs := a["codecs"].([]any)
			names := []any{"bytes"}
			if c != CompressionNone {
				names = append(names, map[Compression]string{CompressionDeflate: "gzip", CompressionZstd: "zstd"}[c])
			}
			var got []any
			for _, cd := range codecs {
				got = append(got, cd.(map[string]any)["name"])
			}
			if a["zarr_format"] != 3.0 || a["node_type"] != "array" || a["data_type"] != "uint16" ||
				!reflect.DeepEqual(a["shape"], []any{1.0, float64(lv.H), float64(lv.W)}) ||
				!reflect.DeepEqual(a["chunk_grid"].(map[string]any)["configuration"], map[string]any{"chunk_shape": []any{1.0, 64.0, 64.0}}) ||
				!reflect.DeepEqual(a["dimension_names"], []any{"c", "y", "x"}) || !reflect.DeepEqual(got, names) {
				t.Fatalf("%v level %d: array %v", c, l, a)
			}
			checkChunks(t, zdir, c, ref, l)
		}
	}
}

// refOMETIFF writes px (w x h) as an OME-TIFF of tile x tile tiles in
// dir and opens it, closed when the test ends: the reference other
// writers' output is compared with.
func refOMETIFF(t *testing.T, dir string, w, h, tile int, px []uint16) *TIFF {
	t.Helper()
	path := filepath.Join(dir, "ref.ome.tif")
	s, err := CreateOMETIFF(path, w, h, OMETIFFOptions{TileW: tile, TileH: tile})
	if err != nil {
		t.Fatal(err)
	}
	writeStream(t, s, px)
	ref, err := OpenBigTIFF(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	return ref
}

// checkChunks compares every chunk of level l with ref's tile.
func checkChunks(t *testing.T, zdir string, c Compression, ref *TIFF, l int) {
	t.Helper()
	lv := ref.Levels[l]
	want := make([]uint16, lv.TW*lv.TH)
	for ty := 0; ty*lv.TH < lv.H; ty++ {
		for tx := 0; tx*lv.TW < lv.W; tx++ {
			b, err := os.ReadFile(filepath.Join(zdir, strconv.Itoa(l), "c", "0", strconv.Itoa(ty), strconv.Itoa(tx)))
			if err != nil {
				t.Fatal(err)
			}
			switch c {
			case CompressionZstd:
				d, _ := zstd.NewReader(nil)
				b, err = d.DecodeAll(b, nil)
				d.Close()
			case CompressionDeflate:
				var r *gzip.Reader
				if r, err = gzip.NewReader(bytes.NewReader(b)); err == nil {
					b, err = io.ReadAll(r)
				}
			}
			if err != nil || len(b) != 2*len(want) {
				t.Fatalf("%v level %d chunk (%d,%d): %v, %d bytes", c, l, ty, tx, err, len(b))
			}
			if err := ref.ReadTile(l, Coord{tx, ty}, want); err != nil {
				t.Fatal(err)
			}
			for i, v := range want {
				if binary.LittleEndian.Uint16(b[2*i:]) != v {
					t.Fatalf("%v level %d chunk (%d,%d) pixel %d differs from the OME-TIFF", c, l, ty, tx, i)
				}
			}
		}
	}
}

// An existing folder is refused; a stream closed early leaves no folder.
func TestOMEZarrRefusalsAndCleanup(t *testing.T) {
	dir := t.TempDir()
	if _, err := CreateOMEZarr(dir, 10, 10, OMETIFFOptions{}); err == nil {
		t.Error("an existing folder was accepted")
	}
	zdir := filepath.Join(dir, "x.ome.zarr")
	s, err := CreateOMEZarr(zdir, 100, 100, OMETIFFOptions{TileW: 32, TileH: 32})
	if err != nil {
		t.Fatal(err)
	}
	px, _ := smooth(100, 100, 1)
	if err := s.WriteRows(0, 32, px); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err == nil {
		t.Error("closing after 32 of 100 rows succeeded")
	}
	if _, err := os.Stat(zdir); !os.IsNotExist(err) {
		t.Errorf("incomplete OME-Zarr left: %v", err)
	}
}
