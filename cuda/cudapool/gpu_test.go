//go:build cuda

package cudapool

// Tests that need a GPU. They are compiled only with -tags cuda and skip,
// with the reason, when no CUDA device is usable; build them with
// scripts/build-cuda-tests.sh and run the binary on a GPU machine.

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
)

// gpus returns this machine's CUDA devices, closed when the test ends, or
// skips the test when there are none.
func gpus(tb testing.TB) []*cuda.Device {
	tb.Helper()
	ds, err := cuda.Devices()
	if err != nil {
		if !errors.Is(err, cuda.ErrNoDevice) {
			tb.Fatalf("Devices() failed with an error that does not wrap ErrNoDevice: %v", err)
		}
		tb.Skipf("no CUDA device: %v", err)
	}
	tb.Cleanup(func() {
		for _, d := range ds {
			if err := d.Close(); err != nil {
				tb.Errorf("Close %v: %v", d, err)
			}
		}
	})
	return ds
}

// must fails the test on err.
func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

func TestDeviceBuffers(t *testing.T) {
	d := gpus(t)[0]
	const size = 64 << 20
	a := DeviceBuffers(size)
	free0, _, err := d.MemInfo()
	must(t, err)
	var bufs []cuda.DeviceMem
	for range 4 {
		m, err := a.Alloc(d)
		must(t, err)
		if m.Size() != size || m.Device() != d || m.Ptr() == 0 {
			t.Fatalf("Alloc: %+v", m)
		}
		bufs = append(bufs, m)
	}
	for i, x := range bufs {
		for _, y := range bufs[i+1:] {
			if x.Ptr() < y.Ptr()+size && y.Ptr() < x.Ptr()+size {
				t.Errorf("buffers at %#x and %#x overlap", x.Ptr(), y.Ptr())
			}
		}
	}
	free1, _, err := d.MemInfo()
	must(t, err)
	if used := free0 - free1; used < 4*size-(8<<20) {
		t.Errorf("4 buffers of %d MiB reduced free memory by %d MiB", size>>20, used>>20)
	}
	if err := a.Free(device.Host{}, bufs[0]); !errors.Is(err, cuda.ErrWrongDevice) {
		t.Errorf("Free through a CPU device: %v, want cuda.ErrWrongDevice", err)
	}
	for _, m := range bufs {
		must(t, a.Free(d, m))
	}
	free2, _, err := d.MemInfo()
	must(t, err)
	if diff := free0 - free2; diff > 8<<20 || diff < -(8<<20) {
		t.Errorf("free memory after freeing: %d MiB, before: %d MiB", free2>>20, free0>>20)
	}

	fixed := DeviceBuffersOn(d, 4096)
	m, err := fixed.Alloc(device.Host{}) // a pool outside a pipeline passes the host
	must(t, err)
	if m.Device() != d || m.Size() != 4096 {
		t.Errorf("DeviceBuffersOn allocated %+v", m)
	}
	must(t, fixed.Free(device.Host{}, m))

	p := PinnedBuffers(1 << 20)
	h, err := p.Alloc(d)
	must(t, err)
	f := cuda.HostSlice[float64](h)
	if len(f) != 1<<17 {
		t.Fatalf("pinned HostSlice len %d", len(f))
	}
	for i := range f {
		f[i] = float64(i)
	}
	must(t, p.Free(d, h))
}

// TestPoolInGraph runs a task graph whose memory pool hands out device
// buffers: an upload task fills pooled GPU buffers, a download task reads
// them back and releases them.
func TestPoolInGraph(t *testing.T) {
	d := gpus(t)[0]
	const n, capacity = 1024, 2
	type frame struct {
		v   int
		buf *memmgr.Buffer[cuda.DeviceMem]
	}
	g := graph.New[int, float64]("gpu-frames")
	pool := memmgr.New(g, "device", capacity, DeviceBuffersOn(d, 8*n))
	up := graph.AddFunc(g, "upload", 2, func(ctx context.Context, v int, out task.Emitter[frame]) error {
		b, err := pool.Get(ctx)
		if err != nil {
			return err
		}
		x := make([]float64, n)
		for i := range x {
			x[i] = float64(v)
		}
		if err := cuda.CopyToDevice(nil, b.Data, x); err != nil {
			return err
		}
		return out.Emit(frame{v, b})
	})
	memmgr.Use(pool, up)
	down := graph.AddFunc(g, "download", 1, func(_ context.Context, f frame, out task.Emitter[float64]) error {
		x := make([]float64, n)
		if err := cuda.CopyFromDevice(nil, x, f.buf.Data); err != nil {
			return err
		}
		if err := f.buf.Release(); err != nil {
			return err
		}
		s := 0.0
		for _, e := range x {
			s += e
		}
		if s != float64(n*f.v) {
			return fmt.Errorf("frame %d: sum %g, want %d", f.v, s, n*f.v)
		}
		return out.Emit(s)
	})
	graph.Connect(g.Input(), up)
	graph.Connect(up, down)
	graph.Connect(down, g.Output())
	rt, err := g.Start(context.Background())
	must(t, err)
	go func() {
		defer rt.Close()
		for i := 1; i <= 50; i++ {
			if rt.Send(i) != nil {
				return
			}
		}
	}()
	total := 0.0
	for s := range rt.Results() {
		total += s
	}
	must(t, rt.Wait())
	if want := float64(n * 50 * 51 / 2); total != want {
		t.Errorf("total %g, want %g", total, want)
	}
	if p := rt.Stats().Pools[0]; p.Peak > capacity {
		t.Errorf("pool peak %d > capacity %d", p.Peak, capacity)
	}
}

// TestFreeThroughOtherGPU frees memory of one GPU through another: the
// pool's device and the buffer's must agree.
func TestFreeThroughOtherGPU(t *testing.T) {
	ds := gpus(t)
	if len(ds) < 2 {
		t.Skipf("needs two GPUs, have %d", len(ds))
	}
	a := DeviceBuffers(4096)
	m, err := a.Alloc(ds[0])
	must(t, err)
	if err := a.Free(ds[1], m); !errors.Is(err, cuda.ErrWrongDevice) {
		t.Errorf("freeing device 0 memory through device 1: %v, want cuda.ErrWrongDevice", err)
	}
	must(t, a.Free(ds[0], m))
}
