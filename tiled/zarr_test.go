package tiled

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// writeZarr writes a pseudo-random w x h image in tw x th tiles as
// OME-Zarr and as BigTIFF (the reference for the reduced levels).
func writeZarr(t *testing.T, w, h, tw, th int) (zdir string, tf *TIFF, ref []uint16) {
	t.Helper()
	dir := t.TempDir()
	im, err := CreateTemp(dir, w, h, tw, th, 4*int64(tw*th*2))
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	ref = fill(t, im, 6)
	zdir = filepath.Join(dir, "m.ome.zarr")
	if err := WriteOMEZarr(zdir, "mosaic", im, 0, dir, 4*int64(tw*th*2)); err != nil {
		t.Fatal(err)
	}
	tif := filepath.Join(dir, "m.tif")
	if err := WriteBigTIFF(tif, im, 0, dir, 4*int64(tw*th*2)); err != nil {
		t.Fatal(err)
	}
	tf, err = OpenBigTIFF(tif)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tf.Close() })
	return zdir, tf, ref
}

// Every chunk of every level reads back equal to the BigTIFF's tile (whose
// level 0 the BigTIFF test checks against the image).
func TestOMEZarrRoundTrip(t *testing.T) {
	zdir, tf, ref := writeZarr(t, 100, 70, 32, 16)
	z, err := OpenOMEZarr(zdir)
	if err != nil {
		t.Fatal(err)
	}
	if len(z.Levels) != len(tf.Levels) || len(z.Levels) != 4 {
		t.Fatalf("%d levels, BigTIFF %d", len(z.Levels), len(tf.Levels))
	}
	buf := make([]uint16, 32*16)
	for l, lv := range z.Levels {
		tl := tf.Levels[l]
		if lv.W != tl.W || lv.H != tl.H || lv.TW != 32 || lv.TH != 16 || lv.Scale != float64(int(1)<<l) {
			t.Fatalf("level %d: %+v, BigTIFF %+v", l, lv, tl)
		}
		for cy := 0; cy < (lv.H+15)/16; cy++ {
			for cx := 0; cx < (lv.W+31)/32; cx++ {
				got, err := z.ReadChunk(l, cx, cy)
				if err != nil {
					t.Fatal(err)
				}
				if err := tf.ReadTile(l, Coord{cx, cy}, buf); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, buf) {
					t.Fatalf("level %d chunk (%d,%d) differs from the BigTIFF tile", l, cx, cy)
				}
			}
		}
	}
	c, err := z.ReadChunk(0, 1, 2)
	if err != nil || c[3*32+5] != ref[(2*16+3)*100+32+5] {
		t.Fatalf("chunk (1,2) pixel (5,3) = %d, want %d (%v)", c[3*32+5], ref[(2*16+3)*100+32+5], err)
	}
	if _, err := z.ReadChunk(0, 4, 0); err == nil {
		t.Fatal("chunk outside the level read")
	}
	// A missing chunk is the fill value.
	os.Remove(filepath.Join(zdir, "0", "0", "0"))
	if c, err := z.ReadChunk(0, 0, 0); err != nil || slices.Max(c) != 0 {
		t.Fatalf("missing chunk: %v", err)
	}
}

