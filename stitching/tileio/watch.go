package tileio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/image/tiff"

	"github.com/gohtgs/htgs/internal/infile"
)

// Arrival is a tile of a grid that has become complete: a [Watcher]
// delivers one when the tile's file decodes and no longer changes.
type Arrival struct{ Row, Col int }

// WatchOptions configure [WatchTiles].
type WatchOptions struct {
	// Poll is the interval at which the folder is listed. Where inotify
	// is used (Linux) a tile enters as soon as its writer closes it and
	// the listing is only a safety net, for tiles whose writer never
	// closes them and for events the kernel dropped: 0 means 1 s there,
	// and 100 ms when polling.
	Poll time.Duration
	// Polling lists the folder every Poll even where inotify is
	// available.
	Polling bool
	// MaxPixels is the largest tile accepted, as for [OpenTileSetLimit]
	// (0: [DefaultMaxTilePixels], negative: no limit).
	MaxPixels int64
}

// Watcher follows a folder into which an acquisition writes the tiles of
// a grid, named by a [Pattern], and delivers each tile on Arrivals once
// its file is complete, in whatever order the tiles come. A tile is
// complete when its file decodes (a TIFF or PNG cut short does not) and
// its size and modification time are the same before and after it is
// read; when polling, they must also be those of the previous listing,
// so that a file still growing between two listings waits for the next.
// With inotify a tile is looked at as soon as its writer closes it or
// renames it into place, so a tile written in several pieces, closed in
// between, is retried at each close.
//
// The Watcher is the [TileSource] of the tiles that have arrived: its
// TileSize is that of the first tile (0 x 0 before it), and every later
// tile must have that size and bit depth, or the watch ends with an
// error ([Watcher.Err]). Load reads a tile's file again, as a [TileSet]
// does.
type Watcher struct {
	dir        string
	pattern    Pattern
	rows, cols int
	opt        WatchOptions
	names      []string       // row-major
	index      map[string]int // tile file name -> row-major index
	inotify    bool
	arrivals   chan Arrival
	stop       context.CancelFunc
	wg         sync.WaitGroup
	events     *eventSource // nil when polling

	mu      sync.Mutex
	tiles   []watchTile
	arrived int
	w, h    int
	model   color.Model
	first   string
	err     error
}

// watchTile is what the watcher knows of one tile's file.
type watchTile struct {
	arrived bool
	seen    bool // size and mod are those of the last look
	size    int64
	mod     time.Time
	why     error // why the file, which exists, is not in yet
	failed  bool  // the file, as seen, does not decode: not read again until it changes
}

// errGrowing is why a tile whose file changed since the last look waits.
var errGrowing = errors.New("the file is still changing")

