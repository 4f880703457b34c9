//go:build cuda

package matmul_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/matmul"
)

// BenchmarkMatmulCUDA: in-memory products with the cuda kernel (the offload
// graph: blocks packed into pinned staging buffers and uploaded on a copy
// stream while cuBLAS runs on a compute stream, C summed on the device and
// downloaded once, one pipeline clone per GPU), reported in one run against
// one cuBLAS call on the whole matrices with pageable copies in and out
// ("call") and against that call's DGEMM alone with the operands already on
// the device ("resident", the ceiling). "budget" limits the device pools to
// the size of one matrix, so that the graph re-streams B panel by panel.
// cuBLASXt (all GPUs, tiles of HTGS_MATMUL_BENCH_XTBLOCK, default 4096)
// runs on the same host matrices as the graph ("xt": ordinary memory, or
// page-locked with HTGS_MATMUL_BENCH_PIN=1), the reference that an HPC
// user would call for a host-memory DGEMM.
// n=16384 runs with blocks of 4096 and of 2048 (finer pipelining, smaller
// GEMMs). Every case runs each of the three once untimed (allocations, cuBLAS
// start-up), then b.N times. Targets (issue 14, one H100): graph >= 25
// TFLOP/s at n=8192, >= 40 at n=16384, >= 30 at n=16384 with the budget.
// With HTGS_MATMUL_BENCH_PIN=1 the graph runs on A, B and C pinned once
// with matmul.PinHost (the pinning time is logged, not counted); the
// knobs of matmul's offload_tuning.go (HTGS_MATMUL_*) apply as set.
// Built only with -tags cuda; skipped without a GPU:
//
//	go test -tags cuda -run '^$' -bench MatmulCUDA -benchtime 3x ./matmul
func BenchmarkMatmulCUDA(b *testing.B) {
	k, err := matmul.LookupKernel("cuda")
	if errors.Is(err, matmul.ErrUnavailable) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		n, bs  int
		budget bool
	}{{8192, 2048, false}, {16384, 4096, false}, {16384, 2048, false}, {16384, 2048, true}} {
		name := fmt.Sprintf("n=%d/bs=%d", tc.n, tc.bs)
		if tc.budget {
			name += "/budget"
		}
		b.Run(name, func(b *testing.B) {
			n := tc.n
			a, bm, c, ref := matmul.Random(n, n, 1), matmul.Random(n, n, 2), matmul.NewDense(n, n), matmul.NewDense(n, n)
			xc := matmul.NewDense(n, n) // cuBLASXt's C
			cfg := matmul.Config{BlockSize: tc.bs, Kernel: k, Buffers: &matmul.BufferCache{}}
			if tc.budget {
				cfg.DeviceMemory = 8 * int64(n) * int64(n)
			}
			ctx := context.Background()
			if os.Getenv("HTGS_MATMUL_BENCH_PIN") == "1" {
				t0 := time.Now()
				unpin, err := matmul.PinHost(k, a, bm, c, xc)
				if err != nil {
					b.Fatal(err)
				}
				defer unpin()
				b.Logf("A, B, C and cuBLASXt's C pinned with PinHost in %.3f s (not counted)", time.Since(t0).Seconds())
			}
			var rep *matmul.Report
			graph := func() error {
				r, err := matmul.Multiply(ctx, a, bm, c, cfg)
				rep = r
				return err
			}
			call := func() error { return k.(matmul.Gemmer).Gemm(0, a, bm, ref) }
			xt := newXt(b)
			defer xt.Close()
			xtRun := func() error {
				return xt.Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, a.Data, a.Stride, bm.Data, bm.Stride, 0, xc.Data, xc.Stride)
			}
			// The resident DGEMM runs on its own, after the others: its
			// operands take device memory that the graph wants.
			for _, run := range []func() error{graph, call, xtRun} {
				if err := run(); err != nil { // warm up
					b.Fatal(err)
				}
			}
			t := matmulTimed(b, graph, call, xtRun)
			resident := residentDgemm(b, n)
			b.Logf("%s; plan: %s", matmul.Describe(k), rep.Plan)
			moved, least := rep.Plan.BusBytes()
			b.Logf("last graph run: %.3f s, to GPUs %.2f GB, from GPUs %.2f GB, bus %.2fx the minimum %.2f GB, busy %.2f",
				rep.Elapsed.Seconds(), float64(rep.UploadBytes)/1e9, float64(rep.DownloadBytes)/1e9, float64(moved)/float64(least), float64(least)/1e9, rep.DeviceBusy)
			g, cl, x := gflops(b, n, t[0])/1e3, gflops(b, n, t[1])/1e3, gflops(b, n, t[2])/1e3
			b.ReportMetric(g, "graph-TFLOP/s")
			b.ReportMetric(cl, "call-TFLOP/s")
			b.ReportMetric(x, "xt-TFLOP/s")
			b.ReportMetric(g/x, "graph/xt")
			b.ReportMetric(resident, "resident-TFLOP/s")
			b.ReportMetric(g/cl, "graph/call")
			b.ReportMetric(g/resident, "graph/resident")
			b.ReportMetric(float64(moved)/float64(least), "bus/min")
			if cmp, err := matmul.Compare(a, bm, c, ref); err != nil || !cmp.OK {
				b.Fatalf("graph and one call differ: %+v %v", cmp, err)
			}
			if cmp, err := matmul.Compare(a, bm, xc, ref); err != nil || !cmp.OK {
				b.Fatalf("cuBLASXt and one call differ: %+v %v", cmp, err)
			}
		})
	}
}

// newXt returns a cuBLASXt handle on every GPU, with the tiles of
// HTGS_MATMUL_BENCH_XTBLOCK (default 4096).
func newXt(b *testing.B) *cuda.BLASXt {
	b.Helper()
	ds, err := cuda.Devices()
	if err != nil || len(ds) == 0 {
		b.Fatalf("no GPU for cuBLASXt: %v", err)
	}
	x, err := cuda.NewBLASXt(ds)
	if err != nil {
		b.Fatal(err)
	}
	bs := 4096
	if v, err := strconv.Atoi(os.Getenv("HTGS_MATMUL_BENCH_XTBLOCK")); err == nil && v > 0 {
		bs = v
	}
	if err := x.SetBlockDim(bs); err != nil {
		b.Fatal(err)
	}
	return x
}

// residentDgemm returns the rate, in TFLOP/s, of one n x n x n cuBLAS
// DGEMM on the first GPU with its operands already there (the best of
// three after a warm-up; the contents are whatever the memory held).
func residentDgemm(b *testing.B, n int) float64 {
	b.Helper()
	ds, err := cuda.Devices()
	if err != nil || len(ds) == 0 {
		b.Fatalf("no GPU for the resident DGEMM: %v", err)
	}
	d := ds[0]
	h, err := d.NewBLAS()
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := h.SetStream(s); err != nil {
		b.Fatal(err)
	}
	bytes := 8 * int64(n) * int64(n)
	var m [3]cuda.DeviceMem
	for i := range m {
		if m[i], err = d.Alloc(bytes); err != nil {
			b.Fatal(err)
		}
		defer m[i].Free()
		if err := cuda.Memset(s, m[i], 0); err != nil {
			b.Fatal(err)
		}
	}
	best := 0.0
	for i := range 4 {
		t0 := time.Now()
		if err := h.Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, m[0], n, m[1], n, 0, m[2], n); err != nil {
			b.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
		if r := 2 * float64(n) * float64(n) * float64(n) / time.Since(t0).Seconds() / 1e12; i > 0 && r > best {
			best = r
		}
	}
	return best
}
