package tiled

// OME-TIFF: the options of CreateOMETIFF, the OME-XML it puts in the
// first IFD's ImageDescription, the physical length units OME-XML names,
// and the per-tile codecs (TIFF compression codes 1, 8 and 50000 with the
// horizontal predictor) used by the writer and by TIFF.ReadTile.

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Compression is how a TIFF's tiles are compressed; its value is the TIFF
// Compression tag's code.
type Compression int

// The tile compressions the writer makes and the reader reads.
const (
	// CompressionNone stores tiles as they are (TIFF code 1).
	CompressionNone Compression = 1
	// CompressionDeflate is zlib ("Adobe deflate", TIFF code 8), with the
	// horizontal predictor.
	CompressionDeflate Compression = 8
	// CompressionZstd is Zstandard (TIFF code 50000, as libtiff and GDAL
	// number it), with the horizontal predictor.
	CompressionZstd Compression = 50000
)

// String returns the compression's name: none, deflate or zstd.
func (c Compression) String() string {
	switch c {
	case CompressionNone, 0:
		return "none"
	case CompressionDeflate:
		return "deflate"
	case CompressionZstd:
		return "zstd"
	}
	return "compression " + strconv.Itoa(int(c))
}

// MarshalText returns String's name (for flag.TextVar).
func (c Compression) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText sets c from a name: none, deflate (or zlib) or zstd, in
// any case.
func (c *Compression) UnmarshalText(b []byte) error {
	switch strings.ToLower(string(b)) {
	case "none", "uncompressed":
		*c = CompressionNone
	case "deflate", "zlib":
		*c = CompressionDeflate
	case "zstd":
		*c = CompressionZstd
	default:
		return fmt.Errorf("tiled: compression %q: want none, deflate or zstd", b)
	}
	return nil
}

// predictor reports whether tiles of compression c are stored with the
// horizontal predictor (TIFF Predictor=2): each pixel as its difference
// to its left neighbour, which turns the smooth gradients of microscope
// images into small numbers the compressors code in fewer bits.
func (c Compression) predictor() bool { return c == CompressionDeflate || c == CompressionZstd }

// OMETIFFOptions are CreateOMETIFF's settings.
type OMETIFFOptions struct {
	// TileW and TileH are the tile size, multiples of 16 (0: 512).
	TileW, TileH int
	// Levels is the number of resolution levels, full resolution
	// included (<= 0: halve until a level fits in one tile, see Levels).
	Levels int
	// Compression of the tiles (0: CompressionNone).
	Compression Compression
	// PhysicalSizeX and PhysicalSizeY are the width and height of a
	// full-resolution pixel in PhysicalSizeUnit (0: not known, not
	// written).
	PhysicalSizeX, PhysicalSizeY float64
	// PhysicalSizeUnit is an OME-XML length unit symbol (see
	// LengthUnit); "" is OME's default, µm.
	PhysicalSizeUnit string
	// Name is the OME Image's name ("" leaves it out).
	Name string
	// Channels are the names of the image's channels, one plane each
	// (SizeC); none or one is a single channel (its name written when
	// given). A stream of several channels takes every row of the first,
	// then NextChannel, then the next channel's, and so on. OME-Zarr
	// takes one channel.
	Channels []string
}

// lengthUnits are the OME-XML UnitsLength symbols of the metric lengths
// a microscope image's pixels come in.
var lengthUnits = []string{"km", "hm", "dam", "m", "dm", "cm", "mm", "µm", "nm", "pm", "Å"}

