package graph_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// joiner pairs each int with the string of the same number, whichever
// comes first: the state both inputs share.
type joiner struct {
	ints    map[int]bool
	strs    map[int]bool
	inits   *atomic.Int32
	shuts   *atomic.Int32
	threads int
}

func (j *joiner) Initialize(_ context.Context, info task.Info) error {
	j.inits.Add(1)
	j.threads = info.Copies
	return nil
}

func (j *joiner) Shutdown(context.Context) error {
	j.shuts.Add(1)
	return nil
}

func (j *joiner) Int(_ context.Context, v int, out task.Emitter[string]) error {
	if j.strs[v] {
		delete(j.strs, v)
		return out.Emit(fmt.Sprintf("pair %d", v))
	}
	j.ints[v] = true
	return nil
}

func (j *joiner) Text(_ context.Context, s string, out task.Emitter[string]) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		return err
	}
	if j.ints[v] {
		delete(j.ints, v)
		return out.Emit(fmt.Sprintf("pair %d", v))
	}
	j.strs[v] = true
	return nil
}

// joinGraph sends every input to the join's int input directly and,
// formatted, to its string input.
func joinGraph(inits, shuts *atomic.Int32) *graph.Graph[int, string] {
	g := graph.New[int, string]("join")
	join := graph.AddMultiTask[*joiner, string](g, "join", 1, func() *joiner {
		return &joiner{ints: map[int]bool{}, strs: map[int]bool{}, inits: inits, shuts: shuts}
	})
	ints := graph.AddInput(join, (*joiner).Int)
	strs := graph.AddInput(join, (*joiner).Text)
	format := graph.AddFunc(g, "format", 2, func(_ context.Context, v int, out task.Emitter[string]) error {
		return out.Emit(strconv.Itoa(v))
	})
	graph.Connect(g.Input(), ints)
	graph.Connect(g.Input(), format)
	graph.Connect(format, strs)
	graph.Connect(join, g.Output())
	return g
}

// A task of two input types joins them in one state, with its optional
// phases, through typed edges (issue 22, item 10).
func TestMultiTaskJoinsTwoTypes(t *testing.T) {
	var inits, shuts atomic.Int32
	var got []string
	err := joinGraph(&inits, &shuts).Run(context.Background(), seqInts(100), func(s string) error {
		got = append(got, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 100 {
		want = append(want, fmt.Sprintf("pair %d", i))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("got %d pairs, want 100: %v", len(got), got)
	}
	if inits.Load() != 1 || shuts.Load() != 1 {
		t.Errorf("%d Initialize, %d Shutdown; want 1 each", inits.Load(), shuts.Load())
	}
}

// seqInts yields 0..n-1.
func seqInts(n int) func(func(int) bool) {
	return func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}
}

// counter takes ints and floats and emits ints; in a cycle with a task
// that halves, the graph ends by quiescence through the multi-input
// task's second input.
type counter struct{ seen *atomic.Int64 }

func (c counter) Int(_ context.Context, v int, out task.Emitter[int]) error {
	c.seen.Add(1)
	return out.Emit(v)
}

func (c counter) Float(_ context.Context, v float64, out task.Emitter[int]) error {
	c.seen.Add(1)
	if v < 1 {
		return nil
	}
	return out.Emit(int(v))
}

func TestMultiTaskInCycle(t *testing.T) {
	var seen atomic.Int64
	g := graph.New[int, int]("cycle")
	c := graph.AddMultiTask[counter, int](g, "count", 3, func() counter { return counter{&seen} })
	graph.Discard(c)
	half := graph.AddFunc(g, "half", 2, func(_ context.Context, v int, out task.Emitter[float64]) error {
		return out.Emit(float64(v) / 2)
	})
	graph.Connect(g.Input(), graph.AddInput(c, counter.Int))
	graph.Connect(c, half)
	graph.Connect(half, graph.AddInput(c, counter.Float))
	rt, err := g.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rt.Stats().Cyclic {
		t.Error("the cycle through the second input is not seen")
	}
	_ = rt.Send(64) // 64, then 32 16 8 4 2 1 0.5 as floats
	rt.Close()
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	if n := seen.Load(); n != 8 {
		t.Errorf("%d values executed, want 8", n)
	}
	var dot strings.Builder
	if err := rt.WriteDOT(&dot, graph.DOTOptions{}); err != nil || !strings.Contains(dot.String(), `"half" -> "count"`) {
		t.Errorf("picture (%v):\n%s", err, dot.String())
	}
}

// Mistakes are errors naming the task: no inputs, a priority queue, an
// input's function failing or panicking.
func TestMultiTaskErrors(t *testing.T) {
	newCounter := func() counter { return counter{new(atomic.Int64)} }
	g := graph.New[int, int]("none")
	m := graph.AddMultiTask[counter, int](g, "bare", 1, newCounter)
	graph.Connect(m, g.Output())
	if _, err := g.Start(context.Background()); err == nil || !strings.Contains(err.Error(), `task "bare" has no inputs`) {
		t.Errorf("no inputs: %v", err)
	}

	g = graph.New[int, int]("pri")
	m = graph.AddMultiTask[counter, int](g, "pri", 1, newCounter, graph.Priority(func(a, b int) bool { return a < b }))
	graph.Connect(g.Input(), graph.AddInput(m, counter.Int))
	graph.Connect(m, g.Output())
	if _, err := g.Start(context.Background()); err == nil || !strings.Contains(err.Error(), `task "pri": a task with several inputs cannot have a priority queue`) {
		t.Errorf("priority: %v", err)
	}

	for _, fail := range []func(counter, context.Context, int, task.Emitter[int]) error{
		func(counter, context.Context, int, task.Emitter[int]) error { return errors.New("boom") },
		func(counter, context.Context, int, task.Emitter[int]) error { panic("boom") },
	} {
		g = graph.New[int, int]("fail")
		m = graph.AddMultiTask[counter, int](g, "failing", 2, newCounter)
		graph.Connect(g.Input(), graph.AddInput(m, fail))
		graph.Connect(m, g.Output())
		err := g.Run(context.Background(), seqInts(3), nil)
		var te *task.Error
		if !errors.As(err, &te) || te.Task != "failing" || !strings.Contains(err.Error(), "boom") {
			t.Errorf("failing input: %v", err)
		}
	}
}

// An edge of the wrong type to an input does not compile.
func TestMultiInputEdgeDoesNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the compiler")
	}
	out, err := exec.Command("go", "build", "-o", t.TempDir()+"/x", "./testdata/multimismatch").CombinedOutput()
	if err == nil {
		t.Fatal("a string producer connected to an int input compiled")
	}
	if !strings.Contains(string(out), "does not match") || !strings.Contains(string(out), "main.go:26") {
		t.Fatalf("unexpected compiler output:\n%s", out)
	}
}
