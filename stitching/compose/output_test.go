package compose

import (
	"bytes"
	"context"
	"image"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/image/tiff"
)

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// WriteTIFF and WritePNG replace a file atomically: a reader holding the
// old file keeps reading it whole (it used to be truncated in place, and
// a half-written file was visible under the final name).
func TestWriteReplacesAtomically(t *testing.T) {
	img := constTile(64, 48, 1234)
	for _, c := range []struct {
		name  string
		write func(string) error
	}{
		{"mosaic.tif", func(p string) error { return WriteTIFF(p, img) }},
		{"preview.png", func(p string) error { return WritePNG(p, img) }},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, c.name)
		old := bytes.Repeat([]byte("previous run "), 1000)
		if err := os.WriteFile(path, old, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.write(path); err != nil {
			t.Fatal(err)
		}
		seen, err := io.ReadAll(f)
		f.Close()
		if err != nil || !bytes.Equal(seen, old) {
			t.Errorf("%s: a reader of the old file saw %d bytes changed under it (err %v)", c.name, len(seen), err)
		}
		if got := dirNames(t, dir); len(got) != 1 || got[0] != c.name {
			t.Errorf("%s: folder holds %q, want only the output", c.name, got)
		}
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (err %v), want the replaced file's 0600", c.name, st.Mode(), err)
		}
	}
}

// A failed write leaves the existing file as it was and no temporary
// file behind.
func TestWriteFailureKeepsExistingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "preview.png")
	old := []byte("the previous preview")
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	// PNG cannot encode an empty image.
	if err := WritePNG(path, image.NewGray(image.Rect(0, 0, 0, 0))); err == nil {
		t.Fatal("empty image encoded")
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, old) {
		t.Errorf("after a failed write the file holds %q (err %v), want %q", got, err, old)
	}
	if got := dirNames(t, dir); len(got) != 1 {
		t.Errorf("folder holds %q, want only the old file", got)
	}
	// Into a missing folder: an error, nothing created.
	if err := WriteTIFF(filepath.Join(dir, "no", "m.tif"), constTile(2, 2, 1)); err == nil {
		t.Error("wrote into a missing folder")
	}
}

// MemoryEstimate counts the mosaic and the band of tiles ComposeFunc
// holds, and grows with what ComposeFunc allocates.
func TestMemoryEstimate(t *testing.T) {
	// A 4 x 5 grid of 100 x 80 tiles at a step of 90 x 72.
	var slots []Slot
	for r := range 4 {
		for c := range 5 {
			slots = append(slots, Slot{X: 90 * c, Y: 72 * r, Width: 100, Height: 80})
		}
	}
	mw, mh := 90*4+100, 72*3+80
	got := MemoryEstimate(slots, Overlay)
	mosaic := int64(2 * mw * mh)
	if got < mosaic+2*100*80*5 || got > mosaic+2*100*80*20+1000 {
		t.Errorf("overlay estimate %d for a %d-byte mosaic", got, mosaic)
	}
	if lin := MemoryEstimate(slots, Linear); lin <= got {
		t.Errorf("linear %d <= overlay %d", lin, got)
	}
	if MemoryEstimate(nil, Linear) != 0 {
		t.Error("no slots: want 0")
	}
	huge := []Slot{{X: 1 << 40, Y: 1 << 40, Width: 1 << 20, Height: 1 << 20}}
	if MemoryEstimate(huge, Linear) < 1<<60 {
		t.Error("huge mosaic underestimated")
	}
	// The estimate is not below what composing allocates.
	load := func(i int) (*image.Gray16, error) { return constTile(100, 80, uint16(i)), nil }
	before := heapAlloc()
	m, err := ComposeFunc(context.Background(), slots, load, Linear)
	if err != nil {
		t.Fatal(err)
	}
	allocs := heapAlloc() - before
	if est := MemoryEstimate(slots, Linear); est < int64(len(m.Pix)) || allocs > 4*est {
		t.Errorf("estimate %d, mosaic %d bytes, composition allocated %d", est, len(m.Pix), allocs)
	}
}

func heapAlloc() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.TotalAlloc)
}

// A side over 65535 px cannot be recorded by the classic TIFF encoder
// (its ImageWidth and ImageLength are SHORTs): EncodeTIFF refuses it
// instead of writing a file whose header gives the size modulo 65536.
func TestEncodeTIFFRefusesLongSides(t *testing.T) {
	for _, r := range []image.Rectangle{
		image.Rect(0, 0, MaxClassicTIFFSide+1, 1),
		image.Rect(0, 0, 1, MaxClassicTIFFSide+1),
	} {
		var b bytes.Buffer
		err := EncodeTIFF(&b, image.NewGray16(r))
		if err == nil || !strings.Contains(err.Error(), "65535") {
			t.Errorf("%v: err %v, want a refusal naming 65535", r.Size(), err)
		}
		if b.Len() != 0 {
			t.Errorf("%v: %d bytes written before the refusal", r.Size(), b.Len())
		}
	}
	// The longest side that fits is written and reads back at its size.
	var b bytes.Buffer
	if err := EncodeTIFF(&b, image.NewGray16(image.Rect(0, 0, MaxClassicTIFFSide, 2))); err != nil {
		t.Fatal(err)
	}
	cfg, err := tiff.DecodeConfig(&b)
	if err != nil || cfg.Width != MaxClassicTIFFSide || cfg.Height != 2 {
		t.Fatalf("decoded %d x %d, %v", cfg.Width, cfg.Height, err)
	}
}
