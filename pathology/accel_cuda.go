package pathology

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/pats"
)

// cudaAccel is a CUDA GPU running the kernels of kernels/pathology.cu. It
// has a stream per engine: uploads, kernels and downloads, so that a
// prefetching pats worker overlaps them. Without the cuda build tag
// cuda.Devices fails, so none is ever made.
type cudaAccel struct {
	dev            *cuda.Device
	mod            *cuda.Module
	fn             map[string]*cuda.Function
	up, comp, down *cuda.Stream
	toDev, fromDev *pinnedRing   // staging of uploads (on up) and downloads (on down)
	compDone       *cuda.Event   // blocking: after spin, run waits for its kernels without spinning on a core
	spin           time.Duration // how long run and iterate poll compDone before they block (kernelSpin)
	pool           bufPool
	runMu          sync.Mutex // one kernel sequence at a time (scratch below)
	// flag is the iterative kernels' "changed" flag (int32), in
	// page-locked host memory that the kernels write in place
	// (cuda.HostMem.DevicePtr): reading it after a round costs no copy.
	// Copied into Go memory with a stream synchronization after each
	// round, the iterative operations ran 10-60% longer beside a
	// prefetching worker's downloads than without them (H200, 2026-11-27
	// 15:10Z: RBCDetection 0.43 against 0.27 ms, Watershed 4.83 against
	// 4.32); read in place, within 1% (15:22Z).
	flag         cuda.HostMem
	sums, counts cuda.DeviceMem // the feature kernels' per-object sums (float64) and counts (uint64)
	disk         cuda.DeviceMem // MorphOpen's disk (diskTable, int32)
	check        int            // launches of a reconstruction between looks at the flag
	host         hostPool       // page-locked host memory for the tiles' regions
	pinMu        sync.Mutex
	pinned       map[*byte]cuda.HostMem // host's buffers by their first byte
	// Queued copies (queueTransfer) are timed on the GPU by a pair of
	// timing events each, from a pool; ref, recorded on the upload stream
	// when it was idle at refHost, puts their times on the host's clock.
	evMu    sync.Mutex
	evFree  []copyEvents
	evAll   []copyEvents
	refOnce sync.Once
	ref     *cuda.Event
	refHost time.Time
}

// copyEvents are the timing events recorded before and after a queued
// copy (queueTransfer).
type copyEvents struct{ start, end *cuda.Event }

// kernelNames returns the kernels of kernels/pathology.cu.
func kernelNames() []string {
	return []string{"patho_rbc_init", "patho_dark", "patho_disk", "patho_recon8_u8", "patho_recon8_u16",
		"patho_recon4_u8", "patho_fill_init", "patho_fill_final", "patho_edt_cols", "patho_edt_rows",
		"patho_hmax_init", "patho_feat_accum", "patho_feat_final", "patho_cand_final",
		"patho_lab_init_u8", "patho_lab_init_u16", "patho_lab_merge", "patho_lab_flatten", "patho_lab_area", "patho_area_final",
		"patho_root_count", "patho_root_scan", "patho_root_rank", "patho_bw_final", "patho_feat_perim", "patho_perim_final",
		"patho_feat_count", "patho_canny",
		"patho_ws_init", "patho_ws_markers", "patho_ws_dist_init", "patho_ws_dist", "patho_ws_lab_init", "patho_ws_flood", "patho_ws_final"}
}

// cudaAccels opens every CUDA device (at most limit, 0: all) as an
// accelerator. It fails with an error wrapping cuda.ErrNoDevice where
// there is none.
func cudaAccels(limit int) ([]accel, error) {
	ds, err := cuda.Devices()
	if err != nil {
		return nil, err
	}
	var as []accel
	for i, d := range ds {
		if limit > 0 && i >= limit {
			_ = d.Close()
			continue
		}
		a, err := newCUDAAccel(d)
		if err != nil {
			_ = d.Close()
			for _, d := range ds[i+1:] {
				_ = d.Close()
			}
			return nil, errors.Join(err, closeAccels(as))
		}
		as = append(as, a)
	}
	return as, nil
}

