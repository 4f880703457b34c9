package align

import (
	"encoding/binary"
	"image"
	"math"
)

// Refiner finds the displacement of highest normalized cross-correlation
// of a pair of tiles within a square around a given translation. It
// computes the whole NCC surface of the square at once, the numerators by
// one FFT-based cross-correlation of the two overlap strips and the
// denominators from summed-area tables (Lewis's fast normalized
// cross-correlation, which MIST's papers cite), so the search is exhaustive
// yet costs about as much as a few direct NCC evaluations. MIST's hill
// climbing explores the same square but may stop at a local maximum.
//
// A Refiner caches FFT plans (the few last sizes it used) and scratch
// buffers: use one per goroutine. The zero value is not usable; call
// [NewRefiner].
type Refiner struct {
	plans []sizedPlan // most recently used last
	p1    []float64   // region of tile 1, then the correlation
	p2    []float64
	s1    []complex128
	s2    []complex128
	ia    []uint64 // summed-area tables of tile 1 (sum, sum of squares)
	iaa   []uint64
	ib    []uint64
	ibb   []uint64
	dbuf  []float64 // scratch of denoiseRegion
	dspec []complex128
	surf  []float64  // the NCC surface of the last search
	cnt   []uint64   // its overlap areas
	errs  []float64  // bounds on the errors of surf's FFT-based values
	known []bool     // which values of surf are exact
	reg   regions    // of the summed-area tables ia, iaa, ib, ibb
	weak  *WeakPairs // scratch of RefineDenoised, if set
	keep  int        // plans kept
}

// sizedPlan is a cached FFT plan of nw x nh.
type sizedPlan struct {
	nw, nh int
	p      *FFT2
}

// maxPlans is the number of FFT plans a Refiner keeps. The sizes of the
// search boxes vary from pair to pair, and a plan holds arrays as large
// as its transform: an unbounded cache grows with every size seen. Four
// cover the boxes of west and north pairs and their variants at the
// grid's edges, or a denoised search (the mirrored reduced tile and its
// NCC surface) and a refinement (a mirrored overlap and its surface).
const maxPlans = 4

// spacePlans is the number of FFT plans a space of a WeakPairs keeps: the
// two of a denoised search, or of a denoised refinement, so that the
// plans of one are not kept during the other (see DenoiseScratch).
// Making a plan again costs little next to a noise-limited pair (under a
// millisecond for a tile of 1392 x 1040 against some 100 ms for its
// transforms).
const spacePlans = 2

// NewRefiner returns an empty Refiner.
func NewRefiner() *Refiner {
	return &Refiner{keep: maxPlans}
}

// SetWeakPairs makes [Refiner.RefineDenoised] take its scratch from p,
// shared with other Refiners and Aligners, instead of the Refiner's own
// (nil: its own). The translations are the same.
func (r *Refiner) SetWeakPairs(p *WeakPairs) { r.weak = p }

// Refine returns the displacement (x, y) with |x-start.X| <= radius and
// |y-start.Y| <= radius that maximizes the NCC of t1 and t2 ([NCC]) among
// those leaving an overlap of at least mx by my pixels. Ties go to the
// displacement closest to start. The returned Corr is the NCC there, and
// Margin and Spread say how clearly the surface peaks (see
// [Translation]); if no displacement in the square is admissible, start
// is returned with Corr = -1. The tiles must have the same size.
func (r *Refiner) Refine(t1, t2 *image.Gray16, start Translation, radius, mx, my int) Translation {
	b1 := t1.Bounds()
	w, h := b1.Dx(), b1.Dy()
	if t2.Bounds().Dx() != w || t2.Bounds().Dy() != h {
		panic("align: Refine: tiles of different sizes")
	}
	x0, x1, y0, y1, ok := refineBox(w, h, start, radius, mx, my)
	if !ok {
		return Translation{X: start.X, Y: start.Y, Corr: -1}
	}
	bw, cells := x1-x0+1, (x1-x0+1)*(y1-y0+1)
	r.surf = growF(r.surf, cells)
	r.cnt = growU(r.cnt, cells)
	best := Translation{Corr: math.Inf(-1)}
	if cells <= 4 {
		// Tiny boxes: direct evaluation is cheaper.
		for y := y0; y <= y1; y++ {
			for x := x0; x <= x1; x++ {
				v := NCC(t1, t2, x, y)
				r.surf[(y-y0)*bw+x-x0] = v
				r.cnt[(y-y0)*bw+x-x0] = overlapArea(w, h, Translation{X: x, Y: y})
				best = better(best, Translation{X: x, Y: y, Corr: v}, start)
			}
		}
	} else {
		r.errs = growF(r.errs, cells)
		r.surface(t1, t2, x0, x1, y0, y1, func(x, y int, n uint64, v, e float64) {
			i := (y-y0)*bw + x - x0
			r.surf[i], r.cnt[i], r.errs[i] = v, n, e
		})
		return r.exactPeak(t1, t2, start, x0, x1, y0, y1)
	}
	best.Margin, best.Spread = peakShape(r.surf, r.cnt, x0, x1, y0, y1, best)
	return best
}