// LengthUnit returns the OME-XML symbol of a length unit given as a
// symbol (µm, um, nm, mm, ...) or a name (micrometer, MICROMETER,
// micron, nanometer, ...), or an error naming the units it knows.
func LengthUnit(s string) (string, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	names := map[string]string{
		"kilometer": "km", "hectometer": "hm", "decameter": "dam", "meter": "m", "decimeter": "dm",
		"centimeter": "cm", "millimeter": "mm", "micrometer": "µm", "micron": "µm", "um": "µm",
		"μm":        "µm", // U+03BC, the Greek letter, for U+00B5
		"nanometer": "nm", "picometer": "pm", "angstrom": "Å",
	}
	if u, ok := names[strings.TrimSuffix(t, "s")]; ok {
		return u, nil
	}
	for _, u := range lengthUnits {
		if s == u || t == strings.ToLower(u) && u != "Å" {
			return u, nil
		}
	}
	return "", fmt.Errorf("tiled: length unit %q: want one of %s", s, strings.Join(lengthUnits, ", "))
}

// omeXML returns the OME-XML (schema 2016-06) of a w x h 16-bit grayscale
// image of len(o.Channels) channels (at least one), channel c stored in
// IFD c of the file, each with its reduced levels in SubIFDs.
func omeXML(w, h int, o OMETIFFOptions) string {
	var b strings.Builder
	esc := func(s string) string {
		var e bytes.Buffer
		_ = xmlEscape(&e, s)
		return e.String()
	}
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<OME xmlns="http://www.openmicroscopy.org/Schemas/OME/2016-06" ` +
		`xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" ` +
		`xsi:schemaLocation="http://www.openmicroscopy.org/Schemas/OME/2016-06 http://www.openmicroscopy.org/Schemas/OME/2016-06/ome.xsd" ` +
		`Creator="github.com/gohtgs/htgs">`)
	b.WriteString(`<Image ID="Image:0"`)
	if o.Name != "" {
		b.WriteString(` Name="` + esc(o.Name) + `"`)
	}
	b.WriteString(`>`)
	nc := max(1, len(o.Channels))
	fmt.Fprintf(&b, `<Pixels ID="Pixels:0" DimensionOrder="XYZCT" Type="uint16" SignificantBits="16" BigEndian="false" Interleaved="false" SizeX="%d" SizeY="%d" SizeZ="1" SizeC="%d" SizeT="1"`, w, h, nc)
	size := func(axis string, v float64) {
		if v <= 0 {
			return
		}
		fmt.Fprintf(&b, ` PhysicalSize%s="%s"`, axis, strconv.FormatFloat(v, 'g', -1, 64))
		// µm is the schema's default: left out, the description stays
		// ASCII as TIFF asks.
		if o.PhysicalSizeUnit != "" && o.PhysicalSizeUnit != "µm" {
			fmt.Fprintf(&b, ` PhysicalSize%sUnit="%s"`, axis, esc(o.PhysicalSizeUnit))
		}
	}
	size("X", o.PhysicalSizeX)
	size("Y", o.PhysicalSizeY)
	b.WriteString(`>`)
	for c := range nc {
		fmt.Fprintf(&b, `<Channel ID="Channel:0:%d"`, c)
		if c < len(o.Channels) && o.Channels[c] != "" {
			b.WriteString(` Name="` + esc(o.Channels[c]) + `"`)
		}
		b.WriteString(` SamplesPerPixel="1"><LightPath/></Channel>`)
	}
	fmt.Fprintf(&b, `<TiffData IFD="0" PlaneCount="%d"/></Pixels></Image></OME>`, nc)
	return b.String()
}

// xmlEscape writes s with XML's five special characters escaped.
func xmlEscape(w io.Writer, s string) error {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")
	_, err := r.WriteString(w, s)
	return err
}

// predict replaces each pixel of the tw-wide rows of tile by its
// difference to its left neighbour (modulo 2^16), row by row.
func predict(tile []uint16, tw int) {
	for r := 0; r+tw <= len(tile); r += tw {
		row := tile[r : r+tw]
		for x := len(row) - 1; x > 0; x-- {
			row[x] -= row[x-1]
		}
	}
}

// unpredict undoes predict.
func unpredict(tile []uint16, tw int) {
	for r := 0; r+tw <= len(tile); r += tw {
		row := tile[r : r+tw]
		for x := 1; x < len(row); x++ {
			row[x] += row[x-1]
		}
	}
}