// newCUDAAccel loads the kernels on d and makes its streams and scratch
// memory; on success the accelerator owns d.
func newCUDAAccel(d *cuda.Device) (_ *cudaAccel, err error) {
	a := &cudaAccel{dev: d, fn: map[string]*cuda.Function{}, check: 2, pinned: map[*byte]cuda.HostMem{}}
	if a.spin, err = kernelSpin(os.Getenv("HTGS_PATHO_SPIN")); err != nil {
		return nil, fmt.Errorf("%s: %w", d.Name(), err)
	}
	a.host = hostPool{limit: hostPoolLimit, alloc: a.allocPinned}
	disk := diskTable(openDiskRadius)
	defer func() {
		if err != nil {
			err = fmt.Errorf("%s: %w", d.Name(), err)
			a.closeParts()
		}
	}()
	if a.mod, err = d.LoadModule(pathologyPTX()); err != nil {
		return nil, err
	}
	for _, n := range kernelNames() {
		if a.fn[n], err = a.mod.Function(n); err != nil {
			return nil, err
		}
	}
	for _, s := range []**cuda.Stream{&a.up, &a.comp, &a.down} {
		if *s, err = d.NewStream(); err != nil {
			return nil, err
		}
	}
	if a.toDev, err = newPinnedRing(d, a.up); err != nil {
		return nil, err
	}
	if a.fromDev, err = newPinnedRing(d, a.down); err != nil {
		return nil, err
	}
	if a.compDone, err = d.NewBlockingEvent(); err != nil {
		return nil, err
	}
	if a.flag, err = d.AllocHost(8); err != nil {
		return nil, err
	}
	if a.sums, err = d.Alloc(8 * maxLabels); err != nil {
		return nil, err
	}
	if a.counts, err = d.Alloc(8 * maxLabels); err != nil {
		return nil, err
	}
	if a.disk, err = d.Alloc(int64(4 * len(disk))); err != nil {
		return nil, err
	}
	if err = cuda.CopyToDevice(a.comp, a.disk, disk); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *cudaAccel) ID() int           { return a.dev.ID() }
func (a *cudaAccel) Kind() device.Kind { return device.GPU }
func (a *cudaAccel) Name() string      { return a.dev.Name() }
func (a *cudaAccel) Memory() int64     { return a.dev.Memory() }

func (a *cudaAccel) bind() func(context.Context, device.Device) (func(), error) {
	dev := a.dev
	return func(ctx context.Context, _ device.Device) (func(), error) { return cuda.Bind(ctx, dev) }
}

func (a *cudaAccel) alloc(size int64) (gpuBuf, error) {
	if b, ok := a.pool.get(size); ok {
		return b, nil
	}
	m, err := a.dev.Alloc(size)
	if err != nil {
		return gpuBuf{}, err
	}
	return gpuBuf{size: size, mem: m}, nil
}

func (a *cudaAccel) release(b gpuBuf) { a.pool.put(b) }

// The tiles' regions live in page-locked memory from a pool (hostPool):
// the copy engines move them at the bus's speed, with no staging copy
// through the pinned ring on the transfer's goroutine, which at about
// 5 GB/s (one core's memory copy) took a third of the GPU worker's time.
func (a *cudaAccel) hostBuffer(size int64) ([]byte, bool) { return a.host.get(size) }
func (a *cudaAccel) putHost(b []byte)                     { a.host.put(b) }
func (a *cudaAccel) hostStats() (int64, int)              { return a.host.stats() }

func (a *cudaAccel) allocPinned(size int64) ([]byte, error) {
	h, err := a.dev.AllocHost(size)
	if err != nil {
		return nil, err
	}
	b := h.Bytes()
	a.pinMu.Lock()
	a.pinned[&b[0]] = h
	a.pinMu.Unlock()
	return b, nil
}

// pinnedOf returns b as page-locked memory if it is (the start of) a
// buffer of the pool.
func (a *cudaAccel) pinnedOf(b []byte) (cuda.HostMem, bool) {
	if len(b) == 0 {
		return cuda.HostMem{}, false
	}
	a.pinMu.Lock()
	h, ok := a.pinned[&b[0]]
	a.pinMu.Unlock()
	if !ok || int64(len(b)) > h.Size() {
		return cuda.HostMem{}, false
	}
	return h.Slice(0, int64(len(b))), true
}

