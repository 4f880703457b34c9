package synth

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"image"
	"io"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gohtgs/htgs/internal/infile"
	"github.com/gohtgs/htgs/internal/outfile"
	"github.com/gohtgs/htgs/stitching/compose"
)

// TruthFile is the name of the ground-truth file written next to the tiles.
const TruthFile = "truth.csv"

// Tile is one rendered tile with its grid coordinates and true position.
type Tile struct {
	// Row and Col are the 0-based grid coordinates.
	Row, Col int
	// X and Y are the true top-left corner in the specimen plane.
	X, Y int
	// Image is the rendered tile.
	Image *image.Gray16
}

// Tiles returns an iterator over all tiles in row-major order. Tiles are
// rendered ahead by Config.Workers goroutines (at most two per worker in
// flight), so memory stays bounded whatever the grid size. On cancellation
// the iterator yields one (Tile{}, ctx.Err()) pair and stops. All goroutines
// are joined before the iteration returns, also when the loop body breaks.
func (s *Scene) Tiles(ctx context.Context) iter.Seq2[Tile, error] {
	return func(yield func(Tile, error) bool) {
		n := s.cfg.Rows * s.cfg.Cols
		workers := s.cfg.Workers
		if workers == 0 {
			workers = runtime.GOMAXPROCS(0)
		}
		workers = max(1, min(workers, n))
		window := 2 * workers

		ctx, cancel := context.WithCancel(ctx)
		type result struct {
			img *image.Gray16
			err error
		}
		results := make([]chan result, n)
		for i := range results {
			results[i] = make(chan result, 1)
		}
		jobs := make(chan int)
		tokens := make(chan struct{}, window)
		var wg sync.WaitGroup
		defer func() {
			cancel() // stop the feeder and the workers, then join them
			wg.Wait()
		}()

		wg.Add(1)
		go func() { // feeder: at most window tiles between rendering and consumption
			defer wg.Done()
			defer close(jobs)
			for i := range n {
				select {
				case tokens <- struct{}{}:
				case <-ctx.Done():
					return
				}
				select {
				case jobs <- i:
				case <-ctx.Done():
					return
				}
			}
		}()
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var sc scratch
				for i := range jobs {
					img, err := s.renderTile(ctx, i/s.cfg.Cols, i%s.cfg.Cols, &sc)
					results[i] <- result{img, err}
				}
			}()
		}
		for i := range n {
			var res result
			select {
			case res = <-results[i]:
			case <-ctx.Done():
				res.err = ctx.Err()
			}
			if res.err != nil {
				yield(Tile{}, res.err)
				return
			}
			<-tokens
			t := Tile{Row: i / s.cfg.Cols, Col: i % s.cfg.Cols, X: s.x[i], Y: s.y[i], Image: res.img}
			if !yield(t, nil) {
				return
			}
		}
	}
}

// Grid is a fully rendered tile grid held in memory.
type Grid struct {
	// Config is the configuration the grid was generated from.
	Config Config
	// Tiles holds the tiles row-major, len Rows*Cols.
	Tiles []*image.Gray16
	// X and Y are the true top-left corners of the tiles in the specimen
	// plane, row-major. Only differences matter to a stitcher: stitchers
	// usually shift their result so that the minimum position is 0.
	X, Y []int
}

// Generate renders the whole grid in memory (2 bytes per pixel per tile; use
// GenerateToDir or Scene.Tiles for grids that do not fit). It uses
// cfg.Workers goroutines, joined before it returns, and honours ctx.
func Generate(ctx context.Context, cfg Config) (*Grid, error) {
	s, err := NewScene(cfg)
	if err != nil {
		return nil, err
	}
	g := &Grid{Config: cfg, Tiles: make([]*image.Gray16, 0, cfg.Rows*cfg.Cols)}
	g.X, g.Y = s.Positions()
	for t, err := range s.Tiles(ctx) {
		if err != nil {
			return nil, err
		}
		g.Tiles = append(g.Tiles, t.Image)
	}
	return g, nil
}

// Tile returns the tile at row r, column c, or nil outside the grid.
func (g *Grid) Tile(r, c int) *image.Gray16 {
	if r < 0 || r >= g.Config.Rows || c < 0 || c >= g.Config.Cols {
		return nil
	}
	return g.Tiles[r*g.Config.Cols+c]
}