// tileCodec compresses tiles for one stream; its methods are safe for
// concurrent use.
type tileCodec struct {
	c    Compression
	zlib sync.Pool // *zlib.Writer
	zstd *zstd.Encoder
}

func newTileCodec(c Compression) (*tileCodec, error) {
	tc := &tileCodec{c: c}
	if c == CompressionZstd {
		// SpeedFastest stores a mosaic's predicted tiles nearly as they
		// are (measured: 4194568 bytes for 4 MiB of tiles, where
		// SpeedDefault makes 2421265 in about deflate's time).
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(false))
		if err != nil {
			return nil, fmt.Errorf("tiled: zstd: %w", err)
		}
		tc.zstd = enc
	}
	return tc, nil
}

// compress appends the compressed little-endian bytes of tile (tw wide,
// predicted first where c uses the predictor; tile is overwritten) to
// dst[:0]. scratch holds the bytes on big-endian hosts.
func (tc *tileCodec) compress(dst []byte, tile []uint16, tw int, scratch *[]byte) ([]byte, error) {
	if tc.c.predictor() {
		predict(tile, tw)
	}
	var raw []byte
	if hostLE {
		raw = asBytes(tile)
	} else {
		if cap(*scratch) < 2*len(tile) {
			*scratch = make([]byte, 2*len(tile))
		}
		raw = (*scratch)[:2*len(tile)]
		for i, v := range tile {
			binary.LittleEndian.PutUint16(raw[2*i:], v)
		}
	}
	switch tc.c {
	case CompressionZstd:
		return tc.zstd.EncodeAll(raw, dst[:0]), nil
	case CompressionDeflate:
		buf := bytes.NewBuffer(dst[:0])
		zw, _ := tc.zlib.Get().(*zlib.Writer)
		if zw == nil {
			var err error
			if zw, err = zlib.NewWriterLevel(buf, deflateLevel); err != nil {
				return nil, err
			}
		} else {
			zw.Reset(buf)
		}
		defer tc.zlib.Put(zw)
		if _, err := zw.Write(raw); err != nil {
			return nil, fmt.Errorf("tiled: deflate: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("tiled: deflate: %w", err)
		}
		return buf.Bytes(), nil
	}
	return nil, fmt.Errorf("tiled: cannot write %v", tc.c)
}

// close releases the codec's encoders.
func (tc *tileCodec) close() {
	if tc.zstd != nil {
		tc.zstd.Close()
	}
}

// deflateLevel is the zlib level of deflate tiles.
const deflateLevel = zlib.BestSpeed

// tileDecoder decompresses a file's tiles; safe for concurrent use.
type tileDecoder struct {
	once sync.Once
	zstd *zstd.Decoder
	err  error
}

// decode decompresses src (compression c) into exactly len(dst) bytes.
func (d *tileDecoder) decode(c Compression, src, dst []byte) error {
	switch c {
	case CompressionNone:
		if len(src) != len(dst) {
			return formatErr("uncompressed tile of %d bytes, want %d", len(src), len(dst))
		}
		copy(dst, src)
		return nil
	case CompressionDeflate:
		zr, err := zlib.NewReader(bytes.NewReader(src))
		if err != nil {
			return formatErr("deflate tile: %v", err)
		}
		defer zr.Close()
		if _, err := io.ReadFull(zr, dst); err != nil {
			return formatErr("deflate tile: %v", err)
		}
		return nil
	case CompressionZstd:
		d.once.Do(func() {
			d.zstd, d.err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<31))
		})
		if d.err != nil {
			return fmt.Errorf("tiled: zstd: %w", d.err)
		}
		out, err := d.zstd.DecodeAll(src, dst[:0:len(dst)])
		if err != nil {
			return formatErr("zstd tile: %v", err)
		}
		if len(out) != len(dst) {
			return formatErr("zstd tile of %d bytes, want %d", len(out), len(dst))
		}
		copy(dst, out) // a no-op where out is dst

		return nil
	}
	return formatErr("compression %d", int(c))
}
