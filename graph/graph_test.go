package graph_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func seq(n int) func(func(int) bool) {
	return func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}
}

// addTask is the first HTGS tutorial: a task that adds two numbers.
type pair struct{ a, b int }

type addTask struct{}

func (addTask) Execute(_ context.Context, in pair, out task.Emitter[int]) error {
	return out.Emit(in.a + in.b)
}

func TestAddGraph(t *testing.T) {
	g := graph.New[pair, int]("add")
	add := graph.AddTask(g, "add", 1, func() task.Task[pair, int] { return addTask{} })
	graph.Connect(g.Input(), add)
	graph.Connect(add, g.Output())

	rt, err := g.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := rt.Send(pair{i, 2 * i}); err != nil {
			t.Fatal(err)
		}
	}
	rt.Close()
	var got []int
	for v := range rt.Results() {
		got = append(got, v)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	// One copy keeps FIFO order.
	for i, v := range got {
		if v != 3*i {
			t.Fatalf("result %d = %d, want %d", i, v, 3*i)
		}
	}
	if len(got) != 100 {
		t.Fatalf("got %d results, want 100", len(got))
	}
}

func squareGraph(threads int) *graph.Graph[int, int] {
	g := graph.New[int, int]("squares")
	sq := graph.AddTask(g, "square", threads, func() task.Task[int, int] {
		return task.Map(func(_ context.Context, v int) (int, error) { return v * v, nil })
	})
	graph.Connect(g.Input(), sq)
	graph.Connect(sq, g.Output())
	return g
}

func runSorted(t *testing.T, g *graph.Graph[int, int], n int) []int {
	t.Helper()
	var got []int
	if err := g.Run(context.Background(), seq(n), func(v int) error { got = append(got, v); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	return got
}

func TestThreadCountsGiveIdenticalResults(t *testing.T) {
	want := runSorted(t, squareGraph(1), 500)
	for threads := 2; threads <= 8; threads++ {
		if got := runSorted(t, squareGraph(threads), 500); !slices.Equal(got, want) {
			t.Fatalf("threads=%d: results differ from threads=1", threads)
		}
	}
}

// copyTask records its Info and counts its phases, to check that each copy
// is separate and sees its own thread id.
type copyTask struct {
	mu                    *sync.Mutex
	inits, shuts, threads map[int]int
	info                  task.Info
	executed              int
}

func (c *copyTask) Initialize(_ context.Context, info task.Info) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.info = info
	c.inits[info.Copy]++
	return nil
}

func (c *copyTask) Execute(ctx context.Context, in int, out task.Emitter[int]) error {
	info, ok := task.InfoFrom(ctx)
	if !ok || info != c.info {
		return fmt.Errorf("InfoFrom = %+v, %v; Initialize saw %+v", info, ok, c.info)
	}
	c.executed++ // not synchronized: the race detector catches shared copies
	return out.Emit(info.Copy)
}

func (c *copyTask) Shutdown(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shuts[c.info.Copy]++
	c.threads[c.info.Copy] = c.executed
	return nil
}

func TestCopiesPhasesAndInfo(t *testing.T) {
	var mu sync.Mutex
	inits, shuts, execd := map[int]int{}, map[int]int{}, map[int]int{}
	g := graph.New[int, int]("copies")
	n := graph.AddTask(g, "work", 4, func() task.Task[int, int] {
		return &copyTask{mu: &mu, inits: inits, shuts: shuts, threads: execd}
	})
	graph.Connect(g.Input(), n)
	graph.Connect(n, g.Output())
	perThread := map[int]int{}
	if err := g.Run(context.Background(), seq(1000), func(th int) error { perThread[th]++; return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if inits[i] != 1 || shuts[i] != 1 {
			t.Errorf("thread %d: %d initializes, %d shutdowns; want 1 each", i, inits[i], shuts[i])
		}
		if execd[i] != perThread[i] {
			t.Errorf("thread %d executed %d, emitted %d", i, execd[i], perThread[i])
		}
	}
	total := 0
	for _, v := range perThread {
		total += v
	}
	if total != 1000 {
		t.Fatalf("total %d, want 1000", total)
	}
}

func TestSharedInstanceFactoryIsRefused(t *testing.T) {
	shared := &copyTask{}
	g := graph.New[int, int]("bad")
	n := graph.AddTask(g, "shared", 2, func() task.Task[int, int] { return shared })
	graph.Connect(g.Input(), n)
	_, err := g.Start(context.Background())
	var te *task.Error
	if !errors.As(err, &te) || te.Task != "shared" || !strings.Contains(err.Error(), "same") {
		t.Fatalf("Start = %v, want a task.Error about the shared instance", err)
	}
}

func TestBroadcastAndFanIn(t *testing.T) {
	// input -> {double, triple} -> sum (fan-in) -> output
	g := graph.New[int, int]("fan")
	double := graph.AddFunc(g, "double", 2, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(2 * v) })
	triple := graph.AddFunc(g, "triple", 3, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(3 * v) })
	pass := graph.AddFunc(g, "merge", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) })
	graph.Connect(g.Input(), double)
	graph.Connect(g.Input(), triple)
	graph.Connect(double, pass)
	graph.Connect(triple, pass)
	graph.Connect(pass, g.Output())
	// The raw input is also broadcast straight to the output.
	graph.Connect(g.Input(), g.Output())

	sum, count := 0, 0
	if err := g.Run(context.Background(), seq(100), func(v int) error { sum += v; count++; return nil }); err != nil {
		t.Fatal(err)
	}
	const base = 99 * 100 / 2
	if count != 300 || sum != 6*base {
		t.Fatalf("count %d sum %d, want 300 and %d", count, sum, 6*base)
	}
}

