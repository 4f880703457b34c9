package tileio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/image/tiff"

	"github.com/gohtgs/htgs/internal/infile"
)

// TileSource gives access to the tiles of a grid. Implementations must be
// safe for concurrent use (a task graph loads tiles from several
// goroutines) and every tile must have the size returned by TileSize.
type TileSource interface {
	// Rows and Cols are the grid dimensions.
	Rows() int
	Cols() int
	// TileSize is the common width and height of all tiles.
	TileSize() (w, h int)
	// Name is the name of tile (row, col) as written to output files.
	Name(row, col int) string
	// Load returns the pixels of tile (row, col). The caller must not
	// modify them (sources may share them between calls).
	Load(row, col int) (*image.Gray16, error)
}

type fileFormat int

const (
	formatUnknown fileFormat = iota
	formatTIFF
	formatPNG
)

func sniff(head []byte) fileFormat {
	switch {
	case bytes.HasPrefix(head, []byte("II*\x00")), bytes.HasPrefix(head, []byte("MM\x00*")):
		return formatTIFF
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return formatPNG
	}
	return formatUnknown
}

// DefaultMaxTilePixels is the largest tile, in pixels, that [LoadTile],
// [DecodeTile] and [OpenTileSet] accept: 2^28 pixels (16384 x 16384), 512
// MiB of 16-bit pixels and about 2 GiB for the spectrum that registration
// keeps per tile. A file whose header claims more is refused before any
// pixel memory is allocated, so a corrupt or hostile header (a 234-byte TIFF
// claiming 60000 x 60000 pixels) gives an error instead of an out-of-memory
// crash. [LoadTileLimit], [DecodeTileLimit] and [OpenTileSetLimit] take
// another limit.
const DefaultMaxTilePixels = 1 << 28

// ErrTileTooLarge is wrapped by the errors for tiles whose header claims
// more pixels than the limit (see [DefaultMaxTilePixels]).
var ErrTileTooLarge = errors.New("tile too large")

// checkTileConfig refuses what the header of a tile announces before its
// pixels are decoded: pixel types other than 8- or 16-bit grayscale, and
// more than maxPixels pixels (0: DefaultMaxTilePixels, negative: no limit).
func checkTileConfig(cfg image.Config, maxPixels int64) error {
	if cfg.ColorModel != color.GrayModel && cfg.ColorModel != color.Gray16Model {
		return fmt.Errorf("unsupported pixel type %s (want 8- or 16-bit grayscale)", pixelType(cfg.ColorModel))
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return fmt.Errorf("corrupt or unreadable image: header gives an empty %d x %d image", cfg.Width, cfg.Height)
	}
	if maxPixels == 0 {
		maxPixels = DefaultMaxTilePixels
	}
	if maxPixels > 0 && int64(cfg.Width) > maxPixels/int64(cfg.Height) {
		return fmt.Errorf("%w: the header gives %d x %d pixels (%.3g), above the limit of %d pixels per tile",
			ErrTileTooLarge, cfg.Width, cfg.Height, float64(cfg.Width)*float64(cfg.Height), maxPixels)
	}
	return nil
}

// LoadTile reads a grayscale tile from a TIFF or PNG file (the format is
// detected from the file contents, not the extension).
//
// 16-bit grayscale images are returned as they are. 8-bit grayscale images
// are converted to 16 bits by value, not scaled: an 8-bit pixel 200 becomes
// the 16-bit pixel 200 (not 200*257), so that 8- and 16-bit versions of the
// same acquisition give the same numbers. Colour, paletted and other pixel
// types are rejected rather than converted: microscopy tiles are expected
// to be single-channel and a silent conversion would hide a wrong input.
// The header is checked before the pixels are decoded: images above
// [DefaultMaxTilePixels] are refused with [ErrTileTooLarge]. Errors name
// the file; a corrupt file gives an error, never a panic.
func LoadTile(path string) (*image.Gray16, error) {
	return LoadTileLimit(path, 0)
}

