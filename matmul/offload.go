package matmul

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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
// to an execution pipeline with one clone per device, where
//
//   - a copy-in task packs each block into a pinned staging buffer and
//     queues its upload into a device pool (each block once per load and
//     device, with the number of the device's products that use it as its
//     release count), on a copy queue of its own;
//   - the multiply task queues, on a compute queue, C(i,j) += A(i,l)·B(l,j)
//     into a device block of C that stays on the device for all the KB
//     products of C(i,j) (the first writes it with beta = 0);
//   - a copy-out task downloads each finished block of C once, through
//     pinned staging, straight into the result when it is a *Dense.
//
// When the *Dense operands are page-locked (PinHost, or
// HTGS_MATMUL_REGISTER=1 for one run: see offload_tuning.go), blocks skip
// the staging buffers: 2-D copies move them straight between the matrices
// and the devices, and the host copies no data at all.
//
// Queues are asynchronous (CUDA streams) and ordered by fences (CUDA
// events) that every buffer carries: the compute queue waits for a block's
// upload, and the copy queue for the last product reading a buffer before
// it overwrites it. So uploads for the next products run while the current
// ones compute, and no task waits for the device except for a staging
// buffer to refill or a block of C to download.
//
// The interface is unexported: the cuda kernel implements it (-tags cuda),
// and the tests implement it with host memory and goroutines posing as
// devices and streams, so the graph, its routing, its release counts and
// its fences are tested on every machine.
type offloader interface {
	Kernel
	// offloadDevices lists the devices, one pipeline clone each.
	offloadDevices() []device.Device
	// offloadMemory is the bytes of memory per device that the pools may
	// hold when Config.DeviceMemory is 0 (0: no limit).
	offloadMemory() int64
	// deviceBuffers returns the allocator of device buffers of n float64s
	// (on the device the allocator is given); with keep, freed buffers are
	// kept by the kernel for later products.
	deviceBuffers(n int, keep bool) memmgr.Allocator[devMem]
	// stagingBuffers returns the allocator of pinned host buffers of n
	// float64s, for copies to and from the device the allocator is given.
	stagingBuffers(n int) memmgr.Allocator[stagingMem]
	// newQueue returns the queue of one task copy. It may implement
	// task.Initializer and task.Shutdowner: Initialize runs on the
	// goroutine of every later call and receives the clone's device;
	// Shutdown waits for the work queued. Only a compute queue runs gemm.
	newQueue(compute bool) devQueue
	// registerHost page-locks data for copies with every device (see
	// PinHost); release undoes it.
	registerHost(data []float64) (release func() error, err error)
	// hostPins is the record of the memory PinHost registered.
	hostPins() *hostPins
}

// A fenced buffer carries a fence: the point, in some queue's work, after
// which the buffer is free (or filled). devQueue.signal moves the fence,
// await and wait wait for it.
type fenced interface {
	// Len is the number of float64s the buffer holds.
	Len() int
}

// devMem is a buffer in a device's memory holding float64s.
type devMem interface{ fenced }

// stagingMem is a pinned host buffer for copies to and from a device.
type stagingMem interface {
	fenced
	// floats returns the buffer's memory.
	floats() []float64
}

// A devQueue is an in-order queue of device work (a CUDA stream): every
// call but wait only queues the work and returns.
type devQueue interface {
	// upload queues the copy of the n float64s of src from element from
	// on into dst from element at on.
	upload(dst devMem, at int, src stagingMem, from, n int) error
	// download queues the copy of the n float64s of src from element from
	// on into dst from element at on.
	download(dst stagingMem, at int, src devMem, from, n int) error
	// uploadFrom queues the copy of the rows x cols matrix src (stride
	// lds), which lies within one registration of host memory, into dst
	// from element at on (stride ldd).
	uploadFrom(dst devMem, at, ldd int, src []float64, lds, rows, cols int) error
	// downloadTo queues the copy of the rows x cols matrix in src from
	// element at on (stride lds) into dst (stride ldd), which lies within
	// one registration of host memory.
	downloadTo(dst []float64, ldd int, src devMem, at, lds, rows, cols int) error
	// gemm queues c = a·b + beta·c for an m x k block a and a k x n block
	// b, all dense row-major.
	gemm(m, n, k int, a, b, c devMem, beta float64) error
	// signal moves b's fence to the end of the work queued so far.
	signal(b fenced) error
	// await makes the work queued from now on wait for b's fence as last
	// signalled.
	await(b fenced) error
	// wait blocks until b's fence as last signalled has passed.
	wait(b fenced) error
	// newFence returns a buffer-less fence for signal and wait, freed
	// with the queue.
	newFence() (fenced, error)
}

