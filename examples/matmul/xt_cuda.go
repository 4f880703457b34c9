//go:build cuda

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/matmul"
)

// compareXt runs, after the graph's product rep of a and b into c (from
// ordinary memory), the references of the same product in the same
// process: cuBLASXt from the same ordinary memory, as it is and with
// cuBLASXt's pinning mode (it page-locks the operands for the call); the
// graph and cuBLASXt
// with A, B and both results page-locked by PinHost (pinning not timed);
// one cuBLAS DGEMM with the operands already on the first GPU. It prints
// one line per case and a table of the rates ("COMPARE" lines, for
// scripts), and checks that cuBLASXt's result agrees with the graph's.
func compareXt(ctx context.Context, stdout io.Writer, o *options, a, b, c *matmul.Dense, cfg matmul.Config, rep *matmul.Report) error {
	if a == nil || b == nil || c == nil {
		return errors.New("needs the product in memory")
	}
	ds, err := cuda.Devices()
	if err != nil {
		return err
	}
	if len(ds) == 0 {
		return cuda.ErrNoDevice
	}
	m, n, k := a.R, b.C, a.C
	rate := func(sec float64) float64 { return 2 * float64(m) * float64(n) * float64(k) / sec / 1e12 }
	graphOrdinary := rep.GFLOPS() / 1e3

	x, err := cuda.NewBLASXt(ds)
	if err != nil {
		return err
	}
	defer x.Close()
	if err := x.SetBlockDim(o.xtBlock); err != nil {
		return err
	}
	// Warm-up: cuBLASXt makes its handles, streams and buffers on the
	// first call.
	w := matmul.Random(min(m, 1024), min(m, 1024), 3)
	wc := matmul.NewDense(w.R, w.C)
	if err := x.Dgemm(blas.NoTrans, blas.NoTrans, w.R, w.C, w.C, 1, w.Data, w.Stride, w.Data, w.Stride, 0, wc.Data, wc.Stride); err != nil {
		return fmt.Errorf("cuBLASXt warm-up: %w", err)
	}
	cx := matmul.NewDense(m, n)
	touchPages(cx.Data)
	xtRun := func() (float64, error) {
		t0 := time.Now()
		err := x.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a.Data, a.Stride, b.Data, b.Stride, 0, cx.Data, cx.Stride)
		return rate(time.Since(t0).Seconds()), err
	}
	xtOrdinary, err := xtRun()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cuBLASXt (%d GPU, tiles of %d) from ordinary memory: %.2f TFLOP/s\n", len(ds), o.xtBlock, xtOrdinary)
	if d := relDiff(cx, c); !(d <= 1e-10) {
		return fmt.Errorf("cuBLASXt and the graph differ: max |difference| / max |C| = %.3g", d)
	}

	t0 := time.Now()
	unpin, err := matmul.PinHost(cfg.Kernel, a, b, c, cx)
	if err != nil {
		return err
	}
	defer unpin()
	fmt.Fprintf(stdout, "page-locked A, B, C and cuBLASXt's C in %.3f s (not timed)\n", time.Since(t0).Seconds())
	prep, err := matmul.Multiply(ctx, a, b, c, cfg)
	if err != nil {
		return err
	}
	graphPinned := prep.GFLOPS() / 1e3
	fmt.Fprintf(stdout, "graph from page-locked memory: %.2f TFLOP/s (%s)\n", graphPinned, gpuLine(prep))
	xtPinned, err := xtRun()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cuBLASXt from page-locked memory: %.2f TFLOP/s\n", xtPinned)
	if err := unpin(); err != nil {
		return err
	}

	// cuBLASXt's own answer to ordinary memory: CUBLASXT_PINNING_ENABLED
	// page-locks the operands for the time of the call (counted in it).
	// Run after the page-locked runs, so that nothing it might leave
	// registered spoils them; a failure is reported, not fatal.
	xtOrdinaryPin, err := xtPinningRun(x, xtRun)
	if err == nil {
		if d := relDiff(cx, c); !(d <= 1e-10) {
			err = fmt.Errorf("its result and the graph's differ: max |difference| / max |C| = %.3g", d)
		}
	}
	if err != nil {
		fmt.Fprintf(stdout, "cuBLASXt with its pinning mode: %v (not counted)\n", err)
		xtOrdinaryPin = 0
	} else {
		fmt.Fprintf(stdout, "cuBLASXt from ordinary memory with its pinning mode (CUBLASXT_PINNING_ENABLED, page-locking timed): %.2f TFLOP/s\n", xtOrdinaryPin)
	}
	xtBest := max(xtOrdinary, xtOrdinaryPin)

	resident, err := residentDgemm(ds[0], m, n, k)
	if err != nil {
		return fmt.Errorf("resident cuBLAS: %w", err)
	}
	fmt.Fprintf(stdout, "cuBLAS DGEMM on operands resident on %s: %.2f TFLOP/s\n", ds[0].Name(), resident)

	fmt.Fprintf(stdout, "compare, TFLOP/s (%dx%dx%d, one process):\n", m, k, n)
	fmt.Fprintf(stdout, "  %-24s %8s %10s %8s\n", "memory", "graph", "cuBLASXt", "ratio")
	fmt.Fprintf(stdout, "  %-24s %8.2f %10.2f %7.2fx\n", "ordinary ("+rep.HostCopy+")", graphOrdinary, xtOrdinary, graphOrdinary/xtOrdinary)
	fmt.Fprintf(stdout, "  %-24s %8s %10.2f %7.2fx\n", "ordinary, Xt pinning", "", xtOrdinaryPin, graphOrdinary/xtOrdinaryPin)
	fmt.Fprintf(stdout, "  %-24s %8.2f %10.2f %7.2fx\n", "page-locked (PinHost)", graphPinned, xtPinned, graphPinned/xtPinned)
	fmt.Fprintf(stdout, "  %-24s %8.2f   (graph page-locked / resident %.2f, ordinary / resident %.2f)\n", "resident cuBLAS", resident, graphPinned/resident, graphOrdinary/resident)
	fmt.Fprintf(stdout, "COMPARE n=%d hostcopy=%s graph_ordinary=%.2f xt_ordinary=%.2f xt_ordinary_pinning=%.2f xt_ordinary_best=%.2f graph_pinned=%.2f xt_pinned=%.2f resident=%.2f xt_block=%d\n",
		m, rep.HostCopy, graphOrdinary, xtOrdinary, xtOrdinaryPin, xtBest, graphPinned, xtPinned, resident, o.xtBlock)
	return nil
}

