package tileio

import (
	"errors"
	"fmt"
	"image"
	"sync"
)

// LiveTiles is a [TileSource] whose tiles a program hands over in memory
// as it acquires them (a program driving the microscope, with no files):
// [LiveTiles.Add] stores a tile and announces it on Arrivals, for
// stitching.StitchLive. It keeps every tile it is given, as
// [MemoryTiles] does. Its TileSize is that of the first tile added (0 x 0
// before).
type LiveTiles struct {
	rows, cols int
	names      []string
	arrivals   chan Arrival

	mu     sync.Mutex
	tiles  []*image.Gray16
	w, h   int
	closed bool
}

// NewLiveTiles returns an empty rows x cols grid. names, row-major, may be
// nil: tiles are then named "tile_r{R}_c{C}" with 0-based numbers, as
// [NewMemoryTiles] names them.
func NewLiveTiles(rows, cols int, names []string) (*LiveTiles, error) {
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("tileio: invalid grid size %dx%d", rows, cols)
	}
	if names != nil && len(names) != rows*cols {
		return nil, fmt.Errorf("tileio: %d names for a %dx%d grid", len(names), rows, cols)
	}
	if names == nil {
		names = make([]string, rows*cols)
		for i := range names {
			names[i] = fmt.Sprintf("tile_r%d_c%d", i/cols, i%cols)
		}
	}
	return &LiveTiles{rows: rows, cols: cols, names: names, arrivals: make(chan Arrival, rows*cols), tiles: make([]*image.Gray16, rows*cols)}, nil
}

// errLiveClosed is Add's error after Close.
var errLiveClosed = errors.New("tileio: tile added after Close")

// Add stores tile (row, col), which must not change afterwards, and
// announces it on Arrivals. A tile outside the grid, one added twice, one
// whose bounds do not start at (0, 0) or differ from the first tile's,
// and a tile added after Close are errors.
func (l *LiveTiles) Add(row, col int, img *image.Gray16) error {
	if row < 0 || row >= l.rows || col < 0 || col >= l.cols {
		return fmt.Errorf("tileio: tile (%d, %d) outside a %dx%d grid", row, col, l.rows, l.cols)
	}
	if img == nil {
		return fmt.Errorf("tileio: tile (%d, %d) is nil", row, col)
	}
	b := img.Bounds()
	l.mu.Lock()
	defer l.mu.Unlock()
	i := row*l.cols + col
	switch {
	case l.closed:
		return errLiveClosed
	case l.tiles[i] != nil:
		return fmt.Errorf("tileio: tile %s added twice", l.names[i])
	case b.Min != (image.Point{}):
		return fmt.Errorf("tileio: tile %s has bounds %v; want origin (0,0)", l.names[i], b)
	case l.w == 0 && (b.Dx() < 2 || b.Dy() < 2):
		return fmt.Errorf("tileio: tile %s is %dx%d, too small to stitch", l.names[i], b.Dx(), b.Dy())
	case l.w != 0 && (b.Dx() != l.w || b.Dy() != l.h):
		return fmt.Errorf("tileio: tile %s is %dx%d but the first tile is %dx%d", l.names[i], b.Dx(), b.Dy(), l.w, l.h)
	}
	if l.w == 0 {
		l.w, l.h = b.Dx(), b.Dy()
	}
	l.tiles[i] = img
	l.arrivals <- Arrival{Row: row, Col: col} // buffered for every tile
	return nil
}

// Close says that no more tiles will come: Arrivals is closed. Close may
// be called more than once.
func (l *LiveTiles) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.arrivals)
	}
}

// Arrivals announces each tile added, in the order of Add.
func (l *LiveTiles) Arrivals() <-chan Arrival { return l.arrivals }

// Rows returns the number of grid rows.
func (l *LiveTiles) Rows() int { return l.rows }

// Cols returns the number of grid columns.
func (l *LiveTiles) Cols() int { return l.cols }

// TileSize returns the size of the first tile added (0 x 0 before).
func (l *LiveTiles) TileSize() (w, h int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w, l.h
}

// Name returns the name of tile (row, col).
func (l *LiveTiles) Name(row, col int) string { return l.names[row*l.cols+col] }

// Load returns tile (row, col) (shared, not copied), an error before it
// was added.
func (l *LiveTiles) Load(row, col int) (*image.Gray16, error) {
	if row < 0 || row >= l.rows || col < 0 || col >= l.cols {
		return nil, fmt.Errorf("tileio: tile (%d, %d) outside a %dx%d grid", row, col, l.rows, l.cols)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.tiles[row*l.cols+col]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("tileio: tile %s has not been added", l.names[row*l.cols+col])
}