// accumulate is a cyclic graph: every value circles back until it reaches
// zero. No task implements CanTerminate.
func TestCycleTerminatesByQuiescence(t *testing.T) {
	for _, threads := range []int{1, 3} {
		g := graph.New[int, int]("countdown")
		dec := graph.AddFunc(g, "decrement", threads, func(_ context.Context, v int, out task.Emitter[int]) error {
			return out.Emit(v - 1)
		})
		route := graph.AddFunc(g, "route", 1, func(_ context.Context, v int, out task.Emitter[int]) error {
			return out.Emit(v)
		})
		done := graph.AddFunc(g, "finished", 1, func(_ context.Context, v int, out task.Emitter[int]) error {
			if v <= 0 {
				return out.Emit(v)
			}
			return nil
		})
		again := graph.AddFunc(g, "again", 1, func(_ context.Context, v int, out task.Emitter[int]) error {
			if v > 0 {
				return out.Emit(v)
			}
			return nil
		})
		graph.Connect(g.Input(), dec)
		graph.Connect(dec, route)
		graph.Connect(route, done)
		graph.Connect(route, again)
		graph.Connect(again, dec) // the cycle
		graph.Connect(done, g.Output())

		n := 0
		err := g.Run(context.Background(), seq(50), func(int) error { n++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if n != 50 {
			t.Fatalf("threads=%d: %d values finished, want 50", threads, n)
		}
	}
}

func TestNestedGraph(t *testing.T) {
	inner := squareGraph(2)
	outer := graph.New[int, int]("outer")
	inc := graph.AddFunc(outer, "inc", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v + 1) })
	sq := graph.AddGraph(outer, "inner", inner)
	neg := graph.AddFunc(outer, "neg", 2, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(-v) })
	graph.Connect(outer.Input(), inc)
	graph.Connect(inc, sq)
	graph.Connect(sq, neg)
	graph.Connect(neg, outer.Output())

	var got []int
	if err := outer.Run(context.Background(), seq(10), func(v int) error { got = append(got, v); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	var want []int
	for i := range 10 {
		want = append(want, -(i+1)*(i+1))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	// The nested graph's task is named under it in errors.
	bad := graph.New[int, int]("boom")
	b := graph.AddFunc(bad, "explode", 1, func(context.Context, int, task.Emitter[int]) error { return errors.New("kaput") })
	graph.Connect(bad.Input(), b)
	graph.Connect(b, bad.Output())
	outer2 := graph.New[int, int]("outer2")
	nb := graph.AddGraph(outer2, "sub", bad)
	graph.Connect(outer2.Input(), nb)
	graph.Connect(nb, outer2.Output())
	err := outer2.Run(context.Background(), seq(1), nil)
	var te *task.Error
	if !errors.As(err, &te) || te.Task != "sub/explode" {
		t.Fatalf("err = %v, want a task.Error for sub/explode", err)
	}
}

func TestPanicNamesTheTask(t *testing.T) {
	g := graph.New[int, int]("panics")
	ok := graph.AddFunc(g, "fine", 2, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) })
	bad := graph.AddFunc(g, "divider", 2, func(_ context.Context, v int, out task.Emitter[int]) error {
		return out.Emit(100 / (v - 7))
	})
	graph.Connect(g.Input(), ok)
	graph.Connect(ok, bad)
	graph.Connect(bad, g.Output())
	err := g.Run(context.Background(), seq(1000), nil)
	var te *task.Error
	var pe *task.PanicError
	if !errors.As(err, &te) || te.Task != "divider" || te.Phase != task.PhaseExecute {
		t.Fatalf("err = %v, want a task.Error naming divider", err)
	}
	if !errors.As(err, &pe) || !strings.Contains(string(pe.Stack), "graph_test") {
		t.Fatalf("err = %v, want a PanicError with the stack", err)
	}
}

