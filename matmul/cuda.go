//go:build cuda

package matmul

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
)

// cudaKernel multiplies blocks with cuBLAS on every GPU of the machine. It
// is an offloader: Multiply runs it in the offload graph (offload.go), one
// execution-pipeline clone per GPU, with blocks kept in device memory pools
// for as many products as use them. Its Multiplier (cudaMultiplier, which
// copies the blocks of every product in and out) serves the one-call
// baseline Gemm.
type cudaKernel struct {
	devices []*cuda.Device
	pinned  *pinnedCache
	handles *blasCache
	blocks  *deviceCache
	pins    hostPins
}

// deviceCache keeps the device blocks of finished products for later ones
// (cuMemAlloc and cuMemFree of hundreds of MiB take milliseconds each, and
// cuMemFree synchronizes the device): at most deviceKeepFraction of each
// GPU's memory. An allocation that finds the GPU full empties the GPU's
// cache and tries again.
type deviceCache struct {
	mu    sync.Mutex
	free  map[pinnedKey][]*cudaBlock
	bytes map[int]int64 // kept per GPU
}

// deviceKeepFraction bounds the device memory kept between products.
const deviceKeepFraction = 0.6

func (c *deviceCache) get(d *cuda.Device, bytes int64) *cudaBlock {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := pop(c.free, pinnedKey{d.ID(), bytes})
	if ok {
		c.bytes[d.ID()] -= bytes
	}
	return b
}

// pop takes the last value kept under k, if any.
func pop[K comparable, V any](free map[K][]V, k K) (v V, ok bool) {
	l := free[k]
	if len(l) == 0 {
		return v, false
	}
	v = l[len(l)-1]
	free[k] = l[:len(l)-1]
	return v, true
}

// put keeps b (whose work has completed), or reports false when the GPU's
// share is full.
func (c *deviceCache) put(d *cuda.Device, b *cudaBlock) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := b.mem.Size()
	if float64(c.bytes[d.ID()]+n) > deviceKeepFraction*float64(d.Memory()) {
		return false
	}
	k := pinnedKey{d.ID(), n}
	c.free[k] = append(c.free[k], b)
	c.bytes[d.ID()] += n
	return true
}

// kept returns the bytes kept on d.
func (c *deviceCache) kept(d *cuda.Device) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes[d.ID()]
}

// purge frees every block kept on d.
func (c *deviceCache) purge(d *cuda.Device) error {
	c.mu.Lock()
	var all []*cudaBlock
	for k, l := range c.free {
		if k.dev == d.ID() {
			all = append(all, l...)
			delete(c.free, k)
		}
	}
	c.bytes[d.ID()] = 0
	c.mu.Unlock()
	var errs []error
	for _, b := range all {
		errs = append(errs, b.mem.Free(), b.ev.Close())
	}
	return errors.Join(errs...)
}

// blasCache keeps the cuBLAS handles of finished products' compute queues
// for later ones, one list per GPU: making a handle takes milliseconds,
// which a product of n = 8192 on an H100 cannot spare.
type blasCache struct {
	mu   sync.Mutex
	free map[int][]*cuda.BLAS
}

// get returns a kept handle of d, or makes one.
func (c *blasCache) get(d *cuda.Device) (*cuda.BLAS, error) {
	c.mu.Lock()
	h, ok := pop(c.free, d.ID())
	c.mu.Unlock()
	if ok {
		return h, nil
	}
	return d.NewBLAS()
}

// put keeps h, whose work has completed, for a later product on d.
func (c *blasCache) put(d *cuda.Device, h *cuda.BLAS) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.free[d.ID()] = append(c.free[d.ID()], h)
}

// pinnedCache keeps the pinned staging buffers of finished products for
// later ones: pinning hundreds of MiB takes longer than a product of
// n = 8192 on an H100. It holds at most pinnedKeep buffers of each size on
// each GPU, for the life of the kernel.
type pinnedCache struct {
	mu   sync.Mutex
	free map[pinnedKey][]*cudaStaging
}

type pinnedKey struct {
	dev   int
	bytes int64
}

const pinnedKeep = 8

func (c *pinnedCache) get(d *cuda.Device, bytes int64) *cudaStaging {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, _ := pop(c.free, pinnedKey{d.ID(), bytes})
	return b
}

