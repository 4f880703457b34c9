package matmul

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/phase"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/pipeline"
	"github.com/gohtgs/htgs/task"
)

// An offloader is a kernel whose products run in the memory of devices of
// their own (GPUs). For such a kernel Multiply builds the offload graph: the
// loaders and the pairing bookkeeper stay on the host, and each product goes
// to an execution pipeline with one clone per device, where a copy-in task
// copies its blocks into device pools (each block once per load and device,
// with the number of the device's products that use it as its release
// count), the multiply task runs the kernel on device blocks, and a
// copy-out task brings the product back into a host buffer for the
// accumulation on the CPU.
//
// The interface is unexported: the cuda kernel implements it (-tags cuda),
// and the tests implement it with host memory posing as devices, so the
// graph, its routing and its release counts are tested on every machine.
type offloader interface {
	Kernel
	// offloadDevices lists the devices, one pipeline clone each.
	offloadDevices() []device.Device
	// offloadMemory is the bytes of memory per device that the pools may
	// hold when Config.DeviceMemory is 0 (0: no limit).
	offloadMemory() int64
	// deviceBuffers returns the allocator of device buffers of n float64s
	// (on the device the allocator is given).
	deviceBuffers(n int) memmgr.Allocator[devMem]
	// newMover returns the copier of one copy-in or copy-out task copy,
	// for blocks of at most n float64s.
	newMover(n int) mover
	// newDeviceMultiplier returns the multiplier of one multiply task copy.
	newDeviceMultiplier() deviceMultiplier
}

// devMem is a buffer in a device's memory holding float64s.
type devMem interface {
	// Len is the number of float64s the buffer holds.
	Len() int
}

// A mover copies blocks between the host and the device of its task copy.
// It may implement task.Initializer and task.Shutdowner: Initialize runs on
// the goroutine of every later call and receives the clone's device.
type mover interface {
	// upload copies the rows x cols block src (stride ld) into dst, stored
	// densely (stride cols), and returns once dst holds it.
	upload(ctx context.Context, dst devMem, src []float64, rows, cols, ld int) error
	// download copies the first n float64s of src into dst and returns
	// once dst holds them.
	download(ctx context.Context, dst []float64, src devMem, n int) error
}

// A deviceMultiplier multiplies dense row-major device blocks for one
// multiply task copy; like a mover it may implement task.Initializer and
// task.Shutdowner.
type deviceMultiplier interface {
	// mul sets c = a·b for an m x k block a and a k x n block b, and
	// returns once c holds the product.
	mul(ctx context.Context, m, n, k int, a, b, c devMem) error
}

// offloadOf returns cfg's kernel as an offloader, if it is one.
func offloadOf(cfg Config) (offloader, bool) {
	o, ok := cfg.kernel().(offloader)
	return o, ok
}

// deviceOf returns the device (0..devices-1) that computes block (i, j) of
// C. Row panels split the resident rows of A among the devices, column
// panels the resident columns of B; streamed products are dealt out in
// turn.
func (p *Plan) deviceOf(i, j, devices int) int {
	switch p.Order {
	case RowPanels:
		return i % devices
	case ColumnPanels:
		return j % devices
	}
	return (i*p.NB + j) % devices
}

// countMod returns the number of x in [lo, hi) with x mod n == d.
func countMod(lo, hi, d, n int) int {
	if hi <= lo {
		return 0
	}
	// x = d + n·t; count t with lo <= d + n·t < hi.
	first := ceilDiv(max(0, lo-d), n)
	if d+n*first >= hi {
		return 0
	}
	return (hi-1-d)/n - first + 1
}

// usesOn returns the number of products on device d (of devices) that use
// the load r: the release count of its copy in d's pool.
func (p *Plan) usesOn(r blockRequest, d, devices int) int {
	switch p.Order {
	case RowPanels:
		if r.Operand == OperandA { // A(i,l) of panel gen: with every j, on device i
			if p.deviceOf(r.Row, 0, devices) == d {
				return p.NB
			}
			return 0
		}
		lo, hi := p.panelRange(r.Gen, p.MB) // B(l,j): with the panel's rows
		return countMod(lo, hi, d, devices)
	case ColumnPanels:
		if r.Operand == OperandB { // B(l,j) of panel gen: with every i, on device j
			if p.deviceOf(0, r.Col, devices) == d {
				return p.MB
			}
			return 0
		}
		lo, hi := p.panelRange(r.Gen, p.NB) // A(i,l): with the panel's columns
		return countMod(lo, hi, d, devices)
	}
	// Streamed: each load serves one product, of C(i,j) where the load of
	// A(i,l) has gen j and the load of B(l,j) has gen i.
	i, j := r.Row, r.Gen
	if r.Operand == OperandB {
		i, j = r.Gen, r.Col
	}
	if p.deviceOf(i, j, devices) == d {
		return 1
	}
	return 0
}

