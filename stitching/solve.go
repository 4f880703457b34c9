package stitching

import (
	"context"
	"fmt"
	"image"
	"slices"
	"sync"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// Placement is the outcome of placing the tiles from the refined
// translations (see [Optimize]).
type Placement struct {
	// Positions are the global tile positions, row-major.
	Positions []align.Position
	// Optimized are the translations after placement: the refined ones,
	// except for the pairs whose refined translation the positions
	// contradict (the loops of pairs around them disagree), which carry
	// the displacement the positions imply: the peak a re-search found
	// there, or else that displacement with its NCC and a Spread of its
	// distance from the pair's own peak. With the global solve they agree
	// with Positions; with the spanning tree they are the refined ones.
	Optimized *align.Translations
	// Inconsistent lists the pairs whose refined translation the
	// positions contradict, in canonical order.
	Inconsistent []align.Pair
	// Uncertainty is the estimated position uncertainty of each tile in
	// pixels, row-major (see [Result.Uncertainty]).
	Uncertainty []int
	// Researched is the number of pair searches the loop-consistency
	// checks ran.
	Researched int
}

// maxSolveRounds bounds the rounds of re-search and solve of place.
const maxSolveRounds = 3

// researchRadius and researchSteps are the radius of the re-search of a
// pair around the displacement the loops imply, and the number of times
// it may move its box to climb to the nearest local maximum (see
// align.StageModel.ClimbFrom).
const (
	researchRadius = 2
	researchSteps  = 8
)

// researchBudget is the most pair searches the loop-consistency checks
// of a rows x cols grid run in all: a quarter of the pairs, at least 32.
// On a grid whose pairs are mostly wrong (every loop contradicted) the
// checks would otherwise cost more than the refinement; the direct
// re-searches (around the displacement the loops imply) go first.
func researchBudget(rows, cols int) int {
	return max(32, len(align.Pairs(rows, cols))/4)
}

// tileCacheLimit bounds the tiles place keeps loaded for re-searches.
const tileCacheLimit = 256

// place positions the tiles of src from the refined translations. With
// opt.SpanningTree it is MIST's maximum spanning tree. Otherwise the
// tree's positions start a robust global solve over every pair
// (align.SolvePositions); then, for up to maxSolveRounds rounds, every
// pair whose translation disagrees with the solved positions is searched
// again around the displacement they imply, and so are the other pairs of
// its two tiles around the displacements that would make it agree (the
// alternative explanation of the disagreement); the results join the
// solve as further hypotheses, weighted by their NCC, and the solve is
// repeated. It stops when every pair agrees with the positions, when a
// round finds nothing new, or after researchBudget searches. When the
// refined translations are already loop-consistent (every pair of a
// correctly registered grid), nothing is searched and the positions are
// the tree's. Re-searches run on up to
// workers goroutines (inline with 1); the result does not depend on
// workers.
func place(ctx context.Context, src tileio.TileSource, model *align.StageModel, refined *align.Translations, opt align.Options, workers int) (*Placement, error) {
	tree := align.GlobalPositions(refined)
	pl := &Placement{Positions: tree, Optimized: refined}
	if opt.SpanningTree {
		pl.finish(refined)
		return pl, nil
	}
	sol := align.SolvePositions(refined, nil, tree)
	var cands []align.Candidate
	pairs := align.Pairs(refined.Rows, refined.Cols)
	known := map[researchKey]bool{}
	for _, p := range pairs {
		t := refined.At(p)
		known[researchKey{p, t.X, t.Y}] = true
	}
	cache := newTileCache(src)
	budget := researchBudget(refined.Rows, refined.Cols)
	for round := 0; round < maxSolveRounds; round++ {
		jobs := researchJobs(contradicted(pairs, refined, sol), refined, sol, known)
		if len(jobs) > budget {
			jobs = jobs[:budget] // the direct re-searches come first
		}
		if len(jobs) == 0 {
			break
		}
		budget -= len(jobs)
		found := make([]align.Translation, len(jobs))
		err := parallelJobs(ctx, len(jobs), workers, func(ref *align.Refiner, i int) error {
			j := jobs[i]
			t1, t2, err := cache.pair(j.p)
			if err != nil {
				return err
			}
			found[i] = model.ClimbFrom(ref, t1, t2, align.Translation{X: j.x, Y: j.y, Corr: -1}, researchRadius, researchSteps)
			return nil
		})
		if err != nil {
			return nil, err
		}
		pl.Researched += len(jobs)
		added := 0
		for i, t := range found {
			k := researchKey{jobs[i].p, t.X, t.Y}
			if t.Corr == -1 || known[k] {
				continue
			}
			known[k] = true
			cands = append(cands, indistinct(jobs[i].p, t, refined.At(jobs[i].p)))
			added++
		}
		if added == 0 {
			break
		}
		sol = align.SolvePositions(refined, cands, sol.Positions)
	}
	// Corner tiles: two pairs in one loop, decided by their NCC.
	if _, err := align.SettleCorners(sol, refined, cands, func(p align.Pair, x, y int) (float64, uint64, error) {
		t1, t2, err := cache.pair(p)
		if err != nil {
			return 0, 0, err
		}
		w, h := t1.Bounds().Dx(), t1.Bounds().Dy()
		return align.NCC(t1, t2, x, y), uint64(max(0, w-abs(x))) * uint64(max(0, h-abs(y))), nil
	}); err != nil {
		return nil, err
	}
	pl.Positions = sol.Positions
	pl.Inconsistent = contradicted(pairs, refined, sol)
	out, err := agreeingTranslations(pl.Inconsistent, refined, sol, cands, cache)
	if err != nil {
		return nil, err
	}
	pl.finish(out)
	return pl, nil
}

// researchKey is a displacement (x, y) of pair p: a re-search's start, or
// a hypothesis the solve already has.
type researchKey struct {
	p    align.Pair
	x, y int
}

// researchJobs lists the re-searches of one round of place, for the pairs
// bad that disagree with the solved positions sol: each bad pair around
// the displacement the positions imply, then the other pairs of its two
// tiles around the displacements that would make it agree. Keys in known
// are left out, and each key comes once.
func researchJobs(bad []align.Pair, refined *align.Translations, sol *align.Solution, known map[researchKey]bool) []researchKey {
	var jobs []researchKey
	queued := map[researchKey]bool{}
	addJob := func(p align.Pair, x, y int) {
		k := researchKey{p, x, y}
		if !known[k] && !queued[k] {
			queued[k] = true
			jobs = append(jobs, k)
		}
	}
	for _, p := range bad {
		ix, iy := sol.Implied(p)
		addJob(p, ix, iy)
	}
	for _, p := range bad {
		ix, iy := sol.Implied(p)
		t := refined.At(p)
		// The alternative: p is right, and one of its tiles is where
		// p puts it; its other pairs then have other displacements.
		rx, ry := t.X-ix, t.Y-iy
		nr, nc := p.Neighbor()
		for _, end := range []struct {
			r, c   int
			dx, dy int
		}{{p.Row, p.Col, rx, ry}, {nr, nc, -rx, -ry}} {
			for _, q := range pairsOf(refined.Rows, refined.Cols, end.r, end.c, nil, nil) {
				if q == p {
					continue
				}
				qx, qy := sol.Implied(q)
				if q.Row == end.r && q.Col == end.c { // the moved tile is tile 2 of q
					addJob(q, qx+end.dx, qy+end.dy)
				} else {
					addJob(q, qx-end.dx, qy-end.dy)
				}
			}
		}
	}
	return jobs
}

// agreeingTranslations returns refined with each pair of inconsistent
// replaced by the translation that agrees with the positions sol: the
// candidate a re-search found there, or else the displacement the loops
// imply, its NCC, and a Spread of its distance from the pair's own peak.
func agreeingTranslations(inconsistent []align.Pair, refined *align.Translations, sol *align.Solution, cands []align.Candidate, cache *tileCache) (*align.Translations, error) {
	out := refined.Clone()
	for _, p := range inconsistent {
		ix, iy := sol.Implied(p)
		t := refined.At(p)
		if k := slices.IndexFunc(cands, func(c align.Candidate) bool { return c.Pair == p && c.X == ix && c.Y == iy }); k >= 0 {
			out.Set(p, cands[k].Translation)
			continue
		}
		t1, t2, err := cache.pair(p)
		if err != nil {
			return nil, err
		}
		out.Set(p, align.Translation{X: ix, Y: iy, Corr: align.NCC(t1, t2, ix, iy), Spread: max(abs(t.X-ix), abs(t.Y-iy))})
	}
	return out, nil
}

// indistinct makes the candidate of pair p that a re-search found at t,
// against the pair's refined translation r. A candidate within r's Spread
// of r is a displacement the content could not tell from r: its raw NCC
// may beat r's (on a noise-limited pair, whose refined translation came
// from the Wiener-filtered surface, the raw maximum is biased), but that
// is no evidence, so it weighs what r weighs and carries at least r's
// Spread and its distance from r. The loops then choose between them.
// Others weigh their NCC.
func indistinct(p align.Pair, t, r align.Translation) align.Candidate {
	c := align.Candidate{Pair: p, Translation: t}
	if d := max(abs(t.X-r.X), abs(t.Y-r.Y)); d > 0 && d <= r.Spread {
		c.Weight = max(min(t.Corr, r.Corr), 1e-3)
		c.Spread = max(c.Spread, r.Spread, d)
	}
	return c
}

// finish sets Optimized and Uncertainty from the positions and the final
// translations (which agree with the positions).
func (pl *Placement) finish(opt *align.Translations) {
	pl.Optimized = opt
	rows, cols := opt.Rows, opt.Cols
	pl.Uncertainty = make([]int, rows*cols)
	for i := range pl.Uncertainty {
		pl.Uncertainty[i] = -1
	}
	for _, p := range align.Pairs(rows, cols) {
		nr, nc := p.Neighbor()
		a, b := nr*cols+nc, p.Row*cols+p.Col
		t := opt.At(p)
		rx := abs(pl.Positions[b].X - pl.Positions[a].X - t.X)
		ry := abs(pl.Positions[b].Y - pl.Positions[a].Y - t.Y)
		if !(t.Corr >= LowCorrelation) {
			continue
		}
		u := t.Spread + max(rx, ry)
		for _, i := range []int{a, b} {
			if pl.Uncertainty[i] < 0 || u < pl.Uncertainty[i] {
				pl.Uncertainty[i] = u
			}
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// contradicted lists the pairs (of pairs) whose translation in t the
// positions of sol contradict.
func contradicted(pairs []align.Pair, t *align.Translations, sol *align.Solution) []align.Pair {
	var bad []align.Pair
	for _, p := range pairs {
		ix, iy := sol.Implied(p)
		if tr := t.At(p); tr.X != ix || tr.Y != iy {
			bad = append(bad, p)
		}
	}
	return bad
}

// parallelJobs runs f(ref, i) for i in [0, n) on up to workers
// goroutines (inline with workers <= 1), each with a Refiner of its own
// sharing one scratch space for noise-limited pairs, and returns the
// first error. It stops early when ctx is done.
func parallelJobs(ctx context.Context, n, workers int, f func(*align.Refiner, int) error) error {
	weak := align.NewWeakPairs(1)
	newRef := func() *align.Refiner {
		ref := align.NewRefiner()
		ref.SetWeakPairs(weak)
		return ref
	}
	if workers <= 1 || n <= 1 {
		ref := newRef()
		for i := range n {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := f(ref, i); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		next  int
		first error
	)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := newRef()
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil
				mu.Unlock()
				if stop || i >= n {
					return
				}
				err := ctx.Err()
				if err == nil {
					err = f(ref, i)
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// tileCache loads the tiles of a source once, keeping at most
// tileCacheLimit of them (dropping all when full). It is safe for
// concurrent use.
type tileCache struct {
	src   tileio.TileSource
	mu    sync.Mutex
	tiles map[int]*image.Gray16
}

func newTileCache(src tileio.TileSource) *tileCache {
	return &tileCache{src: src, tiles: map[int]*image.Gray16{}}
}

func (c *tileCache) load(r, col int) (*image.Gray16, error) {
	i := r*c.src.Cols() + col
	c.mu.Lock()
	t, ok := c.tiles[i]
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	w, h := c.src.TileSize()
	t, err := loadChecked(c.src, r, col, w, h)
	if err != nil {
		return nil, fmt.Errorf("stitching: placement: %w", err)
	}
	c.mu.Lock()
	if len(c.tiles) >= tileCacheLimit {
		clear(c.tiles)
	}
	c.tiles[i] = t
	c.mu.Unlock()
	return t, nil
}

// pair loads the two tiles of p (tile 1, the neighbour, first).
func (c *tileCache) pair(p align.Pair) (t1, t2 *image.Gray16, err error) {
	nr, nc := p.Neighbor()
	if t1, err = c.load(nr, nc); err != nil {
		return nil, nil, err
	}
	if t2, err = c.load(p.Row, p.Col); err != nil {
		return nil, nil, err
	}
	return t1, t2, nil
}