func (a *cudaAccel) upload(ctx context.Context, dst gpuBuf, src []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if int64(len(src)) != dst.size {
		return fmt.Errorf("%s: upload %d bytes into %d", a.Name(), len(src), dst.size)
	}
	if h, ok := a.pinnedOf(src); ok {
		return a.toDev.direct(func(s *cuda.Stream) error { return cuda.CopyHtoD(s, dst.mem, h) })
	}
	return a.toDev.upload(dst.mem, src)
}

// queueTransfer queues the copy between dev and host, page-locked memory
// of the pool, on the upload or the download stream, behind the copies
// queued before it there, and returns at once; the copy's wait waits for
// it (polling, as await does) and gives when the GPU ran it. host in other
// memory is copied at once, through the pinned ring (a nil copy).
func (a *cudaAccel) queueTransfer(ctx context.Context, dev gpuBuf, host []byte, toDevice bool) (deviceCopy, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if int64(len(host)) != dev.size {
		return nil, fmt.Errorf("%s: copy %d bytes to or from %d", a.Name(), len(host), dev.size)
	}
	r := a.fromDev
	if toDevice {
		r = a.toDev
	}
	h, ok := a.pinnedOf(host)
	if !ok {
		if toDevice {
			return nil, r.upload(dev.mem, host)
		}
		return nil, r.download(host, dev.mem)
	}
	a.refOnce.Do(a.setRef)
	ev, err := a.copyEvents()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	err = ev.start.Record(r.s)
	if err == nil && toDevice {
		err = cuda.CopyHtoD(r.s, dev.mem, h)
	} else if err == nil {
		err = cuda.CopyDtoH(r.s, h, dev.mem)
	}
	if err == nil {
		err = ev.end.Record(r.s)
	}
	r.mu.Unlock()
	if err != nil {
		_ = r.s.Synchronize() // nothing queued may still use the events
		a.putEvents(ev)
		return nil, err
	}
	return &cudaCopy{a: a, r: r, ev: ev}, nil
}

// cudaCopy is a copy queued on a ring's stream, between two timing
// events, which go back to the pool once it was waited for.
type cudaCopy struct {
	a  *cudaAccel
	r  *pinnedRing
	ev copyEvents
}

func (c *cudaCopy) done() bool {
	d, err := c.ev.end.Done()
	return d || err != nil // wait reports the error
}

func (c *cudaCopy) wait() (copySpan, error) {
	defer c.a.putEvents(c.ev)
	if err := await(c.ev.end); err != nil {
		_ = c.r.s.Synchronize()
		return copySpan{}, err
	}
	return c.a.span(c.ev), nil
}

// setRef records ref on the idle upload stream and notes the host's time
// once it completed; on failure the queued copies' spans are unknown.
func (a *cudaAccel) setRef() {
	e, err := a.dev.NewTimingEvent()
	if err != nil {
		return
	}
	if err := e.Record(a.up); err != nil || e.Synchronize() != nil {
		_ = a.up.Synchronize()
		_ = e.Close()
		return
	}
	a.ref, a.refHost = e, time.Now()
}

// span returns when the GPU ran the copy timed by ev, on the host's clock.
func (a *cudaAccel) span(ev copyEvents) copySpan {
	if a.ref == nil {
		return copySpan{}
	}
	s, err := ev.start.Since(a.ref)
	if err != nil {
		return copySpan{}
	}
	e, err := ev.end.Since(a.ref)
	if err != nil {
		return copySpan{}
	}
	return copySpan{start: a.refHost.Add(s), end: a.refHost.Add(e)}
}

// copyEvents returns a pair of timing events from the pool, made if none
// is free.
func (a *cudaAccel) copyEvents() (copyEvents, error) {
	a.evMu.Lock()
	defer a.evMu.Unlock()
	if n := len(a.evFree); n > 0 {
		ev := a.evFree[n-1]
		a.evFree = a.evFree[:n-1]
		return ev, nil
	}
	start, err := a.dev.NewTimingEvent()
	if err != nil {
		return copyEvents{}, err
	}
	end, err := a.dev.NewTimingEvent()
	if err != nil {
		_ = start.Close()
		return copyEvents{}, err
	}
	ev := copyEvents{start, end}
	a.evAll = append(a.evAll, ev)
	return ev, nil
}

