package tiled

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gohtgs/htgs/internal/infile"
)

// OME-Zarr v0.4 (NGFF) multiscale images, the layout napari and other
// Zarr readers expect: a Zarr v2 group whose .zattrs holds "multiscales"
// (axes y and x, one dataset per level with its scale), each level a Zarr
// v2 array "0", "1", ... of little-endian uint16 ("<u2"), uncompressed,
// C order, chunk keys separated by "/" as v0.4 requires (level/cy/cx).

// zarrArray is a level's .zarray (Zarr v2 array metadata).
type zarrArray struct {
	ZarrFormat int       `json:"zarr_format"`
	Shape      []int     `json:"shape"`
	Chunks     []int     `json:"chunks"`
	Dtype      string    `json:"dtype"`
	Compressor any       `json:"compressor"`
	FillValue  int       `json:"fill_value"`
	Order      string    `json:"order"`
	Filters    any       `json:"filters"`
	DimSep     string    `json:"dimension_separator"`
	_          [0]func() // not comparable
}

type zarrAxis struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type zarrTransform struct {
	Type  string    `json:"type"`
	Scale []float64 `json:"scale"`
}

type zarrDataset struct {
	Path       string          `json:"path"`
	Transforms []zarrTransform `json:"coordinateTransformations"`
}

type zarrMultiscale struct {
	Version  string        `json:"version"`
	Name     string        `json:"name,omitempty"`
	Axes     []zarrAxis    `json:"axes"`
	Datasets []zarrDataset `json:"datasets"`
	Type     string        `json:"type,omitempty"`
}

type zarrAttrs struct {
	Multiscales []zarrMultiscale `json:"multiscales"`
}

// WriteOMEZarr writes im to the folder dir (created; it must not exist)
// as an OME-Zarr v0.4 multiscale image of levels levels (levels <= 0: down
// to one chunk, see Levels), chunked as im's tiles, uncompressed. Reduced
// levels are 2x2 means built as for WriteBigTIFF, in temporary tiled
// images in tmpDir with caches of budget bytes. Edge chunks are stored
// whole, padded with zeros, as Zarr v2 stores them.
func WriteOMEZarr(dir, name string, im *Image, levels int, tmpDir string, budget int64) (err error) {
	if levels <= 0 {
		levels = Levels(im.W, im.H, im.TW, im.TH)
	}
	if err := im.Flush(); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	ms := zarrMultiscale{Version: "0.4", Name: name, Type: "mean",
		Axes: []zarrAxis{{"y", "space"}, {"x", "space"}}}
	buf := make([]uint16, im.TW*im.TH)
	raw := make([]byte, 2*im.TW*im.TH)
	err = eachLevel(im, levels, tmpDir, budget, func(l int, level *Image) error {
		path := strconv.Itoa(l)
		s := float64(int(1) << l)
		ms.Datasets = append(ms.Datasets, zarrDataset{Path: path, Transforms: []zarrTransform{{Type: "scale", Scale: []float64{s, s}}}})
		arr := zarrArray{ZarrFormat: 2, Shape: []int{level.H, level.W}, Chunks: []int{level.TH, level.TW},
			Dtype: "<u2", FillValue: 0, Order: "C", DimSep: "/"}
		if err := writeJSON(filepath.Join(dir, path, ".zarray"), arr); err != nil {
			return err
		}
		for _, c := range level.Tiles() {
			if err := level.ReadTile(c, buf); err != nil {
				return err
			}
			_, _, cw, ch := level.Rect(c)
			for y := range level.TH {
				row := buf[y*level.TW : (y+1)*level.TW]
				if y >= ch {
					clear(row)
				} else {
					clear(row[cw:])
				}
			}
			for i, v := range buf {
				binary.LittleEndian.PutUint16(raw[2*i:], v)
			}
			p := filepath.Join(dir, path, strconv.Itoa(c.Y), strconv.Itoa(c.X))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, raw, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, ".zgroup"), map[string]int{"zarr_format": 2}); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, ".zattrs"), zarrAttrs{Multiscales: []zarrMultiscale{ms}})
}

