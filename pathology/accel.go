package pathology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/pats"
)

// This file holds the GPU side of the real-hardware run: the accelerators
// (a CUDA GPU, or host memory posing as one), the data regions of each tile
// held in their memory, and the GPU implementations of the operations.

// gpuOpNames returns the operations with a GPU implementation (the others
// run on CPU cores only), with the kernels of kernels/pathology.cu whose
// definitions are those of the CPU: reconstructions by iterated geodesic
// dilation (RBCDetection, ReconToNuclei's opening by reconstruction,
// FillHoles 4-connected, PreWatershed's h-maxima), the opening by the
// 19x19 disk (MorphOpen), the exact Euclidean distance (PreWatershed),
// connected-component labelling by union-find (AreaThreshold 8-connected,
// BWLabel 4-connected, Watershed's markers), Watershed's flooding in
// synchronous rounds (watershed.go) settled pixel by pixel, and
// per-object reductions (FeatIntensity, FeatGradient, FeatMorphometry).
// Every operation has one.
// Each output equals the CPU's bit for bit (the feature tables within
// 1e-9: sums in another order).
func gpuOpNames() []string {
	return []string{"RBCDetection", "MorphOpen", "ReconToNuclei", "AreaThreshold", "FillHoles", "PreWatershed", "Watershed", "BWLabel", "FeatIntensity", "FeatGradient", "FeatMorphometry"}
}

// hasGPUImpl reports whether op has a GPU implementation.
func hasGPUImpl(op string) bool { return slices.Contains(gpuOpNames(), op) }

// gpuBuf is a buffer in an accelerator's memory: device memory on a CUDA
// GPU, a host slice on a host accelerator.
type gpuBuf struct {
	size int64
	mem  cuda.DeviceMem
	host []byte
}

// accel is one GPU: its memory, its transfers and the GPU implementations
// of the operations. upload, download and run may be called concurrently
// (the upload, compute and download goroutines of a pats GPU worker).
type accel interface {
	device.Device
	// bind makes the device current on the calling goroutine (nil: none
	// needed).
	bind() func(context.Context, device.Device) (func(), error)
	// alloc returns a buffer of size bytes (from a pool); release gives it
	// back.
	alloc(size int64) (gpuBuf, error)
	release(b gpuBuf)
	// upload copies src into dst, download dst into src; both wait.
	upload(ctx context.Context, dst gpuBuf, src []byte) error
	download(ctx context.Context, dst []byte, src gpuBuf) error
	// run runs the GPU implementation of op on a w x h tile: bufs are the
	// op's inputs then its output, in the order of its spec; it waits.
	run(ctx context.Context, op string, bufs []gpuBuf, w, h int) error
	close() error
}

// hostAllocator is an accelerator with host memory of its own that its
// transfers are fastest from and to: page-locked memory on a CUDA GPU,
// which the copy engines read and write at the bus's speed without a
// staging copy on a core. A hardware run puts its tiles' image regions
// in it when its first accelerator has it.
type hostAllocator interface {
	// hostBuffer returns a buffer of size bytes from its pool, with
	// whatever the buffer held before, or false when it has none to give
	// (the region then lives in Go memory).
	hostBuffer(size int64) ([]byte, bool)
	// putHost gives back a buffer of hostBuffer once nothing uses it.
	putHost(b []byte)
	// hostStats returns the bytes its pool holds and the buffers given
	// out and not back.
	hostStats() (held int64, out int)
}

// hostOf returns the host memory of the first accelerator if it has
// any, else nil.
func hostOf(as []accel) hostAllocator {
	if len(as) == 0 {
		return nil
	}
	h, _ := as[0].(hostAllocator)
	return h
}

// hostPool keeps an accelerator's host buffers by size for reuse, up to
// limit bytes in all, given out or not; alloc makes a new one.
type hostPool struct {
	mu    sync.Mutex
	alloc func(size int64) ([]byte, error)
	limit int64
	held  int64 // bytes allocated
	out   int   // buffers given out and not back
	free  bySize[[]byte]
	err   error // the first failed allocation: the pool gives no more
}

// hostPoolLimit bounds the page-locked memory of an accelerator's pool:
// a window of 32 tiles of 4096^2 holds about 7 GB.
const hostPoolLimit = 16 << 30