func (a *cudaAccel) putEvents(ev copyEvents) {
	a.evMu.Lock()
	a.evFree = append(a.evFree, ev)
	a.evMu.Unlock()
}

func (a *cudaAccel) download(ctx context.Context, dst []byte, src gpuBuf) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if int64(len(dst)) != src.size {
		return fmt.Errorf("%s: download %d bytes into %d", a.Name(), src.size, len(dst))
	}
	if h, ok := a.pinnedOf(dst); ok {
		return a.fromDev.direct(func(s *cuda.Stream) error { return cuda.CopyDtoH(s, h, src.mem) })
	}
	return a.fromDev.download(dst, src.mem)
}

// Staging of the transfers: a tile's regions are ordinary (pageable) Go
// memory, which the driver copies through a staging buffer of its own,
// synchronously, at a fraction of the bus speed. A pinnedRing moves them
// through a few chunks of pinned memory instead: the copy of one chunk
// between Go memory and pinned memory overlaps the DMA of the others,
// which runs on the direction's own stream at full bus speed, concurrently
// with the kernels on the compute stream. Its waits are on blocking
// events, so the waiting goroutine sleeps instead of spinning on a core
// that a CPU worker needs.
const (
	ringChunk = 4 << 20 // bytes per chunk
	ringSlots = 4       // chunks in flight
)

type pinnedRing struct {
	mu   sync.Mutex // one transfer at a time per direction
	s    *cuda.Stream
	bufs []cuda.HostMem
	evs  []*cuda.Event // evs[k] completes when the DMA through bufs[k] has
}

func newPinnedRing(d *cuda.Device, s *cuda.Stream) (r *pinnedRing, err error) {
	r = &pinnedRing{s: s}
	defer func() {
		if err != nil {
			_ = r.close()
		}
	}()
	for range ringSlots {
		b, err := d.AllocHost(ringChunk)
		if err != nil {
			return nil, err
		}
		r.bufs = append(r.bufs, b)
		e, err := d.NewBlockingEvent()
		if err != nil {
			return nil, err
		}
		r.evs = append(r.evs, e)
	}
	return r, nil
}

// chunk returns the offset and length of chunk i of n bytes.
func chunk(i int, n int64) (off, m int64) {
	off = int64(i) * ringChunk
	return off, min(ringChunk, n-off)
}

// await waits for e, a copy's event (cuda.Event.Wait), polling it for up
// to 2 ms before it blocks (the kernels' waits poll for a.spin:
// kernelsDone), so that the GPU's worker keeps its P, the core the run
// gives it, through its short waits. Blocked in Synchronize it gave the P up and,
// with every other core busy (FCFS), waited for one once the GPU was done:
// on the H200 of the call of 2026-11-27 14:27Z the GPU operations, each a
// few such waits (the reconstructions one per round of launches), took
// 1.4x to 1.9x longer in FCFS, the cores 91% busy, than in PATS
// (FillHoles 15.0 ms against 10.2 alone, Watershed 9.7 against 5.5,
// MorphOpen 1.8 against 0.9); polling, 9.6, 5.6 and 0.9 (14:32Z). A wait
// longer than 2 ms (a reconstruction of many rounds) loses little to the
// wake-up, and a goroutine that moves data beside the worker (prefetch)
// does not hold a core from the CPU workers for longer.
func await(e *cuda.Event) error { return e.Wait(2 * time.Millisecond) }

// defaultKernelSpin is how long run and iterate poll for their kernels
// before they block (cudaAccel.spin), unless HTGS_PATHO_SPIN says
// otherwise. Between their looks they call pats.WhileComputing's serve,
// with which a queued GPU worker takes its next operation and queues that
// operation's uploads while the kernels run. It was await's 2 ms until
// the eleventh session; the tenth session's logs showed the operations
// whose kernels outlast 2 ms about a millisecond longer in FCFS, with the
// cores busy, than in PATS in the same call (PreWatershed 4.3-4.8 ms
// against 3.4-3.6, Watershed 4.5-5.4 against 4.0-4.5, FillHoles 8.2-9.1
// against 7.3-7.6, three calls): blocked after 2 ms, the worker gave its P
// up and waited for one when the kernels were done. The GPU's longest
// operation takes about 8 ms, and its worker has a core of its own (the
// run gives the CPU workers every core but one per GPU), so polling
// through every operation costs the CPU workers nothing.
const defaultKernelSpin = 20 * time.Millisecond

