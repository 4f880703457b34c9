package tiled

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// fill writes a pseudo-random w x h image into im and returns it in memory.
func fill(t testing.TB, im *Image, seed uint64) []uint16 {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	ref := make([]uint16, im.W*im.H)
	for i := range ref {
		ref[i] = uint16(r.UintN(65536))
	}
	if err := im.WriteRect(0, 0, im.W, im.H, ref); err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestRoundTripWithinBudget(t *testing.T) {
	dir := t.TempDir()
	// 3 tiles of budget for a 5x4-tile image: every access evicts.
	im, err := Create(filepath.Join(dir, "a.raw"), 75, 61, 16, 16, 3*16*16*2+100)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	ref := fill(t, im, 1)
	got := make([]uint16, 75*61)
	if err := im.ReadRect(0, 0, 75, 61, got, Zero); err != nil {
		t.Fatal(err)
	}
	for i := range ref {
		if got[i] != ref[i] {
			t.Fatalf("pixel %d: %d != %d", i, got[i], ref[i])
		}
	}
	// Clamped read around the corner.
	r := make([]uint16, 9)
	if err := im.ReadRect(-1, -1, 3, 3, r, Clamp); err != nil {
		t.Fatal(err)
	}
	want := []uint16{ref[0], ref[0], ref[1], ref[0], ref[0], ref[1], ref[75], ref[75], ref[76]}
	for i := range want {
		if r[i] != want[i] {
			t.Fatalf("clamped %v want %v", r, want)
		}
	}
	z := make([]uint16, 4)
	if err := im.ReadRect(74, 60, 2, 2, z, Zero); err != nil {
		t.Fatal(err)
	}
	if z[0] != ref[75*61-1] || z[1] != 0 || z[2] != 0 || z[3] != 0 {
		t.Fatalf("zero edge %v", z)
	}
	st := im.CacheStats()
	if st.Capacity != 3 || st.Peak > 3 || st.PeakBytes > 3*16*16*2 {
		t.Fatalf("cache over budget: %+v", st)
	}
	if st.Writes == 0 || st.Reads == 0 {
		t.Fatalf("expected evictions: %+v", st)
	}
	// Reopen-free check: the tile file holds the pixels after Flush.
	if err := im.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(filepath.Join(dir, "b.raw"), 10, 10, 16, 16, 100); err == nil {
		t.Fatal("budget below one tile accepted")
	}
}

func writeTIFF(t *testing.T, w, h, tw, th int) (string, []uint16) {
	dir := t.TempDir()
	im, err := CreateTemp(dir, w, h, tw, th, 4*int64(tw*th*2))
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	ref := fill(t, im, 2)
	path := filepath.Join(dir, "p.tif")
	if err := WriteBigTIFF(path, im, 0, dir, 4*int64(tw*th*2)); err != nil {
		t.Fatal(err)
	}
	return path, ref
}

func TestBigTIFFRoundTrip(t *testing.T) {
	path, ref := writeTIFF(t, 100, 70, 32, 16)
	tf, err := OpenBigTIFF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	if n := Levels(100, 70, 32, 16); len(tf.Levels) != n || n != 4 {
		t.Fatalf("levels %d want %d", len(tf.Levels), n)
	}
	wantSizes := [][2]int{{100, 70}, {50, 35}, {25, 18}, {13, 9}}
	for i, lv := range tf.Levels {
		if lv.W != wantSizes[i][0] || lv.H != wantSizes[i][1] || lv.Reduced != (i > 0) {
			t.Fatalf("level %d: %+v", i, lv)
		}
	}
	buf := make([]uint16, 32*16)
	for ty := 0; ty < 5; ty++ {
		for tx := 0; tx < 4; tx++ {
			if err := tf.ReadTile(0, Coord{tx, ty}, buf); err != nil {
				t.Fatal(err)
			}
			for y := 0; y < 16; y++ {
				for x := 0; x < 32; x++ {
					px, py := tx*32+x, ty*16+y
					want := uint16(0)
					if px < 100 && py < 70 {
						want = ref[py*100+px]
					}
					if buf[y*32+x] != want {
						t.Fatalf("tile %d,%d px %d,%d: %d want %d", tx, ty, x, y, buf[y*32+x], want)
					}
				}
			}
		}
	}
	// Level 1 pixel (3,2) is the rounded mean of its 2x2 block.
	if err := tf.ReadTile(1, Coord{0, 0}, buf); err != nil {
		t.Fatal(err)
	}
	s := uint32(ref[4*100+6]) + uint32(ref[4*100+7]) + uint32(ref[5*100+6]) + uint32(ref[5*100+7])
	if got := buf[2*32+3]; got != uint16((s+2)/4) {
		t.Fatalf("level 1 mean %d want %d", got, (s+2)/4)
	}
}

// libtiff is the independent reader: tiffinfo must list every level as a
// tiled 16-bit BigTIFF directory, and tiffdump the tags.
func TestBigTIFFLibtiff(t *testing.T) {
	if _, err := exec.LookPath("tiffinfo"); err != nil {
		t.Skip("tiffinfo not installed (Debian: apt-get install libtiff-tools); skipping the libtiff cross-check")
	}
	path, _ := writeTIFF(t, 100, 70, 32, 16)
	out, err := exec.Command("tiffinfo", "-D", path).CombinedOutput()
	s := string(out)
	if err != nil || strings.Contains(s, "Error") || strings.Contains(s, "Warning") {
		t.Fatalf("tiffinfo: %v\n%s", err, s)
	}
	for _, want := range []string{"Image Width: 100 Image Length: 70", "Tile Width: 32 Tile Length: 16",
		"Image Width: 13 Image Length: 9", "Bits/Sample: 16", "reduced-resolution image"} {
		if !strings.Contains(s, want) {
			t.Errorf("tiffinfo output lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "TIFF Directory"); n != 4 {
		t.Errorf("tiffinfo lists %d directories, want 4", n)
	}
	if _, err := exec.LookPath("tiffdump"); err == nil {
		out, err := exec.Command("tiffdump", path).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "TileOffsets (324) LONG8") || !strings.Contains(string(out), "BigTIFF") {
			t.Errorf("tiffdump: %v\n%s", err, out)
		}
	}
}

func FuzzParseBigTIFF(f *testing.F) {
	fuzzrun.Prepare(f)
	dir := f.TempDir()
	// A small seed (one 16 x 16 tile, under 1 KB), and inputs cut at 2 KB:
	// the fuzzer minimizes each input that finds new coverage before
	// counting it (0 execs/s meanwhile), and Go's minimizer is quadratic
	// in the length, so that inputs of a few kilobytes made it minimize
	// for most of a 60 s run (fuzzrun bounds each minimization too).
	im, err := CreateTemp(dir, 16, 16, 16, 16, 1<<16)
	if err != nil {
		f.Fatal(err)
	}
	fill(f, im, 3)
	path := filepath.Join(dir, "s.tif")
	if err := WriteBigTIFF(path, im, 0, dir, 1<<16); err != nil {
		f.Fatal(err)
	}
	im.Close()
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	f.Add([]byte("II+\x00\x08\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:min(len(b), 2048)]
		tf, err := ParseBigTIFF(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		// Each execution stays cheap (a parsed file may claim tiles of up
		// to 2^31 x 2^31 pixels whose bytes it does not hold): the fuzzer
		// minimizes interesting inputs by running them thousands of times,
		// which stalled for minutes with megabyte tiles.
		for l, lv := range tf.Levels {
			if lv.TW*lv.TH > 1<<12 || l >= 4 {
				continue
			}
			buf := make([]uint16, lv.TW*lv.TH)
			if err := tf.ReadTile(l, Coord{0, 0}, buf); err != nil {
				t.Fatalf("parsed file's tile unreadable: %v", err)
			}
		}
	})
}

// A crafted IFD of 4000 entries that all point at the same large array of
// tile offsets is refused for the bytes it would make the parser read,
// instead of reading the array 4000 times.
func TestParseBigTIFFBoundsRepeatedValues(t *testing.T) {
	const n, cnt = 4000, 2000 // entries; LONG8 values each
	le := binary.LittleEndian
	size := 16 + 8 + n*20 + 8 + cnt*8
	b := make([]byte, size)
	copy(b, "II+\x00\x08\x00\x00\x00")
	le.PutUint64(b[8:], 16)
	le.PutUint64(b[16:], n)
	vals := uint64(16 + 8 + n*20 + 8)
	for i := range n {
		e := b[24+20*i:]
		le.PutUint16(e, 324) // TileOffsets
		le.PutUint16(e[2:], 16)
		le.PutUint64(e[4:], cnt)
		le.PutUint64(e[12:], vals)
	}
	_, err := ParseBigTIFF(bytes.NewReader(b), int64(len(b)))
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "more than the file") {
		t.Fatalf("got %v, want the tag-value bound", err)
	}
}

// ReadRect equals a pixel-by-pixel reference for random rectangles that
// lie inside, across and outside the image, with both edge modes.
func TestReadRectMatchesReference(t *testing.T) {
	im, err := CreateTemp(t.TempDir(), 53, 37, 16, 8, 4*16*8*2)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	ref := fill(t, im, 3)
	r := rand.New(rand.NewPCG(9, 9))
	for range 2000 {
		x, y := int(r.IntN(90))-20, int(r.IntN(70))-17
		w, h := 1+int(r.IntN(80)), 1+int(r.IntN(60))
		for _, edge := range []Edge{Zero, Clamp} {
			got := make([]uint16, w*h)
			for i := range got {
				got[i] = 0xdead
			}
			if err := im.ReadRect(x, y, w, h, got, edge); err != nil {
				t.Fatal(err)
			}
			for oy := 0; oy < h; oy++ {
				for ox := 0; ox < w; ox++ {
					px, py := x+ox, y+oy
					var want uint16
					if edge == Clamp {
						want = ref[min(max(py, 0), im.H-1)*im.W+min(max(px, 0), im.W-1)]
					} else if px >= 0 && py >= 0 && px < im.W && py < im.H {
						want = ref[py*im.W+px]
					}
					if g := got[oy*w+ox]; g != want {
						t.Fatalf("edge %d rect (%d,%d %dx%d) at (%d,%d): %d, want %d", edge, x, y, w, h, ox, oy, g, want)
					}
				}
			}
		}
	}
}

// Many goroutines reading and writing disjoint rectangles through a cache
// of three tiles (so misses, evictions and write-backs overlap) leave the
// image equal to what they wrote, within the budget; run with -race.
func TestCacheConcurrent(t *testing.T) {
	im, err := CreateTemp(t.TempDir(), 64, 64, 16, 16, 3*16*16*2)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	ref := make([]uint16, 64*64)
	for i := range ref {
		ref[i] = uint16(i * 7)
	}
	done := make(chan error)
	for g := range 8 {
		go func() {
			var err error
			// goroutine g owns rows 8g..8g+7 and reads everything.
			for it := 0; it < 20 && err == nil; it++ {
				err = im.WriteRect(0, 8*g, 64, 8, ref[8*g*64:])
				buf := make([]uint16, 20*20)
				if err == nil {
					err = im.ReadRect((it*13)%50, (it*7)%50, 20, 20, buf, Clamp)
				}
				if err == nil && it%5 == 0 {
					err = im.Flush()
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	got := make([]uint16, 64*64)
	if err := im.ReadRect(0, 0, 64, 64, got, Zero); err != nil {
		t.Fatal(err)
	}
	for i := range ref {
		if got[i] != ref[i] {
			t.Fatalf("pixel %d = %d, want %d", i, got[i], ref[i])
		}
	}
	if st := im.CacheStats(); st.Peak > st.Capacity || st.Writes == 0 {
		t.Fatalf("stats %+v", st)
	}
	// The tile file itself holds the pixels once flushed.
	if err := im.Flush(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(im.Path())
	if err != nil {
		t.Fatal(err)
	}
	tile := binary.LittleEndian.Uint16(raw[2*(16*16*5+3*16+2):]) // tile (1,1), pixel (2,3)
	if want := ref[(16+3)*64+16+2]; tile != want {
		t.Fatalf("tile file pixel %d, want %d", tile, want)
	}
}

// Open reads back a closed image's tile file with a cold cache, and
// refuses a file of the wrong size.
func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.raw")
	im, err := Create(path, 40, 30, 16, 16, 2*16*16*2)
	if err != nil {
		t.Fatal(err)
	}
	ref := fill(t, im, 4)
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	im, err = Open(path, 40, 30, 16, 16, 2*16*16*2)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	got := make([]uint16, 40*30)
	if err := im.ReadRect(0, 0, 40, 30, got, Zero); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, ref) {
		t.Fatal("reopened image differs")
	}
	if st := im.CacheStats(); st.Reads != 6 || st.Hits != 0 {
		t.Fatalf("cold cache expected: %+v", st)
	}
	if _, err := Open(path, 49, 30, 16, 16, 1<<20); err == nil {
		t.Fatal("wrong size accepted")
	}
}