// exactPeak chooses the best displacement of the box [x0, x1] x [y0, y1]
// and its Margin and Spread from the FFT-based NCC surface in r.surf, whose
// values are within r.errs of the exact ones, exactly as if every value of
// the surface were the exact NCC ([NCC]): where the bounds leave a decision
// open (the maximum, the highest value more than 1 px from it, a value
// near the spread's threshold), the few cells concerned are evaluated
// exactly. Refine's result is therefore the one of [Refiner.RefineBox] on
// exact sums (the GPU's), to the last bit, while its cost stays that of
// one FFT correlation plus typically two direct NCC evaluations.
func (r *Refiner) exactPeak(t1, t2 *image.Gray16, start Translation, x0, x1, y0, y1 int) Translation {
	bw := x1 - x0 + 1
	vals, errs := r.surf, r.errs
	r.known = growB(r.known, len(vals))
	known := r.known
	clear(known)
	w, h := t1.Bounds().Dx(), t1.Bounds().Dy()
	exact := func(i int) float64 {
		if !known[i] {
			vals[i] = r.exactNCC(t1, t2, w, h, x0+i%bw, y0+i/bw)
			errs[i], known[i] = 0, true
		}
		return vals[i]
	}
	// The maximum: only cells whose upper bound reaches the highest lower
	// bound can hold it.
	lo := math.Inf(-1)
	for i, v := range vals {
		lo = max(lo, v-errs[i])
	}
	best := Translation{Corr: math.Inf(-1)}
	for i, v := range vals {
		if v+errs[i] >= lo {
			best = better(best, Translation{X: x0 + i%bw, Y: y0 + i/bw, Corr: exact(i)}, start)
		}
	}
	// The highest value more than 1 px from the best one.
	near := func(i int) bool { return max(abs(x0+i%bw-best.X), abs(y0+i/bw-best.Y)) <= 1 }
	lo = math.Inf(-1)
	for i, v := range vals {
		if !near(i) {
			lo = max(lo, v-errs[i])
		}
	}
	far := -1.0
	for i, v := range vals {
		if !near(i) && v+errs[i] >= lo {
			far = max(far, exact(i))
		}
	}
	// The spread: the cells that may lie on either side of the threshold
	// are evaluated exactly.
	thr := best.Corr - NCCTolerance(best.Corr, r.cnt[(best.Y-y0)*bw+best.X-x0])
	spread := 0
	for i, v := range vals {
		d := max(abs(x0+i%bw-best.X), abs(y0+i/bw-best.Y))
		if d <= spread || v+errs[i] < thr {
			continue
		}
		if v-errs[i] >= thr || exact(i) >= thr {
			spread = d
		}
	}
	best.Margin, best.Spread = best.Corr-far, spread
	return best
}

// BoxNCC computes the NCC of a pair of tiles, exactly as [NCC] does (from
// exact integer sums, with [Pearson]), at every displacement (x, y) of the
// box [x0, x1] x [y0, y1] into dst, row by row ((y-y0)*(x1-x0+1) + x-x0).
// A GPU implements it from the tiles in its memory.
type BoxNCC func(x0, x1, y0, y1 int, dst []float64) error