func TestTaskErrorStopsGraph(t *testing.T) {
	sentinel := errors.New("bad input")
	var after atomic.Int64
	g := graph.New[int, int]("errs")
	check := graph.AddFunc(g, "check", 1, func(_ context.Context, v int, out task.Emitter[int]) error {
		if v == 10 {
			return sentinel
		}
		if v > 10 {
			after.Add(1)
		}
		return out.Emit(v)
	})
	graph.Connect(g.Input(), check)
	graph.Connect(check, g.Output())
	rt, err := g.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 11 {
		if err := rt.Send(i); err != nil {
			t.Fatal(err)
		}
	}
	err = rt.Wait() // no Close: the error alone ends the run
	if !errors.Is(err, sentinel) {
		t.Fatalf("Wait = %v, want %v", err, sentinel)
	}
	if err := rt.Send(99); !errors.Is(err, sentinel) {
		t.Fatalf("Send after failure = %v", err)
	}
	rt.Close()
	if after.Load() != 0 {
		t.Fatalf("values after the failing one were executed")
	}
}

func TestCancelMidRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var once sync.Once
	g := graph.New[int, int]("slow")
	slow := graph.AddFunc(g, "slow", 2, func(ctx context.Context, v int, out task.Emitter[int]) error {
		once.Do(func() { close(started) })
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
		return out.Emit(v)
	})
	pass := graph.AddFunc(g, "pass", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) })
	graph.Connect(g.Input(), slow)
	graph.Connect(slow, pass)
	graph.Connect(pass, g.Output())
	rt, err := g.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		_ = rt.Send(i)
	}
	<-started
	t0 := time.Now()
	cancel()
	err = rt.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	var te *task.Error
	if errors.As(err, &te) {
		t.Fatalf("cancellation reported as a task failure: %v", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("stopping took %v", d)
	}
	// goleak in TestMain checks that nothing is left.
}

func TestEmitAfterExecuteIsAnError(t *testing.T) {
	var kept task.Emitter[int]
	g := graph.New[int, int]("leak")
	n := graph.AddFunc(g, "keeper", 1, func(_ context.Context, v int, out task.Emitter[int]) error {
		kept = out
		return out.Emit(v)
	})
	graph.Connect(g.Input(), n)
	graph.Connect(n, g.Output())
	if err := g.Run(context.Background(), seq(3), nil); err != nil {
		t.Fatal(err)
	}
	if err := kept.Emit(1); !errors.Is(err, task.ErrEmitClosed) || !strings.Contains(err.Error(), "keeper") {
		t.Fatalf("Emit after termination = %v, want ErrEmitClosed naming the task", err)
	}
}

