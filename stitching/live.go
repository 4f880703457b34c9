package stitching

import (
	"context"
	"fmt"
	"image"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// LiveOptions configure [StitchLive].
type LiveOptions struct {
	// Update, if set, is called on StitchLive's goroutine with the state
	// of the stitch as tiles arrive and pairs are registered, at most
	// once per Every, once more when the tiles stop coming (every tile
	// in, the arrivals ended without them, or ctx done), and, when the
	// stitch succeeds, a last time with every pair registered and the
	// Result's global positions. It must not keep the state's Positions.
	Update func(LiveState)
	// Every is the shortest interval between two Updates; 0 means 250 ms.
	Every time.Duration
	// Tile, if set, is called with each tile as the final registration
	// loads it, corrected with the flat field of the Result
	// (Result.FlatField; uncorrected when it is nil or the identity): the
	// pixels a mosaic of the Result takes from that tile, handed over
	// while the tile is in hand so that the mosaic need not load and
	// correct it again. It is called from the registration's workers,
	// concurrently, and may see a tile more than once (loaded again after
	// it left the pool); it must not modify img, and may keep a copy, not
	// img. It is not called for a registration that runs after the last
	// tile: when the flat field's sample tiles are all in only then, or
	// for the pairs that go to the GPUs then (see StitchLive).
	Tile func(row, col int, img *image.Gray16)

	// spectra, if set, counts the spectra the run allocates (tests).
	spectra *atomic.Int64
	// refinedAgain, if set, counts the pairs the end of the run had to
	// refine: not refined ahead with the final model (tests).
	refinedAgain *atomic.Int64
	// ahead, if set, is called after each worker's result with the number
	// of final pairs refined ahead with the current model (tests).
	ahead func(refined, final int)
	// toGPU, if set, is called when the last tile is in with the number
	// of final pairs not yet registered, and whether they go to the GPUs
	// (tests).
	toGPU func(backlog int, gpu bool)
}

// LiveState is the state of a [StitchLive] run.
type LiveState struct {
	// Tiles is the number of tiles of the grid, Arrived how many have
	// arrived.
	Tiles, Arrived int
	// Pairs is the number of adjacent pairs; Registered of them have
	// their final translation, and Provisional more have one computed
	// before the flat field was known (their tiles uncorrected), which
	// place the tiles for now and are computed again once it is.
	Pairs, Registered, Provisional int
	// Placed is the number of tiles in Positions.
	Placed int
	// FlatFieldTiles is the number of sample tiles the flat field is
	// estimated from (0 with align.Options.NoFlatField), FlatFieldArrived
	// how many of them have arrived; every registration waits for all of
	// them, as the offline stitch's does.
	FlatFieldTiles, FlatFieldArrived int
	// OnGPU is set, once every tile is in, when the registration still
	// to do runs on the GPUs, as Stitch on the finished grid
	// (GraphOptions.GPU; see StitchLive).
	OnGPU bool
	// Positions are the provisional global positions of the tiles joined
	// so far into the largest group of tiles linked by registered pairs,
	// row-major: each tile placed along a maximum spanning tree of the
	// pairs' correlations, as MIST places them, the group's upper-left
	// corner at (0, 0). Corr is the best correlation of the tile's pairs.
	Positions []tileio.GlobalPosition
}

// IncompleteError is the error of a [StitchLive] run whose tiles stopped
// coming before every tile of the grid had arrived.
type IncompleteError struct {
	// Missing are the tiles that did not arrive, row-major, with their
	// names.
	Missing []tileio.Arrival
	Names   []string
	// Tiles is the number of tiles of the grid.
	Tiles int
	// Cause is why the tiles stopped: ctx's error, or nil when the
	// arrivals ended.
	Cause error
}

// Error names the missing tiles (the first 10 of them).
func (e *IncompleteError) Error() string {
	why := "the arrivals ended"
	if e.Cause != nil {
		why = e.Cause.Error()
	}
	names := e.Names
	more := ""
	if len(names) > 10 {
		names, more = names[:10], fmt.Sprintf(" and %d more", len(e.Names)-10)
	}
	return fmt.Sprintf("stitching: %s with %d of %d tiles missing: %s%s", why, len(e.Missing), e.Tiles, strings.Join(names, ", "), more)
}

// Unwrap returns Cause.
func (e *IncompleteError) Unwrap() error { return e.Cause }

// StitchLive stitches the grid of src while its tiles are acquired: each
// tile is announced on arrivals once src can load it, in any order, and
// the registration of every adjacent pair (FFT, PCIAM and CCF) runs as
// soon as both of its tiles are in. Once every tile has arrived, the
// rest runs as in [Stitch] (stage model, repair, refinement, global
// solve), and the Result is the one [Stitch] returns for the finished
// grid, translation for translation.
//
// The flat field (unless opt.NoFlatField) is estimated as Stitch does
// (see [EstimateFlatField]), so the final registration starts only when
// all of its sample tiles have arrived. They are chosen by the order in
// which src says its tiles are acquired ([tileio.Acquisition]: a
// [tileio.Watcher]'s pattern's Layout, or [tileio.WithAcquisition]): on a
// grid of up to 64 tiles they are in once the last line of tiles starts
// (unless fewer than 16 tiles precede it: then with the last tile); on
// a larger grid, by its middle. Tiles that come in another order may
// hold the samples back longer. Until then each pair is registered on
// uncorrected tiles, for the provisional positions only (see
// [LiveState]), and again with the flat field once it is known (when
// that is at the last tile, by Stitch on the finished grid). A flat
// field known beforehand removes that wait: give the tiles corrected
// with it ([CorrectedSource]) and opt.NoFlatField.
//
// With gopt.GPU the pairs are registered on the CPU cores while the tiles
// come, as without it: a GPU finishes the whole grid in a few seconds,
// but a microscope's tiles come far slower than the cores register them,
// and what is left after the last tile is then only its own pairs and
// the global steps. The GPUs take over when the cores have fallen
// behind: if, once the last tile is in, more than a tenth of the pairs
// (and more than Workers) still wait for their final registration,
// Stitch runs on the GPUs on the finished grid instead, and the cores
// stop. The Result is the same either way (the GPU registration and
// refinement give the CPU's translations to the last bit). StitchLive
// checks at once that a GPU is usable, as [CheckGPU] does.
//
// src's TileSize must be that of the tiles once the first arrival is
// announced (a [tileio.Watcher], for a folder, and a [tileio.LiveTiles],
// for tiles handed over in memory, are such sources), and a tile must not
// change after its arrival; an arrival outside the grid is an error, a
// repeated one is ignored. At most as many tiles and spectra as
// GraphOptions.PoolSize says (at least 2 per worker and one more) are
// held at once, whatever the order of arrival: a tile that left them
// and is needed again, by a pair whose other tile arrived much later, is
// loaded and transformed again.
//
// When arrivals is closed, or ctx is done, before every tile has arrived,
// StitchLive returns an [*IncompleteError] naming the missing tiles, after
// a last Update.
func StitchLive(ctx context.Context, src tileio.TileSource, arrivals <-chan tileio.Arrival, opt align.Options, gopt GraphOptions, lopt LiveOptions) (*Result, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	rows, cols := src.Rows(), src.Cols()
	workers, _, slots, err := gopt.checkedSizes(rows, cols)
	if err != nil {
		return nil, err
	}
	if lopt.Every <= 0 {
		lopt.Every = 250 * time.Millisecond
	}
	if gopt.GPU && gopt.gpu == nil {
		// Fail before the first tile, not after the last one.
		if gopt.gpu, err = newCUDABackend(); err != nil {
			return nil, err
		}
	}
	e := newLive(src, opt, gopt, lopt, workers, slots)
	err = e.run(ctx, arrivals)
	// The workers drop what is queued; a job in hand (a refinement
	// ahead no longer needed) ends while the rest of the stitch runs.
	e.stop()
	defer e.wg.Wait()
	if err != nil {
		return nil, err
	}
	var res *Result
	if e.offline {
		// Stitch's registration (GPU: and refinement), on the finished grid.
		res, err = Stitch(ctx, src, opt, gopt)
	} else {
		// The rest of the stitch as for a registration done elsewhere,
		// with the flat field the final pairs were registered with (the
		// estimate StitchRegistered would make from the same tiles).
		// The pairs refined ahead, with the final model's parameters and
		// start, are not refined again.
		gopt.refined = func(p align.Pair, start align.Translation, rp align.RefineParams) (align.Translation, bool) {
			tr, ok := e.refinedAhead(e.pairIndex(p), start, rp)
			if !ok && lopt.refinedAgain != nil {
				lopt.refinedAgain.Add(1)
			}
			return tr, ok
		}
		res, err = stitchRegistered(ctx, src, opt, gopt, func(ctx context.Context, raw tileio.TileSource, ff *align.FlatField) (*align.Translations, error) {
			if sameFlatField(ff, e.ff) {
				return e.final, nil
			}
			pts, err := RegisterBand(ctx, raw, 0, rows, ff, opt, gopt) // not expected: register again
			if err != nil {
				return nil, err
			}
			rel := align.NewTranslations(rows, cols)
			for _, pt := range pts {
				rel.Set(pt.Pair, pt.Translation)
			}
			return rel, nil
		}, e.ff)
	}
	if err != nil {
		return nil, err
	}
	if lopt.Update != nil {
		// The end: every pair registered, every tile at its final place.
		lopt.Update(LiveState{Tiles: rows * cols, Arrived: rows * cols, Pairs: e.pairsTotal, Registered: e.pairsTotal,
			Placed: rows * cols, FlatFieldTiles: e.nSample, FlatFieldArrived: e.nSeen, OnGPU: e.offline && gopt.GPU, Positions: res.GlobalPositions()})
	}
	return res, nil
}

// sameFlatField reports whether a and b correct tiles alike.
func sameFlatField(a, b *align.FlatField) bool {
	if a == nil || b == nil || a.Identity() || b.Identity() {
		return (a == nil || a.Identity()) == (b == nil || b.Identity())
	}
	return slices.Equal(a.Gains(), b.Gains())
}

// live is the state of a StitchLive run, owned by its goroutine but for
// the tile cache and the workers' channels.
type live struct {
	src              tileio.TileSource
	opt              align.Options
	gopt             GraphOptions
	lopt             LiveOptions
	rows, cols       int
	workers, slots   int
	arrived          []bool
	nArrived         int
	sample           []bool // the flat field's sample tiles
	nSample, nSeen   int
	finalGen         bool // the flat field is known: jobs are final
	offline          bool // the flat field needed the last tile, or the GPUs take the backlog: Stitch does the rest
	finalReady       atomic.Bool
	ff               *align.FlatField // once finalGen; nil with NoFlatField
	final, prov      *align.Translations
	done             [2][]bool // per generation, per pair index: result in
	queued           [2][]bool
	nFinal, nProv    int
	pending          int // jobs sent and not answered
	registering      int // registration jobs (not refine-only) sent and not answered
	jobs             chan liveJob
	refines          chan liveJob // refine-only jobs: taken when jobs is empty
	results          chan liveResult
	wg               sync.WaitGroup
	cache            *liveCache
	started          bool
	lastUpdate       time.Time
	dirty            bool
	pairsTotal       int
	cancelWorkers    context.CancelFunc
	workerCtx        context.Context
	weak             *align.WeakPairs
	srcs             [2]tileio.TileSource
	provisionalGroup []tileio.GlobalPosition

	// The refinement done ahead (final pairs, CPU only): with a stage
	// model estimated from the pairs so far, each final pair is refined as
	// it is registered, and again when the model's RefineParams change;
	// the end keeps the results the final model agrees with. The
	// repeatability, the largest error of the pairs' predictions, tends
	// to grow as pairs come: each pair is refined with the estimate and
	// with the estimate plus one pixel.
	model      *align.StageModel // nil until one is usable
	modelAt    int               // nFinal+nProv when model was estimated
	memo       map[int][]liveRefined
	refPending []bool // a refine-only job is queued for the pair
}

// liveRefined is a pair refined ahead: from start with a model of rp.
type liveRefined struct {
	start, tr align.Translation
	rp        align.RefineParams
}

// liveJob is a pair to register in a generation: 0 on uncorrected tiles
// (provisional), 1 with the flat field (final).
type liveJob struct {
	pair align.Pair
	gen  int
	// model, for a final pair, refines it too (nil: not yet).
	model *align.StageModel
	// refineOnly: the pair is registered (start): only refine it.
	refineOnly bool
	start      align.Translation
}

type liveResult struct {
	job     liveJob
	tr      align.Translation
	ref     []liveRefined
	skipped bool
	err     error
}

func newLive(src tileio.TileSource, opt align.Options, gopt GraphOptions, lopt LiveOptions, workers, slots int) *live {
	rows, cols := src.Rows(), src.Cols()
	n := rows * cols
	e := &live{src: src, opt: opt, gopt: gopt, lopt: lopt, rows: rows, cols: cols, workers: workers,
		slots: max(slots, 2*workers+1), arrived: make([]bool, n), sample: make([]bool, n),
		pairsTotal: len(align.Pairs(rows, cols))}
	for g := range 2 {
		e.done[g], e.queued[g] = make([]bool, 2*n), make([]bool, 2*n)
	}
	if !opt.NoFlatField {
		// The tiles Stitch estimates the flat field from.
		sample := flatFieldSample(rows, cols, tileio.Acquisition(src))
		for _, i := range sample {
			e.sample[i] = true
		}
		e.nSample = len(sample)
	}
	e.final, e.prov = align.NewTranslations(rows, cols), align.NewTranslations(rows, cols)
	// Each pair is queued at most once per generation, and at most once
	// more at a time to be refined: the channels never block their
	// senders.
	e.jobs = make(chan liveJob, 2*e.pairsTotal)
	e.refines = make(chan liveJob, e.pairsTotal)
	e.results = make(chan liveResult, 3*e.pairsTotal)
	e.memo, e.refPending = map[int][]liveRefined{}, make([]bool, 2*n)
	return e
}

// pairIndex numbers the pairs of the grid for the done and queued flags.
func (e *live) pairIndex(p align.Pair) int { return 2*(p.Row*e.cols+p.Col) + int(p.Dir) }

// stop tells the workers to end, dropping the jobs still queued; e.wg
// waits for them.
func (e *live) stop() {
	if e.started {
		e.cancelWorkers()
		close(e.jobs)
		close(e.refines)
	}
}

// run follows the arrivals until every tile is in and every final pair
// registered (or Stitch is to do the rest: e.offline).
func (e *live) run(ctx context.Context, arrivals <-chan tileio.Arrival) error {
	n := e.rows * e.cols
	var timer *time.Timer
	var timerC <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if e.nArrived == n && (e.offline || e.finalGen && e.nFinal == e.pairsTotal) {
			e.update(true)
			return nil
		}
		if e.dirty && timerC == nil {
			if wait := e.lopt.Every - time.Since(e.lastUpdate); wait <= 0 {
				e.update(false)
			} else {
				timer = time.NewTimer(wait)
				timerC = timer.C
			}
		}
		select {
		case <-ctx.Done():
			return e.incomplete(ctx.Err())
		case <-timerC:
			timerC = nil
			e.update(false)
		case a, ok := <-arrivals:
			if !ok {
				if e.nArrived < n {
					// The pairs in flight still place their tiles.
					if err := e.drain(ctx); err != nil {
						return err
					}
					return e.incomplete(nil)
				}
				arrivals = nil
				continue
			}
			if err := e.arrive(ctx, a); err != nil {
				return err
			}
		case r := <-e.results:
			e.pending--
			if r.err != nil {
				return r.err
			}
			e.result(r)
		}
	}
}