// LoadTileLimit is [LoadTile] with a limit of maxPixels pixels per tile
// instead of [DefaultMaxTilePixels] (0 means the default, negative no
// limit). A path that is not a regular file (a directory, a named pipe, a
// device) is refused at once, naming what it is.
func LoadTileLimit(path string, maxPixels int64) (*image.Gray16, error) {
	data, err := infile.ReadFile(path) // one read, sized from Stat
	if err != nil {
		return nil, fmt.Errorf("tileio: load tile: %w", err)
	}
	img, err := decodeTileBytes(data, maxPixels)
	if err != nil {
		return nil, fmt.Errorf("tileio: load tile %s: %w", path, err)
	}
	return img, nil
}

// DecodeTile decodes a TIFF or PNG grayscale image from r with the
// conversions and restrictions of [LoadTile].
func DecodeTile(r io.Reader) (*image.Gray16, error) {
	return DecodeTileLimit(r, 0)
}

// DecodeTileLimit is [DecodeTile] with a limit of maxPixels pixels per
// tile instead of [DefaultMaxTilePixels] (0 means the default, negative no
// limit).
func DecodeTileLimit(r io.Reader, maxPixels int64) (img *image.Gray16, err error) {
	defer func() {
		// The image decoders are not proven against every malformed
		// input; a corrupt file must give an error, not a crash.
		if p := recover(); p != nil {
			img, err = nil, fmt.Errorf("corrupt or unreadable image: decoder failed: %v", p)
		}
	}()
	br := bufio.NewReader(r)
	head, _ := br.Peek(8)
	var dec image.Image
	switch sniff(head) {
	case formatTIFF:
		// The TIFF decoder needs random access.
		data, rerr := io.ReadAll(br)
		if rerr != nil {
			return nil, rerr
		}
		if fast, ok, ferr := decodeFastTIFF(data, maxPixels); ok {
			return fast, ferr // see fasttiff.go
		}
		cfg, cerr := tiff.DecodeConfig(bytes.NewReader(data))
		if cerr != nil {
			return nil, configError(cerr)
		}
		if err := checkTileConfig(cfg, maxPixels); err != nil {
			return nil, err
		}
		dec, err = tiff.Decode(bytes.NewReader(data))
	case formatPNG:
		// Read the header, keeping its bytes to decode the whole file
		// after the check.
		var hdr bytes.Buffer
		cfg, cerr := png.DecodeConfig(io.TeeReader(br, &hdr))
		if cerr != nil {
			return nil, fmt.Errorf("corrupt or unreadable image: %w", cerr)
		}
		if err := checkTileConfig(cfg, maxPixels); err != nil {
			return nil, err
		}
		dec, err = png.Decode(io.MultiReader(&hdr, br))
	default:
		return nil, fmt.Errorf("unsupported or corrupt file: neither TIFF nor PNG")
	}
	if err != nil {
		return nil, fmt.Errorf("corrupt or unreadable image: %w", err)
	}
	return toGray16(dec)
}

