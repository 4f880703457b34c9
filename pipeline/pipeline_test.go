package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/pipeline"
	"github.com/gohtgs/htgs/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type cell struct{ row, col, v int }

type tagged struct {
	cell
	pipe, pipes int
	dev         string
	task        string
}

// perClone squares a cell and records where it ran. It uses a per-clone pool
// and a per-clone bookkeeper that counts rows (state must not be shared).
func perClone() *graph.Graph[cell, tagged] {
	g := graph.New[cell, tagged]("clone")
	pool := memmgr.New(g, "scratch", 2, memmgr.Slices[int](1))
	sq := graph.AddFunc(g, "square", 2, func(ctx context.Context, c cell, out task.Emitter[tagged]) error {
		info, _ := task.InfoFrom(ctx)
		b, err := pool.Get(ctx)
		if err != nil {
			return err
		}
		b.Data[0] = c.v * c.v
		t := tagged{cell: cell{c.row, c.col, b.Data[0]}, pipe: info.Clone, pipes: info.Clones, dev: info.Device.Name(), task: info.Task}
		if err := b.Release(); err != nil {
			return err
		}
		return out.Emit(t)
	})
	memmgr.Use(pool, sq)
	bk := bookkeeper.New[tagged](g, "rows seen")
	pass := bookkeeper.AddRule(bk, "pass", func() bookkeeper.Rule[tagged, tagged] {
		seen := map[int]bool{} // per clone: a row seen by two clones is a routing bug
		return bookkeeper.RuleFunc[tagged, tagged](func(_ context.Context, t tagged, out task.Emitter[tagged]) error {
			seen[t.row] = true
			return out.Emit(t)
		})
	})
	graph.Connect(g.Input(), sq)
	graph.Connect(sq, bk)
	graph.Connect(pass, g.Output())
	return g
}

func grid(rows, cols int) func(func(cell) bool) {
	return func(yield func(cell) bool) {
		for r := range rows {
			for c := range cols {
				if !yield(cell{r, c, r*cols + c}) {
					return
				}
			}
		}
	}
}

