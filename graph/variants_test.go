package graph_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// fakeGPU is host memory posing as a GPU that takes delay per value.
type fakeGPU struct {
	id    int
	delay time.Duration
}

func (d fakeGPU) ID() int           { return d.id }
func (d fakeGPU) Kind() device.Kind { return device.GPU }
func (d fakeGPU) Name() string      { return fmt.Sprintf("gpu%d", d.id) }
func (d fakeGPU) Memory() int64     { return 0 }

// deviceTask sleeps for its device's delay (cpu: cpuDelay) and emits the
// name of the device it ran on, read from its task.Info.
func deviceTask(cpuDelay time.Duration) func() task.Task[int, string] {
	return func() task.Task[int, string] {
		return task.Func[int, string](func(ctx context.Context, v int, out task.Emitter[string]) error {
			info, _ := task.InfoFrom(ctx)
			d := cpuDelay
			if g, ok := info.Device.(fakeGPU); ok {
				d = g.delay
			}
			time.Sleep(d)
			return out.Emit(info.Device.Name())
		})
	}
}

// variantsGraph has a task with a CPU implementation and two GPU ones
// of the same kind, gpu1 much slower than gpu0 (1, 15 and 60 ms: far
// apart, for a busy machine and the race detector).
func variantsGraph() *graph.Graph[int, string] {
	g := graph.New[int, string]("hybrid")
	newTask := deviceTask(15 * time.Millisecond)
	work := graph.AddVariants(g, "work", []graph.Variant[int, string]{
		{Device: device.Host{}, New: newTask},
		{Device: fakeGPU{id: 0, delay: time.Millisecond}, New: newTask},
		{Device: fakeGPU{id: 1, delay: 60 * time.Millisecond}, New: newTask},
	})
	graph.Connect(g.Input(), work)
	graph.Connect(work, g.Output())
	return g
}

// Values sent one at a time: each implementation is tried, then the
// fastest device gets the values, and the slow GPU is told apart from the
// fast one of the same kind and avoided (issue 22, item 4).
func TestVariantsAvoidSlowDevice(t *testing.T) {
	rt, err := variantsGraph().Start(context.Background(), graph.WithoutStallReport())
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan string)
	go func() {
		defer close(results)
		for r := range rt.Results() {
			results <- r
		}
	}()
	ran := map[string]int{}
	const n = 40
	for i := range n {
		_ = rt.Send(i)
		ran[<-results]++
	}
	rt.Close()
	for range results {
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	// Each idle implementation is measured again after 16 values went to
	// others: gpu1 gets at most 3 values of 40 (its first and two
	// probes), and gpu0 most of them, even if the machine was busy during
	// one of its measures.
	if ran["cpu0"] < 1 || ran["gpu1"] < 1 || ran["gpu1"] > 3 || ran["gpu0"] < n/2 {
		t.Errorf("values per device %v: want each tried, gpu1 (slow) at most 3 times, gpu0 (fast) most", ran)
	}
	if testing.Verbose() {
		t.Logf("values per device %v", ran)
	}
	var dot strings.Builder
	if err := rt.WriteDOT(&dot, graph.DOTOptions{}); err != nil || !strings.Contains(dot.String(), `"work:route" -> "work/gpu1"`) ||
		!strings.Contains(dot.String(), `"work/gpu1" -> "work:merge"`) {
		t.Errorf("picture (%v):\n%s", err, dot.String())
	}
	// Each implementation is a task of its own, named after its device.
	for _, ts := range rt.Stats().Tasks {
		dev := strings.TrimPrefix(ts.Name, "work/")
		if int(ts.ItemsIn) != ran[dev] {
			t.Errorf("task %q executed %d values, its device %d", ts.Name, ts.ItemsIn, ran[dev])
		}
	}
}