// devBlock is a block of A or B copied to a device.
type devBlock struct {
	row, col   int
	rows, cols int
	buf        *memmgr.Buffer[devMem]
}

// devProduct asks a device's multiply task for A(i,l)·B(l,j).
type devProduct struct{ a, b *devBlock }

// devPartial is one contribution A(i,l)·B(l,j) to C(i,j) in device memory.
type devPartial struct {
	row, col   int
	rows, cols int
	buf        *memmgr.Buffer[devMem]
}

type cachedBlock struct {
	blk  *devBlock
	left int // products on this device still to be handed the block
}

// copyIn is one copy (per device) of the copy-in task: it copies the
// blocks of each product to the device unless they are there already, and
// passes the product on with device blocks.
type copyIn struct {
	plan         *Plan
	mv           mover
	poolA, poolB *memmgr.Pool[devMem]
	uploaded     *atomic.Int64
	dev, devices int
	cache        map[blockKey]*cachedBlock
}

func (c *copyIn) Initialize(ctx context.Context, info task.Info) error {
	c.dev, c.devices = info.Pipeline, max(1, info.Pipelines)
	return phase.Initialize(ctx, c.mv, info)
}

func (c *copyIn) Shutdown(ctx context.Context) error {
	// Blocks still cached (the run failed) go back to their pools.
	var errs []error
	for k, cb := range c.cache {
		for range cb.left {
			errs = append(errs, cb.blk.buf.Release())
		}
		delete(c.cache, k)
	}
	return errors.Join(append(errs, phase.Shutdown(ctx, c.mv))...)
}

// fetch returns the device copy of the host block b, copying it in first
// when this is its first product on this device.
func (c *copyIn) fetch(ctx context.Context, b *block, pool *memmgr.Pool[devMem]) (*devBlock, error) {
	key := blockKey{b.op, b.row, b.col, b.gen}
	cb := c.cache[key]
	if cb == nil {
		uses := c.plan.usesOn(blockRequest{Operand: b.op, Row: b.row, Col: b.col, Gen: b.gen}, c.dev, c.devices)
		if uses < 1 {
			return nil, fmt.Errorf("matmul: internal error: %s(%d,%d) load %d routed to device %d, which has no product for it", b.op, b.row, b.col, b.gen, c.dev)
		}
		buf, err := pool.Get(ctx, uses)
		if err != nil {
			return nil, err
		}
		if err := c.mv.upload(ctx, buf.Data, b.data, b.rows, b.cols, b.stride); err != nil {
			for range uses {
				buf.Release()
			}
			return nil, fmt.Errorf("matmul: copying %s(%d,%d) to device %d: %w", b.op, b.row, b.col, c.dev, err)
		}
		c.uploaded.Add(8 * int64(b.rows) * int64(b.cols))
		cb = &cachedBlock{blk: &devBlock{row: b.row, col: b.col, rows: b.rows, cols: b.cols, buf: buf}, left: uses}
		c.cache[key] = cb
	}
	if cb.left--; cb.left == 0 {
		delete(c.cache, key)
	}
	return cb.blk, nil
}

func (c *copyIn) Execute(ctx context.Context, pr product, out task.Emitter[devProduct]) error {
	a, err := c.fetch(ctx, pr.a, c.poolA)
	if err != nil {
		return err
	}
	b, err := c.fetch(ctx, pr.b, c.poolB)
	if err != nil {
		return errors.Join(err, a.buf.Release())
	}
	// The host blocks are used once per product, as in the CPU graph.
	if err := errors.Join(pr.a.release(), pr.b.release()); err != nil {
		return err
	}
	return out.Emit(devProduct{a: a, b: b})
}

// devMultiply is one copy of a device's multiply task.
type devMultiply struct {
	mult  deviceMultiplier
	poolC *memmgr.Pool[devMem]
	count *atomic.Int64
}

func (t *devMultiply) Initialize(ctx context.Context, info task.Info) error {
	return phase.Initialize(ctx, t.mult, info)
}

func (t *devMultiply) Shutdown(ctx context.Context) error { return phase.Shutdown(ctx, t.mult) }

func (t *devMultiply) Execute(ctx context.Context, pr devProduct, out task.Emitter[devPartial]) error {
	a, b := pr.a, pr.b
	c, err := t.poolC.Get(ctx, 1)
	if err != nil {
		return err
	}
	if err := t.mult.mul(ctx, a.rows, b.cols, a.cols, a.buf.Data, b.buf.Data, c.Data); err != nil {
		return errors.Join(fmt.Errorf("matmul: multiplying A(%d,%d)·B(%d,%d) on the device: %w", a.row, a.col, b.row, b.col, err),
			c.Release(), a.buf.Release(), b.buf.Release())
	}
	t.count.Add(1)
	if err := errors.Join(a.buf.Release(), b.buf.Release()); err != nil {
		return err
	}
	return out.Emit(devPartial{row: a.row, col: b.col, rows: a.rows, cols: b.cols, buf: c})
}

