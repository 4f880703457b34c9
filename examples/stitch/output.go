package main

// The mosaic file's format: the flags -tile-size, -compression and
// -pixel-size (MIST's --compressionMode, --unit, --unitX and --unitY are
// mapped onto them in mist.go), -format and -channels, their checks, and
// the mosaic.Format the mosaic is written with (package mosaic writes it).

import (
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/internal/outfile"
	"github.com/gohtgs/htgs/stitching/mosaic"
	"github.com/gohtgs/htgs/tiled"
)

// defaultTileSize is -tile-size's default.
const defaultTileSize = mosaic.DefaultTileSize

// defaultCompression is -compression's default. Uncompressed, because it
// is the fastest to write (the out-of-core path then runs at the disk's
// speed), every TIFF reader opens it, and MIST's default compressionMode
// is UNCOMPRESSED too; deflate roughly halves the file at a fraction of
// the write speed on a few cores (see docs/mist.md for the measurements).
const defaultCompression = tiled.CompressionNone

// mosaicFormat is how the mosaic file is written.
type mosaicFormat struct {
	kind        string // -format: formatOMETIFF or formatOMEZarr
	channelList string // -channels as given
	refChannel  string // -ref-channel as given

	// Set by checkChannels from -channels: the channels' names and tile
	// patterns ({ch} replaced), in the mosaic's order, and which one the
	// registration uses. One channel and no name without -channels.
	channels []string
	patterns []string
	ref      int

	tileSize    int
	compression tiled.Compression
	pixelSize   string // -pixel-size as given

	// Parsed or mapped from MIST's options by checkMosaicFlags.
	sizeX, sizeY float64 // 0: unknown
	unit         string  // OME-XML length unit symbol

	// MIST's options (see mist.go).
	mistCompression string
	mistUnit        string
	mistUnitX       float64
	mistUnitY       float64
}

// The mosaic's file formats (-format).
const (
	formatOMETIFF   = string(mosaic.OMETIFF)   // one tiled pyramidal OME-TIFF file
	formatOMEZarr   = string(mosaic.OMEZarr)   // an OME-Zarr NGFF 0.5 (Zarr v3) folder
	formatOMEZarr04 = string(mosaic.OMEZarr04) // an OME-Zarr NGFF 0.4 (Zarr v2) folder

)

// addMosaicFlags registers the mosaic format's flags on fs.
func addMosaicFlags(fs *flag.FlagSet, c *config) {
	m := &c.format
	m.compression = defaultCompression
	fs.StringVar(&m.kind, "format", formatOMETIFF, "the mosaic's format: ome-tiff (PREFIXstitched-T.ome.tif, a tiled pyramidal OME-TIFF), ome-zarr (PREFIXstitched-T.ome.zarr, an OME-Zarr NGFF 0.5 folder on Zarr v3, chunks of -tile-size) or ome-zarr-0.4 (the same name, NGFF 0.4 on Zarr v2, uncompressed, for readers without Zarr v3)")
	fs.IntVar(&m.tileSize, "tile-size", defaultTileSize, "tile side of the mosaic's OME-TIFF in pixels, a multiple of 16; its reduced levels go down to one tile")
	fs.StringVar(&m.channelList, "channels", "", "`names` of the channels, comma-separated, such as DAPI,GFP,Cy5: {ch} in -pattern is a channel's name; the grid is registered on -ref-channel and every channel composed at the same positions into one OME-TIFF of named channels")
	fs.StringVar(&m.refChannel, "ref-channel", "", "the channel the registration uses (default: the first of -channels)")
	fs.TextVar(&m.compression, "compression", defaultCompression, "compression of the mosaic's tiles: none, deflate or zstd (with the horizontal predictor)")
	fs.StringVar(&m.pixelSize, "pixel-size", "", "physical `size` of a tile pixel, written into the mosaic's OME-XML: SIZE or XxY, then a unit (default µm), such as 0.65, 0.65um, 0.5x0.6 or 325nm")
}

// chanPlaceholder in -pattern stands for a channel's name (-channels).
const chanPlaceholder = "{ch}"

// checkChannels checks -channels and -ref-channel against -pattern, and
// sets -pattern to the reference channel's tiles, the ones registered (so
// every later check and the workers see a plain pattern). It runs before
// the pattern is parsed.
func checkChannels(c *config, set map[string]bool) error {
	m := &c.format
	has := strings.Contains(c.pattern, chanPlaceholder)
	if !set["channels"] {
		if has {
			return cli.Usagef("-pattern %q has %s, the channel's name: give the names with -channels", c.pattern, chanPlaceholder)
		}
		if set["ref-channel"] {
			return cli.Usagef("-ref-channel applies to -channels")
		}
		return nil
	}
	if !has {
		return cli.Usagef("-channels %s: -pattern %q has no %s where a channel's name goes in the file names", m.channelList, c.pattern, chanPlaceholder)
	}
	seen := map[string]bool{}
	for _, n := range strings.Split(m.channelList, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
			return cli.Usagef("-channels %q: an empty name", m.channelList)
		case strings.ContainsAny(n, "{}/\\") || n == "." || n == "..":
			return cli.Usagef("-channels: name %q: braces and path separators cannot be in a file name's part", n)
		case seen[n]:
			return cli.Usagef("-channels: %q named twice", n)
		}
		seen[n] = true
		m.channels = append(m.channels, n)
		m.patterns = append(m.patterns, strings.ReplaceAll(c.pattern, chanPlaceholder, n))
	}
	if m.zarr() && len(m.channels) > 1 {
		return cli.Usagef("-channels with -format ome-zarr: the OME-Zarr writer takes one channel; use the OME-TIFF")
	}
	m.ref = 0
	if set["ref-channel"] {
		m.ref = slices.Index(m.channels, strings.TrimSpace(m.refChannel))
		if m.ref < 0 {
			return cli.Usagef("-ref-channel %s: not one of -channels %s", m.refChannel, m.channelList)
		}
	}
	c.pattern = m.patterns[m.ref]
	return nil
}

