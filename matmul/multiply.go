package matmul

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/matmul/npy"
)

// Report describes a finished product.
type Report struct {
	Plan    Plan
	Kernel  string        // Describe(kernel)
	Elapsed time.Duration // from the start of the graph to its end, plus HostPin
	// BytesRead and BytesWritten count the matrix data actually read from
	// the sources and written to the sink (headers excluded).
	BytesRead, BytesWritten int64
	// Products is the number of block products computed.
	Products int64
	// UploadBytes and DownloadBytes count the data copied to and from the
	// devices of a device kernel (0 for CPU kernels).
	UploadBytes, DownloadBytes int64
	// DeviceBusy is, per device of a device kernel, the fraction of
	// Elapsed during which its compute queue had a product queued or
	// running (an upper bound on the time it computed; nil for CPU
	// kernels).
	DeviceBusy []float64
	// HostPin is the part of Elapsed spent page-locking the operands
	// before the run and unlocking them afterwards, outside the graph
	// (the register and pipelined host copies of a device kernel, see
	// offload_tuning.go; 0 otherwise, and for matrices pinned by
	// PinHost). Pipelined registrations overlap the graph and are not in
	// it.
	HostPin time.Duration
	// HostCopy names how the blocks of ordinary host memory moved to and
	// from the devices (staging, register or pipelined; "" for CPU
	// kernels).
	HostCopy string
	// PinnedBytes is the host memory the run page-locked, and DirectBytes
	// the part of UploadBytes and DownloadBytes copied straight between
	// page-locked host memory (that, or PinHost's) and the devices,
	// without staging.
	PinnedBytes, DirectBytes int64
	// DirectCopies is the number of copies that moved DirectBytes: a
	// block lying across several registrations (chunks of the register
	// and pipelined strategies) takes one copy per registration it
	// touches, since a copy must lie within one.
	DirectCopies int64
	// Stats are the graph's counters at the end of the run.
	Stats graph.Stats
}

// GFLOPS returns the rate of the product in 10⁹ floating-point operations
// per second (2·M·N·K operations).
func (r *Report) GFLOPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return r.Plan.Flops / r.Elapsed.Seconds() / 1e9
}

// shapeErr reports operands whose shapes do not fit.
func shapeErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrShape, fmt.Sprintf(format, args...))
}