// RefineBox is [Refiner.Refine] of two w x h tiles with the NCC values
// from ncc instead of the tiles themselves: given exact values, it returns
// the same translation (X, Y, Corr, Margin and Spread) as Refine.
func (r *Refiner) RefineBox(w, h int, ncc BoxNCC, start Translation, radius, mx, my int) (Translation, error) {
	x0, x1, y0, y1, ok := refineBox(w, h, start, radius, mx, my)
	if !ok {
		return Translation{X: start.X, Y: start.Y, Corr: -1}, nil
	}
	bw, cells := x1-x0+1, (x1-x0+1)*(y1-y0+1)
	r.surf = growF(r.surf, cells)
	r.cnt = growU(r.cnt, cells)
	if err := ncc(x0, x1, y0, y1, r.surf); err != nil {
		return Translation{}, err
	}
	best := Translation{Corr: math.Inf(-1)}
	for y := y0; y <= y1; y++ {
		for x := x0; x <= x1; x++ {
			i := (y-y0)*bw + x - x0
			r.cnt[i] = overlapArea(w, h, Translation{X: x, Y: y})
			best = better(best, Translation{X: x, Y: y, Corr: r.surf[i]}, start)
		}
	}
	best.Margin, best.Spread = peakShape(r.surf, r.cnt, x0, x1, y0, y1, best)
	return best, nil
}

// peakShape measures how clearly the NCC surface vals (the box [x0, x1] x
// [y0, y1], row by row, with the overlap areas cnt) peaks at best: the
// margin, best's NCC minus the highest NCC more than 1 px (Chebyshev)
// from it (1 + best's NCC when there is none), and the spread, the
// largest Chebyshev distance from best of a displacement whose NCC is
// within [NCCTolerance] of best's.
func peakShape(vals []float64, cnt []uint64, x0, x1, y0, y1 int, best Translation) (margin float64, spread int) {
	bw := x1 - x0 + 1
	tol := NCCTolerance(best.Corr, cnt[(best.Y-y0)*bw+best.X-x0])
	far := -1.0
	for y := y0; y <= y1; y++ {
		for x := x0; x <= x1; x++ {
			v := vals[(y-y0)*bw+x-x0]
			d := max(abs(x-best.X), abs(y-best.Y))
			if d > 1 {
				far = max(far, v)
			}
			if v >= best.Corr-tol {
				spread = max(spread, d)
			}
		}
	}
	return best.Corr - far, spread
}

// NCCTolerance is the difference of normalized cross-correlations that
// the noise of an estimate c over n pixels can explain: (1 - c^2) /
// sqrt(n), the standard error of a sample correlation coefficient of n
// independent pairs. Displacements of a pair whose NCC lies within it of
// the best one are not told apart by the image content.
func NCCTolerance(c float64, n uint64) float64 {
	if n == 0 || math.IsNaN(c) {
		return 1
	}
	c = max(-1, min(1, c))
	return (1 - c*c) / math.Sqrt(float64(n))
}

