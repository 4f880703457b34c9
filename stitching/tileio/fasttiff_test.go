package tileio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/image/tiff"

	"github.com/gohtgs/htgs/stitching/compose"
	"github.com/gohtgs/htgs/stitching/synth"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// slowDecodeTIFF is the x/image/tiff path of DecodeTileLimit, the
// reference of the fast path (a panic of the decoder is an error there
// too).
func slowDecodeTIFF(data []byte, maxPixels int64) (img *image.Gray16, err error) {
	defer func() {
		if p := recover(); p != nil {
			img, err = nil, fmt.Errorf("corrupt or unreadable image: decoder failed: %v", p)
		}
	}()
	cfg, err := tiff.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, configError(err)
	}
	if err := checkTileConfig(cfg, maxPixels); err != nil {
		return nil, err
	}
	dec, err := tiff.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("corrupt or unreadable image: %w", err)
	}
	return toGray16(dec)
}

// byteOrder is binary.LittleEndian or binary.BigEndian.
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// testTIFF describes a TIFF written by writeTestTIFF.
type testTIFF struct {
	order        byteOrder
	w, h         int
	bits         int   // 8 or 16
	photometric  int   // -1: no tag
	rowsPerStrip int   // 0: no tag (one strip)
	longOffsets  bool  // StripOffsets and StripByteCounts as LONG, else SHORT
	reverse      bool  // strips stored last first, with gaps
	extraCount   int   // added to every StripByteCounts
	tileW, tileH int   // tiles instead of strips when tileW > 0
	extraTags    []tag // more entries (sorted in with the others)
}

type tag struct {
	id, typ uint16
	vals    []uint32
}

// writeTestTIFF writes a classic TIFF by hand, in either byte order, with
// pixel values pix (row-major, w*h, truncated to 8 bits when bits is 8).
func writeTestTIFF(t testing.TB, c testTIFF, pix []uint16) []byte {
	t.Helper()
	bo := c.order
	bpp := c.bits / 8
	rps := c.rowsPerStrip
	if rps <= 0 || rps > c.h {
		rps = c.h
	}
	bw, bh := c.w, rps
	if c.tileW > 0 {
		bw, bh = c.tileW, c.tileH
	}
	across, down := (c.w+bw-1)/bw, (c.h+bh-1)/bh
	strips := across * down
	var out bytes.Buffer
	if bo == byteOrder(binary.LittleEndian) {
		out.WriteString("II*\x00")
	} else {
		out.WriteString("MM\x00*")
	}
	out.Write(make([]byte, 4)) // IFD offset, patched below
	// Strip data.
	offsets := make([]uint32, strips)
	counts := make([]uint32, strips)
	order := make([]int, strips)
	for j := range order {
		order[j] = j
		if c.reverse {
			order[j] = strips - 1 - j
		}
	}
	for _, j := range order {
		if c.reverse {
			out.Write([]byte{0xde, 0xad, 0xbe}) // a gap
		}
		offsets[j] = uint32(out.Len())
		x0, y0 := j%across*bw, j/across*bh
		x1, y1 := x0+bw, y0+bh
		if c.tileW == 0 {
			x1, y1 = c.w, min(y1, c.h) // strips are not padded
		}
		start := out.Len()
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				v := uint16(0xabcd) // tile padding
				if x < c.w && y < c.h {
					v = pix[y*c.w+x]
				}
				if bpp == 1 {
					out.WriteByte(byte(v))
				} else {
					out.Write(bo.AppendUint16(nil, v))
				}
			}
		}
		counts[j] = uint32(out.Len() - start + c.extraCount)
		if c.extraCount > 0 {
			out.Write(make([]byte, c.extraCount))
		}
	}
	offType := uint16(3)
	if c.longOffsets {
		offType = 4
	}
	tags := []tag{
		{256, 4, []uint32{uint32(c.w)}},
		{257, 3, []uint32{uint32(c.h)}},
		{258, 3, []uint32{uint32(c.bits)}},
		{259, 3, []uint32{1}},
		{277, 3, []uint32{1}},
		{284, 3, []uint32{1}},
	}
	if c.tileW > 0 {
		tags = append(tags, tag{322, 3, []uint32{uint32(c.tileW)}}, tag{323, 4, []uint32{uint32(c.tileH)}},
			tag{324, offType, offsets}, tag{325, offType, counts})
	} else {
		tags = append(tags, tag{273, offType, offsets}, tag{279, offType, counts})
	}
	if c.photometric >= 0 {
		tags = append(tags, tag{262, 3, []uint32{uint32(c.photometric)}})
	}
	if c.rowsPerStrip > 0 {
		tags = append(tags, tag{278, 4, []uint32{uint32(c.rowsPerStrip)}})
	}
	tags = append(tags, c.extraTags...)
	// Sort by tag (insertion sort: few tags).
	for i := 1; i < len(tags); i++ {
		for k := i; k > 0 && tags[k].id < tags[k-1].id; k-- {
			tags[k], tags[k-1] = tags[k-1], tags[k]
		}
	}
	// Out-of-line values, then the IFD.
	ptr := make([]uint32, len(tags))
	for i, tg := range tags {
		if len(tiffRaw(bo, tg)) > 4 {
			if out.Len()%2 == 1 {
				out.WriteByte(0)
			}
			ptr[i] = uint32(out.Len())
			out.Write(tiffRaw(bo, tg))
		}
	}
	if out.Len()%2 == 1 {
		out.WriteByte(0)
	}
	ifd := out.Len()
	out.Write(bo.AppendUint16(nil, uint16(len(tags))))
	for i, tg := range tags {
		e := bo.AppendUint16(nil, tg.id)
		e = bo.AppendUint16(e, tg.typ)
		count := len(tg.vals)
		if tg.typ == 5 { // RATIONAL: two LONGs per value
			count /= 2
		}
		e = bo.AppendUint32(e, uint32(count))
		if ptr[i] != 0 {
			e = bo.AppendUint32(e, ptr[i])
		} else {
			v := tiffRaw(bo, tg)
			e = append(e, v...)
			e = append(e, make([]byte, 4-len(v))...)
		}
		out.Write(e)
	}
	out.Write(make([]byte, 4)) // no next IFD
	b := out.Bytes()
	bo.PutUint32(b[4:], uint32(ifd))
	return b
}