// The metadata has the structure the OME-Zarr 0.4 specification and Zarr
// v2 prescribe, checked key by key on the raw JSON.
func TestOMEZarrMetadataStructure(t *testing.T) {
	zdir, _, _ := writeZarr(t, 100, 70, 32, 16)
	read := func(p string) map[string]any {
		b, err := os.ReadFile(filepath.Join(zdir, p))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if g := read(".zgroup"); !reflect.DeepEqual(g, map[string]any{"zarr_format": 2.0}) {
		t.Fatalf(".zgroup %v", g)
	}
	ms := read(".zattrs")["multiscales"].([]any)
	if len(ms) != 1 {
		t.Fatalf("%d multiscales", len(ms))
	}
	m := ms[0].(map[string]any)
	if m["version"] != "0.4" {
		t.Fatalf("version %v", m["version"])
	}
	wantAxes := []any{map[string]any{"name": "y", "type": "space"}, map[string]any{"name": "x", "type": "space"}}
	if !reflect.DeepEqual(m["axes"], wantAxes) {
		t.Fatalf("axes %v", m["axes"])
	}
	ds := m["datasets"].([]any)
	if len(ds) != 4 {
		t.Fatalf("%d datasets", len(ds))
	}
	for i, d := range ds {
		s := float64(int(1) << i)
		want := map[string]any{"path": string(rune('0' + i)), "coordinateTransformations": []any{
			map[string]any{"type": "scale", "scale": []any{s, s}}}}
		if !reflect.DeepEqual(d, want) {
			t.Fatalf("dataset %d: %v, want %v", i, d, want)
		}
		a := read(filepath.Join(string(rune('0'+i)), ".zarray"))
		for k, v := range map[string]any{"zarr_format": 2.0, "dtype": "<u2", "compressor": nil, "filters": nil,
			"order": "C", "fill_value": 0.0, "dimension_separator": "/", "chunks": []any{16.0, 32.0}} {
			if !reflect.DeepEqual(a[k], v) {
				t.Fatalf("level %d .zarray %s = %v, want %v", i, k, a[k], v)
			}
		}
	}
	if sh := read("0/.zarray")["shape"]; !reflect.DeepEqual(sh, []any{70.0, 100.0}) {
		t.Fatalf("shape %v", sh)
	}
}

// Zarr's own Python implementation (Debian python3-zarr) is the
// independent reader: it opens every level as an array of the right shape
// and type and reads the same pixels; the test skips without it.
func TestOMEZarrPythonZarr(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import zarr").Run(); err != nil {
		t.Skip("python3-zarr not installed")
	}
	zdir, tf, _ := writeZarr(t, 100, 70, 32, 16)
	script := `
import sys, json, zarr
g = zarr.open_group(sys.argv[1], mode="r")
ms = g.attrs["multiscales"][0]
out = []
for d in ms["datasets"]:
    a = g[d["path"]]
    out.append([list(a.shape), str(a.dtype), int(a[a.shape[0]-1, a.shape[1]-1]), int(a[0:7, 0:9].sum())])
print(json.dumps(out))
`
	b, err := exec.Command(py, "-c", script, zdir).CombinedOutput()
	if err != nil {
		t.Fatalf("python zarr: %v\n%s", err, b)
	}
	var got [][]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	for l, lv := range tf.Levels {
		px := readLevel(t, tf, l)
		var sum float64
		for y := range 7 {
			for x := range 9 {
				if x < lv.W && y < lv.H {
					sum += float64(px[y*lv.W+x])
				}
			}
		}
		want := []any{[]any{float64(lv.H), float64(lv.W)}, "uint16", float64(px[len(px)-1]), sum}
		if !reflect.DeepEqual(got[l], want) {
			t.Fatalf("level %d: python zarr says %v, want %v", l, got[l], want)
		}
	}
}

// readLevel reads level l of tf whole.
func readLevel(t *testing.T, tf *TIFF, l int) []uint16 {
	lv := tf.Levels[l]
	px := make([]uint16, lv.W*lv.H)
	buf := make([]uint16, lv.TW*lv.TH)
	for cy := 0; cy < (lv.H+lv.TH-1)/lv.TH; cy++ {
		for cx := 0; cx < (lv.W+lv.TW-1)/lv.TW; cx++ {
			if err := tf.ReadTile(l, Coord{cx, cy}, buf); err != nil {
				t.Fatal(err)
			}
			for y := range lv.TH {
				for x := range lv.TW {
					if X, Y := cx*lv.TW+x, cy*lv.TH+y; X < lv.W && Y < lv.H {
						px[Y*lv.W+X] = buf[y*lv.TW+x]
					}
				}
			}
		}
	}
	return px
}