// drain waits for the jobs sent to the workers (or ctx).
func (e *live) drain(ctx context.Context) error {
	for e.pending > 0 {
		select {
		case <-ctx.Done():
			return e.incomplete(ctx.Err())
		case r := <-e.results:
			e.pending--
			if r.err != nil {
				return r.err
			}
			e.result(r)
		}
	}
	return nil
}

// incomplete is the error of a run whose tiles stopped coming, after a
// last Update.
func (e *live) incomplete(cause error) error {
	e.update(true)
	if e.nArrived == len(e.arrived) {
		return fmt.Errorf("stitching: live: every tile arrived, then: %w", cause)
	}
	err := &IncompleteError{Tiles: len(e.arrived), Cause: cause}
	for i, ok := range e.arrived {
		if !ok {
			err.Missing = append(err.Missing, tileio.Arrival{Row: i / e.cols, Col: i % e.cols})
			err.Names = append(err.Names, e.src.Name(i/e.cols, i%e.cols))
		}
	}
	return err
}

// arrive takes tile a in: it queues the pairs it completes, and once the
// flat field's samples are all in, estimates it and queues every pair
// again with it.
func (e *live) arrive(ctx context.Context, a tileio.Arrival) error {
	if a.Row < 0 || a.Row >= e.rows || a.Col < 0 || a.Col >= e.cols {
		return fmt.Errorf("stitching: live: arrival of tile (%d, %d) outside the %dx%d grid", a.Row, a.Col, e.rows, e.cols)
	}
	i := a.Row*e.cols + a.Col
	if e.arrived[i] {
		return nil
	}
	if !e.started {
		if err := e.start(ctx); err != nil {
			return err
		}
	}
	e.arrived[i] = true
	e.nArrived++
	e.dirty = true
	if e.sample[i] {
		e.nSeen++
	}
	gen := 0
	if e.finalGen {
		gen = 1
	}
	for _, p := range pairsOf(e.rows, e.cols, a.Row, a.Col, nil, nil) {
		e.queue(p, gen)
	}
	if e.finalGen && e.nArrived == len(e.arrived) {
		e.lastIn()
		return nil
	}
	if !e.finalGen && e.nSeen == e.nSample {
		if e.nArrived == len(e.arrived) {
			// The flat field needed the last tile: nothing final was
			// registered, and Stitch on the finished grid does it all
			// (estimating the flat field once).
			e.offline = true
			return nil
		}
		return e.flatFieldKnown(ctx)
	}
	return nil
}

