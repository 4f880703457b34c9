package pipeline_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/pipeline"
	"github.com/gohtgs/htgs/task"
)

// Rows of a grid go to 3 clones of a subgraph, one per device; each value
// learns which clone and device processed it.
func Example() {
	inner := graph.New[int, string]("per device")
	where := graph.AddFunc(inner, "where", 1, func(ctx context.Context, row int, out task.Emitter[string]) error {
		info, _ := task.InfoFrom(ctx)
		return out.Emit(fmt.Sprintf("row %d on clone %d/%d (%s)", row, info.Clone, info.Clones, info.Device.Name()))
	})
	graph.Connect(inner.Input(), where)
	graph.Connect(where, inner.Output())

	g := graph.New[int, string]("rows")
	p := pipeline.New(g, "devices", inner, device.Hosts(3), pipeline.ByKey(func(row int) int { return row }))
	graph.Connect(g.Input(), p)
	graph.Connect(p, g.Output())

	var lines []string
	_ = g.Run(context.Background(), slices.Values([]int{0, 1, 2, 3, 4}), func(s string) error {
		lines = append(lines, s)
		return nil
	})
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// row 0 on clone 0/3 (cpu0)
	// row 1 on clone 1/3 (cpu1)
	// row 2 on clone 2/3 (cpu2)
	// row 3 on clone 0/3 (cpu0)
	// row 4 on clone 1/3 (cpu1)
}

// Rows 0..5 in two bands of 3 rows; a band also needs the row above it (its
// halo), so row 2 goes to both clones and every other row to one.
func ExampleNewSubset() {
	inner := graph.New[int, string]("per device")
	where := graph.AddFunc(inner, "where", 1, func(ctx context.Context, row int, out task.Emitter[string]) error {
		info, _ := task.InfoFrom(ctx)
		return out.Emit(fmt.Sprintf("row %d on clone %d", row, info.Clone))
	})
	graph.Connect(inner.Input(), where)
	graph.Connect(where, inner.Output())

	const rows = 6
	g := graph.New[int, string]("bands")
	p := pipeline.NewSubset(g, "devices", inner, device.Hosts(2), func(row, clones int, add func(int)) {
		band := func(r int) int { return r * clones / rows }
		add(band(row))
		if row+1 < rows {
			add(band(row + 1)) // the same clone again is a no-op
		}
	})
	graph.Connect(g.Input(), p)
	graph.Connect(p, g.Output())

	var lines []string
	_ = g.Run(context.Background(), slices.Values([]int{0, 1, 2, 3, 4, 5}), func(s string) error {
		lines = append(lines, s)
		return nil
	})
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// row 0 on clone 0
	// row 1 on clone 0
	// row 2 on clone 0
	// row 2 on clone 1
	// row 3 on clone 1
	// row 4 on clone 1
	// row 5 on clone 1
}
