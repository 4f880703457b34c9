// Package mosaic composes the mosaic of a stitched grid and writes it as a
// tiled pyramidal OME-TIFF (a BigTIFF) or an OME-Zarr folder, with an 8-bit
// preview, within a memory budget: the last step of a stitching run, after
// the positions are known (package stitching).
//
// A run plans the mosaic first (NewPlan): a mosaic that fits in the
// budget and is at most two bands tall is composed in memory, one channel
// at a time; any other is composed out of core, band by band, and streamed
// into the file as the bands are composed. Both paths write the same file,
// byte for byte. The plan says what each path needs, so that a program can
// refuse a run before any work (Plan.Need) and say which path it takes.
// Write then composes the channels (package compose blends them) and
// writes the file and returns the preview.
//
// LivePreview draws the preview of a mosaic that is still filling in, from
// the provisional positions of a live stitch (stitching.StitchLive).
package mosaic

import (
	"context"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/compose"
	"github.com/gohtgs/htgs/stitching/tileio"
	"github.com/gohtgs/htgs/tiled"
)

// Kind is the kind of file a mosaic is written as.
type Kind string

// The kinds of mosaic file.
const (
	// OMETIFF is one tiled pyramidal OME-TIFF file (a BigTIFF); the zero
	// Kind is OMETIFF too.
	OMETIFF Kind = "ome-tiff"
	// OMEZarr is an OME-Zarr NGFF 0.5 (Zarr v3) folder.
	OMEZarr Kind = "ome-zarr"
	// OMEZarr04 is an OME-Zarr NGFF 0.4 (Zarr v2) folder, for readers
	// that do not read Zarr v3 yet: its chunks are uncompressed, and it
	// is built from a temporary tiled image, composed out of core whatever
	// the mosaic's size.
	OMEZarr04 Kind = "ome-zarr-0.4"
)

// Folder reports whether a mosaic of kind k is a folder (OME-Zarr) rather
// than a file.
func (k Kind) Folder() bool { return k == OMEZarr || k == OMEZarr04 }

// DefaultTileSize is the default tile side of the mosaic file: the TIFF
// tile side most OME-TIFF writers (Bio-Formats' bfconvert, QuPath,
// tifffile users) use.
const DefaultTileSize = 512

// PreviewSide is the longer side of a mosaic's preview.
const PreviewSide = 2000

// Format is how the mosaic file is written.
type Format struct {
	Kind Kind
	// TileSize is the side of the file's tiles (OME-Zarr: chunks), a
	// multiple of 16 (0: DefaultTileSize); the reduced levels go down to
	// one tile.
	TileSize int
	// Compression of the tiles (0: none; OMEZarr04: none only).
	Compression tiled.Compression
	// PixelSizeX and PixelSizeY are the physical size of a pixel in
	// PixelSizeUnit, written into the OME-XML (0: unknown, not written).
	PixelSizeX, PixelSizeY float64
	// PixelSizeUnit is an OME-XML length unit symbol (see
	// tiled.LengthUnit); "" is µm.
	PixelSizeUnit string
	// Channels are the names of the mosaic's channels, in the order of
	// Write's channels (none: one channel without a name). OME-Zarr
	// holds one channel.
	Channels []string
}

// tileSize is f.TileSize or its default.
func (f *Format) tileSize() int {
	if f.TileSize > 0 {
		return f.TileSize
	}
	return DefaultTileSize
}

// omeOptions are the OME-TIFF options of a mosaic named name.
func (f *Format) omeOptions(name string) tiled.OMETIFFOptions {
	return tiled.OMETIFFOptions{
		TileW: f.tileSize(), TileH: f.tileSize(),
		Compression:   f.Compression,
		PhysicalSizeX: f.PixelSizeX, PhysicalSizeY: f.PixelSizeY, PhysicalSizeUnit: f.PixelSizeUnit,
		Name:     name,
		Channels: f.Channels,
	}
}

// create starts the mosaic's stream at path: an OME-TIFF file or an
// OME-Zarr folder.
func (f *Format) create(path string, w, h int, name string) (*tiled.BigTIFFStream, error) {
	if f.Kind == OMEZarr {
		return tiled.CreateOMEZarr(path, w, h, f.omeOptions(name))
	}
	return tiled.CreateOMETIFF(path, w, h, f.omeOptions(name))
}

