// Package compose builds a mosaic image from 16-bit grayscale tiles placed at
// integer positions, as the last step of microscopy image stitching.
//
// Three blend modes are offered, as in MIST: Overlay (later tiles overwrite
// earlier ones), Average (mean of all tiles covering a pixel) and Linear
// (feathering with weights that fall off linearly towards each tile's
// borders). All arithmetic is integer and exact; results are rounded half up.
//
// Memory: the mosaic itself takes 2 bytes per pixel. Compose needs all tiles
// in memory; ComposeFunc loads each tile once, in order of increasing Y, and
// drops it as soon as the row sweep has passed its bottom edge, so at any time
// it holds only the tiles that intersect a band of 256 mosaic rows (about two
// grid rows of tiles for a regular grid) plus, for Average and Linear, one row
// of accumulators per worker (16 bytes per mosaic column).
package compose

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Blend selects how overlapping tiles are combined.
type Blend int

const (
	// Overlay writes tiles in order; where they overlap, the later tile wins
	// (MIST's "overlay").
	Overlay Blend = iota
	// Average sets each pixel to the rounded mean of all tiles covering it.
	Average
	// Linear feathers tiles: a pixel at column i, row j of a W x H tile has
	// weight min(i+1, W-i) * min(j+1, H-j), the product of its distances to
	// the nearest vertical and horizontal border plus one, so weights fall off
	// linearly towards the edges and are never zero. The mosaic pixel is the
	// rounded weighted mean of the covering tiles.
	Linear
)

// String returns the flag spelling of the mode: overlay, average or linear.
func (b Blend) String() string {
	switch b {
	case Overlay:
		return "overlay"
	case Average:
		return "average"
	case Linear:
		return "linear"
	}
	return fmt.Sprintf("Blend(%d)", int(b))
}

// ParseBlend parses "overlay", "average" or "linear" (case-insensitive).
func ParseBlend(s string) (Blend, error) {
	for _, b := range [...]Blend{Overlay, Average, Linear} {
		if strings.EqualFold(strings.TrimSpace(s), b.String()) {
			return b, nil
		}
	}
	return 0, fmt.Errorf("compose: unknown blend mode %q (want overlay, average or linear)", s)
}

