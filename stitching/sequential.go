package stitching

import (
	"context"
	"fmt"
	"image"
	"runtime"
	"slices"
	"time"

	"github.com/gohtgs/htgs/internal/prefetch"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// Result is the outcome of stitching a grid.
type Result struct {
	Rows, Cols    int
	Width, Height int // tile size
	// Names are the tile names, row-major.
	Names []string
	// Relative are the translations computed by PCIAM+CCF, before any
	// optimization (MIST's "relative positions, no optimization").
	Relative *align.Translations
	// Model is the stage model estimated from Relative.
	Model *align.StageModel
	// Optimized are the translations after repair and refinement; their
	// correlations weight the placement of the tiles.
	Optimized *align.Translations
	// Positions are the global tile positions, row-major.
	Positions []align.Position
	// Uncertainty is the estimated position uncertainty of each tile in
	// pixels, row-major, relative to its best-confirmed neighbour: the
	// smallest, over the tile's pairs correlating at least
	// LowCorrelation, of the pair's Spread (the displacements its NCC
	// surface cannot tell apart, see align.Translation) plus the pair's
	// disagreement with the positions; -1 when no such pair confirms the
	// tile. [Quality.Warnings] names the tiles uncertain by 1 px or more.
	Uncertainty []int
	// Inconsistent lists the pairs whose refined translation the
	// positions contradict: the loops of pairs around them disagree with
	// it, and Optimized carries the displacement the positions imply
	// instead (see [Placement.Optimized]).
	Inconsistent []align.Pair
	// HostRefined is, when the refinement ran on GPUs (GraphOptions.GPU),
	// the number of pairs whose tiles it loaded on the host: those whose
	// best raw NCC is below align.ConfidentCorr, checked for noise and
	// searched on denoised tiles on the CPU. 0 on the CPU.
	HostRefined int
	// RefinedAhead is how many of the HostRefined pairs were refined
	// during the registration, with a stage model estimated from the pairs
	// registered so far, and kept because the final model refines them
	// alike (same start, same align.RefineParams): their result is the one
	// the refinement would compute. 0 on the CPU.
	RefinedAhead int
	// RefinedAgain is, when the refinement ran on GPUs, the number of
	// pairs whose tiles it uploaded again: the pairs whose searches reach
	// outside the NCC surfaces the registration computed around their
	// translations (repaired pairs, boxes widened by the stage model), or
	// every pair without them. 0 on the CPU.
	RefinedAgain int
	// Researched is the number of pair searches the loop-consistency
	// checks of the global solve ran (0 when the refined translations
	// were consistent, or with align.Options.SpanningTree).
	Researched int
	// FlatField is the estimated illumination correction (applied unless
	// it is the identity), nil with align.Options.NoFlatField.
	FlatField *align.FlatField
	// Steps are the times of [Stitch]'s steps after the registration,
	// which are not all task graphs (GraphOptions.Observe reports
	// those), in the order they ended: "stage model and repair", the
	// refinement's ("refinement" on the CPU; with GPUs "refinement from
	// surfaces", and, running at once, "refinement on the host" and
	// "refinement on the GPUs" when they have pairs), and "global solve"
	// (the placement). For profiles; empty from [Sequential].
	Steps []Step
}

// Step is the wall time of one step of a stitch (see Result.Steps).
type Step struct {
	Name    string
	Elapsed time.Duration
}

// step appends step name, which began at from, to r.Steps and returns
// the time it ended.
func (r *Result) step(name string, from time.Time) time.Time {
	now := time.Now()
	r.Steps = append(r.Steps, Step{Name: name, Elapsed: now.Sub(from)})
	return now
}

// GlobalPositions returns the global positions as records for
// [tileio.WriteGlobalPositions], row-major.
func (r *Result) GlobalPositions() []tileio.GlobalPosition {
	out := make([]tileio.GlobalPosition, len(r.Positions))
	for i, p := range r.Positions {
		out[i] = tileio.GlobalPosition{Name: r.Names[i], Corr: p.Corr, X: p.X, Y: p.Y, Col: i % r.Cols, Row: i / r.Cols}
	}
	return out
}

// RelativePositions returns the translations (Optimized if optimized,
// else Relative) as records for [tileio.WriteRelativePositions].
func (r *Result) RelativePositions(optimized bool) []tileio.RelativePosition {
	t := r.Relative
	if optimized {
		t = r.Optimized
	}
	return tileio.RelativePositions(t, func(row, col int) string { return r.Names[row*r.Cols+col] })
}

// walker traverses a grid line by line along its shorter dimension, so
// that a sliding window of one line plus one tile holds every tile whose
// neighbours are still to come.
type walker struct {
	rows, cols int
	rowMajor   bool // lines are rows
}

func newWalker(rows, cols int) walker {
	return walker{rows: rows, cols: cols, rowMajor: cols <= rows}
}

func (w walker) lines() int {
	if w.rowMajor {
		return w.rows
	}
	return w.cols
}

func (w walker) lineLen() int {
	if w.rowMajor {
		return w.cols
	}
	return w.rows
}

func (w walker) coord(line, k int) (r, c int) {
	if w.rowMajor {
		return line, k
	}
	return k, line
}

// prevInLine and prevLine are the pairs formed with the previous tile of
// the same line and with the tile at the same position of the previous
// line.
func (w walker) prevInLine(r, c int) align.Pair {
	if w.rowMajor {
		return align.Pair{Row: r, Col: c, Dir: align.West}
	}
	return align.Pair{Row: r, Col: c, Dir: align.North}
}

func (w walker) prevLine(r, c int) align.Pair {
	if w.rowMajor {
		return align.Pair{Row: r, Col: c, Dir: align.North}
	}
	return align.Pair{Row: r, Col: c, Dir: align.West}
}

// Sequential stitches the grid of src on the calling goroutine: unless
// opt.NoFlatField is set it first estimates the flat field from up to 64
// sample tiles (the ones [EstimateFlatField] takes) and corrects
// every tile with it; then it loads every tile, computes its FFT, computes
// the translation of every west and north pair with PCIAM+CCF
// ([align.Aligner.Align]), then runs [Optimize]. It is the baseline and
// the reference for the task-graph version: all of its work, the flat-field
// fit included, runs on the calling goroutine (the FFTs are FFTW's
// single-threaded plans or gonum's), a one-thread program as in the HTGS
// paper's comparison.
//
// Memory. The grid is traversed line by line along its shorter dimension
// (rows if cols <= rows, else columns). A tile and its spectrum are kept
// only until both later neighbours have used them, so at most
// min(rows, cols)+1 tiles and spectra are live (plus one FFT plan, one
// aligner with a spectrum and a W x H float64 matrix of scratch, and the
// flat field, W x H float32). The optimization pass reads every tile a
// second time with the same bound; the flat-field estimate reads up to 64
// tiles once more. For 1392x1040 tiles a spectrum is 11.6 MB and a tile
// 2.9 MB.
//
// The context is checked between tiles; cancellation returns ctx.Err().
func Sequential(ctx context.Context, src tileio.TileSource, opt align.Options) (*Result, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	res, src, err := beginWorkers(ctx, src, opt, 1)
	if err != nil {
		return nil, err
	}
	rel, err := computeTranslations(ctx, src, opt)
	if err != nil {
		return nil, err
	}
	res.Relative = rel
	o, err := Optimize(ctx, src, rel, opt)
	if err != nil {
		return nil, err
	}
	res.setOptimization(o)
	return res, nil
}

// begin is beginWorkers with GOMAXPROCS workers.
func begin(ctx context.Context, src tileio.TileSource, opt align.Options) (*Result, tileio.TileSource, error) {
	return beginWorkers(ctx, src, opt, runtime.GOMAXPROCS(0))
}

// beginWorkers starts a Result for the grid of src (size, names) and,
// unless opt.NoFlatField, estimates the flat field and returns the
// corrected source to stitch; shared by Sequential (workers 1: everything
// on the calling goroutine) and Stitch (its workers load and fit the
// sample tiles).
func beginWorkers(ctx context.Context, src tileio.TileSource, opt align.Options, workers int) (*Result, tileio.TileSource, error) {
	return beginWith(ctx, src, opt, workers, nil)
}

// beginWith is beginWorkers with the flat field known, when known is not
// nil (the estimate of the same tiles made earlier: StitchLive's), instead
// of estimated again.
func beginWith(ctx context.Context, src tileio.TileSource, opt align.Options, workers int, known *align.FlatField) (*Result, tileio.TileSource, error) {
	rows, cols := src.Rows(), src.Cols()
	w, h := src.TileSize()
	if rows <= 0 || cols <= 0 {
		return nil, nil, fmt.Errorf("stitching: invalid grid size %dx%d", rows, cols)
	}
	res := &Result{Rows: rows, Cols: cols, Width: w, Height: h, Names: make([]string, rows*cols)}
	for r := range rows {
		for c := range cols {
			res.Names[r*cols+c] = src.Name(r, c)
		}
	}
	if !opt.NoFlatField {
		ff := known
		if ff == nil {
			var err error
			if ff, err = estimateFlatFieldWorkers(ctx, src, flatFieldSample(rows, cols, tileio.Acquisition(src)), workers); err != nil {
				return nil, nil, err
			}
		}
		res.FlatField = ff
		if !ff.Identity() {
			src = CorrectedSource(src, ff)
		}
	}
	return res, src, nil
}

// flatFieldTiles is the number of tiles Sequential and Stitch estimate the
// flat field of a large grid from; flatFieldMinSample is the fewest tiles
// a grid of up to flatFieldTiles tiles estimates it from once its last
// acquired line is left out (with fewer it takes every tile).
const (
	flatFieldTiles     = 64
	flatFieldMinSample = 16
)

// flatFieldSample returns the tiles (row-major indices, ascending) that
// Sequential, Stitch and StitchLive estimate the flat field of a grid of
// rows x cols tiles acquired in the order l from, chosen so that a live
// stitch has them all before the last tile and registers the final pairs
// while the rest arrives:
//   - a grid of up to 64 tiles: every tile but those of the line the
//     acquisition ends with ([tileio.Layout.LastLine]: the last row of a
//     numbering by rows, the last column of one by columns, combing or
//     snake, as the origin makes them last), when at least 16 tiles
//     remain; on 6 x 8 tiles acquired by rows, 40 samples, all in 8 tiles
//     before the last. A grid with fewer (a single line, 4 x 4) takes
//     every tile, and its registration waits for the last one.
//   - a larger grid: 64 tiles spread evenly over the first half of its
//     acquisition (its first 64 tiles when that half is smaller), which
//     a live stitch has by mid-plate.
func flatFieldSample(rows, cols int, l tileio.Layout) []int {
	n := rows * cols
	if n <= flatFieldTiles {
		idx := make([]int, 0, n)
		for r := range rows {
			for c := range cols {
				if !l.LastLine(r, c, rows, cols) {
					idx = append(idx, r*cols+c)
				}
			}
		}
		if len(idx) < flatFieldMinSample {
			idx = idx[:0]
			for i := range n {
				idx = append(idx, i)
			}
		}
		return idx
	}
	// The tiles in acquisition order.
	acq := make([]int, n)
	for r := range rows {
		for c := range cols {
			acq[l.Index(r, c, rows, cols)] = r*cols + c
		}
	}
	span := max(flatFieldTiles, (n+1)/2)
	k := min(span, flatFieldTiles)
	idx := make([]int, k)
	for j := range idx {
		idx[j] = acq[j*span/k]
	}
	slices.Sort(idx)
	return idx
}

// EstimateFlatField estimates the flat field of src as Stitch and
// Sequential do (unless [align.Options].NoFlatField), with
// [align.EstimateFlatField] from sample tiles chosen by the order in which
// they were acquired ([tileio.Acquisition]; row by row from the
// upper-left corner unless src says otherwise): on a grid of up to 64
// tiles, every tile but those of the last acquired line (every tile when
// fewer than 16 remain); on a larger grid, 64 tiles spread evenly over
// the first half of the acquisition. The tiles are loaded ahead and
// fitted on up to 8 goroutines; the result does not depend on their
// number.
func EstimateFlatField(ctx context.Context, src tileio.TileSource) (*align.FlatField, error) {
	return estimateFlatFieldWorkers(ctx, src, flatFieldSample(src.Rows(), src.Cols(), tileio.Acquisition(src)), min(8, runtime.GOMAXPROCS(0)))
}

// estimateFlatFieldWorkers estimates the flat field of src from the tiles
// sample names (row-major indices) with [align.EstimateFlatFieldWorkers].
// With workers <= 1 the tiles are loaded and fitted one after the other on
// the calling goroutine; otherwise up to workers tiles are loaded ahead
// and fitted at once. The result does not depend on workers.
func estimateFlatFieldWorkers(ctx context.Context, src tileio.TileSource, sample []int, workers int) (*align.FlatField, error) {
	cols := src.Cols()
	w, h := src.TileSize()
	k := len(sample)
	load := func(j int) (*image.Gray16, error) {
		i := sample[j]
		return loadChecked(src, i/cols, i%cols, w, h)
	}
	if workers <= 1 {
		return align.EstimateFlatFieldWorkers(ctx, w, h, k, 1, load)
	}
	get, stop := prefetch.Ordered(ctx, k, workers, load)
	defer stop()
	return align.EstimateFlatFieldWorkers(ctx, w, h, k, workers, get)
}

// correctedSource is a TileSource whose tiles are flat-field corrected.
type correctedSource struct {
	tileio.TileSource
	ff *align.FlatField
}

// CorrectedSource returns a [tileio.TileSource] that loads tiles from src
// and corrects them with ff (for instance [Result.FlatField], to compose a
// mosaic of the tiles that were stitched).
func CorrectedSource(src tileio.TileSource, ff *align.FlatField) tileio.TileSource {
	return correctedSource{src, ff}
}

// Load loads tile (row, col) from the wrapped source and corrects it.
func (c correctedSource) Load(row, col int) (*image.Gray16, error) {
	w, h := c.TileSize()
	t, err := loadChecked(c.TileSource, row, col, w, h)
	if err != nil {
		return nil, err
	}
	if _, fresh := c.TileSource.(*tileio.TileSet); fresh {
		// A tile set's images are new at each Load: correct in place.
		c.ff.ApplyInPlace(t)
		return t, nil
	}
	return c.ff.Apply(t), nil
}

type slot struct {
	tile *image.Gray16
	spec []complex128
}

func loadChecked(src tileio.TileSource, r, c, w, h int) (*image.Gray16, error) {
	t, err := src.Load(r, c)
	if err != nil {
		return nil, err
	}
	if b := t.Bounds(); b.Dx() != w || b.Dy() != h {
		return nil, fmt.Errorf("stitching: tile %s is %dx%d, expected %dx%d", src.Name(r, c), b.Dx(), b.Dy(), w, h)
	}
	return t, nil
}

// computeTranslations is the PCIAM+CCF pass of Sequential.
func computeTranslations(ctx context.Context, src tileio.TileSource, opt align.Options) (*align.Translations, error) {
	rows, cols := src.Rows(), src.Cols()
	w, h := src.TileSize()
	wk := newWalker(rows, cols)
	plan := align.NewTileFFT(w, h, opt)
	al := align.NewAligner(w, h, opt)
	al.SetWeakPairs(align.NewWeakPairs(1)) // as Stitch's, with one space
	rel := align.NewTranslations(rows, cols)
	n := wk.lineLen()
	// window[k] holds the latest tile at position k: from the current line
	// for positions before the current one, else from the previous line.
	window := make([]slot, n)
	var free [][]complex128
	err := walkTiles(ctx, src, wk, func(line, k, r, c int, t *image.Gray16) {
		var spec []complex128
		if len(free) > 0 {
			spec, free = free[len(free)-1], free[:len(free)-1]
		} else {
			spec = make([]complex128, plan.SpectrumLen())
		}
		plan.Forward(t, spec)
		cur := slot{t, spec}
		if k > 0 {
			p := wk.prevInLine(r, c)
			nb := window[k-1]
			rel.Set(p, al.Align(nb.tile, t, nb.spec, spec, p.Dir))
		}
		if line > 0 {
			p := wk.prevLine(r, c)
			nb := window[k]
			rel.Set(p, al.Align(nb.tile, t, nb.spec, spec, p.Dir))
			// The previous-line tile at k has now served both of its
			// later neighbours.
			free = append(free, nb.spec)
		}
		window[k] = cur
	})
	if err != nil {
		return nil, err
	}
	return rel, nil
}

// walkTiles loads the tiles of src in the order of wk (line by line, so a
// window of one line holds every tile whose later neighbours are still to
// come) and calls visit with each; it stops at the first load error or
// when ctx is done.
func walkTiles(ctx context.Context, src tileio.TileSource, wk walker, visit func(line, k, r, c int, t *image.Gray16)) error {
	w, h := src.TileSize()
	for line := 0; line < wk.lines(); line++ {
		for k := 0; k < wk.lineLen(); k++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			r, c := wk.coord(line, k)
			t, err := loadChecked(src, r, c, w, h)
			if err != nil {
				return err
			}
			visit(line, k, r, c, t)
		}
	}
	return nil
}

