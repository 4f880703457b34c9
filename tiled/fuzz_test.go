package tiled

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// A chunk file larger than its chunk is refused for its size, before
// ReadChunk reads it (it read the whole file, of any size, first).
func TestReadChunkRefusesOversizedFile(t *testing.T) {
	dir := t.TempDir()
	z := &OMEZarr{Dir: dir, Levels: []ZarrLevel{{Path: "0", W: 4, H: 4, TW: 2, TH: 2, Scale: 1}}}
	p := filepath.Join(dir, "0", "0", "0")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil { // sparse: no disk space
		f.Close()
		t.Skip("no sparse files here:", err)
	}
	f.Close()
	if _, err := z.ReadChunk(0, 0, 0); !errors.Is(err, ErrZarr) {
		t.Fatalf("ReadChunk of a 1 TiB chunk file: %v", err)
	}
	if err := os.WriteFile(p, make([]byte, 8), 0o644); err != nil {
		t.Fatal(err)
	}
	if px, err := z.ReadChunk(0, 0, 0); err != nil || len(px) != 4 {
		t.Fatalf("the right size: %v, %v", px, err)
	}
}

// An image whose tile count overflows an int is refused by Open and
// Create (its TilesX*TilesY wrapped around, to a count a small file can
// match).
func TestOpenRefusesOverflowingSize(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.raw")
	if err := os.WriteFile(p, make([]byte, 32), 0o644); err != nil {
		t.Fatal(err)
	}
	const big = 1 << 62
	for _, s := range [][4]int{{big, big, 1, 1}, {1<<63 - 1, 4, 2, 2}, {big, 4, 4, 4}} {
		if im, err := Open(p, s[0], s[1], s[2], s[3], 1<<20); err == nil {
			im.f.Close()
			t.Errorf("Open %v: accepted (%d x %d tiles)", s, im.TilesX(), im.TilesY())
		}
		if im, err := Create(filepath.Join(dir, "c.raw"), s[0], s[1], s[2], s[3], 1<<20); err == nil {
			im.Close()
			t.Errorf("Create %v: accepted", s)
		}
	}
}

