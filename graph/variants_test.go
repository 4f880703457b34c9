package graph_test

import (
	"context"
	"fmt"
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
