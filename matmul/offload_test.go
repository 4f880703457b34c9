package matmul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/matmul/npy"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
)

// fakeGPU is an offload kernel whose "devices" are host memory and whose
// queues are goroutines: it lets the offload graph (routing, copy-in
// caching, device pools and their release counts, fences between queues,
// device-side accumulation, copy-out) run and be checked on any machine.
// Each device counts its live buffers, its products and the downloads of
// each block of C, and every call checks that the buffers it is given live
// on the device its task copy was initialized for.
type fakeGPU struct {
	devs   []*fakeDevice
	memory int64
	// failUpload, when positive, makes the failUpload-th upload fail.
	failUpload int64
	uploads    atomic.Int64
	// gemmDelay is how long each fake product takes on its queue.
	gemmDelay time.Duration
	// registered is the host memory registerHost page-locked ("pinned"
	// by PinHost too); direct counts the copies made straight from or to
	// it, registrations the calls of registerHost.
	registered            hostPins
	pinned                hostPins
	direct, registrations atomic.Int64
	// spanning counts the direct copies refused for spanning two
	// registrations (the driver's CUDA_ERROR_INVALID_VALUE).
	spanning atomic.Int64
	// staged counts the copies through staging buffers (up and down).
	staged atomic.Int64
	// registerGate, when set, holds every registration until it is
	// closed.
	registerGate chan struct{}
	// stamps counts the trace's stamps made, stampsFreed those freed.
	stamps, stampsFreed atomic.Int64
}

type fakeDevice struct {
	id                int
	live, peak, total atomic.Int64 // buffers allocated
	products          atomic.Int64
	mu                sync.Mutex
	// gemmsQueued counts products queued and not yet run; overlapped
	// counts uploads queued while some product queued earlier had not run.
	gemmsQueued, overlapped atomic.Int64
	downloads               map[*fakeMem][]bool // elements of each device buffer downloaded since its last gemm
	twice                   int                 // downloads of elements downloaded before with no product in between
}

func (d *fakeDevice) ID() int           { return d.id }
func (d *fakeDevice) Kind() device.Kind { return device.GPU }
func (d *fakeDevice) Name() string      { return fmt.Sprintf("fake%d", d.id) }
func (d *fakeDevice) Memory() int64     { return 0 }
func (d *fakeDevice) String() string    { return d.Name() }

// noteDownload records the download of the rows x cols matrix from
// element at of s (stride ld), counting a download twice when any of its
// elements was downloaded since s's last product.
func (d *fakeDevice) noteDownload(s *fakeMem, at, ld, rows, cols int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := d.downloads[s]
	if seen == nil {
		seen = make([]bool, len(s.data))
		d.downloads[s] = seen
	}
	again := false
	for r := range rows {
		for i := at + r*ld; i < at+r*ld+cols; i++ {
			again = again || seen[i]
			seen[i] = true
		}
	}
	if again {
		d.twice++
	}
}

func newFakeGPU(devices int) *fakeGPU {
	k := &fakeGPU{}
	for i := range devices {
		k.devs = append(k.devs, &fakeDevice{id: i, downloads: map[*fakeMem][]bool{}})
	}
	return k
}

// fakeFence is the fence of a fake buffer: the channel that the queue
// closes when the work before the last signal is done (nil: passed).
type fakeFence struct {
	mu sync.Mutex
	ch chan struct{}
}

func (f *fakeFence) current() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ch
}

type fakeMem struct {
	fakeFence
	data    []float64
	dev     *fakeDevice
	staging bool
}

func (m *fakeMem) Len() int          { return len(m.data) }
func (m *fakeMem) floats() []float64 { return m.data }

func (k *fakeGPU) Name() string { return "fakegpu" }

// NewMultiplier is never called for an offloader; it panics to prove it.
func (k *fakeGPU) NewMultiplier() Multiplier { panic("fakeGPU: NewMultiplier called") }

func (k *fakeGPU) offloadDevices() []device.Device {
	ds := make([]device.Device, len(k.devs))
	for i, d := range k.devs {
		ds[i] = d
	}
	return ds
}

func (k *fakeGPU) offloadMemory() int64 { return k.memory }

func (k *fakeGPU) registerHost(data []float64) (func() error, error) {
	if k.registerGate != nil {
		<-k.registerGate
	}
	if k.registered.overlaps(data) {
		return nil, errors.New("fake: memory already registered")
	}
	k.registrations.Add(1)
	k.registered.add(data)
	return func() error { k.registered.remove(data); return nil }, nil
}

func (k *fakeGPU) hostPins() *hostPins { return &k.pinned }

func (k *fakeGPU) deviceBuffers(n int, _ bool) memmgr.Allocator[devMem] {
	return fakeAlloc[devMem]{n, false}
}

func (k *fakeGPU) stagingBuffers(n int) memmgr.Allocator[stagingMem] {
	return fakeAlloc[stagingMem]{n, true}
}

type fakeAlloc[T fenced] struct {
	n       int
	staging bool
}

func (a fakeAlloc[T]) Alloc(dev device.Device) (T, error) {
	var zero T
	d, ok := dev.(*fakeDevice)
	if !ok {
		return zero, fmt.Errorf("fake allocator given %v, not a fake device", dev)
	}
	if !a.staging {
		live := d.live.Add(1)
		d.total.Add(1)
		d.mu.Lock()
		d.peak.Store(max(d.peak.Load(), live))
		d.mu.Unlock()
	}
	var m fenced = &fakeMem{data: make([]float64, a.n), dev: d, staging: a.staging}
	return m.(T), nil
}

func (a fakeAlloc[T]) Free(dev device.Device, m T) error {
	var v fenced = m
	fm := v.(*fakeMem)
	if fm.dev != dev {
		return fmt.Errorf("buffer of %v freed on %v", fm.dev, dev)
	}
	if !a.staging {
		fm.dev.live.Add(-1)
	}
	return nil
}

// fakeQueue runs the work queued on it, in order, on a goroutine of its
// own (from Initialize to Shutdown).
type fakeQueue struct {
	k       *fakeGPU
	dev     *fakeDevice
	compute bool
	ops     chan func()
	done    chan struct{}
	err     atomic.Pointer[error]
}

func (k *fakeGPU) newQueue(compute bool) devQueue { return &fakeQueue{k: k, compute: compute} }

func (q *fakeQueue) Initialize(_ context.Context, info task.Info) error {
	d, ok := info.Device.(*fakeDevice)
	if !ok {
		return fmt.Errorf("task copy on %v, want a fake device", info.Device)
	}
	if d.id != info.Clone {
		return fmt.Errorf("pipeline clone %d got device %d", info.Clone, d.id)
	}
	q.dev = d
	q.ops, q.done = make(chan func(), 64), make(chan struct{})
	go func() {
		defer close(q.done)
		for op := range q.ops {
			op()
		}
	}()
	return nil
}

