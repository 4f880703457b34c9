package pats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gohtgs/htgs/device"
)

// hostGPU is a device.Device of kind GPU backed by host memory.
type hostGPU struct{}

func (hostGPU) ID() int           { return 0 }
func (hostGPU) Kind() device.Kind { return device.GPU }
func (hostGPU) Name() string      { return "fakegpu0" }
func (hostGPU) Memory() int64     { return 1 << 20 }

// TestDeviceUnit runs flows on a CPU core and a DeviceUnit whose
// "device memory" is a map: the GPU implementation reads its input from
// there, so a missing upload fails the flow, and a missing download leaves
// the host value stale, which the CPU step that follows would see.
//
// With queue, transfers go through DeviceUnit.QueueTransfer and copy only
// when the manager waits for them, so an operation run before its uploads
// were waited for finds its input missing, and one that reads a result
// handed to the scheduler before its download was waited for finds a
// stale value.
func TestDeviceUnit(t *testing.T) {
	for _, c := range []struct{ prefetch, queue bool }{{false, false}, {true, false}, {true, true}} {
		prefetch := c.prefetch
		t.Run(fmt.Sprintf("prefetch=%v,queue=%v", prefetch, c.queue), func(t *testing.T) {
			var mu sync.Mutex
			host := map[string]int{}
			dev := map[string]int{}
			binds, unbinds := 0, 0
			u := DeviceUnit{
				Device: hostGPU{},
				Bind: func(context.Context, device.Device) (func(), error) {
					mu.Lock()
					binds++
					mu.Unlock()
					return func() { mu.Lock(); unbinds++; mu.Unlock() }, nil
				},
				Transfer: func(_ context.Context, d Data, toDevice bool) error {
					mu.Lock()
					defer mu.Unlock()
					if toDevice {
						dev[d.Key] = host[d.Key]
					} else {
						host[d.Key] = dev[d.Key]
					}
					return nil
				},
			}
			queued := 0
			if c.queue {
				u.QueueTransfer = func(_ context.Context, d Data, toDevice bool) (Pending, error) {
					mu.Lock()
					defer mu.Unlock()
					queued++
					if toDevice {
						return lazyCopy(func() { mu.Lock(); dev[d.Key] = host[d.Key]; mu.Unlock() }), nil
					}
					return lazyCopy(func() { mu.Lock(); host[d.Key] = dev[d.Key]; mu.Unlock() }), nil
				}
			}
			double := &Op[string]{Name: "double", Speedup: 10, Impls: map[device.Kind]Impl[string]{
				device.GPU: func(_ context.Context, d device.Device, tile string) error {
					if d.Kind() != device.GPU {
						return errors.New("not on the GPU")
					}
					mu.Lock()
					defer mu.Unlock()
					v, ok := dev[tile+"/in"]
					if !ok {
						return errors.New("input not uploaded")
					}
					dev[tile+"/mid"] = 2 * v
					return nil
				}}}
			inc := &Op[string]{Name: "inc", Impls: map[device.Kind]Impl[string]{
				device.CPU: func(_ context.Context, _ device.Device, tile string) error {
					mu.Lock()
					defer mu.Unlock()
					host[tile+"/out"] = host[tile+"/mid"] + 1
					return nil
				}}}
			m, err := Start(context.Background(), Config{Policy: PATS, Locality: true, Prefetch: prefetch}, append(CPUUnits(1), u)...)
			if err != nil {
				t.Fatal(err)
			}
			var hs []*Job
			for i := range 5 {
				tile := fmt.Sprintf("t%d", i)
				mu.Lock()
				host[tile+"/in"] = i
				mu.Unlock()
				f := NewFlow(tile)
				Add(f, double, tile, Reads(Data{Key: tile + "/in", Bytes: 8}), Writes(Data{Key: tile + "/mid", Bytes: 8}))
				Add(f, inc, tile, Reads(Data{Key: tile + "/mid", Bytes: 8}), Writes(Data{Key: tile + "/out", Bytes: 8}))
				h, err := m.Submit(context.Background(), f)
				if err != nil {
					t.Fatal(err)
				}
				hs = append(hs, h)
			}
			for _, h := range hs {
				if err := h.Wait(context.Background()); err != nil {
					t.Error(err)
				}
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if got := host[fmt.Sprintf("t%d/out", i)]; got != 2*i+1 {
					t.Errorf("tile %d: out = %d, want %d", i, got, 2*i+1)
				}
			}
			if binds == 0 || binds != unbinds {
				t.Errorf("%d binds, %d unbinds", binds, unbinds)
			}
			if o, _ := m.Report().Op("double"); o.GPU != 5 {
				t.Errorf("double ran %d times on the GPU, want 5", o.GPU)
			}
			if c.queue && queued != 10 {
				t.Errorf("%d transfers queued, want 10 (5 up, 5 down)", queued)
			}
		})
	}
}

