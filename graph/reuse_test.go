package graph_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// lifeTask counts its Initialize, Execute and Shutdown calls in shared
// counters, and fails or panics on the values it is told to.
type lifeTask struct {
	c         *lifeCounts
	n         int // values executed by this copy (fresh per run)
	failOn    int
	panicOn   int
	goexitOn  int
	initCalls int
}

type lifeCounts struct {
	made, inits, execs, shuts atomic.Int64
	stale                     atomic.Int64 // a copy that saw state of an earlier run
}

func (t *lifeTask) Initialize(ctx context.Context, info task.Info) error {
	t.initCalls++
	t.c.inits.Add(1)
	if t.initCalls != 1 || t.n != 0 {
		t.c.stale.Add(1)
	}
	return nil
}

func (t *lifeTask) Execute(ctx context.Context, v int, out task.Emitter[int]) error {
	t.n++
	t.c.execs.Add(1)
	switch v {
	case t.failOn:
		return errors.New("told to fail")
	case t.panicOn:
		panic("told to panic")
	case t.goexitOn:
		runtime.Goexit()
	}
	return out.Emit(v + 1)
}

func (t *lifeTask) Shutdown(ctx context.Context) error {
	t.c.shuts.Add(1)
	return nil
}

// lifeChain is input → a (2 copies) → b → output, both lifeTasks.
func lifeChain(c *lifeCounts, failOn, panicOn, goexitOn int) *graph.Graph[int, int] {
	g := graph.New[int, int]("life")
	mk := func() task.Task[int, int] {
		c.made.Add(1)
		return &lifeTask{c: c, failOn: failOn, panicOn: panicOn, goexitOn: goexitOn}
	}
	a := graph.AddTask(g, "a", 2, mk)
	b := graph.AddTask(g, "b", 1, mk)
	graph.Connect(g.Input(), a)
	graph.Connect(a, b)
	graph.Connect(b, g.Output())
	return g
}

func ints(vs ...int) func(func(int) bool) {
	return func(yield func(int) bool) {
		for _, v := range vs {
			if !yield(v) {
				return
			}
		}
	}
}

// Run keeps a finished run's queues and goroutines for the next Run: the
// task copies are still made anew, initialized and shut down once per run,
// and the results are those of a fresh run; Release ends the goroutines
// kept.
func TestRunReusesRuntime(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var c lifeCounts
	g := lifeChain(&c, -1, -1, -1)
	const runs = 20
	for run := range runs {
		in := []int{run, run + 100, run + 200}
		if run%5 == 4 {
			in = nil // no value: the copies are still initialized and shut down
		}
		var got []int
		if err := g.Run(context.Background(), ints(in...), func(v int) error { got = append(got, v); return nil }); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		slices.Sort(got)
		var want []int
		for _, v := range in {
			want = append(want, v+2)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("run %d: results %v, want %v", run, got, want)
		}
	}
	if got, want := c.made.Load(), int64(3*runs); got != want {
		t.Errorf("%d copies made, want %d (three per run)", got, want)
	}
	if c.inits.Load() != c.made.Load() || c.shuts.Load() != c.made.Load() {
		t.Errorf("%d Initialize and %d Shutdown calls for %d copies", c.inits.Load(), c.shuts.Load(), c.made.Load())
	}
	if c.stale.Load() != 0 {
		t.Errorf("%d copies initialized twice or after executing", c.stale.Load())
	}
	if got, want := c.execs.Load(), int64(2*3*(runs-runs/5)); got != want {
		t.Errorf("%d executions, want %d", got, want)
	}
	g.Release()
}

// Without Release, the goroutines kept by Run end once unused for a while.
func TestRunKeptGoroutinesEnd(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var c lifeCounts
	g := lifeChain(&c, -1, -1, -1)
	if err := g.Run(context.Background(), ints(1, 2), nil); err != nil {
		t.Fatal(err)
	}
	// The three copies park in the graph's pool (they may still be on
	// their way there: the count is looked at until it settles).
	deadline := time.Now().Add(10 * time.Second)
	for parked() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines parked after Run, want 3", parked())
		}
		time.Sleep(time.Millisecond)
	}
	// goleak then waits for them to end.
}

// parked counts the goroutines of task copies parked between runs.
func parked() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "internal/core.(*node[...]).await(")
}