// xtPinningRun times run with cuBLASXt's pinning mode on, and turns it off.
func xtPinningRun(x *cuda.BLASXt, run func() (float64, error)) (float64, error) {
	if err := x.SetPinning(true); err != nil {
		return 0, err
	}
	r, err := run()
	return r, errors.Join(err, x.SetPinning(false))
}

// relDiff returns max |x - y| / max |y| (NaN when they differ in NaN).
func relDiff(x, y *matmul.Dense) float64 {
	d, top := 0.0, 0.0
	for i := range x.R {
		for j := range x.C {
			a, b := x.At(i, j), y.At(i, j)
			if e := math.Abs(a - b); e > d || e != e {
				d = e
			}
			top = max(top, math.Abs(b))
		}
	}
	return d / max(top, math.SmallestNonzeroFloat64)
}

// residentDgemm returns the best rate, in TFLOP/s, of two m x k x n
// cuBLAS DGEMMs on d with the operands already there (after one
// untimed; the memory is zeroed).
func residentDgemm(d *cuda.Device, m, n, k int) (float64, error) {
	h, err := d.NewBLAS()
	if err != nil {
		return 0, err
	}
	defer h.Close()
	s, err := d.NewStream()
	if err != nil {
		return 0, err
	}
	defer s.Close()
	if err := h.SetStream(s); err != nil {
		return 0, err
	}
	var mem [3]cuda.DeviceMem
	for i, elems := range []int{m * k, k * n, m * n} {
		if mem[i], err = d.Alloc(8 * int64(elems)); err != nil {
			return 0, err
		}
		defer mem[i].Free()
		if err := cuda.Memset(s, mem[i], 0); err != nil {
			return 0, err
		}
	}
	best := 0.0
	for i := range 3 {
		t0 := time.Now()
		if err := h.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, mem[0], k, mem[1], n, 0, mem[2], n); err != nil {
			return 0, err
		}
		if err := s.Synchronize(); err != nil {
			return 0, err
		}
		if r := 2 * float64(m) * float64(n) * float64(k) / time.Since(t0).Seconds() / 1e12; i > 0 && r > best {
			best = r
		}
	}
	return best, nil
}
