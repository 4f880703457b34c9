//go:build cuda

package pathology

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gohtgs/htgs/region"
)

// These tests need a GPU: they skip, with the reason, where none is
// usable. Build them with go test -c -tags cuda and run the binary there.

func cudaOrSkip(t *testing.T) []accel {
	t.Helper()
	as, err := cudaAccels(1)
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	t.Cleanup(func() {
		if err := closeAccels(as); err != nil {
			t.Error(err)
		}
	})
	return as
}

// TestCUDAKernelsMatchCPU runs every GPU operation on the GPU, on tiles of
// awkward and large sizes, and compares the outputs with the CPU's.
func TestCUDAKernelsMatchCPU(t *testing.T) {
	as := cudaOrSkip(t)
	ctx := context.Background()
	for _, size := range []int{1, 17, 333, 2048} {
		s, err := NewSlide(ctx, 2, size, 11, region.NewMemory(), region.NewMemory())
		if err != nil {
			t.Fatal(err)
		}
		h := &hwSetup{cpus: 1, accels: as, tiles: 2, size: size, calTiles: 2, specs: hardwareOperations(), regionBuf: realBytes(size)}
		c, err := h.calibrate(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.mismatch) > 0 {
			t.Errorf("size %d: the GPU differs from the CPU in %v", size, c.mismatch)
		}
		for _, op := range gpuOpNames() {
			t.Logf("size %d: %-14s cpu %v gpu %v speedup %.1f", size, op, c.cpu[op], c.gpu[op], c.speedups()[op])
		}
		t.Logf("size %d: bandwidth %.2f GB/s", size, c.bandwidth/1e9)
	}
}

// TestCUDAKernelEdgeCases compares the CUDA kernels of RBCDetection,
// MorphOpen, ReconToNuclei, PreWatershed, Watershed, FillHoles,
// AreaThreshold and BWLabel with the CPU kernels on the edge
// cases of gpu_cases_test.go and on larger images, and names the first
// differing pixels.
func TestCUDAKernelEdgeCases(t *testing.T) {
	as := cudaOrSkip(t)
	for _, op := range kernelOpsUnderTest() {
		t.Run(op.name, func(t *testing.T) { checkKernelCases(t, as[0], op, true) })
	}
	t.Run("ReconToNuclei", func(t *testing.T) { checkReconToNucleiCases(t, as[0], true) })
	t.Run("Watershed", func(t *testing.T) { checkWatershedCases(t, as[0], true) })
}

// TestCUDAHardwareRun runs a small hardware experiment on the GPU.
func TestCUDAHardwareRun(t *testing.T) {
	cudaOrSkip(t) // skip early; the run opens its own
	gpus, err := CUDAGPUs(1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := gpus.Close(); err != nil {
			t.Error(err)
		}
	}()
	res, err := Hardware{CPUs: 4, GPUs: gpus, Tiles: 8, TileSize: 512, Window: 10, Seed: 1}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := res.WriteMarkdown(&out, "TestCUDAHardwareRun"); err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil || !strings.Contains(out.String(), "every GPU output equals the CPU's") {
		t.Errorf("%v; output:\n%s", err, out.String())
	}
	t.Log(out.String())
}

// TestCUDAPinnedRing round-trips buffers of sizes around the chunk size,
// and more chunks than the ring has slots, through the pinned staging.
func TestCUDAPinnedRing(t *testing.T) {
	as := cudaOrSkip(t)
	a := as[0].(*cudaAccel)
	for _, n := range []int64{1, ringChunk - 1, ringChunk, ringChunk + 1, (ringSlots+2)*ringChunk + 3} {
		b, err := a.alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		src, dst := make([]byte, n), make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + int(n))
		}
		ctx := context.Background()
		if err := a.upload(ctx, b, src); err != nil {
			t.Fatal(err)
		}
		if err := a.download(ctx, dst, b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(src, dst) {
			t.Errorf("%d bytes: the round trip changed the data", n)
		}
		a.release(b)
	}
}

