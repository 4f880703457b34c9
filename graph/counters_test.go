package graph_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
)

// waitFor polls cond until it holds or a few seconds have passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// taskStats returns the stats of the task named name.
func taskStats(s graph.Stats, name string) graph.TaskStats {
	for _, ts := range s.Tasks {
		if ts.Name == name {
			return ts
		}
	}
	return graph.TaskStats{}
}

// A single-copy task blocked in the middle of a batch shows the batch:
// the values it took from the queue are counted in, and held, not lost
// between the queue and the output (issue 22, item 12).
func TestCountersOfTaskBlockedInBatch(t *testing.T) {
	started, release, block := make(chan struct{}), make(chan struct{}), make(chan struct{})
	g := graph.New[int, int]("batch")
	tk := graph.AddFunc(g, "slow", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		switch v {
		case 0:
			close(started)
			<-release
		case 5:
			select {
			case <-block:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return out.Emit(v)
	})
	graph.Connect(g.Input(), tk)
	graph.Connect(tk, g.Output())
	rt, err := g.Start(context.Background(), graph.WithoutStallReport())
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Send(0)
	<-started
	for i := 1; i < 10; i++ {
		_ = rt.Send(i)
	}
	close(release) // the copy takes 1..9 as one batch and blocks at 5
	waitFor(t, "5 outputs", func() bool { return taskStats(rt.Stats(), "slow").ItemsOut == 5 })
	s := rt.Stats()
	ts := taskStats(s, "slow")
	if ts.Queue != 0 || ts.ItemsIn != 10 || ts.Held != 9 || ts.Copies[0].Batch != 9 || ts.Copies[0].State != "executing" {
		t.Errorf("queue %d, in %d, held %d, copy %+v; want queue 0, in 10, held 9, executing a batch of 9", ts.Queue, ts.ItemsIn, ts.Held, ts.Copies[0])
	}
	if text := s.String(); !strings.Contains(text, `queue 0 (max 9), held 9, in 10, out 5`) ||
		!strings.Contains(text, "copy 0: executing (batch of 9 taken from the queue)") {
		t.Errorf("report does not show the batch:\n%s", text)
	}
	close(block)
	rt.Close()
	n := 0
	for range rt.Results() {
		n++
	}
	if err := rt.Wait(); err != nil || n != 10 {
		t.Fatalf("%d results, %v", n, err)
	}
	ts = taskStats(rt.Stats(), "slow")
	if ts.ItemsIn != 10 || ts.Held != 0 || ts.ItemsOut != 10 {
		t.Errorf("after the run: in %d, held %d, out %d; want 10, 0, 10", ts.ItemsIn, ts.Held, ts.ItemsOut)
	}
}

// A task blocked getting memory shows the value it holds.
func TestCountersOfTaskWaitingForMemory(t *testing.T) {
	g := graph.New[int, int]("mem")
	pool := memmgr.New(g, "frames", 1, memmgr.Slices[byte](8))
	hog := graph.AddFunc(g, "hoarder", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		if _, err := pool.Get(ctx); err != nil { // never released
			return err
		}
		return out.Emit(v)
	})
	graph.Connect(g.Input(), hog)
	graph.Connect(hog, g.Output())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := g.Start(ctx, graph.WithoutStallReport())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_ = rt.Send(i)
	}
	waitFor(t, "a memory wait", func() bool {
		return taskStats(rt.Stats(), "hoarder").Copies[0].State == "waiting for memory"
	})
	s := rt.Stats()
	ts := taskStats(s, "hoarder")
	c := ts.Copies[0]
	if ts.ItemsOut != 1 || int64(ts.Queue)+ts.ItemsIn != 3 || ts.Held < 1 || c.Batch < 1 || ts.ItemsIn < 2 {
		t.Errorf("queue %d, in %d, held %d, out %d, copy %+v: the value waiting for memory is not shown", ts.Queue, ts.ItemsIn, ts.Held, ts.ItemsOut, c)
	}
	if text := s.String(); !strings.Contains(text, `waiting for memory from pool "frames" (batch of `) {
		t.Errorf("report does not show the batch:\n%s", text)
	}
	cancel()
	_ = rt.Wait()
}

// A copy blocked in Emit because its consumer's bounded queue is full
// says so, naming the consumer; the values are in its batch, in the
// consumer's queue, or held by the consumer.
func TestCountersOfTaskBlockedEmitting(t *testing.T) {
	release := make(chan struct{})
	g := graph.New[int, int]("full")
	a := graph.AddFunc(g, "a", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) })
	b := graph.AddFunc(g, "b", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		if v == 0 {
			<-release
		}
		return out.Emit(v)
	}, graph.QueueCap(2))
	graph.Connect(g.Input(), a)
	graph.Connect(a, b)
	graph.Connect(b, g.Output())
	rt, err := g.Start(context.Background(), graph.WithoutStallReport())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		_ = rt.Send(i)
	}
	// Steady: b holds the batch it took (blocked on 0), its queue is full,
	// and a waits to emit.
	// A snapshot reads the tasks one after the other, so the one that
	// first shows the steady state may have read a's counters before a
	// emitted; the state holds from then on, so the next snapshot is
	// consistent.
	var s graph.Stats
	steady := func(s graph.Stats) bool {
		tb := taskStats(s, "b")
		return taskStats(s, "a").Copies[0].State == "waiting for room in a full queue" && tb.Queue == 2 && tb.Held > 0
	}
	waitFor(t, "a blocked emitting", func() bool { return steady(rt.Stats()) })
	if s = rt.Stats(); !steady(s) {
		t.Fatalf("the steady state did not last: %+v", s)
	}
	ta, tb := taskStats(s, "a"), taskStats(s, "b")
	if ta.Copies[0].FullQueue != `task "b"` || int64(ta.Queue)+ta.ItemsIn != 10 || ta.ItemsOut != int64(tb.Queue+tb.Held) {
		t.Errorf("a: %+v\nb: %+v", ta, tb)
	}
	if text := s.String(); !strings.Contains(text, `copy 0: waiting for room in a full queue of task "b" (batch of `) {
		t.Errorf("report does not show the blocked emit:\n%s", text)
	}
	close(release)
	rt.Close()
	for range rt.Results() {
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	if st := taskStats(rt.Stats(), "a").Copies[0]; st.FullQueue != "" || st.State != "terminated" {
		t.Errorf("after the run: %+v", st)
	}
}
