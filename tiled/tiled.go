// Package tiled holds 2-D 16-bit grayscale images larger than memory: the
// pixels live on disk in fixed-size tiles, read and written one tile at a
// time through an LRU tile cache whose budget is in bytes (never more than
// budget bytes of tiles are resident). It also writes and reads tiled,
// pyramidal, uncompressed BigTIFF files tile by tile (see WriteBigTIFF and
// OpenBigTIFF), so images of any size go to and from disk within a fixed
// amount of memory.
//
// This is the storage half of CAP's tile pipelines (Gennart et al.); the
// constructs that run over the tiles are in package cap.
package tiled

import (
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
)

// Coord names one tile: its column and row in the tile grid.
type Coord struct{ X, Y int }

// Image is a W x H 16-bit grayscale image stored as TW x TH tiles in a raw
// tile file (tile i = y*TilesX()+x at byte offset i*TW*TH*2, little-endian,
// edge tiles padded with zeros). All methods are safe for concurrent use.
type Image struct {
	W, H, TW, TH int

	path  string
	f     *os.File
	cache *cache
	temp  bool
}

// Create makes a new image of w x h pixels in tw x th tiles backed by the
// file at path (created or truncated), with a tile cache of at most
// budget bytes (at least one tile). The pixels start at zero.
func Create(path string, w, h, tw, th int, budget int64) (*Image, error) {
	if w <= 0 || h <= 0 || tw <= 0 || th <= 0 {
		return nil, fmt.Errorf("tiled: bad size %dx%d in %dx%d tiles", w, h, tw, th)
	}
	tb := int64(tw) * int64(th) * 2
	if budget < tb {
		return nil, fmt.Errorf("tiled: cache budget %d bytes is less than one %dx%d tile (%d bytes)", budget, tw, th, tb)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	im := &Image{W: w, H: h, TW: tw, TH: th, path: path, f: f}
	n := int64(im.TilesX() * im.TilesY())
	if err := f.Truncate(n * tb); err != nil {
		f.Close()
		return nil, err
	}
	im.cache = newCache(im, int(budget/tb))
	return im, nil
}

// CreateTemp is Create with a fresh file in dir (os.TempDir when empty)
// that Close removes.
func CreateTemp(dir string, w, h, tw, th int, budget int64) (*Image, error) {
	f, err := os.CreateTemp(dir, "tiled-*.raw")
	if err != nil {
		return nil, err
	}
	name := f.Name()
	f.Close()
	im, err := Create(name, w, h, tw, th, budget)
	if err != nil {
		os.Remove(name)
		return nil, err
	}
	im.temp = true
	return im, nil
}

// TilesX is the number of tile columns.
func (im *Image) TilesX() int { return (im.W + im.TW - 1) / im.TW }

// TilesY is the number of tile rows.
func (im *Image) TilesY() int { return (im.H + im.TH - 1) / im.TH }

// TileBytes is the size of one tile in memory.
func (im *Image) TileBytes() int64 { return int64(im.TW) * int64(im.TH) * 2 }

// Tiles lists every tile in row-major order.
func (im *Image) Tiles() []Coord {
	var cs []Coord
	for y := 0; y < im.TilesY(); y++ {
		for x := 0; x < im.TilesX(); x++ {
			cs = append(cs, Coord{x, y})
		}
	}
	return cs
}

// Rect is the pixel rectangle of tile c clipped to the image:
// x0, y0 and its width and height.
func (im *Image) Rect(c Coord) (x0, y0, w, h int) {
	x0, y0 = c.X*im.TW, c.Y*im.TH
	return x0, y0, min(im.TW, im.W-x0), min(im.TH, im.H-y0)
}

func (im *Image) check(c Coord) error {
	if c.X < 0 || c.Y < 0 || c.X >= im.TilesX() || c.Y >= im.TilesY() {
		return fmt.Errorf("tiled: tile %v outside %dx%d tiles", c, im.TilesX(), im.TilesY())
	}
	return nil
}

// ReadTile copies tile c into dst (TW*TH values, row stride TW).
func (im *Image) ReadTile(c Coord, dst []uint16) error {
	return im.tileDo(c, dst, "ReadTile", func(t []uint16) bool { copy(dst, t); return false })
}

// tileDo checks tile c and the TW*TH buffer buf of the operation op, then
// runs f on the cached tile (f reports whether it wrote the tile).
func (im *Image) tileDo(c Coord, buf []uint16, op string, f func(t []uint16) bool) error {
	if err := im.check(c); err != nil {
		return err
	}
	if len(buf) < im.TW*im.TH {
		return errors.New("tiled: " + op + " buffer too small")
	}
	return im.cache.do(c, f)
}

// WriteTile copies src (TW*TH values, row stride TW) into tile c. Pixels of
// an edge tile beyond the image are stored as given.
func (im *Image) WriteTile(c Coord, src []uint16) error {
	return im.tileDo(c, src, "WriteTile", func(t []uint16) bool { copy(t, src); return true })
}

// Edge says how ReadRect fills pixels outside the image.
type Edge int

const (
	Zero  Edge = iota // outside pixels read as 0
	Clamp             // outside pixels repeat the nearest edge pixel
)

// ReadRect copies the w x h rectangle at (x, y) into dst (row stride w),
// reading every tile it touches through the cache; pixels outside the
// image are filled as edge says.
func (im *Image) ReadRect(x, y, w, h int, dst []uint16, edge Edge) error {
	if len(dst) < w*h {
		return errors.New("tiled: ReadRect buffer too small")
	}
	// Clamped source coordinates of the requested area.
	cx := func(v int) int { return min(max(v, 0), im.W-1) }
	cy := func(v int) int { return min(max(v, 0), im.H-1) }
	sx0, sx1 := cx(x), cx(x+w-1)
	sy0, sy1 := cy(y), cy(y+h-1)
	if edge == Zero {
		clear(dst[:w*h])
	}
	for ty := sy0 / im.TH; ty <= sy1/im.TH; ty++ {
		for tx := sx0 / im.TW; tx <= sx1/im.TW; tx++ {
			err := im.cache.do(Coord{tx, ty}, func(t []uint16) bool {
				tx0, ty0 := tx*im.TW, ty*im.TH
				for oy := 0; oy < h; oy++ {
					py := y + oy
					if edge == Zero && (py < 0 || py >= im.H) {
						continue
					}
					py = cy(py)
					if py < ty0 || py >= ty0+im.TH {
						continue
					}
					row := t[(py-ty0)*im.TW:]
					for ox := 0; ox < w; ox++ {
						px := x + ox
						if edge == Zero && (px < 0 || px >= im.W) {
							continue
						}
						px = cx(px)
						if px < tx0 || px >= tx0+im.TW {
							continue
						}
						dst[oy*w+ox] = row[px-tx0]
					}
				}
				return false
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteRect copies the w x h rectangle src (row stride w) to (x, y);
// pixels outside the image are dropped.
func (im *Image) WriteRect(x, y, w, h int, src []uint16) error {
	x0, y0 := max(x, 0), max(y, 0)
	x1, y1 := min(x+w, im.W), min(y+h, im.H)
	if x0 >= x1 || y0 >= y1 {
		return nil
	}
	for ty := y0 / im.TH; ty <= (y1-1)/im.TH; ty++ {
		for tx := x0 / im.TW; tx <= (x1-1)/im.TW; tx++ {
			err := im.cache.do(Coord{tx, ty}, func(t []uint16) bool {
				tx0, ty0 := tx*im.TW, ty*im.TH
				for py := max(y0, ty0); py < min(y1, ty0+im.TH); py++ {
					a, b := max(x0, tx0), min(x1, tx0+im.TW)
					copy(t[(py-ty0)*im.TW+a-tx0:(py-ty0)*im.TW+b-tx0], src[(py-y)*w+a-x:])
				}
				return true
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Flush writes every modified cached tile to the tile file.
func (im *Image) Flush() error { return im.cache.flush() }

// CacheStats reports the tile cache: its budget in tiles, the most tiles
// ever resident, and tile-file reads and writes.
func (im *Image) CacheStats() CacheStats { return im.cache.stats() }

// Path is the tile file's path.
func (im *Image) Path() string { return im.path }

// Close flushes the cache and closes the tile file (removing it for
// images made by CreateTemp).
func (im *Image) Close() error {
	err := im.Flush()
	if cerr := im.f.Close(); err == nil {
		err = cerr
	}
	if im.temp {
		os.Remove(im.path)
	}
	return err
}

// CacheStats describes a tile cache.
type CacheStats struct {
	Capacity      int   // tiles the budget allows
	Peak          int   // most tiles ever resident
	PeakBytes     int64 // Peak * tile bytes
	Reads, Writes int   // tile-file reads and writes
	Hits, Misses  int
}

// cache is an LRU of decoded tiles with write-back of dirty tiles. All
// access happens under mu, in do's callback, so callers never hold cache
// memory: resident tiles are bounded by capacity at all times.
type cache struct {
	im       *Image
	mu       sync.Mutex
	capacity int
	lru      *list.List // front = most recent; values *entry
	byCoord  map[Coord]*list.Element
	raw      []byte
	st       CacheStats
}

type entry struct {
	c     Coord
	px    []uint16
	dirty bool
}

func newCache(im *Image, capacity int) *cache {
	return &cache{im: im, capacity: capacity, lru: list.New(), byCoord: map[Coord]*list.Element{},
		raw: make([]byte, im.TileBytes()), st: CacheStats{Capacity: capacity}}
}

func (c *cache) offset(t Coord) int64 {
	return int64(t.Y*c.im.TilesX()+t.X) * c.im.TileBytes()
}

func (c *cache) do(t Coord, f func(px []uint16) (dirty bool)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byCoord[t]; ok {
		c.st.Hits++
		c.lru.MoveToFront(el)
		e := el.Value.(*entry)
		if f(e.px) {
			e.dirty = true
		}
		return nil
	}
	c.st.Misses++
	var px []uint16
	if c.lru.Len() >= c.capacity {
		el := c.lru.Back()
		e := el.Value.(*entry)
		if err := c.writeBack(e); err != nil {
			return err
		}
		c.lru.Remove(el)
		delete(c.byCoord, e.c)
		px = e.px // reuse the evicted tile's memory
	} else {
		px = make([]uint16, c.im.TW*c.im.TH)
	}
	if _, err := c.im.f.ReadAt(c.raw, c.offset(t)); err != nil {
		return fmt.Errorf("tiled: reading tile %v: %w", t, err)
	}
	c.st.Reads++
	for i := range px {
		px[i] = binary.LittleEndian.Uint16(c.raw[2*i:])
	}
	e := &entry{c: t, px: px}
	c.byCoord[t] = c.lru.PushFront(e)
	if n := c.lru.Len(); n > c.st.Peak {
		c.st.Peak = n
		c.st.PeakBytes = int64(n) * c.im.TileBytes()
	}
	e.dirty = f(px)
	return nil
}

func (c *cache) writeBack(e *entry) error {
	if !e.dirty {
		return nil
	}
	for i, v := range e.px {
		binary.LittleEndian.PutUint16(c.raw[2*i:], v)
	}
	if _, err := c.im.f.WriteAt(c.raw, c.offset(e.c)); err != nil {
		return fmt.Errorf("tiled: writing tile %v: %w", e.c, err)
	}
	c.st.Writes++
	e.dirty = false
	return nil
}

func (c *cache) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.lru.Front(); el != nil; el = el.Next() {
		if err := c.writeBack(el.Value.(*entry)); err != nil {
			return err
		}
	}
	return nil
}

func (c *cache) stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}