// copyOut is one copy (per device) of the copy-out task: it copies a
// device product into a host buffer of the device's partial-product pool.
type copyOut struct {
	mv         mover
	partials   *memmgr.Pool[[]float64]
	downloaded *atomic.Int64
}

func (c *copyOut) Initialize(ctx context.Context, info task.Info) error {
	return phase.Initialize(ctx, c.mv, info)
}

func (c *copyOut) Shutdown(ctx context.Context) error { return phase.Shutdown(ctx, c.mv) }

func (c *copyOut) Execute(ctx context.Context, dp devPartial, out task.Emitter[*partial]) error {
	buf, err := c.partials.Get(ctx, 1)
	if err != nil {
		return errors.Join(err, dp.buf.Release())
	}
	n := dp.rows * dp.cols
	p := &partial{row: dp.row, col: dp.col, rows: dp.rows, cols: dp.cols, data: buf.Data[:n], stride: dp.cols, count: 1, buf: buf}
	if err := c.mv.download(ctx, p.data, dp.buf.Data, n); err != nil {
		return errors.Join(fmt.Errorf("matmul: copying C(%d,%d) from the device: %w", dp.row, dp.col, err), buf.Release(), dp.buf.Release())
	}
	c.downloaded.Add(8 * int64(n))
	if err := dp.buf.Release(); err != nil {
		return errors.Join(err, buf.Release())
	}
	return out.Emit(p)
}

// offloadCounters count the work of an offload run.
type offloadCounters struct {
	uploaded, downloaded atomic.Int64
}

// buildOffload wires the offload graph:
//
//	distribute -> load A / load B -> pair -> devices pipeline
//	  [per device: copy in -> multiply -> copy out]
//	-> accumulate bookkeeper <-> accumulate, -> store C -> output.
func buildOffload(plan *Plan, cfg Config, off offloader, a, b *operand, c Sink, written, products *atomic.Int64, counters *offloadCounters) *graph.Graph[blockRequest, blockDone] {
	g := graph.New[blockRequest, blockDone]("matmul")
	bs := plan.BlockSize
	sizeA, sizeB, sizeC := min(bs, plan.M)*min(bs, plan.K), min(bs, plan.K)*min(bs, plan.N), min(bs, plan.M)*min(bs, plan.N)
	toDevices := addPairs(g, plan, cfg, a, b)

	// One device's subgraph, cloned per device: its pools allocate on the
	// clone's device.
	dg := graph.New[product, *partial]("device")
	devA := memmgr.New(dg, "A on device", plan.DevicePoolA, off.deviceBuffers(sizeA), memmgr.Dynamic(), memmgr.Reclaim())
	devB := memmgr.New(dg, "B on device", plan.DevicePoolB, off.deviceBuffers(sizeB), memmgr.Dynamic(), memmgr.Reclaim())
	devC := memmgr.New(dg, "C on device", plan.DevicePoolC, off.deviceBuffers(sizeC), memmgr.Dynamic(), memmgr.Reclaim())
	partials := memmgr.New(dg, "C partials", plan.PoolC, blockBuffers(sizeC, cfg.Buffers), memmgr.Dynamic())
	staging := max(sizeA, sizeB, sizeC)
	in := graph.AddTask(dg, "copy in", 1, func() task.Task[product, devProduct] {
		return &copyIn{plan: plan, mv: off.newMover(staging), poolA: devA, poolB: devB, uploaded: &counters.uploaded, cache: map[blockKey]*cachedBlock{}}
	})
	memmgr.Use(devA, in)
	memmgr.Use(devB, in)
	mul := graph.AddTask(dg, "multiply", plan.Threads, func() task.Task[devProduct, devPartial] {
		return &devMultiply{mult: off.newDeviceMultiplier(), poolC: devC, count: products}
	})
	memmgr.Use(devC, mul)
	out := graph.AddTask(dg, "copy out", 1, func() task.Task[devPartial, *partial] {
		return &copyOut{mv: off.newMover(staging), partials: partials, downloaded: &counters.downloaded}
	})
	memmgr.Use(partials, out)
	graph.Connect(dg.Input(), in)
	graph.Connect(in, mul)
	graph.Connect(mul, out)
	graph.Connect(out, dg.Output())

	devs := off.offloadDevices()
	gpus := pipeline.New(g, "devices", dg, devs, func(pr product, clones int) int {
		return plan.deviceOf(pr.a.row, pr.b.col, clones)
	})
	graph.Connect(toDevices, gpus)

	addSums(g, plan, cfg, gpus, c, written)
	return g
}