// lastIn decides, as the last tile comes in after the flat field is
// known, who registers the final pairs still waiting: the CPU workers, or
// with GPU, when they have fallen behind (more than a tenth of the pairs
// and more than the workers wait), Stitch on the GPUs, which registers
// the grid's thousands of pairs in about the time the cores take for a
// few hundred (the paper's 42 x 59 grid: 1.7 s on one GPU against 27 s
// on 16 cores).
func (e *live) lastIn() {
	backlog := e.pairsTotal - e.nFinal
	gpu := e.gopt.GPU && backlog > e.workers && 10*backlog > e.pairsTotal
	if e.lopt.toGPU != nil {
		e.lopt.toGPU(backlog, gpu)
	}
	if gpu {
		e.offline = true
	}
}

// start sets the run up at the first arrival, when the tile size is
// known: the cache and the workers, and without a flat field the Result.
func (e *live) start(ctx context.Context) error {
	w, h := e.src.TileSize()
	if w < 2 || h < 2 {
		return fmt.Errorf("stitching: live: the source gives tiles of %dx%d at the first arrival", w, h)
	}
	e.started = true
	e.workerCtx, e.cancelWorkers = context.WithCancel(ctx)
	e.weak = align.NewWeakPairs(e.gopt.weakPairs(e.workers))
	e.srcs[0] = e.src
	e.cache = newLiveCache(e.slots, align.NewTileFFT(w, h, e.opt).SpectrumLen())
	e.cache.allocated = e.lopt.spectra
	for range e.workers {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.work(w, h)
		}()
	}
	if e.opt.NoFlatField {
		return e.flatFieldKnown(ctx)
	}
	return nil
}

