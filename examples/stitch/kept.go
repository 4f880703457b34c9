package main

// The tiles a -watch run keeps for its mosaic: the live registration
// hands each tile over corrected (stitching.LiveOptions.Tile), and the
// mosaic, composed after the last tile, takes them instead of reading and
// correcting the files again.

import (
	"image"
	"sync"

	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/mosaic"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// keptTiles are corrected tiles kept for the mosaic, at most budget bytes
// of them, by row-major index.
type keptTiles struct {
	mu        sync.Mutex
	cols      int
	budgetFor func(w, h int) int64 // the budget, for tiles of w x h
	budget    int64                // -1 until the first tile
	bytes     int64                // held or being copied
	tiles     map[int]*image.Gray16
	used      int // tiles the mosaic took
}

// newKeptTiles keeps tiles of a grid of cols columns within the budget
// budgetFor gives for the size of the first tile.
func newKeptTiles(cols int, budgetFor func(w, h int) int64) *keptTiles {
	return &keptTiles{cols: cols, budgetFor: budgetFor, budget: -1, tiles: map[int]*image.Gray16{}}
}

// add keeps a copy of tile (row, col), corrected, unless it is kept
// already or the budget is spent (stitching.LiveOptions.Tile: called from
// the registration's workers).
func (k *keptTiles) add(row, col int, img *image.Gray16) {
	i := row*k.cols + col
	size := int64(len(img.Pix))
	k.mu.Lock()
	if k.budget < 0 {
		k.budget = k.budgetFor(img.Rect.Dx(), img.Rect.Dy())
	}
	if _, ok := k.tiles[i]; ok || k.bytes+size > k.budget {
		k.mu.Unlock()
		return
	}
	k.tiles[i] = nil // reserved while it is copied
	k.bytes += size
	k.mu.Unlock()
	cp := &image.Gray16{Pix: make([]byte, len(img.Pix)), Stride: img.Stride, Rect: img.Rect}
	copy(cp.Pix, img.Pix)
	k.mu.Lock()
	k.tiles[i] = cp
	k.mu.Unlock()
}

// held is the bytes of the tiles kept.
func (k *keptTiles) held() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.bytes
}

// take returns tile i and lets it go (nil when it is not kept).
func (k *keptTiles) take(i int) *image.Gray16 {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.tiles[i]
	if t != nil {
		delete(k.tiles, i)
		k.bytes -= int64(len(t.Pix))
		k.used++
	}
	return t
}

// drop lets every tile go and returns how many the mosaic took.
func (k *keptTiles) drop() (used int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	clear(k.tiles)
	k.bytes = 0
	return k.used
}

// keptBudget is the most bytes of tiles of w x h a -watch run keeps for
// its mosaic: the memory the registration's pool is estimated to take
// (stitching.MemoryEstimate: its tiles and spectra, free once the
// registration ends), and at most a quarter of the mosaic's budget (-mem),
// so that the run's memory stays bounded whatever the grid's size.
func keptBudget(c *config, w, h int, opt align.Options, gopt stitching.GraphOptions) int64 {
	mem := c.memBudget
	if mem == 0 {
		mem = mosaic.DefaultMemory(availableMemory())
	}
	return min(stitching.MemoryEstimate(c.rows, c.cols, w, h, opt, gopt), mem/4)
}

// keptSource is a channel's tiles for the mosaic, corrected with ff: the
// kept ones as they were handed over, the others loaded from the files
// and corrected as package mosaic corrects them (so its channel has no
// flat field of its own).
type keptSource struct {
	tileio.TileSource
	kept *keptTiles
	ff   *align.FlatField
}

// Load returns tile (row, col), corrected.
func (s *keptSource) Load(row, col int) (*image.Gray16, error) {
	if t := s.kept.take(row*s.Cols() + col); t != nil {
		return t, nil
	}
	t, err := s.TileSource.Load(row, col)
	if err != nil {
		return nil, err
	}
	if s.ff != nil && !s.ff.Identity() {
		t = s.ff.Apply(t)
	}
	return t, nil
}