// put keeps b, or reports false when enough of its kind are kept.
func (c *pinnedCache) put(d *cuda.Device, b *cudaStaging) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := pinnedKey{d.ID(), b.mem.Size()}
	if len(c.free[k]) >= pinnedKeep {
		return false
	}
	c.free[k] = append(c.free[k], b)
	return true
}

func newCUDA() (Kernel, error) {
	ds, err := cuda.Devices()
	if err == nil && len(ds) == 0 {
		err = cuda.ErrNoDevice
	}
	if err != nil {
		return nil, fmt.Errorf("matmul: kernel \"cuda\": %w: %w", ErrUnavailable, err)
	}
	return &cudaKernel{devices: ds, pinned: &pinnedCache{free: map[pinnedKey][]*cudaStaging{}},
		handles: &blasCache{free: map[int][]*cuda.BLAS{}},
		blocks:  &deviceCache{free: map[pinnedKey][]*cudaBlock{}, bytes: map[int]int64{}}}, nil
}

// Name returns "cuda".
func (k *cudaKernel) Name() string { return "cuda" }

// NewMultiplier returns the multiplier of one task copy.
func (k *cudaKernel) NewMultiplier() Multiplier { return &cudaMultiplier{k: k} }

// Gemm is the one-call baseline: the whole product in one cuBLAS call on
// the first device. threads is ignored.
func (k *cudaKernel) Gemm(_ int, a, b, c *Dense) error {
	if a.C != b.R || c.R != a.R || c.C != b.C {
		return fmt.Errorf("%w: %dx%d times %dx%d into %dx%d", ErrShape, a.R, a.C, b.R, b.C, c.R, c.C)
	}
	m := &cudaMultiplier{k: k}
	if err := m.Initialize(context.Background(), task.Info{}); err != nil {
		return err
	}
	defer func() { _ = m.Shutdown(context.Background()) }()
	return m.Mul(context.Background(), a.R, b.C, a.C, a.Data, a.Stride, b.Data, b.Stride, 0, c.Data, c.Stride)
}

type cudaMultiplier struct {
	k       *cudaKernel
	dev     *cuda.Device
	unbind  func()
	blas    *cuda.BLAS
	stream  *cuda.Stream
	a, b, c cuda.DeviceMem
}

// Initialize binds the copy's goroutine to its GPU and makes its handle.
func (m *cudaMultiplier) Initialize(ctx context.Context, info task.Info) error {
	m.dev = m.k.devices[info.Copy%len(m.k.devices)]
	if d, ok := info.Device.(*cuda.Device); ok {
		m.dev = d
	}
	unbind, err := cuda.Bind(ctx, m.dev)
	if err != nil {
		return err
	}
	m.unbind = unbind
	if m.stream, err = m.dev.NewStream(); err != nil {
		return err
	}
	if m.blas, err = m.dev.NewBLAS(); err != nil {
		return err
	}
	return m.blas.SetStream(m.stream)
}

// Shutdown frees the copy's GPU resources.
func (m *cudaMultiplier) Shutdown(context.Context) error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, d := range []*cuda.DeviceMem{&m.a, &m.b, &m.c} {
		if d.Size() > 0 {
			keep(d.Free())
			*d = cuda.DeviceMem{}
		}
	}
	if m.blas != nil {
		keep(m.blas.Close())
	}
	if m.stream != nil {
		keep(m.stream.Close())
	}
	if m.unbind != nil {
		m.unbind()
	}
	return first
}

// span is the number of elements a rows x cols block with stride ld covers.
func span(rows, cols, ld int) int {
	if rows == 0 || cols == 0 {
		return 0
	}
	return (rows-1)*ld + cols
}

// fit makes buf hold at least n float64s on the device.
func (m *cudaMultiplier) fit(buf *cuda.DeviceMem, n int) (cuda.DeviceMem, error) {
	bytes := int64(n) * 8
	if buf.Size() < bytes {
		if buf.Size() > 0 {
			if err := buf.Free(); err != nil {
				return cuda.DeviceMem{}, err
			}
		}
		d, err := m.dev.Alloc(bytes)
		if err != nil {
			*buf = cuda.DeviceMem{}
			return cuda.DeviceMem{}, err
		}
		*buf = d
	}
	return buf.Slice(0, bytes), nil
}