// offloadOf returns cfg's kernel as an offloader, if it is one.
func offloadOf(cfg Config) (offloader, bool) {
	o, ok := cfg.kernel().(offloader)
	return o, ok
}

// deviceOf returns the device (0..devices-1) that computes block (i, j) of
// C. Row panels split the resident rows of A among the devices, column
// panels the resident columns of B; streamed products are dealt out in
// turn. All the products of one block of C run on one device, which holds
// the block until the last.
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

// devResult is a finished block C(i,j) in device memory.
type devResult struct {
	row, col   int
	rows, cols int
	buf        *memmgr.Buffer[devMem]
}

type cachedBlock struct {
	blk  *devBlock
	left int // products on this device still to be handed the block
}

// parallelCopy copies rows x cols elements from src (stride lds) to dst
// (stride ldd), in bands of rows on up to workers goroutines for large
// blocks: one core copies about 10 GB/s, the bus takes 50. With stream,
// the stores are non-temporal (copyStream).
func parallelCopy(dst []float64, ldd int, src []float64, lds, rows, cols, workers int, stream bool) {
	const minBand = 1 << 17 // elements: below 1 MiB a goroutine costs more than it saves
	parallelCopyBands(dst, ldd, src, lds, rows, cols, workers, minBand, stream)
}

// chunkMinBand is the fewest elements a goroutine of a staging copy takes
// in chunk mode (256 KiB): a chunk is small, and all the workers share it.
const chunkMinBand = 1 << 15

// parallelCopyBands is parallelCopy with at least minBand elements per
// goroutine.
func parallelCopyBands(dst []float64, ldd int, src []float64, lds, rows, cols, workers, minBand int, stream bool) {
	workers = max(1, min(workers, rows*cols/max(1, minBand), rows))
	cp := func(d, s []float64) { copy(d, s) }
	if stream {
		cp = copyStream
	}
	band := func(r0, r1 int) {
		if ldd == cols && lds == cols {
			cp(dst[r0*cols:r1*cols], src[r0*cols:r1*cols])
			return
		}
		for r := r0; r < r1; r++ {
			cp(dst[r*ldd:r*ldd+cols], src[r*lds:r*lds+cols])
		}
	}
	if workers == 1 {
		band(0, rows)
		return
	}
	var wg sync.WaitGroup
	per := ceilDiv(rows, workers)
	for r0 := 0; r0 < rows; r0 += per {
		wg.Add(1)
		go func(r0, r1 int) {
			defer wg.Done()
			band(r0, r1)
		}(r0, min(rows, r0+per))
	}
	wg.Wait()
}

// offloadShared is what the tasks of every device clone share: the
// counters of the run and the copy parallelism.
type offloadShared struct {
	plan     *Plan
	counters *offloadCounters
	workers  int // goroutines per staging copy: the cores, shared by the devices, at most maxCopyWorkers
	// slabs: a staged block is packed and uploaded (downloaded and
	// unpacked) in this many bands of rows, each band's copy on the bus
	// while the next is packed (the previous unpacked).
	slabs, slabMin int
	// stream and unpackStream: the packing and the unpacking copies
	// store non-temporally (copyStream).
	stream, unpackStream bool
	// ring > 0 (chunk mode): blocks are staged through ring small
	// buffers per copy task instead of one buffer of a block (see
	// uploadChunks).
	ring int
	// directA, directB and directOut: the blocks of A, of B and of C are
	// copied straight between registered host memory and the devices.
	directA, directB, directOut bool
	// pins registers the other *Dense operands' memory during the run
	// (nil: none): a block that lies wholly in registered memory is
	// copied straight too.
	pins *hostPinner
}

