package align

import "image"

// WeakPairs bounds the memory that noise-limited pairs take. Registering
// or refining such a pair (see [ChoosePeak] and [Refiner.RefineDenoised])
// needs a scratch space of about [DenoiseScratch] bytes, an order of
// magnitude more than an ordinary pair's; kept by every [Aligner] and
// [Refiner] of a run, as each of them does on its own, it would multiply
// the memory of a run by the number of its workers on data that has a
// few weak pairs. A WeakPairs holds n such scratch spaces for the Aligners
// and Refiners that share it ([Aligner.SetWeakPairs],
// [Refiner.SetWeakPairs]): at most n noise-limited pairs are handled at
// once, and the others wait for a scratch space (a denoised search takes
// a bounded time). The translations do not depend on which scratch space
// a pair gets. A WeakPairs is safe for concurrent use.
type WeakPairs struct {
	free chan *Refiner
}

// NewWeakPairs returns a pool of n scratch spaces for noise-limited pairs
// (at least 1). They are empty until used, and then keep what the
// largest pair they handled needed.
func NewWeakPairs(n int) *WeakPairs {
	n = max(n, 1)
	p := &WeakPairs{free: make(chan *Refiner, n)}
	for range n {
		r := NewRefiner()
		r.keep = spacePlans
		p.free <- r
	}
	return p
}

// Size returns the number of scratch spaces of the pool: the number of
// noise-limited pairs handled at once.
func (p *WeakPairs) Size() int { return cap(p.free) }

// take waits for a free scratch space and returns it with the function
// that gives it back.
func (p *WeakPairs) take() (*Refiner, func()) {
	r := <-p.free
	return r, func() { p.free <- r }
}

// ChoosePeak is the package's [ChoosePeak] with the scratch of a
// noise-limited pair taken from the pool, for pipelines that compute the
// peaks elsewhere (a GPU) with many goroutines.
func (p *WeakPairs) ChoosePeak(t1, t2 *image.Gray16, dir Direction, peaks []Peak, opt Options) Translation {
	return choosePeak(t1, t2, dir, peaks, opt.resolve(), p.take)
}

// Recheck is the second half of the pool's [WeakPairs.ChoosePeak], for
// pipelines that choose among the peaks elsewhere ([ChoosePeakScored] with
// the NCC computed on a GPU): given tr, that choice for the pair of tiles
// t1 and t2, it returns tr, or the denoised search's translation when the
// pair is noise-limited, with the scratch taken from the pool. For the
// same peaks the result is ChoosePeak's. A caller may skip it, and the
// tiles' loading, when tr.Corr >= [ConfidentCorr]: then it returns tr.
func (p *WeakPairs) Recheck(t1, t2 *image.Gray16, dir Direction, tr Translation, opt Options) Translation {
	return denoisedIfWeak(t1, t2, dir, tr, opt.resolve(), p.take)
}

// privateScratch returns a function that hands out *r (made on first use)
// to one goroutine, for Aligners and Refiners without a pool.
func privateScratch(r **Refiner) func() (*Refiner, func()) {
	return func() (*Refiner, func()) {
		if *r == nil {
			*r = NewRefiner()
		}
		return *r, func() {}
	}
}