// Mul copies the blocks (with their strides) to the GPU, multiplies with
// cuBLAS and copies c back.
func (m *cudaMultiplier) Mul(_ context.Context, rows, cols, inner int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) error {
	if m.blas == nil {
		return fmt.Errorf("matmul: cuda multiplier used before Initialize")
	}
	na, nb, nc := span(rows, inner, lda), span(inner, cols, ldb), span(rows, cols, ldc)
	if nc == 0 {
		return nil
	}
	if inner == 0 { // c = beta·c: no product, no GPU needed
		for r := range rows {
			row := c[r*ldc : r*ldc+cols]
			for i := range row {
				if beta == 0 {
					row[i] = 0
				} else {
					row[i] *= beta
				}
			}
		}
		return nil
	}
	da, err := m.fit(&m.a, na)
	if err != nil {
		return err
	}
	db, err := m.fit(&m.b, nb)
	if err != nil {
		return err
	}
	dc, err := m.fit(&m.c, nc)
	if err != nil {
		return err
	}
	if err := cuda.CopyToDevice(m.stream, da, a[:na]); err != nil {
		return err
	}
	if err := cuda.CopyToDevice(m.stream, db, b[:nb]); err != nil {
		return err
	}
	// C is copied in when its old values count, and also when rows are
	// strided: copying the span back would otherwise overwrite the elements
	// between rows, which belong to other blocks.
	if beta != 0 || (ldc != cols && rows > 1) {
		if err := cuda.CopyToDevice(m.stream, dc, c[:nc]); err != nil {
			return err
		}
	}
	if err := m.blas.Dgemm(blas.NoTrans, blas.NoTrans, rows, cols, inner, 1, da, lda, db, ldb, beta, dc, ldc); err != nil {
		return err
	}
	return cuda.CopyFromDevice(m.stream, c[:nc], dc)
}

// String describes the kernel and its GPUs.
func (k *cudaKernel) String() string {
	s := fmt.Sprintf("cuda (cuBLAS) on %d GPU", len(k.devices))
	if len(k.devices) != 1 {
		s += "s"
	}
	for i, d := range k.devices {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		s += sep + d.String()
	}
	return s
}

func (k *cudaKernel) offloadDevices() []device.Device { return cuda.AsDevices(k.devices) }

// offloadMemory is three quarters of the free memory of the GPU with the
// least (cuBLAS and the CUDA context need some of the rest), counting the
// blocks the kernel keeps as free.
func (k *cudaKernel) offloadMemory() int64 {
	least := int64(-1)
	for _, d := range k.devices {
		free, _, err := d.MemInfo()
		if err != nil {
			free = d.Memory() / 2
		}
		free += k.blocks.kept(d)
		if least < 0 || free < least {
			least = free
		}
	}
	return max(1, least/4*3)
}

// cudaFence is the fence of a buffer: an event recorded where the buffer
// is next free (or filled). An event never recorded has passed.
type cudaFence struct {
	ev       *cuda.Event
	blocking bool // ev sleeps instead of spinning (HTGS_MATMUL_BLOCKSYNC)
}

// newFenceEvent makes the event of a fence on d: one whose Synchronize
// sleeps when HTGS_MATMUL_BLOCKSYNC=1, else a default one (it spins).
func newFenceEvent(d *cuda.Device) (cudaFence, error) {
	if envBool("HTGS_MATMUL_BLOCKSYNC", false) {
		ev, err := d.NewBlockingEvent()
		return cudaFence{ev, true}, err
	}
	ev, err := d.NewEvent()
	return cudaFence{ev: ev}, err
}

// refresh remakes f's event (whose work has completed) when the wanted
// kind of event has changed since it was made.
func (f *cudaFence) refresh(d *cuda.Device) error {
	if f.blocking == envBool("HTGS_MATMUL_BLOCKSYNC", false) {
		return nil
	}
	nf, err := newFenceEvent(d)
	if err != nil {
		return err
	}
	old := f.ev
	*f = nf
	return old.Close()
}