// kernelSpin returns the kernel-wait polling time that v (the
// HTGS_PATHO_SPIN environment variable: a Go duration, "0" to block at
// once) names, defaultKernelSpin for "".
func kernelSpin(v string) (time.Duration, error) {
	if v == "" {
		return defaultKernelSpin, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("HTGS_PATHO_SPIN=%q: want a duration such as 2ms (0: block at once)", v)
	}
	return d, nil
}

// upload copies src into dst and waits for the copy.
func (r *pinnedRing) upload(dst cuda.DeviceMem, src []byte) (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.drainOnError(&err)
	n := int64(len(src))
	chunks := int((n + ringChunk - 1) / ringChunk)
	for i := range chunks {
		k := i % len(r.bufs)
		if i >= len(r.bufs) { // the slot's previous DMA must be done
			if err := await(r.evs[k]); err != nil {
				return err
			}
		}
		off, m := chunk(i, n)
		h := r.bufs[k].Slice(0, m)
		copy(h.Bytes(), src[off:off+m])
		if err := cuda.CopyHtoD(r.s, dst.Slice(off, m), h); err != nil {
			return err
		}
		if err := r.evs[k].Record(r.s); err != nil {
			return err
		}
	}
	if chunks == 0 {
		return nil
	}
	return await(r.evs[(chunks-1)%len(r.bufs)]) // the stream runs the chunks in order
}

// download copies src into dst and waits for the copy.
func (r *pinnedRing) download(dst []byte, src cuda.DeviceMem) (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.drainOnError(&err)
	n := int64(len(dst))
	chunks := int((n + ringChunk - 1) / ringChunk)
	queue := func(i int) error {
		off, m := chunk(i, n)
		k := i % len(r.bufs)
		if err := cuda.CopyDtoH(r.s, r.bufs[k].Slice(0, m), src.Slice(off, m)); err != nil {
			return err
		}
		return r.evs[k].Record(r.s)
	}
	for i := range min(len(r.bufs), chunks) {
		if err := queue(i); err != nil {
			return err
		}
	}
	for i := range chunks {
		k := i % len(r.bufs)
		if err := await(r.evs[k]); err != nil {
			return err
		}
		off, m := chunk(i, n)
		copy(dst[off:off+m], r.bufs[k].Bytes()[:m])
		if next := i + len(r.bufs); next < chunks { // the slot is free again
			if err := queue(next); err != nil {
				return err
			}
		}
	}
	return nil
}

// direct queues copy, a DMA between device memory and page-locked memory,
// on the ring's stream, in turn with the ring's other transfers, and waits
// for it.
func (r *pinnedRing) direct(copy func(*cuda.Stream) error) (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.drainOnError(&err)
	if err := copy(r.s); err != nil {
		return err
	}
	if err := r.evs[0].Record(r.s); err != nil {
		return err
	}
	return await(r.evs[0])
}

// drainOnError waits for the DMAs still queued when a transfer failed, so
// that the next one finds its buffers free.
func (r *pinnedRing) drainOnError(err *error) {
	if *err != nil {
		_ = r.s.Synchronize()
	}
}

func (r *pinnedRing) close() error {
	if r == nil {
		return nil
	}
	var errs []error
	for _, e := range r.evs {
		errs = append(errs, e.Close())
	}
	for _, b := range r.bufs {
		errs = append(errs, b.Free())
	}
	r.evs, r.bufs = nil, nil
	return errors.Join(errs...)
}

// launch queues kernel name over n elements on the compute stream.
func (a *cudaAccel) launch(name string, n int64, args ...any) error {
	const block = 256
	return a.fn[name].Launch(a.comp, cuda.GridFor(n, block, 8192), block, args...)
}

// launchTiles queues kernel name, which takes 32 x 32 tiles of a w x h
// image in turn per block (patho_disk, patho_recon*), on the compute
// stream.
func (a *cudaAccel) launchTiles(name string, w, h int64, args ...any) error {
	const block, tile = 256, 32
	tiles := ((w + tile - 1) / tile) * ((h + tile - 1) / tile)
	return a.fn[name].Launch(a.comp, cuda.GridFor(tiles, 1, 65535), block, args...)
}