func TestSendAfterClose(t *testing.T) {
	rt, err := squareGraph(1).Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rt.Close()
	rt.Close() // idempotent
	if err := rt.Send(1); !errors.Is(err, graph.ErrClosed) {
		t.Fatalf("Send after Close = %v", err)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Wait(); err != nil { // Wait twice is fine
		t.Fatal(err)
	}
}

type earlyStop struct{ seen, limit int }

func (e *earlyStop) Execute(_ context.Context, v int, out task.Emitter[int]) error {
	e.seen++
	return out.Emit(v)
}
func (e *earlyStop) CanTerminate() bool { return e.seen >= e.limit }

func TestCanTerminateStopsEarly(t *testing.T) {
	g := graph.New[int, int]("early")
	n := graph.AddTask(g, "first5", 1, func() task.Task[int, int] { return &earlyStop{limit: 5} })
	graph.Connect(g.Input(), n)
	graph.Connect(n, g.Output())
	rt, err := g.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for i := range 5 {
		_ = rt.Send(i)
	}
	for v := range rt.Results() { // ends although the input is still open
		got = append(got, v)
	}
	for i := 5; i < 10; i++ {
		_ = rt.Send(i) // dropped: nobody consumes them any more
	}
	rt.Close()
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("got %v", got)
	}
}