// copyIn is the copy-in task of a device (one copy, so that device
// buffers are taken from the pools in schedule order): it copies the
// blocks of each product to the device unless they are there already, and
// passes the product on with device blocks.
type copyIn struct {
	*offloadShared
	q            devQueue
	poolA, poolB *memmgr.Pool[devMem]
	staging      *memmgr.Pool[stagingMem]
	dev, devices int
	cache        map[blockKey]*cachedBlock
}

func (c *copyIn) Initialize(ctx context.Context, info task.Info) error {
	c.dev, c.devices = info.Clone, max(1, info.Clones)
	return phase.Initialize(ctx, c.q, info)
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
	return errors.Join(append(errs, phase.Shutdown(ctx, c.q))...)
}

// upload queues the copy of the host block b into the device buffer dst
// through a staging buffer: it waits for the staging buffer's last upload,
// packs b into it, and queues the upload after the last product that read
// dst. dst's fence then marks the upload.
func (c *copyIn) upload(ctx context.Context, dst devMem, b *block) error {
	ps, direct := c.pins.pieces(b.data, b.rows, b.cols, b.stride)
	if (b.op == OperandA && c.directA) || (b.op == OperandB && c.directB) {
		ps, direct = []piece{{rows: b.rows, cols: b.cols}}, true
	}
	if direct {
		if b.rows*b.cols > dst.Len() {
			return fmt.Errorf("%dx%d block larger than the device buffer (%d)", b.rows, b.cols, dst.Len())
		}
		c.counters.direct.Add(8 * int64(b.rows) * int64(b.cols))
		c.counters.directCopies.Add(int64(len(ps)))
		err := c.q.await(dst)
		for _, pc := range ps {
			if err != nil {
				break
			}
			err = c.q.uploadFrom(dst, pc.r*b.cols+pc.c, b.cols, b.data[pc.r*b.stride+pc.c:], b.stride, pc.rows, pc.cols)
		}
		return errors.Join(err, c.q.signal(dst))
	}
	if c.ring > 0 {
		return c.uploadChunks(ctx, dst, b)
	}
	st, err := c.staging.Get(ctx)
	if err != nil {
		return err
	}
	n := b.rows * b.cols
	if n > st.Data.Len() || n > dst.Len() {
		return errors.Join(fmt.Errorf("%dx%d block larger than the staging (%d) or device buffer (%d)", b.rows, b.cols, st.Data.Len(), dst.Len()), st.Release())
	}
	err = errors.Join(c.q.wait(st.Data), c.q.await(dst))
	for r0, per := 0, slabRows(b.rows, b.cols, c.slabs, c.slabMin); r0 < b.rows && err == nil; r0 += per {
		r1 := min(b.rows, r0+per)
		parallelCopy(st.Data.floats()[r0*b.cols:], b.cols, b.data[r0*b.stride:], b.stride, r1-r0, b.cols, c.workers, c.stream)
		err = c.q.upload(dst, r0*b.cols, st.Data, r0*b.cols, (r1-r0)*b.cols)
	}
	if err == nil {
		err = errors.Join(c.q.signal(dst), c.q.signal(st.Data))
	}
	return errors.Join(err, st.Release())
}

// uploadChunks is upload in chunk mode: the block goes through the ring
// of small staging buffers of this copy task, a band of rows filling one
// buffer at a time. Each band's upload is queued as soon as it is packed,
// and a buffer is packed again only when its last upload has passed, so
// ring-1 uploads are on the bus while the next band is packed. A band is
// small enough (a few MiB) to be still in the host's cache when the bus
// reads it, where a block-sized buffer goes out to memory and is read
// back: the staging then costs the host's memory one read of the block
// instead of a read, a write and the bus's read.
func (c *copyIn) uploadChunks(ctx context.Context, dst devMem, b *block) error {
	if b.rows*b.cols > dst.Len() {
		return fmt.Errorf("%dx%d block larger than the device buffer (%d)", b.rows, b.cols, dst.Len())
	}
	ring, err := getRing(ctx, c.staging, c.ring, b.cols)
	if err != nil {
		return err
	}
	per := ring[0].Data.Len() / b.cols
	err = c.q.await(dst)
	for i, r0 := 0, 0; r0 < b.rows && err == nil; i, r0 = i+1, r0+per {
		st, r1 := ring[i%len(ring)].Data, min(b.rows, r0+per)
		if err = c.q.wait(st); err != nil {
			break
		}
		parallelCopyBands(st.floats(), b.cols, b.data[r0*b.stride:], b.stride, r1-r0, b.cols, c.workers, chunkMinBand, c.stream)
		err = errors.Join(c.q.upload(dst, r0*b.cols, st, 0, (r1-r0)*b.cols), c.q.signal(st))
	}
	if err == nil {
		err = c.q.signal(dst)
	}
	return errors.Join(err, releaseRing(ring))
}