// Position returns the true top-left corner of tile (r, c). It panics outside
// the grid.
func (g *Grid) Position(r, c int) (x, y int) {
	if r < 0 || r >= g.Config.Rows || c < 0 || c >= g.Config.Cols {
		panic(fmt.Sprintf("synth: tile (%d, %d) outside %d x %d grid", r, c, g.Config.Rows, g.Config.Cols))
	}
	i := r*g.Config.Cols + c
	return g.X[i], g.Y[i]
}

// DefaultName returns MIST-style tile file names counted from 1:
// img_r001_c001.tif.
func DefaultName(row, col int) string {
	return fmt.Sprintf("img_r%03d_c%03d.tif", row+1, col+1)
}

// WriteDir writes every tile as an uncompressed 16-bit grayscale TIFF into
// dir (created if needed) under name(row, col) (DefaultName when nil), and
// the ground truth to dir/truth.csv.
func (g *Grid) WriteDir(dir string, name func(row, col int) string) error {
	if len(g.Tiles) != g.Config.Rows*g.Config.Cols || len(g.X) != len(g.Tiles) || len(g.Y) != len(g.Tiles) {
		return errors.New("synth: inconsistent grid: tile and position counts do not match Rows*Cols")
	}
	names, err := tileNames(g.Config.Rows, g.Config.Cols, name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, img := range g.Tiles {
		if err := WriteTIFF(filepath.Join(dir, names[i]), img); err != nil {
			return err
		}
	}
	return writeTruth(dir, g.Config, g.X, g.Y, names)
}

// GenerateToDir renders the grid straight to dir (see WriteDir): each of
// cfg.Workers goroutines renders and writes one tile at a time, so memory
// stays at about one tile plus scratch (about 50 bytes per tile pixel) per
// worker whatever the grid size. The goroutines are joined before it returns.
// Files of tiles written before an error or cancellation are left in place;
// truth.csv is written last, only on success.
func GenerateToDir(ctx context.Context, cfg Config, dir string, name func(row, col int) string) error {
	s, err := NewScene(cfg)
	if err != nil {
		return err
	}
	names, err := tileNames(cfg.Rows, cfg.Cols, name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Each worker renders and writes its own tiles, so encoding and file
	// I/O run in parallel too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := cfg.Rows * cfg.Cols
	workers := cfg.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, n))
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sc scratch
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				img, err := s.renderTile(ctx, i/cfg.Cols, i%cfg.Cols, &sc)
				if err == nil {
					err = WriteTIFF(filepath.Join(dir, names[i]), img)
				}
				if err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return writeTruth(dir, cfg, s.x, s.y, names)
}

// tileNames resolves and checks the file names of all tiles.
func tileNames(rows, cols int, name func(row, col int) string) ([]string, error) {
	if name == nil {
		name = DefaultName
	}
	names := make([]string, rows*cols)
	seen := make(map[string]bool, len(names))
	for r := range rows {
		for c := range cols {
			n := name(r, c)
			switch {
			case n == "" || n == "." || n == "..":
				return nil, fmt.Errorf("synth: invalid file name %q for tile (%d, %d)", n, r, c)
			case filepath.Base(n) != n || filepath.IsAbs(n):
				return nil, fmt.Errorf("synth: file name %q for tile (%d, %d) must not contain a directory", n, r, c)
			case strings.ContainsAny(n, "\r\n"):
				return nil, fmt.Errorf("synth: file name %q for tile (%d, %d) holds a line break", n, r, c)
			case n == TruthFile:
				return nil, fmt.Errorf("synth: file name %q for tile (%d, %d) collides with the truth file", n, r, c)
			case seen[n]:
				return nil, fmt.Errorf("synth: file name %q used for more than one tile (again at (%d, %d))", n, r, c)
			}
			seen[n] = true
			names[r*cols+c] = n
		}
	}
	return names, nil
}

// WriteTIFF writes img as an uncompressed 16-bit grayscale TIFF (it is
// compose.WriteTIFF).
func WriteTIFF(path string, img *image.Gray16) error { return compose.WriteTIFF(path, img) }

