//go:build cuda

package stitching

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/task"
)

// cudaBackend registers tiles on the machine's GPUs with cuFFT and the
// package cuda kernels.
type cudaBackend struct{ devs []*cuda.Device }

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

func (b *cudaBackend) spectra(w, h int) memmgr.Allocator[devSpectrum] {
	return specAlloc{cuda.DeviceBuffers(16 * int64(w/2+1) * int64(h))}
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
	if k.plan, err = d.NewFFT2D(k.h, k.w, cuda.Real); err != nil {
		return err
	}
	k.frees = append(k.frees, k.plan.Close)
	return k.plan.SetStream(k.stream)
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
// the tables of [align.FFT2.SmoothTables].
type cudaTransformer struct {
	worker
	periodic bool
	staging  cuda.HostMem
	host     []float64 // the tile, then a (w/2+1 complex), then b (h complex)
	scratch  cuda.DeviceMem
	offA     int // float64 index of a in host and scratch (16-byte aligned)
	offB     int
	tables   cuda.SmoothTables
	cpu      *align.FFT2 // border transforms and smooth-component tables
}

func (be *cudaBackend) newTransformer(w, h int, opt align.Options) transformer {
	t := &cudaTransformer{worker: worker{w: w, h: h}, periodic: !opt.NoPeriodicDecomposition}
	t.offA = (w*h + 1) &^ 1
	t.offB = t.offA + 2*(w/2+1)
	return t
}

func (t *cudaTransformer) Initialize(ctx context.Context, info task.Info) error {
	if err := t.start(ctx, info); err != nil {
		return err
	}
	n := int64(t.offB + 2*t.h)
	var err error
	if t.staging, err = t.dev.AllocHost(8 * n); err != nil {
		return err
	}
	t.frees = append(t.frees, t.staging.Free)
	t.host = cuda.HostSlice[float64](t.staging)
	if t.scratch, err = t.alloc(8 * n); err != nil {
		return err
	}
	if !t.periodic {
		return nil
	}
	t.cpu = align.NewFFT2(t.w, t.h)
	phX, phY, lapX, lapY := t.cpu.SmoothTables()
	tb := cuda.SmoothTables{W: t.w, H: t.h}
	for _, x := range []struct {
		dst   *cuda.DeviceMem
		bytes int64
		copy  func(cuda.DeviceMem) error
	}{
		{&tb.PhX, 16 * int64(len(phX)), func(m cuda.DeviceMem) error { return cuda.CopyToDevice(t.stream, m, phX) }},
		{&tb.PhY, 16 * int64(t.h), func(m cuda.DeviceMem) error { return cuda.CopyToDevice(t.stream, m, phY) }},
		{&tb.LapX, 8 * int64(len(lapX)), func(m cuda.DeviceMem) error { return cuda.CopyToDevice(t.stream, m, lapX) }},
		{&tb.LapY, 8 * int64(t.h), func(m cuda.DeviceMem) error { return cuda.CopyToDevice(t.stream, m, lapY) }},
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

func (t *cudaTransformer) forward(_ context.Context, tile *image.Gray16, dst devSpectrum) error {
	d, err := gpuMem(dst)
	if err != nil {
		return err
	}
	w, h := t.w, t.h
	b := tile.Bounds()
	px := t.host[:w*h]
	for y := range h {
		row := tile.Pix[tile.PixOffset(b.Min.X, b.Min.Y+y):]
		out := px[y*w : (y+1)*w]
		for x := range out {
			out[x] = float64(uint16(row[2*x])<<8 | uint16(row[2*x+1]))
		}
	}
	n := w * h
	if t.periodic {
		a, bb := t.cpu.BorderSpectra(tile)
		for q, v := range a {
			t.host[t.offA+2*q], t.host[t.offA+2*q+1] = real(v), imag(v)
		}
		for r, v := range bb {
			t.host[t.offB+2*r], t.host[t.offB+2*r+1] = real(v), imag(v)
		}
		n = t.offB + 2*h
	}
	bytes := 8 * int64(n)
	if err := cuda.CopyHtoD(t.stream, t.scratch.Slice(0, bytes), t.staging.Slice(0, bytes)); err != nil {
		return err
	}
	if err := t.plan.Forward(d, t.scratch.Slice(0, 8*int64(w*h))); err != nil {
		return err
	}
	if t.periodic {
		a := t.scratch.Slice(8*int64(t.offA), 16*int64(w/2+1))
		bb := t.scratch.Slice(8*int64(t.offB), 16*int64(h))
		if err := cuda.SubtractSmooth(t.stream, d, a, bb, &t.tables); err != nil {
			return err
		}
	}
	// The staging buffer is refilled by the next call: wait for the copy
	// (and the transform, which later tasks read on other streams).
	return t.stream.Synchronize()
}

// cudaCorrelator computes the phase-correlation matrix of a pair on the
// GPU (normalized cross-power spectrum, inverse Z2D transform), marks its
// local maxima and reduces them to the n highest: only n (value, index)
// pairs come back to the host.
type cudaCorrelator struct {
	worker
	beta    float64
	cross   cuda.DeviceMem
	pcm, lm cuda.DeviceMem
	red     *cuda.MaxReducer
	negInf  [1]float64
	out     []align.Peak
}

func (be *cudaBackend) newCorrelator(w, h int, opt align.Options) correlator {
	return &cudaCorrelator{worker: worker{w: w, h: h}, beta: opt.EffectiveWhitening(), negInf: [1]float64{math.Inf(-1)}}
}

func (c *cudaCorrelator) Initialize(ctx context.Context, info task.Info) error {
	if err := c.start(ctx, info); err != nil {
		return err
	}
	var err error
	if c.cross, err = c.alloc(c.plan.SpectrumBytes()); err != nil {
		return err
	}
	if c.pcm, err = c.alloc(c.plan.SpatialBytes()); err != nil {
		return err
	}
	if c.lm, err = c.alloc(c.plan.SpatialBytes()); err != nil {
		return err
	}
	if c.red, err = c.dev.NewMaxReducer(); err != nil {
		return err
	}
	c.frees = append(c.frees, c.red.Close)
	return nil
}

func (c *cudaCorrelator) Shutdown(context.Context) error { return c.stop() }

// peaks returns the n highest local maxima of the PCM, best first. Their
// Value is the PCM value divided by W·H, not by the sum of the normalized
// magnitudes as on the CPU: only their order matters to the CCF.
func (c *cudaCorrelator) peaks(_ context.Context, f1, f2 devSpectrum, dc1, dc2 float64, n int) ([]align.Peak, error) {
	a, err := gpuMem(f1)
	if err != nil {
		return nil, err
	}
	b, err := gpuMem(f2)
	if err != nil {
		return nil, err
	}
	// The guard of align.Aligner.Peaks: |F1(0)|·|F2(0)|·1e-15, where F(0) is
	// the pixel sum.
	if err := cuda.CrossPowerPow(c.stream, c.cross, a, b, math.Abs(dc1)*math.Abs(dc2)*1e-15, c.beta); err != nil {
		return nil, err
	}
	if err := c.plan.Inverse(c.pcm, c.cross); err != nil {
		return nil, err
	}
	if err := cuda.LocalMax(c.stream, c.lm, c.pcm, c.w, c.h); err != nil {
		return nil, err
	}
	c.out = c.out[:0]
	scale := 1 / float64(c.w*c.h)
	for range max(1, n) {
		v, i, err := c.red.Max(c.stream, c.lm)
		if err != nil {
			return nil, err
		}
		if i < 0 || math.IsInf(v, -1) {
			break
		}
		c.out = append(c.out, align.Peak{X: i % c.w, Y: i / c.w, Value: v * scale})
		if err := cuda.CopyToDevice(c.stream, c.lm.Slice(8*int64(i), 8), c.negInf[:]); err != nil {
			return nil, err
		}
	}
	return c.out, nil
}