// flatFieldKnown estimates the flat field (every sample tile has
// arrived) as Stitch does and queues the final registration of every
// pair whose tiles are in, in the order Stitch's traversal takes them.
func (e *live) flatFieldKnown(ctx context.Context) error {
	res, csrc, err := beginWorkers(ctx, e.src, e.opt, e.workers)
	if err != nil {
		return fmt.Errorf("stitching: live: flat field: %w", err)
	}
	e.ff, e.srcs[1] = res.FlatField, csrc
	e.finalGen = true
	e.dirty = true
	e.finalReady.Store(true) // the provisional jobs still queued are dropped
	for _, t := range traversal(e.rows, e.cols) {
		for _, p := range []align.Pair{{Row: t.row, Col: t.col, Dir: align.West}, {Row: t.row, Col: t.col, Dir: align.North}} {
			if (p.Dir == align.West && p.Col > 0) || (p.Dir == align.North && p.Row > 0) {
				e.queue(p, 1)
			}
		}
	}
	return nil
}

// queue sends pair p to the workers in generation gen once both of its
// tiles are in (and, in generation 0, unless the final one has it).
func (e *live) queue(p align.Pair, gen int) {
	r, c := p.Neighbor()
	if !e.arrived[p.Row*e.cols+p.Col] || !e.arrived[r*e.cols+c] {
		return
	}
	k := e.pairIndex(p)
	if e.queued[gen][k] || (gen == 0 && e.queued[1][k]) {
		return
	}
	e.queued[gen][k] = true
	e.pending++
	e.registering++
	j := liveJob{pair: p, gen: gen}
	if gen == 1 && e.registering <= e.workers {
		// Refined with the registration while its tiles are in hand,
		// unless registrations wait: then the registration comes first,
		// and the pair is refined ahead by a refine-only job once the
		// workers are free, or at the end with the final model only (a
		// refinement ahead costs two searches, for the estimated
		// repeatability and one pixel more).
		j.model = e.model
	}
	e.jobs <- j
}