// Shutdown runs the work still queued, as a stream's does.
func (q *fakeQueue) Shutdown(context.Context) error {
	if q.ops != nil {
		close(q.ops)
		<-q.done
	}
	if p := q.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (q *fakeQueue) fail(err error) { q.err.CompareAndSwap(nil, &err) }

func (q *fakeQueue) mem(m fenced, staging bool) (*fakeMem, error) {
	fm, ok := m.(*fakeMem)
	if !ok || q.dev == nil || fm.dev != q.dev || fm.staging != staging {
		return nil, fmt.Errorf("buffer %T (staging %v) used by a queue on %v", m, staging, q.dev)
	}
	return fm, nil
}

func (q *fakeQueue) upload(dst devMem, at int, src stagingMem, from, n int) error {
	if q.k.failUpload > 0 && q.k.uploads.Add(1) == q.k.failUpload {
		return errors.New("fake DMA error")
	}
	d, err := q.mem(dst, false)
	if err != nil {
		return err
	}
	s, err := q.mem(src, true)
	if err != nil {
		return err
	}
	if at < 0 || from < 0 || n <= 0 || at+n > len(d.data) || from+n > len(s.data) {
		return fmt.Errorf("upload of %d elements into %d from %d (staging %d from %d)", n, len(d.data), at, len(s.data), from)
	}
	q.k.staged.Add(1)
	if q.dev.gemmsQueued.Load() > 0 {
		q.dev.overlapped.Add(1)
	}
	q.ops <- func() { copy(d.data[at:at+n], s.data[from:from+n]) }
	return nil
}

// within2D reports whether the rows x cols matrix in host memory h
// (stride ld) lies within one registration of k (PinHost's or
// registerHost's), as the driver requires of a 2-D copy: each registered
// range is an allocation of its own, and a copy may not span two.
func (k *fakeGPU) within2D(h []float64, ld, rows, cols int) error {
	if rows <= 0 || cols <= 0 || cols > ld || (rows-1)*ld+cols > len(h) {
		return fmt.Errorf("fake: %dx%d (stride %d) outside %d elements", rows, cols, ld, len(h))
	}
	ext := h[:(rows-1)*ld+cols]
	if k.registered.within(ext) || k.pinned.within(ext) {
		return nil
	}
	if k.registered.covers(ext) {
		k.spanning.Add(1)
		return errors.New("fake: CUDA_ERROR_INVALID_VALUE: 2-D copy spans two registrations")
	}
	return errors.New("fake: direct copy with memory not registered")
}

// within2DDevice checks that the rows x cols matrix from element at of d
// (stride ld) lies in d.
func within2DDevice(d *fakeMem, at, ld, rows, cols int) error {
	if at < 0 || rows <= 0 || cols <= 0 || cols > ld || at+(rows-1)*ld+cols > len(d.data) {
		return fmt.Errorf("fake: %dx%d (stride %d) from element %d outside a device block of %d", rows, cols, ld, at, len(d.data))
	}
	return nil
}

func (q *fakeQueue) uploadFrom(dst devMem, at, ldd int, src []float64, lds, rows, cols int) error {
	d, err := q.mem(dst, false)
	if err != nil {
		return err
	}
	if err := errors.Join(q.k.within2D(src, lds, rows, cols), within2DDevice(d, at, ldd, rows, cols)); err != nil {
		return fmt.Errorf("direct upload: %w", err)
	}
	if q.dev.gemmsQueued.Load() > 0 {
		q.dev.overlapped.Add(1)
	}
	q.k.direct.Add(1)
	q.ops <- func() {
		for r := range rows {
			copy(d.data[at+r*ldd:at+r*ldd+cols], src[r*lds:r*lds+cols])
		}
	}
	return nil
}

func (q *fakeQueue) downloadTo(dst []float64, ldd int, src devMem, at, lds, rows, cols int) error {
	s, err := q.mem(src, false)
	if err != nil {
		return err
	}
	if err := errors.Join(q.k.within2D(dst, ldd, rows, cols), within2DDevice(s, at, lds, rows, cols)); err != nil {
		return fmt.Errorf("direct download: %w", err)
	}
	q.k.direct.Add(1)
	q.ops <- func() {
		q.dev.noteDownload(s, at, lds, rows, cols)
		for r := range rows {
			copy(dst[r*ldd:r*ldd+cols], s.data[at+r*lds:at+r*lds+cols])
		}
	}
	return nil
}

func (q *fakeQueue) download(dst stagingMem, at int, src devMem, from, n int) error {
	d, err := q.mem(dst, true)
	if err != nil {
		return err
	}
	s, err := q.mem(src, false)
	if err != nil {
		return err
	}
	if at < 0 || from < 0 || n <= 0 || at+n > len(d.data) || from+n > len(s.data) {
		return fmt.Errorf("download of %d elements from %d from %d (staging %d from %d)", n, len(s.data), from, len(d.data), at)
	}
	q.k.staged.Add(1)
	q.ops <- func() {
		q.dev.noteDownload(s, from, n, 1, n)
		copy(d.data[at:at+n], s.data[from:from+n])
	}
	return nil
}

func (q *fakeQueue) gemm(m, n, k int, a, b, c devMem, beta float64) error {
	if !q.compute {
		return errors.New("gemm on a copy queue")
	}
	da, err := q.mem(a, false)
	if err != nil {
		return err
	}
	db, err := q.mem(b, false)
	if err != nil {
		return err
	}
	dc, err := q.mem(c, false)
	if err != nil {
		return err
	}
	q.dev.gemmsQueued.Add(1)
	q.ops <- func() {
		time.Sleep(q.k.gemmDelay)
		gonum.Implementation{}.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, da.data, k, db.data, n, beta, dc.data, n)
		q.dev.mu.Lock()
		delete(q.dev.downloads, dc)
		q.dev.mu.Unlock()
		q.dev.products.Add(1)
		q.dev.gemmsQueued.Add(-1)
	}
	return nil
}

func (q *fakeQueue) signal(b fenced) error {
	f, ok := b.(*fakeMem)
	if !ok {
		return fmt.Errorf("signal on %T", b)
	}
	ch := make(chan struct{})
	f.mu.Lock()
	f.ch = ch
	f.mu.Unlock()
	q.ops <- func() { close(ch) }
	return nil
}

func (q *fakeQueue) await(b fenced) error {
	f, ok := b.(*fakeMem)
	if !ok {
		return fmt.Errorf("await on %T", b)
	}
	if ch := f.current(); ch != nil {
		q.ops <- func() { <-ch }
	}
	return nil
}

func (q *fakeQueue) wait(b fenced) error {
	f, ok := b.(*fakeMem)
	if !ok {
		return fmt.Errorf("wait on %T", b)
	}
	if ch := f.current(); ch != nil {
		<-ch
	}
	return nil
}

func (q *fakeQueue) newFence() (fenced, error) { return &fakeMem{dev: q.dev}, nil }

// fakeStamp is a point of a fake queue's work, timed when the queue's
// goroutine passes it.
type fakeStamp struct {
	dev   *fakeDevice
	t     time.Time
	freed *atomic.Int64
}

func (q *fakeQueue) stamp() (stamp, error) {
	s := &fakeStamp{dev: q.dev, freed: &q.k.stampsFreed}
	q.k.stamps.Add(1)
	q.ops <- func() { s.t = time.Now() }
	return s, nil
}

func (s *fakeStamp) since(origin stamp) (time.Duration, error) {
	o, ok := origin.(*fakeStamp)
	if !ok || o.dev != s.dev {
		return 0, fmt.Errorf("stamps of %v and %v", s.dev, origin)
	}
	return s.t.Sub(o.t), nil
}

func (s *fakeStamp) free() error { s.freed.Add(1); return nil }

func TestCountMod(t *testing.T) {
	for lo := range 12 {
		for hi := range 14 {
			for n := 1; n < 5; n++ {
				for d := range n {
					want := 0
					for x := lo; x < hi; x++ {
						if x%n == d {
							want++
						}
					}
					if got := countMod(lo, hi, d, n); got != want {
						t.Fatalf("countMod(%d, %d, %d, %d) = %d, want %d", lo, hi, d, n, got, want)
					}
				}
			}
		}
	}
}