// surface computes the NCC of t1 and t2 (w x h each) at every displacement
// (x, y) of [x0, x1] x [y0, y1], a box of displacements that overlap, and
// calls visit with each, its overlap area n, its NCC v and a bound e on
// the error of v against the exact NCC ([NCC]), row by row.
func (r *Refiner) surface(t1, t2 *image.Gray16, x0, x1, y0, y1 int, visit func(x, y int, n uint64, v, e float64)) {
	b1 := t1.Bounds()
	w, h := b1.Dx(), b1.Dy()
	ua0, ua1, va0, va1, ub0, ub1, vb0, vb1 := boxRegions(w, h, x0, x1, y0, y1)
	aw, ah := ua1-ua0, va1-va0
	bw, bh := ub1-ub0, vb1-vb0
	// Lags s = x - ua0 + ub0, t = y - va0 + vb0 of the correlation of the
	// two regions; the transform must be long enough not to alias them.
	slo, shi := x0-ua0+ub0, x1-ua0+ub0
	tlo, thi := y0-va0+vb0, y1-va0+vb0
	nw := goodSize(max(bw+max(shi, 0), aw-min(slo, 0), aw, bw))
	nh := goodSize(max(bh+max(thi, 0), ah-min(tlo, 0), ah, bh))
	plan := r.plan(nw, nh)

	ma := r.fillRegion(t1, ua0, va0, aw, ah, nw, nh, &r.p1, &r.ia, &r.iaa)
	mb := r.fillRegion(t2, ub0, vb0, bw, bh, nw, nh, &r.p2, &r.ib, &r.ibb)
	n := plan.SpectrumLen()
	r.s1 = grow(r.s1, n)
	r.s2 = grow(r.s2, n)
	plan.ForwardFloat(r.p1, r.s1)
	plan.ForwardFloat(r.p2, r.s2)
	for i, v := range r.s1 {
		c := r.s2[i]
		r.s1[i] = v * complex(real(c), -imag(c))
	}
	// The regions are transformed: the correlation takes the place of
	// the first.
	corr := r.p1[:nw*nh]
	plan.Inverse(r.s1, corr)
	scale := 1 / float64(nw*nh)
	// A bound on the error of each correlation value cab: a transform of
	// N values by FFT computes a correlation within a few eps log2 N times
	// the product of the inputs' norms (bounded by regionEnergy, which
	// also covers the rounding of the mean-removed inputs);
	// fftErrorFactor makes it generous.
	ea := regionEnergy(r.ia, r.iaa, aw, ah)
	eb := regionEnergy(r.ib, r.ibb, bw, bh)
	const eps = 0x1p-52
	nn := float64(nw * nh)
	cabErr := fftErrorFactor * eps * math.Log2(nn+1) * math.Sqrt(nn) * math.Sqrt(ea*eb)
	r.reg = regions{ua0: ua0, va0: va0, aw: aw, ub0: ub0, vb0: vb0, bw: bw}

	for y := y0; y <= y1; y++ {
		for x := x0; x <= x1; x++ {
			// Overlap in t1 coordinates, then relative to the regions.
			ox0, ox1 := max(0, x), min(w, w+x)
			oy0, oy1 := max(0, y), min(h, h+y)
			cnt := uint64(ox1-ox0) * uint64(oy1-oy0)
			sa, saa := rectSums(r.ia, r.iaa, aw, ox0-ua0, oy0-va0, ox1-ua0, oy1-va0)
			sb, sbb := rectSums(r.ib, r.ibb, bw, ox0-x-ub0, oy0-y-vb0, ox1-x-ub0, oy1-y-vb0)
			s := ((x-ua0+ub0)%nw + nw) % nw
			t := ((y-va0+vb0)%nh + nh) % nh
			// Correlation of the mean-removed regions.
			cab := corr[t*nw+s] * scale
			fn := float64(cnt)
			// sum (a-ma)(b-mb) = cab; sum(a-ma) = sa - n ma; sum(b-mb) = sb - n mb.
			da := float64(sa) - fn*ma
			db := float64(sb) - fn*mb
			cov := fn*cab - da*db
			va := diff128(mul128(cnt, saa), mul128(sa, sa))
			vb := diff128(mul128(cnt, sbb), mul128(sb, sb))
			v, e := 0.0, 0.0
			if va > 0 && vb > 0 {
				den := math.Sqrt(va) * math.Sqrt(vb)
				r := cov / den
				// The rounding of cov's terms (da and db carry the
				// rounding of the means), of the variances and of the
				// quotient, beside the transform's error.
				covErr := fn*cabErr + 8*eps*(math.Abs(fn*cab)+math.Abs(da*db)+
					math.Abs(db)*(float64(sa)+fn*ma)+math.Abs(da)*(float64(sb)+fn*mb))
				e = covErr/den + 16*eps*(1+math.Abs(r))
				v = math.Max(-1, math.Min(1, r))
			}
			visit(x, y, cnt, v, e)
		}
	}
}

// fftErrorFactor is the constant of the bound on the FFT correlation's
// error in surface. A correlation by FFT (two forward transforms, a
// product, an inverse one, of N values) has an error vector whose 2-norm,
// hence every element's error, is at most about 3 c eps log2(N) sqrt(N)
// |a| |b|, with c about 6 for Cooley-Tukey transforms with accurate
// twiddle factors (Higham, Accuracy and Stability of Numerical
// Algorithms, 24.1); the sqrt(N) is the worst case of the product's
// amplification, far above the errors seen in practice. 32 covers 3 c
// with room; a generous bound costs only the exact evaluation of the rare
// cells within it of a decision.
const fftErrorFactor = 32