// cudaBlock is a block of float64s in GPU memory, with its fence.
type cudaBlock struct {
	cudaFence
	mem cuda.DeviceMem
}

func (b *cudaBlock) Len() int { return int(b.mem.Size() / 8) }

// cudaStaging is a pinned host buffer, with its fence.
type cudaStaging struct {
	cudaFence
	mem  cuda.HostMem
	host []float64
}

func (s *cudaStaging) Len() int          { return len(s.host) }
func (s *cudaStaging) floats() []float64 { return s.host }

// cudaEventFence is a fence without a buffer (busyMeter's).
type cudaEventFence struct{ cudaFence }

func (cudaEventFence) Len() int { return 0 }

func fenceOf(b fenced) (*cudaFence, error) {
	switch v := b.(type) {
	case *cudaBlock:
		return &v.cudaFence, nil
	case *cudaStaging:
		return &v.cudaFence, nil
	case *cudaEventFence:
		return &v.cudaFence, nil
	}
	return nil, fmt.Errorf("matmul: %T is not a GPU buffer", b)
}

func (k *cudaKernel) deviceBuffers(n int, keep bool) memmgr.Allocator[devMem] {
	a := cudaAlloc[devMem]{bytes: 8 * int64(n), blocks: k.blocks}
	if !keep {
		a.noKeep = true
	}
	return a
}

// registerHost page-locks data (portable: for every GPU).
func (k *cudaKernel) registerHost(data []float64) (func() error, error) {
	r, err := cuda.RegisterHost(k.devices[0], data)
	if err != nil {
		return nil, err
	}
	return r.Unregister, nil
}

func (k *cudaKernel) hostPins() *hostPins { return &k.pins }

// stagingBuffers allocates through the kernel's pinnedCache.

func (k *cudaKernel) stagingBuffers(n int) memmgr.Allocator[stagingMem] {
	return cudaAlloc[stagingMem]{bytes: 8 * int64(n), cache: k.pinned}
}

// cudaAlloc allocates device blocks (or pinned staging buffers) with an
// event each on the pool's GPU; staging buffers (cache set) go back to
// the cache.
type cudaAlloc[T fenced] struct {
	bytes  int64
	cache  *pinnedCache
	blocks *deviceCache // device blocks: where freed ones are kept
	noKeep bool         // free device blocks instead of keeping them
}

func (a cudaAlloc[T]) Alloc(dev device.Device) (T, error) {
	var zero T
	d, ok := dev.(*cuda.Device)
	if !ok {
		return zero, fmt.Errorf("matmul: GPU buffer allocated on %v, not a GPU", dev)
	}
	if a.cache != nil {
		if b := a.cache.get(d, a.bytes); b != nil {
			if err := b.refresh(d); err != nil {
				return zero, errors.Join(err, b.mem.Free())
			}
			return fenced(b).(T), nil
		}
	} else if a.blocks != nil {
		if b := a.blocks.get(d, a.bytes); b != nil {
			if err := b.refresh(d); err != nil {
				return zero, errors.Join(err, b.mem.Free())
			}
			return fenced(b).(T), nil
		}
	}
	fence, err := newFenceEvent(d)
	if err != nil {
		return zero, err
	}
	ev := fence.ev
	var b fenced
	if a.cache != nil {
		h, err := d.AllocHost(a.bytes)
		if err != nil {
			return zero, errors.Join(err, ev.Close())
		}
		b = &cudaStaging{cudaFence: fence, mem: h, host: cuda.HostSlice[float64](h)}
	} else {
		m, err := d.Alloc(a.bytes)
		if err != nil && a.blocks != nil && a.blocks.kept(d) > 0 {
			// The GPU may be full of kept blocks of other sizes.
			if perr := a.blocks.purge(d); perr == nil {
				m, err = d.Alloc(a.bytes)
			}
		}
		if err != nil {
			return zero, errors.Join(err, ev.Close())
		}
		b = &cudaBlock{cudaFence: fence, mem: m}
	}
	return b.(T), nil
}

