package graph_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// report works on a run of any graph: it needs only the untyped
// *graph.Execution, not the graph's input and output types.
func report(run *graph.Execution) error {
	if err := run.Wait(); err != nil {
		return err
	}
	st := run.Stats()
	fmt.Printf("graph %q: %d sent, %d out\n", st.Graph, st.Sent, st.Outputs)
	for _, t := range st.Tasks {
		fmt.Printf("  %s %q: in %d, out %d\n", t.Kind, t.Name, t.ItemsIn, t.ItemsOut)
	}
	return nil
}

// A Runtime embeds its Execution: pass rt.Execution to code that observes
// or waits for runs of any graph.
func ExampleExecution() {
	g := graph.New[string, int]("lengths")
	length := graph.AddFunc(g, "length", 2, func(_ context.Context, s string, out task.Emitter[int]) error {
		return out.Emit(len(s))
	})
	graph.Connect(g.Input(), length)
	graph.Connect(length, g.Output())

	rt, err := g.Start(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range []string{"tile", "pair", "mosaic"} {
		rt.Send(s)
	}
	rt.Close()
	got := slices.Sorted(rt.Results())
	fmt.Println(got)
	if err := report(rt.Execution); err != nil {
		fmt.Println(err)
	}
	// Output:
	// [4 4 6]
	// graph "lengths": 3 sent, 3 out
	//   task "length": in 3, out 3
}

// The nodes and edges of a run, for code that draws it.
func ExampleExecution_Topology() {
	g := graph.New[string, int]("lengths")
	length := graph.AddFunc(g, "length", 1, func(_ context.Context, s string, out task.Emitter[int]) error {
		return out.Emit(len(s))
	})
	graph.Connect(g.Input(), length)
	graph.Connect(length, g.Output())
	err := g.Run(context.Background(), slices.Values([]string{"tile"}), nil, graph.WithStarted(func(e *graph.Execution) {
		top := e.Topology()
		for _, n := range top.Nodes {
			fmt.Printf("node %q (%s)\n", n.ID, n.Kind)
		}
		for _, ed := range top.Edges {
			fmt.Printf("edge %q -> %q (%s)\n", ed.From, ed.To, ed.Type)
		}
	}))
	fmt.Println(err)
	// Output:
	// node "input" (input)
	// node "output" (output)
	// node "length" (task)
	// edge "input" -> "length" (string)
	// edge "length" -> "output" (int)
	// <nil>
}

// A run started WithTrace records a timeline: a track per task copy, a
// slice per Execute.
func ExampleExecution_Timeline() {
	g := graph.New[string, int]("lengths")
	length := graph.AddFunc(g, "length", 1, func(_ context.Context, s string, out task.Emitter[int]) error {
		return out.Emit(len(s))
	})
	graph.Connect(g.Input(), length)
	graph.Connect(length, g.Output())
	rt, err := g.Start(context.Background(), graph.WithTrace())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range []string{"tile", "pair", "mosaic"} {
		rt.Send(s)
	}
	rt.Close()
	for range rt.Results() {
	}
	if err := rt.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	tl, err := rt.Timeline(0, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range tl.Tracks {
		fmt.Printf("%s #%d: %d slices\n", t.Task, t.Copy, len(t.Slices))
	}
	// Output:
	// length #0: 3 slices
}