func tiffRaw(bo byteOrder, tg tag) []byte {
	var b []byte
	for _, v := range tg.vals {
		switch tg.typ {
		case 1, 2:
			b = append(b, byte(v))
		case 3:
			b = bo.AppendUint16(b, uint16(v))
		default:
			b = bo.AppendUint32(b, v)
		}
	}
	return b
}

func randomPix(r *rand.Rand, n, bits int) []uint16 {
	pix := make([]uint16, n)
	for i := range pix {
		pix[i] = uint16(r.Uint32() >> (32 - bits))
	}
	return pix
}

// fastTIFFFiles are files the fast path must decode: written by the
// project's TIFF writer (compose.EncodeTIFF, which synth.WriteTIFF and
// stitch -generate use), by x/image/tiff's Encode, and by hand in both byte
// orders, 8 and 16 bits, one or several strips, odd widths.
func fastTIFFFiles(t testing.TB) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	r := rand.New(rand.NewPCG(1, 2))
	for _, sz := range [][2]int{{1, 1}, {7, 5}, {64, 48}, {333, 17}} {
		w, h := sz[0], sz[1]
		g16 := image.NewGray16(image.Rect(0, 0, w, h))
		for i := range g16.Pix {
			g16.Pix[i] = byte(r.Uint32())
		}
		var b bytes.Buffer
		if err := compose.EncodeTIFF(&b, g16); err != nil {
			t.Fatal(err)
		}
		files[fmt.Sprintf("compose-%dx%d", w, h)] = bytes.Clone(b.Bytes())
		g8 := image.NewGray(image.Rect(0, 0, w, h))
		for i := range g8.Pix {
			g8.Pix[i] = byte(r.Uint32())
		}
		b.Reset()
		if err := tiff.Encode(&b, g8, nil); err != nil {
			t.Fatal(err)
		}
		files[fmt.Sprintf("xtiff8-%dx%d", w, h)] = bytes.Clone(b.Bytes())
	}
	// A synthetic tile as stitch -generate writes it.
	cfg := synth.ConfigFor(synth.Easy)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight = 1, 2, 61, 37
	sg, err := synth.Generate(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "synth.tif")
	if err := synth.WriteTIFF(p, sg.Tiles[0]); err != nil {
		t.Fatal(err)
	}
	if files["synth"], err = os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	for _, order := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, bits := range []int{8, 16} {
			for _, c := range []testTIFF{
				{w: 13, h: 9, photometric: 1},
				{w: 13, h: 9, photometric: 1, rowsPerStrip: 2, longOffsets: true},
				{w: 13, h: 9, photometric: 1, rowsPerStrip: 4, reverse: true, extraCount: 3},
				{w: 5, h: 11, photometric: 1, rowsPerStrip: 1},
				{w: 48, h: 20, photometric: 1, tileW: 16, tileH: 8},                     // tiles divide the width
				{w: 48, h: 20, photometric: 0, tileW: 16, tileH: 16, longOffsets: true}, // WhiteIsZero
				{w: 40, h: 8, photometric: 1, tileW: 40, tileH: 8, reverse: true},
				{w: 5, h: 11, photometric: 1, rowsPerStrip: 100}, // more than the height
				{w: 9, h: 6, photometric: 0, rowsPerStrip: 4},    // WhiteIsZero
				{w: 9, h: 6, photometric: -1, rowsPerStrip: 5},   // no tag: WhiteIsZero
				{w: 31, h: 3, photometric: 1, extraTags: []tag{
					{339, 3, []uint32{1}},                // SampleFormat
					{317, 3, []uint32{1}},                // Predictor none
					{305, 2, []uint32{'A', 'B', 'C', 0}}, // Software, ASCII: ignored
					{282, 5, []uint32{1 << 30, 1}},       // XResolution, RATIONAL: ignored
				}},
			} {
				c.order, c.bits = order, bits
				name := fmt.Sprintf("hand-%v-%d-%dx%d-rps%d-ph%d-rev%v-%d", order, bits, c.w, c.h, c.rowsPerStrip, c.photometric, c.reverse, len(c.extraTags))
				files[name] = writeTestTIFF(t, c, randomPix(r, c.w*c.h, bits))
			}
		}
	}
	for _, order := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, c := range []testTIFF{
			{w: 37, h: 21, tileW: 16, tileH: 8},  // partial tiles right and bottom
			{w: 13, h: 30, tileW: 16, tileH: 16}, // one tile across, wider than the image
			{w: 33, h: 9, tileW: 8, tileH: 24, extraCount: 5, reverse: true},
		} {
			c.order, c.bits, c.photometric = order, 16, 1
			name := fmt.Sprintf("tiled-%v-%dx%d-%dx%d", order, c.w, c.h, c.tileW, c.tileH)
			files[name] = writeTestTIFF(t, c, randomPix(r, c.w*c.h, 16))
		}
	}
	return files
}