// lazyCopy is a queued transfer that copies when waited for.
type lazyCopy func()

func (c lazyCopy) Done() bool { return true }

func (c lazyCopy) Wait(context.Context) (time.Duration, error) { c(); return 0, nil }

func TestDeviceUnitErrors(t *testing.T) {
	ctx := context.Background()
	if err := (DeviceUnit{Device: hostGPU{}}).Move(ctx, Data{}, true); err == nil {
		t.Error("Move without Transfer succeeded")
	}
	boom := errors.New("boom")
	u := DeviceUnit{Device: hostGPU{}, Bind: func(context.Context, device.Device) (func(), error) { return nil, boom }}
	if err := u.Run(ctx, func(context.Context) error { return nil }, Cost{}); !errors.Is(err, boom) {
		t.Errorf("Run with a failing Bind: %v", err)
	}
	if err := (DeviceUnit{}).Run(ctx, func(context.Context) error { return nil }, Cost{}); err == nil {
		t.Error("Run without a Device succeeded")
	}
	if u.Name() != "fakegpu0" || u.Kind() != device.GPU || u.Memory() != 1<<20 || u.ID() != 0 {
		t.Error("DeviceUnit does not report its Device")
	}
	if u.Queues() {
		t.Error("a DeviceUnit without QueueTransfer queues")
	}
	u.QueueTransfer = func(context.Context, Data, bool) (Pending, error) { return Completed(nil), nil }
	if !u.Queues() {
		t.Error("a DeviceUnit with QueueTransfer does not queue")
	}
	if _, err := u.Queue(ctx, Data{}, true); !errors.Is(err, boom) {
		t.Errorf("Queue with a failing Bind: %v", err)
	}
	if p, err := (DeviceUnit{Device: hostGPU{}}).Queue(ctx, Data{}, false); err != nil || !p.Done() {
		t.Errorf("Queue without QueueTransfer: %v, or not done", err)
	} else if _, err := p.Wait(ctx); err == nil {
		t.Error("Queue without QueueTransfer or Transfer: its Wait has no error")
	}
}

// TestSimQueues checks the simulated GPUs of Machine.Units: they queue
// transfers on an upload and a download engine, each copy taking its
// modelled time after the one before on its engine (lower bounds only: a
// slow machine may take longer), and other simulated units do not queue.
func TestSimQueues(t *testing.T) {
	units := Machine{CPUs: 1, GPUs: 1, Bandwidth: 1e6}.Units(1)
	gpu, ok := units[1].(Queuer)
	if !ok || !gpu.Queues() {
		t.Fatal("the GPU of Machine.Units does not queue its transfers")
	}
	if q, ok := units[0].(Queuer); ok && q.Queues() {
		t.Error("a CPU of Machine.Units queues transfers")
	}
	if (Sim{Type: device.GPU}).Queues() {
		t.Error("a Sim not made by Machine.Units queues transfers")
	}
	ctx := context.Background()
	start := time.Now()
	var ps []Pending
	for _, up := range []bool{true, true, false} { // 10 ms each
		p, err := gpu.Queue(ctx, Data{Key: "x", Bytes: 10_000}, up)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if ps[1].Done() && time.Since(start) < 20*time.Millisecond {
		t.Error("the second upload is done before the first two could be")
	}
	var ends []time.Duration
	for i, p := range ps {
		took, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if took != 10*time.Millisecond || !p.Done() {
			t.Errorf("copy %d took %v (done %v), want 10ms", i, took, p.Done())
		}
		ends = append(ends, time.Since(start))
	}
	if ends[0] < 10*time.Millisecond || ends[1] < 20*time.Millisecond || ends[2] < 10*time.Millisecond {
		t.Errorf("copies completed after %v, want at least 10, 20 and 10 ms", ends)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	p, err := gpu.Queue(ctx, Data{Key: "y", Bytes: 1_000_000}, true) // 1 s
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a cancelled context: %v", err)
	}
}