// speculate estimates the stage model again from the pairs registered so
// far once enough more have come (final ones, provisional ones where no
// final one is in yet) and, when its RefineParams change, queues the
// refinement of every final pair not refined ahead with them; otherwise
// only pair k's (the pair just in, -1 for none), so that the final
// refinement need not all run after the last tile.
func (e *live) speculate(k int) {
	if !e.finalGen {
		return
	}
	changed := false
	if n := e.nFinal + e.nProv; e.model == nil || n-e.modelAt >= max(4, e.pairsTotal/20) {
		e.modelAt = n
		rel := e.final.Clone()
		for _, p := range align.Pairs(e.rows, e.cols) {
			if i := e.pairIndex(p); !e.done[1][i] && e.done[0][i] {
				rel.Set(p, e.prov.At(p))
			}
		}
		w, h := e.src.TileSize()
		m, err := align.EstimateModel(rel, w, h, e.opt)
		usable := err == nil && !(e.rows > 1 && m.North.TooFewPairs) && !(e.cols > 1 && m.West.TooFewPairs)
		if usable && (e.model == nil || m.RefineParams() != e.model.RefineParams()) {
			e.model, changed = m, true
		}
	}
	if e.model == nil {
		return
	}
	if !changed {
		if k >= 0 {
			e.refineAhead(align.Pair{Row: k / 2 / e.cols, Col: k / 2 % e.cols, Dir: align.Direction(k % 2)})
		}
		return
	}
	for _, p := range align.Pairs(e.rows, e.cols) {
		e.refineAhead(p)
	}
}