// The fast path accepts the common files and decodes them exactly as the
// x/image/tiff path does, through DecodeTileLimit and LoadTileLimit.
func TestFastTIFFMatchesXImage(t *testing.T) {
	dir := t.TempDir()
	for name, data := range fastTIFFFiles(t) {
		want, err := slowDecodeTIFF(data, 0)
		if err != nil {
			t.Errorf("%s: x/image/tiff: %v", name, err)
			continue
		}
		got, ok, err := decodeFastTIFF(data, 0)
		if !ok || err != nil {
			t.Errorf("%s: fast path: ok %v, err %v", name, ok, err)
			continue
		}
		if got.Rect != want.Rect || got.Stride != want.Stride || !bytes.Equal(got.Pix, want.Pix) {
			t.Errorf("%s: fast path %v differs from x/image/tiff %v", name, got.Rect, want.Rect)
		}
		dec, err := DecodeTileLimit(bytes.NewReader(data), 0)
		if err != nil || !bytes.Equal(dec.Pix, want.Pix) {
			t.Errorf("%s: DecodeTileLimit: %v", name, err)
		}
		p := filepath.Join(dir, "t.tif")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ld, err := LoadTileLimit(p, 0)
		if err != nil || !bytes.Equal(ld.Pix, want.Pix) {
			t.Errorf("%s: LoadTileLimit: %v", name, err)
		}
	}
}