// FuzzOpenOMEZarr writes a fuzzed .zattrs and .zarray (every dataset
// shares the one .zarray) and a chunk file of fuzzed length, opens the
// image and reads chunks: nothing panics, metadata errors wrap ErrZarr,
// and a chunk read has TW*TH values equal to its file's little-endian
// uint16s (zeros for a missing chunk), refused when the file has another
// size.
func FuzzOpenOMEZarr(f *testing.F) {
	fuzzrun.Prepare(f)
	attrs := `{"multiscales":[{"version":"0.4","axes":[{"name":"y","type":"space"},{"name":"x","type":"space"}],"datasets":[{"path":"0","coordinateTransformations":[{"type":"scale","scale":[1,1]}]}]}]}`
	arr := `{"zarr_format":2,"shape":[5,7],"chunks":[4,4],"dtype":"<u2","compressor":null,"fill_value":0,"order":"C","filters":null,"dimension_separator":"/"}`
	f.Add([]byte(attrs), []byte(arr), uint16(32), uint8(1), uint8(1))
	f.Add([]byte(attrs), []byte(arr), uint16(31), uint8(0), uint8(0))
	f.Add([]byte(`{"multiscales":[{"version":"0.4","axes":[{"name":"y","type":"space"},{"name":"x","type":"space"}],"datasets":[{"path":"0","coordinateTransformations":[{"type":"scale","scale":[1,1]}]},{"path":"0/../1","coordinateTransformations":[{"type":"scale","scale":[2,2]}]}]}]}`),
		[]byte(`{"zarr_format":2,"shape":[9223372036854775807,9223372036854775807],"chunks":[3,2],"dtype":"<u2","compressor":null,"order":"C","filters":null,"dimension_separator":"/"}`), uint16(12), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, zattrs, zarray []byte, chunkLen uint16, cx, cy uint8) {
		zattrs, zarray = zattrs[:min(len(zattrs), 512)], zarray[:min(len(zarray), 512)]
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ".zattrs"), zattrs, 0o644); err != nil {
			t.Fatal(err)
		}
		paths, _, err := ParseMultiscales(zattrs)
		if err == nil {
			for _, p := range paths {
				d := filepath.Join(dir, p)
				if os.MkdirAll(d, 0o755) != nil || os.WriteFile(filepath.Join(d, ".zarray"), zarray, 0o644) != nil {
					return // a path such as "a/.zarray/b" that cannot be made
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
		if len(z.Levels) != len(paths) {
			t.Fatalf("%d levels, %d datasets", len(z.Levels), len(paths))
		}
		lv := z.Levels[0]
		if lv.TW*lv.TH > 1<<16 {
			return // large chunks read alike, slower
		}
		raw := make([]byte, chunkLen)
		for i := range raw {
			raw[i] = byte(i*5 + 1)
		}
		x, y := int(cx)%4, int(cy)%4
		cp := filepath.Join(dir, lv.Path, string(rune('0'+y)), string(rune('0'+x)))
		if err := os.MkdirAll(filepath.Dir(cp), 0o755); err != nil {
			return
		}
		if chunkLen != 0 {
			if err := os.WriteFile(cp, raw, 0o644); err != nil {
				return
			}
		}
		px, err := z.ReadChunk(0, x, y)
		inside := x < (lv.W-1)/lv.TW+1 && y < (lv.H-1)/lv.TH+1
		switch {
		case !inside:
			if err == nil {
				t.Fatalf("chunk (%d, %d) outside %d x %d in %d x %d chunks read", x, y, lv.W, lv.H, lv.TW, lv.TH)
			}
		case chunkLen != 0 && int(chunkLen) != 2*lv.TW*lv.TH:
			if !errors.Is(err, ErrZarr) {
				t.Fatalf("chunk file of %d bytes for %d x %d: %v", chunkLen, lv.TW, lv.TH, err)
			}
		case err != nil:
			t.Fatalf("chunk (%d, %d): %v", x, y, err)
		case len(px) != lv.TW*lv.TH:
			t.Fatalf("%d values for %d x %d", len(px), lv.TW, lv.TH)
		default:
			for i, v := range px {
				if want := uint16(0); chunkLen == 0 && v != want || chunkLen != 0 && v != binary.LittleEndian.Uint16(raw[2*i:]) {
					t.Fatalf("value %d is %d", i, v)
				}
			}
		}
	})
}

// FuzzOpen opens a tile file of fuzzed length as an image of fuzzed size:
// Open never panics, accepts exactly the file size the image's tiles
// need (no tile count that overflows), and every tile of what it opens
// reads back the file's bytes.
func FuzzOpen(f *testing.F) {
	fuzzrun.Prepare(f)
	f.Add(uint16(2*16*16*2), 20, 12, 16, 16, int64(1<<16))
	f.Add(uint16(32), 1<<62, 1<<62, 1, 1, int64(1<<20))
	f.Add(uint16(8), 3, 1, 2, 2, int64(7))
	dir := f.TempDir()
	p := filepath.Join(dir, "t.raw")
	f.Fuzz(func(t *testing.T, size uint16, w, h, tw, th int, budget int64) {
		raw := make([]byte, size)
		for i := range raw {
			raw[i] = byte(i*3 + 7)
		}
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		im, err := Open(p, w, h, tw, th, budget)
		if err != nil {
			return
		}
		defer im.Close()
		tx, ty := im.TilesX(), im.TilesY()
		if tx < 1 || ty < 1 || int64(tx)*int64(ty)*im.TileBytes() != int64(size) || budget < im.TileBytes() {
			t.Fatalf("opened %d bytes as %d x %d in %d x %d tiles (%d x %d), budget %d", size, w, h, tw, th, tx, ty, budget)
		}
		buf := make([]uint16, tw*th)
		for _, c := range im.Tiles() {
			if err := im.ReadTile(c, buf); err != nil {
				t.Fatalf("tile %v: %v", c, err)
			}
			off := (c.Y*tx + c.X) * tw * th * 2
			for i, v := range buf {
				if want := binary.LittleEndian.Uint16(raw[off+2*i:]); v != want {
					t.Fatalf("tile %v value %d: %d, file %d", c, i, v, want)
				}
			}
		}
	})
}