// TestOffloadUses checks, on random plans, the device release counts
// against the schedule: each load is used on device d exactly usesOn times,
// and the uses on all devices add up to the load's release count on the
// host.
func TestOffloadUses(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	orders := map[Order]int{}
	for range 300 {
		m, k, n := 1+rng.IntN(30), 1+rng.IntN(30), 1+rng.IntN(30)
		devices := 1 + rng.IntN(4)
		cfg := Config{BlockSize: 1 + rng.IntN(8), Copies: 1 + rng.IntN(3), Kernel: newFakeGPU(devices)}
		inMemory := rng.IntN(3) == 0
		if rng.IntN(2) == 0 {
			cfg.DeviceMemory = 1 + rng.Int64N(8*int64(m*k+k*n+m*n))
		}
		p, err := newPlan(m, k, n, inMemory, cfg)
		if errors.Is(err, ErrBudget) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		orders[p.Order]++
		if p.Devices != devices {
			t.Fatalf("%v: %d devices, want %d", p, p.Devices, devices)
		}
		if cfg.DeviceMemory > 0 && p.DevicePoolBytes > cfg.DeviceMemory {
			t.Fatalf("%v: device pools of %d bytes exceed %d", p, p.DevicePoolBytes, cfg.DeviceMemory)
		}
		used := map[loadKey][]int{}
		cur := newCursor(&p)
		for {
			s, ok := cur.next()
			if !ok {
				break
			}
			d := p.deviceOf(s.i, s.j, devices)
			for _, key := range []loadKey{{OperandA, s.i, s.l, s.genA}, {OperandB, s.l, s.j, s.genB}} {
				if used[key] == nil {
					used[key] = make([]int, devices)
				}
				used[key][d]++
			}
		}
		for r := range p.requests {
			key := loadKey{r.Operand, r.Row, r.Col, r.Gen}
			sum := 0
			for d := range devices {
				if got, want := p.usesOn(r, d, devices), used[key][d]; got != want {
					t.Fatalf("%v: load %+v on device %d: usesOn %d, schedule %d", p, key, d, got, want)
				}
				sum += used[key][d]
			}
			if sum != r.Uses {
				t.Fatalf("%v: load %+v used %d times, released after %d", p, key, sum, r.Uses)
			}
		}
	}
	for _, o := range []Order{RowPanels, ColumnPanels, Streamed} {
		if orders[o] == 0 {
			t.Errorf("no random plan used %v (%v)", o, orders)
		}
	}
}

// TestOffloadProducts runs the offload graph on fake devices, in memory and
// out of core, with device budgets that force each traversal, and checks
// the product, the traffic and that every device buffer went back.
func TestOffloadProducts(t *testing.T) {
	type tc struct {
		m, k, n, bs, devices int
		devMem, hostMem      int64
		files                bool
		order                Order
	}
	const blk = 8 * 16 * 16 // one 16x16 block
	cases := []tc{
		{m: 100, k: 70, n: 90, bs: 16, devices: 1, order: RowPanels},
		{m: 100, k: 70, n: 90, bs: 16, devices: 3, order: RowPanels},
		{m: 16, k: 130, n: 16, bs: 16, devices: 2, order: RowPanels}, // KB = 9, one block of C
		{m: 40, k: 16, n: 120, bs: 16, devices: 2, devMem: 14 * blk, order: ColumnPanels},
		{m: 100, k: 70, n: 90, bs: 16, devices: 2, devMem: 10 * blk, order: Streamed},
		{m: 100, k: 70, n: 90, bs: 16, devices: 2, devMem: 20 * blk, order: RowPanels},
		{m: 100, k: 70, n: 90, bs: 16, devices: 3, files: true, hostMem: 120 * blk, order: RowPanels},
		{m: 100, k: 70, n: 90, bs: 16, devices: 2, files: true, hostMem: 80 * blk, devMem: 10 * blk, order: Streamed},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%dx%dx%d/bs%d/dev%d/mem%d/host%d/files%v", c.m, c.k, c.n, c.bs, c.devices, c.devMem, c.hostMem, c.files)
		t.Run(name, func(t *testing.T) {
			a, b := Random(c.m, c.k, 7), Random(c.k, c.n, 8)
			fake := newFakeGPU(c.devices)
			cfg := Config{BlockSize: c.bs, Copies: 2, Kernel: fake, DeviceMemory: c.devMem, MemoryBudget: c.hostMem}
			var out *Dense
			var rep *Report
			var err error
			if c.files {
				dir := t.TempDir()
				pa, pb, pc := writeNpy(t, dir, "a.npy", a), writeNpy(t, dir, "b.npy", b), dir+"/c.npy"
				rep, err = MultiplyFiles(context.Background(), pa, pb, pc, cfg)
				if err == nil {
					out = readNpy(t, pc)
				}
			} else {
				out, rep, err = MultiplyDense(context.Background(), a, b, cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			checkProduct(t, a, b, out, reference(t, a, b))
			p := rep.Plan
			if p.Order != c.order {
				t.Errorf("order %v, want %v (%v)", p.Order, c.order, p)
			}
			if rep.Products != int64(p.Multiplies) {
				t.Errorf("%d products, want %d", rep.Products, p.Multiplies)
			}
			if rep.UploadBytes != p.UploadBytes {
				t.Errorf("uploaded %d bytes, plan says %d (%v)", rep.UploadBytes, p.UploadBytes, p)
			}
			// C is summed on the devices: it crosses the bus once.
			if want := 8 * int64(c.m) * int64(c.n); rep.DownloadBytes != want || p.DownloadBytes != want {
				t.Errorf("downloaded %d bytes, plan %d, want |C| = %d", rep.DownloadBytes, p.DownloadBytes, want)
			}
			if moved, least := p.BusBytes(); moved != rep.UploadBytes+rep.DownloadBytes || least != 8*int64(c.m*c.k+c.k*c.n+c.m*c.n) {
				t.Errorf("bus bytes %d (least %d), run moved %d", moved, least, rep.UploadBytes+rep.DownloadBytes)
			}
			if len(rep.DeviceBusy) != c.devices {
				t.Errorf("busy fractions %v for %d devices", rep.DeviceBusy, c.devices)
			}
			var products int64
			for _, d := range fake.devs {
				if live := d.live.Load(); live != 0 {
					t.Errorf("%v: %d buffers never freed", d, live)
				}
				if peak := d.peak.Load(); peak > int64(p.DevicePoolA+p.DevicePoolB+p.DevicePoolC) {
					t.Errorf("%v: %d buffers at once, pools hold %d", d, peak, p.DevicePoolA+p.DevicePoolB+p.DevicePoolC)
				}
				if d.twice != 0 {
					t.Errorf("%v: %d blocks of C downloaded more than once", d, d.twice)
				}
				if d.products.Load() == 0 && p.MB*p.NB >= c.devices && p.Order != Streamed {
					t.Errorf("%v computed nothing (%v)", d, p)
				}
				products += d.products.Load()
			}
			if products != int64(p.Multiplies) {
				t.Errorf("devices computed %d products, want %d", products, p.Multiplies)
			}
			for _, ps := range rep.Stats.Pools {
				if ps.InUse != 0 {
					t.Errorf("pool %s (clone %d): %d buffers still out", ps.Name, ps.Clone, ps.InUse)
				}
				if ps.Peak > ps.Capacity {
					t.Errorf("pool %s: peak %d over capacity %d", ps.Name, ps.Peak, ps.Capacity)
				}
			}
		})
	}
}

// TestOffloadUploadsEachBlockOnce checks the point of device pools with
// release counts: with room for all of A on the devices, each block of A
// and of B crosses to a device once, however many products use it.
func TestOffloadUploadsEachBlockOnce(t *testing.T) {
	a, b := Random(96, 64, 1), Random(64, 80, 2)
	_, rep, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 16, Kernel: newFakeGPU(1)})
	if err != nil {
		t.Fatal(err)
	}
	if want := 8 * int64(96*64+64*80); rep.UploadBytes != want {
		t.Fatalf("uploaded %d bytes, want %d (A and B once)", rep.UploadBytes, want)
	}
}