// refineAhead queues the refinement of final pair p with the current
// model unless it has one with the model's RefineParams or one is queued.
func (e *live) refineAhead(p align.Pair) {
	k := e.pairIndex(p)
	if !e.done[1][k] || e.refPending[k] {
		return
	}
	if _, ok := e.refinedAhead(k, e.final.At(p), e.model.RefineParams()); ok {
		return
	}
	e.refPending[k] = true
	e.pending++
	e.refines <- liveJob{pair: p, gen: 1, model: e.model, refineOnly: true, start: e.final.At(p)}
}

// result records a worker's translation.
func (e *live) result(r liveResult) {
	if r.job.refineOnly {
		e.refPending[e.pairIndex(r.job.pair)] = false
	} else {
		e.registering--
	}
	if r.skipped {
		return
	}
	k := e.pairIndex(r.job.pair)
	if r.ref != nil {
		e.memo[k] = r.ref
	}
	if r.job.refineOnly {
		// Refined with a model replaced meanwhile: again.
		e.speculate(k)
		e.reportAhead()
		return
	}
	e.done[r.job.gen][k] = true
	if r.job.gen == 1 {
		e.final.Set(r.job.pair, r.tr)
		e.nFinal++
		if e.gopt.Progress != nil {
			e.gopt.Progress("registration", e.nFinal, e.pairsTotal)
		}
	} else {
		e.prov.Set(r.job.pair, r.tr)
		e.nProv++
	}
	e.dirty = true
	if r.job.gen == 1 {
		e.speculate(k)
	} else {
		e.speculate(-1)
	}
	e.reportAhead()
}

// reportAhead calls LiveOptions.ahead, if set.
func (e *live) reportAhead() {
	if e.lopt.ahead == nil {
		return
	}
	n := 0
	if e.model != nil {
		rp := e.model.RefineParams()
		for _, p := range align.Pairs(e.rows, e.cols) {
			k := e.pairIndex(p)
			if _, ok := e.refinedAhead(k, e.final.At(p), rp); ok && e.done[1][k] {
				n++
			}
		}
	}
	e.lopt.ahead(n, e.nFinal)
}

// work registers the pairs of the jobs channel with its own FFT plan and
// aligner, and refines those of the refines channel when no registration
// waits.
func (e *live) work(w, h int) {
	f := align.NewTileFFT(w, h, e.opt)
	a := align.NewAligner(w, h, e.opt)
	a.SetWeakPairs(e.weak)
	ref := align.NewRefiner()
	ref.SetWeakPairs(e.weak)
	for {
		var j liveJob
		var ok bool
		select {
		case j, ok = <-e.jobs:
		default:
			select {
			case j, ok = <-e.jobs:
			case j, ok = <-e.refines:
			}
		}
		if !ok {
			return // stopped: what is left is not waited for
		}
		if e.workerCtx.Err() != nil || (j.gen == 0 && e.finalReady.Load()) {
			e.results <- liveResult{job: j, skipped: true}
			continue
		}
		if j.refineOnly {
			rr, err := e.refine(ref, j, w, h)
			e.results <- liveResult{job: j, ref: rr, err: err}
			continue
		}
		tr, rr, err := e.register(f, a, ref, j, w, h)
		e.results <- liveResult{job: j, tr: tr, ref: rr, err: err}
	}
}

