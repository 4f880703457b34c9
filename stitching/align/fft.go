package align

import (
	"fmt"
	"image"
	"math"
	"math/cmplx"

	"github.com/gohtgs/htgs/internal/native"
	"gonum.org/v1/gonum/dsp/fourier"
)

// FFT2 is a plan for 2-D discrete Fourier transforms of W x H real images,
// built on gonum's 1-D transforms: a real-to-complex transform of every row
// followed by a complex transform of every column of the half spectrum.
//
// Spectrum layout. Because the input is real, its spectrum is Hermitian and
// only the W/2+1 non-negative horizontal frequencies are stored (the "half
// spectrum", [FFT2.SpectrumLen] = (W/2+1)*H values). The storage is
// column-major: coefficient (kx, ky), 0 <= kx <= W/2, 0 <= ky < H, is at
// index kx*H + ky, so that the column transforms run on contiguous memory.
// Transforms are unnormalized (gonum's convention): Inverse(Forward(x)) is
// W*H*x.
//
// The 2-D transforms run on FFTW, loaded at run time, when it is installed
// (see [FFTKernel]; [NewFFT2] picks it automatically, [NewFFT2Kernel]
// chooses), and on gonum otherwise; the layouts and results are the same.
//
// A plan holds scratch memory and must not be used by two goroutines at
// once; create one per goroutine. Plans are cheap compared to a transform.
type FFT2 struct {
	w, h, hw int
	fftw     *fftwPlans   // nil: gonum
	in       []float64    // FFTW: aligned row-major real image
	specBuf  []complex128 // FFTW: aligned spectrum scratch, made on demand
	row      *fourier.FFT
	col      *fourier.CmplxFFT
	rbuf     []float64
	cbuf     []complex128
	// Scratch and tables of ForwardPeriodic, allocated on first use.
	bcol  []complex128 // length h
	lapX  []float64    // 2cos(2 pi q/W) - 2, q = 0..W/2
	lapY  []float64    // 2cos(2 pi r/H) - 2, r = 0..H-1
	phX   []complex128 // 1 - exp(2 pi i q/W)
	phY   []complex128 // 1 - exp(2 pi i r/H)
	edgeA []float64    // u(x, H-1) - u(x, 0)
}

// NewFFT2 returns a plan for w x h images (w, h >= 1), on FFTW when it can
// be loaded ([FFTAuto]).
func NewFFT2(w, h int) *FFT2 { return NewFFT2Kernel(w, h, FFTAuto) }

// NewFFT2Kernel returns a plan for w x h images (w, h >= 1) on the given
// kernel (FFTFFTW falls back to gonum when FFTW cannot be loaded; see
// [DescribeFFT]).
func NewFFT2Kernel(w, h int, k FFTKernel) *FFT2 { return newFFT2(w, h, k, native.FFTWEstimate) }

// newFFT2 is NewFFT2Kernel with the FFTW planner flags (see fftwPlans).
func newFFT2(w, h int, k FFTKernel, fftwFlags uint32) *FFT2 {
	if w < 1 || h < 1 {
		panic(fmt.Sprintf("align: NewFFT2(%d, %d): invalid size", w, h))
	}
	hw := w/2 + 1
	p := &FFT2{
		w: w, h: h, hw: hw,
		row:  fourier.NewFFT(w),
		col:  fourier.NewCmplxFFT(h),
		rbuf: make([]float64, w),
		cbuf: make([]complex128, hw),
	}
	if f := k.loadFFTW(); f != nil {
		p.useFFTW(f, fftwFlags)
	}
	return p
}

// Width returns the image width W of the plan.
func (p *FFT2) Width() int { return p.w }

// Height returns the image height H of the plan.
func (p *FFT2) Height() int { return p.h }

// SpectrumLen returns the number of complex values of a half spectrum,
// (W/2+1)*H.
func (p *FFT2) SpectrumLen() int { return p.hw * p.h }

// Forward computes the half spectrum of tile into dst (see [FFT2] for the
// layout). It panics if the tile size is not W x H or len(dst) is not
// SpectrumLen(); those are programming errors.
func (p *FFT2) Forward(tile *image.Gray16, dst []complex128) {
	b := tile.Bounds()
	if b.Dx() != p.w || b.Dy() != p.h {
		panic(fmt.Sprintf("align: FFT2.Forward: tile is %dx%d, plan is %dx%d", b.Dx(), b.Dy(), p.w, p.h))
	}
	p.checkSpec(dst)
	if p.fftw != nil {
		p.grayToFloat(tile)
		p.fftwForward(p.in, dst)
		return
	}
	for y := 0; y < p.h; y++ {
		pix := tile.Pix[tile.PixOffset(b.Min.X, b.Min.Y+y):]
		pix = pix[:2*p.w]
		for x := range p.rbuf {
			p.rbuf[x] = float64(uint16(pix[2*x])<<8 | uint16(pix[2*x+1]))
		}
		p.rowForward(y, dst)
	}
	p.columns(dst, false)
}

