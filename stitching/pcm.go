package stitching

import (
	"errors"
	"fmt"
	"math"

	"github.com/gohtgs/htgs/cuda"
)

// The phase correlation's kernels on the GPU (kernels/phasecorr.cu): the
// cross-power spectrum, the smooth component of the periodic-plus-smooth
// decomposition, the local maxima of the correlation matrix, a max
// reduction and the conversion of 16-bit pixels to float64. They were
// package cuda's exported functions until issue 30 put them beside the
// code that uses them; package cuda is a driver with no kernels of its own.
// The wrappers check their arguments before they launch, so the checks are
// tested on every machine (pcm_test.go); the kernels are tested against
// the CPU on a GPU (pcm_cuda_test.go).

// pcmBlock is the block size of every kernel of kernels/phasecorr.cu
// (HTGS_BLOCK).
const pcmBlock = 256

// pcmMaxParts is the number of blocks of the first step of the max
// reduction, and so of its partial results.
const pcmMaxParts = 1024

// errKernelArg is wrapped by the errors of the wrappers' argument checks.
var errKernelArg = errors.New("stitching: GPU kernel arguments")

// pcmKernels are the kernels of kernels/phasecorr.cu loaded into one
// device's context.
type pcmKernels struct {
	mod                                                      *cuda.Module
	crossPow, smooth, localMaxFn, maxBlocks, maxFinal, toF64 *cuda.Function
}

// loadPCMKernels loads image (kernels/phasecorr.cu compiled) on d.
func loadPCMKernels(d *cuda.Device, image string) (*pcmKernels, error) {
	mod, err := d.LoadModule(image)
	if err != nil {
		return nil, fmt.Errorf("stitching: loading the phase-correlation kernels: %w", err)
	}
	k := &pcmKernels{mod: mod}
	for _, f := range []struct {
		name string
		dst  **cuda.Function
	}{
		{"htgs_cross_power_pow", &k.crossPow},
		{"htgs_subtract_smooth", &k.smooth},
		{"htgs_local_max", &k.localMaxFn},
		{"htgs_max_blocks", &k.maxBlocks},
		{"htgs_max_final", &k.maxFinal},
		{"htgs_gray16_to_f64", &k.toF64},
	} {
		if *f.dst, err = mod.Function(f.name); err != nil {
			return nil, errors.Join(err, mod.Close())
		}
	}
	return k, nil
}

// close unloads the kernels.
func (k *pcmKernels) close() error { return k.mod.Close() }

// sameDevice checks that every buffer is device memory of one device.
func sameDevice(op string, ms ...cuda.DeviceMem) error {
	var id int
	for i, m := range ms {
		d := m.Device()
		if d == nil {
			return fmt.Errorf("%w: %s: zero DeviceMem", errKernelArg, op)
		}
		if i == 0 {
			id = d.ID()
		} else if d.ID() != id {
			return fmt.Errorf("%w: %s: buffers on different devices", errKernelArg, op)
		}
	}
	return nil
}

// crossPowerPow queues on s the normalized cross-power spectrum with a
// whitening exponent: for each of the n = a.Size()/16 complex128 values,
//
//	dst[i] = a[i]*conj(b[i]) / |a[i]*conj(b[i])|^beta
//
// or 0 where that magnitude is not above floor or not finite, for beta in
// (0, 1] (1: plain phase correlation; less keeps some of the magnitude,
// see align.Options.Whitening). dst may be a or b.
func (k *pcmKernels) crossPowerPow(s *cuda.Stream, dst, a, b cuda.DeviceMem, floor, beta float64) error {
	switch {
	case a.Size()%16 != 0 || dst.Size() != a.Size() || b.Size() != a.Size():
		return fmt.Errorf("%w: cross power: sizes %d, %d, %d bytes (want equal multiples of 16)", errKernelArg, dst.Size(), a.Size(), b.Size())
	case !(floor >= 0) || math.IsInf(floor, 1):
		return fmt.Errorf("%w: cross power: floor %g must be finite and >= 0", errKernelArg, floor)
	case !(beta > 0 && beta <= 1):
		return fmt.Errorf("%w: cross power: exponent %g must lie in (0, 1]", errKernelArg, beta)
	case a.Size() == 0:
		return nil
	}
	if err := sameDevice("cross power", dst, a, b); err != nil {
		return err
	}
	n := a.Size() / 16
	return k.crossPow.Launch(s, cuda.GridFor(n, pcmBlock, 0), pcmBlock, dst, a, b, n, floor, beta)
}

