package stitching

import (
	"context"
	"image"
	"sync"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// hostAhead refines the noise-limited pairs of a GPU registration on the
// host while the registration runs, so that the refinement after it does
// not wait for their denoised searches (on the paper grid on one H200, 91
// pairs whose searches took 0.5 s after a 1.5 s registration, with the
// cores mostly idle during it).
//
// The refinement needs the stage model, which is estimated from every
// pair; hostAhead estimates it from the pairs registered so far, when half,
// three quarters and nine tenths of them are in, and refines each
// noise-limited pair (registered correlation below align.ConfidentCorr)
// with it and with its repeatability one more (the estimate tends to grow
// as pairs come), from the pair's registered translation and its NCC
// surface, as the refinement would (StageModel.RefineBox). The refinement
// then takes a pair's result from here only when it was computed from the
// same start and with the final model's RefineParams: everything
// RefineBox reads of the model. So the result is bit for bit what the
// refinement computes itself; a wrong guess costs only host time during
// the registration.
type hostAhead struct {
	ctx   context.Context   // the stitch's: cancels the refinements
	src   tileio.TileSource // the tiles as the refinement loads them (corrected)
	cache *surfaceCache
	opt   align.Options
	total int // pairs in the grid

	weak *align.WeakPairs
	sem  chan struct{} // bounds the refinements running at once
	wg   sync.WaitGroup

	mu      sync.Mutex
	stopped bool
	rel     *align.Translations // registered so far
	n       int                 // pairs registered so far
	at      []int               // the counts of pairs at which to estimate the model, in order
	models  []*align.StageModel // the current model and its wider variant
	noisy   []align.Pair        // noise-limited pairs registered so far
	memo    map[align.Pair][]aheadResult
	queued  map[aheadKey]bool
}

// aheadResult is a pair refined ahead: from start, with a model of
// parameters rp.
type aheadResult struct {
	start align.Translation
	rp    align.RefineParams
	tr    align.Translation
}

type aheadKey struct {
	p     align.Pair
	start align.Translation
	rp    align.RefineParams
}

// newHostAhead returns a hostAhead for the pairs of src, whose refinements
// read cache's surfaces and run at most par at once, until ctx is done or
// stop is called.
func newHostAhead(ctx context.Context, src tileio.TileSource, cache *surfaceCache, opt align.Options, par int) *hostAhead {
	par = max(1, par)
	rows, cols := src.Rows(), src.Cols()
	total := len(align.Pairs(rows, cols))
	return &hostAhead{
		ctx: ctx, src: src, cache: cache, opt: opt, total: total, at: []int{total / 2, 3 * total / 4, 9 * total / 10},
		weak: align.NewWeakPairs(par), sem: make(chan struct{}, par),
		rel: align.NewTranslations(rows, cols), memo: map[align.Pair][]aheadResult{}, queued: map[aheadKey]bool{},
	}
}

// add records pair p's registered translation tr (every pair, confirmed or
// not) and starts the refinements it makes possible.
func (a *hostAhead) add(p align.Pair, tr align.Translation) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return
	}
	a.rel.Set(p, tr)
	a.n++
	noisy := tr.Corr < align.ConfidentCorr
	if noisy {
		a.noisy = append(a.noisy, p)
	}
	if len(a.at) > 0 && a.n >= a.at[0] {
		for len(a.at) > 0 && a.n >= a.at[0] {
			a.at = a.at[1:]
		}
		if a.estimate() {
			for _, q := range a.noisy {
				a.start(q)
			}
			return
		}
	}
	if noisy {
		a.start(p)
	}
}

// estimate estimates the stage model from the pairs so far and reports
// whether its RefineParams differ from the current model's. Called with
// a.mu held.
func (a *hostAhead) estimate() bool {
	w, h := a.src.TileSize()
	m, err := align.EstimateModel(a.rel, w, h, a.opt)
	if err != nil || (a.rel.Rows > 1 && m.North.TooFewPairs) || (a.rel.Cols > 1 && m.West.TooFewPairs) {
		return false
	}
	if len(a.models) > 0 && a.models[0].RefineParams() == m.RefineParams() {
		return false
	}
	wider := *m
	wider.Repeatability++
	a.models = []*align.StageModel{m, &wider}
	return true
}

// start refines pair p with the current models, in the background, unless
// done or under way. Called with a.mu held.
func (a *hostAhead) start(p align.Pair) {
	tr := a.rel.At(p)
	for _, m := range a.models {
		k := aheadKey{p: p, start: tr, rp: m.RefineParams()}
		if a.queued[k] {
			continue
		}
		a.queued[k] = true
		a.wg.Add(1)
		go a.refine(k, m)
	}
}

// refine refines pair k.p from k.start with m and records the result.
func (a *hostAhead) refine(k aheadKey, m *align.StageModel) {
	defer a.wg.Done()
	select {
	case a.sem <- struct{}{}:
	case <-a.ctx.Done():
		return
	}
	defer func() { <-a.sem }()
	a.mu.Lock()
	stopped := a.stopped
	a.mu.Unlock()
	if stopped || a.ctx.Err() != nil {
		return
	}
	w, h := a.src.TileSize()
	load := func() (*image.Gray16, *image.Gray16, error) {
		nr, nc := k.p.Neighbor()
		t1, err := loadChecked(a.src, nr, nc, w, h)
		if err != nil {
			return nil, nil, err
		}
		t2, err := loadChecked(a.src, k.p.Row, k.p.Col, w, h)
		return t1, t2, err
	}
	ref := align.NewRefiner()
	ref.SetWeakPairs(a.weak)
	tr, _, err := m.RefineBox(ref, a.cache.ncc(k.p), load, k.start)
	if err != nil {
		// Outside the surface, or a tile that does not load: the
		// refinement does it (and reports the error).
		return
	}
	a.mu.Lock()
	a.memo[k.p] = append(a.memo[k.p], aheadResult{start: k.start, rp: k.rp, tr: tr})
	a.mu.Unlock()
}

// stop waits for the refinements under way and starts no more.
func (a *hostAhead) stop() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	a.wg.Wait()
}

// refined returns pair p refined ahead from start with a model of
// parameters rp, if it was.
func (a *hostAhead) refined(p align.Pair, start align.Translation, rp align.RefineParams) (align.Translation, bool) {
	if a == nil {
		return align.Translation{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.memo[p] {
		if r.start == start && r.rp == rp {
			return r.tr, true
		}
	}
	return align.Translation{}, false
}