// launchCols queues patho_edt_cols, a thread per column, in blocks of 64
// so that a narrow image still spreads over the multiprocessors.
func (a *cudaAccel) launchCols(name string, w int64, args ...any) error {
	const block = 64
	return a.fn[name].Launch(a.comp, cuda.GridFor(w, block, 65535), block, args...)
}

// reconstruct reconstructs J (the marker, in place) under I by iterated
// geodesic dilation (kernel patho_recon8_u8, _u16 or patho_recon4_u8) until a launch
// changes nothing.
func (a *cudaAccel) reconstruct(ctx context.Context, kernel string, J, I cuda.DeviceMem, w, h int64) error {
	return a.iterate(ctx, a.check, func() error { return a.launchTiles(kernel, w, h, J, I, w, h, a.flag.DevicePtr()) })
}

// iterate runs step until it changes nothing, looking at the flag every
// every steps.
func (a *cudaAccel) iterate(ctx context.Context, every int, step func() error) error {
	flag := &cuda.HostSlice[int32](a.flag)[0]
	serve := pats.WhileComputing(ctx)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// The kernels of the last round are done (awaited below): none
		// writes the flag before the launches that follow this store.
		atomic.StoreInt32(flag, 0)
		for range every {
			if err := step(); err != nil {
				return err
			}
		}
		// Wait until the steps are done, then read the flag (a short wait).
		if err := a.kernelsDone(serve); err != nil {
			return err
		}
		if atomic.LoadInt32(flag) == 0 {
			return nil
		}
	}
}