// smoothTables are the per-size constants of subtractSmooth in device
// memory, for w x h images: phX (w/2+1 complex128), phY (h complex128),
// lapX (w/2+1 float64) and lapY (h float64), as defined there.
type smoothTables struct {
	w, h                 int
	phX, phY, lapX, lapY cuda.DeviceMem
}

// subtractSmooth queues on s the subtraction of the smooth component of
// the periodic-plus-smooth decomposition (Moisan 2011) from spec, the
// row-major h x (w/2+1) half spectrum of a w x h real image:
//
//	spec[r][q] -= (a[q]*phY[r] + b[r]*phX[q]) / (lapX[q] + lapY[r]),  (q, r) != (0, 0)
//
// where a (w/2+1 complex128) is the 1-D DFT of the differences between the
// image's last and first rows, b (h complex128) that of the differences
// between its last and first columns, phX[q] = 1 - exp(2πiq/w), phY[r] = 1
// - exp(2πir/h), lapX[q] = 2cos(2πq/w) - 2 and lapY[r] = 2cos(2πr/h) - 2
// (t holds the last four; align.FFT2.SmoothTables computes them). What is
// left is the spectrum of the image's periodic component.
func (k *pcmKernels) subtractSmooth(s *cuda.Stream, spec, a, b cuda.DeviceMem, t *smoothTables) error {
	if t == nil || t.w < 1 || t.h < 1 {
		return fmt.Errorf("%w: smooth component: no tables", errKernelArg)
	}
	hw, h := int64(t.w/2+1), int64(t.h)
	switch {
	case spec.Size() != 16*hw*h:
		return fmt.Errorf("%w: smooth component: spectrum of %d bytes, want %d", errKernelArg, spec.Size(), 16*hw*h)
	case a.Size() < 16*hw || t.phX.Size() < 16*hw || t.lapX.Size() < 8*hw:
		return fmt.Errorf("%w: smooth component: row vectors shorter than %d", errKernelArg, hw)
	case b.Size() < 16*h || t.phY.Size() < 16*h || t.lapY.Size() < 8*h:
		return fmt.Errorf("%w: smooth component: column vectors shorter than %d", errKernelArg, h)
	}
	if err := sameDevice("smooth component", spec, a, b, t.phX, t.phY, t.lapX, t.lapY); err != nil {
		return err
	}
	return k.smooth.Launch(s, cuda.GridFor(hw*h, pcmBlock, 0), pcmBlock, spec, a, b, t.phX, t.phY, t.lapX, t.lapY, hw, h)
}

// localMax queues on s dst[i] = m[i] where m[i] is a maximum of its
// circular 3x3 neighbourhood in the row-major w x h float64 matrix m (ties
// go to the smallest index; NaN is never a maximum), and -Inf elsewhere.
// The largest values of dst (maxReducer) are then the highest distinct
// peaks of m.
func (k *pcmKernels) localMax(s *cuda.Stream, dst, m cuda.DeviceMem, w, h int) error {
	n := int64(w) * int64(h)
	if w < 1 || h < 1 || m.Size() != 8*n || dst.Size() != m.Size() {
		return fmt.Errorf("%w: local maxima: %d and %d bytes for a %dx%d matrix", errKernelArg, dst.Size(), m.Size(), w, h)
	}
	if err := sameDevice("local maxima", dst, m); err != nil {
		return err
	}
	return k.localMaxFn.Launch(s, cuda.GridFor(n, pcmBlock, 0), pcmBlock, dst, m, w, h)
}

