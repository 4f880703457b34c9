package align

import (
	"fmt"
	"image"
	"runtime"
	"unsafe"

	"github.com/gohtgs/htgs/internal/native"
)

// FFTKernel selects the implementation of [FFT2]'s 2-D transforms.
type FFTKernel string

// The FFT kernels. FFTAuto (also the zero value "") uses FFTW when the
// library (libfftw3.so.3, Debian's libfftw3-double3) can be loaded at run
// time and gonum otherwise; FFTFFTW asks for FFTW and falls back to gonum
// when it cannot be loaded (programs check [DescribeFFT] first and refuse
// to run instead); FFTGonum is the pure-Go implementation. Both give the
// same results to rounding (1e-9 relative, tested).
const (
	FFTAuto  FFTKernel = "auto"
	FFTFFTW  FFTKernel = "fftw"
	FFTGonum FFTKernel = "gonum"
)

// ParseFFTKernel parses "auto", "fftw" or "gonum".
func ParseFFTKernel(s string) (FFTKernel, error) {
	switch k := FFTKernel(s); k {
	case FFTAuto, FFTFFTW, FFTGonum:
		return k, nil
	case "":
		return FFTAuto, nil
	}
	return "", fmt.Errorf("align: unknown FFT kernel %q (have auto, fftw, gonum)", s)
}

// DescribeFFT returns a one-line description of the implementation that k
// selects on this machine, such as "FFTW 3.3.10 (fftw-3.3.10-sse2-avx)" or
// "gonum (pure Go); install libfftw3-double3 for ~5x faster FFTs". It
// returns an error for FFTFFTW when FFTW cannot be loaded.
func DescribeFFT(k FFTKernel) (string, error) {
	if k == FFTGonum {
		return "gonum (pure Go, forced)", nil
	}
	f, err := native.LoadFFTW()
	if err != nil {
		if k == FFTFFTW {
			return "", fmt.Errorf("align: FFT kernel fftw: %w", err)
		}
		return "gonum (pure Go); install libfftw3-double3 for ~5x faster FFTs", nil
	}
	return fftwName(f), nil
}

// fftwName turns "fftw-3.3.10-sse2-avx" into "FFTW 3.3.10 (sse2-avx)".
func fftwName(f *native.FFTW) string {
	v := f.Version()
	var num, rest string
	if _, err := fmt.Sscanf(v, "fftw-%s", &num); err == nil {
		for i := 0; i < len(num); i++ {
			if num[i] == '-' {
				num, rest = num[:i], num[i+1:]
				break
			}
		}
		if rest != "" {
			return "FFTW " + num + " (" + rest + ")"
		}
		return "FFTW " + num
	}
	return v
}

// loadFFTW returns FFTW when k selects it and it can be loaded, else nil.
func (k FFTKernel) loadFFTW() *native.FFTW {
	if k == FFTGonum {
		return nil
	}
	f, err := native.LoadFFTW()
	if err != nil {
		return nil
	}
	return f
}

// fftwPlans holds an FFT2's FFTW plans, made on first use. It must not
// point back to the FFT2.
//
// Planning. The tile-sized plans of [TileFFT] and [Aligner] (one image size
// per run, the transforms that dominate) use FFTW_MEASURE: FFTW times
// candidate algorithms, about 0.25 s per direction for 1392x1040, once per
// size in the process. It gives a forward transform ~15-20% faster than
// FFTW_ESTIMATE's plan. Other plans ([NewFFT2], [NewFFT2Kernel]: the
// refinement's strips, whose sizes vary from pair to pair) use
// FFTW_ESTIMATE. No wisdom is written to disk: the one-time cost is small
// next to a stitching run and a cache file would be one more thing to
// invalidate.
//
// Plans are shared ([native.FFTW.SharedR2C]): every FFT2 of a geometry in
// the process executes the same two plans on its own arrays, so a task
// copy, a Refiner's new box size or a new run does not plan again. When
// each Refiner planned its own, FFTW_ESTIMATE planning took about a third
// of a 4x5 grid's refinement, and task copies planning at once waited for
// the planner's lock. Only
// plans beyond the shared set's bound are the FFT2's own, destroyed by a
// cleanup when the FFT2 is collected.
type fftwPlans struct {
	f              *native.FFTW
	fwd, inv       native.Plan
	ownFwd, ownInv bool   // not shared: destroyed by the cleanup
	align          int    // FFTW alignment class of the planning arrays
	flags          uint32 // FFTWEstimate or FFTWMeasure
}

func (pl *fftwPlans) destroy() {
	if pl.ownFwd {
		pl.f.Destroy(pl.fwd)
	}
	if pl.ownInv {
		pl.f.Destroy(pl.inv)
	}
}

// newFFTWPlans attaches FFTW plans to p.
func (p *FFT2) useFFTW(f *native.FFTW, flags uint32) {
	p.fftw = &fftwPlans{f: f, flags: flags}
	p.in = alignedFloats(p.w * p.h)
	p.fftw.align = f.AlignmentOf(unsafe.Pointer(&p.in[0]))
	runtime.AddCleanup(p, (*fftwPlans).destroy, p.fftw)
}