func (a cudaAlloc[T]) Free(dev device.Device, m T) error {
	switch b := fenced(m).(type) {
	case *cudaBlock:
		// Freeing waits for the work that uses the buffer.
		if err := b.ev.Synchronize(); err != nil {
			return errors.Join(err, b.mem.Free(), b.ev.Close())
		}
		if d, ok := dev.(*cuda.Device); ok && a.blocks != nil && !a.noKeep && a.blocks.put(d, b) {
			return nil
		}
		return errors.Join(b.mem.Free(), b.ev.Close())
	case *cudaStaging:
		if err := b.ev.Synchronize(); err != nil {
			return errors.Join(err, b.mem.Free(), b.ev.Close())
		}
		if d, ok := dev.(*cuda.Device); ok && a.cache != nil && a.cache.put(d, b) {
			return nil
		}
		return errors.Join(b.mem.Free(), b.ev.Close())
	}
	return fmt.Errorf("matmul: freeing %T as GPU memory", m)
}

func gpuBlock(m devMem) (*cudaBlock, error) {
	b, ok := m.(*cudaBlock)
	if !ok {
		return nil, fmt.Errorf("matmul: %T is not GPU memory", m)
	}
	return b, nil
}

func pinnedBuffer(m stagingMem) (*cudaStaging, error) {
	b, ok := m.(*cudaStaging)
	if !ok {
		return nil, fmt.Errorf("matmul: %T is not pinned staging memory", m)
	}
	return b, nil
}

// gpuWorker is what every task copy of a GPU clone holds: its goroutine
// bound to the clone's GPU, and a stream of its own.
type gpuWorker struct {
	dev    *cuda.Device
	unbind func()
	stream *cuda.Stream
}

func (w *gpuWorker) start(ctx context.Context, info task.Info) error {
	d, ok := info.Device.(*cuda.Device)
	if !ok {
		return fmt.Errorf("matmul: cuda task copy on %v, not a GPU", info.Device)
	}
	w.dev = d
	unbind, err := cuda.Bind(ctx, d)
	if err != nil {
		return err
	}
	w.unbind = unbind
	w.stream, err = d.NewStream()
	return err
}

func (w *gpuWorker) stop() error {
	var err error
	if w.stream != nil {
		// Wait for the work queued, so that the buffers it uses can be
		// freed once the graph ends.
		err = errors.Join(w.stream.Synchronize(), w.stream.Close())
	}
	if w.unbind != nil {
		w.unbind()
	}
	return err
}

// cudaQueue is a devQueue on a CUDA stream of the task copy's GPU; a
// compute queue has a cuBLAS handle on it.
type cudaQueue struct {
	gpuWorker
	compute bool
	handles *blasCache
	blas    *cuda.BLAS
	fences  []*cuda.Event // made by newFence
	spin    time.Duration // wait polls this long first (HTGS_MATMUL_SPIN)
}

func (k *cudaKernel) newQueue(compute bool) devQueue {
	return &cudaQueue{compute: compute, handles: k.handles, spin: time.Duration(envInt("HTGS_MATMUL_SPIN", 0)) * time.Microsecond}
}

func (q *cudaQueue) Initialize(ctx context.Context, info task.Info) error {
	if err := q.start(ctx, info); err != nil {
		return err
	}
	if !q.compute {
		return nil
	}
	var err error
	if q.blas, err = q.handles.get(q.dev); err != nil {
		return err
	}
	return q.blas.SetStream(q.stream)
}

// Shutdown waits for the queue's work, frees its fences and stream, and
// gives its cuBLAS handle back to the kernel (or closes it after a
// failure).
func (q *cudaQueue) Shutdown(context.Context) error {
	var errs []error
	if q.stream != nil {
		errs = append(errs, q.stream.Synchronize())
	}
	for _, e := range q.fences {
		errs = append(errs, e.Close())
	}
	q.fences = nil
	if q.blas != nil {
		// Off the stream that is about to go: the handle's next user sets
		// its own.
		if err := errors.Join(append(errs, q.blas.SetStream(nil))...); err == nil {
			q.handles.put(q.dev, q.blas)
		} else {
			errs = append(errs, q.blas.Close())
		}
		q.blas = nil
	}
	return errors.Join(append(errs, q.stop())...)
}