// TestOffloadAccumulatesOnDevice checks that each block of C is summed on
// its device and downloaded once, however long the inner dimension: with
// KB = 9 products per block, the bytes that come back are |C|, and with
// room for A on the device the bytes moved are the least possible.
func TestOffloadAccumulatesOnDevice(t *testing.T) {
	a, b := Random(48, 144, 1), Random(144, 32, 2)
	fake := newFakeGPU(1)
	out, rep, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 16, Kernel: fake})
	if err != nil {
		t.Fatal(err)
	}
	checkProduct(t, a, b, out, reference(t, a, b))
	if want := int64(8 * 48 * 32); rep.DownloadBytes != want {
		t.Fatalf("downloaded %d bytes, want |C| = %d (one download per block of C)", rep.DownloadBytes, want)
	}
	if want := int64(8 * (48*144 + 144*32)); rep.UploadBytes != want {
		t.Fatalf("uploaded %d bytes, want |A| + |B| = %d", rep.UploadBytes, want)
	}
	if moved, least := rep.Plan.BusBytes(); moved != least {
		t.Fatalf("plan moves %d bytes, the least is %d", moved, least)
	}
	for _, d := range fake.devs {
		if d.twice != 0 {
			t.Errorf("%v: %d blocks of C downloaded more than once", d, d.twice)
		}
	}
}

// TestOffloadOverlap checks that uploads do not wait for the products
// queued before them: with products that take a while, some uploads are
// queued while an earlier product has not run yet, and the result is
// still right (the fences keep buffers from being overwritten early).
func TestOffloadOverlap(t *testing.T) {
	a, b := Random(64, 64, 1), Random(64, 64, 2)
	fake := newFakeGPU(1)
	fake.gemmDelay = 2 * time.Millisecond
	// Room for one panel of two block rows: A is uploaded in turns and
	// buffers are reused, so fences matter.
	out, rep, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 16, Kernel: fake, DeviceMemory: 8 * 16 * 16 * 17})
	if err != nil {
		t.Fatal(err)
	}
	checkProduct(t, a, b, out, reference(t, a, b))
	if rep.Plan.Panels < 2 {
		t.Fatalf("plan %v: want several panels", rep.Plan)
	}
	if n := fake.devs[0].overlapped.Load(); n == 0 {
		t.Fatalf("no upload was queued while a product ran (%d products)", rep.Products)
	}
	if busy := rep.DeviceBusy[0]; busy <= 0 || busy > 1.01 {
		t.Errorf("busy fraction %v, want in (0, 1]", busy)
	}
}

// TestParallelCopy checks the banded copy against a plain one, with
// ordinary and with non-temporal stores; the elements between the rows of
// dst stay untouched.
func TestParallelCopy(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, tc := range []struct{ rows, cols, lds, ldd, workers int }{
			{3, 5, 7, 5, 4}, {1024, 300, 301, 300, 4}, {1000, 512, 512, 512, 3}, {600, 700, 900, 701, 8}, {7, 9, 9, 9, 1},
		} {
			src := make([]float64, tc.rows*tc.lds)
			for i := range src {
				src[i] = float64(i)
			}
			dst := make([]float64, tc.rows*tc.ldd)
			for i := range dst {
				dst[i] = -1
			}
			parallelCopy(dst, tc.ldd, src, tc.lds, tc.rows, tc.cols, tc.workers, stream)
			for r := range tc.rows {
				for c := range tc.ldd {
					want := -1.0
					if c < tc.cols {
						want = src[r*tc.lds+c]
					}
					if dst[r*tc.ldd+c] != want {
						t.Fatalf("stream %v %+v: (%d,%d) = %v, want %v", stream, tc, r, c, dst[r*tc.ldd+c], want)
					}
				}
			}
		}
	}
}

// TestCopyStream checks the non-temporal copy at every alignment of source
// and destination and every length up to 40 (the 8-element loop, the
// aligning first element, the tail): exactly the source's elements are
// written.
func TestCopyStream(t *testing.T) {
	buf := make([]float64, 64)
	src := make([]float64, 64)
	for i := range src {
		src[i] = float64(i + 1)
	}
	for so := range 3 {
		for do := range 3 {
			for n := range 41 {
				for i := range buf {
					buf[i] = -1
				}
				copyStream(buf[do:do+n], src[so:so+n])
				for i := range buf {
					want := -1.0
					if i >= do && i < do+n {
						want = src[so+i-do]
					}
					if buf[i] != want {
						t.Fatalf("src+%d dst+%d n=%d: element %d = %v, want %v", so, do, n, i, buf[i], want)
					}
				}
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("copyStream into a shorter slice did not panic")
		}
	}()
	copyStream(buf[:2], src[:3])
}

// BenchmarkPack compares packing a 2048x2048 block out of a 4096-wide
// matrix with ordinary and non-temporal stores, on every CPU.
func BenchmarkPack(b *testing.B) {
	const bs, w = 2048, 4096
	host := make([]float64, bs*w)
	st := make([]float64, bs*bs)
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("stream=%v", stream), func(b *testing.B) {
			b.SetBytes(8 * bs * bs)
			for b.Loop() {
				parallelCopy(st, bs, host, w, bs, bs, runtime.GOMAXPROCS(0), stream)
			}
		})
	}
}

// TestOffloadErrors checks that a failing copy stops the run with an error
// naming the task, and that the device memory is freed all the same; and
// that device budgets too small for one pass are refused.
func TestOffloadErrors(t *testing.T) {
	a, b := Random(64, 64, 1), Random(64, 64, 2)
	fake := newFakeGPU(2)
	fake.failUpload = 5
	_, _, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 16, Kernel: fake})
	if err == nil || !strings.Contains(err.Error(), "fake DMA error") || !strings.Contains(err.Error(), "copy in") {
		t.Fatalf("error %v, want the DMA error naming the copy-in task", err)
	}
	var te *task.Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v is not a task error", err)
	}
	for _, d := range fake.devs {
		if live := d.live.Load(); live != 0 {
			t.Errorf("%v: %d buffers never freed after the failure", d, live)
		}
	}

	_, _, err = MultiplyDense(context.Background(), a, b, Config{BlockSize: 16, Kernel: newFakeGPU(1), DeviceMemory: 4 * 8 * 16 * 16})
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("tiny device budget: error %v, want ErrBudget", err)
	}
	_, _, err = MultiplyDense(context.Background(), a, b, Config{Kernel: newFakeGPU(1), DeviceMemory: -1})
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("negative device memory: error %v, want ErrConfig", err)
	}
}