// Multiply computes C = A·B on the block task graph and stores C in c.
//
// a is m x k and b is k x n; c must be m x n. Operands that are *Dense are
// used in place; other sources (such as *npy.File) are read block by block
// into pools bounded by cfg.MemoryBudget, so they may be larger than
// memory. A *Dense c receives the result in place; other sinks (such as
// *npy.Writer) are written block by block. c must not overlap a or b.
//
// Cancelling ctx stops the run; Multiply then returns an error wrapping
// ctx's error, after every goroutine of the run has ended.
func Multiply(ctx context.Context, a, b Source, c Sink, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	for _, m := range []struct {
		v    any
		what string
	}{{a, "A"}, {b, "B"}, {c, "C"}} {
		if m.v == nil {
			return nil, fmt.Errorf("matmul: %s is nil", m.what)
		}
		if d, ok := m.v.(*Dense); ok {
			if err := d.check(m.what); err != nil {
				return nil, err
			}
		}
	}
	if cd, ok := c.(*Dense); ok && (Source(cd) == a || Source(cd) == b) {
		return nil, fmt.Errorf("%w: C must not be one of the operands", ErrConfig)
	}
	m, k, n := a.Rows(), a.Cols(), b.Cols()
	if b.Rows() != k {
		return nil, shapeErr("inner dimensions differ: A is %dx%d, B is %dx%d", m, k, b.Rows(), n)
	}
	if c.Rows() != m || c.Cols() != n {
		return nil, shapeErr("C is %dx%d, the product of %dx%d and %dx%d is %dx%d", c.Rows(), c.Cols(), m, k, k, n, m, n)
	}
	_, aDense := a.(*Dense)
	_, bDense := b.(*Dense)
	plan, err := newPlan(m, k, n, aDense && bDense, cfg)
	if err != nil {
		return nil, err
	}
	kernel := cfg.kernel()
	rep := &Report{Plan: plan, Kernel: Describe(kernel)}
	if m == 0 || n == 0 || k == 0 {
		return rep, zeroProduct(ctx, c, plan, cfg, rep)
	}

	oa, ob := newOperand("A", a), newOperand("B", b)
	var written, products atomic.Int64
	var g *graph.Graph[blockRequest, blockDone]
	var moved offloadCounters
	var pins *hostPinner
	var trace *offloadTrace
	pinStart := time.Now()
	if off, ok := kernel.(offloader); ok {
		hc, err := hostCopyFromEnv()
		if err != nil {
			return rep, fmt.Errorf("matmul: %w", err)
		}
		tune := tuningFor(len(off.offloadDevices()))
		rep.HostCopy = hc.String()
		direct, others := pinnedOperands(off, a, b, c)
		// The order along k: HTGS_MATMUL_SLABFIRST when named, else the
		// slab lead where it applies, else slab first where wanted.
		budget, sf := deviceBudget(cfg, off), tune.wantSlabFirst(direct[0], direct[1])
		if sf && tune.slabFirst != "" {
			plan.trySlabFirst(budget)
		}
		if !plan.trySlabLead(budget, tune.lead(direct[0], direct[1])) && sf {
			plan.trySlabFirst(budget)
		}
		rep.Plan = plan
		pins = pinOperands(off, tune, &plan, others)
		if hc == copyRegister {
			rep.HostPin = time.Since(pinStart)
		}
		trace = newOffloadTrace(tune.trace)
		g = buildOffload(&plan, cfg, off, tune, direct, pins, trace, oa, ob, c, &written, &moved)
	} else {
		g = build(&plan, cfg, oa, ob, c, &written, &products)
	}
	err = runGraph(ctx, g, plan.requests, plan.MB*plan.NB, cfg, rep)
	if err == nil {
		err = trace.finish(fmt.Sprintf("%dx%dx%d", m, k, n))
	} else {
		trace.free()
	}
	if pins != nil {
		t0 := time.Now()
		rep.PinnedBytes = pins.bytes.Load()
		err = errors.Join(err, pins.close())
		rep.HostPin += time.Since(t0)
		rep.Elapsed += rep.HostPin
	}
	rep.DirectBytes, rep.DirectCopies = moved.direct.Load(), moved.directCopies.Load()
	rep.UploadBytes, rep.DownloadBytes = moved.uploaded.Load(), moved.downloaded.Load()
	products.Add(moved.products.Load())
	for i := range moved.busy {
		rep.DeviceBusy = append(rep.DeviceBusy, float64(moved.busy[i].Load())/float64(max(1, rep.Elapsed.Nanoseconds())))
	}
	rep.BytesRead = oa.read.Load() + ob.read.Load()
	rep.BytesWritten = written.Load()
	rep.Products = products.Load()
	return rep, err
}

// stallDelay is how long a product with blocks of side bs may go without
// progress before the graph reports a stall: one block product may take
// long on its own (the CPU default multiplies operands in memory with one
// OpenBLAS call), so no stall is reported before it could have ended at a
// pessimistic 1 GFLOP/s (0: the graph's default). At most a day.
func stallDelay(bs int) time.Duration {
	if bs <= 0 {
		return 0
	}
	ns := min(2*float64(bs)*float64(bs)*float64(bs), float64(24*time.Hour))
	if d := time.Duration(ns); d > graph.DefaultStallDelay {
		return d
	}
	return 0
}

