package stitching

import (
	"context"
	"errors"
	"image"
	"sync"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// hostAhead refines on the host, while a GPU registration runs, the pairs
// whose refinement needs their tiles on the host (noise-limited pairs: the
// best raw NCC of their search box is below align.ConfidentCorr, so the
// denoised search decides), so that the refinement after the registration
// does not wait for their searches. On the paper grid on one H200 those
// were 57-91 pairs and 0.4-0.5 s after a 1.5 s registration during which
// the cores were mostly idle.
//
// The refinement needs the stage model, which is estimated from every
// pair; hostAhead estimates it from the pairs registered so far, when a
// quarter, half, three quarters and nine tenths of them are in. With each
// model whose RefineParams differ from the last one's it looks, from the
// pairs' NCC surfaces alone (no tiles, microseconds a pair), which pairs
// registered so far its refinement sends to the host, and so for each pair
// registered after; those are refined on the host, from the pair's
// registered translation, as the refinement would (StageModel.RefineBox),
// with the model first, then with its repeatability one more (the
// estimate tends to grow as pairs come). The refinement takes a pair's
// result from here only when it was computed from the same start with the
// final model's RefineParams: everything RefineBox reads of the model. So
// the result is bit for bit what it would compute itself; a wrong guess
// costs only host time during the registration.
type hostAhead struct {
	ctx   context.Context   // the stitch's: no refinement starts once it is done
	src   tileio.TileSource // the tiles as the refinement loads them (corrected)
	cache *surfaceCache
	opt   align.Options
	par   int // goroutines refining

	weak *align.WeakPairs
	wg   sync.WaitGroup

	mu      sync.Mutex
	cond    *sync.Cond // signals jobs and stop
	stopped bool
	started bool
	rel     *align.Translations // registered so far
	have    []align.Pair        // the pairs registered so far, in order
	at      []int               // the counts of pairs at which to estimate the model, in order
	model   *align.StageModel
	wider   *align.StageModel // model with its repeatability one more
	check   *align.Refiner    // for the surface-only checks, under mu
	jobs    [2][]aheadJob     // with model, then with wider
	queued  map[aheadKey]bool
	memo    map[align.Pair][]aheadResult
}

// aheadJob is a refinement to run: pair key.p from key.start with m.
type aheadJob struct {
	key aheadKey
	m   *align.StageModel
}

type aheadKey struct {
	p     align.Pair
	start align.Translation
	rp    align.RefineParams
}

// aheadResult is a pair refined ahead: from start, with a model of
// parameters rp.
type aheadResult struct {
	start align.Translation
	rp    align.RefineParams
	tr    align.Translation
}

// newHostAhead returns a hostAhead for the pairs of src, whose refinements
// read cache's surfaces and run on par goroutines, until ctx is done or
// stop is called. Their denoised searches take scratch spaces from weak,
// the pool of the registration's own rechecks of noise-limited pairs (so
// the memory they need is the pool's: see MemoryEstimate).
func newHostAhead(ctx context.Context, src tileio.TileSource, cache *surfaceCache, opt align.Options, par int, weak *align.WeakPairs) *hostAhead {
	rows, cols := src.Rows(), src.Cols()
	total := len(align.Pairs(rows, cols))
	a := &hostAhead{
		ctx: ctx, src: src, cache: cache, opt: opt, par: max(1, par),
		weak: weak, rel: align.NewTranslations(rows, cols),
		at:     []int{total / 4, total / 2, 3 * total / 4, 9 * total / 10},
		check:  align.NewRefiner(),
		queued: map[aheadKey]bool{}, memo: map[align.Pair][]aheadResult{},
	}
	a.cond = sync.NewCond(&a.mu)
	return a
}

// add records pair p's registered translation tr (every pair, confirmed or
// not) and queues the refinements it makes possible.
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
	a.have = append(a.have, p)
	if len(a.at) > 0 && len(a.have) >= a.at[0] {
		for len(a.at) > 0 && len(a.have) >= a.at[0] {
			a.at = a.at[1:]
		}
		if a.estimate() {
			for _, q := range a.have {
				a.consider(q)
			}
			return
		}
	}
	a.consider(p)
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
	if a.model != nil && a.model.RefineParams() == m.RefineParams() {
		return false
	}
	wider := *m
	wider.Repeatability++
	a.model, a.wider = m, &wider
	return true
}

// consider queues the refinements of pair p with the current models if
// the first sends it to the host. Called with a.mu held.
func (a *hostAhead) consider(p align.Pair) {
	if a.model == nil {
		return
	}
	start := a.rel.At(p)
	noTiles := func() (*image.Gray16, *image.Gray16, error) { return nil, nil, errNeedHost }
	if _, _, err := a.model.RefineBox(a.check, a.cache.ncc(p), noTiles, start); !errors.Is(err, errNeedHost) {
		return // served from the surface (or by a GPU pass): nothing to do ahead
	}
	for i, m := range [2]*align.StageModel{a.model, a.wider} {
		k := aheadKey{p: p, start: start, rp: m.RefineParams()}
		if a.queued[k] {
			continue
		}
		a.queued[k] = true
		a.jobs[i] = append(a.jobs[i], aheadJob{key: k, m: m})
	}
	if !a.started {
		a.started = true
		for range a.par {
			a.wg.Add(1)
			go a.work()
		}
	}
	a.cond.Broadcast()
}

// work runs queued refinements, those with the model first, until stop.
func (a *hostAhead) work() {
	defer a.wg.Done()
	w, h := a.src.TileSize()
	ref := align.NewRefiner()
	ref.SetWeakPairs(a.weak)
	for {
		a.mu.Lock()
		for !a.stopped && len(a.jobs[0])+len(a.jobs[1]) == 0 {
			a.cond.Wait()
		}
		if a.stopped || a.ctx.Err() != nil {
			a.mu.Unlock()
			return
		}
		q := &a.jobs[0]
		if len(*q) == 0 {
			q = &a.jobs[1]
		}
		j := (*q)[0]
		*q = (*q)[1:]
		a.mu.Unlock()

		load := func() (*image.Gray16, *image.Gray16, error) {
			nr, nc := j.key.p.Neighbor()
			t1, err := loadChecked(a.src, nr, nc, w, h)
			if err != nil {
				return nil, nil, err
			}
			t2, err := loadChecked(a.src, j.key.p.Row, j.key.p.Col, w, h)
			return t1, t2, err
		}
		tr, _, err := j.m.RefineBox(ref, a.cache.ncc(j.key.p), load, j.key.start)
		if err != nil {
			// A tile that does not load, or a search outside the
			// surface: the refinement does it (and reports the error).
			continue
		}
		a.mu.Lock()
		a.memo[j.key.p] = append(a.memo[j.key.p], aheadResult{start: j.key.start, rp: j.key.rp, tr: tr})
		a.mu.Unlock()
	}
}

// stop drops the refinements not started, waits for those under way and
// starts no more.
func (a *hostAhead) stop() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.stopped = true
	a.cond.Broadcast()
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
