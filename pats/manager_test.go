package pats

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// journal records events from many goroutines.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	j.events = append(j.events, fmt.Sprintf(format, args...))
	j.mu.Unlock()
}

func (j *journal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.events)
}

func (j *journal) index(e string) int { return slices.Index(j.list(), e) }

func startManager(t *testing.T, cfg Config, units ...Unit) *Manager {
	t.Helper()
	m, err := Start(context.Background(), cfg, units...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func submit(t *testing.T, m *Manager, f *Flow) *Job {
	t.Helper()
	h, err := m.Submit(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// logOp returns an operation that records "flow:name" when it runs.
func logOp(j *journal, name string, sleep time.Duration) *Op[string] {
	impl := func(ctx context.Context, dev device.Device, flow string) error {
		time.Sleep(sleep)
		j.add("%s:%s", flow, name)
		return nil
	}
	return &Op[string]{Name: name, Speedup: 1, Impls: map[device.Kind]Impl[string]{device.CPU: impl, device.GPU: impl}}
}

func TestManagerRespectsDependencies(t *testing.T) {
	var j journal
	a, b, c, dd := logOp(&j, "A", 0), logOp(&j, "B", time.Millisecond), logOp(&j, "C", 0), logOp(&j, "D", 0)
	m := startManager(t, Config{Policy: PATS}, CPUUnits(3)...)
	var hs []*Job
	for i := range 5 {
		name := fmt.Sprint("f", i)
		f := NewFlow(name)
		Add(f, a, name, Writes(d("x", 1)))
		Add(f, b, name, Reads(d("x", 1)), Writes(d("y", 1)))
		Add(f, c, name, Reads(d("x", 1)), Writes(d("z", 1)))
		Add(f, dd, name, Reads(d("y", 1), d("z", 1)))
		hs = append(hs, submit(t, m, f))
	}
	for _, h := range hs {
		if err := h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		at := func(op string) int { return j.index(fmt.Sprintf("f%d:%s", i, op)) }
		if !(at("A") < at("B") && at("A") < at("C") && at("B") < at("D") && at("C") < at("D")) || at("A") < 0 {
			t.Errorf("flow %d ran out of order: %v", i, j.list())
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	r := m.Report()
	if r.Flows != 5 || r.Failed != 0 || len(r.Ops) != 4 || r.Makespan <= 0 {
		t.Errorf("report: %v", r)
	}
	total := 0
	for _, u := range r.Units {
		total += u.Ops
	}
	if total != 20 {
		t.Errorf("units ran %d operations, want 20", total)
	}
}

// fakeGPU is a GPU unit that records moves and can hold runs back.
type fakeGPU struct {
	j     *journal
	onRun func(ctx context.Context) error
}

func (g *fakeGPU) ID() int           { return 0 }
func (g *fakeGPU) Kind() device.Kind { return device.GPU }
func (g *fakeGPU) Name() string      { return "fake-gpu" }
func (g *fakeGPU) Memory() int64     { return 1 << 30 }
func (g *fakeGPU) Run(ctx context.Context, impl func(context.Context) error, _ Cost) error {
	if g.onRun != nil {
		if err := g.onRun(ctx); err != nil {
			return err
		}
	}
	return impl(ctx)
}
func (g *fakeGPU) Move(_ context.Context, d Data, toDevice bool) error {
	dir := "down"
	if toDevice {
		dir = "up"
	}
	g.j.add("%s:%s", dir, d.Key)
	return nil
}

func TestManagerRunsTheImplementationOfTheUnitKind(t *testing.T) {
	var j journal
	impl := func(kind device.Kind) Impl[int] {
		return func(_ context.Context, dev device.Device, _ int) error {
			j.add("%v impl on %v", kind, dev.Kind())
			return nil
		}
	}
	both := &Op[int]{Name: "both", Speedup: 4, Impls: map[device.Kind]Impl[int]{device.CPU: impl(device.CPU), device.GPU: impl(device.GPU)}}
	gpuOnly := &Op[int]{Name: "gpuOnly", Impls: map[device.Kind]Impl[int]{device.GPU: impl(device.GPU)}}
	units := append(CPUUnits(2), &fakeGPU{j: &journal{}})
	m := startManager(t, Config{Policy: PATS}, units...)
	f := NewFlow("kinds")
	for range 6 {
		Add(f, both, 0)
		Add(f, gpuOnly, 0)
	}
	if err := submit(t, m, f).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	ev := j.list()
	if len(ev) != 12 {
		t.Fatalf("%d runs, want 12", len(ev))
	}
	for _, e := range ev {
		if e != "cpu impl on cpu" && e != "gpu impl on gpu" {
			t.Errorf("ran %q", e)
		}
	}
	r := m.Report()
	if o, _ := r.Op("gpuOnly"); o.GPU != 6 || o.CPU != 0 {
		t.Errorf("gpuOnly ran %d on CPU and %d on GPU", o.CPU, o.GPU)
	}
	if _, err := Start(context.Background(), Config{}); err == nil {
		t.Error("Start without units succeeded")
	}
	if _, err := Start(context.Background(), Config{Window: -1}, CPUUnits(1)...); err == nil {
		t.Error("Start with a negative window succeeded")
	}
	g := NewFlow("gpu-only")
	Add(g, gpuOnly, 0)
	cpuOnly := startManager(t, Config{}, CPUUnits(1)...)
	if _, err := cpuOnly.Submit(context.Background(), g); err == nil || !strings.Contains(err.Error(), "no implementation") {
		t.Errorf("GPU-only flow on CPUs: %v", err)
	}
}

var errKernel = errors.New("kernel failed")

func TestManagerFlowFailure(t *testing.T) {
	var j journal
	fail := &Op[string]{Name: "segment", Impls: map[device.Kind]Impl[string]{device.CPU: func(_ context.Context, _ device.Device, flow string) error {
		if flow == "bad" {
			return errKernel
		}
		return nil
	}}}
	boom := &Op[string]{Name: "boom", Impls: map[device.Kind]Impl[string]{device.CPU: func(context.Context, device.Device, string) error {
		panic("out of range")
	}}}
	after := logOp(&j, "after", 0)
	m := startManager(t, Config{}, CPUUnits(2)...)
	mk := func(name string, op *Op[string]) *Flow {
		f := NewFlow(name)
		Add(f, op, name, Writes(d("m", 1)))
		Add(f, after, name, Reads(d("m", 1)))
		return f
	}
	bad, good, panicky := submit(t, m, mk("bad", fail)), submit(t, m, mk("good", fail)), submit(t, m, mk("panicky", boom))
	err := bad.Wait(context.Background())
	if !errors.Is(err, errKernel) || !strings.Contains(err.Error(), `flow "bad"`) || !strings.Contains(err.Error(), "segment") {
		t.Errorf("bad flow: %v; want errKernel naming the flow and the operation", err)
	}
	if err := good.Wait(context.Background()); err != nil {
		t.Errorf("good flow: %v", err)
	}
	var pe *task.PanicError
	if err := panicky.Wait(context.Background()); !errors.As(err, &pe) || pe.Value != "out of range" {
		t.Errorf("panicking flow: %v; want a *task.PanicError", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := j.list(); !slices.Equal(got, []string{"good:after"}) {
		t.Errorf("steps after the failures ran: %v", got)
	}
	if r := m.Report(); r.Flows != 1 || r.Failed != 2 {
		t.Errorf("report counts %d done, %d failed", r.Flows, r.Failed)
	}
}

// blocker returns an operation whose runs wait until release is closed.
func blocker(started chan<- string, release <-chan struct{}) *Op[string] {
	return &Op[string]{Name: "block", Impls: map[device.Kind]Impl[string]{device.CPU: func(ctx context.Context, _ device.Device, flow string) error {
		started <- flow
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}}
}

func TestManagerWindowAndClose(t *testing.T) {
	started, release := make(chan string, 4), make(chan struct{})
	op := blocker(started, release)
	m, err := Start(context.Background(), Config{Window: 1}, CPUUnits(2)...)
	if err != nil {
		t.Fatal(err)
	}
	f1 := NewFlow("first")
	Add(f1, op, "first")
	h1 := submit(t, m, f1)
	<-started
	// The window is full: a second submission waits, here until its
	// context expires.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	f2 := NewFlow("second")
	Add(f2, op, "second")
	if _, err := m.Submit(ctx, f2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Submit into a full window: %v, want DeadlineExceeded", err)
	}
	// Once the first flow completes, the second gets in.
	close(release)
	if err := h1.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	h2 := submit(t, m, f2)
	if _, err := m.Submit(context.Background(), f2); !errors.Is(err, errFlowUsed) {
		t.Errorf("resubmitting a flow: %v", err)
	}
	// Close waits for the flow in progress.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h2.Done():
	default:
		t.Error("Close returned before the flow in progress completed")
	}
	f3 := NewFlow("late")
	Add(f3, op, "late")
	if _, err := m.Submit(context.Background(), f3); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close: %v, want ErrClosed", err)
	}
}

func TestHandleCancel(t *testing.T) {
	var j journal
	started, release := make(chan string, 4), make(chan struct{})
	m := startManager(t, Config{}, CPUUnits(1)...)
	f := NewFlow("cancelled")
	Add(f, blocker(started, release), "cancelled", Writes(d("x", 1)))
	Add(f, logOp(&j, "after", 0), "cancelled", Reads(d("x", 1)))
	h := submit(t, m, f)
	<-started
	h.Cancel()
	close(release)
	if err := h.Wait(context.Background()); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled flow: %v, want Canceled", err)
	}
	h.Cancel() // no effect once done
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := j.list(); len(got) != 0 {
		t.Errorf("steps of the cancelled flow ran: %v", got)
	}
}

func TestManagerCancel(t *testing.T) {
	started, release := make(chan string, 4), make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	m, err := Start(ctx, Config{}, CPUUnits(1)...)
	if err != nil {
		t.Fatal(err)
	}
	op := blocker(started, release)
	f1, f2 := NewFlow("running"), NewFlow("queued")
	Add(f1, op, "running")
	Add(f2, op, "queued")
	h1, h2 := submit(t, m, f1), submit(t, m, f2)
	<-started
	cancel()
	for _, h := range []*Job{h1, h2} {
		if err := h.Wait(context.Background()); !errors.Is(err, context.Canceled) {
			t.Errorf("flow after cancel: %v, want Canceled", err)
		}
	}
	if err := m.Close(); !errors.Is(err, context.Canceled) {
		t.Errorf("Close after cancel: %v", err)
	}
}

// store is a Stager that records its calls.
type store struct {
	j   *journal
	key string
}

func (s store) Stage(context.Context) error  { s.j.add("stage %s", s.key); return nil }
func (s store) Commit(context.Context) error { s.j.add("commit %s", s.key); return nil }

func TestManagerStagesAndCommits(t *testing.T) {
	for _, cfg := range []Config{{}, {Prefetch: true}, {StageAhead: true}} {
		prefetch := cfg.stagesAhead() // staged in the background
		t.Run(cfg.String(), func(t *testing.T) {
			var j journal
			started, release := make(chan string, 4), make(chan struct{})
			m := startManager(t, cfg, CPUUnits(1)...)
			// Keep the only core busy.
			busy := NewFlow("busy")
			Add(busy, blocker(started, release), "busy")
			hb := submit(t, m, busy)
			<-started
			f := NewFlow("tile")
			in := Data{Key: "rgb", Bytes: 10, Store: store{&j, "rgb"}}
			out := Data{Key: "mask", Bytes: 10, Store: store{&j, "mask"}}
			Add(f, logOp(&j, "segment", 0), "tile", Reads(in), Writes(d("tmp", 1)))
			Add(f, logOp(&j, "label", 0), "tile", Reads(in, d("tmp", 1)), Writes(out))
			h := submit(t, m, f)
			if prefetch {
				// Staged in the background while the core is still busy.
				deadline := time.Now().Add(10 * time.Second)
				for j.index("stage rgb") < 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
			}
			j.add("released")
			close(release)
			if err := h.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			_ = hb.Wait(context.Background())
			want := []string{"released", "stage rgb", "tile:segment", "tile:label", "commit mask"}
			if prefetch {
				want = []string{"stage rgb", "released", "tile:segment", "tile:label", "commit mask"}
			}
			if got := j.list(); !slices.Equal(got, want) {
				t.Errorf("events %v, want %v", got, want)
			}
		})
	}
}

// TestManagerPrefetchOverlapsUpload checks that with Prefetch the input of
// the next operation is uploaded while the current one computes, and
// without it not.
func TestManagerPrefetchOverlapsUpload(t *testing.T) {
	for _, prefetch := range []bool{true, false} {
		var j journal
		gpu := &fakeGPU{j: &j}
		wait := 10 * time.Second
		if !prefetch {
			wait = 50 * time.Millisecond
		}
		gpu.onRun = func(ctx context.Context) error {
			if j.index("up:inB") >= 0 || j.index("gpu:B") >= 0 {
				return nil
			}
			deadline := time.Now().Add(wait)
			for j.index("up:inB") < 0 {
				if time.Now().After(deadline) {
					return errors.New("B's input was not uploaded while A computed")
				}
				time.Sleep(time.Millisecond)
			}
			return nil
		}
		m := startManager(t, Config{Prefetch: prefetch}, gpu)
		f := NewFlow("pair")
		Add(f, logOp(&j, "A", 0), "gpu", Reads(d("inA", 8)))
		Add(f, logOp(&j, "B", 0), "gpu", Reads(d("inB", 8)))
		err := submit(t, m, f).Wait(context.Background())
		if prefetch && err != nil {
			t.Errorf("with prefetch: %v", err)
		}
		if !prefetch && err == nil {
			t.Error("without prefetch, B's upload overlapped A's computation")
		}
	}
}

// TestManagerMatchesSimulatorTransfers runs the same GPU chains on the
// manager and on the simulator: the transfers must agree.
func TestManagerMatchesSimulatorTransfers(t *testing.T) {
	for _, loc := range []bool{false, true} {
		cfg := Config{Locality: loc}
		var j journal
		m := startManager(t, cfg, &fakeGPU{j: &j})
		if err := submit(t, m, chain("real")).Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		real := m.Report()
		sim := mustSim(t, cfg, oneGPU, chain("sim"))
		if real.Uploads != sim.Uploads || real.Downloads != sim.Downloads {
			t.Errorf("locality=%v: manager %d up %d down, simulator %d up %d down", loc, real.Uploads, real.Downloads, sim.Uploads, sim.Downloads)
		}
		moves := 0
		for _, e := range j.list() {
			if strings.HasPrefix(e, "up:") || strings.HasPrefix(e, "down:") {
				moves++
			}
		}
		if moves != real.Uploads+real.Downloads {
			t.Errorf("locality=%v: unit saw %d moves, report says %d", loc, moves, real.Uploads+real.Downloads)
		}
	}
}

func TestManagerLearnsSpeedups(t *testing.T) {
	ms := time.Millisecond
	fast := &Op[int]{Name: "fast", Impls: hybrid("", 0).Impls}
	slow := &Op[int]{Name: "slow", Impls: hybrid("", 0).Impls}
	m := startManager(t, Config{Policy: PATS, Learn: true}, Machine{CPUs: 1, GPUs: 1}.Units(1)...)
	var hs []*Job
	for i := range 6 {
		f := NewFlow(fmt.Sprint(i))
		// Costs of several milliseconds: a loaded machine's oversleeping
		// (a millisecond or two) must not turn the ratios around.
		Add(f, fast, 0, WithCost(Cost{CPU: 32 * ms, GPU: 4 * ms}))
		Add(f, slow, 0, WithCost(Cost{CPU: 8 * ms, GPU: 16 * ms}))
		hs = append(hs, submit(t, m, f))
	}
	for _, h := range hs {
		if err := h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	r := m.Report()
	f, _ := r.Op("fast")
	s, _ := r.Op("slow")
	if f.Learned < 3 || s.Learned == 0 || s.Learned > 1 {
		t.Errorf("learned speedups fast %.2f (modelled 8), slow %.2f (modelled 0.5)", f.Learned, s.Learned)
	}
}

func TestTaskInGraph(t *testing.T) {
	type tile struct {
		n, sq, out int
	}
	square := &Op[*tile]{Name: "square", Speedup: 5, Impls: map[device.Kind]Impl[*tile]{
		device.CPU: func(_ context.Context, _ device.Device, t *tile) error { t.sq = t.n * t.n; return nil },
	}}
	inc := &Op[*tile]{Name: "inc", Speedup: 1, Impls: map[device.Kind]Impl[*tile]{
		device.CPU: func(_ context.Context, _ device.Device, t *tile) error { t.out = t.sq + 1; return nil },
	}}
	m := startManager(t, Config{Policy: PATS}, CPUUnits(2)...)
	g := graph.New[int, int]("tiles")
	tiles := map[int]*tile{}
	var mu sync.Mutex
	node := AddTask(g, "segment", 3, &Task[int, int]{
		Manager: m,
		Expand: func(_ context.Context, n int) (*Flow, error) {
			tl := &tile{n: n}
			mu.Lock()
			tiles[n] = tl
			mu.Unlock()
			f := NewFlow(fmt.Sprint("tile", n))
			Add(f, square, tl, Writes(d("sq", 8)))
			Add(f, inc, tl, Reads(d("sq", 8)), Writes(d("out", 8)))
			return f, nil
		},
		Result: func(_ context.Context, n int) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return tiles[n].out, nil
		},
	})
	graph.Connect(g.Input(), node)
	graph.Connect(node, g.Output())
	var got []int
	err := g.Run(context.Background(), slices.Values([]int{1, 2, 3, 4, 5, 6}), func(v int) error {
		got = append(got, v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{2, 5, 10, 17, 26, 37}) {
		t.Errorf("results %v", got)
	}
	if r := m.Report(); r.Flows != 6 {
		t.Errorf("manager ran %d flows, want 6", r.Flows)
	}
}

// queueGPU is a fakeGPU whose transfers are queued ([Queuer]): an upload
// records "queue:KEY" and returns a copy that completes once release(KEY)
// is called (or fails with failWait[KEY]); a download records
// "qdown:KEY" and is done at once. It records the goroutine of every
// Queue and Run.
type queueGPU struct {
	fakeGPU
	mu        sync.Mutex
	gates     map[string]chan struct{}
	failQueue map[string]error
	failWait  map[string]error
	gatedDown map[string]bool // downloads done once release("down:KEY")
	gids      map[string]bool
}

func newQueueGPU(j *journal) *queueGPU {
	return &queueGPU{fakeGPU: fakeGPU{j: j}, gates: map[string]chan struct{}{}, failQueue: map[string]error{}, failWait: map[string]error{}, gatedDown: map[string]bool{}, gids: map[string]bool{}}
}

func (g *queueGPU) gate(key string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.gates[key]
	if !ok {
		c = make(chan struct{})
		g.gates[key] = c
	}
	return c
}

func (g *queueGPU) release(key string) { close(g.gate(key)) }

func (g *queueGPU) noteGoroutine() {
	id := goid()
	g.mu.Lock()
	g.gids[id] = true
	g.mu.Unlock()
}

func (g *queueGPU) Queues() bool { return true }

func (g *queueGPU) Queue(_ context.Context, d Data, toDevice bool) (Pending, error) {
	g.noteGoroutine()
	if !toDevice {
		g.j.add("qdown:%s", d.Key)
		if !g.gatedDown[d.Key] {
			return Completed(nil), nil
		}
		c := g.gate("down:" + d.Key)
		return waitGate{c, func(context.Context) error {
			select {
			case <-c:
				return nil
			case <-time.After(5 * time.Second):
				return fmt.Errorf("the manager waited for %s's download before it could complete", d.Key)
			}
		}}, nil
	}
	g.mu.Lock()
	qerr, werr := g.failQueue[d.Key], g.failWait[d.Key]
	g.mu.Unlock()
	if qerr != nil {
		return nil, qerr
	}
	g.j.add("queue:%s", d.Key)
	c := g.gate(d.Key)
	return waitGate{c, func(ctx context.Context) error {
		select {
		case <-c:
			return werr
		case <-time.After(10 * time.Second):
			return fmt.Errorf("the manager waited for %s's upload before releasing it", d.Key)
		}
	}}, nil
}

func (g *queueGPU) Run(ctx context.Context, impl func(context.Context) error, c Cost) error {
	g.noteGoroutine()
	return g.fakeGPU.Run(ctx, impl, c)
}

// waitGate is a queued copy, done once its gate is closed.
type waitGate struct {
	gate chan struct{}
	wait func(context.Context) error
}

func (w waitGate) Done() bool {
	select {
	case <-w.gate:
		return true
	default:
		return false
	}
}

func (w waitGate) Wait(ctx context.Context) (time.Duration, error) { return 0, w.wait(ctx) }

// TestManagerQueuedUploadOverlapsCompute checks that a Queuer GPU with
// Prefetch is driven from one goroutine that queues the next operation's
// upload before it runs the current one, and runs the current one while
// that upload is still in progress (B's upload completes only once A
// runs: a manager that waited for it first would time out).
func TestManagerQueuedUploadOverlapsCompute(t *testing.T) {
	var j journal
	gpu := newQueueGPU(&j)
	gpu.release("inA")
	gpu.onRun = func(context.Context) error {
		if j.index("pair:A") < 0 && j.index("pair:B") < 0 {
			gpu.release("inB") // A is running: B's copy may now complete
		}
		return nil
	}
	m := startManager(t, Config{Prefetch: true}, gpu)
	f := NewFlow("pair")
	Add(f, gpuOnlyOp(&j, "A"), "pair", Reads(d("inA", 8)))
	Add(f, gpuOnlyOp(&j, "B"), "pair", Reads(d("inB", 8)))
	if err := submit(t, m, f).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := j.list()
	want := []string{"queue:inA", "queue:inB", "pair:A", "pair:B"}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if len(gpu.gids) != 1 {
		t.Errorf("QueueUpload and Run were called from %d goroutines, want one", len(gpu.gids))
	}
}

// TestManagerQueuedServesWhileComputing checks that a Queuer GPU whose
// Run calls WhileComputing gets its next operation taken and its upload
// queued there, during the current operation (from its second: the
// worker learns from the first that the unit calls it), and that
// WhileComputing elsewhere does nothing.
func TestManagerQueuedServesWhileComputing(t *testing.T) {
	WhileComputing(context.Background())() // no worker: nothing happens
	var j journal
	gpu := newQueueGPU(&j)
	for _, k := range []string{"inA", "inB", "inC"} {
		gpu.release(k)
	}
	var during []string // the uploads queued during each Run
	gpu.onRun = func(ctx context.Context) error {
		n := len(j.list())
		WhileComputing(ctx)()
		WhileComputing(ctx)()
		during = append(during, strings.Join(j.list()[n:], " "))
		return nil
	}
	m := startManager(t, Config{Prefetch: true}, gpu)
	f := NewFlow("f")
	for _, op := range []string{"A", "B", "C"} {
		Add(f, gpuOnlyOp(&j, op), "f", Reads(d("in"+op, 8)))
	}
	if err := submit(t, m, f).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"", "queue:inC", ""}; !slices.Equal(during, want) {
		t.Errorf("uploads queued during each Run: %q, want %q (events %q)", during, want, j.list())
	}
	if len(gpu.gids) != 1 {
		t.Errorf("QueueUpload and Run were called from %d goroutines, want one", len(gpu.gids))
	}
}

// TestManagerQueuedReapsWhileComputing checks that a queued download is
// handed to the scheduler when it is done, seen by the WhileComputing
// function while the GPU computes the next operation: A's result x, which
// a CPU-only step C reads, downloads while B, after A on the GPU,
// computes; C must run before B ends.
func TestManagerQueuedReapsWhileComputing(t *testing.T) {
	var j journal
	gpu := newQueueGPU(&j)
	gpu.gatedDown["x"] = true
	gpu.release("y") // uploaded again without Locality
	runs := 0
	gpu.onRun = func(ctx context.Context) error {
		if runs++; runs < 2 {
			return nil
		}
		gpu.release("down:x")
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && j.index("f:C") < 0; time.Sleep(100 * time.Microsecond) {
			WhileComputing(ctx)()
		}
		return nil
	}
	cpuOnly := &Op[string]{Name: "C", Impls: map[device.Kind]Impl[string]{device.CPU: func(_ context.Context, _ device.Device, flow string) error {
		j.add("%s:C", flow)
		return nil
	}}}
	m := startManager(t, Config{Prefetch: true}, append(CPUUnits(1), gpu)...)
	f := NewFlow("f")
	Add(f, gpuOnlyOp(&j, "A"), "f", Writes(d("x", 8), d("y", 8)))
	Add(f, gpuOnlyOp(&j, "B"), "f", Reads(d("y", 8)))
	Add(f, cpuOnly, "f", Reads(d("x", 8)))
	if err := submit(t, m, f).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c, b := j.index("f:C"), j.index("f:B"); c < 0 || b < 0 || c > b {
		t.Errorf("C did not run while B computed: %q", j.list())
	}
}

// TestManagerQueuedUploadErrors checks that a failure to queue an upload,
// or of the queued copy, fails the flow with an error that names the
// datum, the step and the unit, and that the worker goes on.
func TestManagerQueuedUploadErrors(t *testing.T) {
	for _, waitFails := range []bool{false, true} {
		var j journal
		gpu := newQueueGPU(&j)
		boom := errors.New("boom")
		if waitFails {
			gpu.failWait["bad"] = boom
		} else {
			gpu.failQueue["bad"] = boom
		}
		gpu.release("bad")
		gpu.release("good")
		m := startManager(t, Config{Prefetch: true}, gpu)
		bad := NewFlow("bad")
		Add(bad, gpuOnlyOp(&j, "A"), "bad", Reads(d("bad", 8)))
		err := submit(t, m, bad).Wait(context.Background())
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), `upload "bad"`) ||
			!strings.Contains(err.Error(), "fake-gpu") || !strings.Contains(err.Error(), "(A)") {
			t.Errorf("waitFails=%v: error %v", waitFails, err)
		}
		if j.index("bad:A") >= 0 {
			t.Errorf("waitFails=%v: A ran without its input", waitFails)
		}
		good := NewFlow("good")
		Add(good, gpuOnlyOp(&j, "A"), "good", Reads(d("good", 8)))
		if err := submit(t, m, good).Wait(context.Background()); err != nil {
			t.Errorf("waitFails=%v: the next flow failed: %v", waitFails, err)
		}
	}
}

// gpuOnlyOp returns a GPU-only operation that records "flow:name".
func gpuOnlyOp(j *journal, name string) *Op[string] {
	return &Op[string]{Name: name, Impls: map[device.Kind]Impl[string]{device.GPU: func(_ context.Context, _ device.Device, flow string) error {
		j.add("%s:%s", flow, name)
		return nil
	}}}
}

// goid returns the calling goroutine's number.
func goid() string {
	buf := make([]byte, 64)
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf[:runtime.Stack(buf, false)]), "goroutine "), " ")
	return id
}

// coreStore is a Stager that records the goroutines that stage and commit
// through it, and how many commits ran at once at most.
type coreStore struct {
	mu       sync.Mutex
	gids     map[string]bool
	stages   int
	commits  int
	inCommit int
	maxAt    int
	fail     string // "stage" or "commit": that call fails
}

func (s *coreStore) note() {
	s.mu.Lock()
	s.gids[goid()] = true
	s.mu.Unlock()
}

func (s *coreStore) Stage(context.Context) error {
	s.note()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stages++
	if s.fail == "stage" {
		return errors.New("disk gone")
	}
	return nil
}

func (s *coreStore) Commit(context.Context) error {
	s.note()
	s.mu.Lock()
	s.commits++
	s.inCommit++
	s.maxAt = max(s.maxAt, s.inCommit)
	s.mu.Unlock()
	time.Sleep(time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inCommit--
	if s.fail == "commit" {
		return errors.New("disk full")
	}
	return nil
}

// TestManagerStorageOnCores checks Config.StorageOnCores: the CPU workers
// stage and commit (no other goroutine does), one commit at a time, Close
// waits for the commits, and a failed staging or commit fails its flow.
func TestManagerStorageOnCores(t *testing.T) {
	var mu sync.Mutex
	workers := map[string]bool{}
	op := &Op[int]{Name: "op", Impls: map[device.Kind]Impl[int]{device.CPU: func(context.Context, device.Device, int) error {
		mu.Lock()
		workers[goid()] = true
		mu.Unlock()
		time.Sleep(time.Millisecond)
		return nil
	}}}
	st := &coreStore{gids: map[string]bool{}}
	m, err := Start(context.Background(), Config{Prefetch: true, StorageOnCores: true, Window: 4}, CPUUnits(3)...)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []*Job
	for i := range 12 {
		f := NewFlow(fmt.Sprint("f", i))
		Add(f, op, i, Reads(Data{Key: "in", Bytes: 8, Store: st}), Writes(Data{Key: "out", Bytes: 8, Store: st}))
		jobs = append(jobs, submit(t, m, f))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := j.Err(); err != nil {
			t.Error(err)
		}
	}
	if st.stages != 12 || st.commits != 12 || st.maxAt != 1 {
		t.Errorf("%d stagings, %d commits (want 12 each), at most %d commits at once (want 1)", st.stages, st.commits, st.maxAt)
	}
	for g := range st.gids {
		if !workers[g] {
			t.Errorf("goroutine %s staged or committed but ran no operation: not a CPU worker", g)
		}
	}
	for _, fail := range []string{"stage", "commit"} {
		bad := &coreStore{gids: map[string]bool{}, fail: fail}
		m := startManager(t, Config{StageAhead: true, StorageOnCores: true}, CPUUnits(1)...)
		f := NewFlow("bad")
		Add(f, op, 0, Reads(Data{Key: "in", Bytes: 8, Store: bad}), Writes(Data{Key: "out", Bytes: 8, Store: bad}))
		err := submit(t, m, f).Wait(context.Background())
		want := map[string]string{"stage": `stage "in": disk gone`, "commit": "commit outputs: disk full"}[fail]
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `flow "bad"`) {
			t.Errorf("a failing %s: %v, want an error with %q", fail, err, want)
		}
	}
}

// pairStore is a Store whose first commit waits (up to 5 s) for a second
// one to begin, and which records the most commits at once.
type pairStore struct {
	mu       sync.Mutex
	commits  int
	inCommit int
	maxAt    int
	met      chan struct{} // closed when two commits run at once (or the test ends the wait)
	closed   bool
}

// end closes s.met once (s.mu held).
func (s *pairStore) end() {
	if !s.closed {
		s.closed = true
		close(s.met)
	}
}

func (s *pairStore) Stage(context.Context) error { return nil }

func (s *pairStore) Commit(context.Context) error {
	s.mu.Lock()
	s.commits++
	first := s.commits == 1
	s.inCommit++
	s.maxAt = max(s.maxAt, s.inCommit)
	if s.inCommit == 2 {
		s.end()
	}
	s.mu.Unlock()
	if first {
		select {
		case <-s.met:
		case <-time.After(5 * time.Second):
		}
	}
	s.mu.Lock()
	s.inCommit--
	s.mu.Unlock()
	return nil
}

// TestManagerCoreCommits checks Config.CoreCommits: with two, two CPU
// workers commit at once (the first commit waits for the second to
// begin), never more; with the default one, never two.
func TestManagerCoreCommits(t *testing.T) {
	op := &Op[int]{Name: "op", Impls: map[device.Kind]Impl[int]{device.CPU: func(context.Context, device.Device, int) error { return nil }}}
	for _, c := range []struct{ commits, want int }{{2, 2}, {0, 1}} {
		st := &pairStore{met: make(chan struct{})}
		m, err := Start(context.Background(), Config{StorageOnCores: true, CoreCommits: c.commits, Window: 4}, CPUUnits(3)...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			f := NewFlow(fmt.Sprint("f", i))
			Add(f, op, i, Writes(Data{Key: "out", Bytes: 8, Store: st}))
			submit(t, m, f)
		}
		if c.want == 1 { // the first commit waits out its 5 s alone: end it sooner
			time.AfterFunc(50*time.Millisecond, func() {
				st.mu.Lock()
				defer st.mu.Unlock()
				st.end()
			})
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if st.commits != 6 || st.maxAt != c.want {
			t.Errorf("CoreCommits %d: %d commits (want 6), at most %d at once (want %d)", c.commits, st.commits, st.maxAt, c.want)
		}
	}
	if _, err := Start(context.Background(), Config{CoreCommits: -1}, CPUUnits(1)...); err == nil {
		t.Error("a negative CoreCommits was accepted")
	}
}

// TestManagerStorageOnCoresCancel cancels a manager whose only core is
// busy while the commits of three flows, computed on a GPU, wait for it:
// every job ends with an error, nothing is committed, Close returns.
func TestManagerStorageOnCoresCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started, release := make(chan string, 4), make(chan struct{})
	var j journal
	m, err := Start(ctx, Config{StorageOnCores: true, Window: 4}, append(CPUUnits(1), &fakeGPU{j: &j})...)
	if err != nil {
		t.Fatal(err)
	}
	busy := NewFlow("busy")
	Add(busy, blocker(started, release), "busy")
	hb := submit(t, m, busy)
	<-started
	st := &coreStore{gids: map[string]bool{}}
	var jobs []*Job
	for i := range 3 {
		name := fmt.Sprint("f", i)
		f := NewFlow(name)
		Add(f, gpuOnlyOp(&j, "A"), name, Writes(Data{Key: "out", Bytes: 8, Store: st}))
		jobs = append(jobs, submit(t, m, f))
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		n := 0
		for _, e := range j.list() {
			if strings.HasPrefix(e, "down:") {
				n++
			}
		}
		if n == 3 {
			break // computed and downloaded: the commits wait for the core
		}
		if time.Now().After(deadline) {
			t.Fatalf("the GPU did not compute the flows: %q", j.list())
		}
	}
	cancel()
	for _, h := range jobs {
		select {
		case <-h.Done():
			if h.Err() == nil {
				t.Errorf("%s: no error after the cancellation", h.name)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a job did not end after the cancellation")
		}
	}
	close(release)
	<-hb.Done()
	if err := m.Close(); err == nil {
		t.Error("Close after the cancellation returned no error")
	}
	if st.commits != 0 {
		t.Errorf("%d commits after the cancellation, want none", st.commits)
	}
}

// TestManagerSerialGPUTakesWhatItsDownloadReadies: a serial GPU worker
// (no Prefetch) counts as waiting from the moment its results are down,
// so that, as in the simulator, the operations they make ready go to it
// first and not all to the cores that were already waiting for them.
func TestManagerSerialGPUTakesWhatItsDownloadReadies(t *testing.T) {
	var j journal
	var m *Manager
	coresWaiting := func(context.Context, device.Device, string) error {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			m.mu.Lock()
			n := 0
			for _, w := range m.sched.workers {
				if w.gpu < 0 && w.waiting {
					n++
				}
			}
			m.mu.Unlock()
			if n == 2 {
				return nil
			}
			if time.Now().After(deadline) {
				return errors.New("the cores never waited")
			}
		}
	}
	a := &Op[string]{Name: "A", Impls: map[device.Kind]Impl[string]{device.GPU: coresWaiting}}
	b := logOp(&j, "B", 0)
	flow := func() *Flow {
		f := NewFlow("f")
		Add(f, a, "", Writes(d("x", 8)), cost(1000, 10))
		Add(f, b, "", Reads(d("x", 8)), cost(1000, 10))
		Add(f, b, "", Reads(d("x", 8)), cost(1000, 10))
		return f
	}
	cfg := Config{Policy: FCFS}
	m = startManager(t, cfg, append(CPUUnits(2), &fakeGPU{j: &j})...)
	if err := submit(t, m, flow()).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	real, _ := m.Report().Op("B")
	sim, _ := mustSim(t, cfg, Machine{CPUs: 2, GPUs: 1, Bandwidth: 1e9}, flow()).Op("B")
	if real.GPU != 1 || real.CPU != 1 {
		t.Errorf("B ran %d times on the cores and %d on the GPU, want 1 and 1 (simulated: %d and %d)", real.CPU, real.GPU, sim.CPU, sim.GPU)
	}
	if sim.GPU != real.GPU || sim.CPU != real.CPU {
		t.Errorf("simulated B: %d on the cores, %d on the GPU; the manager: %d and %d", sim.CPU, sim.GPU, real.CPU, real.GPU)
	}
}

// TestManagerReportsWakeUps: a core asleep for want of work, woken with
// an operation, counts the wake-up and the time it took to run again.
func TestManagerReportsWakeUps(t *testing.T) {
	var j journal
	f := NewFlow("f")
	Add(f, logOp(&j, "A", 5*time.Millisecond), "", Writes(d("x", 8)))
	Add(f, logOp(&j, "B", 0), "", Reads(d("x", 8)))
	m := startManager(t, Config{}, CPUUnits(2)...)
	if err := submit(t, m, f).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	woken := 0
	for _, u := range m.Report().Units {
		woken += u.Woken
		if u.Woken == 0 && (u.WakeDelay != 0 || u.LongestWake != 0) || u.LongestWake > u.WakeDelay {
			t.Errorf("%s: woken %d times, %v in all, %v the longest", u.Name, u.Woken, u.WakeDelay, u.LongestWake)
		}
	}
	// B became ready when A's core finished, the other core asleep: the
	// dispatcher gives a finishing worker nothing before it asks again.
	if woken < 1 {
		t.Errorf("no wake-up counted: %+v", m.Report().Units)
	}
	for _, u := range mustSim(t, Config{}, Machine{CPUs: 2}, NewFlow("g")).Units {
		if u.Woken != 0 || u.WakeDelay != 0 {
			t.Errorf("simulated %s woken %d times", u.Name, u.Woken)
		}
	}
}

// TestManagerRecordsModelTimes: on simulated units the manager records an
// operation's modelled time, not the wall clock's, which the units'
// overshoot accounting shortens (here by an overshoot owed of a second,
// which leaves the operation's wait at nothing), nor less than the
// implementation's own time.
func TestManagerRecordsModelTimes(t *testing.T) {
	units := Machine{CPUs: 1, GPUs: 1, Bandwidth: 1e9}.Units(1)
	gpu := units[1].(Sim)
	gpu.clock.debt[engCompute] = time.Second
	gpu.clock.debt[engUpload] = time.Second
	slow := func(context.Context, device.Device, int) error { time.Sleep(20 * time.Millisecond); return nil }
	f := NewFlow("f")
	Add(f, only("fast", device.GPU), 0, Reads(d("in", 1e6)), cost(0, 10000))
	Add(f, &Op[int]{Name: "slow", Impls: map[device.Kind]Impl[int]{device.GPU: slow}}, 0, cost(0, 5000))
	m := startManager(t, Config{}, units...)
	if err := submit(t, m, f).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	r := m.Report()
	if o, _ := r.Op("fast"); o.GPUTime != 10*time.Millisecond {
		t.Errorf("fast: recorded %v on the GPU, want its modelled 10ms", o.GPUTime)
	}
	if o, _ := r.Op("slow"); o.GPUTime < 20*time.Millisecond {
		t.Errorf("slow: recorded %v on the GPU, want at least its implementation's 20ms", o.GPUTime)
	}
	m.mu.Lock()
	moved, took := m.sched.movedBytes, m.sched.movedTime
	m.mu.Unlock()
	if moved != 1e6 || took != time.Millisecond {
		t.Errorf("the upload of 1 MB at 1 GB/s recorded as %d bytes in %v, want 1ms", moved, took)
	}
}

// gateStore is a Stager whose commits signal started and wait for release.
type gateStore struct{ started, release chan struct{} }

func (gateStore) Stage(context.Context) error { return nil }
func (s gateStore) Commit(ctx context.Context) error {
	s.started <- struct{}{}
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestManagerWindowHoldsCommittingFlows: a computed flow keeps its place
// in the window until its outputs are committed, as in the simulator, and
// the makespan ends with the last commit.
func TestManagerWindowHoldsCommittingFlows(t *testing.T) {
	st := gateStore{make(chan struct{}, 4), make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(st.release) }) }
	m := startManager(t, Config{Window: 1}, CPUUnits(1)...)
	t.Cleanup(release) // before the manager's Close (cleanups run last first)
	begun := time.Now()
	a := NewFlow("a")
	Add(a, hybrid("op", 1), 0, Writes(Data{Key: "out", Bytes: 8, Store: st}))
	h := submit(t, m, a)
	<-st.started
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	// A submission with a cancelled context fails only if it has to wait.
	if _, err := m.Submit(cancelled, NewFlow("b")); !errors.Is(err, context.Canceled) {
		t.Fatalf("a second flow was admitted while the first one's commit ran (err %v)", err)
	}
	held := time.Since(begun)
	release()
	if err := h.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Submit(cancelled, NewFlow("c")); err != nil {
		t.Errorf("after the commit, the window had no room: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if r := m.Report(); r.Makespan < held {
		t.Errorf("makespan %v ends before the commit, held %v", r.Makespan, held)
	}
	sim := mustSim(t, Config{Window: 1}, Machine{CPUs: 1, CommitBandwidth: 8}, func() *Flow {
		f := NewFlow("a")
		Add(f, hybrid("op", 1), 0, Writes(Data{Key: "out", Bytes: 8, Store: st}), cost(1, 1))
		return f
	}())
	if sim.Makespan < time.Second {
		t.Errorf("simulated makespan %v, want the 1 s commit in it", sim.Makespan)
	}
}
