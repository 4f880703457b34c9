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
	maxBlocks  uintptr
	maxFinal   uintptr
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
		{"htgs_max_blocks", &k.maxBlocks},
		{"htgs_max_final", &k.maxFinal},
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
