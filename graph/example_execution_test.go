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