// Values sent all at once: the slower device takes some of them, those
// it finishes before the faster one would have reached them.
func TestVariantsShareLoad(t *testing.T) {
	g := graph.New[int, string]("share")
	newTask := deviceTask(0)
	work := graph.AddVariants(g, "work", []graph.Variant[int, string]{
		{Device: fakeGPU{id: 0, delay: time.Millisecond}, New: newTask},
		{Device: fakeGPU{id: 1, delay: 4 * time.Millisecond}, New: newTask},
	})
	graph.Connect(g.Input(), work)
	graph.Connect(work, g.Output())
	ran := map[string]int{}
	err := g.Run(context.Background(), seqInts(60), func(s string) error {
		ran[s]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ran["gpu0"]+ran["gpu1"] != 60 || ran["gpu1"] < 1 || ran["gpu1"] >= ran["gpu0"] {
		t.Errorf("values per device %v: want the slow gpu1 used, less than gpu0", ran)
	}
	if testing.Verbose() {
		t.Logf("values per device %v", ran)
	}
}

// Mistakes are refused by Start, naming the task; two devices of one
// name get distinct task names.
func TestVariantsErrors(t *testing.T) {
	newTask := deviceTask(0)
	for _, c := range []struct {
		vs   []graph.Variant[int, string]
		want string
	}{
		{nil, `task "work": no implementations given`},
		{[]graph.Variant[int, string]{{New: newTask}}, `task "work": implementation 0 has no device`},
		{[]graph.Variant[int, string]{{Device: device.Host{}}}, `task "work": implementation 0 (cpu0) has a nil factory`},
	} {
		g := graph.New[int, string]("bad")
		work := graph.AddVariants(g, "work", c.vs)
		graph.Connect(g.Input(), work)
		graph.Connect(work, g.Output())
		if _, err := g.Start(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Start: %v, want %q", err, c.want)
		}
	}
	g := graph.New[int, string]("twins")
	work := graph.AddVariants(g, "work", []graph.Variant[int, string]{
		{Device: device.Host{}, New: newTask}, {Device: device.Host{}, New: newTask, Copies: 2}})
	graph.Connect(g.Input(), work)
	graph.Connect(work, g.Output())
	rt, err := g.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rt.Close()
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ts := range rt.Stats().Tasks {
		names = append(names, fmt.Sprintf("%s×%d", ts.Name, len(ts.Copies)))
	}
	if got := strings.Join(names, " "); got != "work/cpu0×1 work/cpu0#1×2" {
		t.Errorf("tasks %s", got)
	}
}

// In a cycle, the values the chooser holds count as pending: the graph
// ends by quiescence after every value went round.
func TestVariantsInCycle(t *testing.T) {
	var runs atomic.Int64
	dec := func() task.Task[int, int] {
		return task.Func[int, int](func(_ context.Context, v int, out task.Emitter[int]) error {
			runs.Add(1)
			if v == 0 {
				return nil
			}
			return out.Emit(v - 1)
		})
	}
	g := graph.New[int, int]("countdown")
	d := graph.AddVariants(g, "dec", []graph.Variant[int, int]{
		{Device: device.Host{Index: 0}, Copies: 2, New: dec},
		{Device: fakeGPU{id: 0}, New: dec},
	})
	graph.Connect(g.Input(), d)
	graph.Connect(d, d)
	graph.Discard(d)
	err := g.Run(context.Background(), seqInts(20), nil) // 0..19: 20+19+...+1 executions
	if err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 210 {
		t.Errorf("%d executions, want 210", n)
	}
}

// stopper executes one value and then stops (task.Terminator).
type stopper struct{ n int }

func (s *stopper) Execute(_ context.Context, v int, out task.Emitter[string]) error {
	s.n++
	return out.Emit("stopper")
}

func (s *stopper) CanTerminate() bool { return s.n > 0 }

// An implementation whose copies stop early is left out of the choice:
// the others take every value, and the graph ends.
func TestVariantsImplementationStops(t *testing.T) {
	g := graph.New[int, string]("stops")
	work := graph.AddVariants(g, "work", []graph.Variant[int, string]{
		{Device: fakeGPU{id: 0}, New: func() task.Task[int, string] { return &stopper{} }},
		{Device: fakeGPU{id: 1, delay: time.Millisecond}, New: deviceTask(0)},
	})
	graph.Connect(g.Input(), work)
	graph.Connect(work, g.Output())
	ran := map[string]int{}
	err := g.Run(context.Background(), seqInts(20), func(s string) error {
		ran[s]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ran["stopper"] != 1 || ran["gpu1"] != 19 {
		t.Errorf("values per implementation %v, want stopper 1, gpu1 19", ran)
	}
}

// gated makes copies that emit the device they ran on and the value; the
// first Execute of each copy waits until open is closed, so that the
// values sent meanwhile wait for the chooser.
func gated(open <-chan struct{}) func() task.Task[int, string] {
	return func() task.Task[int, string] {
		first := true
		return task.Func[int, string](func(ctx context.Context, v int, out task.Emitter[string]) error {
			if first {
				first = false
				<-open
			}
			info, _ := task.InfoFrom(ctx)
			return out.Emit(fmt.Sprintf("%s %d", info.Device.Name(), v))
		})
	}
}

// newestFirst is a chooser that takes the newest value offered, and
// records what it was offered.
type newestFirst struct {
	units  []device.Unit
	offers [][]device.Candidate
}

func (c *newestFirst) Choose(u device.Unit, ready []device.Candidate) int {
	c.units = append(c.units, u)
	c.offers = append(c.offers, slices.Clone(ready))
	return len(ready) - 1
}

// runGated runs values 0..n-1 through a task with a CPU and a GPU
// implementation (one copy each) chosen by c: the first two values keep
// both busy until all are sent. It returns the values each device ran, in
// the order it ran them.
func runGated(t *testing.T, c device.Chooser, speedup func(int) float64, n int) map[string][]int {
	t.Helper()
	open := make(chan struct{})
	g := graph.New[int, string]("chosen")
	work := graph.AddVariants(g, "work", []graph.Variant[int, string]{
		{Device: device.Host{}, New: gated(open)},
		{Device: fakeGPU{}, New: gated(open)},
	}, graph.Choose(c, speedup))
	graph.Connect(g.Input(), work)
	graph.Connect(work, g.Output())
	rt, err := g.Start(context.Background(), graph.WithoutStallReport())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := rt.Send(i); err != nil {
			t.Fatal(err)
		}
	}
	close(open)
	rt.Close()
	ran := map[string][]int{}
	for r := range rt.Results() {
		var dev string
		var v int
		fmt.Sscan(r, &dev, &v)
		ran[dev] = append(ran[dev], v)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	return ran
}

// A chooser given with Choose decides which waiting value each free
// implementation takes: here the newest, so that after the first two the
// values run newest first; it is offered the units in the order of the
// list and the values with their estimates.
func TestVariantsChooser(t *testing.T) {
	c := &newestFirst{}
	ran := runGated(t, c, func(v int) float64 { return float64(v) / 2 }, 10)
	if len(ran["cpu0"])+len(ran["gpu0"]) != 10 || ran["cpu0"][0] != 0 || ran["gpu0"][0] != 1 {
		t.Fatalf("values per device %v: want 0 on cpu0 and 1 on gpu0 first", ran)
	}
	for dev, vs := range ran {
		if !slices.IsSortedFunc(vs[1:], func(a, b int) int { return b - a }) {
			t.Errorf("%s ran %v after its first: want the newest first", dev, vs[1:])
		}
	}
	if len(c.units) < 10 || c.units[0].Index != 0 || c.units[0].Device.Name() != "cpu0" ||
		c.units[1].Index != 1 || c.units[1].Device.Name() != "gpu0" {
		t.Fatalf("units offered %v", c.units)
	}
	for i, offer := range c.offers {
		for _, cand := range offer {
			if cand.Name != "work" || cand.Group != "" || cand.Local || cand.Bytes != 0 {
				t.Errorf("offer %d: candidate %+v", i, cand)
			}
		}
		// Values 2..9 waited together, oldest first.
		if i == 2 && (len(offer) != 8 || offer[0].Estimate != 1 || offer[7].Estimate != 4.5) {
			t.Errorf("third offer %+v: want the estimates of 2..9", offer)
		}
		// After the first execution its time is known.
		if i >= 2 && offer[0].CPUTime == 0 && offer[0].GPUTime == 0 {
			t.Errorf("offer %d carries no measured time: %+v", i, offer[0])
		}
	}
	if c.offers[0][0].CPUTime != 0 || c.offers[0][0].GPUTime != 0 {
		t.Errorf("first offer %+v: nothing was measured yet", c.offers[0][0])
	}
}

// Without a speedup function every value has one estimate: 1 until both
// kinds are measured, then the ratio of their times; 0 for a task with
// CPU implementations only.
func TestVariantsChooserEstimates(t *testing.T) {
	c := &newestFirst{}
	runGated(t, c, nil, 6)
	for i, offer := range c.offers {
		for _, cand := range offer {
			want := 1.0
			if cand.CPUTime > 0 && cand.GPUTime > 0 {
				want = float64(cand.CPUTime) / float64(cand.GPUTime)
			}
			if cand.Estimate != want {
				t.Errorf("offer %d: estimate %v, want %v (%+v)", i, cand.Estimate, want, cand)
			}
		}
	}
	cpus := &newestFirst{}
	g := graph.New[int, int]("cpus")
	n := graph.AddVariants(g, "work", []graph.Variant[int, int]{
		{Device: device.Host{Index: 0}, New: func() task.Task[int, int] {
			return task.Map(func(_ context.Context, v int) (int, error) { return v, nil })
		}},
		{Device: device.Host{Index: 1}, New: func() task.Task[int, int] {
			return task.Map(func(_ context.Context, v int) (int, error) { return v, nil })
		}},
	}, graph.Choose[int](cpus, nil))
	graph.Connect(g.Input(), n)
	graph.Connect(n, g.Output())
	if err := g.Run(context.Background(), seqInts(5), func(int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, offer := range cpus.offers {
		if offer[0].Estimate != 0 {
			t.Errorf("CPUs only: estimate %v, want 0", offer[0].Estimate)
		}
	}
}

// chooserFunc makes a function a device.Chooser.
type chooserFunc func(device.Unit, []device.Candidate) int

func (f chooserFunc) Choose(u device.Unit, r []device.Candidate) int { return f(u, r) }

// A chooser's panic, a speedup function's, and a chooser that leaves the
// values waiting for ever fail the run, naming the task; Start refuses a
// speedup function of the wrong type and Choose on a task with one
// implementation.
func TestVariantsChooserErrors(t *testing.T) {
	run := func(opt graph.Option) error {
		g := graph.New[int, string]("bad")
		work := graph.AddVariants(g, "work", []graph.Variant[int, string]{
			{Device: device.Host{}, New: deviceTask(0)},
			{Device: fakeGPU{}, New: deviceTask(0)},
		}, opt)
		graph.Connect(g.Input(), work)
		graph.Connect(work, g.Output())
		return g.Run(context.Background(), seqInts(20), func(string) error { return nil })
	}
	panics := chooserFunc(func(device.Unit, []device.Candidate) int { panic("no idea") })
	err := run(graph.Choose[int](panics, nil))
	var pe *task.PanicError
	if err == nil || !strings.Contains(err.Error(), `task "work": chooser graph_test.chooserFunc: panic: no idea`) || !errors.As(err, &pe) {
		t.Errorf("panicking chooser: %v", err)
	}
	idle := chooserFunc(func(device.Unit, []device.Candidate) int { return -1 })
	for _, c := range []struct {
		opt  graph.Option
		want string
	}{
		{graph.Choose(chooserFunc(oldest), func(v int) float64 {
			if v == 3 {
				panic("three")
			}
			return 1
		}), `task "work": speedup function: panic: three`},
		{graph.Choose[int](idle, nil), `task "work": chooser graph_test.chooserFunc left every implementation idle with 20 values waiting`},
		{graph.Choose[int](chooserFunc(func(device.Unit, []device.Candidate) int { return 99 }), nil), `left every implementation idle with 20 values waiting`},
		{graph.Choose(chooserFunc(oldest), func(string) float64 { return 1 }), `task "work": the speedup function is a func(string) float64, but the task's input is int`},
	} {
		if err := run(c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	g := graph.New[int, int]("one")
	n := graph.AddFunc(g, "work", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) },
		graph.Choose[int](chooserFunc(oldest), nil))
	graph.Connect(g.Input(), n)
	graph.Connect(n, g.Output())
	if _, err := g.Start(context.Background()); err == nil || !strings.Contains(err.Error(), `task "work": a chooser (graph.Choose) applies only to a task with several implementations`) {
		t.Errorf("Choose on AddFunc: %v", err)
	}
}

// oldest is a chooser that takes the oldest value offered.
func oldest(device.Unit, []device.Candidate) int { return 0 }

// BenchmarkVariantsChooser measures what the choice costs per value: a
// task with a CPU and a GPU implementation (one copy each, no work) fed
// as fast as the sender can, chosen by the built-in policy, by a chooser
// that takes the oldest value and by one that scans every value offered
// (as PATS does).
func BenchmarkVariantsChooser(b *testing.B) {
	highest := func(u device.Unit, ready []device.Candidate) int {
		best := 0
		for i, c := range ready {
			if c.Estimate > ready[best].Estimate {
				best = i
			}
		}
		return best
	}
	for _, c := range []struct {
		name string
		opt  []graph.Option
	}{
		{"builtin", nil},
		{"oldest", []graph.Option{graph.Choose[int](chooserFunc(oldest), nil)}},
		{"scan", []graph.Option{graph.Choose(chooserFunc(highest), func(v int) float64 { return float64(v % 97) })}},
	} {
		b.Run(c.name, func(b *testing.B) {
			nop := func() task.Task[int, int] {
				return task.Map(func(_ context.Context, v int) (int, error) { return v, nil })
			}
			g := graph.New[int, int]("bench")
			n := graph.AddVariants(g, "work", []graph.Variant[int, int]{
				{Device: device.Host{}, New: nop},
				{Device: fakeGPU{}, New: nop},
			}, c.opt...)
			graph.Connect(g.Input(), n)
			graph.Connect(n, g.Output())
			b.ResetTimer()
			if err := g.Run(context.Background(), seqInts(b.N), nil); err != nil {
				b.Fatal(err)
			}
		})
	}
}
