package tiled

import (
	"bytes"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// smooth returns a w x h image of a gradient with a little noise (as a
// microscope image compresses) and its big-endian bytes.
func smooth(w, h int, seed uint64) ([]uint16, []byte) {
	r := rand.New(rand.NewPCG(seed, 3))
	px := make([]uint16, w*h)
	be := make([]byte, 2*w*h)
	for y := range h {
		for x := range w {
			v := uint16(1000 + 7*x + 5*y + int(r.IntN(16)))
			px[y*w+x] = v
			be[2*(y*w+x)], be[2*(y*w+x)+1] = byte(v>>8), byte(v)
		}
	}
	return px, be
}

// writeStream streams px (w x h) into s in bands of 2*TH rows and closes
// it.
func writeStream(t *testing.T, s *BigTIFFStream, px []uint16) {
	t.Helper()
	writeRows(t, s, px)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// An OME-TIFF holds the plain layout's pixels at every level, whatever the
// compression: the full resolution in the only top-level IFD, the reduced
// levels from its SubIFDs, and the OME-XML
// giving the size and physical pixel size.
func TestOMETIFFLevelsEqualPlainLayout(t *testing.T) {
	defer func(b int) { runBytes = b }(runBytes)
	for _, rb := range []int{4 << 20, 3000} {
		runBytes = rb
		for _, sz := range [][2]int{{301, 157}, {64, 48}, {1000, 17}} {
			w, h := sz[0], sz[1]
			dir := t.TempDir()
			px, _ := smooth(w, h, uint64(w))
			plain := filepath.Join(dir, "plain.tif")
			s, err := CreateBigTIFF(plain, w, h, 32, 16, 0, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			writeStream(t, s, px)
			ref, err := OpenBigTIFF(plain)
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			for _, c := range []Compression{CompressionNone, CompressionDeflate, CompressionZstd} {
				path := filepath.Join(dir, c.String()+".ome.tif")
				s, err := CreateOMETIFF(path, w, h, OMETIFFOptions{TileW: 32, TileH: 16, Compression: c, PhysicalSizeX: 0.65, PhysicalSizeY: 0.7, PhysicalSizeUnit: "nanometer", Name: `a "b" & c`})
				if err != nil {
					t.Fatal(err)
				}
				writeStream(t, s, px)
				got, err := OpenBigTIFF(path)
				if err != nil {
					t.Fatal(err)
				}
				defer got.Close()
				if len(got.Levels) != len(ref.Levels) || len(got.Levels) < 2 {
					t.Fatalf("%v %dx%d: %d levels, plain layout %d", c, w, h, len(got.Levels), len(ref.Levels))
				}
				a, b := make([]uint16, 32*16), make([]uint16, 32*16)
				for l, lv := range got.Levels {
					rl := ref.Levels[l]
					if lv.W != rl.W || lv.H != rl.H || lv.Reduced != (l > 0) || lv.Compression != c || lv.Predictor != (c != CompressionNone) {
						t.Fatalf("%v level %d: %+v, want %d x %d", c, l, lv, rl.W, rl.H)
					}
					for ty := 0; ty*16 < lv.H; ty++ {
						for tx := 0; tx*32 < lv.W; tx++ {
							if err := got.ReadTile(l, Coord{tx, ty}, a); err != nil {
								t.Fatal(err)
							}
							if err := ref.ReadTile(l, Coord{tx, ty}, b); err != nil {
								t.Fatal(err)
							}
							if !slicesEqual(a, b) {
								t.Fatalf("%v %dx%d level %d tile (%d,%d) differs from the plain layout's", c, w, h, l, tx, ty)
							}
						}
					}
				}
				checkOMEXML(t, got.Description, w, h, "0.65", "0.7", "nm")
			}
		}
	}
}

// Deflate and zstd tiles of a smooth, slightly noisy image take well
// under the uncompressed file's space.
func TestOMETIFFCompressionShrinks(t *testing.T) {
	dir := t.TempDir()
	px, _ := smooth(1024, 1024, 5)
	sizes := map[Compression]int64{}
	for _, c := range []Compression{CompressionNone, CompressionDeflate, CompressionZstd} {
		path := filepath.Join(dir, c.String()+".tif")
		s, err := CreateOMETIFF(path, 1024, 1024, OMETIFFOptions{TileW: 256, TileH: 256, Compression: c})
		if err != nil {
			t.Fatal(err)
		}
		writeStream(t, s, px)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		sizes[c] = st.Size()
	}
	if sizes[CompressionDeflate] > sizes[CompressionNone]/2 || sizes[CompressionZstd] > sizes[CompressionNone]/2 {
		t.Errorf("file sizes %v: compressed not under half the uncompressed", sizes)
	}
}

func slicesEqual(a, b []uint16) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// checkOMEXML checks desc is OME-XML of one w x h uint16 plane with the
// given physical size (unit "" for none written).
func checkOMEXML(t *testing.T, desc string, w, h int, sx, sy, unit string) {
	t.Helper()
	var ome struct {
		XMLName xml.Name `xml:"http://www.openmicroscopy.org/Schemas/OME/2016-06 OME"`
		Image   []struct {
			Pixels struct {
				SizeX, SizeY, SizeC, Type            string `xml:",attr"`
				PhysicalSizeX, PhysicalSizeY         string `xml:",attr"`
				PhysicalSizeXUnit, PhysicalSizeYUnit string `xml:",attr"`
				DimensionOrder                       string `xml:",attr"`
				TiffData                             []struct {
					IFD, PlaneCount string `xml:",attr"`
				}
			}
		}
	}
	if !strings.HasPrefix(desc, "<?xml") {
		t.Fatalf("ImageDescription is not XML: %.60q", desc)
	}
	if err := xml.Unmarshal([]byte(desc), &ome); err != nil {
		t.Fatalf("OME-XML: %v", err)
	}
	if len(ome.Image) != 1 {
		t.Fatalf("%d images", len(ome.Image))
	}
	p := ome.Image[0].Pixels
	if p.SizeX != strconv.Itoa(w) || p.SizeY != strconv.Itoa(h) || p.SizeC != "1" || p.Type != "uint16" || p.DimensionOrder != "XYZCT" ||
		p.PhysicalSizeX != sx || p.PhysicalSizeY != sy || p.PhysicalSizeXUnit != unit || p.PhysicalSizeYUnit != unit ||
		len(p.TiffData) != 1 || p.TiffData[0].IFD != "0" || p.TiffData[0].PlaneCount != "1" {
		t.Fatalf("OME Pixels %+v, want %d x %d, physical size %s x %s %q", p, w, h, sx, sy, unit)
	}
}

// ifd0Tags returns the tags of a BigTIFF's first IFD.
func ifd0Tags(t *testing.T, path string) map[uint16]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	off := le.Uint64(b[8:])
	n := le.Uint64(b[off:])
	tags := map[uint16]bool{}
	for i := range n {
		tags[le.Uint16(b[off+8+20*i:])] = true
	}
	return tags
}

// Resolution tags are written only with a physical pixel size, and in
// centimetres; µm, the OME default, is not spelled out in the OME-XML.
func TestOMETIFFResolutionTags(t *testing.T) {
	dir := t.TempDir()
	px, _ := smooth(40, 40, 1)
	for _, tc := range []struct {
		name   string
		o      OMETIFFOptions
		res    bool
		sx, sy string
	}{
		{"none", OMETIFFOptions{TileW: 16, TileH: 16}, false, "", ""},
		{"um", OMETIFFOptions{TileW: 16, TileH: 16, PhysicalSizeX: 0.5, PhysicalSizeY: 0.5, PhysicalSizeUnit: "um"}, true, "0.5", "0.5"},
	} {
		path := filepath.Join(dir, tc.name+".tif")
		s, err := CreateOMETIFF(path, 40, 40, tc.o)
		if err != nil {
			t.Fatal(err)
		}
		writeStream(t, s, px)
		tags := ifd0Tags(t, path)
		if tags[tagXResolution] != tc.res || tags[tagYResolution] != tc.res || tags[tagResolutionUnit] != tc.res || !tags[tagSubIFDs] || !tags[tagImageDesc] {
			t.Errorf("%s: IFD 0 tags %v: resolution tags should be there: %v; SubIFDs and ImageDescription always", tc.name, tags, tc.res)
		}
		tf, err := OpenBigTIFF(path)
		if err != nil {
			t.Fatal(err)
		}
		checkOMEXML(t, tf.Description, 40, 40, tc.sx, tc.sy, "")
		tf.Close()
	}
}

// Bad options are refused before any file is made.
func TestCreateOMETIFFRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []OMETIFFOptions{
		{TileW: 20, TileH: 16},
		{Compression: 5},
		{PhysicalSizeX: -1},
		{PhysicalSizeUnit: "furlong"},
	} {
		path := filepath.Join(dir, "x.tif")
		if _, err := CreateOMETIFF(path, 10, 10, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%+v: file made", o)
		}
	}
}

func TestLengthUnitAndCompressionNames(t *testing.T) {
	for in, want := range map[string]string{"MICROMETER": "µm", "um": "µm", "µm": "µm", "nm": "nm", "NANOMETER": "nm", "millimeters": "mm", "CENTIMETER": "cm", "m": "m", "Å": "Å"} {
		if got, err := LengthUnit(in); err != nil || got != want {
			t.Errorf("LengthUnit(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := LengthUnit("inch"); err == nil {
		t.Error("inch accepted")
	}
	for in, want := range map[string]Compression{"none": CompressionNone, "DEFLATE": CompressionDeflate, "zlib": CompressionDeflate, "zstd": CompressionZstd} {
		var c Compression
		if err := c.UnmarshalText([]byte(in)); err != nil || c != want {
			t.Errorf("%q: %v, %v", in, c, err)
		}
		if b, _ := c.MarshalText(); in == strings.ToLower(in) && in != "zlib" && string(b) != in {
			t.Errorf("%v marshals to %q", c, b)
		}
	}
	var c Compression
	if err := c.UnmarshalText([]byte("lzw")); err == nil {
		t.Error("lzw accepted")
	}
}

// A damaged compressed tile is an error wrapping ErrFormat, not a panic or
// wrong pixels.
func TestReadTileCorruptCompressed(t *testing.T) {
	dir := t.TempDir()
	px, _ := smooth(64, 32, 2)
	for _, c := range []Compression{CompressionDeflate, CompressionZstd} {
		path := filepath.Join(dir, c.String()+".tif")
		s, err := CreateOMETIFF(path, 64, 32, OMETIFFOptions{TileW: 32, TileH: 32, Compression: c})
		if err != nil {
			t.Fatal(err)
		}
		writeStream(t, s, px)
		tf, err := OpenBigTIFF(path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		off := tf.Levels[0].Offsets[0]
		for i := range 16 {
			b[off+uint64(i)] ^= 0xa5
		}
		tf.Close()
		bad, err := ParseBigTIFF(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		if err := bad.ReadTile(0, Coord{0, 0}, make([]uint16, 32*32)); !errors.Is(err, ErrFormat) {
			t.Errorf("%v: corrupt tile read with error %v", c, err)
		}
	}
}