// MarshalText implements encoding.TextMarshaler (for flag.TextVar).
func (b Blend) MarshalText() ([]byte, error) {
	if b < Overlay || b > Linear {
		return nil, fmt.Errorf("compose: unknown blend mode %d", int(b))
	}
	return []byte(b.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler (for flag.TextVar).
func (b *Blend) UnmarshalText(text []byte) error {
	v, err := ParseBlend(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// Placement is a tile and the position of its top-left corner in mosaic
// coordinates (non-negative).
type Placement struct {
	// Image is the tile; its bounds need not start at (0, 0).
	Image *image.Gray16
	// X and Y are the mosaic coordinates of the tile's top-left pixel.
	X, Y int
}

// Slot describes where a lazily loaded tile goes: top-left corner (X, Y) in
// mosaic coordinates (non-negative) and its size.
type Slot struct {
	// X and Y are the mosaic coordinates of the tile's top-left pixel.
	X, Y int
	// Width and Height are the tile size in pixels.
	Width, Height int
}

// bandHeight is the number of mosaic rows ComposeFunc composes between
// loading and releasing tiles.
const bandHeight = 256

const (
	// maxMosaicPixels bounds the mosaic size (2 bytes per pixel).
	maxMosaicPixels = 1 << 36
	// maxTileSide bounds tile sides so that linear-blend sums cannot overflow.
	maxTileSide = 1 << 20
)

// Compose builds the mosaic of tiles with the given blend mode. The mosaic
// spans from (0, 0) to the largest tile extent; pixels no tile covers are 0.
// It uses up to GOMAXPROCS goroutines, joined before it returns, and checks
// ctx every 64 rows.
func Compose(ctx context.Context, tiles []Placement, mode Blend) (*image.Gray16, error) {
	if len(tiles) == 0 {
		return nil, errors.New("compose: no tiles")
	}
	slots := make([]Slot, len(tiles))
	for i, t := range tiles {
		if t.Image == nil {
			return nil, fmt.Errorf("compose: tile %d has no image", i)
		}
		b := t.Image.Bounds()
		slots[i] = Slot{X: t.X, Y: t.Y, Width: b.Dx(), Height: b.Dy()}
	}
	return compose(ctx, slots, func(i int) (*image.Gray16, error) { return tiles[i].Image, nil }, mode, math.MaxInt)
}

// ComposeFunc builds the mosaic like Compose, loading tile i with load(i)
// when the row sweep first reaches slots[i].Y and releasing it once the sweep
// has passed its bottom edge (see the package documentation for the memory
// use). load is called exactly once per tile, from one goroutine at a time, in
// order of increasing Y (ties in index order); the image it returns must have
// the slot's size. An error from load stops composition and is returned.
func ComposeFunc(ctx context.Context, slots []Slot, load func(i int) (*image.Gray16, error), mode Blend) (*image.Gray16, error) {
	if len(slots) == 0 {
		return nil, errors.New("compose: no tiles")
	}
	if load == nil {
		return nil, errors.New("compose: nil loader")
	}
	return compose(ctx, slots, load, mode, bandHeight)
}

// span is a loaded tile with its slot.
type span struct {
	idx  int
	slot Slot
	img  *image.Gray16
}

func compose(ctx context.Context, slots []Slot, load func(int) (*image.Gray16, error), mode Blend, band int) (*image.Gray16, error) {
	if mode < Overlay || mode > Linear {
		return nil, fmt.Errorf("compose: unknown blend mode %d", int(mode))
	}
	mw, mh, err := mosaicSize(slots)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := image.NewGray16(image.Rect(0, 0, mw, mh))
	if err := sweepBands(ctx, slots, load, mode, mw, mh, band, func(y0, y1 int) *image.Gray16 { return out }, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// sweepBands runs the row sweep over a mw x mh mosaic in bands of band
// rows: for each band [y0, y1) it loads the tiles reaching it, composes
// its rows into the image dst(y0, y1) returns (which must cover those
// rows), hands the band to done (when not nil) and releases the tiles
// above y1. It checks ctx between bands and once more at the end.
func sweepBands(ctx context.Context, slots []Slot, load func(int) (*image.Gray16, error), mode Blend, mw, mh, band int,
	dst func(y0, y1 int) *image.Gray16, done func(y0, y1 int) error) error {
	sw := newSweep(slots, load, mode, mw)
	for y0 := 0; y0 < mh; {
		if err := ctx.Err(); err != nil {
			return err
		}
		y1 := mh
		if band < mh-y0 {
			y1 = y0 + band
		}
		if err := sw.loadUntil(y1); err != nil {
			return err
		}
		sw.rows(ctx, dst(y0, y1), y0, y1)
		if done != nil {
			if err := done(y0, y1); err != nil {
				return err
			}
		}
		sw.dropAbove(y1)
		y0 = y1
	}
	return ctx.Err()
}

// mosaicSize checks the slots and returns the size of the mosaic that
// holds them all.
func mosaicSize(slots []Slot) (mw, mh int, err error) {
	for i, s := range slots {
		if s.X < 0 || s.Y < 0 {
			return 0, 0, fmt.Errorf("compose: tile %d at negative position (%d, %d)", i, s.X, s.Y)
		}
		if s.Width <= 0 || s.Height <= 0 {
			return 0, 0, fmt.Errorf("compose: tile %d is empty (%d x %d)", i, s.Width, s.Height)
		}
		if s.Width > maxTileSide || s.Height > maxTileSide {
			return 0, 0, fmt.Errorf("compose: tile %d is too large (%d x %d, limit %d per side)", i, s.Width, s.Height, maxTileSide)
		}
		if s.X > math.MaxInt32-s.Width || s.Y > math.MaxInt32-s.Height {
			return 0, 0, fmt.Errorf("compose: tile %d at (%d, %d) lies too far out", i, s.X, s.Y)
		}
		mw, mh = max(mw, s.X+s.Width), max(mh, s.Y+s.Height)
	}
	if mw > maxMosaicPixels/mh {
		return 0, 0, fmt.Errorf("compose: mosaic %d x %d exceeds %d pixels", mw, mh, int64(maxMosaicPixels))
	}
	return mw, mh, nil
}

// sweep is the state of the row sweep over the mosaic: the tiles in order
// of increasing Y, the loaded ones, and one row accumulator per worker.
type sweep struct {
	slots  []Slot
	load   func(int) (*image.Gray16, error)
	mode   Blend
	order  []int // slot indices by increasing Y (ties in index order)
	next   int   // order[next] is the next tile to load
	active []span
	acc    []*rowAcc
}

func newSweep(slots []Slot, load func(int) (*image.Gray16, error), mode Blend, mw int) *sweep {
	order := sweepOrder(slots)
	acc := make([]*rowAcc, max(1, runtime.GOMAXPROCS(0)))
	for i := range acc {
		acc[i] = newRowAcc(mw, mode)
	}
	return &sweep{slots: slots, load: load, mode: mode, order: order, acc: acc}
}

// loadUntil loads the tiles whose top edge lies above row y1 and adds
// them to the active tiles, kept in index order.
func (sw *sweep) loadUntil(y1 int) error {
	for sw.next < len(sw.order) && sw.slots[sw.order[sw.next]].Y < y1 {
		i := sw.order[sw.next]
		sw.next++
		img, err := sw.load(i)
		if err != nil {
			return fmt.Errorf("compose: loading tile %d: %w", i, err)
		}
		if img == nil {
			return fmt.Errorf("compose: tile %d: loader returned no image", i)
		}
		s := sw.slots[i]
		if b := img.Bounds(); b.Dx() != s.Width || b.Dy() != s.Height {
			return fmt.Errorf("compose: tile %d is %d x %d, slot says %d x %d", i, b.Dx(), b.Dy(), s.Width, s.Height)
		}
		k, _ := slices.BinarySearchFunc(sw.active, i, func(s span, i int) int { return s.idx - i })
		sw.active = slices.Insert(sw.active, k, span{idx: i, slot: s, img: img})
	}
	return nil
}

// rows composes mosaic rows [y0, y1) from the active tiles: the rows are
// cut into one chunk per worker (at least 8 rows each), composed in
// parallel.
func (sw *sweep) rows(ctx context.Context, out *image.Gray16, y0, y1 int) {
	rows := y1 - y0
	nw := min(len(sw.acc), (rows+7)/8)
	if nw <= 1 {
		sw.acc[0].rows(ctx, out, sw.active, sw.mode, y0, y1)
		return
	}
	chunk := (rows + nw - 1) / nw
	var wg sync.WaitGroup
	for w := range nw {
		a, b := y0+w*chunk, min(y1, y0+(w+1)*chunk)
		if a >= b {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sw.acc[w].rows(ctx, out, sw.active, sw.mode, a, b)
		}()
	}
	wg.Wait()
}

// dropAbove releases the active tiles whose bottom edge lies above row y1.
func (sw *sweep) dropAbove(y1 int) {
	sw.active = slices.DeleteFunc(sw.active, func(s span) bool { return s.slot.Y+s.slot.Height <= y1 })
}

// rowAcc is one worker's accumulator for one mosaic row.
type rowAcc struct {
	sum []uint64 // Average: sum of values; Linear: sum of weight*value
	wt  []uint64 // Average: count; Linear: sum of weights
	wx  []uint64 // Linear: column weights min(i+1, w-i) of a tile w wide

	// blendRow's scratch, reused from row to row.
	cov   []cover
	edges []edge
	on    []int // the covers over the current span
}

// columnWeights returns the linear-blend column weights of a tile w
// pixels wide, computed once per width.
func (a *rowAcc) columnWeights(w int) []uint64 {
	if len(a.wx) != w {
		a.wx = make([]uint64, w)
		for i := range a.wx {
			a.wx[i] = uint64(min(i+1, w-i))
		}
	}
	return a.wx
}

func newRowAcc(w int, mode Blend) *rowAcc {
	if mode == Overlay {
		return &rowAcc{}
	}
	return &rowAcc{sum: make([]uint64, w), wt: make([]uint64, w)}
}

// rows composes mosaic rows [y0, y1) from the active tiles (in index order).
func (a *rowAcc) rows(ctx context.Context, out *image.Gray16, active []span, mode Blend, y0, y1 int) {
	for y := y0; y < y1; y++ {
		if (y-y0)&63 == 63 && ctx.Err() != nil {
			return
		}
		orow := out.Pix[(y-out.Rect.Min.Y)*out.Stride : (y-out.Rect.Min.Y)*out.Stride+2*out.Rect.Dx()]
		if mode == Overlay {
			clear(orow) // columns no tile covers stay 0
			for _, s := range active {
				j := y - s.slot.Y
				if j < 0 || j >= s.slot.Height {
					continue
				}
				src := tileRow(s.img, j, s.slot.Width)
				copy(orow[2*s.slot.X:], src)
			}
			continue
		}
		a.blendRow(orow, active, mode, y)
	}
}

// cover is one tile's part in a mosaic row: columns [x0, x1), its
// big-endian pixels and, for Linear, its row weight and the largest
// weight it gives any pixel of the row.
type cover struct {
	x0, x1 int
	src    []byte
	wy     uint64
	wmax   uint64
}

// edge is a tile's left (+1) or right (-1) edge in a mosaic row.
type edge struct{ x, d, k int }

// linear returns c's linear-blend weight at mosaic column x, its step
// from one column to the next and the column where the step changes
// (the tile's middle, or its right edge).
func (c *cover) linear(x int) (g, step int64, next int) {
	i, w, mid := x-c.x0, c.x1-c.x0, c.x0+(c.x1-c.x0+1)/2
	if x < mid {
		return int64(c.wy) * int64(i+1), int64(c.wy), mid
	}
	return int64(c.wy) * int64(w-i), -int64(c.wy), c.x1
}

// blend2 sets the big-endian pixels of out to the rounded weighted means
// of sc's and sd's, with weights gc and gd stepping by dc and dd from
// pixel to pixel. The weights sum to less than fastWeights: the float64
// division is exact after truncation (see divRound).
func blend2(out, sc, sd []byte, gc, dc, gd, dd int64) {
	for i := 1; i < len(out) && i < len(sc) && i < len(sd); i += 2 {
		s := gc*(int64(sc[i-1])<<8|int64(sc[i])) + gd*(int64(sd[i-1])<<8|int64(sd[i]))
		n := gc + gd
		v := int64(float64(2*s+n) / float64(2*n))
		out[i-1], out[i] = byte(v>>8), byte(v)
		gc += dc
		gd += dd
	}
}

// fastWeights bounds the total weight of the covers of a span for the
// float64 division (see divRound): below it, sums of weighted 16-bit
// values stay under 2^49 and means under 2^16 (a variable for tests).
var fastWeights uint64 = 1 << 33

// blendRow composes mosaic row y for Average and Linear. Columns that one
// tile alone covers take its pixels as they are (the rounded mean of one
// value is that value); only spans where tiles overlap are blended, each
// with the tiles that cover it all.
func (a *rowAcc) blendRow(orow []byte, active []span, mode Blend, y int) {
	a.cov, a.edges, a.on = a.cov[:0], a.edges[:0], a.on[:0]
	for _, s := range active {
		j := y - s.slot.Y
		if j < 0 || j >= s.slot.Height {
			continue
		}
		k := len(a.cov)
		c := cover{x0: s.slot.X, x1: s.slot.X + s.slot.Width, src: tileRow(s.img, j, s.slot.Width), wy: 1, wmax: 1}
		if mode == Linear {
			c.wy = uint64(min(j+1, s.slot.Height-j))
			c.wmax = c.wy * uint64((s.slot.Width+1)/2)
		}
		a.cov = append(a.cov, c)
		a.edges = append(a.edges, edge{c.x0, 1, k}, edge{c.x1, -1, k})
	}
	slices.SortFunc(a.edges, func(p, q edge) int { return p.x - q.x })
	// Sweep the edges: the tiles a.on cover [prev, e.x).
	prev := 0
	for _, e := range a.edges {
		if e.x > prev {
			switch len(a.on) {
			case 0: // no tile: 0
				clear(orow[2*prev : 2*e.x])
			case 1:
				c := &a.cov[a.on[0]]
				copy(orow[2*prev:2*e.x], c.src[2*(prev-c.x0):])
			default:
				a.blendSpan(orow, prev, e.x, mode)
			}
			prev = e.x
		}
		if e.d > 0 {
			a.on = append(a.on, e.k)
		} else {
			a.on = slices.DeleteFunc(a.on, func(k int) bool { return k == e.k })
		}
	}
	clear(orow[2*prev:])
}

// blendSpan sets columns [lo, hi) of orow to the rounded (weighted) mean
// of the tiles a.on, which all cover them.
func (a *rowAcc) blendSpan(orow []byte, lo, hi int, mode Blend) {
	var wsum uint64
	for _, k := range a.on {
		wsum += a.cov[k].wmax
	}
	out := orow[2*lo : 2*hi]
	if len(a.on) == 2 && wsum < fastWeights {
		c, d := &a.cov[a.on[0]], &a.cov[a.on[1]]
		sc, sd := c.src[2*(lo-c.x0):][:len(out)], d.src[2*(lo-d.x0):][:len(out)]
		if mode == Average {
			for i := 1; i < len(out) && i < len(sc) && i < len(sd); i += 2 {
				v := (uint32(sc[i-1])<<8 | uint32(sc[i])) + (uint32(sd[i-1])<<8 | uint32(sd[i])) + 1
				out[i-1], out[i] = byte(v>>9), byte(v>>1)
			}
			return
		}
		// Linear: column i of a tile w wide weighs min(i+1, w-i), i+1
		// up to the column (w+1)/2 and w-i from there: the span is cut
		// there, so that each piece's weights step by a constant.
		for x := lo; x < hi; {
			gc, dc, mc := c.linear(x)
			gd, dd, md := d.linear(x)
			e := min(hi, mc, md)
			blend2(out[2*(x-lo):2*(e-lo)], sc[2*(x-lo):], sd[2*(x-lo):], gc, dc, gd, dd)
			x = e
		}
		return
	}
	sum, wt := a.sum[lo:hi], a.wt[lo:hi]
	for _, k := range a.on {
		c := &a.cov[k]
		src := c.src[2*(lo-c.x0) : 2*(hi-c.x0)]
		if mode == Average {
			for i := range sum {
				sum[i] += uint64(src[2*i])<<8 | uint64(src[2*i+1])
				wt[i]++
			}
			continue
		}
		wx := a.columnWeights(c.x1 - c.x0)[lo-c.x0 : hi-c.x0]
		for i := range sum {
			wgt := c.wy * wx[i]
			sum[i] += wgt * (uint64(src[2*i])<<8 | uint64(src[2*i+1]))
			wt[i] += wgt
		}
	}
	fast := wsum < fastWeights
	for i := range sum {
		var v uint64
		if fast {
			v = uint64(float64(int64(2*sum[i]+wt[i])) / float64(int64(2*wt[i])))
		} else {
			v = divRound(sum[i], wt[i])
		}
		out[2*i], out[2*i+1] = byte(v>>8), byte(v)
		sum[i], wt[i] = 0, 0
	}
}

// divRound is s/n rounded half up, (2s + n) / 2n, for n > 0, by a float64
// division where that is exact after truncation, a fraction of a 64-bit
// integer division's time: with n < 2^33 and s < 2^51, 2s + n and 2n are
// exact float64 values; with s/n < 2^18 the quotient q is below 2^19, so
// the correctly rounded q' is within q·2^-53 < 2^-34 of q, while a q that
// is not an integer lies at least 1/2n > 2^-34 from the integers around it
// (and an integer q is exact): q' truncates to floor(q). A weighted mean of
// 16-bit values always qualifies; other inputs take the integer division.
func divRound(s, n uint64) uint64 {
	if n < 1<<33 && s < 1<<51 && s/(1<<18) < n {
		return uint64(float64(2*s+n) / float64(2*n))
	}
	return (2*s + n) / (2 * n)
}

// tileRow returns the big-endian bytes of row j of img (w pixels).
func tileRow(img *image.Gray16, j, w int) []byte {
	off := img.PixOffset(img.Rect.Min.X, img.Rect.Min.Y+j)
	return img.Pix[off : off+2*w]
}