func toGray16(img image.Image) (*image.Gray16, error) {
	b := img.Bounds()
	switch m := img.(type) {
	case *image.Gray16:
		if b.Min == (image.Point{}) {
			return m, nil
		}
		out := image.NewGray16(image.Rect(0, 0, b.Dx(), b.Dy()))
		for y := 0; y < b.Dy(); y++ {
			copy(out.Pix[y*out.Stride:y*out.Stride+2*b.Dx()], m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):])
		}
		return out, nil
	case *image.Gray:
		out := image.NewGray16(image.Rect(0, 0, b.Dx(), b.Dy()))
		for y := 0; y < b.Dy(); y++ {
			src := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			dst := out.Pix[y*out.Stride:]
			for x := 0; x < b.Dx(); x++ {
				dst[2*x] = 0
				dst[2*x+1] = src[x]
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported pixel type %s (want 8- or 16-bit grayscale)", pixelType(img.ColorModel()))
}

func pixelType(m color.Model) string {
	switch m {
	case color.RGBAModel, color.NRGBAModel:
		return "8-bit colour (RGB/RGBA)"
	case color.RGBA64Model, color.NRGBA64Model:
		return "16-bit colour (RGB/RGBA)"
	case color.CMYKModel:
		return "CMYK"
	case color.GrayModel:
		return "8-bit grayscale"
	case color.Gray16Model:
		return "16-bit grayscale"
	}
	if _, ok := m.(color.Palette); ok {
		return "paletted"
	}
	return "non-grayscale"
}

// decodeTileConfig returns the header of the image in the open file f (at
// path) without decoding its pixels, and rejects unsupported pixel types
// and sizes above maxPixels (see [checkTileConfig]). Errors name the file.
func decodeTileConfig(f *os.File, path string, maxPixels int64) (cfg image.Config, err error) {
	defer func() {
		if p := recover(); p != nil {
			cfg, err = image.Config{}, fmt.Errorf("%s: corrupt or unreadable image: decoder failed: %v", path, p)
		}
	}()
	br := bufio.NewReader(f)
	head, _ := br.Peek(8)
	switch sniff(head) {
	case formatTIFF:
		// The file itself, not br: given a plain reader the TIFF decoder
		// buffers everything up to the offsets the header claims, up to
		// 4 GiB for a 40-byte file.
		cfg, err = tiff.DecodeConfig(f)
	case formatPNG:
		cfg, err = png.DecodeConfig(br)
	default:
		return cfg, fmt.Errorf("%s: unsupported or corrupt file: neither TIFF nor PNG", path)
	}
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", path, configError(err))
	}
	if err := checkTileConfig(cfg, maxPixels); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// configError words a decoder's refusal of a header: the TIFF decoder's
// "unsupported feature: sample format" is a tile of floating-point or
// signed samples.
func configError(err error) error {
	var u tiff.UnsupportedError
	if errors.As(err, &u) && strings.Contains(string(u), "sample format") {
		return fmt.Errorf("unsupported pixel type: floating-point or signed samples (want 8- or 16-bit unsigned grayscale; convert the tiles first, for example with Fiji's Image > Type > 16-bit): %w", err)
	}
	return fmt.Errorf("corrupt or unreadable image: %w", err)
}

// TileSet is a grid of tile files in a directory named by a [Pattern]. It
// implements [TileSource]; use [OpenTileSet] to create one.
type TileSet struct {
	dir        string
	root       *os.Root    // OpenTileSetIn: tiles are opened inside it
	model      color.Model // the tiles' pixel type, one for the grid
	pattern    Pattern
	rows, cols int
	w, h       int
	maxPixels  int64
	files      sync.Pool // *[]byte: file buffers reused by Load
}

// OpenTileSet checks a rows x cols grid of tile files in dir named by
// pattern: every file must exist, be a regular file (or a link to one; a
// directory or a named pipe is refused at once) holding a readable TIFF or
// PNG of 8- or 16-bit grayscale pixels, and all tiles must have the same
// size and bit depth. Only the file
// headers are read; tiles above [DefaultMaxTilePixels] are refused with
// [ErrTileTooLarge]. The error names the first offending file.
func OpenTileSet(dir string, pattern Pattern, rows, cols int) (*TileSet, error) {
	return OpenTileSetLimit(dir, pattern, rows, cols, 0)
}

// OpenTileSetLimit is [OpenTileSet] with a limit of maxPixels pixels per
// tile instead of [DefaultMaxTilePixels] (0 means the default, negative no
// limit); the TileSet's Load applies the same limit.
func OpenTileSetLimit(dir string, pattern Pattern, rows, cols int, maxPixels int64) (*TileSet, error) {
	return openTileSet(&TileSet{dir: dir, pattern: pattern, rows: rows, cols: cols, maxPixels: maxPixels})
}

// OpenTileSetIn is [OpenTileSetLimit] for tiles inside root's folder: every
// tile is opened through root, so that no name, and no symbolic link, can
// lead to a file outside it (see [os.Root]; a link must be relative and
// stay inside). Use it where the grid comes from someone who may read only
// that folder, such as a worker's client. The caller keeps root open while
// the set is used, and closes it.
func OpenTileSetIn(root *os.Root, pattern Pattern, rows, cols int, maxPixels int64) (*TileSet, error) {
	return openTileSet(&TileSet{dir: root.Name(), root: root, pattern: pattern, rows: rows, cols: cols, maxPixels: maxPixels})
}

func openTileSet(ts *TileSet) (*TileSet, error) {
	rows, cols, maxPixels := ts.rows, ts.cols, ts.maxPixels
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("tileio: invalid grid size %dx%d", rows, cols)
	}
	if ts.root == nil {
		// A missing or wrong folder is one error, not its first tile's.
		if fi, err := os.Stat(ts.dir); err != nil {
			return nil, fmt.Errorf("tileio: tile folder: %w", err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("tileio: tile folder %s: not a folder", ts.dir)
		}
	}
	var first string
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			p := ts.Path(r, c)
			// The errors name the file (whose numbers are those of the
			// pattern), not 0-based grid coordinates beside it.
			f, err := ts.open(r, c)
			if err != nil {
				return nil, fmt.Errorf("tileio: tile %s: %w", ts.Name(r, c), err)
			}
			cfg, err := decodeTileConfig(f, p, maxPixels)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("tileio: tile %w", err)
			}
			w, h := cfg.Width, cfg.Height
			if first == "" {
				first, ts.w, ts.h, ts.model = p, w, h, cfg.ColorModel
				if w < 2 || h < 2 {
					return nil, fmt.Errorf("tileio: tile %s is %dx%d, too small to stitch", p, w, h)
				}
				continue
			}
			if w != ts.w || h != ts.h {
				return nil, fmt.Errorf("tileio: tile %s is %dx%d but %s is %dx%d; all tiles must have the same size", p, w, h, first, ts.w, ts.h)
			}
			if cfg.ColorModel != ts.model {
				// 8-bit tiles are read by value, not scaled: among
				// 16-bit ones they would enter the mosaic at about
				// 1/256 of their brightness.
				return nil, fmt.Errorf("tileio: tile %s is %s but %s is %s; all tiles of a grid must have one bit depth (convert them first)",
					p, pixelType(cfg.ColorModel), first, pixelType(ts.model))
			}
		}
	}
	return ts, nil
}

