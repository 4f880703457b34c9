package align

import (
	"encoding/binary"
	"image"
	"math"
	"math/bits"

	"github.com/gohtgs/htgs/internal/native"
)

// Peak is a peak of the phase-correlation matrix (PCM): its location and
// its value, scaled so that two tiles that are exact circular shifts of
// each other give 1.
type Peak struct {
	X, Y  int
	Value float64
}

// Aligner computes the translation of an adjacent pair of tiles of size
// W x H by phase correlation (PCIAM) followed by cross-correlation factors
// (CCF). It holds an FFT plan and scratch buffers: use one Aligner per
// goroutine. The zero value is not usable; call [NewAligner].
type Aligner struct {
	plan  *FFT2
	opt   options
	spec  []complex128
	pcm   []float64
	peaks []Peak
	ref   *Refiner   // private scratch of noise-limited pairs (searchDenoised)
	weak  *WeakPairs // shared scratch of noise-limited pairs, if set
}

// NewAligner returns an aligner for w x h tiles with the given options
// (PeakCount, Whitening, MinOverlap and MinOverlapFraction matter here).
func NewAligner(w, h int, opt Options) *Aligner {
	p := newFFT2(w, h, opt.FFT, native.FFTWMeasure)
	return &Aligner{
		plan: p,
		opt:  opt.resolve(),
		spec: make([]complex128, p.SpectrumLen()),
		pcm:  make([]float64, w*h),
	}
}

// Peaks computes the phase-correlation matrix of two tiles from their half
// spectra f1 (tile 1) and f2 (tile 2), as produced by [TileFFT.Forward] (or
// [FFT2.Forward]), and returns its n highest local maxima, best first.
//
// The PCM is the inverse transform of the normalized cross-power spectrum
// F1*conj(F2)/|F1*conj(F2)|^b, with b = Options.Whitening (MIST: b = 1);
// coefficients whose magnitude is zero (or below 1e-15 of the product of
// the DC terms, i.e. rounding noise of a flat image) are set to zero
// instead of being divided. With this order of the
// factors a tile 2 that sits at (X, Y) relative to tile 1 gives a peak at
// (X mod W, Y mod H). Peaks are taken on the real part of the PCM: the
// cross-power spectrum of two real images is Hermitian, so the exact
// inverse is real, and a negative real value (anti-correlation) is no
// evidence of a displacement, which the magnitude would wrongly count. A
// peak is a value not smaller than its 8 circular neighbours (ties broken
// by position), so the n peaks are distinct maxima rather than the
// shoulders of one maximum. The returned slice is reused by the next call.
func (a *Aligner) Peaks(f1, f2 []complex128, n int) []Peak {
	a.plan.checkSpec(f1)
	a.plan.checkSpec(f2)
	if n < 1 {
		n = 1
	}
	w, h := a.plan.w, a.plan.h
	// The largest |F| of an image is its DC term; use it to scale the
	// zero-magnitude guard.
	floor := abs128(f1[0]) * abs128(f2[0]) * 1e-15
	beta := a.opt.beta
	hw := a.plan.hw
	// total is the sum of |normalized coefficient| over the full
	// spectrum: the PCM value of a perfect circular shift.
	total := 0.0
	for kx := 0; kx < hw; kx++ {
		// Columns 1..W/2-1 (and W/2 for odd W) stand for two columns of
		// the full spectrum.
		wgt := 2.0
		if kx == 0 || (w%2 == 0 && kx == hw-1) {
			wgt = 1
		}
		col := a.spec[kx*h : (kx+1)*h]
		c1, c2 := f1[kx*h:(kx+1)*h], f2[kx*h:(kx+1)*h]
		for i, v1 := range c1 {
			v2 := c2[i]
			re := real(v1)*real(v2) + imag(v1)*imag(v2)
			im := imag(v1)*real(v2) - real(v1)*imag(v2)
			m := math.Sqrt(re*re + im*im)
			if !(m > floor) || math.IsInf(m, 0) {
				col[i] = 0
				continue
			}
			// d = m^beta; the common exponents avoid math.Pow.
			var d float64
			switch beta {
			case 1:
				d = m
			case 0.75:
				s := math.Sqrt(m)
				d = s * math.Sqrt(s)
			case 0.5:
				d = math.Sqrt(m)
			default:
				d = math.Pow(m, beta)
			}
			col[i] = complex(re/d, im/d)
			total += wgt * m / d
		}
	}
	a.plan.Inverse(a.spec, a.pcm)
	a.peaks = topPeaks(a.pcm, w, h, n, a.peaks[:0])
	scale := 0.0
	if total > 0 {
		scale = 1 / total
	}
	for i := range a.peaks {
		a.peaks[i].Value *= scale
	}
	return a.peaks
}

