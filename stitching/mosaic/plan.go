package mosaic

import (
	"image"

	"github.com/gohtgs/htgs/stitching/compose"
)

// Plan is how a mosaic is composed and what it needs (see NewPlan).
type Plan struct {
	// Width and Height are the mosaic's size in pixels.
	Width, Height int
	// OutOfCore is set when the mosaic is composed out of core, band by
	// band, and streamed into the file (else in memory, one channel at a
	// time). OMEZarr04 is composed out of core through a tiled image
	// whatever OutOfCore says.
	OutOfCore bool
	// InMemory is about what composing in memory needs in bytes: the
	// mosaic, the tiles loaded ahead, the preview and the file writer's
	// buffers.
	InMemory int64
	// Need is about what the chosen path needs at least, in bytes (out
	// of core: with the smallest tile cache).
	Need int64
	// Cache is the budget of the out-of-core path's tile caches, all
	// together, in bytes.
	Cache int64
}

// band is the side of the out-of-core mosaic's temporary tiles and the
// height of its bands.
const band = 512

// inMemoryRows is the tallest mosaic composed in memory: a taller one is
// streamed band by band whatever the budget allows, since the streamed
// writer overlaps composing, reducing and writing and is the faster path
// (measured, 16 cores: the paper grid's 74089 x 39440 mosaic in 8.3 s
// streamed, 26.2 s in memory; 10169 x 5730 in 5.6-6.5 s against
// 6.9-7.6 s on 2 cores; a mosaic of one band costs the same either way).
const inMemoryRows = 2 * band

// NewPlan plans the mosaic of slots within opt.Memory bytes: in memory
// when the mosaic, with the file writer's buffers for its tiles, fits in
// the budget and is at most two bands (1024 rows) tall, else out of core,
// whose tile caches get what the budget leaves after its fixed needs (at
// least 4 tiles, at most what composing in memory needs). opt.Workers
// tiles are loaded ahead of the composing. Both paths write the same file
// (a BigTIFF, so no side or size limit of classic TIFF applies).
func NewPlan(slots []compose.Slot, opt Options) Plan {
	p := plan(slots, opt.Blend, opt.memory(), opt.workers(), opt.Format.tileSize())
	if opt.Format.Kind == OMEZarr04 && !p.OutOfCore {
		p.Cache = p.InMemory // it fits in the budget: the tiles may stay cached
	}
	return p
}

func plan(slots []compose.Slot, blend compose.Blend, mem int64, par, tile int) Plan {
	b := bounds(slots)
	p := Plan{Width: b.Max.X, Height: b.Max.Y}
	p.InMemory = composeMemory(slots, blend) + prefetchMemory(slots, par) + streamMemory(p.Width, tile)
	pixels := 2 * int64(p.Width) * int64(p.Height)
	p.Need = p.InMemory
	if p.InMemory <= mem && p.Height <= inMemoryRows {
		return p
	}
	p.OutOfCore = true
	// Two bands (ComposeTiled's bytes and values; ComposeBigTIFF composes
	// one while it writes the other), the tiles meeting a band
	// (MemoryEstimate's share beyond the mosaic, doubled for the taller
	// band), the preview's level and reduction, the BigTIFF writer's tiles.
	tileBytes := int64(2 * band * band)
	bandRows := int64(band)
	est := compose.MemoryEstimate(slots, blend)
	level := int64(2 * (2 * PreviewSide) * (2 * PreviewSide)) // longer side < 2*PreviewSide
	fixed := 6*int64(p.Width)*bandRows + 2*max(0, est-pixels) + (p.InMemory - est) + level + 8*tileBytes + streamMemory(p.Width, tile)
	p.Cache = max(min(mem-fixed, p.InMemory), 4*tileBytes)
	p.Need = fixed + 4*tileBytes
	return p
}

// bounds is the rectangle the slots cover, from (0, 0).
func bounds(slots []compose.Slot) image.Rectangle {
	var r image.Rectangle
	for _, s := range slots {
		r = r.Union(image.Rect(s.X, s.Y, s.X+s.Width, s.Y+s.Height))
	}
	return r
}

// prefetchMemory is what the tiles loaded ahead of the composing hold
// (compose.Prefetch with par loads at once): par tiles, each decoded and
// flat-field corrected, two images.
func prefetchMemory(slots []compose.Slot, par int) int64 {
	var most int64
	for _, s := range slots {
		most = max(most, 2*int64(s.Width)*int64(s.Height))
	}
	return int64(par) * 2 * most
}

// composeMemory is what composing and writing a mosaic of slots needs, on
// top of the flat field: the composition and the preview's reduction.
func composeMemory(slots []compose.Slot, blend compose.Blend) int64 {
	need := compose.MemoryEstimate(slots, blend)
	// The preview box-reduces to at most 2.5 times its side, in float64.
	side := 2.5 * PreviewSide
	return need + int64(8*side*side)
}

// streamMemory is what the OME-TIFF writer holds for a w-pixel-wide
// mosaic in tile x tile tiles: three runs of up to 4 MiB (twice that
// compressed) and a row of tiles of each reduced level (about one
// full-resolution row of tiles in all).
func streamMemory(w, tile int) int64 {
	run := min(int64(4<<20), 2*int64(tile)*int64(tile)*int64((w+tile-1)/tile))
	return 6*run + 2*int64(w)*int64(tile)
}
