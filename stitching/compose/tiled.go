package compose

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"runtime"
	"sync"
	"time"

	"github.com/gohtgs/htgs/tiled"
)

// MosaicSize is the size of the mosaic holding slots.
func MosaicSize(slots []Slot) (w, h int, err error) {
	if len(slots) == 0 {
		return 0, 0, errors.New("compose: no tiles")
	}
	return mosaicSize(slots)
}

// ComposeTiled builds the mosaic like ComposeFunc, but out of core: the
// mosaic goes band by band into dst, a tiled image of the mosaic's size
// (see MosaicSize), so only one band of rows (a multiple of dst's tile
// height, at least 256 rows), the tiles that intersect it and dst's tile
// cache are in memory whatever the mosaic's size. The pixels equal
// ComposeFunc's.
func ComposeTiled(ctx context.Context, slots []Slot, load func(i int) (*image.Gray16, error), mode Blend, dst *tiled.Image) error {
	mw, _, err := checkOutput(slots, load, mode, "tiled output", dst.W, dst.H)
	if err != nil {
		return err
	}
	band := dst.TH * max(1, (bandHeight+dst.TH-1)/dst.TH)
	pix := make([]byte, 2*mw*band)
	vals := make([]uint16, mw*band)
	err = sweepBands(ctx, slots, load, mode, mw, dst.H, band, bandImage(pix, mw), func(y0, y1 int) error {
		return writeBand(dst, pix, vals, mw, y0, y1)
	})
	if err != nil {
		return err
	}
	return dst.Flush()
}

// ComposeBigTIFF builds the mosaic like ComposeTiled, but streams it into
// out, a BigTIFF of the mosaic's size (see MosaicSize): each band's rows
// of tiles go straight into the file and only its first reduced level
// passes through a temporary tiled image, so the full-resolution mosaic is
// never stored anywhere else. The bands are double-buffered: while out
// cuts and writes one band, the next is composed. Memory is two bands (a
// multiple of out's tile height, at least 256 rows each), the tiles
// meeting a band and the reduced levels' caches. The caller closes out;
// the file then equals WriteBigTIFF of ComposeTiled's image.
func ComposeBigTIFF(ctx context.Context, slots []Slot, load func(i int) (*image.Gray16, error), mode Blend, out *tiled.BigTIFFStream) error {
	_, err := ComposeBigTIFFTerms(ctx, slots, load, mode, out)
	return err
}

// BandTerms are the stage times of ComposeBigTIFF's band pipeline, summed
// over its bands, as CAP's model of a pipeline takes them (see
// cap.Terms): a band is loaded, then composed, then written on a goroutine
// of its own while the next band is loaded and composed.
type BandTerms struct {
	// Bands is the number of bands.
	Bands int
	// Load is loading the tiles that meet each band and releasing those
	// above it: the read stage, CAP's t_d.
	Load time.Duration
	// Compose is composing the bands' rows: the processing, t_p.
	Compose time.Duration
	// Write is cutting each band into the file's tiles, reducing it into
	// the pyramid's next level and writing it: the store, t_m.
	Write time.Duration
}