func (p *hostPool) get(size int64) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b, ok := p.free.take(size); ok {
		p.out++
		return b, true
	}
	if p.err != nil || p.held+size > p.limit {
		return nil, false
	}
	b, err := p.alloc(size)
	if err != nil {
		p.err = err
		return nil, false
	}
	p.held += size
	p.out++
	return b, true
}

func (p *hostPool) put(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free.add(int64(len(b)), b)
	p.out--
}

// stats returns the bytes the pool holds and the buffers given out.
func (p *hostPool) stats() (held int64, out int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held, p.out
}

// bySize is a free list of buffers by their size.
type bySize[T any] map[int64][]T

// take removes and returns a buffer of size bytes, if there is one.
func (f bySize[T]) take(size int64) (T, bool) {
	bs := f[size]
	if len(bs) == 0 {
		var zero T
		return zero, false
	}
	f[size] = bs[:len(bs)-1]
	return bs[len(bs)-1], true
}

// add puts back b, of size bytes.
func (f *bySize[T]) add(size int64, b T) {
	if *f == nil {
		*f = bySize[T]{}
	}
	(*f)[size] = append((*f)[size], b)
}

// bufPool keeps released buffers by size for reuse.
type bufPool struct {
	mu   sync.Mutex
	free bySize[gpuBuf]
}

func (p *bufPool) get(size int64) (gpuBuf, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.free.take(size)
}

func (p *bufPool) put(b gpuBuf) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free.add(b.size, b)
}

// drain empties the pool and returns its buffers.
func (p *bufPool) drain() []gpuBuf {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []gpuBuf
	for _, bs := range p.free {
		out = append(out, bs...)
	}
	p.free = nil
	return out
}

// hostAccel is host memory posing as a GPU: its buffers are host slices
// and its implementations the Go mirrors of the CUDA kernels (gpu_ref.go).
// It checks everything but the CUDA code on machines without a GPU.
type hostAccel struct {
	index int
	pool  bufPool
	host  hostPool // poses as a CUDA GPU's page-locked memory
}

func (a *hostAccel) hostBuffer(size int64) ([]byte, bool) { return a.host.get(size) }
func (a *hostAccel) putHost(b []byte)                     { a.host.put(b) }
func (a *hostAccel) hostStats() (int64, int)              { return a.host.stats() }

func (a *hostAccel) ID() int           { return a.index }
func (a *hostAccel) Kind() device.Kind { return device.GPU }
func (a *hostAccel) Name() string      { return fmt.Sprintf("hostgpu%d", a.index) }
func (a *hostAccel) Memory() int64     { return 0 }
func (a *hostAccel) close() error      { a.pool.drain(); return nil }
func (a *hostAccel) release(b gpuBuf)  { a.pool.put(b) }
func (a *hostAccel) bind() func(context.Context, device.Device) (func(), error) {
	return nil
}

func (a *hostAccel) alloc(size int64) (gpuBuf, error) {
	if b, ok := a.pool.get(size); ok {
		return b, nil
	}
	return gpuBuf{size: size, host: make([]byte, size)}, nil
}

func (a *hostAccel) upload(ctx context.Context, dst gpuBuf, src []byte) error {
	if int64(len(src)) != dst.size {
		return fmt.Errorf("%s: upload %d bytes into %d", a.Name(), len(src), dst.size)
	}
	copy(dst.host, src)
	return ctx.Err()
}

func (a *hostAccel) download(ctx context.Context, dst []byte, src gpuBuf) error {
	if int64(len(dst)) != src.size {
		return fmt.Errorf("%s: download %d bytes into %d", a.Name(), src.size, len(dst))
	}
	copy(dst, src.host)
	return ctx.Err()
}

