package pats_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"
)

// A hybrid operation over a tile: the same kernel serves as the CPU and the
// GPU implementation here; a real GPU implementation would launch a kernel
// on dev.
func hybridOp(name string, speedup float64, kernel func(t *tile)) *pats.Op[*tile] {
	impl := func(_ context.Context, _ device.Device, t *tile) error {
		kernel(t)
		return nil
	}
	return &pats.Op[*tile]{Name: name, Speedup: speedup, Impls: map[device.Kind]pats.Impl[*tile]{device.CPU: impl, device.GPU: impl}}
}

type tile struct {
	pixels []int
	mask   []bool
	count  int
}

// Each tile expands into two operations; the manager runs them on two CPU
// cores and a simulated GPU, with the PATS policy.
func ExampleManager() {
	threshold := hybridOp("threshold", 2, func(t *tile) {
		t.mask = make([]bool, len(t.pixels))
		for i, p := range t.pixels {
			t.mask[i] = p > 5
		}
	})
	count := hybridOp("count", 10, func(t *tile) {
		for _, m := range t.mask {
			if m {
				t.count++
			}
		}
	})
	units := append(pats.CPUUnits(2), pats.Sim{Type: device.GPU})
	m, err := pats.Start(context.Background(), pats.Config{Policy: pats.PATS, Window: 4}, units...)
	if err != nil {
		panic(err)
	}
	tiles := []*tile{{pixels: []int{1, 7, 9}}, {pixels: []int{6, 6, 6, 0}}}
	var hs []*pats.Job
	for i, t := range tiles {
		f := pats.NewFlow(fmt.Sprint("tile", i))
		pats.Add(f, threshold, t, pats.Writes(pats.Data{Key: "mask", Bytes: 4}))
		pats.Add(f, count, t, pats.Reads(pats.Data{Key: "mask", Bytes: 4}))
		h, err := m.Submit(context.Background(), f)
		if err != nil {
			panic(err)
		}
		hs = append(hs, h)
	}
	for i, h := range hs {
		if err := h.Wait(context.Background()); err != nil {
			panic(err)
		}
		fmt.Printf("tile %d: %d bright pixels\n", i, tiles[i].count)
	}
	if err := m.Close(); err != nil {
		panic(err)
	}
	fmt.Println("flows completed:", m.Report().Flows)
	// Output:
	// tile 0: 2 bright pixels
	// tile 1: 3 bright pixels
	// flows completed: 2
}

// The simulator runs flows in virtual time. Here each flow has a cheap
// operation that hardly benefits from a GPU and an expensive one that
// benefits a lot: PATS sends the first to the CPU and the second to the
// GPU, FCFS whatever comes first.
func ExampleSimulate() {
	ms := time.Millisecond
	low := &pats.Op[int]{Name: "low", Speedup: 1.5, Impls: map[device.Kind]pats.Impl[int]{
		device.CPU: func(context.Context, device.Device, int) error { return nil },
		device.GPU: func(context.Context, device.Device, int) error { return nil },
	}}
	high := &pats.Op[int]{Name: "high", Speedup: 20, Impls: low.Impls}
	flows := func() []*pats.Flow {
		var fs []*pats.Flow
		for i := range 8 {
			f := pats.NewFlow(fmt.Sprint("tile", i))
			pats.Add(f, low, i, pats.WithCost(pats.Cost{CPU: 30 * ms, GPU: 20 * ms}))
			pats.Add(f, high, i, pats.WithCost(pats.Cost{CPU: 200 * ms, GPU: 10 * ms}))
			fs = append(fs, f)
		}
		return fs
	}
	machine := pats.Machine{CPUs: 2, GPUs: 1}
	for _, p := range []pats.Policy{pats.FCFS, pats.PATS} {
		r, err := pats.Simulate(pats.Config{Policy: p}, machine, flows())
		if err != nil {
			panic(err)
		}
		h, _ := r.Op("high")
		fmt.Printf("%s: %v, %d of 8 expensive operations on the GPU\n", p, r.Makespan, h.GPU)
	}
	// Output:
	// fcfs: 260ms, 6 of 8 expensive operations on the GPU
	// pats: 120ms, 8 of 8 expensive operations on the GPU
}