// regions are the regions of the tiles whose summed-area tables the last
// surface built: tile 1's from (ua0, va0), aw wide, tile 2's from (ub0,
// vb0), bw wide.
type regions struct{ ua0, va0, aw, ub0, vb0, bw int }

// exactNCC returns NCC(t1, t2, x, y) (w x h tiles) to the last bit, for a
// displacement (x, y) of the box of the last surface: the sums of a, b,
// a² and b² over the overlap come from the regions' summed-area tables,
// and only the cross products are summed from the pixels.
func (r *Refiner) exactNCC(t1, t2 *image.Gray16, w, h, x, y int) float64 {
	g := r.reg
	ox0, ox1 := max(0, x), min(w, w+x)
	oy0, oy1 := max(0, y), min(h, h+y)
	if ox1 <= ox0 || oy1 <= oy0 {
		return -1
	}
	sa, saa := rectSums(r.ia, r.iaa, g.aw, ox0-g.ua0, oy0-g.va0, ox1-g.ua0, oy1-g.va0)
	sb, sbb := rectSums(r.ib, r.ibb, g.bw, ox0-x-g.ub0, oy0-y-g.vb0, ox1-x-g.ub0, oy1-y-g.vb0)
	b1, b2 := t1.Bounds(), t2.Bounds()
	nx := ox1 - ox0
	var sab uint64
	for v := oy0; v < oy1; v++ {
		p1 := t1.Pix[t1.PixOffset(b1.Min.X+ox0, b1.Min.Y+v):]
		p2 := t2.Pix[t2.PixOffset(b2.Min.X+ox0-x, b2.Min.Y+v-y):]
		sab += crossRow(p1[:2*nx], p2[:2*nx])
	}
	return pearson(uint64(nx)*uint64(oy1-oy0), sa, sb, saa, sbb, sab)
}

// crossRow returns the sum of the products of the big-endian 16-bit
// pixels of p1 and p2 (equal even lengths), exactly.
func crossRow(p1, p2 []byte) uint64 {
	var s0, s1 uint64
	i := 0
	for ; i+8 <= len(p1); i += 8 {
		u := binary.BigEndian.Uint64(p1[i:])
		v := binary.BigEndian.Uint64(p2[i:])
		s0 += (u>>48)*(v>>48) + (u>>32&0xffff)*(v>>32&0xffff)
		s1 += (u>>16&0xffff)*(v>>16&0xffff) + (u&0xffff)*(v&0xffff)
	}
	for ; i+1 < len(p1); i += 2 {
		s0 += (uint64(p1[i])<<8 | uint64(p1[i+1])) * (uint64(p2[i])<<8 | uint64(p2[i+1]))
	}
	return s0 + s1
}

// regionEnergy returns a bound on the squared norm of a rw x rh region
// minus its mean as the transform sees it (the mean's rounding included):
// the sum of the squares of its pixels, which the mean-removed region's
// cannot exceed, from its summed-area tables (row length rw+1).
func regionEnergy(is, iq []uint64, rw, rh int) float64 {
	_, q := rectSums(is, iq, rw, 0, 0, rw, rh)
	return float64(q) + 1
}

// boxRegions returns the regions [ua0, ua1) x [va0, va1) of tile 1 and
// [ub0, ub1) x [vb0, vb1) of tile 2 (w x h tiles) that some overlap of a
// displacement in [x0, x1] x [y0, y1] covers.
func boxRegions(w, h, x0, x1, y0, y1 int) (ua0, ua1, va0, va1, ub0, ub1, vb0, vb1 int) {
	return max(0, x0), min(w, w+x1), max(0, y0), min(h, h+y1),
		max(0, -x1), min(w, w-x0), max(0, -y1), min(h, h-y0)
}

