package align

import (
	"image"
	"math"
)

// Weak pairs: read noise against smooth content.
//
// Camera read noise is white: independent from pixel to pixel, with the
// same power at every spatial frequency. Microscope content is smooth at
// the scale of the optics, its power falling off with frequency. When the
// noise is comparable to the content's spread (a phase image of a few
// cells on a flat background), the NCC of the raw overlaps varies more
// with the noise of the pixels each displacement pairs than with the
// displacement itself: the truth and its neighbours score within 1e-3 of
// each other and the maximum is often a pixel or more off. Filtering both
// overlaps with a Wiener filter first, max(0, 1 - N/P(f)) with P the
// radially averaged power spectrum of the region and N the power of white
// noise of the estimated variance, keeps the frequencies where the content
// dominates and removes those where the noise does; neighbouring
// displacements then pair nearly the same filtered noise, and the NCC
// surface peaks at the truth. On clean or textured content the filter is
// close to the identity.

// noiseVariance estimates the variance of white noise in the rw x rh region
// at (x0, y0) of t by Immerkær's method (1996): the mean absolute response
// of the Laplacian difference mask [1 -2 1; -2 4 -2; 1 -2 1], which cancels
// content that is locally linear, times sqrt(pi/2)/6. Regions smaller than
// 3 x 3 give 0.
func noiseVariance(t *image.Gray16, x0, y0, rw, rh int) float64 {
	if rw < 3 || rh < 3 {
		return 0
	}
	b := t.Bounds()
	row := func(y int) []byte {
		o := t.PixOffset(b.Min.X+x0, b.Min.Y+y0+y)
		return t.Pix[o : o+2*rw]
	}
	px := func(r []byte, x int) int64 { return int64(r[2*x])<<8 | int64(r[2*x+1]) }
	var s int64
	for y := 1; y < rh-1; y++ {
		a, c, d := row(y-1), row(y), row(y+1)
		for x := 1; x < rw-1; x++ {
			v := px(a, x-1) - 2*px(a, x) + px(a, x+1) -
				2*px(c, x-1) + 4*px(c, x) - 2*px(c, x+1) +
				px(d, x-1) - 2*px(d, x) + px(d, x+1)
			if v < 0 {
				v = -v
			}
			s += v
		}
	}
	sd := math.Sqrt(math.Pi/2) * float64(s) / (6 * float64((rw-2)*(rh-2)))
	return sd * sd
}

// NoiseCeiling returns the NCC that white read noise alone leaves two
// tiles of the same content, sqrt((1-n1/v1)(1-n2/v2)) from the variances v
// of the tiles and the variances n of the white noise estimated in them
// (Immerkær's method). A pair correlating well under it is weak for other
// reasons than noise (differing content, illumination) and denoising does
// not help it; a weak pair near or above it is noise-limited.
func NoiseCeiling(t1, t2 *image.Gray16) float64 {
	f := func(t *image.Gray16) float64 {
		b := t.Bounds()
		v := regionVariance(t, 0, 0, b.Dx(), b.Dy())
		if !(v > 0) {
			return 0
		}
		return max(0, 1-noiseVariance(t, 0, 0, b.Dx(), b.Dy())/v)
	}
	return math.Sqrt(f(t1) * f(t2))
}

// regionVariance returns the variance of the rw x rh region at (x0, y0)
// of t.
func regionVariance(t *image.Gray16, x0, y0, rw, rh int) float64 {
	b := t.Bounds()
	var s, q float64
	for y := 0; y < rh; y++ {
		pix := t.Pix[t.PixOffset(b.Min.X+x0, b.Min.Y+y0+y):]
		for x := 0; x < rw; x++ {
			v := float64(uint16(pix[2*x])<<8 | uint16(pix[2*x+1]))
			s += v
			q += v * v
		}
	}
	n := float64(rw * rh)
	m := s / n
	return q/n - m*m
}

// wienerBins is the number of radial frequency bins of the power spectrum
// the Wiener filter is built from.
const wienerBins = 64

