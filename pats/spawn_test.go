package pats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/task"
)

// flowOrder is FCFS recording the flow of every operation it starts.
type flowOrder struct{ flows []string }

func (o *flowOrder) Choose(u device.Unit, ready []device.Candidate) int {
	o.flows = append(o.flows, ready[0].Group)
	return 0
}

// simTiles returns n tile flows (segmentation); tile i "finds nuclei" when
// i%3 != 0 and then spawns a features flow, and tile 4's features spawn a
// summary.
func simTiles(n int) []*Flow {
	seg, feat, sum := hybrid("seg", 8), hybrid("feat", 15), hybrid("summary", 1)
	var fs []*Flow
	for i := range n {
		f := NewFlow(fmt.Sprint("t", i))
		Add(f, seg, i, Writes(d("labels", 1<<20)), cost(500, 60))
		f.Spawn(func(context.Context) ([]*Flow, error) {
			if i%3 == 0 {
				return nil, nil
			}
			g := NewFlow(fmt.Sprint("t", i, "/feat"))
			Add(g, feat, i, Reads(d("labels", 1<<20)), Writes(d("features", 1<<10)), cost(800, 40))
			if i == 4 {
				g.Spawn(func(context.Context) ([]*Flow, error) {
					h := NewFlow("t4/summary")
					Add(h, sum, i, Reads(d("features", 1<<10)), cost(10, 10))
					return []*Flow{h}, nil
				})
			}
			return []*Flow{g}, nil
		})
		fs = append(fs, f)
	}
	return fs
}

func TestSpawnSim(t *testing.T) {
	for _, cfg := range []Config{
		{Policy: PATS, Window: 2},
		{Policy: FCFS, Window: 3, Locality: true, Prefetch: true},
		{Policy: PATS},
	} {
		r := mustSim(t, cfg, Machine{CPUs: 2, GPUs: 1, Bandwidth: 1e9}, simTiles(9)...)
		if r.Flows != 9+6+1 || r.Spawned != 7 || r.Failed != 0 {
			t.Errorf("%v: %d flows, %d spawned, %d failed", cfg, r.Flows, r.Spawned, r.Failed)
		}
		for op, want := range map[string]int{"seg": 9, "feat": 6, "summary": 1} {
			if o, _ := r.Op(op); o.CPU+o.GPU != want {
				t.Errorf("%v: %s ran %d times, want %d", cfg, op, o.CPU+o.GPU, want)
			}
		}
		if cfg.Window > 0 && r.PeakFlows > cfg.Window {
			t.Errorf("%v: %d flows in progress at once", cfg, r.PeakFlows)
		}
		if !strings.Contains(r.String(), "7 spawned") {
			t.Errorf("report: %s", r)
		}
	}
}

func TestSpawnSimWindowOrder(t *testing.T) {
	// With a window of one, each tile's spawned flows run before the next
	// tile starts.
	o := &flowOrder{}
	mustSim(t, Config{Chooser: o, Window: 1}, Machine{CPUs: 1}, simTiles(6)...)
	want := []string{"t0", "t1", "t1/feat", "t2", "t2/feat", "t3", "t4", "t4/feat", "t4/summary", "t5", "t5/feat"}
	if !slices.Equal(o.flows, want) {
		t.Errorf("order %v, want %v", o.flows, want)
	}
}

var errNoNuclei = errors.New("no nuclei")

func TestSpawnSimErrors(t *testing.T) {
	f := NewFlow("bad")
	Add(f, hybrid("x", 1), 0)
	f.Spawn(func(context.Context) ([]*Flow, error) { return nil, errNoNuclei })
	if _, err := Simulate(Config{}, Machine{CPUs: 1}, []*Flow{f}); !errors.Is(err, errNoNuclei) || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("spawn error: %v", err)
	}
	g := NewFlow("again")
	Add(g, hybrid("x", 1), 0)
	g.Spawn(func(context.Context) ([]*Flow, error) { return []*Flow{g}, nil })
	if _, err := Simulate(Config{}, Machine{CPUs: 1}, []*Flow{g}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a flow spawning itself: %v", err)
	}
	h := NewFlow("gpu-kid")
	Add(h, hybrid("x", 1), 0)
	h.Spawn(func(context.Context) ([]*Flow, error) {
		k := NewFlow("k")
		Add(k, only("g", device.GPU), 0)
		return []*Flow{k}, nil
	})
	if _, err := Simulate(Config{}, Machine{CPUs: 1}, []*Flow{h}); err == nil || !strings.Contains(err.Error(), "no implementation") {
		t.Errorf("a spawned flow without implementation: %v", err)
	}
}

// liveTiles builds tile flows for the manager: segmentation finds
// i%3 nuclei in tile i, at run time; the flow spawns a features flow only
// where it found some.
type liveTiles struct {
	j      *journal
	mu     sync.Mutex
	nuclei map[int]int
}