// TestOffloadCancel cancels a run on fake devices and expects it to end.
func TestOffloadCancel(t *testing.T) {
	a, b := Random(128, 128, 1), Random(128, 128, 2)
	ctx, cancel := context.WithCancel(context.Background())
	fake := newFakeGPU(2)
	n := 0
	_, _, err := MultiplyDense(ctx, a, b, Config{BlockSize: 8, Kernel: fake, Progress: func(int, int) {
		if n++; n == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	for _, d := range fake.devs {
		if live := d.live.Load(); live != 0 {
			t.Errorf("%v: %d buffers never freed after cancel", d, live)
		}
	}
}

// TestOffloadDefaultBlockSize: products on devices default to large
// blocks, CPU products keep theirs.
func TestOffloadDefaultBlockSize(t *testing.T) {
	p, err := newPlan(5000, 5000, 5000, true, Config{Kernel: newFakeGPU(1)})
	if err != nil || p.BlockSize != DefaultDeviceBlockSize {
		t.Fatalf("device plan: block %d, %v; want %d", p.BlockSize, err, DefaultDeviceBlockSize)
	}
	p, err = newPlan(5000, 5000, 5000, true, Config{Kernel: Gonum()})
	if err != nil || p.BlockSize != DefaultBlockSize {
		t.Fatalf("CPU plan: block %d, %v; want %d", p.BlockSize, err, DefaultBlockSize)
	}
	// Large products get larger blocks, unless the device memory is bounded.
	for _, c := range []struct {
		n      int
		budget int64
		want   int
	}{{16384, 0, LargeDeviceBlockSize}, {16384, 8 << 30, DefaultDeviceBlockSize}, {8192, 0, LargeDeviceBlockSize}, {8191, 0, DefaultDeviceBlockSize}} {
		p, err = newPlan(c.n, c.n, c.n, true, Config{Kernel: newFakeGPU(1), DeviceMemory: c.budget})
		if err != nil || p.BlockSize != c.want {
			t.Fatalf("n=%d, budget %d: block %d, %v; want %d", c.n, c.budget, p.BlockSize, err, c.want)
		}
	}
}

// TestOffloadDirect runs the offload graph with the operands page-locked
// for the run (HTGS_MATMUL_REGISTER=1) and pinned by PinHost: blocks go
// straight between the matrices and the devices (the fake refuses direct
// copies from memory not registered), the product is right, the bytes
// moved are those of the staged graph, and the registrations are undone.
func TestOffloadDirect(t *testing.T) {
	a, b := Random(100, 70, 1), Random(70, 90, 2)
	want := reference(t, a, b)
	for _, mode := range []string{"register", "pinhost"} {
		t.Run(mode, func(t *testing.T) {
			fake := newFakeGPU(2)
			cfg := Config{BlockSize: 16, Copies: 2, Kernel: fake}
			c := NewDense(100, 90)
			if mode == "register" {
				t.Setenv("HTGS_MATMUL_REGISTER", "1")
			} else {
				unpin, err := PinHost(fake, a, b, c)
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := unpin(); err != nil {
						t.Error(err)
					}
					if len(fake.pinned.pins) != 0 || len(fake.registered.pins) != 0 {
						t.Errorf("pins left after unpin: %v %v", fake.pinned.pins, fake.registered.pins)
					}
				}()
			}
			rep, err := Multiply(context.Background(), a, b, c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkProduct(t, a, b, c, want)
			p := rep.Plan
			if rep.UploadBytes != p.UploadBytes || rep.DownloadBytes != 8*100*90 {
				t.Errorf("moved %d up, %d down; plan %d up, |C| %d", rep.UploadBytes, rep.DownloadBytes, p.UploadBytes, 8*100*90)
			}
			// Every upload and download was direct: one per load and
			// device, one per block of C.
			blocksUp := rep.UploadBytes / (8 * 16 * 16) // at least; edge blocks are smaller
			if n := fake.direct.Load(); n < int64(p.MB*p.NB) || n > blocksUp+int64(p.MB*p.NB)+int64(p.MB*p.KB+p.KB*p.NB)*2 {
				t.Errorf("%d direct copies for %v", n, p)
			}
			if mode == "register" {
				if r := fake.registrations.Load(); r != 3 {
					t.Errorf("%d registrations, want 3 (A, B, C)", r)
				}
				if len(fake.registered.pins) != 0 {
					t.Errorf("registrations left after the run: %v", fake.registered.pins)
				}
			}
			for _, d := range fake.devs {
				if d.twice != 0 {
					t.Errorf("%v: %d blocks of C downloaded more than once", d, d.twice)
				}
			}
		})
	}
	// A and B one matrix: registered once; a source that is not *Dense
	// (out of core) goes through staging.
	t.Run("same", func(t *testing.T) {
		t.Setenv("HTGS_MATMUL_REGISTER", "1")
		fake := newFakeGPU(1)
		x := Random(48, 48, 3)
		out, _, err := MultiplyDense(context.Background(), x, x, Config{BlockSize: 16, Kernel: fake})
		if err != nil {
			t.Fatal(err)
		}
		checkProduct(t, x, x, out, reference(t, x, x))
		if r := fake.registrations.Load(); r != 2 {
			t.Errorf("%d registrations, want 2 (A = B, and C)", r)
		}
	})
}

// TestOffloadTuning checks the environment overrides of the offload knobs
// and that the graph runs right with unusual values.
func TestOffloadTuning(t *testing.T) {
	t.Setenv("HTGS_MATMUL_PACK", "3")
	t.Setenv("HTGS_MATMUL_STAGING", "5")
	t.Setenv("HTGS_MATMUL_COPYOUT", "1")
	t.Setenv("HTGS_MATMUL_DEVCACHE", "0")
	tune := tuningFor(1)
	if tune.packWorkers != 3 || tune.stagingIn != 5 || tune.copyOut != 1 || tune.hostCopy != copyStaging || tune.devCache {
		t.Fatalf("tuning %+v", tune)
	}
	a, b := Random(64, 80, 1), Random(80, 48, 2)
	out, _, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 16, Kernel: newFakeGPU(2)})
	if err != nil {
		t.Fatal(err)
	}
	checkProduct(t, a, b, out, reference(t, a, b))
	t.Setenv("HTGS_MATMUL_PACK", "x")
	t.Setenv("HTGS_MATMUL_DEVCACHE", "")
	if tune := tuningFor(1); tune.packWorkers < 1 || !tune.devCache {
		t.Fatalf("defaults %+v", tune)
	}
}

// TestOffloadSlabs checks the staged copies in bands of rows
// (HTGS_MATMUL_SLABS, bands of at least HTGS_MATMUL_SLABMIN elements):
// the result is right, every band of every block of A, B and C crosses
// the bus in a staged copy of its own (edge blocks, smaller, in fewer
// bands), the bytes moved are the plan's and each block of C comes back
// once.
func TestOffloadSlabs(t *testing.T) {
	for _, slabs := range []int{1, 3, 5, 40} {
		t.Run(fmt.Sprint(slabs), func(t *testing.T) {
			t.Setenv("HTGS_MATMUL_SLABS", fmt.Sprint(slabs))
			t.Setenv("HTGS_MATMUL_SLABMIN", "48")
			a, b := Random(40, 48, 1), Random(48, 36, 2)
			fake := newFakeGPU(1)
			out, rep, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 16, Kernel: fake})
			if err != nil {
				t.Fatal(err)
			}
			checkProduct(t, a, b, out, reference(t, a, b))
			// The copies a block of r x c elements takes.
			bands := func(r, c int) int64 { return int64(ceilDiv(r, slabRows(r, c, slabs, 48))) }
			var want int64
			edges := func(n int) []int { // block extents along a dimension of n
				var e []int
				for i := 0; i < n; i += 16 {
					e = append(e, min(16, n-i))
				}
				return e
			}
			for _, r := range edges(40) { // A: 40 x 48
				for _, c := range edges(48) {
					want += bands(r, c)
				}
			}
			for _, r := range edges(48) { // B: 48 x 36
				for _, c := range edges(36) {
					want += bands(r, c)
				}
			}
			for _, r := range edges(40) { // C: 40 x 36
				for _, c := range edges(36) {
					want += bands(r, c)
				}
			}
			if got := fake.staged.Load(); got != want {
				t.Errorf("%d staged copies, want %d (one per band)", got, want)
			}
			if slabs > 1 && want <= int64(3*3+3*3+3*3) {
				t.Errorf("bands %d: no block was split", want)
			}
			if rep.UploadBytes != 8*int64(40*48+48*36) || rep.DownloadBytes != 8*int64(40*36) {
				t.Errorf("moved %d up, %d down", rep.UploadBytes, rep.DownloadBytes)
			}
			for _, d := range fake.devs {
				if d.twice != 0 {
					t.Errorf("%v: %d blocks of C downloaded more than once", d, d.twice)
				}
			}
		})
	}
}

