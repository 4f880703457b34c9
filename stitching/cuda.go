//go:build cuda

package stitching

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"sync/atomic"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/cuda/cudapool"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/task"
)

// cudaBackend registers tiles on the machine's GPUs with cuFFT and the
// package cuda kernels, and refines pairs with the kernels of
// kernels/refine.cu.
type cudaBackend struct {
	devs []*cuda.Device
	// bus counts the bytes copied between host and devices (tiles, border
	// spectra, sums; not the few bytes of peaks and offsets).
	bus atomic.Int64
}

func newCUDABackend() (gpuBackend, error) {
	ds, err := cuda.Devices()
	if err == nil && len(ds) == 0 {
		err = cuda.ErrNoDevice
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoGPU, err)
	}
	return &cudaBackend{devs: ds}, nil
}

func (b *cudaBackend) devices() []device.Device { return cuda.AsDevices(b.devs) }

// A tile's slot on a GPU holds its half spectrum (specBytes) and, from
// pixOffset on, its pixels as image.Gray16 stores them (2 bytes each, big
// endian), which the CCF reads on the GPU.
func (b *cudaBackend) spectra(w, h int) memmgr.Allocator[devSpectrum] {
	return specAlloc{cudapool.DeviceBuffers(pixOffset(w, h) + pixBytes(w, h))}
}

// slotsFit returns how many tile slots (see spectra) a quarter of the
// smallest GPU's memory holds.
func (b *cudaBackend) slotsFit(w, h int) int {
	var least int64
	for i, d := range b.devs {
		if m := d.Memory(); i == 0 || m < least {
			least = m
		}
	}
	return int(least / 4 / (pixOffset(w, h) + pixBytes(w, h)))
}

func specBytes(w, h int) int64 { return 16 * int64(w/2+1) * int64(h) }
func pixOffset(w, h int) int64 { return (specBytes(w, h) + 255) &^ 255 }
func pixBytes(w, h int) int64  { return 2 * int64(w) * int64(h) }

// slotParts returns the spectrum and the pixels of a tile's slot.
func slotParts(v devSpectrum, w, h int) (spec, pix cuda.DeviceMem, err error) {
	m, err := gpuMem(v)
	if err != nil {
		return spec, pix, err
	}
	if m.Size() < pixOffset(w, h)+pixBytes(w, h) {
		return spec, pix, fmt.Errorf("stitching: GPU slot of %d bytes, want %d", m.Size(), pixOffset(w, h)+pixBytes(w, h))
	}
	return m.Slice(0, specBytes(w, h)), m.Slice(pixOffset(w, h), pixBytes(w, h)), nil
}

type specAlloc struct {
	a memmgr.Allocator[cuda.DeviceMem]
}

