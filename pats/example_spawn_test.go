package pats_test

import (
	"context"
	"fmt"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/pats"
)

// Features are computed only for the tiles where segmentation found nuclei:
// each tile's flow spawns a features flow when it completes, and only if
// there is something to measure. The manager runs it on two CPU cores with
// at most two flows in progress.
func ExampleFlow_Spawn() {
	nuclei := make([]int, 6)
	segment := &pats.Op[int]{Name: "segment", Impls: map[device.Kind]pats.Impl[int]{
		device.CPU: func(_ context.Context, _ device.Device, i int) error {
			nuclei[i] = i % 3 // found at run time
			return nil
		},
	}}
	measured := make([]bool, 6)
	features := &pats.Op[int]{Name: "features", Impls: map[device.Kind]pats.Impl[int]{
		device.CPU: func(_ context.Context, _ device.Device, i int) error {
			measured[i] = true
			return nil
		},
	}}
	ctx := context.Background()
	m, err := pats.Start(ctx, pats.Config{Window: 2}, pats.CPUUnits(2)...)
	if err != nil {
		panic(err)
	}
	var hs []*pats.Job
	for i := range nuclei {
		f := pats.NewFlow(fmt.Sprint("tile", i))
		pats.Add(f, segment, i, pats.Writes(pats.Data{Key: "labels", Bytes: 1 << 20}))
		f.Spawn(func(context.Context) ([]*pats.Flow, error) {
			if nuclei[i] == 0 {
				return nil, nil
			}
			g := pats.NewFlow(fmt.Sprint("tile", i, "/features"))
			pats.Add(g, features, i, pats.WithCost(pats.Cost{CPU: time.Millisecond}))
			return []*pats.Flow{g}, nil
		})
		h, err := m.Submit(ctx, f)
		if err != nil {
			panic(err)
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		if err := h.Wait(ctx); err != nil { // the tile and its features
			panic(err)
		}
	}
	if err := m.Close(); err != nil {
		panic(err)
	}
	r := m.Report()
	fmt.Println("measured:", measured)
	fmt.Printf("%d flows, %d spawned, at most %d at once\n", r.Flows, r.Spawned, r.PeakFlows)
	// Output:
	// measured: [false true true false true true]
	// 10 flows, 4 spawned, at most 2 at once
}
