package tileio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/image/tiff"
)

// hugeTIFF returns a tiny 16-bit grayscale TIFF whose header claims w x h
// pixels (a 1 x 1 image written by the TIFF encoder with its width and
// length tags rewritten): a few hundred bytes that a decoder trusting the
// header would answer with a w*h*2-byte allocation.
func hugeTIFF(t testing.TB, w, h uint16) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := tiff.Encode(&buf, image.NewGray16(image.Rect(0, 0, 1, 1)), nil); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if string(b[:4]) != "II*\x00" {
		t.Fatalf("unexpected TIFF byte order %q", b[:4])
	}
	le := binary.LittleEndian
	ifd := int(le.Uint32(b[4:]))
	n := int(le.Uint16(b[ifd:]))
	patched := 0
	for k := range n {
		e := b[ifd+2+12*k:]
		tag, typ := le.Uint16(e), le.Uint16(e[2:])
		v := w
		switch tag {
		case 256: // ImageWidth
		case 257, 278: // ImageLength, RowsPerStrip (one strip, as the header claims)
			v = h
		default:
			continue
		}
		switch typ {
		case 3: // SHORT
			le.PutUint16(e[8:], v)
		case 4: // LONG
			le.PutUint32(e[8:], uint32(v))
		default:
			t.Fatalf("tag %d has type %d", tag, typ)
		}
		patched++
	}
	if patched != 3 {
		t.Fatalf("patched %d size tags", patched)
	}
	return b
}

// hugePNG is hugeTIFF for PNG: a 1 x 1 16-bit grayscale PNG whose IHDR
// claims w x h pixels (with a valid checksum).
func hugePNG(t testing.TB, w, h uint32) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray16(image.Rect(0, 0, 1, 1))); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// Signature (8), IHDR length (4), "IHDR" (4), width, height, ...
	if string(b[12:16]) != "IHDR" {
		t.Fatalf("no IHDR at 12: %q", b[12:16])
	}
	be := binary.BigEndian
	be.PutUint32(b[16:], w)
	be.PutUint32(b[20:], h)
	be.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// A header claiming 60000 x 60000 pixels is refused before any pixel
// memory is allocated (it used to cost 7.2 GB, and a grid of them killed
// the process with "fatal error: out of memory"); the limit can be raised.
func TestDecodeTileRefusesHugeHeader(t *testing.T) {
	for _, c := range []struct {
		format string
		data   []byte
	}{
		{"tiff", hugeTIFF(t, 60000, 60000)},
		{"png", hugePNG(t, 60000, 60000)},
	} {
		var err error
		n := allocated(func() { _, err = DecodeTile(bytes.NewReader(c.data)) })
		if err == nil || !strings.Contains(err.Error(), "60000 x 60000") || !strings.Contains(err.Error(), "limit") {
			t.Errorf("%s: err = %v, want a limit error giving the size", c.format, err)
		}
		if !errors.Is(err, ErrTileTooLarge) {
			t.Errorf("%s: err = %v, want ErrTileTooLarge", c.format, err)
		}
		if n > 16<<20 {
			t.Errorf("%s: decoding allocated %d MB before refusing", c.format, n>>20)
		}

		path := filepath.Join(t.TempDir(), "huge0."+c.format)
		if err := os.WriteFile(path, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		n = allocated(func() { _, err = LoadTile(path) })
		if !errors.Is(err, ErrTileTooLarge) || !strings.Contains(err.Error(), path) || n > 16<<20 {
			t.Errorf("%s: LoadTile: err = %v after %d MB, want ErrTileTooLarge naming the file", c.format, err, n>>20)
		}
		// OpenTileSet reads only headers, and refuses the same way.
		pat, perr := ParsePattern("huge{i}."+c.format, 0)
		if perr != nil {
			t.Fatal(perr)
		}
		_, err = OpenTileSet(filepath.Dir(path), pat, 1, 1)
		if !errors.Is(err, ErrTileTooLarge) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: OpenTileSet: err = %v, want ErrTileTooLarge naming the file", c.format, err)
		}
	}
}

// The limit is a parameter: a tile above it is refused, the same tile
// under a raised limit decodes; negative means no limit.
func TestTilePixelLimit(t *testing.T) {
	dir := t.TempDir()
	img := gray16Ramp(40, 30) // 1200 pixels
	for _, format := range []string{"tif", "png"} {
		p := filepath.Join(dir, "t0."+format)
		writeImage(t, p, img, format)
		if _, err := LoadTileLimit(p, 1199); !errors.Is(err, ErrTileTooLarge) {
			t.Errorf("%s: limit 1199: err = %v, want ErrTileTooLarge", format, err)
		}
		for _, limit := range []int64{1200, 0, -1} {
			got, err := LoadTileLimit(p, limit)
			if err != nil || !bytes.Equal(got.Pix, img.Pix) {
				t.Errorf("%s: limit %d: err = %v", format, limit, err)
			}
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeTileLimit(bytes.NewReader(data), 1000); !errors.Is(err, ErrTileTooLarge) {
			t.Errorf("%s: DecodeTileLimit 1000: err = %v", format, err)
		}
		pat, _ := ParsePattern("t{i}."+format, 0)
		if _, err := OpenTileSetLimit(dir, pat, 1, 1, 1000); !errors.Is(err, ErrTileTooLarge) {
			t.Errorf("%s: OpenTileSetLimit 1000: err = %v", format, err)
		}
		ts, err := OpenTileSetLimit(dir, pat, 1, 1, 1200)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.Load(0, 0); err != nil {
			t.Errorf("%s: Load under the limit: %v", format, err)
		}
	}
}

// A TIFF whose directory offset points gigabytes past its end is refused
// by OpenTileSet without reading (and allocating) up to that offset; found
// by FuzzLoadTile, it cost 2 GiB and seconds per 40-byte file.
func TestOpenTileSetFarDirectoryOffset(t *testing.T) {
	dir := t.TempDir()
	data := []byte("II*\x00\x00\x00\x00\x80\x01\x00\x00\x1a\x01\x05\x00\x01\x00\x00\x00\x1e\x02\x00\x00\x1b\x01\x05\x00\x01\x00\x00\x00&\x02\x00\x00(\x01\x03\x00\x01\x00\x00\x00\x02\x00\x008")
	if err := os.WriteFile(filepath.Join(dir, "t0.tif"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	pat, err := ParsePattern("t{i}.tif", 0)
	if err != nil {
		t.Fatal(err)
	}
	n := allocated(func() { _, err = OpenTileSet(dir, pat, 1, 1) })
	if err == nil || !strings.Contains(err.Error(), "t0.tif") {
		t.Errorf("err = %v, want an error naming the file", err)
	}
	if n > 16<<20 {
		t.Errorf("reading the header allocated %d MB", n>>20)
	}
}
