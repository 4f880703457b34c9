package stitching

import (
	"context"
	"fmt"
	"image"
	"runtime"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// PairTranslation is the translation of one adjacent pair, as
// [RegisterBand] returns them.
type PairTranslation struct {
	Pair        align.Pair
	Translation align.Translation
}

// RegisterFunc computes the translation of every adjacent pair of the grid
// of src (the relative translations, before any optimization), as the
// registration phase of [Stitch] does. src delivers the tiles as they are
// stored; unless ff is nil (align.Options.NoFlatField) the registration
// must correct them with it first, as [RegisterBand] does. A RegisterFunc
// may run the registration anywhere, for instance by bands of rows on
// other processes that read the same files.
type RegisterFunc func(ctx context.Context, src tileio.TileSource, ff *align.FlatField) (*align.Translations, error)

// StitchRegistered is [Stitch] with the registration phase done by
// register: it estimates the flat field (unless opt.NoFlatField) as Stitch
// does, passes it to register, then estimates the stage model, repairs and
// refines the translations register returned with the refinement graph,
// and computes the global positions. When register computes the same
// translations as Stitch's registration (RegisterBand over bands of rows
// that cover the grid does), the Result is the same as Stitch's.
//
// gopt configures the refinement graph; GPU and GPUStreams are ignored
// (the refinement runs on the CPU). An error from register is returned
// wrapped; translations for another grid size are an error.
func StitchRegistered(ctx context.Context, src tileio.TileSource, opt align.Options, gopt GraphOptions, register RegisterFunc) (*Result, error) {
	return stitchRegistered(ctx, src, opt, gopt, register, nil)
}

// stitchRegistered is StitchRegistered with the flat field known (ff not
// nil: the estimate StitchLive made from the same sample tiles) instead
// of estimated again.
func stitchRegistered(ctx context.Context, src tileio.TileSource, opt align.Options, gopt GraphOptions, register RegisterFunc, ff *align.FlatField) (*Result, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	rows, cols := src.Rows(), src.Cols()
	workers, readers, slots, err := gopt.checkedSizes(rows, cols)
	if err != nil {
		return nil, err
	}
	raw := src
	res, src, err := beginWith(ctx, src, opt, runtime.GOMAXPROCS(0), ff)
	if err != nil {
		return nil, err
	}
	rel, err := register(ctx, raw, res.FlatField)
	if err != nil {
		return nil, fmt.Errorf("stitching: registration: %w", err)
	}
	if rel == nil || rel.Rows != rows || rel.Cols != cols {
		return nil, fmt.Errorf("stitching: registration returned translations for another grid than %dx%d", rows, cols)
	}
	res.Relative = rel
	return finish(ctx, res, src, opt, gopt, slots, readers, workers, rel)
}

// RegisterBand registers the band of rows [r0, r1) of the grid of src: it
// computes the translation of the west pair of every tile in those rows
// and of the north pair of every tile in those rows below row 0, so that
// bands covering the rows once register every pair of the grid once. Each
// tile is corrected with ff first unless ff is nil or the identity (pass
// the flat field [StitchRegistered] hands its RegisterFunc, so that the
// translations are the ones [Stitch] computes).
//
// The band runs as [Stitch]'s registration graph (or its GPU graph, with
// gopt.GPU) over rows max(r0-1, 0) to r1-1: the row above the band is
// read and transformed again, for the north pairs of row r0, and its west
// pairs, which belong to the band above, are computed and dropped.
// gopt.Progress counts the pairs of that graph; gopt.Observe sees its
// run as "registration". The pairs come back in the canonical order of
// [align.Pairs].
func RegisterBand(ctx context.Context, src tileio.TileSource, r0, r1 int, ff *align.FlatField, opt align.Options, gopt GraphOptions) ([]PairTranslation, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	rows, cols := src.Rows(), src.Cols()
	if r0 < 0 || r1 > rows || r0 >= r1 || cols < 1 {
		return nil, fmt.Errorf("stitching: band of rows [%d, %d) is not a non-empty band of a %dx%d grid", r0, r1, rows, cols)
	}
	if ff != nil && !ff.Identity() {
		if w, h := src.TileSize(); len(ff.Gains()) != w*h {
			return nil, fmt.Errorf("stitching: band of rows [%d, %d): the flat field has %d gains, tiles are %dx%d", r0, r1, len(ff.Gains()), w, h)
		}
		src = CorrectedSource(src, ff)
	}
	lo := max(r0-1, 0)
	band := bandSource{TileSource: src, lo: lo, rows: r1 - lo}
	rel, err := registerGrid(ctx, band, opt, gopt)
	if err != nil {
		return nil, fmt.Errorf("stitching: band of rows [%d, %d): %w", r0, r1, err)
	}
	var out []PairTranslation
	for _, p := range align.Pairs(band.rows, cols) {
		if p.Row+lo < r0 {
			continue // a west pair of the row above: the band above has it
		}
		out = append(out, PairTranslation{Pair: align.Pair{Row: p.Row + lo, Col: p.Col, Dir: p.Dir}, Translation: rel.At(p)})
	}
	return out, nil
}

// registerGrid is Stitch's registration phase on the grid of src, whose
// tiles are already corrected.
func registerGrid(ctx context.Context, src tileio.TileSource, opt align.Options, gopt GraphOptions) (*align.Translations, error) {
	rows, cols := src.Rows(), src.Cols()
	workers, readers, slots, err := gopt.checkedSizes(rows, cols)
	if err != nil {
		return nil, err
	}
	be := gopt.gpu
	if gopt.GPU && be == nil {
		var err error
		if be, err = newCUDABackend(); err != nil {
			return nil, err
		}
	}
	if be == nil {
		return registerCPU(ctx, src, opt, gopt, slots, readers, workers)
	}
	gpuReaders := readers
	if gopt.Readers <= 0 {
		gpuReaders = max(2, workers)
	}
	g, err := gpuPairGraph(be, src, opt, slots, gpuReaders, workers, gopt.GPUStreams, gopt.weakPairs(workers), nil)
	if err != nil {
		return nil, err
	}
	return runPairs(ctx, "registration", g, rows, cols, gopt)
}

// bandSource is the rows [lo, lo+rows) of a grid, as a grid of their own.
type bandSource struct {
	tileio.TileSource
	lo, rows int
}

func (b bandSource) Rows() int                { return b.rows }
func (b bandSource) Name(row, col int) string { return b.TileSource.Name(row+b.lo, col) }
func (b bandSource) Load(row, col int) (*image.Gray16, error) {
	return b.TileSource.Load(row+b.lo, col)
}