// A failed, a panicking and a cancelled run leave the next runs correct.
func TestRunReuseAfterFailure(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var c lifeCounts
	g := lifeChain(&c, 7, 8, -1)
	defer g.Release()
	for round := range 3 {
		err := g.Run(context.Background(), ints(1, 7, 2), nil)
		var te *task.Error
		if !errors.As(err, &te) || te.Task != "a" || te.Phase != task.PhaseExecute {
			t.Fatalf("round %d: error %v, want task a's", round, err)
		}
		err = g.Run(context.Background(), ints(1, 8, 2), nil)
		var pe *task.PanicError
		if !errors.As(err, &pe) || !errors.As(err, &te) || te.Task != "a" {
			t.Fatalf("round %d: error %v, want task a's panic", round, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := g.Run(ctx, ints(1, 2), nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: cancelled run: %v", round, err)
		}
		var got []int
		if err := g.Run(context.Background(), ints(1, 2, 3), func(v int) error { got = append(got, v); return nil }); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		slices.Sort(got)
		if !slices.Equal(got, []int{3, 4, 5}) {
			t.Fatalf("round %d: results %v", round, got)
		}
	}
	if c.inits.Load() != c.made.Load() || c.shuts.Load() != c.made.Load() {
		t.Errorf("%d Initialize and %d Shutdown calls for %d copies", c.inits.Load(), c.shuts.Load(), c.made.Load())
	}
}

// A copy whose goroutine ends in runtime.Goexit is not reused: the next
// run gets a runtime of its own, and nothing is left.
func TestRunReuseAfterGoexit(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var c lifeCounts
	g := lifeChain(&c, -1, -1, 9)
	defer g.Release()
	for round := range 3 {
		// The Goexit ends the copy; the run ends with whatever the other
		// copies did.
		_ = g.Run(context.Background(), ints(1, 9, 2), nil)
		var got []int
		if err := g.Run(context.Background(), ints(1, 2), func(v int) error { got = append(got, v); return nil }); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		slices.Sort(got)
		if !slices.Equal(got, []int{3, 4}) {
			t.Fatalf("round %d: results %v", round, got)
		}
	}
}

// Runs of one graph at once each get a runtime.
func TestRunReuseConcurrent(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var c lifeCounts
	g := lifeChain(&c, -1, -1, -1)
	defer g.Release()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for run := range 30 {
				sum := 0
				if err := g.Run(context.Background(), ints(w, run), func(v int) error { sum += v; return nil }); err != nil {
					errs <- err
					return
				}
				if sum != w+run+4 {
					errs <- fmt.Errorf("worker %d run %d: sum %d, want %d", w, run, sum, w+run+4)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A copy that ignores its context, abandoned by Wait, is never reused:
// the next runs work, and its goroutine ends once it returns.
func TestRunReuseAfterAbandon(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	g := graph.New[int, int]("deafplain")
	n := graph.AddFunc(g, "read", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		if v == 1 {
			entered <- struct{}{}
			<-release // ignores ctx
		}
		return out.Emit(v)
	})
	graph.Connect(g.Input(), n)
	graph.Connect(n, g.Output())
	defer g.Release()
	if err := g.Run(context.Background(), ints(2), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-entered; cancel() }()
	err := g.Run(ctx, ints(1), nil, graph.WithAbandonAfter(20*time.Millisecond), graph.WithoutStallReport())
	var ae *graph.AbandonedError
	if !errors.As(err, &ae) {
		t.Fatalf("run with a deaf copy: %v, want an AbandonedError", err)
	}
	for range 3 {
		var got []int
		if err := g.Run(context.Background(), ints(2, 3), func(v int) error { got = append(got, v); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("results %v after an abandoned run", got)
		}
	}
	close(release)
}

// A Run given no yield drops its results but counts them.
func TestRunNilYieldCountsOutputs(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var c lifeCounts
	g := lifeChain(&c, -1, -1, -1)
	defer g.Release()
	var exec *graph.Execution
	if err := g.Run(context.Background(), ints(1, 2, 3, 4), nil, graph.WithStarted(func(e *graph.Execution) { exec = e })); err != nil {
		t.Fatal(err)
	}
	if s := exec.Stats(); s.Sent != 4 || s.Outputs != 4 {
		t.Fatalf("sent %d, outputs %d; want 4 and 4", s.Sent, s.Outputs)
	}
	for range 3 {
		if err := g.Run(context.Background(), ints(1, 2, 3, 4), nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.execs.Load(); got != 4*4*2 {
		t.Fatalf("%d executions, want %d", got, 4*4*2)
	}
}

// A Run whose yield (or inputs) panics leaves no goroutine behind, and
// the graph runs again.
func TestRunReusePanicInYield(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var c lifeCounts
	g := lifeChain(&c, -1, -1, -1)
	defer g.Release()
	if err := g.Run(context.Background(), ints(1), nil); err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{"yield", "inputs"} {
		func() {
			defer func() {
				if p := recover(); p != where {
					t.Fatalf("recovered %v, want %q", p, where)
				}
			}()
			in := ints(1, 2, 3)
			if where == "inputs" {
				in = func(yield func(int) bool) { yield(1); panic("inputs") }
			}
			var y func(int) error
			if where == "yield" {
				y = func(int) error { panic("yield") }
			}
			_ = g.Run(context.Background(), in, y)
		}()
		if err := g.Run(context.Background(), ints(1, 2), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// A graph changed after a Run runs as changed: what the earlier Run kept
// is not reused.
func TestRunReuseAfterChange(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := graph.New[int, int]("grow")
	a := graph.AddFunc(g, "a", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v + 1) })
	graph.Connect(g.Input(), a)
	graph.Connect(a, g.Output())
	defer g.Release()
	sum := func() int {
		s := 0
		if err := g.Run(context.Background(), ints(1, 2), func(v int) error { s += v; return nil }); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := sum(); got != 5 {
		t.Fatalf("sum %d, want 5", got)
	}
	var seen atomic.Int64
	b := graph.AddFunc(g, "b", 1, func(_ context.Context, v int, out task.Emitter[int]) error {
		seen.Add(1)
		return out.Emit(10 * v)
	})
	graph.Connect(a, b)
	graph.Connect(b, g.Output())
	if got := sum(); got != 5+50 {
		t.Fatalf("sum %d after adding b, want 55", got)
	}
	if seen.Load() != 2 {
		t.Fatalf("b executed %d values, want 2", seen.Load())
	}
}

// A Run of a kept frame renews the previous run's state in place: a run
// watched by a progress callback and a stall report that fires, after a
// run that failed, reports its own run only (its final progress, its
// own stall), and its error is its own.
func TestRunReuseRenewsRunState(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := graph.New[int, int]("renew")
	slow := graph.AddFunc(g, "slow", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		if v < 0 {
			return errors.New("negative")
		}
		if v == 2 {
			time.Sleep(20 * time.Millisecond) // long enough for a stall report
		}
		return out.Emit(v)
	})
	graph.Connect(g.Input(), slow)
	graph.Connect(slow, g.Output())
	defer g.Release()
	for round := range 4 {
		err := g.Run(context.Background(), ints(1, -1), nil)
		var te *task.Error
		if !errors.As(err, &te) || te.Task != "slow" {
			t.Fatalf("round %d: error %v, want task slow's", round, err)
		}
		var mu sync.Mutex
		var last graph.Stats
		var finals, stalls int
		var stalled []string
		progress := func(s graph.Stats) {
			mu.Lock()
			defer mu.Unlock()
			last = s
			if s.Done {
				finals++
			}
		}
		stall := func(s graph.Stats) {
			mu.Lock()
			defer mu.Unlock()
			stalls++
			stalled = append(stalled, fmt.Sprint(s.Sent))
		}
		err = g.Run(context.Background(), ints(1, 2, 3), nil,
			graph.WithProgress(time.Millisecond, progress), graph.WithStallReport(5*time.Millisecond, stall))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		mu.Lock()
		if finals == 0 || !last.Done || last.Sent != 3 {
			t.Errorf("round %d: %d progress reports of a run done, last %+v; want the last done, 3 sent", round, finals, last)
		}
		if stalls == 0 {
			t.Errorf("round %d: no stall report for a copy busy 20 ms", round)
		}
		for _, s := range stalled {
			if s != "3" {
				t.Errorf("round %d: a stall report saw %s values sent, want this run's 3", round, s)
			}
		}
		mu.Unlock()
	}
}