// checkMosaicFlags checks the mosaic format's flags (after checkMIST,
// which maps MIST's onto them) and sets the pixel size.
func checkMosaicFlags(c *config, set map[string]bool) error {
	m := &c.format
	if m.kind != formatOMETIFF && !m.zarr() {
		return cli.Usagef("-format %s: must be %s, %s or %s", m.kind, formatOMETIFF, formatOMEZarr, formatOMEZarr04)
	}
	if m.kind == formatOMEZarr04 && m.compression != tiled.CompressionNone {
		return cli.Usagef("-format %s stores its chunks uncompressed: leave -compression out, or use -format %s", formatOMEZarr04, formatOMEZarr)
	}
	if m.tileSize < 16 || m.tileSize%16 != 0 || m.tileSize > 1<<15 {
		return cli.Usagef("-tile-size %d: must be a multiple of 16 from 16 to 32768", m.tileSize)
	}
	if set["pixel-size"] {
		if set["unitX"] || set["unitY"] {
			return cli.Usagef("-pixel-size and --unitX/--unitY both give the pixel size: give one")
		}
		x, y, unit, err := parsePixelSize(m.pixelSize)
		if err != nil {
			return cli.Usagef("-pixel-size %s: %v", m.pixelSize, err)
		}
		m.sizeX, m.sizeY, m.unit = x, y, unit
	}
	return nil
}

// parsePixelSize parses -pixel-size: SIZE or XxY, then an optional unit
// (µm when left out).
func parsePixelSize(s string) (x, y float64, unit string, err error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune("0123456789.+-eExX", r) })
	num, u := s, ""
	if i >= 0 {
		num, u = strings.TrimSpace(s[:i]), strings.TrimSpace(s[i:])
	}
	unit = "µm"
	if u != "" {
		if unit, err = tiled.LengthUnit(u); err != nil {
			return 0, 0, "", err
		}
	}
	xs, ys, two := strings.Cut(strings.ToLower(num), "x")
	if !two {
		ys = xs
	}
	x, err1 := strconv.ParseFloat(xs, 64)
	y, err2 := strconv.ParseFloat(ys, 64)
	if err1 != nil || err2 != nil || !(x > 0 && y > 0) || math.IsInf(x, 0) || math.IsInf(y, 0) {
		return 0, 0, "", fmt.Errorf("want a size above 0, or XxY, then an optional unit, such as 0.65um or 0.5x0.6nm")
	}
	return x, y, unit, nil
}

// lib is the mosaic file's format for package mosaic.
func (m *mosaicFormat) lib() mosaic.Format {
	return mosaic.Format{
		Kind:        mosaic.Kind(m.kind),
		TileSize:    m.tileSize,
		Compression: m.compression,
		PixelSizeX:  m.sizeX, PixelSizeY: m.sizeY, PixelSizeUnit: m.unit,
		Channels: m.channels,
	}
}

// describe says what the mosaic file holds, for the run's messages.
func (m *mosaicFormat) describe() string {
	comp := m.compression.String() + "-compressed"
	if m.compression == tiled.CompressionNone {
		comp = "uncompressed"
	}
	s := fmt.Sprintf("tiled (%d px) pyramidal OME-TIFF, %s", m.tileSize, comp)
	switch m.kind {
	case formatOMEZarr:
		s = fmt.Sprintf("OME-Zarr (NGFF 0.5, %d px chunks, %s)", m.tileSize, comp)
	case formatOMEZarr04:
		s = fmt.Sprintf("OME-Zarr (NGFF 0.4 on Zarr v2, %d px chunks, uncompressed)", m.tileSize)
	}
	if len(m.channels) > 0 {
		s += fmt.Sprintf(", %d channel(s) %s registered on %s", len(m.channels), strings.Join(m.channels, ","), m.channels[m.ref])
	}
	if m.sizeX > 0 {
		s += fmt.Sprintf(", pixel %s x %s %s", strconv.FormatFloat(m.sizeX, 'g', -1, 64), strconv.FormatFloat(m.sizeY, 'g', -1, 64), m.unit)
	}
	return s
}

// mosaicName is the name of the mosaic of a slice whose OME-TIFF would be
// tifName: the same with .ome.zarr for -format ome-zarr.
func (m *mosaicFormat) mosaicName(tifName string) string {
	if m.zarr() {
		return strings.TrimSuffix(tifName, ".ome.tif") + ".ome.zarr"
	}
	return tifName
}

// stage adds the mosaic at path to outs, written by write into a
// temporary file or folder.
func (m *mosaicFormat) stage(outs *outfile.Batch, path string, write func(temp string) error) error {
	if m.zarr() {
		return outs.AddDir(path, write)
	}
	return outs.AddFile(path, write)
}

// zarr reports whether the mosaic is an OME-Zarr folder (NGFF 0.5 or 0.4).
func (m *mosaicFormat) zarr() bool { return mosaic.Kind(m.kind).Folder() }