// TestOffloadChunks checks chunk mode (HTGS_MATMUL_CHUNK, HTGS_MATMUL_RING):
// every block of A, B and C crosses the bus in bands of whole rows that
// fill one chunk of the ring each, the result is right (a chunk refilled
// before its upload passed, or unpacked before its download did, would
// show in it, and to the race detector), into a *Dense and into a file,
// the bytes moved are the plan's, each block of C comes back once, and
// the staging pools hold a ring per task copy.
func TestOffloadChunks(t *testing.T) {
	for _, c := range []struct {
		kib, ring, devices int
		files              bool
	}{{1, 1, 1, false}, {1, 2, 1, false}, {1, 3, 2, false}, {2, 4, 1, true}, {1, 2, 2, true}, {64, 2, 1, false}} {
		t.Run(fmt.Sprintf("%dKiB/ring%d/dev%d/files%v", c.kib, c.ring, c.devices, c.files), func(t *testing.T) {
			t.Setenv("HTGS_MATMUL_CHUNK", fmt.Sprint(c.kib))
			t.Setenv("HTGS_MATMUL_RING", fmt.Sprint(c.ring))
			const m, k, n, bs = 70, 60, 50, 32
			a, b := Random(m, k, 3), Random(k, n, 4)
			fake := newFakeGPU(c.devices)
			fake.gemmDelay = time.Millisecond
			cfg := Config{BlockSize: bs, Kernel: fake}
			var out *Dense
			var rep *Report
			var err error
			if c.files {
				dir := t.TempDir()
				rep, err = MultiplyFiles(context.Background(), writeNpy(t, dir, "a.npy", a), writeNpy(t, dir, "b.npy", b), dir+"/c.npy", cfg)
				if err == nil {
					out = readNpy(t, dir+"/c.npy")
				}
			} else {
				out, rep, err = MultiplyDense(context.Background(), a, b, cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			checkProduct(t, a, b, out, reference(t, a, b))
			chunk := min(c.kib*1024/8/bs*bs, bs*bs) // elements: whole rows of the widest block, at most a block
			edges := func(n int) []int {
				var e []int
				for i := 0; i < n; i += bs {
					e = append(e, min(bs, n-i))
				}
				return e
			}
			var want int64 // staged copies: one per band of chunk/cols rows
			for _, mat := range [][2]int{{m, k}, {k, n}, {m, n}} {
				for _, r := range edges(mat[0]) {
					for _, cols := range edges(mat[1]) {
						want += int64(ceilDiv(r, chunk/cols))
					}
				}
			}
			uploads := rep.Plan.UploadBytes / 8 // A or B again for a second device: more bands
			if uploads == int64(m*k+k*n) {
				if got := fake.staged.Load(); got != want {
					t.Errorf("%d staged copies, want %d (one per band of a chunk)", got, want)
				}
			} else if fake.staged.Load() <= want {
				t.Errorf("%d staged copies, want more than %d", fake.staged.Load(), want)
			}
			if rep.UploadBytes != rep.Plan.UploadBytes || rep.DownloadBytes != 8*int64(m*n) {
				t.Errorf("moved %d up (plan %d), %d down", rep.UploadBytes, rep.Plan.UploadBytes, rep.DownloadBytes)
			}
			for _, d := range fake.devs {
				if d.twice != 0 {
					t.Errorf("%v: %d blocks of C downloaded more than once", d, d.twice)
				}
			}
			copyOut := tuningFor(c.devices).copyOut
			staging := 0
			for _, ps := range rep.Stats.Pools {
				_, name, _ := strings.Cut(ps.Name, "/") // devices[d]/name
				if wantCap := map[string]int{"staging in": c.ring, "staging out": copyOut * c.ring}[name]; wantCap != 0 {
					staging++
					if ps.Capacity != wantCap {
						t.Errorf("pool %s: capacity %d, want %d", ps.Name, ps.Capacity, wantCap)
					}
				}
				if ps.InUse != 0 || ps.Peak > ps.Capacity {
					t.Errorf("pool %s: %d still out, peak %d of %d", ps.Name, ps.InUse, ps.Peak, ps.Capacity)
				}
			}
			if staging != 2*c.devices {
				t.Errorf("%d staging pools in the statistics, want %d", staging, 2*c.devices)
			}
		})
	}
	t.Run("defaults", func(t *testing.T) {
		t.Setenv("HTGS_MATMUL_CHUNK", "")
		if tune := tuningFor(1); tune.chunk != 0 || tune.stream != defaultStream {
			t.Errorf("chunk mode off by default: %+v", tune)
		}
		t.Setenv("HTGS_MATMUL_CHUNK", "4096")
		if tune := tuningFor(1); tune.chunk != 4096*128 || tune.ring != defaultRing || tune.stream || tune.unpackStream != defaultStream {
			t.Errorf("chunk mode of 4 MiB: %+v (want packing through the cache, unpacking as by default)", tune)
		}
		t.Setenv("HTGS_MATMUL_STREAM", "1")
		if tune := tuningFor(1); !tune.stream || !tune.unpackStream {
			t.Errorf("chunk mode with HTGS_MATMUL_STREAM=1: %+v", tune)
		}
	})
}

// TestOffloadTrace checks the device trace (HTGS_MATMUL_TRACE): a product
// writes a trace in the Trace Event Format with one event per copy and per
// product, each at least as long as the fake device made it, on the rows
// of its queues, and a summary whose figures add up; every stamp is freed;
// a folder that cannot be written fails the call after the product, and
// without the variable nothing is stamped.
func TestOffloadTrace(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HTGS_MATMUL_TRACE", dir)
	t.Setenv("HTGS_MATMUL_SLABS", "2")
	t.Setenv("HTGS_MATMUL_SLABMIN", "64")
	a, b := Random(48, 32, 1), Random(32, 40, 2)
	fake := newFakeGPU(2)
	fake.gemmDelay = 2 * time.Millisecond
	out, rep, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 16, Kernel: fake})
	if err != nil {
		t.Fatal(err)
	}
	checkProduct(t, a, b, out, reference(t, a, b))
	if made, freed := fake.stamps.Load(), fake.stampsFreed.Load(); made == 0 || made != freed {
		t.Errorf("%d stamps made, %d freed", made, freed)
	}
	js, _ := filepath.Glob(filepath.Join(dir, "matmul-48x32x40-*.json"))
	txt, _ := filepath.Glob(filepath.Join(dir, "matmul-48x32x40-*.txt"))
	if len(js) != 1 || len(txt) != 1 {
		t.Fatalf("trace files %v %v", js, txt)
	}
	raw, err := os.ReadFile(js[0])
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Name string
			Ph   string
			Ts   float64
			Dur  float64
			Pid  int
			Tid  int
			Args map[string]any
		}
	}
	if err := json.Unmarshal(raw, &tr); err != nil {
		t.Fatal(err)
	}
	queues := map[[2]int]string{} // (pid, tid) -> the queue's name
	for _, e := range tr.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" {
			queues[[2]int{e.Pid, e.Tid}], _ = e.Args["name"].(string)
		}
	}
	for dev := range 2 { // a copy of copy out may have had no block to download
		var names []string
		for k, q := range queues {
			if k[0] == dev {
				names = append(names, strings.TrimRight(q, " 0123456789"))
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, []string{"copy in", "copy out", "multiply"}) {
			t.Errorf("device %d: queues %v, want copy in, copy out and multiply", dev, names)
		}
	}
	count := map[string]int{}
	var upBytes, downBytes float64
	for _, e := range tr.TraceEvents {
		if e.Ph == "M" {
			continue
		}
		count[e.Name]++
		if e.Ph != "X" || e.Ts < 0 || e.Pid < 0 || e.Pid > 1 {
			t.Errorf("event %+v", e)
		}
		want := map[string]string{"gemm": "multiply", "upload": "copy in", "download": "copy out"}[e.Name]
		if q := queues[[2]int{e.Pid, e.Tid}]; !strings.HasPrefix(q, want) {
			t.Errorf("%s on queue %q", e.Name, q)
		}
		switch e.Name {
		case "gemm":
			if e.Dur < 2000 { // µs
				t.Errorf("product of %.0f µs, the fake takes 2 ms", e.Dur)
			}
		case "upload":
			upBytes += e.Args["bytes"].(float64)
		case "download":
			downBytes += e.Args["bytes"].(float64)
		}
	}
	if count["gemm"] != int(rep.Products) || upBytes != float64(rep.UploadBytes) || downBytes != float64(rep.DownloadBytes) {
		t.Errorf("trace: %v, %v bytes up, %v down; run: %d products, %d up, %d down", count, upBytes, downBytes, rep.Products, rep.UploadBytes, rep.DownloadBytes)
	}
	if count["upload"] <= 3*2+2*3 { // blocks of A and B, each in 2 bands, some to both devices
		t.Errorf("%d uploads: bands not traced one by one", count["upload"])
	}
	sum, err := os.ReadFile(txt[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary of %s:\n%s", filepath.Base(txt[0]), sum)
	for _, want := range []string{"device 0:", "device 1:", "products:", "TFLOP/s while busy", "fill", "drain", "uploads:", "downloads:", "GB/s while busy"} {
		if !strings.Contains(string(sum), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}

	t.Setenv("HTGS_MATMUL_TRACE", filepath.Join(dir, "no", "such", "folder"))
	if _, _, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 16, Kernel: newFakeGPU(1)}); err == nil || !strings.Contains(err.Error(), "trace") {
		t.Errorf("trace into a missing folder: %v", err)
	}
	t.Setenv("HTGS_MATMUL_TRACE", "")
	plain := newFakeGPU(1)
	if _, _, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 16, Kernel: plain}); err != nil || plain.stamps.Load() != 0 {
		t.Errorf("without a trace: %v, %d stamps", err, plain.stamps.Load())
	}
}

