// Package tiled holds 2-D 16-bit grayscale images larger than memory: the
// pixels live on disk in fixed-size tiles, read and written one tile at a
// time through an LRU tile cache whose budget is in bytes (never more than
// budget bytes of tiles are resident). It also writes and reads tiled,
// pyramidal BigTIFF files tile by tile: streamed from rows as they come
// (BigTIFFStream), either as OME-TIFF (CreateOMETIFF: OME-XML, reduced
// levels in SubIFDs, tiles uncompressed or compressed with deflate or
// zstd) or with the reduced levels as top-level IFDs (CreateBigTIFF,
// WriteBigTIFF), and read back by OpenBigTIFF; and the same pyramid as
// OME-Zarr, NGFF 0.5 on Zarr v3 streamed like the TIFFs (CreateOMEZarr)
// or v0.4 on Zarr v2 from a tiled image (WriteOMEZarr, OpenOMEZarr), so
// images of any size go to and from disk within a fixed amount of memory.
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
	"unsafe"
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
	if err := checkSize(w, h, tw, th); err != nil {
		return nil, err
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

// checkSize refuses an image of w x h pixels in tw x th tiles that is
// empty, or whose tile file would pass 2^62 bytes (its tile count and size
// overflowed, to a count a small file could match).
func checkSize(w, h, tw, th int) error {
	if w <= 0 || h <= 0 || tw <= 0 || th <= 0 {
		return fmt.Errorf("tiled: bad size %dx%d in %dx%d tiles", w, h, tw, th)
	}
	const limit = 1 << 62
	tx, ty := (w-1)/tw+1, (h-1)/th+1 // TilesX and TilesY, without overflow
	if w > limit || h > limit || tw > limit/2/th || ty > limit/(2*tw*th) || tx > limit/(2*tw*th)/ty {
		return fmt.Errorf("tiled: size %dx%d in %dx%d tiles: the tile file would pass 2^62 bytes", w, h, tw, th)
	}
	return nil
}

// Open opens an existing tile file written by an Image of w x h pixels in
// tw x th tiles (after Flush or Close), with a fresh, empty tile cache of
// at most budget bytes. The file must have the size such an image's tile
// file has.
func Open(path string, w, h, tw, th int, budget int64) (*Image, error) {
	if err := checkSize(w, h, tw, th); err != nil {
		return nil, err
	}
	tb := int64(tw) * int64(th) * 2
	if budget < tb {
		return nil, fmt.Errorf("tiled: cache budget %d bytes is less than one %dx%d tile (%d bytes)", budget, tw, th, tb)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	im := &Image{W: w, H: h, TW: tw, TH: th, path: path, f: f}
	st, err := f.Stat()
	if err == nil && st.Size() != int64(im.TilesX()*im.TilesY())*tb {
		err = fmt.Errorf("tiled: %s holds %d bytes, a %dx%d image in %dx%d tiles needs %d", path, st.Size(), w, h, tw, th, int64(im.TilesX()*im.TilesY())*tb)
	}
	if err != nil {
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
	if w <= 0 || h <= 0 {
		return nil
	}
	// Clamped source coordinates of the requested area.
	cx := func(v int) int { return min(max(v, 0), im.W-1) }
	cy := func(v int) int { return min(max(v, 0), im.H-1) }
	sx0, sx1 := cx(x), cx(x+w-1)
	sy0, sy1 := cy(y), cy(y+h-1)
	if edge == Zero {
		clear(dst[:w*h])
	}
	// Output rows [oy0, oy1) read image rows inside the image; with Clamp
	// the rows above and below repeat the edge rows.
	oy0, oy1 := max(0, -y), min(h, im.H-y)
	if edge == Clamp {
		oy0, oy1 = 0, h
	}
	for ty := sy0 / im.TH; ty <= sy1/im.TH; ty++ {
		for tx := sx0 / im.TW; tx <= sx1/im.TW; tx++ {
			tx0, ty0 := tx*im.TW, ty*im.TH
			// Output columns [a, b) copy image columns inside this tile;
			// with Clamp, [0, left) repeat column 0 and [right, w) column
			// W-1 when this tile holds them.
			a, b := max(0, tx0-x), min(w, min(tx0+im.TW, im.W)-x)
			left, right := 0, w
			if edge == Clamp {
				if tx0 == 0 {
					left = min(w, max(0, -x))
				}
				if tx0+im.TW >= im.W {
					right = max(0, im.W-x)
				}
			}
			err := im.cache.do(Coord{tx, ty}, func(t []uint16) bool {
				for oy := oy0; oy < oy1; oy++ {
					py := cy(y + oy)
					if py < ty0 || py >= ty0+im.TH {
						continue
					}
					row := t[(py-ty0)*im.TW : (py-ty0+1)*im.TW]
					d := dst[oy*w : (oy+1)*w]
					if a < b {
						copy(d[a:b], row[x+a-tx0:])
					}
					if left > 0 {
						v := row[0]
						for i := range d[:left] {
							d[i] = v
						}
					}
					if right < w {
						v := row[im.W-1-tx0]
						for i := right; i < w; i++ {
							d[i] = v
						}
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

// cache is an LRU of decoded tiles with write-back of dirty tiles. Its
// mutex guards only the bookkeeping (map, LRU list, pins, states); tile
// file reads and writes happen without it, so one goroutine's miss does
// not stall the others' hits. Each entry has its own mutex, held while a
// caller's callback runs on the tile, so callers never hold cache memory
// and resident tiles (including one being evicted or loaded) never exceed
// capacity.
type cache struct {
	im       *Image
	mu       sync.Mutex
	cond     *sync.Cond // signalled when an entry becomes ready, unpinned or leaves
	capacity int
	resident int        // tiles holding memory: ready, loading or evicting
	lru      *list.List // ready tiles, front = most recent; values *entry
	byCoord  map[Coord]*entry
	raws     sync.Pool // *[]byte tile encodings (big-endian hosts only)
	st       CacheStats
}

// Entry states.
const (
	ready    = iota
	loading  // being read from the tile file
	evicting // being written back; its coordinate cannot be reloaded yet
)

type entry struct {
	c     Coord
	state int
	pins  int           // callers using or waiting for the tile (under cache.mu)
	el    *list.Element // in lru when ready
	mu    sync.Mutex    // held while a callback runs on px
	px    []uint16
	dirty bool // under mu, or with pins == 0 under cache.mu
}

func newCache(im *Image, capacity int) *cache {
	c := &cache{im: im, capacity: capacity, lru: list.New(), byCoord: map[Coord]*entry{},
		st: CacheStats{Capacity: capacity}}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *cache) offset(t Coord) int64 {
	return int64(t.Y*c.im.TilesX()+t.X) * c.im.TileBytes()
}

// do runs f on tile t, loading it (and evicting the least recently used
// unpinned tile) on a miss.
func (c *cache) do(t Coord, f func(px []uint16) (dirty bool)) error {
	e, err := c.pin(t)
	if err != nil {
		return err
	}
	e.mu.Lock()
	if f(e.px) {
		e.dirty = true
	}
	e.mu.Unlock()
	c.mu.Lock()
	e.pins--
	if e.pins == 0 {
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	return nil
}

// pin returns tile t, ready and pinned (so it is not evicted until
// unpinned).
func (c *cache) pin(t Coord) (*entry, error) {
	c.mu.Lock()
	for {
		if e, ok := c.byCoord[t]; ok {
			if e.state != ready {
				c.cond.Wait() // loading, or evicting and about to leave
				continue
			}
			c.st.Hits++
			c.lru.MoveToFront(e.el)
			e.pins++
			c.mu.Unlock()
			return e, nil
		}
		var victim *entry
		var px []uint16
		if c.resident < c.capacity {
			c.resident++
		} else {
			for el := c.lru.Back(); el != nil; el = el.Prev() {
				if v := el.Value.(*entry); v.pins == 0 {
					victim = v
					break
				}
			}
			if victim == nil {
				c.cond.Wait() // every resident tile is in use
				continue
			}
			victim.state = evicting
			c.lru.Remove(victim.el)
			victim.el = nil
			px = victim.px
		}
		c.st.Misses++
		e := &entry{c: t, state: loading, pins: 1}
		c.byCoord[t] = e
		if c.resident > c.st.Peak {
			c.st.Peak = c.resident
			c.st.PeakBytes = int64(c.resident) * c.im.TileBytes()
		}
		c.mu.Unlock()
		return e, c.load(e, victim, px)
	}
}

// load writes victim back (when dirty) and reads e's tile into its memory
// (or new memory without a victim), without the cache lock.
func (c *cache) load(e, victim *entry, px []uint16) error {
	var err error
	if victim != nil && victim.dirty {
		err = c.write(victim.c, victim.px)
	}
	c.mu.Lock()
	if victim != nil {
		if err != nil { // keep the unwritten tile; give up on e
			victim.state = ready
			victim.el = c.lru.PushBack(victim)
			c.drop(e)
			c.mu.Unlock()
			return err
		}
		if victim.dirty {
			c.st.Writes++
			victim.dirty = false
		}
		delete(c.byCoord, victim.c)
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	if px == nil {
		px = make([]uint16, c.im.TW*c.im.TH)
	}
	err = c.read(e.c, px)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.resident--
		c.drop(e)
		return err
	}
	c.st.Reads++
	e.px = px
	e.state = ready
	e.el = c.lru.PushFront(e)
	c.cond.Broadcast()
	return nil
}

// drop forgets the entry e that failed to load (under c.mu).
func (c *cache) drop(e *entry) {
	delete(c.byCoord, e.c)
	c.cond.Broadcast()
}

// hostLE reports whether this machine stores uint16 little-endian, as the
// tile file does: tiles then go to and from disk without conversion.
var hostLE = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// asBytes views px as its bytes in memory.
func asBytes(px []uint16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(px))), 2*len(px))
}

func (c *cache) rawBuf() *[]byte {
	if b, ok := c.raws.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, c.im.TileBytes())
	return &b
}

func (c *cache) read(t Coord, px []uint16) error {
	var err error
	if hostLE {
		_, err = c.im.f.ReadAt(asBytes(px), c.offset(t))
	} else {
		b := c.rawBuf()
		if _, err = c.im.f.ReadAt(*b, c.offset(t)); err == nil {
			for i := range px {
				px[i] = binary.LittleEndian.Uint16((*b)[2*i:])
			}
		}
		c.raws.Put(b)
	}
	if err != nil {
		return fmt.Errorf("tiled: reading tile %v: %w", t, err)
	}
	return nil
}

func (c *cache) write(t Coord, px []uint16) error {
	var err error
	if hostLE {
		_, err = c.im.f.WriteAt(asBytes(px), c.offset(t))
	} else {
		b := c.rawBuf()
		for i, v := range px {
			binary.LittleEndian.PutUint16((*b)[2*i:], v)
		}
		_, err = c.im.f.WriteAt(*b, c.offset(t))
		c.raws.Put(b)
	}
	if err != nil {
		return fmt.Errorf("tiled: writing tile %v: %w", t, err)
	}
	return nil
}

// flush writes every dirty resident tile to the tile file; the tiles stay
// cached. Tiles are pinned while written, so a concurrent evictor does not
// write them too.
func (c *cache) flush() error {
	c.mu.Lock()
	var es []*entry
	for el := c.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*entry)
		e.pins++
		es = append(es, e)
	}
	c.mu.Unlock()
	var err error
	for _, e := range es {
		e.mu.Lock()
		if err == nil && e.dirty {
			if err = c.write(e.c, e.px); err == nil {
				e.dirty = false
				c.mu.Lock()
				c.st.Writes++
				c.mu.Unlock()
			}
		}
		e.mu.Unlock()
	}
	c.mu.Lock()
	for _, e := range es {
		e.pins--
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	return err
}

func (c *cache) stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}