// topPeaks appends to dst the n largest local maxima of the row-major w x h
// matrix m (8-neighbourhood, circular), best first.
func topPeaks(m []float64, w, h, n int, dst []Peak) []Peak {
	dst = dst[:0]
	worst := math.Inf(-1)
	for i, v := range m {
		if len(dst) == n && !(v > worst) {
			continue
		}
		if math.IsNaN(v) || !isLocalMax(m, w, h, i) {
			continue
		}
		pk := Peak{X: i % w, Y: i / w, Value: v}
		// Insert keeping dst sorted by decreasing value.
		j := len(dst)
		if j < n {
			dst = append(dst, pk)
		} else {
			j--
			dst[j] = pk
		}
		for ; j > 0 && dst[j-1].Value < dst[j].Value; j-- {
			dst[j-1], dst[j] = dst[j], dst[j-1]
		}
		if len(dst) == n {
			worst = dst[n-1].Value
		}
	}
	return dst
}

// isLocalMax reports whether m[i] is a maximum of its circular 3x3
// neighbourhood; among equal values the one with the smallest index wins.
func isLocalMax(m []float64, w, h, i int) bool {
	x, y := i%w, i/w
	v := m[i]
	for dy := -1; dy <= 1; dy++ {
		yy := y + dy
		if yy < 0 {
			yy += h
		} else if yy >= h {
			yy -= h
		}
		for dx := -1; dx <= 1; dx++ {
			if dx == 0 && dy == 0 {
				continue
			}
			xx := x + dx
			if xx < 0 {
				xx += w
			} else if xx >= w {
				xx -= w
			}
			j := yy*w + xx
			if j == i {
				continue // tiny matrices wrap onto themselves
			}
			if u := m[j]; u > v || (u == v && j < i) {
				return false
			}
		}
	}
	return true
}

// Align returns the translation of tile t2 relative to its neighbour t1 in
// direction dir (PCIAM on the spectra f1, f2 of t1, t2, then [CCF] on the
// tiles). This is the per-pair work of the stitcher.
//
// When the best candidate of the first PeakCount peaks correlates below
// ConfidentCorr, the correlation surface is taken to be flat (low
// contrast, strong noise, periodic content), where the true displacement
// is often a lower peak: the candidates of the next peaks, up to
// MaxPeakCount, are scored too and the best NCC over all of them wins.
//
// When even that best candidate is weak and the read noise of the tiles
// explains it (see [ChoosePeak]), the translation comes from a search of
// every displacement on denoised tiles instead.
//
// The scratch of such a pair comes from the [WeakPairs] set by
// [Aligner.SetWeakPairs], or else is the Aligner's own, made on the first
// noise-limited pair and kept.
func (a *Aligner) Align(t1, t2 *image.Gray16, f1, f2 []complex128, dir Direction) Translation {
	scratch := privateScratch(&a.ref)
	if a.weak != nil {
		scratch = a.weak.take
	}
	return choosePeak(t1, t2, dir, a.Peaks(f1, f2, a.opt.maxPeaks), a.opt, scratch)
}

// SetWeakPairs makes the Aligner take the scratch of noise-limited pairs
// from p, shared with other Aligners and Refiners, instead of keeping one
// of its own (nil: its own). The translations are the same.
func (a *Aligner) SetWeakPairs(p *WeakPairs) {
	a.weak = p
	if p != nil {
		a.ref = nil
	}
}