func (s specAlloc) Alloc(dev device.Device) (devSpectrum, error) {
	m, err := s.a.Alloc(dev)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (s specAlloc) Free(dev device.Device, v devSpectrum) error {
	m, ok := v.(cuda.DeviceMem)
	if !ok {
		return fmt.Errorf("stitching: freeing %T as GPU memory", v)
	}
	return s.a.Free(dev, m)
}

func gpuMem(v devSpectrum) (cuda.DeviceMem, error) {
	m, ok := v.(cuda.DeviceMem)
	if !ok {
		return cuda.DeviceMem{}, fmt.Errorf("stitching: %T is not GPU memory", v)
	}
	return m, nil
}

// worker is what each GPU task copy holds: its goroutine bound to the
// clone's GPU, a stream and a real 2-D FFT plan for the tile size.
type worker struct {
	w, h   int
	dev    *cuda.Device
	unbind func()
	stream *cuda.Stream
	plan   *cuda.FFT2D
	frees  []func() error
	noPlan bool        // start makes no FFT plan (uploads and refinement)
	kern   *pcmKernels // with loadKernels
}

func (k *worker) start(ctx context.Context, info task.Info) error {
	d, ok := info.Device.(*cuda.Device)
	if !ok {
		return fmt.Errorf("stitching: GPU task copy on %v, not a GPU", info.Device)
	}
	k.dev = d
	unbind, err := cuda.Bind(ctx, d)
	if err != nil {
		return err
	}
	k.unbind = unbind
	if k.stream, err = d.NewStream(); err != nil {
		return err
	}
	k.frees = append(k.frees, k.stream.Close)
	if k.noPlan {
		return nil
	}
	if k.plan, err = d.NewFFT2D(k.h, k.w, cuda.Real); err != nil {
		return err
	}
	k.frees = append(k.frees, k.plan.Close)
	return k.plan.SetStream(k.stream)
}

// loadKernels loads the phase correlation's kernels (kernels/phasecorr.cu)
// for the copy, unloaded by stop.
func (k *worker) loadKernels() error {
	kern, err := loadPCMKernels(k.dev, pcmImage)
	if err != nil {
		return err
	}
	k.kern = kern
	k.frees = append(k.frees, kern.close)
	return nil
}

// alloc allocates device memory freed by stop.
func (k *worker) alloc(bytes int64) (cuda.DeviceMem, error) {
	m, err := k.dev.Alloc(bytes)
	if err == nil {
		k.frees = append(k.frees, m.Free)
	}
	return m, err
}

// stop frees what start and alloc made, last first, and unbinds.
func (k *worker) stop() error {
	var errs []error
	for i := len(k.frees) - 1; i >= 0; i-- {
		errs = append(errs, k.frees[i]())
	}
	k.frees = nil
	if k.unbind != nil {
		k.unbind()
	}
	return errors.Join(errs...)
}

// cudaTransformer computes a tile's half spectrum with cuFFT (D2Z) and,
// for the periodic component, subtracts the smooth component's spectrum on
// the GPU; the two 1-D transforms of the border differences it needs are
// computed on the CPU by [align.FFT2.BorderSpectra] (O(W+H) values), with
// the tables of [align.FFT2.SmoothTables]. The tile crosses the bus as its
// 16-bit pixels, into the slot (where the CCF reads them later), and is
// converted to float64 on the GPU.
type cudaTransformer struct {
	worker
	be       *cudaBackend
	periodic bool
	// Pinned staging: the tile's pixels, then a and b (float64: w/2+1 and
	// h complex values), then the pixel sum; scratch on the device: the
	// tile as float64, then a and b, then the pixel sum. The views below
	// are set by Initialize.
	staging                  cuda.HostMem
	scratch                  cuda.DeviceMem
	hostPix, hostAB, hostSum cuda.HostMem
	host                     []float64 // hostAB as float64: a, then b
	img, ab, a, b, sum       cuda.DeviceMem
	tables                   smoothTables
	cpu                      *align.FFT2 // border transforms and smooth-component tables
	// With a flat field: its gains on the device, and a scratch tile
	// whose border pixels only are the corrected tile's (the border
	// transforms read nothing else).
	ff     *align.FlatField
	gain   cuda.DeviceMem
	border *image.Gray16
}

func (be *cudaBackend) newTransformer(w, h int, opt align.Options, ff *align.FlatField) transformer {
	return &cudaTransformer{worker: worker{w: w, h: h}, be: be, periodic: !opt.NoPeriodicDecomposition, ff: ff}
}

// borderFloats is the number of float64 values of a and b.
func (t *cudaTransformer) borderFloats() int { return 2*(t.w/2+1) + 2*t.h }

func (t *cudaTransformer) Initialize(ctx context.Context, info task.Info) error {
	if err := t.start(ctx, info); err != nil {
		return err
	}
	if err := t.loadKernels(); err != nil {
		return err
	}
	px, nb, na := pixBytes(t.w, t.h), 8*int64(t.borderFloats()), 16*int64(t.w/2+1)
	hostOff := (px + 15) &^ 15
	var err error
	if t.staging, err = t.dev.AllocHost(hostOff + nb + 8); err != nil {
		return err
	}
	t.frees = append(t.frees, t.staging.Free)
	t.hostPix, t.hostAB, t.hostSum = t.staging.Slice(0, px), t.staging.Slice(hostOff, nb), t.staging.Slice(hostOff+nb, 8)
	t.host = cuda.HostSlice[float64](t.hostAB)
	imgBytes := 8 * int64(t.w*t.h)
	if t.scratch, err = t.alloc(imgBytes + nb + 8); err != nil {
		return err
	}
	t.img, t.ab, t.sum = t.scratch.Slice(0, imgBytes), t.scratch.Slice(imgBytes, nb), t.scratch.Slice(imgBytes+nb, 8)
	t.a, t.b = t.ab.Slice(0, na), t.ab.Slice(na, nb-na)
	if t.ff != nil {
		if t.gain, err = t.alloc(4 * int64(t.w*t.h)); err != nil {
			return err
		}
		if err := cuda.CopyToDevice(t.stream, t.gain, t.ff.Gains()); err != nil {
			return err
		}
		t.border = image.NewGray16(image.Rect(0, 0, t.w, t.h))
	}
	if !t.periodic {
		return nil
	}
	t.cpu = align.NewFFT2(t.w, t.h)
	phX, phY, lapX, lapY := t.cpu.SmoothTables()
	tb := smoothTables{w: t.w, h: t.h}
	for _, x := range []struct {
		dst   *cuda.DeviceMem
		bytes int64
		copy  func(cuda.DeviceMem) error
	}{
		{&tb.phX, 16 * int64(len(phX)), func(m cuda.DeviceMem) error { return cuda.CopyToDevice(t.stream, m, phX) }},
		{&tb.phY, 16 * int64(t.h), func(m cuda.DeviceMem) error { return cuda.CopyToDevice(t.stream, m, phY) }},
		{&tb.lapX, 8 * int64(len(lapX)), func(m cuda.DeviceMem) error { return cuda.CopyToDevice(t.stream, m, lapX) }},
		{&tb.lapY, 8 * int64(t.h), func(m cuda.DeviceMem) error { return cuda.CopyToDevice(t.stream, m, lapY) }},
	} {
		if *x.dst, err = t.alloc(x.bytes); err != nil {
			return err
		}
		if err := x.copy(*x.dst); err != nil {
			return err
		}
	}
	t.tables = tb
	return nil
}

func (t *cudaTransformer) Shutdown(context.Context) error { return t.stop() }

func (t *cudaTransformer) forward(_ context.Context, tile *image.Gray16, dst devSpectrum) (float64, error) {
	spec, pix, err := slotParts(dst, t.w, t.h)
	if err != nil {
		return 0, err
	}
	w, h := t.w, t.h
	b := tile.Bounds()
	stg := t.hostPix.Bytes()
	if tile.Stride == 2*w && b.Min == (image.Point{}) {
		copy(stg[:2*w*h], tile.Pix[:2*w*h])
	} else {
		for y := range h {
			copy(stg[2*w*y:2*w*(y+1)], tile.Pix[tile.PixOffset(b.Min.X, b.Min.Y+y):])
		}
	}
	if err := cuda.CopyHtoD(t.stream, pix, t.hostPix); err != nil {
		return 0, err
	}
	t.be.bus.Add(pixBytes(w, h))
	if t.periodic {
		a, bb := t.cpu.BorderSpectra(t.borders(tile))
		offB := 2 * (w/2 + 1)
		for q, v := range a {
			t.host[2*q], t.host[2*q+1] = real(v), imag(v)
		}
		for r, v := range bb {
			t.host[offB+2*r], t.host[offB+2*r+1] = real(v), imag(v)
		}
		if err := cuda.CopyHtoD(t.stream, t.ab, t.hostAB); err != nil {
			return 0, err
		}
		t.be.bus.Add(t.hostAB.Size())
	}
	if err := cuda.Memset(t.stream, t.sum, 0); err != nil {
		return 0, err
	}
	// Correct (with a flat field) and sum the pixels in the slot, and
	// convert them for the transform.
	if err := t.kern.gray16ToFloat(t.stream, t.img, pix, t.gain, t.sum); err != nil {
		return 0, err
	}
	if err := cuda.CopyDtoH(t.stream, t.hostSum, t.sum); err != nil {
		return 0, err
	}
	if err := t.plan.Forward(spec, t.img); err != nil {
		return 0, err
	}
	if t.periodic {
		if err := t.kern.subtractSmooth(t.stream, spec, t.a, t.b, &t.tables); err != nil {
			return 0, err
		}
	}
	// The staging buffer is refilled by the next call: wait for the copies
	// (and the transform, which later tasks read on other streams).
	if err := t.stream.Synchronize(); err != nil {
		return 0, err
	}
	return float64(cuda.HostSlice[uint64](t.hostSum)[0]), nil
}

// borders returns tile, or with a flat field a tile whose border rows and
// columns are tile's corrected (its inside is not written).
func (t *cudaTransformer) borders(tile *image.Gray16) *image.Gray16 {
	if t.ff == nil {
		return tile
	}
	b := tile.Bounds()
	at := func(x, y int) {
		i := tile.PixOffset(b.Min.X+x, b.Min.Y+y)
		u := t.ff.CorrectPixel(x, y, uint16(tile.Pix[i])<<8|uint16(tile.Pix[i+1]))
		j := t.border.PixOffset(x, y)
		t.border.Pix[j], t.border.Pix[j+1] = uint8(u>>8), uint8(u)
	}
	for x := range t.w {
		at(x, 0)
		at(x, t.h-1)
	}
	for y := range t.h {
		at(0, y)
		at(t.w-1, y)
	}
	return t.border
}

// cudaCorrelator computes the phase-correlation matrix of a pair on the
// GPU (normalized cross-power spectrum, inverse Z2D transform), marks its
// local maxima and reduces them to the n highest: only n (value, index)
// pairs come back to the host. It then scores the CCF's candidate offsets
// on the GPU, from the pixels in the tiles' slots: only the exact integer
// sums of each offset come back.
type cudaCorrelator struct {
	worker
	beta    float64
	cross   cuda.DeviceMem
	pcm, lm cuda.DeviceMem
	red     *maxReducer
	negInf  cuda.HostMem   // one float64, -Inf
	out     []align.Peak   // the peaks taken so far from lm, best first
	done    bool           // lm has no local maximum left
	stage   cuda.HostMem   // offsets (int64 pairs), then sums (uint64)
	offs    cuda.DeviceMem // maxOffsets offsets
	sums    cuda.DeviceMem // maxOffsets * NCCSumsLen sums
	// The package's kernels (kernels/refine.cu): the CCF's candidates are
	// scored by stitch_offset_sums.
	mod      *cuda.Module
	offsetFn *cuda.Function
}

// maxOffsets is the number of offsets scored in one launch.
const maxOffsets = 256

// sumsLen is the number of sums the kernels of kernels/refine.cu write a
// displacement: of a, b, a², b² and ab over the overlap (uint64 each).
const sumsLen = 5

// offsetParts returns the number of blocks of stitch_offset_sums that
// share one of n offsets: about 2048 blocks in all, at most 64 an offset.
func offsetParts(n int) int { return min(64, max(1, (2048+n-1)/n)) }

// checkTileSize reports tiles too large for the kernels' 32-bit pixel
// indices.
func checkTileSize(w, h int) error {
	if int64(w)*int64(h) >= 1<<31 {
		return fmt.Errorf("stitching: %dx%d tiles are too large for the GPU kernels (at most 2^31 pixels)", w, h)
	}
	return nil
}

func (be *cudaBackend) newCorrelator(w, h int, opt align.Options) correlator {
	return &cudaCorrelator{worker: worker{w: w, h: h}, beta: opt.EffectiveWhitening()}
}

func (c *cudaCorrelator) Initialize(ctx context.Context, info task.Info) error {
	if err := c.start(ctx, info); err != nil {
		return err
	}
	if err := checkTileSize(c.w, c.h); err != nil {
		return err
	}
	if err := c.loadKernels(); err != nil {
		return err
	}
	var err error
	if c.mod, err = c.dev.LoadModule(refineImage); err != nil {
		return fmt.Errorf("stitching: loading the GPU kernels: %w", err)
	}
	c.frees = append(c.frees, c.mod.Close)
	if c.offsetFn, err = c.mod.Function("stitch_offset_sums"); err != nil {
		return err
	}
	if c.cross, err = c.alloc(c.plan.SpectrumBytes()); err != nil {
		return err
	}
	if c.pcm, err = c.alloc(c.plan.SpatialBytes()); err != nil {
		return err
	}
	if c.lm, err = c.alloc(c.plan.SpatialBytes()); err != nil {
		return err
	}
	if c.offs, err = c.alloc(16 * maxOffsets); err != nil {
		return err
	}
	if c.sums, err = c.alloc(8 * sumsLen * maxOffsets); err != nil {
		return err
	}
	if c.red, err = c.kern.newMaxReducer(c.dev); err != nil {
		return err
	}
	c.frees = append(c.frees, c.red.close)
	if c.negInf, err = c.dev.AllocHost(8); err != nil {
		return err
	}
	c.frees = append(c.frees, c.negInf.Free)
	cuda.HostSlice[float64](c.negInf)[0] = math.Inf(-1)
	if c.stage, err = c.dev.AllocHost(16*maxOffsets + 8*sumsLen*maxOffsets); err != nil {
		return err
	}
	c.frees = append(c.frees, c.stage.Free)
	return nil
}

func (c *cudaCorrelator) Shutdown(context.Context) error { return c.stop() }

// peaks returns the n highest local maxima of the PCM, best first. Their
// Value is the PCM value divided by W·H, not by the sum of the normalized
// magnitudes as on the CPU: only their order matters to the CCF.
func (c *cudaCorrelator) peaks(_ context.Context, f1, f2 devSpectrum, dc1, dc2 float64, n int) ([]align.Peak, error) {
	a, _, err := slotParts(f1, c.w, c.h)
	if err != nil {
		return nil, err
	}
	b, _, err := slotParts(f2, c.w, c.h)
	if err != nil {
		return nil, err
	}
	// The guard of align.Aligner.Peaks: |F1(0)|·|F2(0)|·1e-15, where F(0) is
	// the pixel sum.
	if err := c.kern.crossPowerPow(c.stream, c.cross, a, b, math.Abs(dc1)*math.Abs(dc2)*1e-15, c.beta); err != nil {
		return nil, err
	}
	if err := c.plan.Inverse(c.pcm, c.cross); err != nil {
		return nil, err
	}
	if err := c.kern.localMax(c.stream, c.lm, c.pcm, c.w, c.h); err != nil {
		return nil, err
	}
	c.out = c.out[:0]
	c.done = false
	return c.more(context.Background(), n)
}

// more extends the peaks of the last call of peaks to the n highest: the
// local maxima already taken are -Inf in lm.
func (c *cudaCorrelator) more(_ context.Context, n int) ([]align.Peak, error) {
	scale := 1 / float64(c.w*c.h)
	for len(c.out) < max(1, n) && !c.done {
		v, i, err := c.red.max(c.stream, c.lm)
		if err != nil {
			return nil, err
		}
		if i < 0 || math.IsInf(v, -1) {
			c.done = true // no local maximum left
			break
		}
		c.out = append(c.out, align.Peak{X: i % c.w, Y: i / c.w, Value: v * scale})
		// Knock the peak out for the next round (queued: the next
		// reduction's result download waits for it).
		if err := cuda.CopyHtoD(c.stream, c.lm.Slice(8*int64(i), 8), c.negInf); err != nil {
			return nil, err
		}
	}
	return c.out, nil
}

// score computes the NCC of the tiles of slots f1 and f2 at each offset,
// from exact sums computed on the GPU.
func (c *cudaCorrelator) score(_ context.Context, f1, f2 devSpectrum, offs [][2]int, corr []float64) error {
	_, p1, err := slotParts(f1, c.w, c.h)
	if err != nil {
		return err
	}
	_, p2, err := slotParts(f2, c.w, c.h)
	if err != nil {
		return err
	}
	ho := cuda.HostSlice[int64](c.stage.Slice(0, 16*maxOffsets))
	hs := cuda.HostSlice[uint64](c.stage.Slice(16*maxOffsets, 8*sumsLen*maxOffsets))
	for lo := 0; lo < len(offs); lo += maxOffsets {
		batch := offs[lo:min(len(offs), lo+maxOffsets)]
		k := int64(len(batch))
		for i, o := range batch {
			ho[2*i], ho[2*i+1] = int64(o[0]), int64(o[1])
		}
		if err := cuda.CopyHtoD(c.stream, c.offs.Slice(0, 16*k), c.stage.Slice(0, 16*k)); err != nil {
			return err
		}
		sb := 8 * sumsLen * k
		if err := cuda.Memset(c.stream, c.sums.Slice(0, sb), 0); err != nil {
			return err
		}
		per := offsetParts(len(batch))
		if err := c.offsetFn.Launch(c.stream, uint32(len(batch)*per), boxBlock, p1, p2, c.w, c.h, c.offs, len(batch), per, c.sums); err != nil {
			return err
		}
		if err := cuda.CopyDtoH(c.stream, c.stage.Slice(16*maxOffsets, sb), c.sums.Slice(0, sb)); err != nil {
			return err
		}
		if err := c.stream.Synchronize(); err != nil {
			return err
		}
		for i, o := range batch {
			nx := min(c.w, o[0]+c.w) - max(0, o[0])
			ny := min(c.h, o[1]+c.h) - max(0, o[1])
			var n uint64
			if nx > 0 && ny > 0 {
				n = uint64(nx) * uint64(ny)
			}
			s := hs[sumsLen*i:]
			corr[lo+i] = align.Pearson(n, s[0], s[1], s[2], s[3], s[4])
		}
	}
	return nil
}
