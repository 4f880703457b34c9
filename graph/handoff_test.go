package graph_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// A Run of a kept frame lets the goroutine of a copy whose run is over run
// the next task of a chain (its consumer, whose queue it closed) instead
// of waking that task's goroutine. These tests run such chains through
// errors, panics, Goexit, cancellation and stall reports.

// plainChain is input → t0 → … → t(n-1) → output, each a func task of one
// copy (no Initialize, no Shutdown) adding one, calling hook first.
func plainChain(n int, hook func(ctx context.Context, i, v int) error) *graph.Graph[int, int] {
	g := graph.New[int, int]("plain")
	var prev graph.Producer[int] = g.Input()
	for i := range n {
		t := graph.AddFunc(g, fmt.Sprint("t", i), 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
			if hook != nil {
				if err := hook(ctx, i, v); err != nil {
					return err
				}
			}
			return out.Emit(v + 1)
		})
		graph.Connect(prev, t)
		prev = t
	}
	graph.Connect(prev, g.Output())
	return g
}

// Results of chains and trees run many times are those of fresh runs.
func TestHandOffResults(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := plainChain(16, nil)
	defer g.Release()
	tree := graph.New[int, int]("tree")
	level := []*graph.Node[int, int]{graph.AddFunc(tree, "n0", 1, plusOne)}
	graph.Connect(tree.Input(), level[0])
	for d := 1; d < 4; d++ {
		var next []*graph.Node[int, int]
		for _, p := range level {
			for range 2 {
				c := graph.AddFunc(tree, fmt.Sprint("n", d, len(next)), 1, plusOne)
				graph.Connect(p, c)
				next = append(next, c)
			}
		}
		level = next
	}
	for _, l := range level {
		graph.Connect(l, tree.Output())
	}
	defer tree.Release()
	for round := range 200 {
		var got []int
		if err := g.Run(context.Background(), ints(round, round+1), func(v int) error { got = append(got, v); return nil }); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if len(got) != 2 || got[0]+got[1] != 2*round+1+32 {
			t.Fatalf("round %d: chain results %v, want %d and %d", round, got, round+16, round+17)
		}
		n, sum := 0, 0
		if err := tree.Run(context.Background(), ints(round), func(v int) error { n++; sum += v; return nil }); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if n != 8 || sum != 8*(round+4) {
			t.Fatalf("round %d: tree gave %d results summing to %d, want 8 of %d", round, n, sum, round+4)
		}
	}
}

func plusOne(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v + 1) }

// A failure or a panic in a task run on another copy's goroutine names
// that task, and the runs after it are whole.
func TestHandOffErrorsNameTheTask(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := plainChain(8, func(_ context.Context, i, v int) error {
		switch {
		case v == 100 && i == 5:
			return errors.New("told to fail")
		case v == 200 && i == 6:
			panic("told to panic")
		}
		return nil
	})
	defer g.Release()
	for round := range 20 {
		err := g.Run(context.Background(), ints(100-5), nil)
		var te *task.Error
		if !errors.As(err, &te) || te.Task != "t5" || te.Phase != task.PhaseExecute {
			t.Fatalf("round %d: %v, want t5's error", round, err)
		}
		err = g.Run(context.Background(), ints(200-6), nil)
		var pe *task.PanicError
		if !errors.As(err, &te) || te.Task != "t6" || !errors.As(err, &pe) {
			t.Fatalf("round %d: %v, want t6's panic", round, err)
		}
		var got []int
		if err := g.Run(context.Background(), ints(1), func(v int) error { got = append(got, v); return nil }); err != nil || len(got) != 1 || got[0] != 9 {
			t.Fatalf("round %d: %v %v, want [9]", round, err, got)
		}
	}
}

// A task that ends its goroutine (runtime.Goexit) while it runs on another
// copy's goroutine ends the run with an error, and later runs are whole
// with nothing left behind.
func TestHandOffGoexit(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := plainChain(6, func(_ context.Context, i, v int) error {
		if v == 300 && i == 4 {
			runtime.Goexit()
		}
		return nil
	})
	defer g.Release()
	for round := range 5 {
		if err := g.Run(context.Background(), ints(1), nil); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		done := make(chan error, 1)
		go func() { done <- g.Run(context.Background(), ints(300-4), nil) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a run whose task called Goexit did not return", round)
		}
		var got []int
		if err := g.Run(context.Background(), ints(1), func(v int) error { got = append(got, v); return nil }); err != nil || len(got) != 1 || got[0] != 7 {
			t.Fatalf("round %d: after Goexit: %v %v, want [7]", round, err, got)
		}
	}
}

