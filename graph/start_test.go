package graph_test

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// chain is input → t0 → … → t(n-1) → output, each task adding one.
func chain(n int) *graph.Graph[int, int] {
	g := graph.New[int, int]("chain")
	var prev graph.Producer[int] = g.Input()
	for i := range n {
		t := graph.AddFunc(g, fmt.Sprint("t", i), 1, func(_ context.Context, v int, out task.Emitter[int]) error {
			return out.Emit(v + 1)
		})
		graph.Connect(prev, t)
		prev = t
	}
	graph.Connect(prev, g.Output())
	return g
}

// Starting a graph costs a few allocations per node: what depends only on
// the graph is kept from one start to the next.
func TestStartAllocations(t *testing.T) {
	const nodes = 64
	g := chain(nodes)
	ctx := context.Background()
	start := func() {
		rt, err := g.Start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rt.Close()
		if err := rt.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	start()
	if a := testing.AllocsPerRun(20, start); a > 8*nodes+64 {
		t.Fatalf("%.0f allocations to start and stop a chain of %d tasks, want at most %d", a, nodes, 8*nodes+64)
	}
}

// A graph changed after it was started runs as changed: what Start keeps
// from one run to the next is made again.
func TestStartAfterChange(t *testing.T) {
	g := graph.New[int, int]("grow")
	inc := func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v + 1) }
	a := graph.AddFunc(g, "a", 1, inc)
	graph.Connect(g.Input(), a)
	graph.Connect(a, g.Output())
	run := func() []int {
		t.Helper()
		var got []int
		if err := g.Run(context.Background(), seq(3), func(v int) error { got = append(got, v); return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := run(); len(got) != 3 {
		t.Fatalf("first run: %v", got)
	}

	// A second task, fed by a: a's values now go to both.
	var seen atomic.Int64
	b := graph.AddFunc(g, "b", 2, func(_ context.Context, v int, out task.Emitter[int]) error {
		seen.Add(1)
		if v < 20 {
			return out.Emit(v + 10)
		}
		return nil
	})
	graph.Connect(a, b)
	graph.Connect(b, g.Output())
	if got := run(); len(got) != 6 || seen.Load() != 3 {
		t.Fatalf("second run: %v, b saw %d", got, seen.Load())
	}

	// A cycle through b: the run now ends by quiescence.
	graph.Connect(b, a)
	seen.Store(0)
	got := run()
	if len(got) == 0 || seen.Load() <= 3 {
		t.Fatalf("third run: %v, b saw %d", got, seen.Load())
	}
	rt, err := g.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rt.Stats().Cyclic {
		t.Error("the graph with a cycle is not reported cyclic")
	}
	rt.Close()
	for range rt.Results() {
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}

	// A node whose output goes nowhere, or that nothing feeds, is refused,
	// however many times the graph was started before.
	c := graph.AddFunc(g, "c", 1, inc)
	graph.Connect(a, c)
	if _, err := g.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "connected to nothing") {
		t.Fatalf("start with a dangling output: %v", err)
	}
	graph.Connect(c, g.Output())
	if got := run(); len(got) == 0 {
		t.Fatal("no results once c is connected")
	}
	graph.Discard(graph.AddFunc(g, "d", 1, inc))
	if _, err := g.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "no producer") {
		t.Fatalf("start with a task nothing feeds: %v", err)
	}
}

// Each copy's context carries its task.Info and profiler labels, also on
// the second start of a graph, and also when Start's context has labels of
// its own (which the copies keep).
func TestCopyContext(t *testing.T) {
	type seenInfo struct {
		info   task.Info
		labels string
	}
	var got atomic.Pointer[[]seenInfo]
	g := graph.New[int, int]("ctx")
	n := graph.AddFunc(g, "look", 2, func(ctx context.Context, v int, out task.Emitter[int]) error {
		info, ok := task.InfoFrom(ctx)
		if !ok {
			return fmt.Errorf("no task.Info")
		}
		var ls []string
		pprof.ForLabels(ctx, func(k, v string) bool { ls = append(ls, k+"="+v); return true })
		for {
			old := got.Load()
			next := append(append([]seenInfo(nil), (*old)...), seenInfo{info, strings.Join(ls, ",")})
			if got.CompareAndSwap(old, &next) {
				break
			}
		}
		return out.Emit(v)
	})
	graph.Connect(g.Input(), n)
	graph.Connect(n, g.Output())
	for round, ctx := range []context.Context{
		context.Background(),
		context.Background(),
		pprof.WithLabels(context.Background(), pprof.Labels("caller", "me")),
	} {
		got.Store(&[]seenInfo{})
		if err := g.Run(ctx, seq(20), nil); err != nil {
			t.Fatal(err)
		}
		for _, s := range *got.Load() {
			i := s.info
			if i.Task != "look" || i.Copies != 2 || i.Copy < 0 || i.Copy > 1 || i.Clones != 1 || i.Device == nil {
				t.Fatalf("round %d: info %+v", round, i)
			}
			want := "htgs.pipeline=0,htgs.task=look"
			if round == 2 {
				want = "caller=me," + want
			}
			if s.labels != want {
				t.Fatalf("round %d: labels %q, want %q", round, s.labels, want)
			}
		}
	}
}

// Duplicate names and edges are found however many nodes a graph has.
func TestDuplicatesInLargeGraphs(t *testing.T) {
	g := chain(100)
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	graph.AddFunc(g, "t57", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return nil })
	if err := g.Err(); err == nil || !strings.Contains(err.Error(), `two nodes are named "t57"`) {
		t.Fatalf("duplicate name: %v", err)
	}
	g = chain(100)
	a := graph.AddFunc(g, "a", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) })
	b := graph.AddFunc(g, "b", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) })
	graph.Connect(a, b)
	graph.Connect(b, g.Output())
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	graph.Connect(a, b)
	if err := g.Err(); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate edge: %v", err)
	}
}

// A graph may be started by several goroutines at once, also the first
// time (when what Start keeps is made).
func TestConcurrentStarts(t *testing.T) {
	g := chain(20)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 5 {
				var got []int
				if err := g.Run(context.Background(), seq(3), func(v int) error { got = append(got, v); return nil }); err != nil {
					errs <- err
					return
				}
				if len(got) != 3 || got[0]+got[1]+got[2] != 0+1+2+3*20 {
					errs <- fmt.Errorf("run %d: %v", k, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