// ComposeBigTIFFTerms is ComposeBigTIFF, and also returns the time each
// stage of its pipeline took, measured as it runs (a few clock readings a
// band). Time a stage spent waiting for the other is in neither.
func ComposeBigTIFFTerms(ctx context.Context, slots []Slot, load func(i int) (*image.Gray16, error), mode Blend, out *tiled.BigTIFFStream) (BandTerms, error) {
	var terms BandTerms
	mw, _, err := checkOutput(slots, load, mode, "BigTIFF", out.W, out.H)
	if err != nil {
		return terms, err
	}
	band := out.TH * max(1, (bandHeight+out.TH-1)/out.TH)
	type write struct {
		err error
		d   time.Duration
	}
	var (
		pix     = [2][]byte{make([]byte, 2*mw*band), make([]byte, 2*mw*band)}
		cur     int
		pending bool
		written = make(chan write, 1)
	)
	// wait returns the error of the band being written, if one is.
	wait := func() error {
		if !pending {
			return nil
		}
		pending = false
		w := <-written
		terms.Write += w.d
		return w.err
	}
	// The band's big-endian rows go to the stream as they are: it
	// converts them while cutting them into tiles. The load stage runs
	// from the end of one band's hand-off (or the start) to the next
	// band's dst, the composing from dst to done.
	loaded, composing := time.Now(), time.Time{}
	dst := func(y0, y1 int) *image.Gray16 {
		composing = time.Now()
		terms.Load += composing.Sub(loaded)
		return bandImage(pix[cur], mw)(y0, y1)
	}
	err = sweepBands(ctx, slots, load, mode, mw, out.H, band, dst, func(y0, y1 int) error {
		terms.Compose += time.Since(composing)
		terms.Bands++
		if err := wait(); err != nil {
			return err
		}
		rows := pix[cur]
		pending = true
		go func() {
			t0 := time.Now()
			err := out.WriteRowsBE(y0, y1-y0, rows, 2*mw)
			written <- write{err, time.Since(t0)}
		}()
		cur ^= 1
		loaded = time.Now()
		return nil
	})
	if werr := wait(); err == nil {
		err = werr
	}
	return terms, err
}

// checkOutput checks ComposeTiled's or ComposeBigTIFF's arguments and that
// the output (what) is w x h, the mosaic's size, which it returns.
func checkOutput(slots []Slot, load func(i int) (*image.Gray16, error), mode Blend, what string, w, h int) (mw, mh int, err error) {
	if load == nil {
		return 0, 0, errors.New("compose: nil loader")
	}
	if mode < Overlay || mode > Linear {
		return 0, 0, fmt.Errorf("compose: unknown blend mode %d", int(mode))
	}
	mw, mh, err = MosaicSize(slots)
	if err != nil {
		return 0, 0, err
	}
	if w != mw || h != mh {
		return 0, 0, fmt.Errorf("compose: %s is %d x %d, mosaic is %d x %d", what, w, h, mw, mh)
	}
	return mw, mh, nil
}

// bandImage returns sweepBands' dst for bands held in pix: rows [y0, y1)
// of a mw-wide mosaic. It is not cleared: every row composed sets every
// pixel (0 where no tile covers it, as in ComposeFunc).
func bandImage(pix []byte, mw int) func(y0, y1 int) *image.Gray16 {
	return func(y0, y1 int) *image.Gray16 {
		return &image.Gray16{Pix: pix[:2*mw*(y1-y0)], Stride: 2 * mw, Rect: image.Rect(0, y0, mw, y1)}
	}
}

// writeBand converts mosaic rows [y0, y1) (big-endian pixels in pix, row
// stride 2*mw) and writes them to dst in vertical strips of whole tile
// columns, one goroutine per strip: the strips touch disjoint tiles, so
// their cache misses and write-backs proceed in parallel. vals (mw values
// per row) holds the strips, strip after strip.
func writeBand(dst *tiled.Image, pix []byte, vals []uint16, mw, y0, y1 int) error {
	rows := y1 - y0
	cols := dst.TilesX()
	nw := min(runtime.GOMAXPROCS(0), cols)
	errs := make([]error, nw)
	var wg sync.WaitGroup
	for k := range nw {
		a, b := k*cols/nw*dst.TW, min(mw, (k+1)*cols/nw*dst.TW)
		if a >= b {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := b - a
			strip := vals[a*rows : a*rows+w*rows]
			for y := range rows {
				src := pix[2*(y*mw+a) : 2*(y*mw+b)]
				row := strip[y*w : (y+1)*w]
				for i := range row {
					row[i] = binary.BigEndian.Uint16(src[2*i:])
				}
			}
			errs[k] = dst.WriteRect(a, y0, w, rows, strip)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