// ForwardFloat is [FFT2.Forward] for a row-major W*H real image.
func (p *FFT2) ForwardFloat(src []float64, dst []complex128) {
	if len(src) != p.w*p.h {
		panic(fmt.Sprintf("align: FFT2.ForwardFloat: %d values, plan is %dx%d", len(src), p.w, p.h))
	}
	p.checkSpec(dst)
	if p.fftw != nil {
		p.fftwForward(src, dst)
		return
	}
	for y := 0; y < p.h; y++ {
		copy(p.rbuf, src[y*p.w:(y+1)*p.w])
		p.rowForward(y, dst)
	}
	p.columns(dst, false)
}

// rowForward transforms p.rbuf (row y) and scatters it into column-major dst.
func (p *FFT2) rowForward(y int, dst []complex128) {
	p.row.Coefficients(p.cbuf, p.rbuf)
	for kx, v := range p.cbuf {
		dst[kx*p.h+y] = v
	}
}

// columns runs the complex transform (inverse when inv) on every column of
// the half spectrum in place.
func (p *FFT2) columns(spec []complex128, inv bool) {
	for kx := 0; kx < p.hw; kx++ {
		c := spec[kx*p.h : (kx+1)*p.h]
		if inv {
			p.col.Sequence(c, c)
		} else {
			p.col.Coefficients(c, c)
		}
	}
}

// Inverse computes the real image whose half spectrum is spec (unnormalized:
// the result is W*H times the true inverse) into the row-major W*H slice
// dst. The spectrum is taken as Hermitian: only its stored half is used, and
// the result is the real part of the full complex inverse. spec is
// overwritten (used as scratch).
func (p *FFT2) Inverse(spec []complex128, dst []float64) {
	p.checkSpec(spec)
	if len(dst) != p.w*p.h {
		panic(fmt.Sprintf("align: FFT2.Inverse: dst has %d values, plan is %dx%d", len(dst), p.w, p.h))
	}
	if p.fftw != nil {
		p.fftwInverse(spec, dst)
		return
	}
	p.columns(spec, true)
	for y := 0; y < p.h; y++ {
		for kx := range p.cbuf {
			p.cbuf[kx] = spec[kx*p.h+y]
		}
		p.row.Sequence(dst[y*p.w:(y+1)*p.w], p.cbuf)
	}
}

// ForwardPeriodic computes the half spectrum of the periodic component of
// tile in the periodic-plus-smooth decomposition of Moisan (2011): tile =
// periodic + smooth, where the smooth component absorbs the jumps between
// opposite borders that a DFT sees when it wraps the image around. Those
// jumps sit at the same place in every tile and put a cross of leakage
// through the spectrum, which phase correlation turns into false peaks at
// zero shift and along the axes; the periodic component has no such jumps
// yet keeps the tile content right up to its borders (unlike a window,
// which would blank the overlap). The smooth component is computed from the
// border differences with two 1-D transforms, so this costs little more
// than [FFT2.Forward]. The DC coefficient is that of the tile.
func (p *FFT2) ForwardPeriodic(tile *image.Gray16, dst []complex128) {
	p.Forward(tile, dst)
	a, b := p.borderSpectra(tile)
	p.subtractSmooth(dst, a, b)
}

// borderSpectra computes the 1-D transforms that define the smooth
// component of tile: a (W/2+1 values) of the differences between its last
// and first rows, and b (H values) of the differences between its last and
// first columns. Both are scratch of the plan, valid until the next call.
func (p *FFT2) borderSpectra(tile *image.Gray16) (a, b []complex128) {
	bd := tile.Bounds()
	at := func(x, y int) float64 {
		i := tile.PixOffset(bd.Min.X+x, bd.Min.Y+y)
		return float64(uint16(tile.Pix[i])<<8 | uint16(tile.Pix[i+1]))
	}
	p.initPeriodic()
	for x := 0; x < p.w; x++ {
		p.edgeA[x] = at(x, p.h-1) - at(x, 0)
	}
	for y := 0; y < p.h; y++ {
		p.bcol[y] = complex(at(p.w-1, y)-at(0, y), 0)
	}
	// Row part: v1(x, 0) = a(x), v1(x, H-1) = -a(x): V1(q, r) = A(q) phY(r).
	p.row.Coefficients(p.cbuf, p.edgeA)
	// Column part: v2(0, y) = b(y), v2(W-1, y) = -b(y): V2(q, r) = B(r) phX(q).
	p.col.Coefficients(p.bcol, p.bcol)
	return p.cbuf, p.bcol
}