// open opens tile (row, col) for reading: a regular file (or a link to
// one) inside the set's folder, else an error saying what the path is.
func (ts *TileSet) open(row, col int) (*os.File, error) {
	name := ts.Name(row, col)
	if !filepath.IsLocal(name) {
		return nil, fmt.Errorf("%s: the name leaves the tile folder %s", name, ts.dir)
	}
	if ts.root != nil {
		return infile.OpenIn(ts.root, name)
	}
	return infile.Open(filepath.Join(ts.dir, name))
}

// Rows returns the number of grid rows.
func (ts *TileSet) Rows() int { return ts.rows }

// Cols returns the number of grid columns.
func (ts *TileSet) Cols() int { return ts.cols }

// TileSize returns the common tile width and height.
func (ts *TileSet) TileSize() (w, h int) { return ts.w, ts.h }

// Name returns the file name (without directory) of tile (row, col).
func (ts *TileSet) Name(row, col int) string { return ts.pattern.Name(row, col, ts.rows, ts.cols) }

// Path returns the path of tile (row, col).
func (ts *TileSet) Path(row, col int) string { return filepath.Join(ts.dir, ts.Name(row, col)) }

// Load reads tile (row, col) with [LoadTileLimit] (the limit the set was
// opened with) and checks its size.
//
// Each call returns a new image, which the caller owns. The file's bytes
// are read into a buffer the set reuses across calls (and goroutines), so
// that loading a grid allocates little more than its images.
func (ts *TileSet) Load(row, col int) (*image.Gray16, error) {
	p := ts.Path(row, col)
	img, err := ts.loadFile(row, col, p)
	if err != nil {
		return nil, err
	}
	if b := img.Bounds(); b.Dx() != ts.w || b.Dy() != ts.h {
		return nil, fmt.Errorf("tileio: tile %s is %dx%d, expected %dx%d", p, b.Dx(), b.Dy(), ts.w, ts.h)
	}
	return img, nil
}

