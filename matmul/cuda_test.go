//go:build cuda

package matmul

import (
	"context"
	"errors"
	"testing"

	"gonum.org/v1/gonum/blas"

	"github.com/gohtgs/htgs/cuda"
)

// cudaTag tells the tests whether the cuda kernel is compiled in.
const cudaTag = true

// cudaKernelOrSkip returns the cuda kernel, or skips where no GPU is usable.
func cudaKernelOrSkip(t *testing.T) Kernel {
	t.Helper()
	k, err := LookupKernel("cuda")
	if errors.Is(err, ErrUnavailable) {
		t.Skip("no CUDA device:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The graph with the cuda kernel gives the gonum result, on an odd shape
// with edge blocks, in memory and with several copies per device.
func TestCUDAKernelMatchesGonum(t *testing.T) {
	k := cudaKernelOrSkip(t)
	a, b := Random(300, 257, 1), Random(257, 411, 2)
	want := NewDense(300, 411)
	if err := Gonum().(Gemmer).Gemm(1, a, b, want); err != nil {
		t.Fatal(err)
	}
	for _, threads := range []int{1, 3} {
		got, _, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 128, Copies: threads, Kernel: k})
		if err != nil {
			t.Fatal(err)
		}
		cmp, err := Compare(a, b, got, want)
		if err != nil || !cmp.OK {
			t.Fatalf("threads %d: %+v, %v", threads, cmp, err)
		}
	}
	one := NewDense(300, 411)
	if err := k.(Gemmer).Gemm(0, a, b, one); err != nil {
		t.Fatal(err)
	}
	if cmp, err := Compare(a, b, one, want); err != nil || !cmp.OK {
		t.Fatalf("one cuBLAS call: %+v, %v", cmp, err)
	}
}

// The offload graph on the GPUs with device pools too small for the
// operands: the plan streams a panel at a time (or block by block), and the
// result is still the CPU's; every device buffer goes back.
func TestCUDAOffloadWithinDeviceBudget(t *testing.T) {
	k := cudaKernelOrSkip(t)
	a, b := Random(700, 650, 3), Random(650, 530, 4)
	want := NewDense(700, 530)
	if err := Gonum().(Gemmer).Gemm(1, a, b, want); err != nil {
		t.Fatal(err)
	}
	const blk = 8 * 128 * 128
	for _, budget := range []int64{0, 20 * blk, 12 * blk} {
		got, rep, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 128, Kernel: k, DeviceMemory: budget})
		if err != nil {
			t.Fatalf("budget %d: %v", budget, err)
		}
		t.Logf("budget %d: %v; uploaded %d, downloaded %d bytes", budget, rep.Plan, rep.UploadBytes, rep.DownloadBytes)
		if cmp, err := Compare(a, b, got, want); err != nil || !cmp.OK {
			t.Fatalf("budget %d: %+v, %v", budget, cmp, err)
		}
		if rep.UploadBytes != rep.Plan.UploadBytes {
			t.Errorf("budget %d: uploaded %d bytes, plan %d", budget, rep.UploadBytes, rep.Plan.UploadBytes)
		}
		for _, ps := range rep.Stats.Pools {
			if ps.InUse != 0 {
				t.Errorf("budget %d: pool %s (clone %d) has %d buffers out", budget, ps.Name, ps.Clone, ps.InUse)
			}
		}
	}
}