// eachLevel calls f with im (level 0) and each of its levels-1 successive
// 2x2 reductions, each built from the one before in a temporary image
// (closed once the next is built).
func eachLevel(im *Image, levels int, tmpDir string, budget int64, f func(l int, level *Image) error) error {
	level := im
	for l := 0; l < levels; l++ {
		if l > 0 {
			next, err := Downsample(level, tmpDir, budget)
			if level != im {
				level.Close()
			}
			if err != nil {
				return err
			}
			level = next
		}
		if err := f(l, level); err != nil {
			if level != im {
				level.Close()
			}
			return err
		}
	}
	if level != im {
		return level.Close()
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ZarrLevel is one level of an OME-Zarr image read by OpenOMEZarr.
type ZarrLevel struct {
	Path         string  // the array's folder, relative to the image
	W, H, TW, TH int     // size and chunk size
	Scale        float64 // the dataset's scale on x and y

	v3          bool        // NGFF 0.5 (Zarr v3): chunks at c/0/cy/cx
	compression Compression // v3: the chunks' codec
}

// OMEZarr is an open OME-Zarr multiscale image of 16-bit pixels: NGFF 0.4
// (Zarr v2, as WriteOMEZarr writes it) or 0.5 (Zarr v3, as CreateOMEZarr
// writes it).
type OMEZarr struct {
	Dir    string
	Levels []ZarrLevel
}

// ErrZarr is wrapped by every error about metadata this package does not
// read as a 2-D, uint16, uncompressed OME-Zarr v0.4 multiscale image.
var ErrZarr = errors.New("tiled: not a supported OME-Zarr image")

func zarrErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrZarr}, a...)...)
}

// maxZarrChunk bounds a chunk's pixels, so a crafted .zarray cannot make
// ReadChunk allocate without limit.
const maxZarrChunk = 1 << 26

// ParseMultiscales checks an OME-Zarr .zattrs and returns its first
// multiscale: version 0.4, axes y and x of type space, at least one
// dataset, each with one positive scale transform.
func ParseMultiscales(b []byte) (paths []string, scales [][2]float64, err error) {
	var a zarrAttrs
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, nil, zarrErr(".zattrs: %v", err)
	}
	if len(a.Multiscales) == 0 {
		return nil, nil, zarrErr(".zattrs has no multiscales")
	}
	m := a.Multiscales[0]
	if m.Version != "0.4" {
		return nil, nil, zarrErr("multiscales version %q, want 0.4", m.Version)
	}
	if len(m.Axes) != 2 || m.Axes[0] != (zarrAxis{"y", "space"}) || m.Axes[1] != (zarrAxis{"x", "space"}) {
		return nil, nil, zarrErr("axes %v, want y and x of type space", m.Axes)
	}
	if len(m.Datasets) == 0 || len(m.Datasets) > 64 {
		return nil, nil, zarrErr("%d datasets", len(m.Datasets))
	}
	for _, d := range m.Datasets {
		if d.Path == "" || !filepath.IsLocal(d.Path) {
			return nil, nil, zarrErr("dataset path %q", d.Path)
		}
		if len(d.Transforms) != 1 || d.Transforms[0].Type != "scale" || len(d.Transforms[0].Scale) != 2 ||
			!(d.Transforms[0].Scale[0] > 0) || !(d.Transforms[0].Scale[1] > 0) {
			return nil, nil, zarrErr("dataset %q: want one positive 2-D scale transform, have %v", d.Path, d.Transforms)
		}
		paths = append(paths, d.Path)
		scales = append(scales, [2]float64(d.Transforms[0].Scale))
	}
	return paths, scales, nil
}