func (a *cudaAccel) run(ctx context.Context, op string, bufs []gpuBuf, w, h int) (err error) {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	W, H, n := int64(w), int64(h), int64(w)*int64(h)
	m := func(i int) cuda.DeviceMem { return bufs[i].mem }
	var scratch []gpuBuf
	defer func() {
		if err != nil { // no kernel queued may still use the scratch memory once it is back
			_ = a.comp.Synchronize()
		}
		for _, b := range scratch {
			a.release(b)
		}
	}()
	// tmp returns scratch memory of the given sizes, from the pool.
	tmp := func(sizes ...int64) ([]cuda.DeviceMem, error) {
		var ms []cuda.DeviceMem
		for _, size := range sizes {
			b, err := a.alloc(size)
			if err != nil {
				return nil, err
			}
			scratch = append(scratch, b)
			ms = append(ms, b.mem)
		}
		return ms, nil
	}
	var t []cuda.DeviceMem
	switch op {
	case "RBCDetection":
		if t, err = tmp(n); err != nil {
			return err
		}
		loose := t[0]
		if err = a.launch("patho_rbc_init", n, m(0), loose, m(1), n); err == nil {
			err = a.reconstruct(ctx, "patho_recon8_u8", m(1), loose, W, H)
		}
	case "MorphOpen":
		if t, err = tmp(n, n); err != nil {
			return err
		}
		dark, eroded := t[0], t[1]
		err = errors.Join(a.launch("patho_dark", n, m(0), dark, n),
			a.launchTiles("patho_disk", W, H, dark, eroded, W, H, int64(0), a.disk),
			a.launchTiles("patho_disk", W, H, eroded, m(1), W, H, int64(1), a.disk))
	case "ReconToNuclei":
		if t, err = tmp(n, n); err != nil {
			return err
		}
		dark, rec := t[0], t[1]
		err = errors.Join(a.launch("patho_dark", n, m(0), dark, n), cuda.CopyDtoD(a.comp, rec, m(1)))
		if err == nil {
			err = a.reconstruct(ctx, "patho_recon8_u8", rec, dark, W, H)
		}
		if err == nil {
			err = a.launch("patho_cand_final", n, dark, rec, m(2), m(3), n, int64(candidateThreshold))
		}
	case "AreaThreshold", "BWLabel":
		// The labels, the areas or the roots' ranks, the segments' counts.
		if t, err = tmp(4*n, 4*n, 4*((n+rankSeg-1)/rankSeg)); err != nil {
			return err
		}
		err = a.label(op, m(0), m(1), t[0], t[1], t[2], W, H)
	case "FillHoles":
		if t, err = tmp(n, n); err != nil {
			return err
		}
		reach, bg := t[0], t[1]
		if err = a.launch("patho_fill_init", n, m(0), reach, bg, W, H); err == nil {
			err = a.reconstruct(ctx, "patho_recon4_u8", reach, bg, W, H)
		}
		if err == nil {
			err = a.launch("patho_fill_final", n, m(0), reach, m(1), n)
		}
	case "PreWatershed":
		if t, err = tmp(4*n, 2*n); err != nil {
			return err
		}
		g, dist := t[0], t[1]
		err = errors.Join(a.launchCols("patho_edt_cols", W, m(0), g, W, H),
			a.launch("patho_edt_rows", n, g, dist, W, H),
			a.launch("patho_hmax_init", n, dist, m(1), n))
		if err == nil {
			err = a.reconstruct(ctx, "patho_recon8_u16", m(1), dist, W, H)
		}
	case "Watershed":
		// The relief f, f - 1 reconstructed under f, the markers' labels
		// then the candidates C, the rounds D, the final basins F.
		if t, err = tmp(2*n, 2*n, 4*n, 4*n, 4*n); err != nil {
			return err
		}
		err = a.watershed(ctx, m(0), m(1), m(2), t[0], t[1], t[2], t[3], t[4], W, H)
	case "FeatMorphometry":
		rows := min(bufs[1].size/(8*numFeatures), maxLabels)
		err = errors.Join(cuda.Memset(a.comp, a.counts.Slice(0, 8*rows), 0), cuda.Memset(a.comp, m(1), 0))
		if err == nil {
			err = errors.Join(a.launch("patho_feat_perim", n, m(0), a.counts, W, H, rows),
				a.launch("patho_perim_final", rows, a.counts, m(1), rows))
		}
	case "FeatIntensity", "FeatGradient":
		kind := int64(featKind(op))
		rows := min(bufs[2].size/(8*numFeatures), maxLabels) // the table's: objectRows
		zero := func() error {
			return errors.Join(cuda.Memset(a.comp, a.sums.Slice(0, 8*rows), 0), cuda.Memset(a.comp, a.counts.Slice(0, 8*rows), 0))
		}
		err = errors.Join(zero(), cuda.Memset(a.comp, m(2), 0))
		if err == nil {
			err = errors.Join(a.launch("patho_feat_accum", n, m(0), m(1), a.sums, a.counts, W, H, kind, rows),
				a.launch("patho_feat_final", rows, a.sums, a.counts, m(2), kind, rows), zero())
		}
		switch {
		case err != nil:
		case kind == featKindIntensity: // the hematoxylin density
			err = errors.Join(a.launch("patho_feat_accum", n, m(0), m(1), a.sums, a.counts, W, H, int64(featKindHema), rows),
				a.launch("patho_feat_final", rows, a.sums, a.counts, m(2), int64(featKindHema), rows))
		default: // the share of pixels on a Canny edge
			if t, err = tmp(n, n); err != nil {
				return err
			}
			marker, mask := t[0], t[1]
			if err = a.launch("patho_canny", n, m(0), marker, mask, W, H); err == nil {
				err = a.reconstruct(ctx, "patho_recon8_u8", marker, mask, W, H)
			}
			if err == nil {
				err = errors.Join(a.launch("patho_feat_count", n, marker, m(1), a.sums, a.counts, n, rows),
					a.launch("patho_feat_final", rows, a.sums, a.counts, m(2), int64(featKindEdge), rows))
			}
		}
	default:
		return fmt.Errorf("%s: no GPU implementation of %s", a.Name(), op)
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %w", a.Name(), op, err)
	}
	if err := a.kernelsDone(pats.WhileComputing(ctx)); err != nil {
		return fmt.Errorf("%s: %s: %w", a.Name(), op, err)
	}
	return nil
}

// kernelsDone waits for the kernels queued on the compute stream, polling
// for up to a.spin (calling serve between its looks) before it blocks.
func (a *cudaAccel) kernelsDone(serve func()) error {
	if err := a.compDone.Record(a.comp); err != nil {
		return err
	}
	return a.compDone.WaitServing(a.spin, serve)
}