// A task in its last batch that emits twice wakes its consumer at the
// second value: a producer waiting for its consumer in the same Execute
// does not deadlock.
func TestHandOffSecondValueWakes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := graph.New[int, int]("wake")
	var mu sync.Mutex
	seen := make(chan struct{})
	var once *sync.Once
	src := graph.AddFunc(g, "src", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		if err := out.Emit(v); err != nil {
			return err
		}
		if err := out.Emit(v + 1); err != nil {
			return err
		}
		mu.Lock()
		ch := seen
		mu.Unlock()
		select {
		case <-ch: // the consumer got a value while this Execute runs
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("the consumer got nothing while the producer ran")
		}
	})
	dst := graph.AddFunc(g, "dst", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		mu.Lock()
		once.Do(func() { close(seen) })
		mu.Unlock()
		return out.Emit(v)
	})
	graph.Connect(g.Input(), src)
	graph.Connect(src, dst)
	graph.Connect(dst, g.Output())
	defer g.Release()
	for round := range 20 {
		mu.Lock()
		seen, once = make(chan struct{}), new(sync.Once)
		mu.Unlock()
		n := 0
		if err := g.Run(context.Background(), ints(1), func(int) error { n++; return nil }); err != nil || n != 2 {
			t.Fatalf("round %d: %v, %d results, want 2", round, err, n)
		}
	}
}

// A task run on another copy's goroutine that ignores its context is named
// by the stall report as executing, and WithAbandonAfter gives up on it;
// the graph then runs again.
func TestHandOffStuckCopy(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	g := plainChain(4, func(_ context.Context, i, v int) error {
		if v == 500 && i == 2 {
			entered <- struct{}{}
			<-release // ignores ctx
		}
		return nil
	})
	defer g.Release()
	for range 3 {
		if err := g.Run(context.Background(), ints(1), nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var report string
	go func() { <-entered; time.Sleep(30 * time.Millisecond); cancel() }()
	err := g.Run(ctx, ints(500-2), nil, graph.WithAbandonAfter(50*time.Millisecond),
		graph.WithStallReport(10*time.Millisecond, func(s graph.Stats) {
			mu.Lock()
			defer mu.Unlock()
			if report == "" {
				report = s.String()
			}
		}))
	var ae *graph.AbandonedError
	if !errors.As(err, &ae) || len(ae.Copies) != 1 || ae.Copies[0].Task != "t2" {
		t.Fatalf("run with a deaf copy: %v, want an AbandonedError naming t2", err)
	}
	mu.Lock()
	if !strings.Contains(report, `"t2"`) || !strings.Contains(report, "executing") {
		t.Errorf("stall report does not name t2 executing:\n%s", report)
	}
	mu.Unlock()
	close(release)
	var got []int
	if err := g.Run(context.Background(), ints(1), func(v int) error { got = append(got, v); return nil }); err != nil || len(got) != 1 || got[0] != 5 {
		t.Fatalf("after the abandoned run: %v %v, want [5]", err, got)
	}
}

// A task in its last batch that emits once and then waits, in the same
// Execute, for its consumer to act on the value is not left waiting: the
// run wakes the consumer whose wake-up was deferred shortly after
// (core.NudgeAfter), stall report or not.
func TestHandOffProducerWaitsForConsumer(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := graph.New[int, int]("waits")
	var mu sync.Mutex
	var seen chan struct{}
	src := graph.AddFunc(g, "src", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		if err := out.Emit(v); err != nil {
			return err
		}
		mu.Lock()
		ch := seen
		mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("the consumer never got the value")
		}
	})
	dst := graph.AddFunc(g, "dst", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		mu.Lock()
		close(seen)
		mu.Unlock()
		return out.Emit(v)
	})
	graph.Connect(g.Input(), src)
	graph.Connect(src, dst)
	graph.Connect(dst, g.Output())
	defer g.Release()
	for round := range 5 {
		mu.Lock()
		seen = make(chan struct{})
		mu.Unlock()
		start := time.Now()
		err := g.Run(context.Background(), ints(1), nil, graph.WithoutStallReport())
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("round %d: took %v", round, d)
		}
	}
}

// Siblings of a tree whose last runs were brief run one after the other on
// their parent's goroutine; one that waits for its sibling inside Execute
// is not left waiting: its sibling's wake-up is still deferred, not
// claimed, and the run wakes it shortly after (core.NudgeAfter).
func TestHandOffSiblingsWaitingForEachOther(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := graph.New[int, int]("siblings")
	var mu sync.Mutex
	var entered chan struct{}
	root := graph.AddFunc(g, "root", 1, plusOne)
	left := graph.AddFunc(g, "left", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		if v > 1 {
			mu.Lock()
			ch := entered
			mu.Unlock()
			select {
			case <-ch: // right has run
			case <-time.After(10 * time.Second):
				return errors.New("right never ran while left waited for it")
			}
		}
		return out.Emit(v)
	})
	right := graph.AddFunc(g, "right", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		if v > 1 {
			mu.Lock()
			close(entered)
			mu.Unlock()
		}
		return out.Emit(v)
	})
	graph.Connect(g.Input(), root)
	graph.Connect(root, left)
	graph.Connect(root, right)
	graph.Connect(left, g.Output())
	graph.Connect(right, g.Output())
	defer g.Release()
	// Brief runs first, so that both siblings are run by their parent's
	// goroutine; then runs in which left waits for right.
	for range 5 {
		if err := g.Run(context.Background(), ints(0), nil); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 5 {
		mu.Lock()
		entered = make(chan struct{})
		mu.Unlock()
		n := 0
		err := g.Run(context.Background(), ints(round+1), func(int) error { n++; return nil },
			graph.WithoutStallReport())
		if err != nil || n != 2 {
			t.Fatalf("round %d: %v, %d results, want 2", round, err, n)
		}
	}
}