// TestTraceSummary checks the summary's arithmetic on a made-up trace: a
// product alone, one beside an upload, the fill, the drain and the bus's
// busy time with overlapping intervals.
func TestTraceSummary(t *testing.T) {
	ms := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
	ops := []*traceOp{
		{dev: 0, kind: "upload", bytes: 1e9, t0: 0, t1: ms(20)},
		{dev: 0, kind: "upload", bytes: 1e9, t0: ms(20), t1: ms(40)},
		{dev: 0, kind: "gemm", flops: 1e12, t0: ms(20), t1: ms(40)},    // beside the second upload: 50 TFLOP/s
		{dev: 0, kind: "gemm", flops: 1e12, t0: ms(45), t1: ms(60)},    // alone: 66.7 TFLOP/s
		{dev: 0, kind: "download", bytes: 5e8, t0: ms(60), t1: ms(70)}, // drain 10 ms
	}
	got := traceSummary(ops)
	for _, want := range []string{
		"device 0: 5 operations in 70.000 ms",
		"products: 2, busy 35.000 ms (50% of the whole), 57.14 TFLOP/s while busy; first starts at 20.000 ms (fill), last ends 10.000 ms before the end (drain)",
		"with copies beside them: 50.00 TFLOP/s over 20.000 ms; without: 66.67 TFLOP/s over 15.000 ms",
		"idle between its first and last product: 5.000 ms",
		"uploads: 2, 1907.3 MiB, bus busy 40.000 ms (57% of the whole), 50.0 GB/s while busy",
		"downloads: 1, 476.8 MiB, bus busy 10.000 ms (14% of the whole), 50.0 GB/s while busy",
		"uploads and downloads at once: 0.000 ms",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if u := union([]interval{{0, 10}, {5, 15}, {20, 30}, {22, 25}}); u != 25 {
		t.Errorf("union %v, want 25", u)
	}
}

// TestOffloadSlabFirst checks the slab-first order end to end with fake
// GPUs (the slab lead off unless a case says otherwise): by default and
// with HTGS_MATMUL_SLABFIRST=pinned when A and B are page-locked, with =1
// for ordinary memory too, never with =0, not where the default slab lead
// applies, and not when the device budget cannot hold every block of C;
// the result is right,
// A, B and C cross the bus once, each block of C comes back once, and no
// pool overflows (the multiply task opens every block of C at once).
func TestOffloadSlabFirst(t *testing.T) {
	const m, k, n, bs = 70, 64, 50, 16 // 5x4x4 blocks
	blk := int64(8 * bs * bs)
	for _, c := range []struct {
		name    string
		env     string
		pin     bool
		devices int
		devMem  int64
		want    bool
	}{
		{"pinned, default", "", true, 1, 0, true},
		{"pinned", "pinned", true, 1, 0, true},
		{"pinned, 2 devices", "pinned", true, 2, 0, true},
		{"pinned, off", "0", true, 1, 0, false},
		{"ordinary, pinned only", "pinned", false, 1, 0, false},
		{"ordinary, on", "1", false, 2, 0, true},
		{"pinned, C does not fit", "pinned", true, 1, 30 * blk, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("HTGS_MATMUL_SLABFIRST", c.env)
			t.Setenv("HTGS_MATMUL_SLABLEAD", "0")
			rep, fake := fakeOffload(t, m, k, n, bs, c.devices, c.devMem, c.pin, 5)
			p := rep.Plan
			if p.SlabFirst != c.want {
				t.Fatalf("slab first %v, want %v: %v", p.SlabFirst, c.want, p)
			}
			if c.want && !strings.Contains(p.String(), "slab first") {
				t.Errorf("plan string does not say so: %v", p)
			}
			if c.want && p.DevicePoolC < ceilDiv(p.MB, c.devices)*p.NB {
				t.Errorf("device pool C %d cannot hold a device's %d blocks of C", p.DevicePoolC, ceilDiv(p.MB, c.devices)*p.NB)
			}
			checkOffloadMoves(t, rep, fake, m, k, n, c.devMem)
		})
	}
}

