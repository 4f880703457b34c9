package cuda

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// cufftSonames returns the cuFFT libraries to try, in order (CUDA 13 ships
// cuFFT 12, CUDA 12 cuFFT 11, CUDA 11 cuFFT 10), after $HTGS_CUFFT.
func cufftSonames() []string {
	return withCUDAHome("libcufft.so.12", "libcufft.so.11", "libcufft.so.10")
}

// FFTKind selects the transforms of an [FFT2D].
type FFTKind int

const (
	// Complex plans complex-to-complex transforms (cufftExecZ2Z) both ways:
	// spatial and spectral buffers are rows*cols complex128.
	Complex FFTKind = iota
	// Real plans a real-to-complex forward transform (D2Z) and its
	// complex-to-real inverse (Z2D): the spatial buffer is rows*cols
	// float64 and the spectrum the rows*(cols/2+1) non-negative horizontal
	// frequencies (the rest follow by Hermitian symmetry).
	Real
)

// String returns "complex" or "real".
func (k FFTKind) String() string {
	switch k {
	case Complex:
		return "complex"
	case Real:
		return "real"
	}
	return fmt.Sprintf("FFTKind(%d)", int(k))
}

// cufftType values (HTGS_FFT_* in shim.h).
const (
	fftZ2Z = 0x69
	fftD2Z = 0x6a
	fftZ2D = 0x6c
)

// FFT2D is a 2-D double-precision FFT of rows x cols row-major data on one
// device (cuFFT plans, loaded at run time on the first [Device.NewFFT2D];
// without a cuFFT library the error wraps [ErrLibrary]).
//
// Conventions match gonum's dsp/fourier: the forward transform uses
// exp(-2*pi*i*...), and neither direction is normalized, so
// Inverse(Forward(x)) = rows*cols*x. Spectrum coefficient (ky, kx) is at
// index ky*w + kx, with w = cols (Complex) or cols/2+1 (Real).
//
// A plan must not be used by two goroutines at once: make one per task
// copy.
type FFT2D struct {
	dev        *Device
	ctx        uintptr
	rows, cols int
	kind       FFTKind
	fwd, inv   int // cufftHandle of each direction (the same one for Complex)
	closed     atomic.Bool
	lib        string
	mu         sync.Mutex // guards stream
	stream     *Stream    // nil: the legacy default stream, and calls wait
}

// NewFFT2D plans transforms of rows x cols arrays of the given kind on d.
// Plans allocate their work area on the device.
func (d *Device) NewFFT2D(rows, cols int, kind FFTKind) (*FFT2D, error) {
	if rows < 1 || cols < 1 || rows > math.MaxInt32 || cols > math.MaxInt32 {
		return nil, fmt.Errorf("%w: NewFFT2D(%d, %d): invalid size", ErrSize, rows, cols)
	}
	if kind != Complex && kind != Real {
		return nil, fmt.Errorf("%w: NewFFT2D: invalid kind %d", ErrSize, int(kind))
	}
	lib, err := loadCUFFT()
	if err != nil {
		return nil, err
	}
	c, err := d.context()
	if err != nil {
		return nil, err
	}
	p := &FFT2D{dev: d, ctx: c, rows: rows, cols: cols, kind: kind, lib: lib}
	if v, err := fftVersion(); err == nil {
		p.lib = fmt.Sprintf("%s (cuFFT %d)", lib, v)
	}
	if kind == Complex {
		if p.fwd, err = fftPlan2d(c, rows, cols, fftZ2Z); err != nil {
			return nil, fmt.Errorf("cuda: device %d: plan %dx%d Z2Z: %w", d.ordinal, rows, cols, err)
		}
		p.inv = p.fwd
		return p, nil
	}
	if p.fwd, err = fftPlan2d(c, rows, cols, fftD2Z); err != nil {
		return nil, fmt.Errorf("cuda: device %d: plan %dx%d D2Z: %w", d.ordinal, rows, cols, err)
	}
	if p.inv, err = fftPlan2d(c, rows, cols, fftZ2D); err != nil {
		_ = fftDestroy(c, p.fwd) // the Z2D error is the one to report
		return nil, fmt.Errorf("cuda: device %d: plan %dx%d Z2D: %w", d.ordinal, rows, cols, err)
	}
	return p, nil
}

// Rows returns the number of rows.
func (p *FFT2D) Rows() int { return p.rows }

// Cols returns the number of columns.
func (p *FFT2D) Cols() int { return p.cols }

// Kind returns the plan's kind.
func (p *FFT2D) Kind() FFTKind { return p.kind }