func (lt *liveTiles) flow(i int) *Flow {
	seg := &Op[int]{Name: "seg", Speedup: 5, Impls: map[device.Kind]Impl[int]{device.CPU: func(_ context.Context, _ device.Device, i int) error {
		lt.mu.Lock()
		lt.nuclei[i] = i % 3
		lt.mu.Unlock()
		lt.j.add("t%d seg", i)
		return nil
	}}}
	feat := &Op[int]{Name: "feat", Speedup: 5, Impls: map[device.Kind]Impl[int]{device.CPU: func(_ context.Context, _ device.Device, i int) error {
		lt.j.add("t%d feat", i)
		return nil
	}}}
	f := NewFlow(fmt.Sprint("t", i))
	Add(f, seg, i, Writes(d("labels", 64)))
	f.Spawn(func(context.Context) ([]*Flow, error) {
		lt.mu.Lock()
		n := lt.nuclei[i]
		lt.mu.Unlock()
		if n == 0 {
			return nil, nil
		}
		g := NewFlow(fmt.Sprint("t", i, "/feat"))
		Add(g, feat, i, Reads(d("labels", 64)), Writes(d("features", 8)))
		return []*Flow{g}, nil
	})
	return f
}

func TestSpawnManager(t *testing.T) {
	lt := &liveTiles{j: &journal{}, nuclei: map[int]int{}}
	m := startManager(t, Config{Policy: PATS, Window: 2}, CPUUnits(2)...)
	var wg sync.WaitGroup
	for i := range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := m.Submit(context.Background(), lt.flow(i))
			if err != nil {
				t.Error(err)
				return
			}
			if err := h.Wait(context.Background()); err != nil {
				t.Error(err)
				return
			}
			// The handle covers the spawned flow.
			if got, want := lt.j.index(fmt.Sprintf("t%d feat", i)) >= 0, i%3 != 0; got != want {
				t.Errorf("tile %d: features ran %v when its handle was done, want %v", i, got, want)
			}
		}()
	}
	wg.Wait()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	r := m.Report()
	if r.Flows != 15 || r.Spawned != 6 || r.PeakFlows > 2 {
		t.Errorf("%d flows, %d spawned, peak %d", r.Flows, r.Spawned, r.PeakFlows)
	}
	if len(lt.j.list()) != 15 {
		t.Errorf("events %v", lt.j.list())
	}
}