// label queues AreaThreshold or BWLabel (op) of in into out: the
// union-find labelling of a w x h mask into L, then the areas (in sc) and
// the kept components, or the roots' ranks (count per segment, then sc)
// and the labels.
func (a *cudaAccel) label(op string, in, out, L, sc, count cuda.DeviceMem, w, h int64) error {
	n := w * h
	if op == "AreaThreshold" {
		return errors.Join(a.launch("patho_lab_init_u8", n, in, L, n),
			a.launch("patho_lab_merge", n, L, w, h, int64(1)),
			a.launch("patho_lab_flatten", n, L, n),
			cuda.Memset(a.comp, sc, 0),
			a.launch("patho_lab_area", n, L, sc, n),
			a.launch("patho_area_final", n, L, sc, out, n, int64(minNucleusArea)))
	}
	segs := (n + rankSeg - 1) / rankSeg
	return errors.Join(a.launch("patho_lab_init_u16", n, in, L, n),
		a.launch("patho_lab_merge", n, L, w, h, int64(0)),
		a.launch("patho_lab_flatten", n, L, n),
		a.launch("patho_root_count", segs*256, L, count, n),
		a.launch("patho_root_scan", 256, count, segs),
		a.launch("patho_root_rank", segs*256, L, count, sc, n),
		a.launch("patho_bw_final", n, L, sc, out, n))
}

// watershed queues Watershed of dist inside the mask filled into out
// (kernels patho_ws_*, as kernels/pathology.cu describes), with scratch
// f and J (16-bit), C, D and F (32-bit).
func (a *cudaAccel) watershed(ctx context.Context, dist, filled, out, f, J, C, D, F cuda.DeviceMem, w, h int64) error {
	n := w * h
	err := a.launch("patho_ws_init", n, dist, filled, f, J, n)
	if err == nil {
		err = a.reconstruct(ctx, "patho_recon8_u16", J, f, w, h)
	}
	if err == nil {
		err = errors.Join(a.launch("patho_ws_markers", n, f, J, C, n),
			a.launch("patho_lab_merge", n, C, w, h, int64(1)),
			a.launch("patho_lab_flatten", n, C, n),
			a.launch("patho_ws_dist_init", n, f, C, D, w, h))
	}
	if err == nil {
		err = a.iterate(ctx, a.check, func() error { return a.launchTiles("patho_ws_dist", w, h, f, D, w, h, a.flag.DevicePtr()) })
	}
	if err == nil {
		err = a.launch("patho_ws_lab_init", n, f, C, F, n)
	}
	if err == nil {
		err = a.iterate(ctx, a.check, func() error { return a.launchTiles("patho_ws_flood", w, h, f, D, C, F, w, h, a.flag.DevicePtr()) })
	}
	if err == nil {
		err = a.launch("patho_ws_final", n, F, out, n)
	}
	return err
}

// closeParts frees what newCUDAAccel made, and the device.
func (a *cudaAccel) closeParts() error {
	var errs []error
	for _, b := range a.pool.drain() {
		errs = append(errs, b.mem.Free())
	}
	errs = append(errs, a.flag.Free())
	for _, m := range []cuda.DeviceMem{a.sums, a.counts, a.disk} {
		if m.Size() > 0 {
			errs = append(errs, m.Free())
		}
	}
	if a.up != nil {
		errs = append(errs, a.up.Synchronize())
	}
	if a.down != nil {
		errs = append(errs, a.down.Synchronize())
	}
	errs = append(errs, a.toDev.close(), a.fromDev.close())
	for _, h := range a.pinned { // the streams are idle: no copy uses them
		errs = append(errs, h.Free())
	}
	a.pinned = nil
	if a.compDone != nil {
		errs = append(errs, a.compDone.Close())
	}
	for _, ev := range a.evAll { // the upload stream is idle
		errs = append(errs, ev.start.Close(), ev.end.Close())
	}
	a.evAll, a.evFree = nil, nil
	if a.ref != nil {
		errs = append(errs, a.ref.Close())
	}
	for _, s := range []*cuda.Stream{a.up, a.comp, a.down} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	if a.mod != nil {
		errs = append(errs, a.mod.Close())
	}
	errs = append(errs, a.dev.Close())
	return errors.Join(errs...)
}

func (a *cudaAccel) close() error { return a.closeParts() }
