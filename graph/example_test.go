package graph_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// A two-stage graph: four copies square numbers, one copy adds one.
func Example() {
	g := graph.New[int, int]("example")
	square := graph.AddTask(g, "square", 4, func() task.Task[int, int] {
		return task.Map(func(_ context.Context, v int) (int, error) { return v * v, nil })
	})
	inc := graph.AddFunc(g, "inc", 1, func(_ context.Context, v int, out task.Emitter[int]) error {
		return out.Emit(v + 1)
	})
	graph.Connect(g.Input(), square)
	graph.Connect(square, inc)
	graph.Connect(inc, g.Output())

	rt, err := g.Start(context.Background())
	if err != nil {
		panic(err)
	}
	go func() {
		defer rt.Close()
		for i := 1; i <= 5; i++ {
			if rt.Send(i) != nil {
				return
			}
		}
	}()
	var got []int
	for v := range rt.Results() {
		got = append(got, v)
	}
	if err := rt.Wait(); err != nil {
		panic(err)
	}
	slices.Sort(got) // four copies finish in any order
	fmt.Println(got)
	// Output: [2 5 10 17 26]
}

// Graph.Run feeds a sequence and collects the results in one call.
func ExampleGraph_Run() {
	g := graph.New[string, int]("lengths")
	n := graph.AddTask(g, "len", 1, func() task.Task[string, int] {
		return task.Map(func(_ context.Context, s string) (int, error) { return len(s), nil })
	})
	graph.Connect(g.Input(), n)
	graph.Connect(n, g.Output())

	words := slices.Values([]string{"hybrid", "task", "graph"})
	err := g.Run(context.Background(), words, func(v int) error {
		fmt.Println(v)
		return nil
	})
	fmt.Println(err)
	// Output:
	// 6
	// 4
	// 5
	// <nil>
}

// A nested graph is one node of its parent.
func ExampleAddGraph() {
	inner := graph.New[int, int]("double")
	d := graph.AddFunc(inner, "x2", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(2 * v) })
	graph.Connect(inner.Input(), d)
	graph.Connect(d, inner.Output())

	outer := graph.New[int, int]("outer")
	n := graph.AddGraph(outer, "double", inner)
	graph.Connect(outer.Input(), n)
	graph.Connect(n, outer.Output())
	_ = outer.Run(context.Background(), slices.Values([]int{1, 2, 3}), func(v int) error {
		fmt.Print(v, " ")
		return nil
	})
	fmt.Println()
	// Output: 2 4 6
}

// A priority queue: of the values waiting, the task takes the largest
// first. The task is held on its first value until the others are queued.
func ExamplePriority() {
	g := graph.New[int, int]("largest first")
	started, release := make(chan struct{}), make(chan struct{})
	work := graph.AddFunc(g, "work", 1, func(_ context.Context, v int, out task.Emitter[int]) error {
		if v == 0 {
			close(started)
			<-release
		}
		return out.Emit(v)
	}, graph.Priority(func(a, b int) bool { return a > b }))
	graph.Connect(g.Input(), work)
	graph.Connect(work, g.Output())

	rt, _ := g.Start(context.Background())
	_ = rt.Send(0)
	<-started
	for _, v := range []int{2, 7, 1, 8} {
		_ = rt.Send(v)
	}
	close(release)
	rt.Close()
	for v := range rt.Results() {
		fmt.Print(v, " ")
	}
	fmt.Println()
	if err := rt.Wait(); err != nil {
		fmt.Println(err)
	}
	// Output: 0 8 7 2 1
}

// describer is the state of a task of two input types, one method each.
type describer struct{ seen int }

func (d *describer) Number(_ context.Context, v int, out task.Emitter[string]) error {
	d.seen++
	return out.Emit(fmt.Sprintf("number %d", v))
}

func (d *describer) Word(_ context.Context, w string, out task.Emitter[string]) error {
	d.seen++
	return out.Emit("word " + w)
}