func TestMalformedGraphs(t *testing.T) {
	cases := map[string]func() error{
		"unfed task": func() error {
			g := graph.New[int, int]("g")
			a := graph.AddFunc(g, "a", 1, func(context.Context, int, task.Emitter[int]) error { return nil })
			graph.Connect(a, g.Output())
			_, err := g.Start(context.Background())
			return err
		},
		"other graph": func() error {
			g1, g2 := graph.New[int, int]("g1"), graph.New[int, int]("g2")
			graph.Connect(g1.Input(), g2.Output())
			_, err := g1.Start(context.Background())
			return err
		},
		"duplicate name": func() error {
			g := squareGraph(1)
			graph.AddFunc(g, "square", 1, func(context.Context, int, task.Emitter[int]) error { return nil })
			_, err := g.Start(context.Background())
			return err
		},
		"zero threads": func() error {
			g := graph.New[int, int]("g")
			a := graph.AddFunc(g, "a", 0, func(context.Context, int, task.Emitter[int]) error { return nil })
			graph.Connect(g.Input(), a)
			_, err := g.Start(context.Background())
			return err
		},
		"nil task": func() error {
			g := graph.New[int, int]("g")
			a := graph.AddTask(g, "a", 1, func() task.Task[int, int] { return nil })
			graph.Connect(g.Input(), a)
			_, err := g.Start(context.Background())
			return err
		},
		"double edge": func() error {
			g := squareGraph(1)
			graph.Connect(g.Input(), g.Output())
			graph.Connect(g.Input(), g.Output())
			_, err := g.Start(context.Background())
			return err
		},
	}
	for name, f := range cases {
		if err := f(); err == nil {
			t.Errorf("%s: Start succeeded", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestBoundedQueueBackPressure(t *testing.T) {
	var inFlight, peak atomic.Int64
	g := graph.New[int, int]("bounded")
	fast := graph.AddFunc(g, "fast", 1, func(_ context.Context, v int, out task.Emitter[int]) error {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		return out.Emit(v)
	})
	slow := graph.AddFunc(g, "slow", 1, func(_ context.Context, v int, out task.Emitter[int]) error {
		time.Sleep(50 * time.Microsecond)
		inFlight.Add(-1)
		return out.Emit(v)
	}, graph.QueueCap(4))
	graph.Connect(g.Input(), fast)
	graph.Connect(fast, slow)
	graph.Connect(slow, g.Output())
	n := 0
	if err := g.Run(context.Background(), seq(300), func(int) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	// At most 4 queued, up to 64 taken as one batch by slow, 1 being emitted by fast.
	if n != 300 || peak.Load() > 4+64+1 {
		t.Fatalf("n=%d peak in flight=%d", n, peak.Load())
	}
}

func TestShutdownRunsOnFailure(t *testing.T) {
	var shut atomic.Int64
	g := graph.New[int, int]("fail")
	n := graph.AddTask(g, "t", 3, func() task.Task[int, int] { return &shutCounter{n: &shut} })
	graph.Connect(g.Input(), n)
	graph.Connect(n, g.Output())
	err := g.Run(context.Background(), seq(10), nil)
	if err == nil {
		t.Fatal("want an error")
	}
	if shut.Load() != 3 {
		t.Fatalf("%d shutdowns, want 3", shut.Load())
	}
}

type shutCounter struct{ n *atomic.Int64 }

func (s *shutCounter) Execute(context.Context, int, task.Emitter[int]) error {
	return errors.New("always")
}
func (s *shutCounter) Shutdown(context.Context) error { s.n.Add(1); return nil }

// A graph nested in itself, directly or through another graph, is refused
// by Start instead of being instantiated forever.
func TestGraphContainingItself(t *testing.T) {
	pass := func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) }

	self := graph.New[int, int]("self")
	n := graph.AddGraph(self, "me", self)
	graph.Connect(self.Input(), n)

	a, b := graph.New[int, int]("a"), graph.New[int, int]("b")
	x := graph.AddFunc(a, "x", 1, pass)
	nb := graph.AddGraph(a, "b", b)
	graph.Connect(a.Input(), x)
	graph.Connect(x, nb)
	na := graph.AddGraph(b, "a", a)
	graph.Connect(b.Input(), na)

	for _, g := range []*graph.Graph[int, int]{self, a} {
		_, err := g.Start(context.Background())
		if err == nil || !strings.Contains(err.Error(), "contains itself") {
			t.Errorf("graph %s: Start = %v", g.Name(), err)
		}
	}
	if _, err := a.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "a > b > a") {
		t.Errorf("the error should show the nesting chain: %v", err)
	}
}

// Values that would go nowhere are refused at Start, naming the node (or
// the graph), unless dropping them is declared.
func TestDanglingOutputIsRefused(t *testing.T) {
	pass := func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) }
	refused := map[string]struct {
		build func() *graph.Graph[int, int]
		want  string
	}{
		"task output to nothing": {func() *graph.Graph[int, int] {
			g := graph.New[int, int]("g")
			a := graph.AddFunc(g, "a", 1, pass)
			b := graph.AddFunc(g, "forgotten", 1, pass)
			graph.Connect(g.Input(), a)
			graph.Connect(a, b)
			graph.Connect(a, g.Output())
			return g
		}, `task "forgotten" is connected to nothing`},
		"graph output fed by nothing": {func() *graph.Graph[int, int] {
			g := graph.New[int, int]("loop")
			a := graph.AddFunc(g, "a", 1, pass)
			graph.Connect(g.Input(), a)
			graph.Connect(a, a) // a cycle with no way out
			return g
		}, `graph "loop": nothing is connected to its Output`},
		"rule output to nothing": {func() *graph.Graph[int, int] {
			g := graph.New[int, int]("g")
			bk := bookkeeper.New[int](g, "bk")
			used := bookkeeper.AddRule(bk, "used", func() bookkeeper.Rule[int, int] { return bookkeeper.RuleFunc[int, int](pass) })
			bookkeeper.AddRule(bk, "unused", func() bookkeeper.Rule[int, int] { return bookkeeper.RuleFunc[int, int](pass) })
			graph.Connect(g.Input(), bk)
			graph.Connect(used, g.Output())
			return g
		}, `bookkeeper "bk" rule "unused" is connected to nothing`},
		"nested graph output to nothing": {func() *graph.Graph[int, int] {
			g := graph.New[int, int]("g")
			n := graph.AddGraph(g, "inner", squareGraph(1))
			graph.Connect(g.Input(), n)
			graph.Connect(g.Input(), g.Output())
			return g
		}, `graph "inner" is connected to nothing`},
		"nested graph whose output is fed by nothing": {func() *graph.Graph[int, int] {
			inner := graph.New[int, int]("inner")
			a := graph.AddFunc(inner, "a", 1, pass)
			graph.Connect(inner.Input(), a)
			graph.Connect(a, a)
			g := graph.New[int, int]("g")
			n := graph.AddGraph(g, "sub", inner)
			graph.Connect(g.Input(), n)
			graph.Connect(n, g.Output())
			return g
		}, `graph "inner": nothing is connected to its Output`},
	}
	for name, c := range refused {
		_, err := c.build().Start(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Start = %v, want an error containing %q", name, err, c.want)
		}
	}

	// Each opt-in is one call.
	allowed := map[string]func() *graph.Graph[int, int]{
		"sink task (the graph needs nothing more)": func() *graph.Graph[int, int] {
			g := graph.New[int, int]("g")
			a := graph.AddFunc(g, "sink", 1, func(context.Context, int, task.Emitter[int]) error { return nil })
			graph.Discard(a)
			graph.Connect(g.Input(), a)
			return g
		},
		"discarded rule": func() *graph.Graph[int, int] {
			g := graph.New[int, int]("g")
			bk := bookkeeper.New[int](g, "bk")
			used := bookkeeper.AddRule(bk, "used", func() bookkeeper.Rule[int, int] { return bookkeeper.RuleFunc[int, int](pass) })
			graph.Discard(bookkeeper.AddRule(bk, "unused", func() bookkeeper.Rule[int, int] { return bookkeeper.RuleFunc[int, int](pass) }))
			graph.Connect(g.Input(), bk)
			graph.Connect(used, g.Output())
			return g
		},
		"graph declared without output": func() *graph.Graph[int, int] {
			g := graph.New[int, int]("loop")
			a := graph.AddFunc(g, "a", 1, func(context.Context, int, task.Emitter[int]) error { return nil })
			graph.Connect(g.Input(), a)
			graph.Connect(a, a)
			graph.Discard(a)
			return g
		},
		"nested sink graph left unconnected": func() *graph.Graph[int, int] {
			inner := graph.New[int, int]("inner")
			a := graph.AddFunc(inner, "sink", 1, func(context.Context, int, task.Emitter[int]) error { return nil })
			graph.Discard(a)
			graph.Connect(inner.Input(), a)
			g := graph.New[int, int]("g")
			n := graph.AddGraph(g, "sub", inner)
			graph.Connect(g.Input(), n)
			graph.Connect(g.Input(), g.Output())
			return g
		},
	}
	for name, build := range allowed {
		if err := build().Run(context.Background(), seq(5), nil); err != nil {
			t.Errorf("%s: Run = %v", name, err)
		}
	}
}