// TestCUDAPinnedDirect round-trips buffers of the page-locked pool, which
// move by one DMA each way without the ring, and checks them against the
// ring's path from Go memory; a buffer given back is reused.
func TestCUDAPinnedDirect(t *testing.T) {
	as := cudaOrSkip(t)
	a := as[0].(*cudaAccel)
	ctx := context.Background()
	for _, n := range []int64{1, ringChunk + 1, 3*ringChunk + 5} {
		src, ok := a.hostBuffer(n)
		if !ok {
			t.Fatalf("no page-locked buffer of %d bytes", n)
		}
		if _, direct := a.pinnedOf(src); !direct {
			t.Fatalf("a buffer of the pool (%d bytes) is not seen as page-locked", n)
		}
		if _, direct := a.pinnedOf(make([]byte, n)); direct {
			t.Fatal("Go memory seen as page-locked")
		}
		for i := range src {
			src[i] = byte(i*13 + int(n))
		}
		b, err := a.alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.upload(ctx, b, src); err != nil {
			t.Fatal(err)
		}
		dst, _ := a.hostBuffer(n)
		clear(dst)
		if err := a.download(ctx, dst, b); err != nil {
			t.Fatal(err)
		}
		viaRing := make([]byte, n)
		if err := a.download(ctx, viaRing, b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(src, dst) || !bytes.Equal(src, viaRing) {
			t.Errorf("%d bytes: direct round trip equal %v, through the ring %v", n, bytes.Equal(src, dst), bytes.Equal(src, viaRing))
		}
		a.release(b)
		a.putHost(src)
		a.putHost(dst)
		again, _ := a.hostBuffer(n)
		if unsafe.SliceData(again) != unsafe.SliceData(dst) && unsafe.SliceData(again) != unsafe.SliceData(src) {
			t.Errorf("%d bytes: a buffer given back was not reused", n)
		}
		a.putHost(again)
	}
	if _, out := a.hostStats(); out != 0 {
		t.Errorf("%d page-locked buffers not given back", out)
	}
}

// TestCUDAQueuedTransfer round-trips page-locked buffers through queued
// copies (queueTransfer): several uploads queued before any is waited
// for, then the downloads; each copy is done once waited for, its span on
// the GPU is known and ordered, and the data come back. Go memory is
// copied at once (no queued copy).
func TestCUDAQueuedTransfer(t *testing.T) {
	as := cudaOrSkip(t)
	a := as[0].(*cudaAccel)
	ctx := context.Background()
	sizes := []int64{1, ringChunk + 1, 3*ringChunk + 5}
	var bufs []gpuBuf
	var srcs [][]byte
	var ups []deviceCopy
	for _, n := range sizes {
		src, ok := a.hostBuffer(n)
		if !ok {
			t.Fatalf("no page-locked buffer of %d bytes", n)
		}
		for i := range src {
			src[i] = byte(i*11 + int(n))
		}
		b, err := a.alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		c, err := a.queueTransfer(ctx, b, src, true)
		if err != nil || c == nil {
			t.Fatalf("%d bytes: queue the upload: %v (copy %v)", n, err, c)
		}
		bufs, srcs, ups = append(bufs, b), append(srcs, src), append(ups, c)
	}
	var last time.Time
	for i, c := range ups {
		s, err := c.wait()
		if err != nil {
			t.Fatal(err)
		}
		if s.start.IsZero() || s.end.Before(s.start) || s.start.Before(last.Add(-time.Microsecond)) {
			t.Errorf("upload %d: span %v - %v (previous ended %v): want known, ordered, after the previous", i, s.start, s.end, last)
		}
		last = s.end
	}
	for i, n := range sizes {
		dst, _ := a.hostBuffer(n)
		clear(dst)
		c, err := a.queueTransfer(ctx, bufs[i], dst, false)
		if err != nil || c == nil {
			t.Fatalf("%d bytes: queue the download: %v", n, err)
		}
		for t0 := time.Now(); !c.done(); {
			if time.Since(t0) > 5*time.Second {
				t.Fatalf("%d bytes: the queued download is not done after 5 s", n)
			}
		}
		if _, err := c.wait(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(srcs[i], dst) {
			t.Errorf("%d bytes: the queued round trip changed the data", n)
		}
		if c, err := a.queueTransfer(ctx, bufs[i], make([]byte, n), false); err != nil || c != nil {
			t.Errorf("%d bytes into Go memory: %v, copy %v: want made at once", n, err, c)
		}
		a.putHost(dst)
		a.putHost(srcs[i])
		a.release(bufs[i])
	}
}