// RefineDenoised is [Refiner.Refine] on denoised tiles: the regions of t1
// and t2 that the overlaps of the search square cover are Wiener filtered
// against white read noise (each with its own noise estimate and power
// spectrum; see the notes on weak pairs in denoise.go), and the
// displacement of highest NCC of the filtered regions is returned with
// Corr, the NCC of the raw tiles there. On clean content it agrees with
// Refine; where the noise is comparable to the content it finds the true
// displacement when the raw NCC surface is too flat to.
func (r *Refiner) RefineDenoised(t1, t2 *image.Gray16, start Translation, radius, mx, my int) Translation {
	b1 := t1.Bounds()
	w, h := b1.Dx(), b1.Dy()
	if t2.Bounds().Dx() != w || t2.Bounds().Dy() != h {
		panic("align: RefineDenoised: tiles of different sizes")
	}
	if r.weak != nil {
		s, done := r.weak.take()
		defer done()
		return s.refineDenoised(t1, t2, start, radius, mx, my)
	}
	return r.refineDenoised(t1, t2, start, radius, mx, my)
}

// refineBox returns the admissible box of displacements [x0, x1] x [y0,
// y1] of w x h tiles within radius of start that leave at least mx by my
// pixels of overlap (radius at least 0, mx and my at least 1); ok is false
// when it is empty.
func refineBox(w, h int, start Translation, radius, mx, my int) (x0, x1, y0, y1 int, ok bool) {
	radius = max(radius, 0)
	mx, my = max(mx, 1), max(my, 1)
	x0, x1 = max(start.X-radius, -(w-mx)), min(start.X+radius, w-mx)
	y0, y1 = max(start.Y-radius, -(h-my)), min(start.Y+radius, h-my)
	return x0, x1, y0, y1, x0 <= x1 && y0 <= y1
}

// refineDenoised is RefineDenoised in r's own scratch.
func (r *Refiner) refineDenoised(t1, t2 *image.Gray16, start Translation, radius, mx, my int) Translation {
	b1 := t1.Bounds()
	w, h := b1.Dx(), b1.Dy()
	x0, x1, y0, y1, ok := refineBox(w, h, start, radius, mx, my)
	if !ok {
		return Translation{X: start.X, Y: start.Y, Corr: -1}
	}
	ua0, ua1, va0, va1, ub0, ub1, vb0, vb1 := boxRegions(w, h, x0, x1, y0, y1)
	f1, _ := r.denoise(t1, ua0, ua1, va0, va1)
	f2, _ := r.denoise(t2, ub0, ub1, vb0, vb1)
	best := r.Refine(f1, f2, start, radius, mx, my)
	if best.Corr == -1 && (best.X == start.X && best.Y == start.Y) {
		return best
	}
	best.Corr = NCC(t1, t2, best.X, best.Y)
	return best
}

// denoise filters the region [u0, u1) x [v0, v1) of t, widened where the
// tile allows to sizes whose doubles transform fast, and returns it with
// its correlation area (see denoiseRegion).
func (r *Refiner) denoise(t *image.Gray16, u0, u1, v0, v1 int) (*image.Gray16, float64) {
	b := t.Bounds()
	w, h := b.Dx(), b.Dy()
	widen := func(a0, a1, n int) (int, int) {
		k := a1 - a0
		for goodSize(2*k) != 2*k && k < n {
			k++
		}
		a1 = min(n, a0+k)
		return max(0, a1-k), a1
	}
	u0, u1 = widen(u0, u1, w)
	v0, v1 = widen(v0, v1, h)
	return denoiseRegion(t, u0, v0, u1-u0, v1-v0, r.plan, &r.dbuf, &r.dspec)
}

// better returns the better of two candidates: higher Corr, then closer
// to start (Chebyshev distance), then the current one.
func better(cur, cand, start Translation) Translation {
	switch {
	case cand.Corr > cur.Corr:
		return cand
	case cand.Corr == cur.Corr:
		dc := max(abs(cur.X-start.X), abs(cur.Y-start.Y))
		dn := max(abs(cand.X-start.X), abs(cand.Y-start.Y))
		if dn < dc {
			return cand
		}
	}
	return cur
}

// plan returns an FFT plan of nw x nh, from the cache of the last sizes
// used (r.keep of them) or new.
func (r *Refiner) plan(nw, nh int) *FFT2 {
	for i, c := range r.plans {
		if c.nw == nw && c.nh == nh {
			copy(r.plans[i:], r.plans[i+1:])
			r.plans[len(r.plans)-1] = c
			return c.p
		}
	}
	if len(r.plans) >= max(r.keep, 1) {
		copy(r.plans, r.plans[1:])
		r.plans[len(r.plans)-1] = sizedPlan{}
		r.plans = r.plans[:len(r.plans)-1]
	}
	p := NewFFT2(nw, nh)
	r.plans = append(r.plans, sizedPlan{nw, nh, p})
	return p
}