// Library names the cuFFT library in use and its version.
func (p *FFT2D) Library() string { return p.lib }

// SpatialBytes returns the size of a spatial-domain buffer: rows*cols
// complex128 (Complex) or float64 (Real) values.
func (p *FFT2D) SpatialBytes() int64 {
	if p.kind == Real {
		return int64(p.rows) * int64(p.cols) * 8
	}
	return int64(p.rows) * int64(p.cols) * 16
}

// SpectrumBytes returns the size of a spectrum buffer: rows*cols
// (Complex) or rows*(cols/2+1) (Real) complex128 values.
func (p *FFT2D) SpectrumBytes() int64 {
	if p.kind == Real {
		return int64(p.rows) * int64(p.cols/2+1) * 16
	}
	return int64(p.rows) * int64(p.cols) * 16
}

// SetStream makes later transforms queue on s, asynchronously; nil selects
// the legacy default stream, on which transforms wait for completion.
func (p *FFT2D) SetStream(s *Stream) error {
	if p.closed.Load() || p.dev == nil {
		return fmt.Errorf("cuda: FFT2D: %w", ErrClosed)
	}
	var sh uintptr
	if s != nil {
		var err error
		if sh, err = s.on(p.dev, "FFT plan"); err != nil {
			return err
		}
	}
	for _, h := range p.handles() {
		if err := fftSetStream(p.ctx, h, sh); err != nil {
			return fmt.Errorf("cuda: device %d: %w", p.dev.ordinal, err)
		}
	}
	p.mu.Lock()
	p.stream = s
	p.mu.Unlock()
	return nil
}

// handles returns the distinct cuFFT plans.
func (p *FFT2D) handles() []int {
	if p.fwd == p.inv {
		return []int{p.fwd}
	}
	return []int{p.fwd, p.inv}
}

// Forward computes the spectrum of src into dst (src: SpatialBytes, dst:
// SpectrumBytes). For Complex, dst may be src (in place).
func (p *FFT2D) Forward(dst, src DeviceMem) error {
	typ := fftZ2Z
	if p.kind == Real {
		typ = fftD2Z
	}
	return p.exec("Forward", p.fwd, typ, -1, dst, src, p.SpectrumBytes(), p.SpatialBytes())
}

// Inverse computes the spatial data of the spectrum src into dst (src:
// SpectrumBytes, dst: SpatialBytes), unnormalized. For Complex, dst may be
// src (in place). For Real, cuFFT uses src as scratch: its contents are
// lost.
func (p *FFT2D) Inverse(dst, src DeviceMem) error {
	typ := fftZ2Z
	if p.kind == Real {
		typ = fftZ2D
	}
	return p.exec("Inverse", p.inv, typ, +1, dst, src, p.SpatialBytes(), p.SpectrumBytes())
}

func (p *FFT2D) exec(op string, plan, typ, dir int, dst, src DeviceMem, dstBytes, srcBytes int64) error {
	if p.closed.Load() || p.dev == nil {
		return fmt.Errorf("cuda: FFT2D: %w", ErrClosed)
	}
	if dst.size != dstBytes || src.size != srcBytes {
		return fmt.Errorf("%w: FFT2D.%s (%dx%d %s): dst has %d bytes (want %d), src %d (want %d)",
			ErrSize, op, p.rows, p.cols, p.kind, dst.size, dstBytes, src.size, srcBytes)
	}
	for _, x := range []DeviceMem{dst, src} {
		if x.dev == nil || x.dev.ordinal != p.dev.ordinal {
			return fmt.Errorf("%w: FFT2D of device %d with memory of another device", ErrWrongDevice, p.dev.ordinal)
		}
	}
	if err := fftExec(p.ctx, plan, typ, src.ptr, dst.ptr, dir); err != nil {
		return fmt.Errorf("cuda: device %d: FFT2D.%s: %w", p.dev.ordinal, op, err)
	}
	p.mu.Lock()
	s := p.stream
	p.mu.Unlock()
	if s == nil {
		if err := drvStreamSync(p.ctx, 0); err != nil {
			return fmt.Errorf("cuda: device %d: FFT2D.%s: %w", p.dev.ordinal, op, err)
		}
	}
	return nil
}

// Close destroys the plans. Close is idempotent.
func (p *FFT2D) Close() error {
	if p.closed.Swap(true) || p.dev == nil {
		return nil
	}
	var first error
	for _, h := range p.handles() {
		if err := fftDestroy(p.ctx, h); err != nil && first == nil {
			first = fmt.Errorf("cuda: device %d: %w", p.dev.ordinal, err)
		}
	}
	return first
}