// refinedAhead returns pair k's translation refined ahead from start
// with a model of parameters rp, if there is one.
func (e *live) refinedAhead(k int, start align.Translation, rp align.RefineParams) (align.Translation, bool) {
	for _, m := range e.memo[k] {
		if m.start == start && m.rp == rp {
			return m.tr, true
		}
	}
	return align.Translation{}, false
}

// refineWith refines the pair (t1, t2) from start with model and with
// model's repeatability plus one.
func refineWith(ref *align.Refiner, model *align.StageModel, t1, t2 *image.Gray16, start align.Translation) []liveRefined {
	wider := *model
	wider.Repeatability++
	out := make([]liveRefined, 0, 2)
	for _, m := range []*align.StageModel{model, &wider} {
		out = append(out, liveRefined{start: start, rp: m.RefineParams(), tr: m.Refine(ref, t1, t2, start)})
	}
	return out
}

// refine refines the registered pair of job j (a refine-only job) with
// its model, loading its corrected tiles.
func (e *live) refine(ref *align.Refiner, j liveJob, w, h int) ([]liveRefined, error) {
	r1, c1 := j.pair.Neighbor()
	t1, err := loadChecked(e.srcs[1], r1, c1, w, h)
	if err != nil {
		return nil, fmt.Errorf("stitching: live: %w", err)
	}
	t2, err := loadChecked(e.srcs[1], j.pair.Row, j.pair.Col, w, h)
	if err != nil {
		return nil, fmt.Errorf("stitching: live: %w", err)
	}
	return refineWith(ref, j.model, t1, t2, j.start), nil
}

// register computes the translation of job j's pair, and with j.model
// refines it too.
func (e *live) register(f *align.TileFFT, a *align.Aligner, ref *align.Refiner, j liveJob, w, h int) (align.Translation, []liveRefined, error) {
	src := e.srcs[j.gen] // set before the generation's first job is sent
	r1, c1 := j.pair.Neighbor()
	t1, err := e.cache.get(liveKey{r1*e.cols + c1, j.gen}, func(dst []complex128) (*image.Gray16, error) {
		return e.transform(f, src, r1, c1, w, h, dst, j.gen)
	})
	if err != nil {
		return align.Translation{}, nil, err
	}
	defer e.cache.put(t1)
	t2, err := e.cache.get(liveKey{j.pair.Row*e.cols + j.pair.Col, j.gen}, func(dst []complex128) (*image.Gray16, error) {
		return e.transform(f, src, j.pair.Row, j.pair.Col, w, h, dst, j.gen)
	})
	if err != nil {
		return align.Translation{}, nil, err
	}
	defer e.cache.put(t2)
	tr := a.Align(t1.img, t2.img, t1.spec, t2.spec, j.pair.Dir)
	if j.model == nil {
		return tr, nil, nil
	}
	return tr, refineWith(ref, j.model, t1.img, t2.img, tr), nil
}

// transform loads tile (r, c) of src and computes its spectrum into dst;
// a tile of the final generation goes to the Tile option too.
func (e *live) transform(f *align.TileFFT, src tileio.TileSource, r, c, w, h int, dst []complex128, gen int) (*image.Gray16, error) {
	img, err := loadChecked(src, r, c, w, h)
	if err != nil {
		return nil, fmt.Errorf("stitching: live: %w", err)
	}
	if gen == 1 && e.lopt.Tile != nil {
		e.lopt.Tile(r, c, img)
	}
	f.Forward(img, dst)
	return img, nil
}

// update calls the Update option with the current state, unless nothing
// changed since the last call (force: even then).
func (e *live) update(force bool) {
	if !e.dirty && !force {
		return
	}
	e.dirty = false
	e.lastUpdate = time.Now()
	if e.lopt.Update == nil {
		return
	}
	pos := e.provisional()
	e.lopt.Update(LiveState{Tiles: len(e.arrived), Arrived: e.nArrived, Pairs: e.pairsTotal, Registered: e.nFinal,
		Provisional: e.provisionalOnly(), Placed: len(pos), FlatFieldTiles: e.nSample, FlatFieldArrived: e.nSeen,
		OnGPU: e.offline && e.gopt.GPU, Positions: pos})
}

// provisionalOnly counts the pairs registered in generation 0 only.
func (e *live) provisionalOnly() int {
	n := 0
	for k, ok := range e.done[0] {
		if ok && !e.done[1][k] {
			n++
		}
	}
	return n
}