// Known values: 8-bit pixels become 16-bit by value, WhiteIsZero is
// inverted, byte orders are read right.
func TestFastTIFFValues(t *testing.T) {
	for _, order := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, c := range []struct {
			bits, photometric int
			in, want          uint16
		}{
			{16, 1, 0x1234, 0x1234},
			{16, 0, 0x1234, 0xffff - 0x1234},
			{8, 1, 0xc8, 0xc8},
			{8, 0, 0xc8, 0xff - 0xc8},
		} {
			pix := []uint16{c.in, c.in, c.in}
			data := writeTestTIFF(t, testTIFF{order: order, w: 3, h: 1, bits: c.bits, photometric: c.photometric}, pix)
			img, ok, err := decodeFastTIFF(data, 0)
			if !ok || err != nil {
				t.Fatalf("%v %+v: ok %v, err %v", order, c, ok, err)
			}
			for x := 0; x < 3; x++ {
				if v := img.Gray16At(x, 0).Y; v != c.want {
					t.Errorf("%v %+v: pixel %d = %#x, want %#x", order, c, x, v, c.want)
				}
			}
		}
	}
}

// Files outside the fast path are left to x/image/tiff (which decodes some
// and refuses others), and corrupt files give its errors, not a panic.
func TestFastTIFFFallback(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	g16 := image.NewGray16(image.Rect(0, 0, 40, 30))
	for i := range g16.Pix {
		g16.Pix[i] = byte(r.Uint32())
	}
	var deflate, rgb bytes.Buffer
	if err := tiff.Encode(&deflate, g16, &tiff.Options{Compression: tiff.Deflate}); err != nil {
		t.Fatal(err)
	}
	if err := tiff.Encode(&rgb, image.NewRGBA(image.Rect(0, 0, 4, 4)), nil); err != nil {
		t.Fatal(err)
	}
	base := testTIFF{order: binary.BigEndian, w: 10, h: 8, bits: 16, photometric: 1, rowsPerStrip: 3}
	pix := randomPix(r, 80, 16)
	good := writeTestTIFF(t, base, pix)
	with := func(tags ...tag) []byte {
		c := base
		c.extraTags = tags
		return writeTestTIFF(t, c, pix)
	}
	cases := map[string][]byte{
		"deflate":                   deflate.Bytes(),
		"rgb":                       rgb.Bytes(),
		"predictor":                 with(tag{317, 3, []uint32{2}}),
		"sample format":             with(tag{339, 3, []uint32{3}}),
		"tile tags without offsets": with(tag{322, 3, []uint32{16}}, tag{323, 3, []uint32{16}}),
		"8-bit partial tiles": writeTestTIFF(t, testTIFF{order: binary.LittleEndian, w: 20, h: 16, bits: 8,
			photometric: 1, tileW: 16, tileH: 16}, randomPix(r, 320, 8)),
		"tiles below 8": writeTestTIFF(t, testTIFF{order: binary.LittleEndian, w: 20, h: 16, bits: 16,
			photometric: 1, tileW: 4, tileH: 16}, randomPix(r, 320, 16)),
		"colormap":        with(tag{320, 3, make([]uint32, 3*256)}),
		"fill order type": with(tag{266, 5, []uint32{1, 1}}),
		"truncated":       good[:len(good)/2],
		"header only":     good[:8],
	}
	// Strips too short for their rows, and a strip beyond the end.
	short := base
	short.extraCount = -1
	cases["short strips"] = writeTestTIFF(t, short, pix)
	far := bytes.Clone(good)
	ifd := binary.BigEndian.Uint32(far[4:])
	n := int(binary.BigEndian.Uint16(far[ifd:]))
	for k := 0; k < n; k++ {
		e := far[int(ifd)+2+12*k:]
		if binary.BigEndian.Uint16(e) == 273 {
			p := binary.BigEndian.Uint32(e[8:])
			binary.BigEndian.PutUint16(far[p+2:], 0xfff0) // second strip offset
		}
	}
	cases["strip beyond end"] = far
	for name, data := range cases {
		if _, ok, _ := decodeFastTIFF(data, 0); ok {
			t.Errorf("%s: taken by the fast path", name)
		}
		want, werr := slowDecodeTIFF(data, 0)
		got, err := DecodeTileLimit(bytes.NewReader(data), 0)
		if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) ||
			(err == nil && !bytes.Equal(got.Pix, want.Pix)) {
			t.Errorf("%s: DecodeTileLimit %v, x/image/tiff path %v", name, err, werr)
		}
	}
	if _, err := DecodeTileLimit(bytes.NewReader(cases["short strips"]), 0); err == nil {
		t.Error("short strips decoded")
	}
}