// stream writes the mosaic of nch channels at path: it starts the file
// (or folder), has write fill channel ch's rows, one channel after the
// other, and closes it. On an error the partial file is removed and the
// error returned.
func (f *Format) stream(path string, w, h int, name string, nch int, write func(ch int, out *tiled.BigTIFFStream) error) error {
	out, err := f.create(path, w, h, name)
	if err != nil {
		return err
	}
	for ch := range nch {
		if ch > 0 {
			err = out.NextChannel()
		}
		if err == nil {
			err = write(ch, out)
		}
		if err != nil {
			_ = out.Close() // the writing error is the one to report
			return err
		}
	}
	return out.Close()
}

// Channel is one channel of a mosaic: its tiles and their illumination
// correction.
type Channel struct {
	// Tiles are the channel's tiles, slot i being tile (i / Cols, i %
	// Cols); Load must be safe for concurrent use.
	Tiles tileio.TileSource
	// FlatField corrects the tiles (nil or the identity: no correction).
	FlatField *align.FlatField
	// EstimateFlatField has the correction estimated from the channel's
	// own tiles when it is composed (stitching.EstimateFlatField), in
	// place of FlatField.
	EstimateFlatField bool
}

// Options are how a mosaic is composed and written.
type Options struct {
	Format Format
	Blend  compose.Blend
	// Workers is how many tiles are loaded (decoded and corrected) at
	// once, ahead of the composing (0: 1).
	Workers int
	// Memory is the budget in bytes that NewPlan plans within (0:
	// DefaultMemory of an unknown amount, 1 GiB).
	Memory int64
	// Progress, when set, is called as each tile is taken into the
	// mosaic: done of total tiles (all channels), from one goroutine.
	Progress func(done, total int)
}

func (o *Options) workers() int { return max(o.Workers, 1) }

func (o *Options) memory() int64 {
	if o.Memory > 0 {
		return o.Memory
	}
	return DefaultMemory(0)
}

// DefaultMemory is a mosaic's default memory budget on a machine with
// avail bytes available: a quarter of it, or 1 GiB when avail is unknown
// (0 or less).
func DefaultMemory(avail int64) int64 {
	if avail <= 0 {
		return 1 << 30
	}
	return max(avail/4, 1)
}

// Slots places tiles of w x h pixels at the global positions pos (in the
// order of pos, row-major for a stitching.Result's).
func Slots(pos []tileio.GlobalPosition, w, h int) []compose.Slot {
	slots := make([]compose.Slot, len(pos))
	for i, p := range pos {
		slots[i] = compose.Slot{X: p.X, Y: p.Y, Width: w, Height: h}
	}
	return slots
}

// GridSlots places the tiles of a rows x cols grid of w x h tiles on a
// regular grid with the given overlap fraction (0 to 1), row-major: the
// nominal layout, for planning before the positions are known.
func GridSlots(rows, cols, w, h int, overlap float64) []compose.Slot {
	sx := max(1, int(math.Round(float64(w)*(1-overlap))))
	sy := max(1, int(math.Round(float64(h)*(1-overlap))))
	slots := make([]compose.Slot, 0, rows*cols)
	for r := range rows {
		for c := range cols {
			slots = append(slots, compose.Slot{X: c * sx, Y: r * sy, Width: w, Height: h})
		}
	}
	return slots
}

// Write composes the mosaic of chans at slots as plan says (see NewPlan;
// planned with the same opt) and writes it at path, a file (OMETIFF) or a
// folder (OMEZarr, OMEZarr04) that it creates; name is the image's name
// in the file's metadata. It returns the mosaic's 8-bit preview, whose
// longer side is PreviewSide at most: of the first channel, made from the
// mosaic in memory or from a level of the file's pyramid. Every channel's
// tiles are loaded ahead of the composing, opt.Workers at a time, and
// corrected with its flat field.
//
// OMEZarr04 is composed into a temporary tiled image in a folder beside
// path, removed before Write returns. An OME-Zarr holds one channel.
//
// Out of core, the heap may grow to about twice what is live unless the
// program sets a soft memory limit (debug.SetMemoryLimit) of opt.Memory
// around the call.
func Write(ctx context.Context, path, name string, slots []compose.Slot, chans []Channel, plan Plan, opt Options) (*image.Gray, error) {
	if len(chans) == 0 || (opt.Format.Kind.Folder() && len(chans) > 1) {
		return nil, fmt.Errorf("mosaic: %d channels for a %s (want at least one, and one for OME-Zarr)", len(chans), opt.Format.Kind)
	}
	w := &writer{ctx: ctx, path: path, name: name, slots: slots, chans: chans, plan: plan, opt: opt}
	switch {
	case opt.Format.Kind == OMEZarr04:
		return w.zarr04()
	case plan.OutOfCore:
		return w.streamed()
	default:
		return w.inMemory()
	}
}