// provisional places the largest group of tiles linked by registered
// pairs (final translations first) along a maximum spanning tree of their
// correlations (align.TreePositions).
func (e *live) provisional() []tileio.GlobalPosition {
	n := e.rows * e.cols
	tr := align.NewTranslations(e.rows, e.cols)
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	linked := make([]bool, n)
	for _, p := range align.Pairs(e.rows, e.cols) {
		k := e.pairIndex(p)
		switch {
		case e.done[1][k]:
			tr.Set(p, e.final.At(p))
		case e.done[0][k]:
			tr.Set(p, e.prov.At(p))
		default:
			continue
		}
		r, c := p.Neighbor()
		i, j := p.Row*e.cols+p.Col, r*e.cols+c
		linked[i], linked[j] = true, true
		parent[find(i)] = find(j)
	}
	// The largest group, the one of the smallest root among equals; its
	// first tile is the tree's root.
	size := make([]int, n)
	best := -1
	for i := range n {
		if linked[i] {
			root := find(i)
			size[root]++
			if best < 0 || size[root] > size[best] || (size[root] == size[best] && root < best) {
				best = root
			}
		}
	}
	if best < 0 {
		return nil
	}
	first := 0
	for !linked[first] || find(first) != best {
		first++
	}
	pos, placed := align.TreePositions(tr, first, func(p align.Pair) bool {
		k := e.pairIndex(p)
		return e.done[0][k] || e.done[1][k]
	})
	out := e.provisionalGroup[:0]
	for i := range n {
		if placed[i] {
			out = append(out, tileio.GlobalPosition{Name: e.src.Name(i/e.cols, i%e.cols), Corr: pos[i].Corr,
				X: pos[i].X, Y: pos[i].Y, Row: i / e.cols, Col: i % e.cols})
		}
	}
	e.provisionalGroup = out
	return out
}

// liveKey is a tile (row-major index) in a generation.
type liveKey struct{ tile, gen int }

// liveTile is a tile and its spectrum in the cache.
type liveTile struct {
	key   liveKey
	img   *image.Gray16
	spec  []complex128
	err   error
	ready chan struct{}
	pins  int
	last  uint64
}

// liveCache holds at most max tiles and spectra, loaded by the first
// worker that needs one; a tile no worker uses may be evicted, the least
// recently used first, when another needs its place.
type liveCache struct {
	mu      sync.Mutex
	freed   *sync.Cond
	max     int
	specLen int
	tick    uint64
	tiles   map[liveKey]*liveTile
	free    [][]complex128
	// allocated, if set, counts the spectra allocated.
	allocated *atomic.Int64
}

func newLiveCache(max, specLen int) *liveCache {
	c := &liveCache{max: max, specLen: specLen, tiles: map[liveKey]*liveTile{}}
	c.freed = sync.NewCond(&c.mu)
	return c
}

// get returns tile k, pinned until put, loading it with load (into a
// spectrum of the cache) if it is not held.
func (c *liveCache) get(k liveKey, load func(spec []complex128) (*image.Gray16, error)) (*liveTile, error) {
	c.mu.Lock()
	c.tick++
	if t := c.tiles[k]; t != nil {
		t.pins++
		t.last = c.tick
		c.mu.Unlock()
		<-t.ready
		if t.err != nil {
			c.put(t)
			return nil, t.err
		}
		return t, nil
	}
	for len(c.tiles) >= c.max {
		var victim *liveTile
		for _, t := range c.tiles {
			if t.pins == 0 && (victim == nil || t.last < victim.last) {
				victim = t
			}
		}
		if victim == nil {
			c.freed.Wait()
			continue
		}
		delete(c.tiles, victim.key)
		if victim.spec != nil {
			c.free = append(c.free, victim.spec)
		}
	}
	t := &liveTile{key: k, ready: make(chan struct{}), pins: 1, last: c.tick}
	c.tiles[k] = t
	var spec []complex128
	if len(c.free) > 0 {
		spec, c.free = c.free[len(c.free)-1], c.free[:len(c.free)-1]
	}
	c.mu.Unlock()
	if spec == nil {
		spec = make([]complex128, c.specLen)
		if c.allocated != nil {
			c.allocated.Add(1)
		}
	}
	t.img, t.err = load(spec)
	t.spec = spec
	close(t.ready)
	if t.err != nil {
		c.mu.Lock()
		if c.tiles[k] == t {
			delete(c.tiles, k) // not kept: a later get tries again
		}
		c.mu.Unlock()
		c.put(t)
		return nil, t.err
	}
	return t, nil
}

// put unpins a tile got from get.
func (c *liveCache) put(t *liveTile) {
	c.mu.Lock()
	t.pins--
	if t.pins == 0 {
		c.freed.Broadcast()
	}
	c.mu.Unlock()
}