// A task with an input of ints and one of strings, each executed by its
// own method on the copy's state; the edges to them are typed like any
// other, and the task has one queue and no goroutine per input.
func ExampleAddMultiTask() {
	g := graph.New[int, string]("describe")
	spell := graph.AddFunc(g, "spell", 1, func(_ context.Context, v int, out task.Emitter[string]) error {
		return out.Emit([]string{"zero", "one", "two"}[v])
	})
	describe := graph.AddMultiTask[*describer, string](g, "describe", 1, func() *describer { return &describer{} })
	graph.Connect(g.Input(), graph.AddInput(describe, (*describer).Number))
	graph.Connect(g.Input(), spell)
	graph.Connect(spell, graph.AddInput(describe, (*describer).Word))
	graph.Connect(describe, g.Output())

	var got []string
	err := g.Run(context.Background(), slices.Values([]int{1, 2}), func(s string) error {
		got = append(got, s)
		return nil
	})
	slices.Sort(got) // the two inputs interleave in any order
	fmt.Println(got, err)
	// Output: [number 1 number 2 word one word two] <nil>
}

// bigOnSecond is a scheduling policy for a task with two implementations:
// the second takes only the values whose estimate is at least 10, the
// first only the others.
type bigOnSecond struct{}

func (bigOnSecond) Choose(u device.Unit, ready []device.Candidate) int {
	for i, c := range ready {
		if (c.Estimate >= 10) == (u.Index == 1) {
			return i
		}
	}
	return -1 // nothing for this one: it waits
}

// A policy of one's own chooses which waiting value each free
// implementation takes; the speedup function gives each value's estimate.
// The policies of package pats (pats.FCFS, pats.PATS) plug in the same
// way.
func ExampleChoose() {
	where := func() task.Task[int, string] {
		return task.Map(func(ctx context.Context, v int) (string, error) {
			info, _ := task.InfoFrom(ctx)
			return fmt.Sprint(info.Device.Name(), ":", v), nil
		})
	}
	g := graph.New[int, string]("sizes")
	n := graph.AddVariants(g, "work", []graph.Variant[int, string]{
		{Device: device.Host{Index: 0}, New: where},
		{Device: device.Host{Index: 1}, New: where},
	}, graph.Choose(bigOnSecond{}, func(v int) float64 { return float64(v * v) }))
	graph.Connect(g.Input(), n)
	graph.Connect(n, g.Output())

	var got []string
	err := g.Run(context.Background(), slices.Values([]int{1, 5, 2, 4, 3}), func(s string) error {
		got = append(got, s)
		return nil
	})
	slices.Sort(got)
	fmt.Println(got, err)
	// Output: [cpu0:1 cpu0:2 cpu0:3 cpu1:4 cpu1:5] <nil>
}

// A task with two implementations, each bound to a device: here two CPU
// devices stand in for a CPU and a GPU. Each value goes to the one
// expected to finish it first, from the times measured so far; each
// implementation is a task named after its device.
func ExampleAddVariants() {
	square := func() task.Task[int, int] {
		return task.Map(func(ctx context.Context, v int) (int, error) {
			info, _ := task.InfoFrom(ctx) // info.Device is the implementation's
			_ = info.Device
			return v * v, nil
		})
	}
	g := graph.New[int, int]("hybrid")
	sq := graph.AddVariants(g, "square", []graph.Variant[int, int]{
		{Device: device.Host{Index: 0}, Copies: 2, New: square},
		{Device: device.Host{Index: 1}, New: square},
	})
	graph.Connect(g.Input(), sq)
	graph.Connect(sq, g.Output())

	rt, _ := g.Start(context.Background())
	for i := 1; i <= 4; i++ {
		_ = rt.Send(i)
	}
	rt.Close()
	var got []int
	for v := range rt.Results() {
		got = append(got, v)
	}
	slices.Sort(got)
	fmt.Println(got, rt.Wait())
	for _, ts := range rt.Stats().Tasks {
		fmt.Println(ts.Name)
	}
	// Output:
	// [1 4 9 16] <nil>
	// square/cpu0
	// square/cpu1
}