func (q *cudaQueue) upload(dst devMem, at int, src stagingMem, from, n int) error {
	d, err := gpuBlock(dst)
	if err != nil {
		return err
	}
	s, err := pinnedBuffer(src)
	if err != nil {
		return err
	}
	return cuda.CopyHtoD(q.stream, d.mem.Slice(8*int64(at), 8*int64(n)), s.mem.Slice(8*int64(from), 8*int64(n)))
}

func (q *cudaQueue) uploadFrom(dst devMem, at, ldd int, src []float64, lds, rows, cols int) error {
	d, err := gpuBlock(dst)
	if err != nil {
		return err
	}
	m, err := memFrom(d.mem, at)
	if err != nil {
		return err
	}
	return cuda.CopyToDevice2D(q.stream, m, ldd, src, lds, rows, cols)
}

func (q *cudaQueue) downloadTo(dst []float64, ldd int, src devMem, at, lds, rows, cols int) error {
	s, err := gpuBlock(src)
	if err != nil {
		return err
	}
	m, err := memFrom(s.mem, at)
	if err != nil {
		return err
	}
	return cuda.CopyFromDevice2D(q.stream, dst, ldd, m, lds, rows, cols)
}

// memFrom returns m from float64 element at on.
func memFrom(m cuda.DeviceMem, at int) (cuda.DeviceMem, error) {
	off := 8 * int64(at)
	if at < 0 || off > m.Size() {
		return cuda.DeviceMem{}, fmt.Errorf("matmul: element %d outside a device block of %d bytes", at, m.Size())
	}
	return m.Slice(off, m.Size()-off), nil
}

func (q *cudaQueue) download(dst stagingMem, at int, src devMem, from, n int) error {
	d, err := pinnedBuffer(dst)
	if err != nil {
		return err
	}
	s, err := gpuBlock(src)
	if err != nil {
		return err
	}
	return cuda.CopyDtoH(q.stream, d.mem.Slice(8*int64(at), 8*int64(n)), s.mem.Slice(8*int64(from), 8*int64(n)))
}

func (q *cudaQueue) gemm(m, n, k int, a, b, c devMem, beta float64) error {
	if q.blas == nil {
		return errors.New("matmul: gemm on a copy queue")
	}
	da, err := gpuBlock(a)
	if err != nil {
		return err
	}
	db, err := gpuBlock(b)
	if err != nil {
		return err
	}
	dc, err := gpuBlock(c)
	if err != nil {
		return err
	}
	return q.blas.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1,
		da.mem.Slice(0, 8*int64(m*k)), k, db.mem.Slice(0, 8*int64(k*n)), n, beta, dc.mem.Slice(0, 8*int64(m*n)), n)
}

func (q *cudaQueue) signal(b fenced) error {
	f, err := fenceOf(b)
	if err != nil {
		return err
	}
	return f.ev.Record(q.stream)
}

func (q *cudaQueue) await(b fenced) error {
	f, err := fenceOf(b)
	if err != nil {
		return err
	}
	return q.stream.Wait(f.ev)
}

func (q *cudaQueue) wait(b fenced) error {
	f, err := fenceOf(b)
	if err != nil {
		return err
	}
	if q.spin > 0 {
		return f.ev.Wait(q.spin)
	}
	return f.ev.Synchronize()
}

func (q *cudaQueue) newFence() (fenced, error) {
	f, err := newFenceEvent(q.dev)
	if err != nil {
		return nil, err
	}
	q.fences = append(q.fences, f.ev)
	return &cudaEventFence{f}, nil
}

// cudaStamp is a timing event recorded on a queue's stream (the device
// trace's stamps).
type cudaStamp struct{ ev *cuda.Event }

func (q *cudaQueue) stamp() (stamp, error) {
	ev, err := q.dev.NewTimingEvent()
	if err != nil {
		return nil, err
	}
	if err := ev.Record(q.stream); err != nil {
		return nil, errors.Join(err, ev.Close())
	}
	return cudaStamp{ev}, nil
}

func (s cudaStamp) since(origin stamp) (time.Duration, error) {
	o, ok := origin.(cudaStamp)
	if !ok {
		return 0, fmt.Errorf("matmul: stamp %T is not a GPU's", origin)
	}
	return s.ev.Since(o.ev)
}

func (s cudaStamp) free() error { return s.ev.Close() }