// The size limit is checked on the header, before the image is
// allocated, with the error of the x/image/tiff path.
func TestFastTIFFLimit(t *testing.T) {
	data := hugeTIFF(t, 60000, 60000)
	var err error
	var ok bool
	n := allocated(func() { _, ok, err = decodeFastTIFF(data, 0) })
	if !ok || !errors.Is(err, ErrTileTooLarge) || n > 1<<20 {
		t.Errorf("ok %v, err %v after %d bytes", ok, err, n)
	}
	if _, werr := slowDecodeTIFF(data, 0); werr == nil || werr.Error() != err.Error() {
		t.Errorf("fast %v, x/image/tiff path %v", err, werr)
	}
	small := writeTestTIFF(t, testTIFF{order: binary.LittleEndian, w: 40, h: 30, bits: 8, photometric: 1}, make([]uint16, 1200))
	if _, _, err := decodeFastTIFF(small, 1199); !errors.Is(err, ErrTileTooLarge) {
		t.Errorf("limit 1199: %v", err)
	}
	for _, limit := range []int64{1200, 0, -1} {
		if _, ok, err := decodeFastTIFF(small, limit); !ok || err != nil {
			t.Errorf("limit %d: ok %v, err %v", limit, ok, err)
		}
	}
}

// FuzzDecodeTileFast: the fast path never panics; a file it takes is one
// the x/image/tiff path decodes to the same pixels (or refuses with the
// same size error).
func FuzzDecodeTileFast(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, s := range tileSeeds(f) {
		f.Add(s)
	}
	// Inputs stay under 1 KB: Go's minimizer is quadratic in the length,
	// and each input that finds coverage is minimized before the fuzzer
	// goes on (seeds of 4 KB kept it minimizing to the end of a 60 s run).
	for _, s := range fastTIFFFiles(f) {
		if len(s) <= 1024 {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = data[:min(len(data), 1024)]
		got, ok, err := decodeFastTIFF(data, fuzzTilePixels)
		if !ok {
			if got != nil || err != nil {
				t.Fatalf("not taken, but image %v and error %v", got != nil, err)
			}
			return
		}
		want, werr := slowDecodeTIFF(data, fuzzTilePixels)
		if err != nil {
			if werr == nil || werr.Error() != err.Error() {
				t.Fatalf("fast path: %v, x/image/tiff path: %v", err, werr)
			}
			return
		}
		if werr != nil {
			t.Fatalf("fast path decoded %v, x/image/tiff path: %v", got.Rect, werr)
		}
		if got.Rect != want.Rect || got.Stride != want.Stride || !bytes.Equal(got.Pix, want.Pix) {
			t.Fatalf("fast path %v differs from x/image/tiff %v", got.Rect, want.Rect)
		}
	})
}

// BenchmarkDecodeTile decodes a 1392 x 1040 16-bit tile held in memory,
// as written by compose.EncodeTIFF (little-endian), with the fast path and
// with x/image/tiff; and a big-endian one with the fast path.
func BenchmarkDecodeTile(b *testing.B) {
	const w, h = 1392, 1040
	r := rand.New(rand.NewPCG(5, 6))
	img := image.NewGray16(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(r.Uint32() >> 20) // 12-bit-ish camera values
	}
	var buf bytes.Buffer
	if err := compose.EncodeTIFF(&buf, img); err != nil {
		b.Fatal(err)
	}
	le := buf.Bytes()
	pix := make([]uint16, w*h)
	for i := range pix {
		pix[i] = img.Gray16At(i%w, i/w).Y
	}
	be := writeTestTIFF(b, testTIFF{order: binary.BigEndian, w: w, h: h, bits: 16, photometric: 1, rowsPerStrip: 16, longOffsets: true}, pix)
	run := func(name string, data []byte, dec func([]byte) (*image.Gray16, error)) {
		b.Run(name, func(b *testing.B) {
			if got, err := dec(data); err != nil || !bytes.Equal(got.Pix, img.Pix) {
				b.Fatalf("wrong decoding: %v", err)
			}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := dec(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	fast := func(data []byte) (*image.Gray16, error) {
		img, ok, err := decodeFastTIFF(data, 0)
		if !ok {
			return nil, errors.New("not taken by the fast path")
		}
		return img, err
	}
	run("fast-II", le, fast)
	run("fast-MM", be, fast)
	run("xtiff-II", le, func(data []byte) (*image.Gray16, error) { return slowDecodeTIFF(data, 0) })
}