// WatchTiles starts following dir (which must exist) for the rows x cols
// tiles named by pattern, until every tile has arrived, ctx is done or
// Close is called. Tiles already in the folder are delivered first.
func WatchTiles(ctx context.Context, dir string, pattern Pattern, rows, cols int, opt WatchOptions) (*Watcher, error) {
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("tileio: watch: invalid grid size %dx%d", rows, cols)
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("tileio: watch: tile folder: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("tileio: watch: tile folder %s: not a folder", dir)
	}
	w := &Watcher{dir: dir, pattern: pattern, rows: rows, cols: cols, opt: opt,
		names: make([]string, rows*cols), index: make(map[string]int, rows*cols),
		tiles: make([]watchTile, rows*cols), arrivals: make(chan Arrival, rows*cols)}
	flat := true // every name in dir itself: one inotify watch sees them all
	for r := range rows {
		for c := range cols {
			n := pattern.Name(r, c, rows, cols)
			if !filepath.IsLocal(n) {
				return nil, fmt.Errorf("tileio: watch: tile name %s leaves the tile folder %s", n, dir)
			}
			if _, dup := w.index[n]; dup {
				return nil, fmt.Errorf("tileio: watch: two tiles are named %s", n)
			}
			w.names[r*cols+c], w.index[n] = n, r*cols+c
			flat = flat && !strings.ContainsAny(n, `/\`)
		}
	}
	if flat && !opt.Polling {
		ev, err := newEventSource(dir)
		if err == nil {
			w.events, w.inotify = ev, true
		}
	}
	if w.opt.Poll <= 0 {
		w.opt.Poll = 100 * time.Millisecond
		if w.inotify {
			w.opt.Poll = time.Second
		}
	}
	ctx, w.stop = context.WithCancel(ctx)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer close(w.arrivals)
		w.run(ctx)
	}()
	return w, nil
}

// Mode says how the folder is followed: "inotify" or "polling every D".
func (w *Watcher) Mode() string {
	if w.inotify {
		return fmt.Sprintf("inotify (and a listing every %v as a safety net)", w.opt.Poll)
	}
	return fmt.Sprintf("polling every %v", w.opt.Poll)
}

// Arrivals delivers each tile once, when it is complete. It is closed
// when every tile has arrived, when the watch is stopped (ctx, Close) and
// when it fails ([Watcher.Err]).
func (w *Watcher) Arrivals() <-chan Arrival { return w.arrivals }

// Err is the error that ended the watch (a tile of another size or bit
// depth than the first), nil if none.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close stops the watch and waits for it to end.
func (w *Watcher) Close() error {
	w.stop()
	w.wg.Wait()
	return nil
}

// MissingTile is a tile that has not arrived.
type MissingTile struct {
	Row, Col int
	Name     string
	// Why is nil when there is no file of that name, else why the file
	// is not in yet (it does not decode, it was still changing).
	Why error
}

// Missing returns the tiles that have not arrived, row-major.
func (w *Watcher) Missing() []MissingTile {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []MissingTile
	for i, t := range w.tiles {
		if !t.arrived {
			out = append(out, MissingTile{Row: i / w.cols, Col: i % w.cols, Name: w.names[i], Why: t.why})
		}
	}
	return out
}

// Changed returns the names of the tiles whose file has changed (its size
// or modification time) or gone since the tile arrived, row-major: a tile
// acquired again, say. What was computed from the tile as it arrived is
// not what its file now holds.
func (w *Watcher) Changed() []string {
	w.mu.Lock()
	tiles := slices.Clone(w.tiles)
	w.mu.Unlock()
	var out []string
	for i, t := range tiles {
		if !t.arrived {
			continue
		}
		fi, err := os.Stat(filepath.Join(w.dir, w.names[i]))
		if err != nil || fi.Size() != t.size || !fi.ModTime().Equal(t.mod) {
			out = append(out, w.names[i])
		}
	}
	return out
}

// Rows returns the number of grid rows.
func (w *Watcher) Rows() int { return w.rows }

// Cols returns the number of grid columns.
func (w *Watcher) Cols() int { return w.cols }

// TileSize returns the size of the first tile that arrived (0 x 0 before).
func (w *Watcher) TileSize() (int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w, w.h
}

// Name returns the file name of tile (row, col).
func (w *Watcher) Name(row, col int) string { return w.names[row*w.cols+col] }

// Path returns the path of tile (row, col).
func (w *Watcher) Path(row, col int) string { return filepath.Join(w.dir, w.Name(row, col)) }

// Load reads tile (row, col) with [LoadTileLimit] and checks its size.
func (w *Watcher) Load(row, col int) (*image.Gray16, error) {
	if row < 0 || row >= w.rows || col < 0 || col >= w.cols {
		return nil, fmt.Errorf("tileio: tile (%d, %d) outside a %dx%d grid", row, col, w.rows, w.cols)
	}
	p := w.Path(row, col)
	img, err := LoadTileLimit(p, w.opt.MaxPixels)
	if err != nil {
		return nil, err
	}
	tw, th := w.TileSize()
	if b := img.Bounds(); b.Dx() != tw || b.Dy() != th {
		return nil, fmt.Errorf("tileio: tile %s is %dx%d, expected %dx%d", p, b.Dx(), b.Dy(), tw, th)
	}
	return img, nil
}

// run follows the folder until every tile has arrived, ctx is done or a
// tile is refused.
func (w *Watcher) run(ctx context.Context) {
	var events <-chan string
	if w.events != nil {
		defer w.events.close() // ends the reader
		events = w.events.names
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.events.read(ctx)
		}()
	}
	tick := time.NewTicker(w.opt.Poll)
	defer tick.Stop()
	// With inotify, a file already there when the watch starts is looked
	// at as if its writer had just closed it: the watch was set up first,
	// so any later write produces an event.
	if !w.scan(w.inotify) {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !w.scan(false) {
				return
			}
		case name, ok := <-events:
			if !ok {
				events = nil // the events failed: the listings go on
				continue
			}
			if name == "" { // events were dropped
				if !w.scan(false) {
					return
				}
				continue
			}
			if i, known := w.index[name]; known && !w.check(i, true) {
				return
			}
		}
	}
}

// scan lists the folders of the tiles and looks at every file of a tile
// that has not arrived; it returns false once the watch is over (every
// tile in, or an error).
func (w *Watcher) scan(closed bool) bool {
	dirs := map[string]bool{}
	for i, n := range w.names {
		if !w.tileArrived(i) {
			dirs[filepath.Dir(n)] = true
		}
	}
	for d := range dirs {
		ents, err := os.ReadDir(filepath.Join(w.dir, d))
		if err != nil {
			continue // a folder still to be created, or gone for a moment
		}
		for _, e := range ents {
			i, known := w.index[filepath.Join(d, e.Name())]
			if d == "." {
				i, known = w.index[e.Name()]
			}
			if known && !w.tileArrived(i) && !w.check(i, closed) {
				return false
			}
		}
	}
	return !w.done()
}

func (w *Watcher) tileArrived(i int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tiles[i].arrived
}

// done reports whether the watch is over.
func (w *Watcher) done() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err != nil || w.arrived == len(w.tiles)
}

// check looks at the file of tile i and delivers the tile if it is
// complete; closed says its writer has just closed it (or renamed it into
// place). It returns false once the watch is over.
func (w *Watcher) check(i int, closed bool) bool {
	p := filepath.Join(w.dir, w.names[i])
	fi, err := os.Stat(p)
	w.mu.Lock()
	t := &w.tiles[i]
	if t.arrived {
		w.mu.Unlock()
		return true
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		t.seen, t.why = false, nil
		w.mu.Unlock()
		return true
	case err != nil:
		t.seen, t.why = false, err
		w.mu.Unlock()
		return true
	}
	changed := !t.seen || fi.Size() != t.size || !fi.ModTime().Equal(t.mod)
	t.seen, t.size, t.mod = true, fi.Size(), fi.ModTime()
	if changed {
		t.failed = false
	}
	if (changed && !closed) || t.failed {
		if changed {
			t.why = errGrowing
		}
		w.mu.Unlock()
		return true
	}
	w.mu.Unlock()

	img, cfg, err := w.readTile(p, fi)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		t.why = err
		t.failed = err != errGrowing
		return true
	}
	b := img.Bounds()
	if w.first == "" {
		w.first, w.w, w.h, w.model = w.names[i], b.Dx(), b.Dy(), cfg.ColorModel
		if w.w < 2 || w.h < 2 {
			w.err = fmt.Errorf("tileio: tile %s is %dx%d, too small to stitch", p, w.w, w.h)
			return false
		}
	} else if b.Dx() != w.w || b.Dy() != w.h {
		w.err = fmt.Errorf("tileio: tile %s is %dx%d but %s is %dx%d; all tiles must have the same size", p, b.Dx(), b.Dy(), w.first, w.w, w.h)
		return false
	} else if cfg.ColorModel != w.model {
		w.err = fmt.Errorf("tileio: tile %s is %s but %s is %s; all tiles of a grid must have one bit depth (convert them first)",
			p, pixelType(cfg.ColorModel), w.first, pixelType(w.model))
		return false
	}
	t.arrived, t.why = true, nil
	w.arrived++
	w.arrivals <- Arrival{Row: i / w.cols, Col: i % w.cols} // buffered for every tile
	return w.arrived < len(w.tiles)
}

// readTile reads and decodes the file at path, which had the size and
// modification time of fi, and checks that it still has them.
func (w *Watcher) readTile(path string, fi os.FileInfo) (*image.Gray16, image.Config, error) {
	data, err := infile.ReadFile(path)
	if err != nil {
		return nil, image.Config{}, err
	}
	after, err := os.Stat(path)
	if err != nil {
		return nil, image.Config{}, err
	}
	if after.Size() != fi.Size() || !after.ModTime().Equal(fi.ModTime()) || int64(len(data)) != fi.Size() {
		return nil, image.Config{}, errGrowing
	}
	img, err := decodeTileBytes(data, w.opt.MaxPixels)
	if err != nil {
		return nil, image.Config{}, err
	}
	cfg, err := dataConfig(data)
	if err != nil {
		return nil, image.Config{}, err
	}
	return img, cfg, nil
}

// dataConfig is the header of the TIFF or PNG image in data.
func dataConfig(data []byte) (image.Config, error) {
	switch sniff(data) {
	case formatTIFF:
		return tiff.DecodeConfig(bytes.NewReader(data))
	case formatPNG:
		return png.DecodeConfig(bytes.NewReader(data))
	}
	return image.Config{}, errors.New("unsupported or corrupt file: neither TIFF nor PNG")
}