// ChoosePeak returns the translation [Aligner.Align] derives from the
// peaks of a pair (best first, up to [Options.EffectiveMaxPeakCount] of
// them): [CCF] of the first PeakCount peaks, extended to the others when
// that best candidate correlates below [ConfidentCorr]. Pipelines that
// compute the peaks elsewhere (a GPU) call it for the CCF step.
//
// Noise-limited pairs. When the best candidate still correlates below
// ConfidentCorr and white read noise alone would keep the tiles' NCC below
// it too ([NoiseCeiling] of the whole tiles), phase correlation is not to
// be trusted: on smooth content a narrow overlap contributes little to the
// correlation of the whole tiles, and the peaks follow large-scale
// structure (bands) or noise. The translation is then the displacement of
// the pair's orientation, over the whole range that leaves the minimum
// overlap, whose NCC on Wiener-filtered tiles (see [Refiner.RefineDenoised])
// is most significant: the largest lower confidence bound
// tanh(atanh(r) - 2/sqrt(n/A - 3)) of the correlation r of n overlapping
// pixels, A being the area of one independent sample of the filtered
// tiles, so that a small overlap of smooth content, which correlates highly
// by chance, does not win over a larger one that correlates almost as
// well. Its Corr is the raw NCC there.
//
// The scratch of a noise-limited pair is allocated for the call; see
// [WeakPairs.ChoosePeak] to bound it when many goroutines call.
func ChoosePeak(t1, t2 *image.Gray16, dir Direction, peaks []Peak, opt Options) Translation {
	var r *Refiner
	return choosePeak(t1, t2, dir, peaks, opt.resolve(), privateScratch(&r))
}

// choosePeak is ChoosePeak with the scratch of a noise-limited pair from
// scratch, which returns it with the function that gives it back.
func choosePeak(t1, t2 *image.Gray16, dir Direction, peaks []Peak, o options, scratch func() (*Refiner, func())) Translation {
	b := t1.Bounds()
	tr, _ := choosePeakScored(b.Dx(), b.Dy(), dir, peaks, o, cpuScorer(t1, t2))
	return denoisedIfWeak(t1, t2, dir, tr, o, scratch)
}

// denoisedIfWeak returns tr, the CCF's choice for the pair (t1, t2), or,
// when the pair is noise-limited (tr below ConfidentCorr and so is the
// tiles' noise ceiling), the denoised search's translation where it finds
// one.
func denoisedIfWeak(t1, t2 *image.Gray16, dir Direction, tr Translation, o options, scratch func() (*Refiner, func())) Translation {
	if tr.Corr >= ConfidentCorr || NoiseCeiling(t1, t2) >= ConfidentCorr {
		return tr
	}
	r, done := scratch()
	d, ok := searchDenoised(t1, t2, dir, o, r)
	done()
	if ok {
		return d
	}
	return tr
}

// significanceZ is the number of standard errors by which searchDenoised
// lowers a correlation's Fisher z before comparing (one-sided 97.7%).
const significanceZ = 2

// searchDenoised searches every displacement of the pair's orientation
// that leaves the minimum overlap for the most significant NCC of the
// denoised tiles (see [ChoosePeak]); ok is false when no overlap holds
// enough independent samples.
func searchDenoised(t1, t2 *image.Gray16, dir Direction, o options, r *Refiner) (Translation, bool) {
	b := t1.Bounds()
	w, h := b.Dx(), b.Dy()
	mx, my := o.minOverlap(w, h)
	// The search runs on tiles reduced k times (block means, which also
	// average the white noise down k² times), then the best displacement
	// is refined at full resolution within k pixels: the scratch of the
	// search shrinks k² times.
	k := denoiseDecimation
	if w/k < 2*mx/k+4 || h/k < 2*my/k+4 {
		k = 1
	}
	d1, d2 := decimate(t1, k), decimate(t2, k)
	wd, hd := w/k, h/k
	mxd, myd := (mx+k-1)/k, (my+k-1)/k
	f1, a1 := r.denoise(d1, 0, wd, 0, hd)
	f2, a2 := r.denoise(d2, 0, wd, 0, hd)
	area := math.Sqrt(a1 * a2)
	x0, x1, y0, y1 := 0, wd-mxd, -(hd - myd), hd-myd
	if dir == North {
		x0, x1, y0, y1 = -(wd - mxd), wd-mxd, 0, hd-myd
	}
	bestS, best := math.Inf(-1), Translation{}
	r.surface(f1, f2, x0, x1, y0, y1, func(x, y int, n uint64, v, _ float64) {
		dof := float64(n)/area - 3
		if dof < 1 {
			return
		}
		s := math.Atanh(math.Min(v, 1-1e-12)) - significanceZ/math.Sqrt(dof)
		if s > bestS {
			bestS, best = s, Translation{X: x, Y: y}
		}
	})
	if math.IsInf(bestS, -1) {
		return Translation{}, false
	}
	best = r.RefineDenoised(t1, t2, Translation{X: k * best.X, Y: k * best.Y}, k, mx, my)
	return best, best.Corr != -1
}