// Optimization is the outcome of [Optimize].
type Optimization struct {
	Model    *align.StageModel
	Repaired *align.Translations // after Model.Repair
	// Refined are the translations after refinement.
	Refined *align.Translations
	// Optimized are the refined translations after placement (see
	// [Placement.Optimized]).
	Optimized    *align.Translations
	Positions    []align.Position
	Uncertainty  []int        // see [Result.Uncertainty]
	Inconsistent []align.Pair // see [Result.Inconsistent]
	Researched   int          // see [Result.Researched]
}

// setOptimization copies the outcome of the optimization into r.
func (r *Result) setOptimization(o *Optimization) {
	r.Model, r.Optimized, r.Positions = o.Model, o.Optimized, o.Positions
	r.Uncertainty, r.Inconsistent, r.Researched = o.Uncertainty, o.Inconsistent, o.Researched
}

// optimization assembles an Optimization from its parts.
func optimization(model *align.StageModel, repaired, refined *align.Translations, pl *Placement) *Optimization {
	return &Optimization{Model: model, Repaired: repaired, Refined: refined, Optimized: pl.Optimized, Positions: pl.Positions,
		Uncertainty: pl.Uncertainty, Inconsistent: pl.Inconsistent, Researched: pl.Researched}
}

// Optimize runs MIST's global optimization on the translations rel of the
// grid of src: [align.EstimateModel], [align.StageModel.Repair],
// refinement of every pair with [align.StageModel.Refine] (which reads the
// tiles again, traversing the grid like [Sequential] so that at most
// min(rows, cols)+1 tiles are live), and the placement of the tiles from
// the refined translations: the global, loop-consistent solve over every
// pair (see [Placement]; it loads the tiles of the pairs the loops
// contradict again, keeping up to 256 of them), or MIST's maximum spanning
// tree ([align.GlobalPositions]) with opt.SpanningTree. src must deliver the same pixels the translations
// were computed from (the flat-field corrected source if one was used).
func Optimize(ctx context.Context, src tileio.TileSource, rel *align.Translations, opt align.Options) (*Optimization, error) {
	rows, cols := src.Rows(), src.Cols()
	if rel.Rows != rows || rel.Cols != cols {
		return nil, fmt.Errorf("stitching: translations for a %dx%d grid, source is %dx%d", rel.Rows, rel.Cols, rows, cols)
	}
	w, h := src.TileSize()
	model, err := align.EstimateModel(rel, w, h, opt)
	if err != nil {
		return nil, err
	}
	repaired := model.Repair(rel)
	refined := repaired.Clone()
	wk := newWalker(rows, cols)
	n := wk.lineLen()
	window := make([]*image.Gray16, n)
	ref := align.NewRefiner()
	ref.SetWeakPairs(align.NewWeakPairs(1)) // as Stitch's, with one space
	err = walkTiles(ctx, src, wk, func(line, k, r, c int, t *image.Gray16) {
		if k > 0 {
			p := wk.prevInLine(r, c)
			refined.Set(p, model.Refine(ref, window[k-1], t, repaired.At(p)))
		}
		if line > 0 {
			p := wk.prevLine(r, c)
			refined.Set(p, model.Refine(ref, window[k], t, repaired.At(p)))
		}
		window[k] = t
	})
	if err != nil {
		return nil, err
	}
	pl, err := place(ctx, src, model, refined, opt, 1)
	if err != nil {
		return nil, err
	}
	return optimization(model, repaired, refined, pl), nil
}