// loadFile is LoadTileLimit of tile (row, col) at path, through ts.open,
// with a reused file buffer.
func (ts *TileSet) loadFile(row, col int, path string) (*image.Gray16, error) {
	f, err := ts.open(row, col)
	if err != nil {
		return nil, fmt.Errorf("tileio: load tile: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("tileio: load tile: %w", err)
	}
	if fi.Size() > maxTileFileBytes {
		// Too large a buffer to keep: read it once.
		data, err := io.ReadAll(f)
		if err != nil {
			return nil, fmt.Errorf("tileio: load tile %s: %w", path, err)
		}
		return ts.decode(data, path)
	}
	bp, _ := ts.files.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer ts.files.Put(bp)
	n := int(fi.Size())
	if cap(*bp) < n+1 {
		*bp = make([]byte, n+1)
	}
	// One byte more than the size: a file that grew since Stat is read
	// to its end rather than cut short.
	buf := (*bp)[:n+1]
	got, err := io.ReadFull(f, buf)
	if err == nil {
		rest, err := io.ReadAll(f)
		if err != nil {
			return nil, fmt.Errorf("tileio: load tile %s: %w", path, err)
		}
		return ts.decode(append(buf[:got:got], rest...), path)
	}
	if err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, fmt.Errorf("tileio: load tile %s: %w", path, err)
	}
	return ts.decode(buf[:got], path)
}

// decode decodes a tile file's bytes with the set's pixel limit.
func (ts *TileSet) decode(data []byte, path string) (*image.Gray16, error) {
	img, err := decodeTileBytes(data, ts.maxPixels)
	if err != nil {
		return nil, fmt.Errorf("tileio: load tile %s: %w", path, err)
	}
	return img, nil
}

// maxTileFileBytes bounds the file buffers TileSet.Load keeps for reuse.
const maxTileFileBytes = 1 << 30

// MemoryTiles is an in-memory [TileSource] (tests, synthetic grids).
type MemoryTiles struct {
	rows, cols int
	tiles      []*image.Gray16
	names      []string
}

// NewMemoryTiles wraps row-major tiles of a rows x cols grid. names may be
// nil, in which case tiles are named "tile_r{R}_c{C}" with 0-based numbers.
// All tiles must have the same size with bounds starting at (0, 0).
func NewMemoryTiles(rows, cols int, tiles []*image.Gray16, names []string) (*MemoryTiles, error) {
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("tileio: invalid grid size %dx%d", rows, cols)
	}
	if len(tiles) != rows*cols {
		return nil, fmt.Errorf("tileio: %d tiles for a %dx%d grid", len(tiles), rows, cols)
	}
	if names != nil && len(names) != len(tiles) {
		return nil, fmt.Errorf("tileio: %d names for %d tiles", len(names), len(tiles))
	}
	var b0 image.Rectangle
	for i, t := range tiles {
		if t == nil {
			return nil, fmt.Errorf("tileio: tile %d is nil", i)
		}
		b := t.Bounds()
		if b.Min != (image.Point{}) {
			return nil, fmt.Errorf("tileio: tile %d has bounds %v; want origin (0,0)", i, b)
		}
		if i == 0 {
			b0 = b
			if b.Dx() < 2 || b.Dy() < 2 {
				return nil, fmt.Errorf("tileio: tile 0 is %dx%d, too small to stitch", b.Dx(), b.Dy())
			}
		} else if b != b0 {
			return nil, fmt.Errorf("tileio: tile %d (row %d, col %d) is %dx%d but tile 0 is %dx%d", i, i/cols, i%cols, b.Dx(), b.Dy(), b0.Dx(), b0.Dy())
		}
	}
	if names == nil {
		names = make([]string, len(tiles))
		for i := range names {
			names[i] = fmt.Sprintf("tile_r%d_c%d", i/cols, i%cols)
		}
	}
	return &MemoryTiles{rows: rows, cols: cols, tiles: tiles, names: names}, nil
}

// Rows returns the number of grid rows.
func (m *MemoryTiles) Rows() int { return m.rows }

// Cols returns the number of grid columns.
func (m *MemoryTiles) Cols() int { return m.cols }

// TileSize returns the common tile width and height.
func (m *MemoryTiles) TileSize() (w, h int) {
	b := m.tiles[0].Bounds()
	return b.Dx(), b.Dy()
}

// Name returns the name of tile (row, col).
func (m *MemoryTiles) Name(row, col int) string { return m.names[row*m.cols+col] }

// Load returns tile (row, col) (shared, not copied).
func (m *MemoryTiles) Load(row, col int) (*image.Gray16, error) {
	if row < 0 || row >= m.rows || col < 0 || col >= m.cols {
		return nil, fmt.Errorf("tileio: tile (%d, %d) outside a %dx%d grid", row, col, m.rows, m.cols)
	}
	return m.tiles[row*m.cols+col], nil
}