// ParseZarrArray checks a .zarray as WriteOMEZarr writes it (Zarr v2,
// 2-D, "<u2", no compressor or filters, C order, "/" chunk keys) and
// returns the array's width, height and chunk size.
func ParseZarrArray(b []byte) (w, h, tw, th int, err error) {
	var a struct {
		ZarrFormat int             `json:"zarr_format"`
		Shape      []int           `json:"shape"`
		Chunks     []int           `json:"chunks"`
		Dtype      string          `json:"dtype"`
		Compressor json.RawMessage `json:"compressor"`
		Order      string          `json:"order"`
		Filters    json.RawMessage `json:"filters"`
		DimSep     string          `json:"dimension_separator"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return 0, 0, 0, 0, zarrErr(".zarray: %v", err)
	}
	null := func(r json.RawMessage) bool { return len(r) == 0 || string(r) == "null" }
	switch {
	case a.ZarrFormat != 2:
		err = zarrErr("zarr_format %d", a.ZarrFormat)
	case len(a.Shape) != 2 || len(a.Chunks) != 2:
		err = zarrErr("shape %v, chunks %v: want 2-D", a.Shape, a.Chunks)
	case a.Dtype != "<u2":
		err = zarrErr("dtype %q, want <u2", a.Dtype)
	case !null(a.Compressor) || !null(a.Filters):
		err = zarrErr("compressed or filtered chunks")
	case a.Order != "C":
		err = zarrErr("order %q", a.Order)
	case a.DimSep != "/":
		err = zarrErr("dimension_separator %q, OME-Zarr 0.4 wants /", a.DimSep)
	case a.Shape[0] <= 0 || a.Shape[1] <= 0 || a.Chunks[0] <= 0 || a.Chunks[1] <= 0:
		err = zarrErr("shape %v, chunks %v", a.Shape, a.Chunks)
	case a.Chunks[0] > maxZarrChunk/a.Chunks[1]:
		err = zarrErr("chunks %v too large", a.Chunks)
	}
	if err != nil {
		return 0, 0, 0, 0, err
	}
	return a.Shape[1], a.Shape[0], a.Chunks[1], a.Chunks[0], nil
}

// OpenOMEZarr reads the metadata of the OME-Zarr image in dir: NGFF 0.5
// when dir holds a zarr.json (see ParseNGFF05), else 0.4.
func OpenOMEZarr(dir string) (*OMEZarr, error) {
	if b, err := os.ReadFile(filepath.Join(dir, "zarr.json")); err == nil {
		return openNGFF05(dir, b)
	}
	b, err := os.ReadFile(filepath.Join(dir, ".zattrs"))
	if err != nil {
		return nil, err
	}
	paths, scales, err := ParseMultiscales(b)
	if err != nil {
		return nil, err
	}
	z := &OMEZarr{Dir: dir}
	for i, p := range paths {
		b, err := os.ReadFile(filepath.Join(dir, p, ".zarray"))
		if err != nil {
			return nil, err
		}
		w, h, tw, th, err := ParseZarrArray(b)
		if err != nil {
			return nil, fmt.Errorf("level %q: %w", p, err)
		}
		z.Levels = append(z.Levels, ZarrLevel{Path: p, W: w, H: h, TW: tw, TH: th, Scale: scales[i][1]})
	}
	return z, nil
}

// ReadChunk reads chunk (cx, cy) of level l: TW*TH values, row stride
// TW, padding included. A missing chunk file reads as the fill value 0.
func (z *OMEZarr) ReadChunk(l, cx, cy int) ([]uint16, error) {
	if l < 0 || l >= len(z.Levels) {
		return nil, fmt.Errorf("tiled: no level %d", l)
	}
	lv := z.Levels[l]
	if cx < 0 || cy < 0 || cx >= (lv.W-1)/lv.TW+1 || cy >= (lv.H-1)/lv.TH+1 { // W, H >= 1; no overflow
		return nil, fmt.Errorf("tiled: chunk (%d, %d) outside level %d", cx, cy, l)
	}
	px := make([]uint16, lv.TW*lv.TH)
	if lv.v3 {
		return z.readChunkV3(l, cx, cy, px)
	}
	f, err := infile.Open(filepath.Join(z.Dir, lv.Path, strconv.Itoa(cy), strconv.Itoa(cx)))
	if errors.Is(err, os.ErrNotExist) {
		return px, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The size is checked before reading: a chunk file of any size was
	// read whole first.
	if fi, err := f.Stat(); err != nil || fi.Size() != 2*int64(len(px)) {
		return nil, zarrErr("chunk %d/%d/%d is not a file of %d bytes (%v)", l, cy, cx, 2*len(px), err)
	}
	b := make([]byte, 2*len(px))
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("tiled: chunk %d/%d/%d: %w", l, cy, cx, err)
	}
	for i := range px {
		px[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return px, nil
}

// readChunkV3 reads chunk (cx, cy) of the v3 level l into px.
func (z *OMEZarr) readChunkV3(l, cx, cy int, px []uint16) ([]uint16, error) {
	lv := z.Levels[l]
	f, err := infile.Open(filepath.Join(z.Dir, lv.Path, "c", "0", strconv.Itoa(cy), strconv.Itoa(cx)))
	if errors.Is(err, os.ErrNotExist) {
		return px, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n := 2 * len(px)
	// A compressed chunk is at most a little larger than its pixels.
	data, err := io.ReadAll(io.LimitReader(f, int64(n)+1<<16))
	if err != nil {
		return nil, fmt.Errorf("tiled: chunk %d/c/0/%d/%d: %w", l, cy, cx, err)
	}
	raw, err := decodeChunk(lv.compression, data, n)
	if err != nil {
		return nil, zarrErr("chunk %d/c/0/%d/%d: %v", l, cy, cx, err)
	}
	if len(raw) != n {
		return nil, zarrErr("chunk %d/c/0/%d/%d holds %d bytes, want %d", l, cy, cx, len(raw), n)
	}
	for i := range px {
		px[i] = binary.LittleEndian.Uint16(raw[2*i:])
	}
	return px, nil
}