// denoiseDecimation is the factor by which searchDenoised reduces the
// tiles.
const denoiseDecimation = 2

// decimate returns t reduced k times in each dimension by k x k block
// means (t itself for k = 1).
func decimate(t *image.Gray16, k int) *image.Gray16 {
	if k <= 1 {
		return t
	}
	b := t.Bounds()
	wd, hd := b.Dx()/k, b.Dy()/k
	out := image.NewGray16(image.Rect(0, 0, wd, hd))
	sums := make([]uint64, wd)
	for yd := 0; yd < hd; yd++ {
		clear(sums)
		for y := yd * k; y < (yd+1)*k; y++ {
			pix := t.Pix[t.PixOffset(b.Min.X, b.Min.Y+y):]
			for x := 0; x < wd*k; x++ {
				sums[x/k] += uint64(pix[2*x])<<8 | uint64(pix[2*x+1])
			}
		}
		n := uint64(k * k)
		for xd, s := range sums {
			v := uint16((s + n/2) / n)
			o := out.PixOffset(xd, yd)
			out.Pix[o], out.Pix[o+1] = uint8(v>>8), uint8(v)
		}
	}
	return out
}

// cpuScorer scores offsets with [NCC] of t1 and t2.
func cpuScorer(t1, t2 *image.Gray16) Scorer {
	return func(offs [][2]int, corr []float64) error {
		for i, o := range offs {
			corr[i] = NCC(t1, t2, o[0], o[1])
		}
		return nil
	}
}

// A Scorer computes the normalized cross-correlation ([NCC]) of a pair's
// two tiles at a batch of offsets of the second tile relative to the
// first: corr[i] for offs[i] (len(corr) == len(offs)).
type Scorer func(offs [][2]int, corr []float64) error

// ChoosePeakScored is [ChoosePeak] for pipelines that compute the
// correlations elsewhere, such as a GPU that holds the tiles: it examines
// the same candidates of the same peaks of a pair of w x h tiles and
// chooses among them by the same rules, with the correlations that score
// gives, which it asks for in at most two batches (the candidates of the
// first PeakCount peaks, then, if none is confident, the others). With a
// score that computes [NCC] exactly (such as one built on [Pearson] of
// exact sums) the result is ChoosePeak's, except for noise-limited pairs,
// which ChoosePeak registers on denoised tiles that ChoosePeakScored does
// not have: there it keeps the best candidate by score. Errors are
// score's.
func ChoosePeakScored(w, h int, dir Direction, peaks []Peak, opt Options, score Scorer) (Translation, error) {
	return choosePeakScored(w, h, dir, peaks, opt.resolve(), score)
}

func choosePeakScored(w, h int, dir Direction, peaks []Peak, o options, score Scorer) (Translation, error) {
	mx, my := o.minOverlap(w, h)
	n := min(o.peaks, len(peaks))
	best, err := ccf(w, h, dir, peaks[:n], mx, my, score)
	if err != nil {
		return best, err
	}
	if n < len(peaks) && !(best.Corr >= ConfidentCorr) {
		more, err := ccf(w, h, dir, peaks[n:], mx, my, score)
		if err != nil {
			return best, err
		}
		if more.Corr > best.Corr {
			best = more
		}
	}
	return best, nil
}

// EffectiveMaxPeakCount returns the number of phase-correlation peaks
// computed per pair: MaxPeakCount or its default, at least PeakCount.
func (o Options) EffectiveMaxPeakCount() int { return o.resolve().maxPeaks }

// ConfidentCorr is the NCC from which a translation is taken as
// confirmed by the image content: [Aligner.Align] looks no further than
// the first PeakCount peaks, and the stage model neither drops it as an
// outlier nor repairs it while it lies in the overlap window ([EstimateModel]).
const ConfidentCorr = 0.9

