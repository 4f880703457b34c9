package main

// A worker's tiles with -tiles-via store: each band copies from the object
// store only the tiles it registers, and reads them from a folder of its
// own.

import (
	"cmp"
	"context"
	"fmt"
	"image"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gohtgs/htgs/stitching/tileio"
)

// pattern returns the file name pattern of j's grid, with its layout and
// time slice.
func (j *bandJob) pattern() (tileio.Pattern, error) {
	pat, err := tileio.ParsePattern(j.Pattern, j.Start)
	if err != nil {
		return pat, err
	}
	num, err := tileio.ParseNumbering(j.Numbering)
	if err != nil {
		return pat, err
	}
	org, err := tileio.ParseOrigin(j.Origin)
	if err != nil {
		return pat, err
	}
	pat.Layout = tileio.Layout{Numbering: num, Origin: org}
	return pat.AtTime(j.Time), nil
}

// clamp holds the worker's own limit on a tile's pixels whatever j asks
// (-1, no limit, included): a client cannot make it decode a tile of any
// size.
func (s *tileSets) clamp(j *bandJob) {
	if s.maxPixels > 0 {
		asked := j.MaxTilePixels // 0: the default, negative: no limit
		if asked == 0 {
			asked = tileio.DefaultMaxTilePixels
		}
		if asked < 0 || asked > s.maxPixels {
			j.MaxTilePixels = s.maxPixels
		}
	}
}

// stagedTiles is the folder of this worker holding the tiles it copied
// from the object store bucket of the last grid a band named (-tiles-via
// store). A band copies only the tiles it reads, its rows and the row
// above; the bands of one grid share the copies.
type stagedTiles struct {
	mu     sync.Mutex
	bucket string
	dir    string
	have   map[string]bool // the tiles copied into dir
	// parallel is how many tiles a band copies at a time (0:
	// stageParallel).
	parallel int
}

// maxStagedFile bounds one tile file copied from the object store.
const maxStagedFile = 1 << 30

// stageParallel is how many tiles a band copies at a time.
const stageParallel = 4

// band returns the tiles of j's band (rows max(Row0-1, 0) to Row1-1; the
// other rows are refused), copying those not yet here from the bucket
// j.Store. Every tile name must be a plain file name: nothing a client
// names can land outside the folder.
func (st *stagedTiles) band(ctx context.Context, nc *nats.Conn, sets *tileSets, j *bandJob) (tileio.TileSource, error) {
	sets.clamp(j)
	pat, err := j.pattern()
	if err != nil {
		return nil, err
	}
	if j.Rows < 1 || j.Cols < 1 || j.Row0 < 0 || j.Row1 > j.Rows || j.Row0 >= j.Row1 {
		return nil, fmt.Errorf("band of rows [%d, %d) is not a band of a %dx%d grid", j.Row0, j.Row1, j.Rows, j.Cols)
	}
	b := &stagedBand{pat: pat, rows: j.Rows, cols: j.Cols, lo: max(j.Row0-1, 0), hi: j.Row1, maxPixels: j.MaxTilePixels}
	var names []string
	for r := b.lo; r < b.hi; r++ {
		for c := range b.cols {
			name := b.Name(r, c)
			if !filepath.IsLocal(name) || filepath.Base(name) != name || strings.ContainsAny(name, `/\`) {
				return nil, fmt.Errorf("tile %q is not a plain file name", name)
			}
			names = append(names, name)
		}
	}
	if b.dir, err = st.fetch(ctx, nc, j.Store, names); err != nil {
		return nil, fmt.Errorf("tiles from the object store: %w", err)
	}
	first, err := tileio.LoadTileLimit(filepath.Join(b.dir, names[0]), b.maxPixels)
	if err != nil {
		return nil, err
	}
	b.w, b.h = first.Bounds().Dx(), first.Bounds().Dy()
	return b, nil
}

// fetch copies the objects names of bucket not yet in the folder (a new
// one when the bucket changes) and returns the folder.
func (st *stagedTiles) fetch(ctx context.Context, nc *nats.Conn, bucket string, names []string) (string, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.bucket != bucket {
		st.closeLocked()
		dir, err := os.MkdirTemp("", "stitch-worker-tiles-")
		if err != nil {
			return "", err
		}
		st.bucket, st.dir, st.have = bucket, dir, map[string]bool{}
	}
	var missing []string
	for _, name := range names {
		if !st.have[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return st.dir, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		return "", fmt.Errorf("bucket %s: %w", bucket, err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs = make([]error, len(missing))
		next int
	)
	for range min(cmp.Or(st.parallel, stageParallel), len(missing)) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(missing) {
					return
				}
				path := filepath.Join(st.dir, missing[i])
				if err := stageObject(ctx, obs, missing[i], path); err != nil {
					os.Remove(path)
					errs[i] = fmt.Errorf("bucket %s: %s: %w", bucket, missing[i], err)
				}
			}
		})
	}
	wg.Wait()
	for i, name := range missing {
		if errs[i] != nil {
			return "", errs[i]
		}
		st.have[name] = true
	}
	return st.dir, nil
}

// stageObject copies the object name of obs into the new file path,
// streamed, and refuses more than maxStagedFile bytes whatever the
// object's listing said.
func stageObject(ctx context.Context, obs jetstream.ObjectStore, name, path string) error {
	r, err := obs.Get(ctx, name)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, maxStagedFile+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > maxStagedFile {
		err = fmt.Errorf("more than %d bytes", int64(maxStagedFile))
	}
	return err
}

// close removes the folder.
func (st *stagedTiles) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closeLocked()
}

func (st *stagedTiles) closeLocked() {
	if st.dir != "" {
		os.RemoveAll(st.dir)
		st.bucket, st.dir, st.have = "", "", nil
	}
}

// stagedBand is the tile source of one band from the staged folder: the
// whole grid's size and names, and the tiles of rows [lo, hi).
type stagedBand struct {
	dir        string
	pat        tileio.Pattern
	rows, cols int
	lo, hi     int
	w, h       int
	maxPixels  int64
}

func (b *stagedBand) Rows() int                { return b.rows }
func (b *stagedBand) Cols() int                { return b.cols }
func (b *stagedBand) TileSize() (w, h int)     { return b.w, b.h }
func (b *stagedBand) Name(row, col int) string { return b.pat.Name(row, col, b.rows, b.cols) }

// Load reads tile (row, col), one of the band's, as a tile set does.
func (b *stagedBand) Load(row, col int) (*image.Gray16, error) {
	if row < b.lo || row >= b.hi || col < 0 || col >= b.cols {
		return nil, fmt.Errorf("tile (%d, %d) is not one of the band's rows %d to %d", row, col, b.lo, b.hi-1)
	}
	p := filepath.Join(b.dir, b.Name(row, col))
	img, err := tileio.LoadTileLimit(p, b.maxPixels)
	if err != nil {
		return nil, err
	}
	if r := img.Bounds(); r.Dx() != b.w || r.Dy() != b.h {
		return nil, fmt.Errorf("tileio: tile %s is %dx%d, expected %dx%d", p, r.Dx(), r.Dy(), b.w, b.h)
	}
	return img, nil
}