// The offload graph on the GPUs sums C on the devices: with KB = 16
// products per block of C, C still comes back once, and the result is
// cuBLAS's to rounding; in memory and out of core (.npy files).
func TestCUDAOffloadSumsOnDevice(t *testing.T) {
	k := cudaKernelOrSkip(t)
	a, b := Random(300, 2000, 5), Random(2000, 310, 6)
	want := NewDense(300, 310)
	if err := Gonum().(Gemmer).Gemm(1, a, b, want); err != nil {
		t.Fatal(err)
	}
	cfg := Config{BlockSize: 128, Kernel: k}
	got, rep, err := MultiplyDense(context.Background(), a, b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v; busy %v", rep.Plan, rep.DeviceBusy)
	if cmp, err := Compare(a, b, got, want); err != nil || !cmp.OK {
		t.Fatalf("in memory: %+v, %v", cmp, err)
	}
	if c := int64(8 * 300 * 310); rep.DownloadBytes != c {
		t.Errorf("downloaded %d bytes, want |C| = %d", rep.DownloadBytes, c)
	}
	if rep.UploadBytes != rep.Plan.UploadBytes {
		t.Errorf("uploaded %d bytes, plan %d", rep.UploadBytes, rep.Plan.UploadBytes)
	}
	if len(rep.DeviceBusy) == 0 {
		t.Errorf("no busy fractions")
	}

	dir := t.TempDir()
	pa, pb, pc := writeNpy(t, dir, "a.npy", a), writeNpy(t, dir, "b.npy", b), dir+"/c.npy"
	cfg.MemoryBudget = 40 * 8 * 128 * 128
	rep, err = MultiplyFiles(context.Background(), pa, pb, pc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("out of core: %v", rep.Plan)
	if cmp, err := Compare(a, b, readNpy(t, pc), want); err != nil || !cmp.OK {
		t.Fatalf("out of core: %+v, %v", cmp, err)
	}
	if c := int64(8 * 300 * 310); rep.DownloadBytes != c {
		t.Errorf("out of core: downloaded %d bytes, want |C| = %d", rep.DownloadBytes, c)
	}
}

// cuBLASXt (the reference of the benchmarks and of matmul -compare-xt)
// gives gonum's result on host memory, with strides and tiles smaller than
// the matrices.
func TestCUDABLASXtMatchesGonum(t *testing.T) {
	cudaKernelOrSkip(t)
	ds, err := cuda.Devices()
	if err != nil {
		t.Fatal(err)
	}
	x, err := cuda.NewBLASXt(ds)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := x.SetBlockDim(128); err != nil {
		t.Fatal(err)
	}
	a, b := Random(300, 257, 1), Random(257, 411, 2)
	want := NewDense(300, 411)
	if err := Gonum().(Gemmer).Gemm(1, a, b, want); err != nil {
		t.Fatal(err)
	}
	// C is a view with a stride larger than its width: the columns
	// beyond it must be left alone.
	wide := NewDense(300, 420)
	for i := range wide.Data {
		wide.Data[i] = -7
	}
	got := &Dense{R: 300, C: 411, Stride: 420, Data: wide.Data}
	if err := x.Dgemm(blas.NoTrans, blas.NoTrans, 300, 411, 257, 1, a.Data, a.Stride, b.Data, b.Stride, 0, got.Data, got.Stride); err != nil {
		t.Fatal(err)
	}
	checkProduct(t, a, b, got, want)
	for i := range 300 {
		for j := 411; j < 420; j++ {
			if v := wide.At(i, j); v != -7 {
				t.Fatalf("element (%d,%d) beyond C's width changed to %g", i, j, v)
			}
		}
	}
}

// Each host-copy strategy gives gonum's result on the GPU: register
// page-locks A, B and C in chunks (small here, so that blocks straddle
// them: each goes in one copy per chunk, as a 2-D copy may not span two
// registrations) and copies every block straight; pipelined mixes staged and
// straight copies; nothing stays registered (PinHost afterwards succeeds).
func TestCUDAHostCopyStrategies(t *testing.T) {
	k := cudaKernelOrSkip(t)
	a, b := Random(700, 600, 1), Random(600, 500, 2)
	want := NewDense(700, 500)
	if err := Gonum().(Gemmer).Gemm(1, a, b, want); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HTGS_MATMUL_PINCHUNK", "256")
	for _, mode := range []string{"staging", "register", "pipelined"} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv("HTGS_MATMUL_HOSTCOPY", mode)
			c := NewDense(700, 500)
			rep, err := Multiply(context.Background(), a, b, c, Config{BlockSize: 128, Kernel: k})
			if err != nil {
				t.Fatal(err)
			}
			checkProduct(t, a, b, c, want)
			all := rep.UploadBytes + rep.DownloadBytes
			t.Logf("%s: %d of %d bytes straight in %d copies, %d page-locked, page-locking %v", mode, rep.DirectBytes, all, rep.DirectCopies, rep.PinnedBytes, rep.HostPin)
			if mode == "register" && rep.DirectBytes != all {
				t.Errorf("register: %d of %d bytes straight", rep.DirectBytes, all)
			}
			// Blocks of 128 rows of 4000-4800 bytes span several 256 KiB
			// chunks: more copies than blocks.
			if p := rep.Plan; mode == "register" && rep.DirectCopies <= int64(p.MB*p.KB+p.KB*p.NB+p.MB*p.NB) {
				t.Errorf("register: %d direct copies for %d blocks: no block split at the chunks", rep.DirectCopies, p.MB*p.KB+p.KB*p.NB+p.MB*p.NB)
			}
			if mode == "staging" && rep.DirectBytes != 0 {
				t.Errorf("staging: %d bytes straight", rep.DirectBytes)
			}
			unpin, err := PinHost(k, a, b, c)
			if err != nil {
				t.Fatalf("PinHost after the run (registrations left?): %v", err)
			}
			if err := unpin(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