// MinOverlap returns the minimum overlap width and height in pixels that
// opt imposes on candidate displacements of w x h tiles.
func MinOverlap(w, h int, opt Options) (mx, my int) {
	return opt.resolve().minOverlap(w, h)
}

// CCF resolves the aliasing of PCM peaks into the translation of tile t2
// relative to t1 for a pair in direction dir.
//
// A peak at (x, y) of a W x H PCM is compatible with the displacements
// {x, W-x} x {y, H-y}, each with either sign. The pair orientation fixes
// one sign: tile 2 of a west pair is to the right of tile 1 (X >= 0) and
// tile 2 of a north pair is below it (Y >= 0), while the other component
// may take either sign. That gives 2 x 4 = 8 candidates per peak (fewer when
// some coincide). Every candidate that leaves an overlap of at least mx
// pixels horizontally and my pixels vertically is scored by the normalized
// cross-correlation [NCC] of the two tiles over the overlap; the best score
// wins (ties: the first candidate, peaks in order, direct interpretation
// first). If no candidate is admissible the result is the first candidate
// with Corr = -1. mx and my are usually taken from [MinOverlap].
func CCF(t1, t2 *image.Gray16, dir Direction, peaks []Peak, mx, my int) Translation {
	b := t1.Bounds()
	tr, _ := ccf(b.Dx(), b.Dy(), dir, peaks, max(mx, 1), max(my, 1), cpuScorer(t1, t2))
	return tr
}

// ccf is CCF on w x h tiles with the correlations of score.
func ccf(w, h int, dir Direction, peaks []Peak, mx, my int, score Scorer) (Translation, error) {
	var first Translation
	var seen [16][2]int
	offs := make([][2]int, 0, 8*len(peaks))
	for pi, pk := range peaks {
		cands := candidates(pk.X, pk.Y, w, h, dir, seen[:0])
		for ci, c := range cands {
			if pi == 0 && ci == 0 {
				first = Translation{X: c[0], Y: c[1], Corr: -1}
			}
			if admissible(c[0], c[1], w, h, mx, my) {
				offs = append(offs, c)
			}
		}
	}
	if len(offs) == 0 {
		return first, nil
	}
	corr := make([]float64, len(offs))
	if err := score(offs, corr); err != nil {
		return first, err
	}
	best := Translation{X: offs[0][0], Y: offs[0][1], Corr: corr[0]}
	for i, c := range offs[1:] {
		if v := corr[i+1]; v > best.Corr {
			best = Translation{X: c[0], Y: c[1], Corr: v}
		}
	}
	return best, nil
}

// candidates appends the distinct aliasing interpretations of a PCM peak.
func candidates(x, y, w, h int, dir Direction, dst [][2]int) [][2]int {
	xs := [2]int{x, w - x}
	ys := [2]int{y, h - y}
	add := func(cx, cy int) {
		for _, d := range dst {
			if d == [2]int{cx, cy} {
				return
			}
		}
		dst = append(dst, [2]int{cx, cy})
	}
	for _, cx := range xs {
		for _, cy := range ys {
			if dir == West {
				add(cx, cy)
				add(cx, -cy)
			} else {
				add(cx, cy)
				add(-cx, cy)
			}
		}
	}
	return dst
}