func TestOMEZarrRefusals(t *testing.T) {
	good := `{"zarr_format":2,"shape":[70,100],"chunks":[16,32],"dtype":"<u2","compressor":null,"fill_value":0,"order":"C","filters":null,"dimension_separator":"/"}`
	if w, h, tw, th, err := ParseZarrArray([]byte(good)); err != nil || w != 100 || h != 70 || tw != 32 || th != 16 {
		t.Fatalf("good .zarray: %d %d %d %d %v", w, h, tw, th, err)
	}
	for _, bad := range []string{
		strings.Replace(good, `"<u2"`, `">u2"`, 1),
		strings.Replace(good, `"compressor":null`, `"compressor":{"id":"zlib"}`, 1),
		strings.Replace(good, `"/"`, `"."`, 1),
		strings.Replace(good, `[16,32]`, `[65536,65536]`, 1),
		strings.Replace(good, `[70,100]`, `[70,100,3]`, 1),
		strings.Replace(good, `[70,100]`, `[0,100]`, 1),
		`{`,
	} {
		if _, _, _, _, err := ParseZarrArray([]byte(bad)); !errors.Is(err, ErrZarr) {
			t.Errorf("accepted or wrong error %v for %s", err, bad)
		}
	}
	goodAttrs := `{"multiscales":[{"version":"0.4","axes":[{"name":"y","type":"space"},{"name":"x","type":"space"}],"datasets":[{"path":"0","coordinateTransformations":[{"type":"scale","scale":[1,1]}]}]}]}`
	if p, s, err := ParseMultiscales([]byte(goodAttrs)); err != nil || len(p) != 1 || s[0] != [2]float64{1, 1} {
		t.Fatalf("good .zattrs: %v %v %v", p, s, err)
	}
	for _, bad := range []string{
		strings.Replace(goodAttrs, `"0.4"`, `"0.5"`, 1),
		strings.Replace(goodAttrs, `"path":"0"`, `"path":"../x"`, 1),
		strings.Replace(goodAttrs, `[1,1]`, `[0,1]`, 1),
		strings.Replace(goodAttrs, `"name":"y"`, `"name":"c"`, 1),
		`{"multiscales":[]}`,
	} {
		if _, _, err := ParseMultiscales([]byte(bad)); !errors.Is(err, ErrZarr) {
			t.Errorf("accepted or wrong error %v for %s", err, bad)
		}
	}
}

// The metadata parsers never panic and refuse what they cannot read
// with ErrZarr; what they accept is in range (positive sizes, a bounded
// chunk, local paths, positive scales).
func FuzzParseZarrMetadata(f *testing.F) {
	fuzzrun.Prepare(f)
	f.Add([]byte(`{"zarr_format":2,"shape":[70,100],"chunks":[16,32],"dtype":"<u2","compressor":null,"fill_value":0,"order":"C","filters":null,"dimension_separator":"/"}`))
	f.Add([]byte(`{"multiscales":[{"version":"0.4","axes":[{"name":"y","type":"space"},{"name":"x","type":"space"}],"datasets":[{"path":"0","coordinateTransformations":[{"type":"scale","scale":[1,1]}]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:min(len(b), 1024)] // inputs stay small, so minimizing is fast
		if w, h, tw, th, err := ParseZarrArray(b); err == nil {
			if w <= 0 || h <= 0 || tw <= 0 || th <= 0 || tw*th > maxZarrChunk {
				t.Fatalf("accepted %d %d %d %d", w, h, tw, th)
			}
		} else if !errors.Is(err, ErrZarr) {
			t.Fatalf("error %v does not wrap ErrZarr", err)
		}
		if p, s, err := ParseMultiscales(b); err == nil {
			for i := range p {
				if !filepath.IsLocal(p[i]) || !(s[i][0] > 0 && s[i][1] > 0) {
					t.Fatalf("accepted %q %v", p[i], s[i])
				}
			}
		} else if !errors.Is(err, ErrZarr) {
			t.Fatalf("error %v does not wrap ErrZarr", err)
		}
	})
}