// denoiseRegion returns the rw x rh region at (x0, y0) of t filtered by the
// Wiener filter built from the region itself (see above), as a tile of
// t's size whose other pixels are 0; the filtered values are mapped
// linearly onto the 16-bit range (NCC does not see such a map). The region
// is mirrored at its borders before the transform, so that the filter does
// not wrap one border onto the other. plan returns a transform of the given
// size.
//
// It also returns the correlation area of the filtered region,
// N sum P² / (sum P)² over the filtered power spectrum P of its N pixels
// (DC excluded): the sum of the squared autocorrelation over all lags, so
// that the sample correlation of n pixels of two independent such fields
// varies by about sqrt(area/n) (Bartlett). Smooth content has a large
// area, and a small overlap of it correlates highly by chance.
func denoiseRegion(t *image.Gray16, x0, y0, rw, rh int, plan func(w, h int) *FFT2, buf *[]float64, spec *[]complex128) (*image.Gray16, float64) {
	b := t.Bounds()
	out := image.NewGray16(image.Rect(0, 0, b.Dx(), b.Dy()))
	if rw < 1 || rh < 1 {
		return out, 1
	}
	nv := noiseVariance(t, x0, y0, rw, rh)
	mw, mh := 2*rw, 2*rh
	p := plan(mw, mh)
	*buf = growF(*buf, mw*mh)
	m := *buf
	for y := 0; y < rh; y++ {
		pix := t.Pix[t.PixOffset(b.Min.X+x0, b.Min.Y+y0+y):]
		r0, r1 := m[y*mw:(y+1)*mw], m[(mh-1-y)*mw:(mh-y)*mw]
		for x := 0; x < rw; x++ {
			v := float64(uint16(pix[2*x])<<8 | uint16(pix[2*x+1]))
			r0[x], r0[mw-1-x] = v, v
			r1[x], r1[mw-1-x] = v, v
		}
	}
	*spec = grow(*spec, p.SpectrumLen())
	s := *spec
	p.ForwardFloat(m, s)
	hw := mw/2 + 1
	// Radial frequency (cycles per pixel, up to sqrt(1/2)) to bin.
	bin := func(kx, ky int) int {
		if ky > mh/2 {
			ky -= mh
		}
		f := math.Hypot(float64(kx)/float64(mw), float64(ky)/float64(mh))
		return min(wienerBins-1, int(f*math.Sqrt2*wienerBins))
	}
	var pw, cnt [wienerBins]float64
	for kx := 0; kx < hw; kx++ {
		for ky := 0; ky < mh; ky++ {
			if kx == 0 && ky == 0 {
				continue
			}
			c := s[kx*mh+ky]
			k := bin(kx, ky)
			pw[k] += real(c)*real(c) + imag(c)*imag(c)
			cnt[k]++
		}
	}
	// White noise of variance nv has expected power nv*mw*mh per
	// coefficient of the unnormalized transform (also of the mirrored
	// region, whose transform is a cosine transform of the region).
	noise := nv * float64(mw*mh)
	var gain [wienerBins]float64
	for k := range gain {
		if cnt[k] > 0 && pw[k] > 0 {
			gain[k] = max(0, 1-noise*cnt[k]/pw[k])
		}
	}
	var sp, sp2 float64
	for kx := 0; kx < hw; kx++ {
		wgt := 2.0
		if kx == 0 || (mw%2 == 0 && kx == hw-1) {
			wgt = 1
		}
		for ky := 0; ky < mh; ky++ {
			if kx == 0 && ky == 0 {
				continue
			}
			g := gain[bin(kx, ky)]
			c := s[kx*mh+ky] * complex(g, 0)
			s[kx*mh+ky] = c
			sp += wgt * g * g
			sp2 += wgt * g * g * g * g
		}
	}
	area := 1.0
	if sp > 0 {
		area = max(1, float64(mw*mh)*sp2/(sp*sp))
	}
	p.Inverse(s, m)
	lo, hi := math.Inf(1), math.Inf(-1)
	for y := 0; y < rh; y++ {
		for _, v := range m[y*mw : y*mw+rw] {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	scale := 0.0
	if hi > lo {
		scale = 65535 / (hi - lo)
	}
	for y := 0; y < rh; y++ {
		o := out.PixOffset(x0, y0+y)
		for x, v := range m[y*mw : y*mw+rw] {
			q := uint16(math.Round((v - lo) * scale))
			out.Pix[o+2*x], out.Pix[o+2*x+1] = uint8(q>>8), uint8(q)
		}
	}
	return out, area
}

// DenoiseScratch returns about how many bytes of scratch one space of a
// [WeakPairs] (or an [Aligner] or [Refiner] without one) holds once it has
// handled a noise-limited pair of w x h tiles (see [ChoosePeak] and
// [Refiner.RefineDenoised]), about 110 bytes per pixel of a tile. The
// search on tiles reduced twice and the denoised refinement at full
// resolution share the buffers, so the larger of the two counts: the
// search's mirrored reduced tile and its spectrum, the two zero-padded
// regions of its NCC surface over every displacement, their spectra and
// summed-area tables (about 60P for P pixels of a tile); the
// refinement's mirrored overlaps and their spectra, the filtered tiles and
// the surface of the box, for overlaps up to half a tile (about 70P). The
// FFT plans come on top, each holding arrays as large as its transform: a
// space of a WeakPairs keeps two, those of the search (about 30P) or of
// such a refinement (about 40P). An Aligner or Refiner without a pool
// keeps four, and may hold both (about 30P more).
func DenoiseScratch(w, h int) int64 {
	if w <= 0 || h <= 0 {
		return 0
	}
	k := denoiseDecimation
	wd, hd := float64(w/k), float64(h/k)
	// An FFT of nw x nh: its real array (or a spectrum's, in bytes).
	real := func(nw, nh float64) float64 { return 8 * nw * nh }
	spec := func(nw, nh float64) float64 { return 16 * (math.Floor(nw/2) + 1) * nh }
	plan := func(nw, nh float64) float64 { return real(nw, nh) + spec(nw, nh) }
	// The search: the mirror of a reduced tile, its NCC surface over
	// every displacement (two regions, their spectra, the summed-area
	// tables), the reduced tiles and the filtered ones.
	nw, nh := float64(goodSize(w/k*2)), float64(goodSize(h/k*2))
	searchBuf := plan(2*wd, 2*hd) + 2*plan(nw, nh) + 4*8*wd*hd + 4*2*wd*hd
	searchPlans := plan(2*wd, 2*hd) + plan(nw, nh)
	// The refinement of an overlap of half a tile (w/2 x h or w x h/2,
	// the same area): its mirror, the surface of the box (regions about
	// as large as the overlap), the filtered tiles.
	ow, oh := float64(w)/2, float64(h)
	refineBuf := plan(2*ow, 2*oh) + 2*plan(ow, oh) + 4*8*ow*oh + 2*2*float64(w)*float64(h)
	refinePlans := plan(2*ow, 2*oh) + plan(ow, oh)
	return int64(max(searchBuf, refineBuf) + max(searchPlans, refinePlans))
}