// admissible reports whether displacement (x, y) of two w x h tiles leaves
// an overlap of at least mx by my pixels.
func admissible(x, y, w, h, mx, my int) bool {
	return w-abs(x) >= mx && h-abs(y) >= my
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// NCC returns the normalized cross-correlation (Pearson correlation
// coefficient) of tiles t1 and t2 over their overlap when t2 is displaced
// by (x, y) relative to t1, i.e. over the pixels t1(u+x, v+y) and t2(u, v).
// It returns -1 when the tiles do not overlap and 0 when either overlap
// region is constant (no evidence either way). Sums are accumulated exactly
// in integers, so the result does not suffer from cancellation on bright
// images.
func NCC(t1, t2 *image.Gray16, x, y int) float64 {
	b1, b2 := t1.Bounds(), t2.Bounds()
	w1, h1, w2, h2 := b1.Dx(), b1.Dy(), b2.Dx(), b2.Dy()
	// Overlap in t1 coordinates.
	x0, x1 := max(0, x), min(w1, x+w2)
	y0, y1 := max(0, y), min(h1, y+h2)
	if x1 <= x0 || y1 <= y0 {
		return -1
	}
	nx := x1 - x0
	var sa, sb, saa, sbb, sab uint64
	for v := y0; v < y1; v++ {
		p1 := t1.Pix[t1.PixOffset(b1.Min.X+x0, b1.Min.Y+v):]
		p2 := t2.Pix[t2.PixOffset(b2.Min.X+x0-x, b2.Min.Y+v-y):]
		ra, rb, raa, rbb, rab := nccRow(p1[:2*nx], p2[:2*nx])
		sa += ra
		sb += rb
		saa += raa
		sbb += rbb
		sab += rab
	}
	n := uint64(nx) * uint64(y1-y0)
	return pearson(n, sa, sb, saa, sbb, sab)
}

// nccRow returns the sums of a, b, a², b² and ab over the big-endian
// 16-bit pixels a of p1 and b of p2 (equal even lengths). The sums are
// exact: a row of up to 2^32 pixels cannot overflow them. Four pixels at
// a time are loaded as one 64-bit word each, with the two halves summed
// separately so that the additions do not wait on one another.
func nccRow(p1, p2 []byte) (ra, rb, raa, rbb, rab uint64) {
	var sa2, sb2, saa2, sbb2, sab2 uint64
	i := 0
	for ; i+8 <= len(p1); i += 8 {
		u := binary.BigEndian.Uint64(p1[i:])
		v := binary.BigEndian.Uint64(p2[i:])
		a0, a1, a2, a3 := u>>48, u>>32&0xffff, u>>16&0xffff, u&0xffff
		b0, b1, b2, b3 := v>>48, v>>32&0xffff, v>>16&0xffff, v&0xffff
		ra += a0 + a1
		sa2 += a2 + a3
		rb += b0 + b1
		sb2 += b2 + b3
		raa += a0*a0 + a1*a1
		saa2 += a2*a2 + a3*a3
		rbb += b0*b0 + b1*b1
		sbb2 += b2*b2 + b3*b3
		rab += a0*b0 + a1*b1
		sab2 += a2*b2 + a3*b3
	}
	for ; i+1 < len(p1); i += 2 {
		a := uint64(p1[i])<<8 | uint64(p1[i+1])
		c := uint64(p2[i])<<8 | uint64(p2[i+1])
		ra += a
		rb += c
		raa += a * a
		rbb += c * c
		rab += a * c
	}
	return ra + sa2, rb + sb2, raa + saa2, rbb + sbb2, rab + sab2
}

// Pearson returns the correlation coefficient of n pairs (a, b) from the
// exact sums of a, b, a², b² and ab, as [NCC] computes it (0 when either
// side is constant). It serves pipelines that compute the sums elsewhere
// (see [ChoosePeakScored]).
func Pearson(n, sa, sb, saa, sbb, sab uint64) float64 {
	if n == 0 {
		return -1
	}
	return pearson(n, sa, sb, saa, sbb, sab)
}

// pearson computes the correlation coefficient from exact integer sums
// using 128-bit intermediate products.
func pearson(n, sa, sb, saa, sbb, sab uint64) float64 {
	va := diff128(mul128(n, saa), mul128(sa, sa))
	vb := diff128(mul128(n, sbb), mul128(sb, sb))
	cov := diff128(mul128(n, sab), mul128(sa, sb))
	if va <= 0 || vb <= 0 {
		return 0
	}
	r := cov / (math.Sqrt(va) * math.Sqrt(vb))
	return math.Max(-1, math.Min(1, r))
}

type u128 struct{ hi, lo uint64 }

func mul128(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

// diff128 returns a-b as a float64 (exact inputs, one rounding).
func diff128(a, b u128) float64 {
	neg := false
	if a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo) {
		a, b = b, a
		neg = true
	}
	lo, borrow := bits.Sub64(a.lo, b.lo, 0)
	hi := a.hi - b.hi - borrow
	v := float64(hi)*0x1p64 + float64(lo)
	if neg {
		return -v
	}
	return v
}

func abs128(c complex128) float64 {
	return math.Hypot(real(c), imag(c))
}