func (a *hostAccel) run(ctx context.Context, op string, bufs []gpuBuf, w, h int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n := w * h
	b := func(i int) []byte { return bufs[i].host }
	switch op {
	case "RBCDetection":
		loose := make([]uint8, n)
		refRBCInit(b(0), loose, b(1), n)
		for refReconStep(b(1), loose, w, h, 8) {
		}
	case "MorphOpen":
		dark, eroded := make([]uint8, n), make([]uint8, n)
		disk := diskTable(openDiskRadius)
		refDark(b(0), dark, n)
		refDisk(dark, eroded, w, h, 0, disk)
		refDisk(eroded, b(1), w, h, 1, disk)
	case "ReconToNuclei":
		dark, rec := make([]uint8, n), make([]uint8, n)
		refDark(b(0), dark, n)
		copy(rec, b(1))
		for refReconStep(rec, dark, w, h, 8) {
		}
		refCandFinal(dark, rec, b(2), b(3), candidateThreshold)
	case "AreaThreshold":
		L, area := make([]int32, n), make([]int32, n)
		refLabInit(b(0), L)
		refLabMerge(L, w, h, true)
		refLabFlatten(L)
		refAreaThreshold(L, area, b(1), minNucleusArea)
	case "BWLabel":
		L, R := make([]int32, n), make([]int32, n)
		count := make([]int32, (n+rankSeg-1)/rankSeg)
		refLabInit(view[uint16](b(0)), L)
		refLabMerge(L, w, h, false)
		refLabFlatten(L)
		refRootCount(L, count)
		refRootScan(count)
		refRootRank(L, count, R)
		refBWFinal(L, R, view[uint16](b(1)))
	case "PreWatershed":
		g, dist := make([]int32, n), make([]uint16, n)
		refEDTCols(b(0), g, w, h)
		refEDTRows(g, dist, w, h)
		out := view[uint16](b(1))
		refHMaxInit(dist, out)
		for refReconStep(out, dist, w, h, 8) {
		}
	case "Watershed":
		f, J := make([]uint16, n), make([]uint16, n)
		C, D, F := make([]int32, n), make([]int32, n), make([]int32, n)
		refWSInit(view[uint16](b(0)), b(1), f, J)
		for refReconStep(J, f, w, h, 8) {
		}
		refWSMarkers(f, J, C)
		refLabMerge(C, w, h, true)
		refLabFlatten(C)
		refWSDistInit(f, C, D, w, h)
		for refWSDistStep(f, D, w, h) {
		}
		refWSLabInit(f, C, F)
		for refWSFloodStep(f, D, C, F, w, h) {
		}
		refWSFinal(F, view[uint16](b(2)))
	case "FillHoles":
		reach, bg := make([]uint8, n), make([]uint8, n)
		refFillInit(b(0), reach, bg, w, h)
		for refReconStep(reach, bg, w, h, 4) {
		}
		refFillFinal(b(0), reach, b(1))
	case "FeatMorphometry":
		table := view[float64](b(1))
		counts := make([]uint64, len(table)/numFeatures)
		refFeatPerim(view[uint16](b(0)), counts, w, h)
		clear(table)
		refPerimFinal(counts, table)
	case "FeatIntensity", "FeatGradient":
		kind := featKind(op)
		table := view[float64](b(2))
		rows := len(table) / numFeatures
		sums, counts := make([]float64, rows), make([]uint64, rows)
		labels := view[uint16](b(1))
		refFeatAccum(b(0), labels, sums, counts, w, h, kind)
		clear(table)
		refFeatFinal(sums, counts, table, kind)
		clear(sums)
		clear(counts)
		if kind == featKindIntensity { // the hematoxylin density
			refFeatAccum(b(0), labels, sums, counts, w, h, featKindHema)
			refFeatFinal(sums, counts, table, featKindHema)
		} else { // the share of pixels on a Canny edge
			marker, mask := make([]uint8, n), make([]uint8, n)
			refCanny(b(0), marker, mask, w, h)
			for refReconStep(marker, mask, w, h, 8) {
			}
			refFeatCount(marker, labels, sums, counts)
			refFeatFinal(sums, counts, table, featKindEdge)
		}
	default:
		return fmt.Errorf("%s: no GPU implementation of %s", a.Name(), op)
	}
	return nil
}

func featKind(op string) int {
	if op == "FeatGradient" {
		return featKindGradient
	}
	return featKindIntensity
}

// view returns b as a slice of T (b's length must be a multiple of T's size).
func view[T uint8 | uint16 | uint64 | float64](b []byte) []T {
	var z T
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(z)))
}

