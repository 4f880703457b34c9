package matmul

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
)

// fakeGPU is an offload kernel whose "devices" are host memory: it lets
// the offload graph (routing, copy-in caching, device pools and their
// release counts, copy-out, CPU accumulation) run and be checked on any
// machine. Each device counts its live buffers and the bytes copied to it,
// and every call checks that the buffers it is given live on the device
// its task copy was initialized for.
type fakeGPU struct {
	devs   []*fakeDevice
	memory int64
	// failUpload, when positive, makes the failUpload-th upload fail.
	failUpload int64
	uploads    atomic.Int64
}

type fakeDevice struct {
	id                int
	live, peak, total atomic.Int64 // buffers allocated
	products          atomic.Int64
	mu                sync.Mutex
}

func (d *fakeDevice) ID() int             { return d.id }
func (d *fakeDevice) Kind() device.Kind   { return device.GPU }
func (d *fakeDevice) Name() string        { return fmt.Sprintf("fake%d", d.id) }
func (d *fakeDevice) Memory() int64       { return 0 }
func (d *fakeDevice) String() string      { return d.Name() }
func (d *fakeDevice) alloc(n int) fakeMem { return fakeMem{data: make([]float64, n), dev: d} }

func newFakeGPU(devices int) *fakeGPU {
	k := &fakeGPU{}
	for i := range devices {
		k.devs = append(k.devs, &fakeDevice{id: i})
	}
	return k
}

type fakeMem struct {
	data []float64
	dev  *fakeDevice
}

func (m fakeMem) Len() int { return len(m.data) }

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

func (k *fakeGPU) deviceBuffers(n int) memmgr.Allocator[devMem] { return fakeAlloc{n} }

type fakeAlloc struct{ n int }

func (a fakeAlloc) Alloc(dev device.Device) (devMem, error) {
	d, ok := dev.(*fakeDevice)
	if !ok {
		return nil, fmt.Errorf("fake allocator given %v, not a fake device", dev)
	}
	live := d.live.Add(1)
	d.total.Add(1)
	d.mu.Lock()
	d.peak.Store(max(d.peak.Load(), live))
	d.mu.Unlock()
	return d.alloc(a.n), nil
}

func (a fakeAlloc) Free(dev device.Device, m devMem) error {
	fm := m.(fakeMem)
	if fm.dev != dev {
		return fmt.Errorf("buffer of %v freed on %v", fm.dev, dev)
	}
	fm.dev.live.Add(-1)
	return nil
}

// bound is the device a task copy was initialized for.
type bound struct{ dev *fakeDevice }

func (b *bound) Initialize(_ context.Context, info task.Info) error {
	d, ok := info.Device.(*fakeDevice)
	if !ok {
		return fmt.Errorf("task copy on %v, want a fake device", info.Device)
	}
	if d.id != info.Pipeline {
		return fmt.Errorf("pipeline clone %d got device %d", info.Pipeline, d.id)
	}
	b.dev = d
	return nil
}

func (b *bound) mem(m devMem) (fakeMem, error) {
	fm, ok := m.(fakeMem)
	if !ok || b.dev == nil || fm.dev != b.dev {
		return fakeMem{}, fmt.Errorf("buffer of %v used by a task copy on %v", fm.dev, b.dev)
	}
	return fm, nil
}

type fakeMover struct {
	bound
	k *fakeGPU
	n int
}

func (k *fakeGPU) newMover(n int) mover { return &fakeMover{k: k, n: n} }

func (m *fakeMover) upload(_ context.Context, dst devMem, src []float64, rows, cols, ld int) error {
	if m.k.failUpload > 0 && m.k.uploads.Add(1) == m.k.failUpload {
		return errors.New("fake DMA error")
	}
	d, err := m.mem(dst)
	if err != nil {
		return err
	}
	if rows*cols > min(len(d.data), m.n) {
		return fmt.Errorf("upload of %dx%d into %d elements (staging %d)", rows, cols, len(d.data), m.n)
	}
	for r := range rows {
		copy(d.data[r*cols:(r+1)*cols], src[r*ld:r*ld+cols])
	}
	return nil
}

func (m *fakeMover) download(_ context.Context, dst []float64, src devMem, n int) error {
	s, err := m.mem(src)
	if err != nil {
		return err
	}
	copy(dst[:n], s.data[:n])
	return nil
}

type fakeMultiplier struct{ bound }

func (k *fakeGPU) newDeviceMultiplier() deviceMultiplier { return &fakeMultiplier{} }

func (f *fakeMultiplier) mul(_ context.Context, m, n, k int, a, b, c devMem) error {
	da, err := f.mem(a)
	if err != nil {
		return err
	}
	db, err := f.mem(b)
	if err != nil {
		return err
	}
	dc, err := f.mem(c)
	if err != nil {
		return err
	}
	gonum.Implementation{}.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, da.data, k, db.data, n, 0, dc.data, n)
	f.dev.products.Add(1)
	return nil
}

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
		cfg := Config{BlockSize: 1 + rng.IntN(8), Threads: 1 + rng.IntN(3), Kernel: newFakeGPU(devices)}
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
		{m: 100, k: 70, n: 90, bs: 16, devices: 2, devMem: 12 * blk, order: Streamed},
		{m: 100, k: 70, n: 90, bs: 16, devices: 2, devMem: 20 * blk, order: RowPanels},
		{m: 100, k: 70, n: 90, bs: 16, devices: 3, files: true, hostMem: 120 * blk, order: RowPanels},
		{m: 100, k: 70, n: 90, bs: 16, devices: 2, files: true, hostMem: 80 * blk, devMem: 12 * blk, order: Streamed},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%dx%dx%d/bs%d/dev%d/mem%d/host%d/files%v", c.m, c.k, c.n, c.bs, c.devices, c.devMem, c.hostMem, c.files)
		t.Run(name, func(t *testing.T) {
			a, b := Random(c.m, c.k, 7), Random(c.k, c.n, 8)
			fake := newFakeGPU(c.devices)
			cfg := Config{BlockSize: c.bs, Threads: 2, Kernel: fake, DeviceMemory: c.devMem, MemoryBudget: c.hostMem}
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
			if want := 8 * int64(p.Multiplies) * int64(min(c.bs, c.m)*min(c.bs, c.n)); rep.DownloadBytes > want || rep.DownloadBytes == 0 {
				t.Errorf("downloaded %d bytes, want at most %d", rep.DownloadBytes, want)
			}
			var products int64
			for _, d := range fake.devs {
				if live := d.live.Load(); live != 0 {
					t.Errorf("%v: %d buffers never freed", d, live)
				}
				if peak := d.peak.Load(); peak > int64(p.DevicePoolA+p.DevicePoolB+p.DevicePoolC) {
					t.Errorf("%v: %d buffers at once, pools hold %d", d, peak, p.DevicePoolA+p.DevicePoolB+p.DevicePoolC)
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
					t.Errorf("pool %s (clone %d): %d buffers still out", ps.Name, ps.Pipeline, ps.InUse)
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