// BorderSpectra returns the two 1-D transforms from which
// [FFT2.ForwardPeriodic] derives the smooth component of tile, for
// implementations of it elsewhere (the GPU backend of package stitching):
// a (W/2+1 values), the transform of the differences between the tile's
// last and first rows, and b (H values), that of the differences between
// its last and first columns. With the tables of [FFT2.SmoothTables], the
// smooth component's spectrum is (a[q]*phY[r] + b[r]*phX[q]) /
// (lapX[q] + lapY[r]) at every (q, r) but (0, 0). Both slices are scratch
// of the plan, valid until its next call. It panics if the tile is not
// W x H.
func (p *FFT2) BorderSpectra(tile *image.Gray16) (a, b []complex128) {
	if bd := tile.Bounds(); bd.Dx() != p.w || bd.Dy() != p.h {
		panic(fmt.Sprintf("align: FFT2.BorderSpectra: tile is %dx%d, plan is %dx%d", bd.Dx(), bd.Dy(), p.w, p.h))
	}
	return p.borderSpectra(tile)
}

// SmoothTables returns the tables of the smooth component (see
// [FFT2.BorderSpectra]): phX[q] = 1 - exp(2 pi i q/W) and lapX[q] =
// 2cos(2 pi q/W) - 2 for q = 0..W/2, and phY, lapY likewise over
// r = 0..H-1. They belong to the plan and must not be modified.
func (p *FFT2) SmoothTables() (phX, phY []complex128, lapX, lapY []float64) {
	p.initPeriodic()
	return p.phX, p.phY, p.lapX, p.lapY
}

func (p *FFT2) initPeriodic() {
	if p.bcol != nil {
		return
	}
	p.bcol = make([]complex128, p.h)
	p.edgeA = make([]float64, p.w)
	p.lapX = make([]float64, p.hw)
	p.phX = make([]complex128, p.hw)
	for q := range p.lapX {
		a := 2 * math.Pi * float64(q) / float64(p.w)
		p.lapX[q] = 2*math.Cos(a) - 2
		p.phX[q] = 1 - cmplx.Exp(complex(0, a))
	}
	p.lapY = make([]float64, p.h)
	p.phY = make([]complex128, p.h)
	for r := range p.lapY {
		a := 2 * math.Pi * float64(r) / float64(p.h)
		p.lapY[r] = 2*math.Cos(a) - 2
		p.phY[r] = 1 - cmplx.Exp(complex(0, a))
	}
}

// subtractSmooth subtracts from dst the spectrum of the smooth component
// whose border transforms borderSpectra returned.
func (p *FFT2) subtractSmooth(dst []complex128, a, b []complex128) {
	for q := 0; q < p.hw; q++ {
		col := dst[q*p.h : (q+1)*p.h]
		aq, pq, lq := a[q], p.phX[q], p.lapX[q]
		for r := range col {
			if q == 0 && r == 0 {
				continue
			}
			v := aq*p.phY[r] + b[r]*pq
			inv := 1 / (lq + p.lapY[r]) // real: no complex division
			col[r] -= complex(real(v)*inv, imag(v)*inv)
		}
	}
}

func (p *FFT2) checkSpec(s []complex128) {
	if len(s) != p.hw*p.h {
		panic(fmt.Sprintf("align: FFT2: spectrum has %d values, plan needs %d", len(s), p.hw*p.h))
	}
}

// TileFFT computes the per-tile spectrum that [Aligner] expects under the
// given options: the half spectrum of the tile's periodic component
// ([FFT2.ForwardPeriodic]) by default, of the raw tile ([FFT2.Forward])
// with Options.NoPeriodicDecomposition. Like FFT2 it holds scratch memory:
// use one per goroutine.
type TileFFT struct {
	plan     *FFT2
	periodic bool
}

// NewTileFFT returns a TileFFT for w x h tiles.
func NewTileFFT(w, h int, opt Options) *TileFFT {
	return &TileFFT{plan: newFFT2(w, h, opt.FFT, native.FFTWMeasure), periodic: opt.resolve().periodic}
}

// Kernel returns the FFT implementation in use (FFTFFTW or FFTGonum).
func (t *TileFFT) Kernel() FFTKernel { return t.plan.Kernel() }

// SpectrumLen returns the length of the spectra, (W/2+1)*H.
func (t *TileFFT) SpectrumLen() int { return t.plan.SpectrumLen() }

// Forward computes the spectrum of tile into dst (len SpectrumLen()). It
// panics on a size mismatch.
func (t *TileFFT) Forward(tile *image.Gray16, dst []complex128) {
	if t.periodic {
		t.plan.ForwardPeriodic(tile, dst)
	} else {
		t.plan.Forward(tile, dst)
	}
}