// bytesOf returns the bytes of s.
func bytesOf[T uint8 | uint16 | uint64 | float64](s []T) []byte {
	var z T
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

// devKey names a datum of a tile in one accelerator's memory.
type devKey struct {
	gpu int
	key string
}

// tileDevice holds a tile's data regions in accelerator memory. A datum
// stays there while the tile is in progress (the scheduler decides when a
// copy is current); release returns the buffers when the tile completes.
type tileDevice struct {
	mu   sync.Mutex
	bufs map[devKey]gpuBuf
	by   map[int]accel
}

// ensure returns the buffer of key on a, allocating it if needed.
func (t *tileDevice) ensure(a accel, key string, size int64) (gpuBuf, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := devKey{a.ID(), key}
	if b, ok := t.bufs[k]; ok {
		if b.size != size {
			return gpuBuf{}, fmt.Errorf("%s: %q has %d bytes on %s, want %d", "tile", key, b.size, a.Name(), size)
		}
		return b, nil
	}
	b, err := a.alloc(size)
	if err != nil {
		return gpuBuf{}, err
	}
	if t.bufs == nil {
		t.bufs, t.by = map[devKey]gpuBuf{}, map[int]accel{}
	}
	t.bufs[k] = b
	t.by[a.ID()] = a
	return b, nil
}

// get returns the buffer of key on a.
func (t *tileDevice) get(a accel, key string) (gpuBuf, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.bufs[devKey{a.ID(), key}]
	return b, ok
}

// release gives every buffer back to its accelerator.
func (t *tileDevice) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, b := range t.bufs {
		t.by[k.gpu].release(b)
	}
	t.bufs = nil
}

// hostBytes returns the host memory of the tile's datum k (staging the RGB
// input from storage on first use).
func (j *tileJob) hostBytes(ctx context.Context, k string) ([]byte, error) {
	switch {
	case k == "rgb":
		d, err := j.rgb.Data(ctx)
		return d, err
	case j.u8[k] != nil:
		d, err := j.u8[k].Data(ctx)
		return d, err
	case j.u16[k] != nil:
		d, err := j.u16[k].Data(ctx)
		return bytesOf(d), err
	case j.feats[k] != nil:
		d, err := j.feats[k].Data(ctx)
		return bytesOf(d), err
	}
	return nil, fmt.Errorf("tile %s: no datum %q", j.tpl.Name(), k)
}

// dataKey is the pats key of datum k of the tile named tile: unique among
// the tiles, so that a GPU unit's transfers find the tile.
func dataKey(tile, k string) string { return tile + "/" + k }

// jobRegistry finds the tiles in progress by name.
type jobRegistry struct {
	mu     sync.Mutex
	byName map[string]*tileJob
}

func (r *jobRegistry) add(j *tileJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byName == nil {
		r.byName = map[string]*tileJob{}
	}
	r.byName[j.tpl.Name()] = j
}

func (r *jobRegistry) remove(name string) *tileJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.byName[name]
	delete(r.byName, name)
	return j
}

func (r *jobRegistry) get(name string) (*tileJob, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j := r.byName[name]; j != nil {
		return j, nil
	}
	return nil, fmt.Errorf("no tile %q in progress", name)
}

// all removes and returns every tile left (after a failed run).
func (r *jobRegistry) all() []*tileJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tileJob
	for _, j := range r.byName {
		out = append(out, j)
	}
	r.byName = nil
	return out
}

// ends returns the host memory and a's buffer of datum d, a tile's; the
// buffer is made for an upload (toDevice) and must exist for a download.
func (r *jobRegistry) ends(ctx context.Context, a accel, d pats.Data, toDevice bool) (host []byte, b gpuBuf, err error) {
	name, k, ok := strings.Cut(d.Key, "/")
	if !ok {
		return nil, gpuBuf{}, fmt.Errorf("datum key %q names no tile", d.Key)
	}
	j, err := r.get(name)
	if err != nil {
		return nil, gpuBuf{}, err
	}
	if host, err = j.hostBytes(ctx, k); err != nil {
		return nil, gpuBuf{}, err
	}
	if toDevice {
		b, err = j.dev.ensure(a, k, int64(len(host)))
		return host, b, err
	}
	if b, ok = j.dev.get(a, k); !ok {
		return nil, gpuBuf{}, fmt.Errorf("tile %s: %q is not on %s", name, k, a.Name())
	}
	return host, b, nil
}

// transfer returns the Transfer function of a's unit.
func (r *jobRegistry) transfer(a accel) func(context.Context, pats.Data, bool) error {
	return func(ctx context.Context, d pats.Data, toDevice bool) error {
		host, b, err := r.ends(ctx, a, d, toDevice)
		switch {
		case err != nil:
			return err
		case toDevice:
			return a.upload(ctx, b, host)
		}
		return a.download(ctx, host, b)
	}
}