// Close returns at once although another goroutine's Send waits for room in
// a full bounded queue; that Send then fails with ErrClosed.
func TestCloseDoesNotWaitForBlockedSend(t *testing.T) {
	t.Run("task", func(t *testing.T) { testCloseDoesNotWaitForBlockedSend(t, false) })
	t.Run("nested graph", func(t *testing.T) { testCloseDoesNotWaitForBlockedSend(t, true) })
}

func testCloseDoesNotWaitForBlockedSend(t *testing.T, nested bool) {
	release := make(chan struct{})
	g := graph.New[int, int]("bounded")
	b := g
	if nested {
		b = graph.New[int, int]("inner")
	}
	slow := graph.AddFunc(b, "slow", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return out.Emit(v)
	}, graph.QueueCap(1))
	graph.Connect(b.Input(), slow)
	graph.Connect(slow, b.Output())
	if nested {
		n := graph.AddGraph(g, "inner", b)
		graph.Connect(g.Input(), n)
		graph.Connect(n, g.Output())
	}
	rt, err := g.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sendErr := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			if err := rt.Send(i); err != nil { // 0 is taken, 1 queued, 2 blocks
				sendErr <- err
				return
			}
		}
	}()
	// Wait until the sender is blocked.
	for rt.Stats().Sent < 3 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	closed := make(chan struct{})
	go func() { rt.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		close(release)
		<-closed
		t.Fatal("Close waited for the blocked Send")
	}
	select {
	case err := <-sendErr:
		if !errors.Is(err, graph.ErrClosed) {
			t.Fatalf("blocked Send = %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the blocked Send did not return after Close")
	}
	close(release)
	n := 0
	for range rt.Results() {
		n++
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d results, want the 2 values accepted before Close", n)
	}
}

// Breaking out of a range over Results loses nothing: the values already
// taken from the output queue but not yet yielded come first in the next
// range.
func TestResultsBreakLosesNothing(t *testing.T) {
	rt, err := squareGraph(1).Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		if err := rt.Send(i); err != nil {
			t.Fatal(err)
		}
	}
	rt.Close()
	if err := rt.Wait(); err != nil { // every result is now queued
		t.Fatal(err)
	}
	var got []int
	for _, stop := range []int{3, 1, 70} {
		k := 0
		for v := range rt.Results() {
			got = append(got, v)
			if k++; k == stop {
				break
			}
		}
	}
	for v := range rt.Results() {
		got = append(got, v)
	}
	var want []int
	for i := range n {
		want = append(want, i*i)
	}
	if !slices.Equal(got, want) { // one copy of square: the order is kept
		t.Fatalf("got %d values %v..., want %d in order", len(got), got[:min(len(got), 10)], n)
	}
}