// writer is one Write.
type writer struct {
	ctx        context.Context
	path, name string
	slots      []compose.Slot
	chans      []Channel
	plan       Plan
	opt        Options
	loaded     int // tiles taken into the mosaic, for Progress
}

// channel returns the loader of channel ch's tiles: decoded and corrected
// ahead of the sweep, opt.Workers at a time, progress counted as the
// sweep takes them; stop ends its prefetching.
func (w *writer) channel(ch int) (load func(int) (*image.Gray16, error), stop func(), err error) {
	src, ff := w.chans[ch].Tiles, w.chans[ch].FlatField
	if w.chans[ch].EstimateFlatField {
		if ff, err = stitching.EstimateFlatField(w.ctx, src); err != nil {
			return nil, nil, err
		}
	}
	cols := src.Cols()
	fetch, stop := compose.Prefetch(w.ctx, w.slots, func(i int) (*image.Gray16, error) {
		t, err := src.Load(i/cols, i%cols)
		if err != nil {
			return nil, err
		}
		if ff != nil && !ff.Identity() {
			t = ff.Apply(t) // the same illumination correction the registration used
		}
		return t, nil
	}, w.opt.workers())
	total := len(w.slots) * len(w.chans)
	return func(i int) (*image.Gray16, error) {
		t, err := fetch(i)
		if err != nil {
			return nil, err
		}
		w.loaded++
		if w.opt.Progress != nil {
			w.opt.Progress(w.loaded, total)
		}
		return t, nil
	}, stop, nil
}

