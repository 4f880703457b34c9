package graph_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// runHeld sends first, waits until the task's copy executes it (and is
// held there), sends rest, then lets the copy go on and returns the
// outputs in order.
func runHeld[T any](t *testing.T, first T, rest []T, opts ...graph.Option) ([]T, error) {
	t.Helper()
	started, release := make(chan struct{}), make(chan struct{})
	g := graph.New[T, T]("held")
	n := 0
	tk := graph.AddFunc(g, "work", 1, func(_ context.Context, v T, out task.Emitter[T]) error {
		if n++; n == 1 {
			close(started)
			<-release
		}
		return out.Emit(v)
	}, opts...)
	graph.Connect(g.Input(), tk)
	graph.Connect(tk, g.Output())
	rt, err := g.Start(context.Background())
	if err != nil {
		return nil, err
	}
	_ = rt.Send(first)
	<-started
	for _, v := range rest {
		_ = rt.Send(v)
	}
	close(release)
	rt.Close()
	var got []T
	for v := range rt.Results() {
		got = append(got, v)
	}
	return got, rt.Wait()
}

// A priority function changes the order in which queued values are
// executed; without one the queue is FIFO (issue 22, item 9).
func TestPriorityChangesOrder(t *testing.T) {
	rest := []int{3, 1, 4, 1, 5, 9, 2, 6}
	fifo, err := runHeld(t, 0, rest)
	if err != nil {
		t.Fatal(err)
	}
	if want := append([]int{0}, rest...); !slices.Equal(fifo, want) {
		t.Errorf("FIFO order %v, want %v", fifo, want)
	}
	pri, err := runHeld(t, 0, rest, graph.Priority(func(a, b int) bool { return a > b }))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 9, 6, 5, 4, 3, 2, 1, 1}; !slices.Equal(pri, want) {
		t.Errorf("priority order %v, want %v", pri, want)
	}
}

// Values equal in priority keep their order of arrival.
func TestPriorityIsStable(t *testing.T) {
	type job struct{ pri, id int }
	var rest []job
	for i := range 40 {
		rest = append(rest, job{pri: i % 3, id: i})
	}
	got, err := runHeld(t, job{pri: 9}, rest, graph.Priority(func(a, b job) bool { return a.pri > b.pri }))
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(rest)
	slices.SortStableFunc(want, func(a, b job) int { return b.pri - a.pri })
	if !slices.Equal(got[1:], want) {
		t.Errorf("got %v, want %v", got[1:], want)
	}
}

// A priority function of another type than the task's input is refused,
// naming the task; one that panics fails the run, naming the task.
func TestPriorityErrors(t *testing.T) {
	g := graph.New[int, int]("typed")
	tk := graph.AddFunc(g, "work", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) },
		graph.Priority(func(a, b string) bool { return a < b }))
	graph.Connect(g.Input(), tk)
	graph.Connect(tk, g.Output())
	if _, err := g.Start(context.Background()); err == nil || !strings.Contains(err.Error(), `task "work"`) || !strings.Contains(err.Error(), "func(a, b int) bool") {
		t.Errorf("Start: %v, want an error naming the task and the type", err)
	}

	_, err := runHeld(t, 0, []int{1, 2, 3}, graph.Priority(func(a, b int) bool { panic("bad order") }))
	var te *task.Error
	var pe *task.PanicError
	if !errors.As(err, &te) || te.Task != "work" || !errors.As(err, &pe) {
		t.Errorf("Wait: %v, want a panic of task \"work\"", err)
	}
}
