package cuda

import (
	"fmt"
	"math"
)

// Launch geometry shared with kernels/phasecorr.cu.
const (
	blockThreads = 256  // HTGS_BLOCK: threads per block
	maxParts     = 1024 // blocks of htgs_max_blocks, and so partial results
	maxGrid      = 65535
)

// Modes of htgs_max_blocks (HTGS_MAX_* in kernels/phasecorr.cu).
const (
	modeF64      = 0
	modeAbsC128  = 1
	modeRealC128 = 2
)

// kernelFunc is the package's kernel module loaded into one device's
// context.
type kernelFunc struct {
	mod        uintptr
	crossPower uintptr
	crossPow   uintptr
	smooth     uintptr
	localMax   uintptr
	maxBlocks  uintptr
	maxFinal   uintptr
	toF64      uintptr
}

// kernels returns the device's kernels, JIT-loading the embedded PTX on
// first use.
func (d *Device) kernels() (*kernelFunc, uintptr, error) {
	c, err := d.context()
	if err != nil {
		return nil, 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.kern != nil {
		return d.kern, c, nil
	}
	mod, err := drvModuleLoad(c, kernelPTX())
	if err != nil {
		return nil, 0, fmt.Errorf("cuda: device %d: load kernels: %w", d.ordinal, err)
	}
	k := &kernelFunc{mod: mod}
	for _, f := range []struct {
		name string
		dst  *uintptr
	}{
		{"htgs_cross_power", &k.crossPower},
		{"htgs_cross_power_pow", &k.crossPow},
		{"htgs_subtract_smooth", &k.smooth},
		{"htgs_local_max", &k.localMax},
		{"htgs_max_blocks", &k.maxBlocks},
		{"htgs_max_final", &k.maxFinal},
		{"htgs_gray16_to_f64", &k.toF64},
	} {
		if *f.dst, err = drvModuleFunction(c, mod, f.name); err != nil {
			_ = drvModuleUnload(c, mod) // the lookup error is the one to report
			return nil, 0, fmt.Errorf("cuda: device %d: kernel %s: %w", d.ordinal, f.name, err)
		}
	}
	d.kern = k
	return k, c, nil
}

// gridFor returns the number of blocks for n elements, at most limit.
func gridFor(n int64, limit int) uint32 {
	g := (n + blockThreads - 1) / blockThreads
	return uint32(max(1, min(g, int64(limit))))
}

// streamHandle returns the handle of s for work on device d (0 for nil),
// and whether the call must wait.
func streamHandle(s *Stream, d *Device) (uintptr, bool, error) {
	if s == nil {
		return 0, true, nil
	}
	h, err := s.on(d, "kernel")
	return h, false, err
}

// CrossPower queues the normalized cross-power spectrum of phase
// correlation on s: for each of the n = a.Size()/16 complex128 values,
//
//	dst[i] = a[i]*conj(b[i]) / |a[i]*conj(b[i])|
//
// or 0 where that magnitude is not above floor or is not finite (floor 0
// guards exact zeros; a small positive floor also drops rounding noise).
// dst, a and b must be the same size and on the same device; dst may be a
// or b. With a nil s the call waits for completion.
func CrossPower(s *Stream, dst, a, b DeviceMem, floor float64) error {
	if a.size%16 != 0 || dst.size != a.size || b.size != a.size {
		return fmt.Errorf("%w: CrossPower: sizes %d, %d, %d bytes (want equal multiples of 16)", ErrSize, dst.size, a.size, b.size)
	}
	if !(floor >= 0) || math.IsInf(floor, 1) {
		return fmt.Errorf("cuda: CrossPower: floor %g must be finite and >= 0", floor)
	}
	d := a.dev
	if d == nil || dst.dev == nil || b.dev == nil {
		if a.size == 0 {
			return nil
		}
		return fmt.Errorf("%w: CrossPower: zero DeviceMem", ErrWrongDevice)
	}
	if dst.dev.ordinal != d.ordinal || b.dev.ordinal != d.ordinal {
		return fmt.Errorf("%w: CrossPower: buffers on different devices", ErrWrongDevice)
	}
	n := a.size / 16
	if n == 0 {
		return nil
	}
	sh, wait, err := streamHandle(s, d)
	if err != nil {
		return err
	}
	k, c, err := d.kernels()
	if err != nil {
		return err
	}
	args := []uint64{uint64(dst.ptr), uint64(a.ptr), uint64(b.ptr), uint64(n), math.Float64bits(floor)}
	if err := drvLaunch(c, k.crossPower, gridFor(n, maxGrid), blockThreads, sh, args, wait); err != nil {
		return fmt.Errorf("cuda: device %d: CrossPower: %w", d.ordinal, err)
	}
	return nil
}

// MaxReducer finds the largest value of a device array and its index, on
// the GPU; only the result (16 bytes) comes back to the host. It holds
// scratch memory on its device and must not be used by two goroutines at
// once: make one per task copy.
//
// NaN values are skipped; among equal values the smallest index wins, so
// the result does not depend on the order of the parallel reduction. If
// every value is NaN the result is NaN, -1.
type MaxReducer struct {
	dev   *Device
	parts DeviceMem // maxParts float64 values, maxParts int64 indices, then the result (value, index)
	host  HostMem   // pinned copy of the result
}

// NewMaxReducer allocates a reducer's scratch memory on d.
func (d *Device) NewMaxReducer() (*MaxReducer, error) {
	parts, err := d.Alloc(maxParts*16 + 16)
	if err != nil {
		return nil, err
	}
	host, err := d.AllocHost(16)
	if err != nil {
		_ = parts.Free() // the AllocHost error is the one to report
		return nil, err
	}
	return &MaxReducer{dev: d, parts: parts, host: host}, nil
}

// Max returns the largest value of src, a float64 array, and its index.
func (r *MaxReducer) Max(s *Stream, src DeviceMem) (value float64, index int, err error) {
	return r.reduce(s, src, 8, modeF64)
}

// MaxAbs returns the largest magnitude |z| of src, a complex128 array, and
// its index.
func (r *MaxReducer) MaxAbs(s *Stream, src DeviceMem) (value float64, index int, err error) {
	return r.reduce(s, src, 16, modeAbsC128)
}

// MaxReal returns the largest real part of src, a complex128 array, and
// its index.
func (r *MaxReducer) MaxReal(s *Stream, src DeviceMem) (value float64, index int, err error) {
	return r.reduce(s, src, 16, modeRealC128)
}

// reduce runs the two reduction kernels and the result download on s (or
// the default stream) and waits for the result.
func (r *MaxReducer) reduce(s *Stream, src DeviceMem, elem int64, mode uint64) (float64, int, error) {
	if r.parts.dev == nil {
		return 0, -1, fmt.Errorf("cuda: MaxReducer: %w", ErrClosed)
	}
	if src.size == 0 || src.size%elem != 0 {
		return 0, -1, fmt.Errorf("%w: MaxReducer: source of %d bytes is not a non-empty array of %d-byte values", ErrSize, src.size, elem)
	}
	if src.dev == nil || src.dev.ordinal != r.dev.ordinal {
		return 0, -1, fmt.Errorf("%w: MaxReducer of device %d given memory of another device", ErrWrongDevice, r.dev.ordinal)
	}
	n := src.size / elem
	sh, _, err := streamHandle(s, r.dev) // the result download below always waits
	if err != nil {
		return 0, -1, err
	}
	k, c, err := r.dev.kernels()
	if err != nil {
		return 0, -1, err
	}
	grid := gridFor(n, maxParts)
	pval := r.parts.ptr
	pidx := pval + maxParts*8
	outv := pval + maxParts*16
	outi := outv + 8
	if err := drvLaunch(c, k.maxBlocks, grid, blockThreads, sh,
		[]uint64{uint64(src.ptr), uint64(n), mode, uint64(pval), uint64(pidx)}, false); err != nil {
		return 0, -1, fmt.Errorf("cuda: device %d: max reduction: %w", r.dev.ordinal, err)
	}
	if err := drvLaunch(c, k.maxFinal, 1, blockThreads, sh,
		[]uint64{uint64(pval), uint64(pidx), uint64(grid), uint64(outv), uint64(outi)}, false); err != nil {
		return 0, -1, fmt.Errorf("cuda: device %d: max reduction: %w", r.dev.ordinal, err)
	}
	if err := drvCopyDtoH(c, r.host.p, outv, 16, sh, true); err != nil {
		return 0, -1, fmt.Errorf("cuda: device %d: max reduction result: %w", r.dev.ordinal, err)
	}
	res := HostSlice[uint64](r.host)
	idx := int(int64(res[1]))
	if idx < 0 {
		return math.NaN(), -1, nil
	}
	return math.Float64frombits(res[0]), idx, nil
}

// Close frees the reducer's memory. Close is idempotent.
func (r *MaxReducer) Close() error {
	if r.parts.dev == nil {
		return nil
	}
	err1 := r.parts.Free()
	err2 := r.host.Free()
	r.parts, r.host = DeviceMem{}, HostMem{}
	if err1 != nil {
		return err1
	}
	return err2
}

// sameDeviceMem checks that every buffer is on one device and returns it.
func sameDeviceMem(op string, ms ...DeviceMem) (*Device, error) {
	var d *Device
	for _, m := range ms {
		if m.dev == nil {
			return nil, fmt.Errorf("%w: %s: zero DeviceMem", ErrWrongDevice, op)
		}
		if d == nil {
			d = m.dev
		} else if m.dev.ordinal != d.ordinal {
			return nil, fmt.Errorf("%w: %s: buffers on different devices", ErrWrongDevice, op)
		}
	}
	return d, nil
}

// launch queues kernel f of device d on s with n elements' worth of blocks.
func launch(op string, s *Stream, d *Device, f func(*kernelFunc) uintptr, n int64, args []uint64) error {
	return launchGrid(op, s, d, f, gridFor(n, maxGrid), args)
}

// launchGrid queues kernel f of device d on s with grid blocks.
func launchGrid(op string, s *Stream, d *Device, f func(*kernelFunc) uintptr, grid uint32, args []uint64) error {
	sh, wait, err := streamHandle(s, d)
	if err != nil {
		return err
	}
	k, c, err := d.kernels()
	if err != nil {
		return err
	}
	if err := drvLaunch(c, f(k), grid, blockThreads, sh, args, wait); err != nil {
		return fmt.Errorf("cuda: device %d: %s: %w", d.ordinal, op, err)
	}
	return nil
}

// CrossPowerPow is [CrossPower] with a whitening exponent: it queues
//
//	dst[i] = a[i]*conj(b[i]) / |a[i]*conj(b[i])|^beta
//
// (0 where the magnitude is not above floor or not finite) for beta in
// (0, 1]; beta = 1 is CrossPower. Partial whitening (beta < 1) keeps some
// of the magnitude, which makes phase correlation robust to noise on
// smooth images (see stitching/align.Options.Whitening).
func CrossPowerPow(s *Stream, dst, a, b DeviceMem, floor, beta float64) error {
	if a.size%16 != 0 || dst.size != a.size || b.size != a.size {
		return fmt.Errorf("%w: CrossPowerPow: sizes %d, %d, %d bytes (want equal multiples of 16)", ErrSize, dst.size, a.size, b.size)
	}
	if !(floor >= 0) || math.IsInf(floor, 1) {
		return fmt.Errorf("cuda: CrossPowerPow: floor %g must be finite and >= 0", floor)
	}
	if !(beta > 0 && beta <= 1) {
		return fmt.Errorf("cuda: CrossPowerPow: exponent %g must lie in (0, 1]", beta)
	}
	if a.size == 0 {
		return nil
	}
	d, err := sameDeviceMem("CrossPowerPow", dst, a, b)
	if err != nil {
		return err
	}
	n := a.size / 16
	return launch("CrossPowerPow", s, d, func(k *kernelFunc) uintptr { return k.crossPow }, n,
		[]uint64{uint64(dst.ptr), uint64(a.ptr), uint64(b.ptr), uint64(n), math.Float64bits(floor), math.Float64bits(beta)})
}

// SmoothTables are the per-size constants of [SubtractSmooth] in device
// memory, for w x h images: PhX (w/2+1 complex128), PhY (h complex128),
// LapX (w/2+1 float64) and LapY (h float64), as defined there.
type SmoothTables struct {
	W, H                 int
	PhX, PhY, LapX, LapY DeviceMem
}

// SubtractSmooth queues, on s, the subtraction of the smooth component of
// the periodic-plus-smooth decomposition (Moisan 2011) from spec, the
// row-major h x (w/2+1) half spectrum of a w x h real image (as
// [FFT2D.Forward] of kind [RealToComplex] makes it):
//
//	spec[r][q] -= (a[q]*phY[r] + b[r]*phX[q]) / (lapX[q] + lapY[r]),  (q, r) != (0, 0)
//
// where a (w/2+1 complex128) is the 1-D DFT of the differences between the
// image's last and first rows, b (h complex128) the 1-D DFT of the
// differences between its last and first columns, phX[q] = 1 - exp(2πiq/w),
// phY[r] = 1 - exp(2πir/h), lapX[q] = 2cos(2πq/w) - 2 and lapY[r] =
// 2cos(2πr/h) - 2 (t holds the last four). What is left is the spectrum of
// the image's periodic component, free of the cross of leakage that the
// jumps between opposite borders put through a plain DFT.
func SubtractSmooth(s *Stream, spec, a, b DeviceMem, t *SmoothTables) error {
	if t == nil || t.W < 1 || t.H < 1 {
		return fmt.Errorf("%w: SubtractSmooth: no tables", ErrSize)
	}
	hw, h := int64(t.W/2+1), int64(t.H)
	switch {
	case spec.size != 16*hw*h:
		return fmt.Errorf("%w: SubtractSmooth: spectrum of %d bytes, want %d", ErrSize, spec.size, 16*hw*h)
	case a.size < 16*hw || t.PhX.size < 16*hw || t.LapX.size < 8*hw:
		return fmt.Errorf("%w: SubtractSmooth: row vectors shorter than %d", ErrSize, hw)
	case b.size < 16*h || t.PhY.size < 16*h || t.LapY.size < 8*h:
		return fmt.Errorf("%w: SubtractSmooth: column vectors shorter than %d", ErrSize, h)
	}
	d, err := sameDeviceMem("SubtractSmooth", spec, a, b, t.PhX, t.PhY, t.LapX, t.LapY)
	if err != nil {
		return err
	}
	return launch("SubtractSmooth", s, d, func(k *kernelFunc) uintptr { return k.smooth }, hw*h,
		[]uint64{uint64(spec.ptr), uint64(a.ptr), uint64(b.ptr), uint64(t.PhX.ptr), uint64(t.PhY.ptr),
			uint64(t.LapX.ptr), uint64(t.LapY.ptr), uint64(hw), uint64(h)})
}

// LocalMax queues, on s, dst[i] = m[i] where m[i] is a maximum of its
// circular 3x3 neighbourhood in the row-major w x h float64 matrix m (ties
// go to the smallest index; NaN is never a maximum), and -Inf elsewhere.
// The largest values of dst (see [MaxReducer]) are then the highest
// distinct peaks of m.
func LocalMax(s *Stream, dst, m DeviceMem, w, h int) error {
	n := int64(w) * int64(h)
	if w < 1 || h < 1 || m.size != 8*n || dst.size != m.size {
		return fmt.Errorf("%w: LocalMax: %d and %d bytes for a %dx%d matrix", ErrSize, dst.size, m.size, w, h)
	}
	d, err := sameDeviceMem("LocalMax", dst, m)
	if err != nil {
		return err
	}
	return launch("LocalMax", s, d, func(k *kernelFunc) uintptr { return k.localMax }, n,
		[]uint64{uint64(dst.ptr), uint64(m.ptr), uint64(w), uint64(h)})
}

// Gray16ToFloat queues, on s, the conversion of the n = pix.Size()/2
// big-endian 16-bit pixels of pix (the layout of Go's image.Gray16) into
// the n float64 values of dst, so that a tile crosses the bus at 2 bytes a
// pixel rather than 8. gain and sum are optional (a zero DeviceMem for
// none). With gain (n float32 values), each pixel is first flat-field
// corrected exactly as stitching/align.FlatField corrects it (v·gain
// rounded half up and clamped to 16 bits in float32, the product rounded
// before the addition) and written back to pix. With sum (one uint64), the
// pixels' sum, after correction, is added to it.
func Gray16ToFloat(s *Stream, dst, pix, gain, sum DeviceMem) error {
	n := pix.size / 2
	switch {
	case pix.size%2 != 0 || dst.size != 8*n:
		return fmt.Errorf("%w: Gray16ToFloat: %d bytes of pixels into %d bytes", ErrSize, pix.size, dst.size)
	case gain.dev != nil && gain.size < 4*n:
		return fmt.Errorf("%w: Gray16ToFloat: %d bytes of gains for %d pixels", ErrSize, gain.size, n)
	case sum.dev != nil && sum.size < 8:
		return fmt.Errorf("%w: Gray16ToFloat: %d bytes for the sum", ErrSize, sum.size)
	}
	mems := []DeviceMem{dst, pix}
	for _, m := range []DeviceMem{gain, sum} {
		if m.dev != nil {
			mems = append(mems, m)
		}
	}
	d, err := sameDeviceMem("Gray16ToFloat", mems...)
	if err != nil {
		return err
	}
	return launch("Gray16ToFloat", s, d, func(k *kernelFunc) uintptr { return k.toF64 }, n,
		[]uint64{uint64(dst.ptr), uint64(pix.ptr), uint64(gain.ptr), uint64(n), uint64(sum.ptr)})
}