// TruthEntry is one line of truth.csv.
type TruthEntry struct {
	// Row and Col are the 0-based grid coordinates.
	Row, Col int
	// X and Y are the true top-left corner in the specimen plane.
	X, Y int
	// File is the tile's file name relative to the directory of truth.csv.
	File string
}

// truthColumns are the columns of truth.csv, in order.
const truthColumns = "row,col,x,y,file"

func writeTruth(dir string, cfg Config, xs, ys []int, names []string) error {
	entries := make([]TruthEntry, len(names))
	for i := range names {
		entries[i] = TruthEntry{Row: i / cfg.Cols, Col: i % cfg.Cols, X: xs[i], Y: ys[i], File: names[i]}
	}
	// Atomically: a truth.csv is complete or absent, never half written.
	return outfile.WriteFile(filepath.Join(dir, TruthFile), func(w io.Writer) error { return WriteTruth(w, entries) })
}

// WriteTruth writes entries in the truth.csv format: a header line
// "row,col,x,y,file" followed by one line per tile (row and col 0-based).
// File names must be non-empty and hold no line break (CSV would not read
// them back as written).
func WriteTruth(w io.Writer, entries []TruthEntry) error {
	for i, e := range entries {
		if err := checkTruthName(e.File); err != nil {
			return fmt.Errorf("synth: truth: entry %d (tile (%d, %d)): %w", i, e.Row, e.Col, err)
		}
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(strings.Split(truthColumns, ",")); err != nil {
		return err
	}
	for _, e := range entries {
		rec := []string{strconv.Itoa(e.Row), strconv.Itoa(e.Col), strconv.Itoa(e.X), strconv.Itoa(e.Y), e.File}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// checkTruthName refuses file names that truth.csv cannot hold: empty, or
// with a line break (CSV turns "\r\n" inside a quoted field into "\n").
func checkTruthName(name string) error {
	switch {
	case name == "":
		return errors.New("empty file name")
	case strings.ContainsAny(name, "\r\n"):
		return fmt.Errorf("file name %q holds a line break", name)
	}
	return nil
}

// ReadTruth reads a truth.csv file written by WriteDir or GenerateToDir.
func ReadTruth(path string) ([]TruthEntry, error) {
	f, err := infile.Open(path) // a FIFO or a folder is refused, not waited on
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := ParseTruth(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return entries, nil
}

// ParseTruth parses the truth.csv format (see WriteTruth). It rejects a
// missing or different header, malformed or negative numbers, empty file
// names or names with line breaks, and duplicate (row, col) pairs, naming
// the offending line.
func ParseTruth(r io.Reader) ([]TruthEntry, error) {
	cr := csv.NewReader(r)
	header := strings.Split(truthColumns, ",")
	cr.FieldsPerRecord = len(header)
	head, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("synth: truth: empty file, want header row,col,x,y,file")
	}
	if err != nil {
		return nil, fmt.Errorf("synth: truth: %w", err)
	}
	for i, h := range header {
		if head[i] != h {
			return nil, fmt.Errorf("synth: truth: line 1: header %q, want row,col,x,y,file", head)
		}
	}
	var out []TruthEntry
	seen := map[[2]int]int{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("synth: truth: %w", err)
		}
		line, _ := cr.FieldPos(0)
		var v [4]int
		for k := range v {
			n, err := strconv.Atoi(rec[k])
			if err != nil {
				return nil, fmt.Errorf("synth: truth: line %d: %s %q is not an integer", line, header[k], rec[k])
			}
			if k < 2 && n < 0 {
				return nil, fmt.Errorf("synth: truth: line %d: negative %s %d", line, header[k], n)
			}
			v[k] = n
		}
		if err := checkTruthName(rec[4]); err != nil {
			return nil, fmt.Errorf("synth: truth: line %d: %w", line, err)
		}
		key := [2]int{v[0], v[1]}
		if prev, ok := seen[key]; ok {
			return nil, fmt.Errorf("synth: truth: line %d: tile (%d, %d) already given on line %d", line, v[0], v[1], prev)
		}
		seen[key] = line
		out = append(out, TruthEntry{Row: v[0], Col: v[1], X: v[2], Y: v[3], File: rec[4]})
	}
	if len(out) == 0 {
		return nil, errors.New("synth: truth: no tiles after the header")
	}
	return out, nil
}