func runPipeline(t *testing.T, clones int, rule pipeline.Route[cell]) []tagged {
	t.Helper()
	g := graph.New[cell, tagged]("outer")
	p := pipeline.New(g, "devs", perClone(), device.Hosts(clones), rule)
	graph.Connect(g.Input(), p)
	graph.Connect(p, g.Output())
	var got []tagged
	if err := g.Run(context.Background(), grid(6, 7), func(v tagged) error { got = append(got, v); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func values(ts []tagged) []int {
	var vs []int
	for _, t := range ts {
		vs = append(vs, t.v)
	}
	slices.Sort(vs)
	return vs
}

func TestRowDecompositionMatchesOneClone(t *testing.T) {
	byRow := pipeline.ByKey(func(c cell) int { return c.row })
	one := runPipeline(t, 1, byRow)
	three := runPipeline(t, 3, byRow)
	if !slices.Equal(values(one), values(three)) || len(three) != 42 {
		t.Fatalf("3 clones gave %v, 1 clone %v", values(three), values(one))
	}
	for _, x := range three {
		if x.pipe != x.row%3 || x.pipes != 3 {
			t.Fatalf("row %d ran in clone %d of %d", x.row, x.pipe, x.pipes)
		}
		if want := fmt.Sprintf("cpu%d", x.pipe); x.dev != want {
			t.Fatalf("clone %d saw device %s", x.pipe, x.dev)
		}
		if want := fmt.Sprintf("devs[%d]/square", x.pipe); x.task != want {
			t.Fatalf("task name %q, want %q", x.task, want)
		}
	}
}

func TestBroadcast(t *testing.T) {
	got := runPipeline(t, 3, pipeline.Broadcast[cell]())
	if len(got) != 3*42 {
		t.Fatalf("%d results, want %d", len(got), 3*42)
	}
	perClone := map[int]int{}
	for _, x := range got {
		perClone[x.pipe]++
	}
	for i := range 3 {
		if perClone[i] != 42 {
			t.Fatalf("clone %d processed %d values", i, perClone[i])
		}
	}
}

func TestNestedPipelines(t *testing.T) {
	inner := graph.New[cell, tagged]("inner")
	ip := pipeline.New(inner, "cols", perClone(), device.Hosts(2), pipeline.ByKey(func(c cell) int { return c.col }))
	graph.Connect(inner.Input(), ip)
	graph.Connect(ip, inner.Output())

	g := graph.New[cell, tagged]("outer")
	op := pipeline.New(g, "rows", inner, device.Hosts(3), pipeline.ByKey(func(c cell) int { return c.row }))
	graph.Connect(g.Input(), op)
	graph.Connect(op, g.Output())
	var got []tagged
	if err := g.Run(context.Background(), grid(6, 4), func(v tagged) error { got = append(got, v); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 24 {
		t.Fatalf("%d results", len(got))
	}
	for _, x := range got {
		want := fmt.Sprintf("rows[%d]/cols[%d]/square", x.row%3, x.col%2)
		if x.task != want || x.pipe != x.col%2 || x.pipes != 2 {
			t.Fatalf("cell (%d,%d) ran as %q clone %d/%d, want %q", x.row, x.col, x.task, x.pipe, x.pipes, want)
		}
	}
}

func TestPipelineMisuse(t *testing.T) {
	g := graph.New[cell, tagged]("none")
	p := pipeline.New(g, "empty", perClone(), nil, pipeline.Broadcast[cell]())
	graph.Connect(g.Input(), p)
	if _, err := g.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "no devices") {
		t.Fatalf("pipeline without devices: %v", err)
	}

	g2 := graph.New[cell, tagged]("bad rule")
	p2 := pipeline.New(g2, "p", perClone(), device.Hosts(2), func(cell, int) int { return 5 })
	graph.Connect(g2.Input(), p2)
	graph.Connect(p2, g2.Output())
	err := g2.Run(context.Background(), grid(1, 1), nil)
	if err == nil || !strings.Contains(err.Error(), "clone 5 of 2") {
		t.Fatalf("out-of-range rule: %v", err)
	}
}

// Clones really run concurrently: with 2 clones of a task that waits for its
// sibling, the graph only finishes if both clones are live at once.
func TestClonesRunConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(2)
	inner := graph.New[int, int]("rendezvous")
	n := graph.AddFunc(inner, "meet", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		wg.Done()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		return out.Emit(v)
	})
	graph.Connect(inner.Input(), n)
	graph.Connect(n, inner.Output())
	g := graph.New[int, int]("outer")
	p := pipeline.New(g, "two", inner, device.Hosts(2), func(v, _ int) int { return v })
	graph.Connect(g.Input(), p)
	graph.Connect(p, g.Output())
	err := g.Run(context.Background(), slices.Values([]int{0, 1}), nil)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

func TestPipelineContainingItsOwnGraph(t *testing.T) {
	g := graph.New[int, int]("loop")
	p := pipeline.New(g, "clones", g, device.Hosts(2), pipeline.Broadcast[int]())
	graph.Connect(g.Input(), p)
	if _, err := g.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "contains itself") {
		t.Fatalf("Start = %v", err)
	}
}

// A decomposition rule that panics fails the run with an error naming the
// pipeline, also when the pipeline is fed straight from the graph's input
// (the rule then runs inside Send, on the caller's goroutine).
func TestRulePanicFedFromGraphInput(t *testing.T) {
	bad := func(c cell, clones int) int {
		if c.v == 3 {
			panic("no clone for 3")
		}
		return c.row % clones
	}
	for _, fromTask := range []bool{false, true} {
		g := graph.New[cell, tagged]("outer")
		p := pipeline.New(g, "devs", perClone(), device.Hosts(2), bad)
		connectOuter(g, p, fromTask, 1)
		err := g.Run(context.Background(), grid(2, 4), nil)
		var pe *task.PanicError
		if err == nil || !strings.Contains(err.Error(), `pipeline "devs"`) || !strings.Contains(err.Error(), "no clone for 3") || !errors.As(err, &pe) {
			t.Fatalf("fed from a task: %v: Run = %v, want a PanicError naming the pipeline", fromTask, err)
		}
	}
}
