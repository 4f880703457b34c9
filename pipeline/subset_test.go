package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/pipeline"
	"github.com/gohtgs/htgs/task"
)

// connectOuter wires g's input to p, straight or (fromTask) through a
// pass-through task of threads threads, and p to g's output.
func connectOuter(g *graph.Graph[cell, tagged], p interface {
	graph.Consumer[cell]
	graph.Producer[tagged]
}, fromTask bool, threads int) {
	if fromTask {
		pass := graph.AddFunc(g, "pass", threads, func(_ context.Context, c cell, out task.Emitter[cell]) error { return out.Emit(c) })
		graph.Connect(g.Input(), pass)
		graph.Connect(pass, p)
	} else {
		graph.Connect(g.Input(), p)
	}
	graph.Connect(p, g.Output())
}

func runSubset(t *testing.T, clones int, rule pipeline.Subset[cell], fromTask bool) ([]tagged, error) {
	t.Helper()
	g := graph.New[cell, tagged]("outer")
	p := pipeline.NewSubset(g, "devs", perClone(), device.Hosts(clones), rule)
	connectOuter(g, p, fromTask, 2)
	var got []tagged
	err := g.Run(context.Background(), grid(6, 7), func(v tagged) error { got = append(got, v); return nil })
	return got, err
}

// Rows go in bands of 2 to 3 clones, and each row also to the clone of the
// band below it (its halo); row 5 also asks twice for its clone and once
// for none, and rows of value 0 to no clone.
func TestSubsetRoutesToBands(t *testing.T) {
	band := func(row int) int { return row / 2 }
	rule := func(c cell, clones int, add func(int)) {
		if c.v == 0 {
			return
		}
		add(band(c.row))
		if c.row+1 < 6 && band(c.row+1) != band(c.row) {
			add(band(c.row + 1))
		}
		if c.row == 5 {
			add(band(c.row))
		}
	}
	for _, fromTask := range []bool{false, true} {
		got, err := runSubset(t, 3, rule, fromTask)
		if err != nil {
			t.Fatal(err)
		}
		per := map[[2]int]int{} // (value, clone) -> times
		for _, x := range got {
			per[[2]int{x.v, x.pipe}]++
		}
		want := 0
		for r := range 6 {
			for c := range 7 {
				v := r*7 + c
				clones := map[int]bool{}
				if v != 0 {
					clones[band(r)] = true
					if r+1 < 6 {
						clones[band(r+1)] = true
					}
				}
				for d := range 3 {
					n := per[[2]int{v * v, d}] // perClone squares
					if clones[d] && n != 1 || !clones[d] && n != 0 {
						t.Errorf("from task %v: value %d (row %d) reached clone %d %d times", fromTask, v, r, d, n)
					}
				}
				want += len(clones)
			}
		}
		if len(got) != want {
			t.Errorf("from task %v: %d results, want %d", fromTask, len(got), want)
		}
	}
}

func TestSubsetErrors(t *testing.T) {
	for _, fromTask := range []bool{false, true} {
		_, err := runSubset(t, 2, func(c cell, clones int, add func(int)) { add(0); add(clones) }, fromTask)
		if err == nil || !strings.Contains(err.Error(), `pipeline "devs"`) || !strings.Contains(err.Error(), "clone 2 of 2") {
			t.Errorf("from task %v: out of range: Run = %v, want an error naming the pipeline and the clone", fromTask, err)
		}
		_, err = runSubset(t, 2, func(c cell, clones int, add func(int)) {
			if c.v == 3 {
				panic("no clones for 3")
			}
			add(1)
		}, fromTask)
		var pe *task.PanicError
		if err == nil || !strings.Contains(err.Error(), `pipeline "devs"`) || !errors.As(err, &pe) {
			t.Errorf("from task %v: panic: Run = %v, want a PanicError naming the pipeline", fromTask, err)
		}
	}
	g := graph.New[cell, tagged]("outer")
	p := pipeline.NewSubset(g, "nil", perClone(), device.Hosts(2), nil)
	graph.Connect(g.Input(), p)
	graph.Connect(p, g.Output())
	if err := g.Run(context.Background(), grid(1, 1), nil); err == nil || !strings.Contains(err.Error(), "nil decomposition rule") {
		t.Errorf("nil rule: Run = %v", err)
	}
}

// Routing a value through a subset rule allocates nothing in the steady
// state (the clones' queues and the consumers aside).
func TestSubsetRoutingAllocs(t *testing.T) {
	g := graph.New[int, int]("outer")
	inner := graph.New[int, int]("inner")
	drop := graph.AddFunc(inner, "drop", 1, func(context.Context, int, task.Emitter[int]) error { return nil })
	graph.Connect(inner.Input(), drop)
	graph.Connect(drop, inner.Output())
	p := pipeline.NewSubset(g, "p", inner, device.Hosts(3), func(v, clones int, add func(int)) {
		add(v % clones)
		add((v + 1) % clones)
	})
	graph.Connect(g.Input(), p)
	graph.Connect(p, g.Output())
	rt, err := g.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	allocs := testing.AllocsPerRun(2000, func() {
		_ = rt.Send(i)
		i++
	})
	rt.Close()
	for range rt.Results() {
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	if allocs > 0.5 {
		t.Errorf("%v allocations per routed value", allocs)
	}
}
