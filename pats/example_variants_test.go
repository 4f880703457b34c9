package pats_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/task"
)

// PATS schedules a graph task with a CPU and a GPU implementation: given
// to graph.AddVariants with graph.Choose, it has the GPU take, of the
// values waiting, the one with the highest estimated speedup, and the CPU
// the one with the lowest. Here a simulated unit stands in for the GPU,
// and a tile's speedup grows with its size.
func ExamplePolicy_Choose() {
	type tile struct{ id, size int }
	segment := func() task.Task[tile, string] {
		return task.Map(func(ctx context.Context, t tile) (string, error) {
			info, _ := task.InfoFrom(ctx) // the implementation's device: bind it in Initialize
			_ = info.Device
			return fmt.Sprintf("tile %d segmented", t.id), nil
		})
	}
	g := graph.New[tile, string]("slide")
	seg := graph.AddVariants(g, "segment", []graph.Variant[tile, string]{
		{Device: device.Host{}, New: segment},
		{Device: pats.Sim{Type: device.GPU}, New: segment},
	}, graph.Choose(pats.PATS, func(t tile) float64 { return float64(t.size) }))
	graph.Connect(g.Input(), seg)
	graph.Connect(seg, g.Output())

	var got []string
	tiles := []tile{{1, 512}, {2, 4096}, {3, 1024}, {4, 2048}}
	err := g.Run(context.Background(), slices.Values(tiles), func(s string) error {
		got = append(got, s)
		return nil
	})
	slices.Sort(got) // which device took which tile depends on timing
	fmt.Println(got, err)
	// Output: [tile 1 segmented tile 2 segmented tile 3 segmented tile 4 segmented] <nil>
}