// gray16ToFloat queues on s the conversion of the n = pix.Size()/2
// big-endian 16-bit pixels of pix (Go's image.Gray16 layout) into the n
// float64 values of dst, so that a tile crosses the bus at 2 bytes a pixel
// rather than 8. gain and sum are optional (a zero DeviceMem for none).
// With gain (n float32 values), each pixel is first flat-field corrected
// exactly as align.FlatField corrects it (v·gain rounded half up and
// clamped to 16 bits in float32, the product rounded before the addition)
// and written back to pix. With sum (one uint64), the pixels' sum, after
// correction, is added to it.
func (k *pcmKernels) gray16ToFloat(s *cuda.Stream, dst, pix, gain, sum cuda.DeviceMem) error {
	n := pix.Size() / 2
	switch {
	case pix.Size()%2 != 0 || dst.Size() != 8*n:
		return fmt.Errorf("%w: pixels to float64: %d bytes of pixels into %d bytes", errKernelArg, pix.Size(), dst.Size())
	case gain.Device() != nil && gain.Size() < 4*n:
		return fmt.Errorf("%w: pixels to float64: %d bytes of gains for %d pixels", errKernelArg, gain.Size(), n)
	case sum.Device() != nil && sum.Size() < 8:
		return fmt.Errorf("%w: pixels to float64: %d bytes for the sum", errKernelArg, sum.Size())
	}
	mems := []cuda.DeviceMem{dst, pix}
	for _, m := range []cuda.DeviceMem{gain, sum} {
		if m.Device() != nil {
			mems = append(mems, m)
		}
	}
	if err := sameDevice("pixels to float64", mems...); err != nil {
		return err
	}
	return k.toF64.Launch(s, cuda.GridFor(n, pcmBlock, 0), pcmBlock, dst, pix, gain, n, sum)
}

// maxReducer finds the largest value of a float64 device array and its
// index, on the GPU; only the result (16 bytes) comes back to the host. It
// holds scratch memory on its device and must not be used by two
// goroutines at once: one per task copy. NaN values are skipped; among
// equal values the smallest index wins, so the result does not depend on
// the order of the parallel reduction. If every value is NaN the result
// is NaN, -1.
type maxReducer struct {
	k     *pcmKernels
	parts cuda.DeviceMem // pcmMaxParts float64 values, pcmMaxParts int64 indices, then the result (value, index)
	host  cuda.HostMem   // pinned copy of the result
}

// newMaxReducer allocates a reducer's scratch memory on d.
func (k *pcmKernels) newMaxReducer(d *cuda.Device) (*maxReducer, error) {
	parts, err := d.Alloc(pcmMaxParts*16 + 16)
	if err != nil {
		return nil, err
	}
	host, err := d.AllocHost(16)
	if err != nil {
		return nil, errors.Join(err, parts.Free())
	}
	return &maxReducer{k: k, parts: parts, host: host}, nil
}

// max returns the largest value of src, a float64 array, and its index:
// the two reduction kernels and the result's download run on s, and max
// waits for the result.
func (r *maxReducer) max(s *cuda.Stream, src cuda.DeviceMem) (float64, int, error) {
	if r.parts.Device() == nil {
		return 0, -1, fmt.Errorf("%w: max reduction: closed", errKernelArg)
	}
	if src.Size() == 0 || src.Size()%8 != 0 {
		return 0, -1, fmt.Errorf("%w: max reduction: source of %d bytes is not a non-empty float64 array", errKernelArg, src.Size())
	}
	if err := sameDevice("max reduction", src, r.parts); err != nil {
		return 0, -1, err
	}
	n := src.Size() / 8
	grid := cuda.GridFor(n, pcmBlock, pcmMaxParts)
	vals, idx := r.parts.Slice(0, pcmMaxParts*8), r.parts.Slice(pcmMaxParts*8, pcmMaxParts*8)
	out := r.parts.Slice(pcmMaxParts*16, 16)
	const modeF64 = 0 // HTGS_MAX_F64
	if err := r.k.maxBlocks.Launch(s, grid, pcmBlock, src, n, modeF64, vals, idx); err != nil {
		return 0, -1, err
	}
	if err := r.k.maxFinal.Launch(s, 1, pcmBlock, vals, idx, int64(grid), out.Slice(0, 8), out.Slice(8, 8)); err != nil {
		return 0, -1, err
	}
	if err := cuda.CopyDtoH(s, r.host, out); err != nil {
		return 0, -1, err
	}
	if s != nil {
		if err := s.Synchronize(); err != nil {
			return 0, -1, err
		}
	}
	res := cuda.HostSlice[uint64](r.host)
	i := int(int64(res[1]))
	if i < 0 {
		return math.NaN(), -1, nil
	}
	return math.Float64frombits(res[0]), i, nil
}

// close frees the reducer's memory; it is idempotent.
func (r *maxReducer) close() error {
	if r.parts.Device() == nil {
		return nil
	}
	err := errors.Join(r.parts.Free(), r.host.Free())
	r.parts, r.host = cuda.DeviceMem{}, cuda.HostMem{}
	return err
}