// inMemory composes each channel in memory, then streams it through the
// same writer as the out-of-core path's bands: the same file, byte for
// byte.
func (w *writer) inMemory() (*image.Gray, error) {
	var preview *image.Gray
	err := w.opt.Format.stream(w.path, w.plan.Width, w.plan.Height, w.name, len(w.chans), func(ch int, out *tiled.BigTIFFStream) error {
		load, stop, err := w.channel(ch)
		if err != nil {
			return err
		}
		mosaic, err := compose.ComposeFunc(w.ctx, w.slots, load, w.opt.Blend)
		stop()
		if err != nil {
			return fmt.Errorf("composing the mosaic: %w", err)
		}
		if err := out.WriteRowsBE(0, w.plan.Height, mosaic.Pix, mosaic.Stride); err != nil {
			return fmt.Errorf("writing the mosaic: %w", err)
		}
		if ch == 0 {
			preview = compose.Preview(mosaic, PreviewSide)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return preview, nil
}

// streamed composes the mosaic band by band (ComposeBigTIFF) straight
// into its tiled pyramidal file (only two bands and the reduced levels'
// pending rows are in memory), and the preview from a pyramid level: the
// stream keeps a copy of that level as it writes it (when it is a reduced
// one), so the preview does not read the file back.
func (w *writer) streamed() (*image.Gray, error) {
	level := previewLevel(w.plan.Width, w.plan.Height, w.opt.Format.tileSize())
	var kept *image.Gray16
	if err := w.opt.Format.stream(w.path, w.plan.Width, w.plan.Height, w.name, len(w.chans), func(ch int, out *tiled.BigTIFFStream) error {
		if ch == 0 && level > 0 {
			if err := out.KeepLevel(level); err != nil {
				return err
			}
		}
		load, stop, err := w.channel(ch)
		if err != nil {
			return err
		}
		defer stop()
		if err := compose.ComposeBigTIFF(w.ctx, w.slots, load, w.opt.Blend, out); err != nil {
			return fmt.Errorf("composing the mosaic: %w", err)
		}
		if ch == 0 && level > 0 {
			kept = keptLevel(out)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := w.ctx.Err(); err != nil {
		return nil, err
	}
	if kept != nil {
		return compose.Preview(kept, PreviewSide), nil
	}
	return filePreview(w.path, w.opt.Format.Kind)
}

// previewLevel is the pyramid level of a w x h mosaic in tile x tile
// tiles that its preview is made from: the smallest whose longer side is
// still at least PreviewSide (0, the full resolution, when the mosaic is
// smaller), as filePreview chooses it among the file's levels.
func previewLevel(w, h, tile int) int {
	l := 0
	for n := tiled.Levels(w, h, tile, tile); l+1 < n; l++ {
		w, h = (w+1)/2, (h+1)/2
		if max(w, h) < PreviewSide {
			break
		}
	}
	return l
}

// keptLevel is the level out kept (KeepLevel), complete, as an image.
func keptLevel(out *tiled.BigTIFFStream) *image.Gray16 {
	px, lw, lh := out.Kept()
	if px == nil {
		return nil
	}
	img := image.NewGray16(image.Rect(0, 0, lw, lh))
	for i, v := range px {
		img.Pix[2*i], img.Pix[2*i+1] = byte(v>>8), byte(v)
	}
	return img
}

// zarr04 composes the (one-channel) mosaic band by band into a temporary
// tiled image in a folder beside path (removed on return), writes it as
// an OME-Zarr NGFF 0.4 folder at path (NGFF 0.4's writer builds its
// levels from a tiled image), and the preview from one of its levels.
func (w *writer) zarr04() (*image.Gray, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(w.path), ".stitch-mosaic-")
	if err != nil {
		return nil, fmt.Errorf("mosaic: %w", err)
	}
	defer os.RemoveAll(tmp)
	tile := w.opt.Format.tileSize()
	cache := max(w.plan.Cache/2, int64(8*tile*tile))
	im, err := tiled.CreateTemp(tmp, w.plan.Width, w.plan.Height, tile, tile, cache)
	if err != nil {
		return nil, fmt.Errorf("mosaic: %w", err)
	}
	defer im.Close()
	load, stop, err := w.channel(0)
	if err != nil {
		return nil, err
	}
	err = compose.ComposeTiled(w.ctx, w.slots, load, w.opt.Blend, im)
	stop()
	if err != nil {
		return nil, fmt.Errorf("composing the mosaic: %w", err)
	}
	if err := tiled.WriteOMEZarr(w.path, w.name, im, 0, tmp, cache); err != nil {
		return nil, err
	}
	return filePreview(w.path, OMEZarr04)
}

// EncodePreview writes a preview as PNG without compression: the
// preview is a quick look beside a mosaic hundreds of times larger, and
// PNG's filtering and deflate took about 0.17 s of every stitch's end for
// a 2000 px preview (a third more bytes than compressed, 2 ms to write).
func EncodePreview(w io.Writer, img image.Image) error {
	return (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(w, img)
}

// filePreview makes the preview from the smallest pyramid level of the
// mosaic at path (an OME-TIFF, or an OME-Zarr folder) whose longer side
// is still at least PreviewSide (the full resolution when the mosaic is
// smaller).
func filePreview(path string, kind Kind) (*image.Gray, error) {
	prev, err := readPreview(path, kind)
	if err != nil {
		return nil, fmt.Errorf("mosaic preview: %w", err)
	}
	return prev, nil
}

func readPreview(path string, kind Kind) (*image.Gray, error) {
	type level struct{ w, h, tw, th int }
	var (
		levels []level
		read   func(l, tx, ty int, dst []uint16) error
	)
	if kind.Folder() {
		z, err := tiled.OpenOMEZarr(path)
		if err != nil {
			return nil, err
		}
		for _, lv := range z.Levels {
			levels = append(levels, level{lv.W, lv.H, lv.TW, lv.TH})
		}
		read = func(l, tx, ty int, dst []uint16) error {
			px, err := z.ReadChunk(l, tx, ty)
			copy(dst, px)
			return err
		}
	} else {
		t, err := tiled.OpenBigTIFF(path)
		if err != nil {
			return nil, err
		}
		defer t.Close()
		for _, lv := range t.Levels {
			levels = append(levels, level{lv.W, lv.H, lv.TW, lv.TH})
		}
		read = func(l, tx, ty int, dst []uint16) error { return t.ReadTile(l, tiled.Coord{X: tx, Y: ty}, dst) }
	}
	l := 0
	for i, lv := range levels {
		if max(lv.w, lv.h) >= PreviewSide {
			l = i
		}
	}
	lv := levels[l]
	img := image.NewGray16(image.Rect(0, 0, lv.w, lv.h))
	buf := make([]uint16, lv.tw*lv.th)
	for ty := 0; ty*lv.th < lv.h; ty++ {
		for tx := 0; tx*lv.tw < lv.w; tx++ {
			if err := read(l, tx, ty, buf); err != nil {
				return nil, err
			}
			for y := ty * lv.th; y < min(lv.h, (ty+1)*lv.th); y++ {
				for x := tx * lv.tw; x < min(lv.w, (tx+1)*lv.tw); x++ {
					v := buf[(y-ty*lv.th)*lv.tw+x-tx*lv.tw]
					img.Pix[y*img.Stride+2*x], img.Pix[y*img.Stride+2*x+1] = byte(v>>8), byte(v)
				}
			}
		}
	}
	return compose.Preview(img, PreviewSide), nil
}