// runGraph starts g, feeds it the requests, passes each finished block to
// cfg.Progress, and waits for the end; it fills rep's time and stats. It
// returns only after every goroutine it started has ended.
func runGraph(ctx context.Context, g *graph.Graph[blockRequest, blockDone], requests iter.Seq[blockRequest], total int, cfg Config, rep *Report) error {
	var opts []graph.StartOption
	if cfg.Logger != nil {
		opts = append(opts, graph.WithLogger(cfg.Logger))
	}
	if d := stallDelay(rep.Plan.BlockSize); d > graph.DefaultStallDelay {
		opts = append(opts, graph.WithStallReport(d, nil))
	}
	opts = append(opts, cfg.StartOptions...)
	var exec *graph.Execution
	opts = append(opts, graph.WithStarted(func(e *graph.Execution) {
		exec = e
		if cfg.Observe != nil {
			cfg.Observe(e)
		}
	}))
	start := time.Now()
	done := 0
	err := g.Run(ctx, requests, func(blockDone) error {
		done++
		if cfg.Progress != nil {
			cfg.Progress(done, total)
		}
		return nil
	}, opts...)
	rep.Elapsed = time.Since(start)
	if exec == nil {
		return fmt.Errorf("matmul: starting the graph: %w", err)
	}
	rep.Stats = exec.Stats()
	if err != nil {
		return fmt.Errorf("matmul: %w", err)
	}
	if done != total {
		// Unreachable unless the schedule is wrong: the graph went quiescent
		// with blocks of C missing.
		return fmt.Errorf("matmul: internal error: the graph ended with %d of %d blocks of C", done, total)
	}
	return nil
}

// zeroProduct stores the product of an m x 0 and a 0 x n matrix: zeros.
func zeroProduct(ctx context.Context, c Sink, plan Plan, cfg Config, rep *Report) error {
	if plan.M == 0 || plan.N == 0 {
		return nil
	}
	if d, ok := c.(*Dense); ok {
		scale(d.R, d.C, 0, d.Data, d.Stride)
		return nil
	}
	bs := plan.BlockSize
	zeros := make([]float64, min(bs, plan.M)*min(bs, plan.N))
	done, total := 0, plan.MB*plan.NB
	for i := range plan.MB {
		for j := range plan.NB {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("matmul: %w", err)
			}
			rows, cols := min(bs, plan.M-i*bs), min(bs, plan.N-j*bs)
			if err := c.WriteBlock(i*bs, j*bs, rows, cols, zeros); err != nil {
				return fmt.Errorf("matmul: writing block (%d, %d) of C%s: %w", i, j, sinkName(c), err)
			}
			rep.BytesWritten += 8 * int64(rows) * int64(cols)
			done++
			if cfg.Progress != nil {
				cfg.Progress(done, total)
			}
		}
	}
	return nil
}

// MultiplyDense returns A·B for matrices in memory.
func MultiplyDense(ctx context.Context, a, b *Dense, cfg Config) (*Dense, *Report, error) {
	if a == nil || b == nil {
		return nil, nil, errors.New("matmul: nil operand")
	}
	c := NewDense(a.R, b.C)
	rep, err := Multiply(ctx, a, b, c, cfg)
	if err != nil {
		return nil, rep, err
	}
	return c, rep, nil
}

// MultiplyFiles multiplies the matrices stored in the .npy files aPath and
// bPath ('<f8', C order, 2-D) and writes the product to cPath as a '<f8'
// C-order .npy file, block by block, out of core: at most
// cfg.MemoryBudget bytes of blocks are in memory at once. On failure cPath
// is removed.
func MultiplyFiles(ctx context.Context, aPath, bPath, cPath string, cfg Config) (rep *Report, err error) {
	fa, err := npy.Open(aPath)
	if err != nil {
		return nil, fmt.Errorf("matmul: A: %w", err)
	}
	defer fa.Close()
	fb, err := npy.Open(bPath)
	if err != nil {
		return nil, fmt.Errorf("matmul: B: %w", err)
	}
	defer fb.Close()
	if fa.Cols() != fb.Rows() {
		return nil, shapeErr("inner dimensions differ: A (%s) is %dx%d, B (%s) is %dx%d",
			aPath, fa.Rows(), fa.Cols(), bPath, fb.Rows(), fb.Cols())
	}
	fc, err := npy.Create(cPath, fa.Rows(), fb.Cols())
	if err != nil {
		return nil, fmt.Errorf("matmul: C: %w", err)
	}
	defer func() {
		if cerr := fc.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("matmul: C: closing %s: %w", cPath, cerr)
		}
		if err != nil {
			_ = os.Remove(cPath)
		}
	}()
	return Multiply(ctx, fa, fb, fc, cfg)
}