// fillRegion copies the rw x rh region at (x0, y0) of t, minus its mean,
// into the top-left corner of a zeroed nw x nh array, builds the region's
// summed-area tables, and returns the mean. The mean comes first, from a
// pass over the pixels, so that the array is written once.
func (r *Refiner) fillRegion(t *image.Gray16, x0, y0, rw, rh, nw, nh int, dst *[]float64, sum, sq *[]uint64) float64 {
	*dst = growF(*dst, nw*nh)
	a := *dst
	*sum = growU(*sum, (rw+1)*(rh+1))
	*sq = growU(*sq, (rw+1)*(rh+1))
	is, iq := *sum, *sq
	clear(is[:rw+1])
	clear(iq[:rw+1])
	b := t.Bounds()
	var total uint64
	for y := 0; y < rh; y++ {
		total += rowSum(t.Pix[t.PixOffset(b.Min.X+x0, b.Min.Y+y0+y):][:2*rw])
	}
	m := float64(total) / float64(rw*rh)
	for y := 0; y < rh; y++ {
		pix := t.Pix[t.PixOffset(b.Min.X+x0, b.Min.Y+y0+y):]
		var rs, rq uint64
		prev, cur := (y)*(rw+1), (y+1)*(rw+1)
		is[cur], iq[cur] = 0, 0
		row := a[y*nw : y*nw+rw]
		for x := range row {
			v := uint64(pix[2*x])<<8 | uint64(pix[2*x+1])
			row[x] = float64(v) - m
			rs += v
			rq += v * v
			is[cur+x+1] = is[prev+x+1] + rs
			iq[cur+x+1] = iq[prev+x+1] + rq
		}
		clear(a[y*nw+rw : (y+1)*nw])
	}
	clear(a[rh*nw : nh*nw])
	return m
}

// rowSum returns the sum of the big-endian 16-bit pixels of p (even
// length).
func rowSum(p []byte) uint64 {
	const lanes = 0x0000ffff0000ffff
	var s uint64
	i := 0
	for i+8 <= len(p) {
		// Two 32-bit lanes, each adding two 16-bit values per word: they
		// cannot carry into each other within 2^15 words.
		var l uint64
		for end := min(len(p)&^7, i+8<<15); i < end; i += 8 {
			u := binary.BigEndian.Uint64(p[i:])
			l += u&lanes + u>>16&lanes
		}
		s += l>>32 + l&0xffffffff
	}
	for ; i+1 < len(p); i += 2 {
		s += uint64(p[i])<<8 | uint64(p[i+1])
	}
	return s
}

// rectSums returns the sum and sum of squares over [x0,x1) x [y0,y1) from
// summed-area tables with row length rw+1.
func rectSums(is, iq []uint64, rw, x0, y0, x1, y1 int) (s, q uint64) {
	st := rw + 1
	a, b, c, d := y0*st+x0, y0*st+x1, y1*st+x0, y1*st+x1
	return is[d] - is[b] - is[c] + is[a], iq[d] - iq[b] - iq[c] + iq[a]
}

// goodSize returns the smallest n' >= n whose prime factors are 2, 3 and 5
// (fast sizes for the FFT).
func goodSize(n int) int {
	n = max(n, 1)
	for m := n; ; m++ {
		k := m
		for _, p := range []int{2, 3, 5} {
			for k%p == 0 {
				k /= p
			}
		}
		if k == 1 {
			return m
		}
	}
}

func grow(s []complex128, n int) []complex128 {
	if cap(s) < n {
		return make([]complex128, n)
	}
	return s[:n]
}

func growF(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

func growB(s []bool, n int) []bool {
	if cap(s) < n {
		return make([]bool, n)
	}
	return s[:n]
}

func growU(s []uint64, n int) []uint64 {
	if cap(s) < n {
		return make([]uint64, n)
	}
	return s[:n]
}