// TestOffloadSlabLead checks the SlabLead order end to end with fake
// GPUs: by default 2 from page-locked memory and off from ordinary memory
// (slab first taking the page-locked plans the lead does not apply to),
// on with HTGS_MATMUL_SLABLEAD=N from page-locked and
// from ordinary memory, on one and two devices, and not when the device
// budget cannot hold its pools, nor where SlabFirst applies or the lead
// covers every column; the result is right, A, B and C cross the bus once
// (one device), each block of C comes back once, and no pool overflows.
func TestOffloadSlabLead(t *testing.T) {
	const m, k, n, bs = 70, 64, 50, 16 // 5x4x4 blocks
	blk := int64(8 * bs * bs)
	for _, c := range []struct {
		name      string
		lead, sf  string
		pin       bool
		devices   int
		devMem    int64
		want      int
		wantFirst bool
	}{
		{"default, page-locked: lead 2", "", "", true, 1, 0, 2, false},
		{"default, ordinary: panel order", "", "", false, 1, 0, 0, false},
		{"default, page-locked, 2 devices: lead 2", "", "", true, 2, 0, 2, false},
		{"page-locked, lead off: slab first", "0", "", true, 1, 0, 0, true},
		{"page-locked, both off", "0", "0", true, 1, 0, 0, false},
		{"pinned, 1", "1", "", true, 1, 0, 1, false},
		{"pinned, 2", "2", "", true, 1, 0, 2, false},
		{"ordinary, 2, 2 devices", "2", "", false, 2, 0, 2, false},
		{"ordinary, 3", "3", "", false, 1, 0, 3, false},
		{"every column: slab first's", "9", "", true, 1, 0, 0, true},
		{"every column, slab first off", "9", "0", true, 1, 0, 0, false},
		{"slab first wins", "2", "1", true, 1, 0, 0, true},
		{"pools do not fit", "2", "", true, 1, 40 * blk, 0, false}, // 38 blocks without the lead, 43 with
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("HTGS_MATMUL_SLABLEAD", c.lead)
			t.Setenv("HTGS_MATMUL_SLABFIRST", c.sf)
			rep, fake := fakeOffload(t, m, k, n, bs, c.devices, c.devMem, c.pin, 7)
			p := rep.Plan
			if p.SlabLead != c.want || p.SlabFirst != c.wantFirst {
				t.Fatalf("slab lead %d, slab first %v; want %d, %v: %v", p.SlabLead, p.SlabFirst, c.want, c.wantFirst, p)
			}
			if c.want > 0 && !strings.Contains(p.String(), fmt.Sprintf("the first %d slab first", c.want)) {
				t.Errorf("plan string does not say so: %v", p)
			}
			checkOffloadMoves(t, rep, fake, m, k, n, c.devMem)
		})
	}
}

// fakeOffload multiplies random m x k and k x n matrices (seed) on
// devices fake GPUs with DeviceMemory devMem, page-locked first if pin,
// and checks the result; it returns the report and the fake GPUs.
func fakeOffload(t *testing.T, m, k, n, bs, devices int, devMem int64, pin bool, seed uint64) (*Report, *fakeGPU) {
	t.Helper()
	a, b, out := Random(m, k, seed), Random(k, n, seed+1), NewDense(m, n)
	fake := newFakeGPU(devices)
	if pin {
		unpin, err := PinHost(fake, a, b, out)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unpin() })
	}
	rep, err := Multiply(context.Background(), a, b, out, Config{BlockSize: bs, Kernel: fake, DeviceMemory: devMem})
	if err != nil {
		t.Fatal(err)
	}
	checkProduct(t, a, b, out, reference(t, a, b))
	return rep, fake
}

// checkOffloadMoves checks what an offloaded m x k x n product on fake
// moved and held: the device pools within devMem (0: no budget), A and B
// up once (one device), C down once, each block of C downloaded once, no
// device over its pools, and every pool back empty within its capacity.
func checkOffloadMoves(t *testing.T, rep *Report, fake *fakeGPU, m, k, n int, devMem int64) {
	t.Helper()
	p := rep.Plan
	if devMem > 0 && p.DevicePoolBytes > devMem {
		t.Errorf("device pools of %d bytes over the budget %d", p.DevicePoolBytes, devMem)
	}
	if len(fake.devs) == 1 && rep.UploadBytes != 8*int64(m*k+k*n) || rep.DownloadBytes != 8*int64(m*n) {
		t.Errorf("moved %d up, %d down", rep.UploadBytes, rep.DownloadBytes)
	}
	for _, d := range fake.devs {
		if d.twice != 0 {
			t.Errorf("%v: %d blocks of C downloaded more than once", d, d.twice)
		}
		if peak := d.peak.Load(); peak > int64(p.DevicePoolA+p.DevicePoolB+p.DevicePoolC) {
			t.Errorf("%v: %d buffers at once, pools hold %d", d, peak, p.DevicePoolA+p.DevicePoolB+p.DevicePoolC)
		}
	}
	for _, ps := range rep.Stats.Pools {
		if ps.InUse != 0 || ps.Peak > ps.Capacity {
			t.Errorf("pool %s: %d still out, peak %d of %d", ps.Name, ps.InUse, ps.Peak, ps.Capacity)
		}
	}
}

// TestPinHost checks that PinHost registers each matrix once, however
// often it is given, refuses nothing for CPU kernels, and that unpin
// undoes everything.
func TestPinHost(t *testing.T) {
	fake := newFakeGPU(1)
	x, y := Random(20, 30, 1), Random(30, 10, 2)
	unpin, err := PinHost(fake, x, x, y, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := fake.registrations.Load(); r != 2 {
		t.Errorf("%d registrations, want 2", r)
	}
	again, err := PinHost(fake, x) // pinned already: nothing to do
	if err != nil || fake.registrations.Load() != 2 {
		t.Fatalf("pinning again: %v, %d registrations", err, fake.registrations.Load())
	}
	if err := errors.Join(again(), unpin()); err != nil {
		t.Fatal(err)
	}
	if len(fake.pinned.pins) != 0 || len(fake.registered.pins) != 0 {
		t.Errorf("pins left: %v %v", fake.pinned.pins, fake.registered.pins)
	}
	cpu, err := PinHost(Gonum(), x)
	if err != nil || cpu() != nil {
		t.Fatalf("PinHost with a CPU kernel: %v", err)
	}
}

// TestOffloadDirectMixed: with A in memory and B in a file, A's blocks go
// straight from the registered matrix and B's through staging.
func TestOffloadDirectMixed(t *testing.T) {
	t.Setenv("HTGS_MATMUL_REGISTER", "1")
	a, b := Random(64, 48, 1), Random(48, 40, 2)
	fb, err := npy.Open(writeNpy(t, t.TempDir(), "b.npy", b))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	fake := newFakeGPU(1)
	c := NewDense(64, 40)
	if _, err := Multiply(context.Background(), a, fb, c, Config{BlockSize: 16, Kernel: fake}); err != nil {
		t.Fatal(err)
	}
	checkProduct(t, a, b, c, reference(t, a, b))
	if r := fake.registrations.Load(); r != 2 {
		t.Errorf("%d registrations, want 2 (A and C)", r)
	}
	if fake.direct.Load() == 0 {
		t.Errorf("no direct copy")
	}
}