// queue returns the QueueTransfer function of a's unit: it queues the
// copy when a can (transferQueuer, to or from its page-locked memory) and
// otherwise copies at once, as transfer does.
func (r *jobRegistry) queue(a accel) func(context.Context, pats.Data, bool) (pats.Pending, error) {
	copyNow := r.transfer(a)
	return func(ctx context.Context, d pats.Data, toDevice bool) (pats.Pending, error) {
		q, ok := a.(transferQueuer)
		if !ok {
			return pats.Completed(copyNow(ctx, d, toDevice)), nil
		}
		host, b, err := r.ends(ctx, a, d, toDevice)
		if err != nil {
			return nil, err
		}
		t, err := q.queueTransfer(ctx, b, host, toDevice)
		if err != nil {
			return nil, err
		}
		if t == nil {
			return pats.Completed(nil), nil
		}
		return &queuedCopy{t: t}, nil
	}
}

// transferQueuer is an accelerator that can queue a copy between dev and
// host: it runs on the device while the caller goes on. The copy is nil
// if it was made at once.
type transferQueuer interface {
	queueTransfer(ctx context.Context, dev gpuBuf, host []byte, toDevice bool) (deviceCopy, error)
}

// deviceCopy is a copy queued on a device.
type deviceCopy interface {
	// done reports, without blocking, whether the copy has completed.
	done() bool
	// wait waits for it and returns when the device ran it (zero:
	// unknown).
	wait() (copySpan, error)
}

// copySpan is when a device ran a copy, on the host's clock (zero:
// unknown).
type copySpan struct{ start, end time.Time }

// queuedCopy is a copy queued by a transferQueuer (a pats.Pending).
type queuedCopy struct {
	t    deviceCopy
	span copySpan // once waited for
}

func (q *queuedCopy) Done() bool { return q.t.done() }

// Wait waits for the copy, whatever ctx: its memory must not be released
// while it runs.
func (q *queuedCopy) Wait(context.Context) (time.Duration, error) {
	s, err := q.t.wait()
	q.span = s
	return s.end.Sub(s.start), err
}

// accelUnits returns a pats unit per accelerator; with queue, the units
// queue their transfers (pats.Queuer).
func (r *jobRegistry) accelUnits(accels []accel, queue bool) []pats.Unit {
	var us []pats.Unit
	for _, a := range accels {
		u := pats.DeviceUnit{Device: a, Bind: a.bind(), Transfer: r.transfer(a)}
		if queue {
			u.QueueTransfer = r.queue(a)
		}
		us = append(us, u)
	}
	return us
}

// gpuImpl returns the GPU implementation of operation o: it finds the
// unit's accelerator, its inputs in that accelerator's memory (uploaded by
// the unit or left there by an earlier GPU operation), and runs the kernel
// into the output's buffer there.
func gpuImpl(o Operation, accels []accel) pats.Impl[*tileJob] {
	return func(ctx context.Context, dev device.Device, j *tileJob) error {
		var a accel
		for _, c := range accels {
			if c.ID() == dev.ID() {
				a = c
			}
		}
		if a == nil {
			return fmt.Errorf("%s: no accelerator for %s", o.Name, dev.Name())
		}
		var bufs []gpuBuf
		for _, k := range o.Reads {
			b, ok := j.dev.get(a, k)
			if !ok {
				return fmt.Errorf("%s: input %q of tile %s is not on %s", o.Name, k, j.tpl.Name(), a.Name())
			}
			bufs = append(bufs, b)
		}
		host, err := j.hostBytes(ctx, o.Writes) // sizes the output; in-memory regions never fail
		if err != nil {
			return err
		}
		out, err := j.dev.ensure(a, o.Writes, int64(len(host)))
		if err != nil {
			return err
		}
		if err := a.run(ctx, o.Name, append(bufs, out), j.w, j.h); err != nil {
			return err
		}
		if o.Name == "BWLabel" {
			j.gpuLabels.Store(true) // the count is taken from the labels
		}
		return nil
	}
}

// hostAccels returns n host accelerators.
func hostAccels(n int) []accel {
	as := make([]accel, n)
	for i := range as {
		as[i] = &hostAccel{index: i, host: hostPool{limit: hostPoolLimit, alloc: func(n int64) ([]byte, error) { return make([]byte, n), nil }}}
	}
	return as
}

// closeAccels closes every accelerator.
func closeAccels(as []accel) error {
	var errs []error
	for _, a := range as {
		errs = append(errs, a.close())
	}
	return errors.Join(errs...)
}