// getRing takes n staging buffers from pool, each of at least cols
// elements (a row of a block).
func getRing(ctx context.Context, pool *memmgr.Pool[stagingMem], n, cols int) ([]*memmgr.Buffer[stagingMem], error) {
	ring := make([]*memmgr.Buffer[stagingMem], 0, n)
	for range n {
		st, err := pool.Get(ctx)
		if err != nil {
			return nil, errors.Join(err, releaseRing(ring))
		}
		ring = append(ring, st)
		if st.Data.Len() < cols {
			return nil, errors.Join(fmt.Errorf("staging chunk of %d elements smaller than a row of %d", st.Data.Len(), cols), releaseRing(ring))
		}
	}
	return ring, nil
}

func releaseRing(ring []*memmgr.Buffer[stagingMem]) error {
	var errs []error
	for _, st := range ring {
		errs = append(errs, st.Release())
	}
	return errors.Join(errs...)
}

// slabRows returns the rows of each band when a rows x cols block is
// copied in slabs bands of at least minSlab elements.
func slabRows(rows, cols, slabs, minSlab int) int {
	slabs = max(1, min(slabs, rows*cols/max(1, minSlab)))
	return max(1, ceilDiv(rows, slabs))
}

// fetch returns the device copy of the host block b, queueing its upload
// first when this is its first product on this device.
func (c *copyIn) fetch(ctx context.Context, b *block, pool *memmgr.Pool[devMem]) (*devBlock, error) {
	key := blockKey{b.op, b.row, b.col, b.gen}
	cb := c.cache[key]
	if cb == nil {
		uses := c.plan.usesOn(blockRequest{Operand: b.op, Row: b.row, Col: b.col, Gen: b.gen}, c.dev, c.devices)
		if uses < 1 {
			return nil, fmt.Errorf("matmul: internal error: %s(%d,%d) load %d routed to device %d, which has no product for it", b.op, b.row, b.col, b.gen, c.dev)
		}
		buf, err := pool.GetShared(ctx, uses)
		if err != nil {
			return nil, err
		}
		if err := c.upload(ctx, buf.Data, b); err != nil {
			for range uses {
				buf.Release()
			}
			return nil, fmt.Errorf("matmul: copy in: %s(%d,%d) to device %d: %w", b.op, b.row, b.col, c.dev, err)
		}
		c.counters.uploaded.Add(8 * int64(b.rows) * int64(b.cols))
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
	// The host blocks are used once per product, as in the CPU graph: the
	// staging copy is done with them.
	if err := errors.Join(pr.a.release(), pr.b.release()); err != nil {
		return err
	}
	return out.Emit(devProduct{a: a, b: b})
}

// openC is a block of C on the device with some of its products queued.
type openC struct {
	buf  *memmgr.Buffer[devMem]
	done int // products queued
}

// inFlight is the number of products the multiply task queues ahead of
// those known to be finished (see busyMeter).
const inFlight = 8

// devMultiply is the multiply task of a device (one copy: the products of
// a block of C are queued in order on one compute queue, so they can add
// into one device block). It accumulates C on the device and emits each
// block of C once, after its last product is queued.
type devMultiply struct {
	*offloadShared
	q     devQueue
	poolC *memmgr.Pool[devMem]
	open  map[[2]int]*openC
	meter *busyMeter
}

func (t *devMultiply) Initialize(ctx context.Context, info task.Info) error {
	if err := phase.Initialize(ctx, t.q, info); err != nil {
		return err
	}
	m, err := newBusyMeter(t.q, &t.counters.busy[info.Clone])
	if err != nil {
		return fmt.Errorf("matmul: multiply on device %d: %w", info.Clone, err)
	}
	t.meter = m
	return nil
}

func (t *devMultiply) Shutdown(ctx context.Context) error {
	var errs []error
	if t.meter != nil {
		errs = append(errs, t.meter.stop())
	}
	for k, oc := range t.open { // the run failed
		errs = append(errs, oc.buf.Release())
		delete(t.open, k)
	}
	return errors.Join(append(errs, phase.Shutdown(ctx, t.q))...)
}

func (t *devMultiply) Execute(ctx context.Context, pr devProduct, out task.Emitter[devResult]) error {
	a, b := pr.a, pr.b
	key := [2]int{a.row, b.col}
	oc := t.open[key]
	if oc == nil {
		buf, err := t.poolC.Get(ctx)
		if err != nil {
			return errors.Join(err, a.buf.Release(), b.buf.Release())
		}
		oc = &openC{buf: buf}
		t.open[key] = oc
	}
	beta := 1.0
	if oc.done == 0 {
		beta = 0 // the block's first product overwrites what the buffer held
	}
	err := t.meter.begin(ctx)
	if err == nil {
		err = errors.Join(t.q.await(a.buf.Data), t.q.await(b.buf.Data),
			t.q.gemm(a.rows, b.cols, a.cols, a.buf.Data, b.buf.Data, oc.buf.Data, beta),
			t.q.signal(a.buf.Data), t.q.signal(b.buf.Data))
	}
	if err == nil {
		err = t.meter.end()
	}
	if err != nil {
		return errors.Join(fmt.Errorf("matmul: multiply: C(%d,%d) += A(%d,%d)·B(%d,%d) on the device: %w", a.row, b.col, a.row, a.col, b.row, b.col, err),
			a.buf.Release(), b.buf.Release())
	}
	t.counters.products.Add(1)
	// The buffers go back to their pools now: whoever gets them next waits
	// for their fences, which pass with this product.
	if err := errors.Join(a.buf.Release(), b.buf.Release()); err != nil {
		return err
	}
	if oc.done++; oc.done < t.plan.KB {
		return nil
	}
	delete(t.open, key)
	if err := t.q.signal(oc.buf.Data); err != nil {
		return errors.Join(fmt.Errorf("matmul: multiply: C(%d,%d): %w", a.row, b.col, err), oc.buf.Release())
	}
	return out.Emit(devResult{row: a.row, col: b.col, rows: a.rows, cols: b.cols, buf: oc.buf})
}

// copyOut is the copy-out task of a device: it downloads each finished
// block of C once, through a staging buffer, into the *Dense result in
// place or into a buffer of the device's partial-product pool for the
// sink.
type copyOut struct {
	*offloadShared
	q        devQueue
	staging  *memmgr.Pool[stagingMem]
	partials *memmgr.Pool[[]float64]
	home     *Dense
	kb, dev  int
}

func (c *copyOut) Initialize(ctx context.Context, info task.Info) error {
	c.dev = info.Clone
	return phase.Initialize(ctx, c.q, info)
}

func (c *copyOut) Shutdown(ctx context.Context) error { return phase.Shutdown(ctx, c.q) }

func (c *copyOut) Execute(ctx context.Context, dr devResult, out task.Emitter[*partial]) error {
	p := &partial{row: dr.row, col: dr.col, rows: dr.rows, cols: dr.cols, count: c.kb}
	if c.home != nil {
		bs := c.plan.BlockSize
		p.data, p.stride = c.home.view(dr.row*bs, dr.col*bs, dr.rows, dr.cols), c.home.Stride
	} else {
		buf, err := c.partials.Get(ctx)
		if err != nil {
			return errors.Join(err, dr.buf.Release())
		}
		p.buf, p.data, p.stride = buf, buf.Data[:dr.rows*dr.cols], dr.cols
	}
	if err := c.download(ctx, p, dr); err != nil {
		return errors.Join(fmt.Errorf("matmul: copy out: C(%d,%d) from device %d: %w", dr.row, dr.col, c.dev, err), p.release(), dr.buf.Release())
	}
	c.counters.downloaded.Add(8 * int64(dr.rows) * int64(dr.cols))
	if err := dr.buf.Release(); err != nil {
		return errors.Join(err, p.release())
	}
	return out.Emit(p)
}

// download copies the device block of dr into p through a staging buffer.
func (c *copyOut) download(ctx context.Context, p *partial, dr devResult) error {
	var ps []piece
	direct := false
	if p.buf == nil {
		ps, direct = c.pins.pieces(p.data, dr.rows, dr.cols, p.stride)
		if c.directOut {
			ps, direct = []piece{{rows: dr.rows, cols: dr.cols}}, true
		}
	}
	if direct {
		c.counters.direct.Add(8 * int64(dr.rows) * int64(dr.cols))
		c.counters.directCopies.Add(int64(len(ps)))
		err := c.q.await(dr.buf.Data)
		for _, pc := range ps {
			if err != nil {
				break
			}
			err = c.q.downloadTo(p.data[pc.r*p.stride+pc.c:], p.stride, dr.buf.Data, pc.r*dr.cols+pc.c, dr.cols, pc.rows, pc.cols)
		}
		err = errors.Join(err, c.q.signal(dr.buf.Data))
		if err == nil {
			err = c.q.wait(dr.buf.Data)
		}
		return err
	}
	if c.ring > 0 {
		return c.downloadChunks(ctx, p, dr)
	}
	st, err := c.staging.Get(ctx)
	if err != nil {
		return err
	}
	n := dr.rows * dr.cols
	if n > st.Data.Len() {
		return errors.Join(fmt.Errorf("%d elements larger than the staging buffer (%d)", n, st.Data.Len()), st.Release())
	}
	// Band by band: the download of a band is queued before the previous
	// band is unpacked, so the bus and the unpacking overlap. One fence
	// serves: it is signalled after each band's download and waited for
	// once the band before is unpacked, before the next band is queued.
	err = c.q.await(dr.buf.Data)
	per := slabRows(dr.rows, dr.cols, c.slabs, c.slabMin)
	prev := -1 // first row of the band downloaded and not yet unpacked
	for r0 := 0; r0 < dr.rows && err == nil; r0 += per {
		r1 := min(dr.rows, r0+per)
		err = errors.Join(c.q.download(st.Data, r0*dr.cols, dr.buf.Data, r0*dr.cols, (r1-r0)*dr.cols), c.q.signal(st.Data))
		if err == nil && prev >= 0 {
			// The band at prev was downloaded before this one (the queue is
			// in order); unpack it while this one moves.
			parallelCopy(p.data[prev*p.stride:], p.stride, st.Data.floats()[prev*dr.cols:], dr.cols, r0-prev, dr.cols, c.workers, c.unpackStream)
		}
		if err == nil {
			err = c.q.wait(st.Data)
		}
		prev = r0
	}
	if err == nil && prev >= 0 {
		parallelCopy(p.data[prev*p.stride:], p.stride, st.Data.floats()[prev*dr.cols:], dr.cols, dr.rows-prev, dr.cols, c.workers, c.unpackStream)
	}
	return errors.Join(err, st.Release())
}

// downloadChunks is download in chunk mode (see copyIn.uploadChunks): the
// block comes down band by band into the ring of small staging buffers,
// and each band is unpacked while the ones after it are on the bus.
func (c *copyOut) downloadChunks(ctx context.Context, p *partial, dr devResult) error {
	ring, err := getRing(ctx, c.staging, c.ring, dr.cols)
	if err != nil {
		return err
	}
	type band struct {
		st     stagingMem
		r0, r1 int
	}
	var queued []band // downloads queued and not yet unpacked, oldest first
	unpack := func() error {
		bd := queued[0]
		queued = queued[1:]
		if err := c.q.wait(bd.st); err != nil {
			return err
		}
		parallelCopyBands(p.data[bd.r0*p.stride:], p.stride, bd.st.floats(), dr.cols, bd.r1-bd.r0, dr.cols, c.workers, chunkMinBand, c.unpackStream)
		return nil
	}
	per := ring[0].Data.Len() / dr.cols
	err = c.q.await(dr.buf.Data)
	for i, r0 := 0, 0; r0 < dr.rows && err == nil; i, r0 = i+1, r0+per {
		st, r1 := ring[i%len(ring)].Data, min(dr.rows, r0+per)
		// st's last band was unpacked (at most ring-1 stay queued).
		err = errors.Join(c.q.download(st, 0, dr.buf.Data, r0*dr.cols, (r1-r0)*dr.cols), c.q.signal(st))
		if queued = append(queued, band{st, r0, r1}); err == nil && len(queued) == len(ring) {
			err = unpack()
		}
	}
	for len(queued) > 0 && err == nil {
		err = unpack()
	}
	return errors.Join(err, releaseRing(ring))
}

// busyMeter measures the time a device's compute queue works: a goroutine
// waits, in order, for a fence signalled after each product, and counts
// from the later of the product's queueing and the previous product's end
// to its end. A product waiting in the queue for its upload counts as busy,
// so the figure is an upper bound on the time the device computes. The
// meter also keeps the queue at most inFlight products ahead.
type busyMeter struct {
	q      devQueue
	fences [inFlight]fenced
	free   chan int
	work   chan tick
	done   chan error
	busy   *atomic.Int64
	slot   int
	issued time.Time
}

type tick struct {
	slot   int
	issued time.Time
}

func newBusyMeter(q devQueue, busy *atomic.Int64) (*busyMeter, error) {
	m := &busyMeter{q: q, free: make(chan int, inFlight), work: make(chan tick, inFlight), done: make(chan error, 1), busy: busy}
	for i := range m.fences {
		f, err := q.newFence()
		if err != nil {
			return nil, err
		}
		m.fences[i] = f
		m.free <- i
	}
	go m.watch()
	return m, nil
}

func (m *busyMeter) watch() {
	var last time.Time
	var first error
	for t := range m.work {
		err := m.q.wait(m.fences[t.slot])
		if err != nil && first == nil {
			first = err
		}
		now := time.Now()
		start := t.issued
		if last.After(start) {
			start = last
		}
		m.busy.Add(int64(now.Sub(start)))
		last = now
		m.free <- t.slot
	}
	m.done <- first
}

// begin waits for a free fence (the product inFlight before is done).
func (m *busyMeter) begin(ctx context.Context) error {
	select {
	case m.slot = <-m.free:
		m.issued = time.Now()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// end signals the fence after the product just queued.
func (m *busyMeter) end() error {
	if err := m.q.signal(m.fences[m.slot]); err != nil {
		m.free <- m.slot
		return err
	}
	m.work <- tick{m.slot, m.issued}
	return nil
}

// stop waits for the products queued and ends the goroutine.
func (m *busyMeter) stop() error {
	close(m.work)
	return <-m.done
}

// offloadCounters count the work of an offload run.
type offloadCounters struct {
	uploaded, downloaded, products atomic.Int64
	direct                         atomic.Int64   // bytes copied straight from or to registered host memory
	directCopies                   atomic.Int64   // the copies that moved them (a block in several registrations takes several)
	busy                           []atomic.Int64 // nanoseconds per device
}

// maxCopyWorkers bounds the goroutines of one staging copy. One core
// copies about 10 GB/s from ordinary memory; packing A and B for a GPU
// that multiplies at 50 TFLOP/s needs several times that, so the copies
// take the cores a GPU machine has (16 on the H100 and H200 machines
// measured; eight left the copies the bound, at 41% GPU busy).
const maxCopyWorkers = 16

// Copies per device of the copy-out task: one downloads while the other
// unpacks.
const copyOutThreads = 2

// buildOffload wires the offload graph:
//
//	distribute -> load A / load B -> pair -> devices pipeline
//	  [per device: copy in -> multiply (C += A·B on the device) -> copy out]
//	-> accumulate bookkeeper -> store C -> output.
//
// The accumulate bookkeeper only passes the finished blocks on: they come
// from the devices complete.
func buildOffload(plan *Plan, cfg Config, off offloader, tune offloadTuning, direct [3]bool, pins *hostPinner, trace *offloadTrace, a, b *operand, c Sink, written *atomic.Int64, counters *offloadCounters) *graph.Graph[blockRequest, blockDone] {
	g := graph.New[blockRequest, blockDone]("matmul")
	bs := plan.BlockSize
	sizeA, sizeB, sizeC := min(bs, plan.M)*min(bs, plan.K), min(bs, plan.K)*min(bs, plan.N), min(bs, plan.M)*min(bs, plan.N)
	toDevices := addPairs(g, plan, cfg, a, b)
	devs := off.offloadDevices()
	counters.busy = make([]atomic.Int64, len(devs))
	shared := &offloadShared{plan: plan, counters: counters, workers: tune.packWorkers, slabs: tune.slabs, slabMin: tune.slabMin, stream: tune.stream, unpackStream: tune.unpackStream,
		directA: direct[0], directB: direct[1], directOut: direct[2], pins: pins}
	stageIn, stageOut, nIn, nOut := tune.staging(plan, sizeA, sizeB, sizeC)
	if tune.chunk > 0 {
		shared.ring = nIn
	}
	home, _ := c.(*Dense)

	// One device's subgraph, cloned per device: its pools allocate on the
	// clone's device.
	dg := graph.New[product, *partial]("device")
	devA := memmgr.New(dg, "A on device", plan.DevicePoolA, off.deviceBuffers(sizeA, tune.devCache), memmgr.Dynamic(), memmgr.Reclaim())
	devB := memmgr.New(dg, "B on device", plan.DevicePoolB, off.deviceBuffers(sizeB, tune.devCache), memmgr.Dynamic(), memmgr.Reclaim())
	devC := memmgr.New(dg, "C on device", plan.DevicePoolC, off.deviceBuffers(sizeC, tune.devCache), memmgr.Dynamic(), memmgr.Reclaim())
	stIn := memmgr.New(dg, "staging in", nIn, off.stagingBuffers(stageIn), memmgr.Dynamic(), memmgr.Reclaim())
	stOut := memmgr.New(dg, "staging out", nOut, off.stagingBuffers(stageOut), memmgr.Dynamic(), memmgr.Reclaim())
	in := graph.AddTask(dg, "copy in", 1, func() task.Task[product, devProduct] {
		return &copyIn{offloadShared: shared, q: trace.wrap(off.newQueue(false), "copy in"), poolA: devA, poolB: devB, staging: stIn, cache: map[blockKey]*cachedBlock{}}
	})
	memmgr.Use(devA, in)
	memmgr.Use(devB, in)
	memmgr.Use(stIn, in)
	mul := graph.AddTask(dg, "multiply", 1, func() task.Task[devProduct, devResult] {
		return &devMultiply{offloadShared: shared, q: trace.wrap(off.newQueue(true), "multiply"), poolC: devC, open: map[[2]int]*openC{}}
	})
	memmgr.Use(devC, mul)
	var partials *memmgr.Pool[[]float64]
	if home == nil {
		partials = memmgr.New(dg, "C blocks", plan.PoolC, blockBuffers(sizeC, cfg.Buffers), memmgr.Dynamic())
	}
	out := graph.AddTask(dg, "copy out", tune.copyOut, func() task.Task[devResult, *partial] {
		return &copyOut{offloadShared: shared, q: trace.wrap(off.newQueue(false), "copy out"), staging: stOut, partials: partials, home: home, kb: plan.KB}
	})
	memmgr.Use(stOut, out)
	if partials != nil {
		memmgr.Use(partials, out)
	}
	graph.Connect(dg.Input(), in)
	graph.Connect(in, mul)
	graph.Connect(mul, out)
	graph.Connect(out, dg.Output())

	gpus := pipeline.New(g, "devices", dg, devs, func(pr product, clones int) int {
		return plan.deviceOf(pr.a.row, pr.b.col, clones)
	})
	graph.Connect(toDevices, gpus)

	addSums(g, plan, cfg, gpus, c, written)
	return g
}