func TestSpawnManagerWindowOrder(t *testing.T) {
	// Window 1: a tile's features run before the next tile is admitted,
	// though the next Submit is already waiting.
	lt := &liveTiles{j: &journal{}, nuclei: map[int]int{}}
	m := startManager(t, Config{Window: 1}, CPUUnits(1)...)
	var hs []*Job
	for i := range 5 {
		hs = append(hs, submit(t, m, lt.flow(i)))
	}
	for _, h := range hs {
		if err := h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"t0 seg", "t1 seg", "t1 feat", "t2 seg", "t2 feat", "t3 seg", "t4 seg", "t4 feat"}
	if got := lt.j.list(); !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

func TestSpawnManagerErrors(t *testing.T) {
	m := startManager(t, Config{Window: 2}, CPUUnits(2)...)
	run := func(f *Flow) error {
		t.Helper()
		return submit(t, m, f).Wait(context.Background())
	}
	// The spawn function fails.
	f := NewFlow("tile-a")
	Add(f, hybrid("x", 1), 0)
	f.Spawn(func(context.Context) ([]*Flow, error) { return nil, errNoNuclei })
	if err := run(f); !errors.Is(err, errNoNuclei) || !strings.Contains(err.Error(), `flow "tile-a": spawn`) {
		t.Errorf("spawn error: %v", err)
	}
	// It panics.
	f = NewFlow("tile-b")
	Add(f, hybrid("x", 1), 0)
	f.Spawn(func(context.Context) ([]*Flow, error) { panic("boom") })
	var pe *task.PanicError
	if err := run(f); !errors.As(err, &pe) {
		t.Errorf("spawn panic: %v", err)
	}
	// A spawned flow fails: the submitted flow's handle reports it.
	f = NewFlow("tile-c")
	Add(f, hybrid("x", 1), 0)
	f.Spawn(func(context.Context) ([]*Flow, error) {
		g := NewFlow("tile-c/feat")
		Add(g, &Op[int]{Name: "bad", Impls: map[device.Kind]Impl[int]{device.CPU: func(context.Context, device.Device, int) error { return errNoNuclei }}}, 0)
		h := NewFlow("tile-c/ok")
		Add(h, hybrid("y", 1), 0)
		return []*Flow{g, h}, nil
	})
	if err := run(f); !errors.Is(err, errNoNuclei) || !strings.Contains(err.Error(), "tile-c/feat") {
		t.Errorf("failed spawned flow: %v", err)
	}
	// A malformed spawned flow, and a nil one.
	f = NewFlow("tile-d")
	Add(f, hybrid("x", 1), 0)
	f.Spawn(func(context.Context) ([]*Flow, error) {
		g := NewFlow("gpu-only")
		Add(g, only("g", device.GPU), 0)
		return []*Flow{g, nil}, nil
	})
	if err := run(f); err == nil || !strings.Contains(err.Error(), "no implementation") || !strings.Contains(err.Error(), "nil flow") {
		t.Errorf("malformed spawned flows: %v", err)
	}
	if r := m.Report(); r.Failed != 1 || r.Spawned != 2 {
		t.Errorf("%d failed, %d spawned", r.Failed, r.Spawned)
	}
}

func TestSpawnCancel(t *testing.T) {
	m := startManager(t, Config{Window: 1}, CPUUnits(1)...)
	started := make(chan string, 4)
	release := make(chan struct{})
	f := NewFlow("tile")
	Add(f, hybrid("x", 1), 0)
	f.Spawn(func(context.Context) ([]*Flow, error) {
		g := NewFlow("tile/feat")
		Add(g, blocker(started, release), "feat")
		Add(g, blocker(started, release), "after")
		return []*Flow{g}, nil
	})
	h := submit(t, m, f)
	if s := <-started; s != "feat" {
		t.Fatalf("started %q", s)
	}
	h.Cancel()
	close(release)
	if err := h.Wait(context.Background()); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if len(started) != 0 {
		t.Errorf("the spawned flow went on after Cancel: %q", <-started)
	}
	// The window is free again.
	g := NewFlow("next")
	Add(g, hybrid("x", 1), 0)
	if err := submit(t, m, g).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSpawnInTask(t *testing.T) {
	lt := &liveTiles{j: &journal{}, nuclei: map[int]int{}}
	m := startManager(t, Config{Policy: PATS, Window: 2}, CPUUnits(2)...)
	tk := &Task[int, int]{
		Manager: m,
		Expand:  func(_ context.Context, i int) (*Flow, error) { return lt.flow(i), nil },
		Result: func(_ context.Context, i int) (int, error) {
			// The features of the tile are done when its result is made.
			if lt.j.index(fmt.Sprintf("t%d feat", i)) < 0 && i%3 != 0 {
				return 0, fmt.Errorf("tile %d: no features yet", i)
			}
			return i, nil
		},
	}
	out := make(chan int, 6)
	for i := range 6 {
		if err := tk.Execute(context.Background(), i, chanEmitter(out)); err != nil {
			t.Fatal(err)
		}
	}
	if len(out) != 6 {
		t.Errorf("%d results", len(out))
	}
}

type chanEmitter chan int

func (c chanEmitter) Emit(v int) error { c <- v; return nil }

func TestSpawnManagerContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m, err := Start(ctx, Config{Window: 1}, CPUUnits(1)...)
	if err != nil {
		t.Fatal(err)
	}
	in := make(chan struct{})
	f := NewFlow("tile")
	Add(f, hybrid("x", 1), 0)
	f.Spawn(func(ctx context.Context) ([]*Flow, error) {
		close(in)
		<-ctx.Done() // the manager stops while the function runs
		g := NewFlow("tile/feat")
		Add(g, hybrid("x", 1), 0)
		return []*Flow{g}, nil
	})
	h, err := m.Submit(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	<-in
	cancel()
	if err := h.Wait(context.Background()); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "tile/feat") {
		t.Errorf("handle: %v", err)
	}
	if err := m.Close(); !errors.Is(err, context.Canceled) {
		t.Errorf("Close: %v", err)
	}
}

func TestSpawnManagerSimulatedGPU(t *testing.T) {
	// Spawned flows on a prefetching, locality-aware manager with a
	// simulated GPU: every flow runs, the window holds.
	for _, cfg := range []Config{
		{Policy: PATS, Window: 2, Locality: true, TransferImpact: 0.2, Prefetch: true},
		{Policy: FCFS, Window: 3, Learn: true},
	} {
		units := Machine{CPUs: 1, GPUs: 1, Bandwidth: 1e10}.Units(0.01)
		m := startManager(t, cfg, units...)
		var hs []*Job
		for _, f := range simTiles(9) {
			hs = append(hs, submit(t, m, f))
		}
		for _, h := range hs {
			if err := h.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		r := m.Report()
		if r.Flows != 16 || r.Spawned != 7 || r.PeakFlows > cfg.Window {
			t.Errorf("%v: %d flows, %d spawned, peak %d", cfg, r.Flows, r.Spawned, r.PeakFlows)
		}
	}
}