// alignedFloats returns n float64s starting at a 64-byte boundary (Go's
// heap does not move objects, so the alignment holds).
func alignedFloats(n int) []float64 {
	s := make([]float64, n+8)
	off := int((64 - uintptr(unsafe.Pointer(&s[0]))%64) % 64 / 8)
	return s[off : off+n : off+n]
}

func alignedComplex(n int) []complex128 {
	s := make([]complex128, n+4)
	off := int((64 - uintptr(unsafe.Pointer(&s[0]))%64) % 64 / 16)
	return s[off : off+n : off+n]
}

// The FFTW plans compute exactly FFT2's layouts with guru strides: the
// real image is row-major (x stride 1, y stride W) and the half spectrum
// column-major (ky stride 1, kx stride H); FFTW halves the last dimension
// listed, x.
func (p *FFT2) fwdDims() []native.Dim {
	return []native.Dim{{N: int32(p.h), IS: int32(p.w), OS: 1}, {N: int32(p.w), IS: 1, OS: int32(p.h)}}
}

func (p *FFT2) invDims() []native.Dim {
	return []native.Dim{{N: int32(p.h), IS: 1, OS: int32(p.w)}, {N: int32(p.w), IS: int32(p.h), OS: 1}}
}

// fftwForward transforms src (row-major W*H) into dst with FFTW.
func (p *FFT2) fftwForward(src []float64, dst []complex128) {
	pl := p.fftw
	if pl.fwd == 0 {
		// FFTW_MEASURE overwrites the planning arrays: plan on scratch
		// arrays of the alignment class of p.in (both 64-byte aligned).
		var shared bool
		pl.fwd, shared = pl.f.SharedR2C(p.fwdDims(), pl.flags|native.FFTWPreserveInput, pl.align, func() (*float64, *complex128) {
			return &alignedFloats(p.w * p.h)[0], &alignedComplex(p.SpectrumLen())[0]
		})
		pl.ownFwd = !shared
		if pl.fwd == 0 {
			panic(fmt.Sprintf("align: FFTW cannot plan a %dx%d r2c transform", p.w, p.h))
		}
	}
	if pl.f.AlignmentOf(unsafe.Pointer(&src[0])) != pl.align {
		copy(p.in, src)
		src = p.in
	}
	out := dst
	if pl.f.AlignmentOf(unsafe.Pointer(&dst[0])) != pl.align {
		out = p.scratchSpec()
	}
	pl.f.ExecR2C(pl.fwd, &src[0], &out[0])
	runtime.KeepAlive(src)
	runtime.KeepAlive(out)
	// p owns the cleanup that destroys the plans: it must outlive the
	// call even when the caller's last use of it was this method.
	runtime.KeepAlive(p)
	if &out[0] != &dst[0] {
		copy(dst, out)
	}
}

// fftwInverse is Inverse with FFTW; it overwrites spec.
func (p *FFT2) fftwInverse(spec []complex128, dst []float64) {
	pl := p.fftw
	if pl.inv == 0 {
		var shared bool
		pl.inv, shared = pl.f.SharedC2R(p.invDims(), pl.flags|native.FFTWDestroyInput, pl.align, func() (*complex128, *float64) {
			return &alignedComplex(p.SpectrumLen())[0], &alignedFloats(p.w * p.h)[0]
		})
		pl.ownInv = !shared
		if pl.inv == 0 {
			panic(fmt.Sprintf("align: FFTW cannot plan a %dx%d c2r transform", p.w, p.h))
		}
	}
	in := spec
	if pl.f.AlignmentOf(unsafe.Pointer(&spec[0])) != pl.align {
		in = p.scratchSpec()
		copy(in, spec)
	}
	out := dst
	if pl.f.AlignmentOf(unsafe.Pointer(&dst[0])) != pl.align {
		out = p.in
	}
	pl.f.ExecC2R(pl.inv, &in[0], &out[0])
	runtime.KeepAlive(in)
	runtime.KeepAlive(out)
	runtime.KeepAlive(p) // see fftwForward
	if &out[0] != &dst[0] {
		copy(dst, out)
	}
}

// scratchSpec returns an aligned spectrum-sized scratch buffer, for callers
// whose arrays FFTW cannot use directly.
func (p *FFT2) scratchSpec() []complex128 {
	if p.specBuf == nil {
		p.specBuf = alignedComplex(p.SpectrumLen())
	}
	return p.specBuf
}

// grayToFloat converts tile (W x H) into the row-major p.in.
func (p *FFT2) grayToFloat(tile *image.Gray16) {
	b := tile.Bounds()
	for y := 0; y < p.h; y++ {
		pix := tile.Pix[tile.PixOffset(b.Min.X, b.Min.Y+y):]
		pix = pix[:2*p.w]
		row := p.in[y*p.w : (y+1)*p.w]
		for x := range row {
			row[x] = float64(uint16(pix[2*x])<<8 | uint16(pix[2*x+1]))
		}
	}
}

// Kernel returns the implementation the plan uses: FFTFFTW or FFTGonum.
func (p *FFT2) Kernel() FFTKernel {
	if p.fftw != nil {
		return FFTFFTW
	}
	return FFTGonum
}