// A pats.Task in a task graph: each input (a tile number) is a stage
// instance expanded into a flow; three copies keep three tiles in progress
// on the shared manager.
func ExampleTask() {
	m, err := pats.Start(context.Background(), pats.Config{Policy: pats.PATS}, pats.CPUUnits(2)...)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	square := &pats.Op[*[2]int]{Name: "square", Impls: map[device.Kind]pats.Impl[*[2]int]{
		device.CPU: func(_ context.Context, _ device.Device, v *[2]int) error { v[1] = v[0] * v[0]; return nil },
	}}
	var results sync.Map // tile -> its data, shared by the task copies
	g := graph.New[int, int]("squares")
	node := pats.AddTask(g, "stage", 3, &pats.Task[int, int]{
		Manager: m,
		Expand: func(_ context.Context, n int) (*pats.Flow, error) {
			f := pats.NewFlow(fmt.Sprint("n", n))
			v := &[2]int{n, 0}
			pats.Add(f, square, v)
			results.Store(n, v)
			return f, nil
		},
		Result: func(_ context.Context, n int) (int, error) {
			v, _ := results.Load(n)
			return v.(*[2]int)[1], nil
		},
	})
	graph.Connect(g.Input(), node)
	graph.Connect(node, g.Output())
	var out []int
	err = g.Run(context.Background(), slices.Values([]int{1, 2, 3, 4}), func(v int) error {
		out = append(out, v)
		return nil
	})
	slices.Sort(out)
	fmt.Println(out, err)
	// Output: [1 4 9 16] <nil>
}

// RegionData turns a data region into a datum of a flow: the manager stages
// (reads) it before its first reader and commits (writes) regions the flow
// produces when the flow completes.
func ExampleRegionData() {
	ctx := context.Background()
	store := region.NewMemory()
	in, _ := region.NewDense[uint8](region.ID{Name: "slide::RGB"}, region.Rect(0, 0, 4, 2))
	data, _ := in.Data(ctx)
	copy(data, []uint8{1, 2, 3, 4, 5, 6, 7, 8})
	in.SetOutput(store)
	_ = in.Commit(ctx)

	// The stage instance reads the right half lazily and writes a mask.
	rgb, _ := region.BindDense[uint8](in.ID(), in.Bounds(), region.Rect(2, 0, 4, 2), store)
	mask, _ := region.NewDenseROI[uint8](region.ID{Name: "slide::Mask"}, in.Bounds(), region.Rect(2, 0, 4, 2))
	mask.SetOutput(store)
	op := &pats.Op[int]{Name: "double", Impls: map[device.Kind]pats.Impl[int]{device.CPU: func(ctx context.Context, _ device.Device, _ int) error {
		src, err := rgb.Data(ctx)
		if err != nil {
			return err
		}
		dst, _ := mask.Data(ctx)
		for i, v := range src {
			dst[i] = 2 * v
		}
		return nil
	}}}
	f := pats.NewFlow("tile")
	pats.Add(f, op, 0, pats.Reads(pats.RegionData(rgb)), pats.Writes(pats.RegionData(mask)))

	m, _ := pats.Start(ctx, pats.Config{}, pats.CPUUnits(1)...)
	h, _ := m.Submit(ctx, f)
	fmt.Println("flow:", h.Wait(ctx))
	_ = m.Close()

	stored, _ := region.OpenDense[uint8](ctx, store, mask.ID(), region.Box{})
	all, _ := stored.Data(ctx)
	fmt.Println("stored mask:", all)
	// Output:
	// flow: <nil>
	// stored mask: [0 0 6 8 0 0 14 16]
}
