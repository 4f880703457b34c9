package pats_test

import (
	"context"
	"fmt"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/pats"
)

// gpuForBig is a user-supplied scheduling policy: a GPU takes only
// operations whose modelled CPU cost is at least 100 ms, and leaves the rest
// to the CPU cores, which choose as PATS would.
type gpuForBig struct{}

func (gpuForBig) Choose(u device.Unit, ready []device.Candidate) int {
	if u.Device.Kind() == device.GPU {
		for i, c := range ready {
			if c.CPUTime >= 100*time.Millisecond {
				return i
			}
		}
		return -1
	}
	return pats.PATS.Choose(u, ready)
}

func (gpuForBig) String() string { return "gpu-for-big" }

// A custom policy replaces the built-in one through Config.Chooser. Here it
// keeps the GPU for the long operations, which PATS, ranking by speedup,
// does not; on this workload that costs time.
func ExampleConfig_chooser() {
	ms := time.Millisecond
	nop := func(context.Context, device.Device, int) error { return nil }
	impls := map[device.Kind]pats.Impl[int]{device.CPU: nop, device.GPU: nop}
	small := &pats.Op[int]{Name: "small", Speedup: 30, Impls: impls}
	big := &pats.Op[int]{Name: "big", Speedup: 5, Impls: impls}
	flows := func() []*pats.Flow {
		var fs []*pats.Flow
		for i := range 6 {
			f := pats.NewFlow(fmt.Sprint("tile", i))
			pats.Add(f, small, i, pats.WithCost(pats.Cost{CPU: 30 * ms, GPU: 1 * ms}))
			pats.Add(f, big, i, pats.WithCost(pats.Cost{CPU: 200 * ms, GPU: 40 * ms}))
			fs = append(fs, f)
		}
		return fs
	}
	machine := pats.Machine{CPUs: 2, GPUs: 1}
	for _, cfg := range []pats.Config{{Policy: pats.PATS}, {Chooser: gpuForBig{}}} {
		r, err := pats.Simulate(cfg, machine, flows())
		if err != nil {
			panic(err)
		}
		s, _ := r.Op("small")
		b, _ := r.Op("big")
		fmt.Printf("%s: %v; on the GPU: %d small, %d big\n", r.Config, r.Makespan, s.GPU, b.GPU)
	}
	// Output:
	// pats: 200ms; on the GPU: 6 small, 4 big
	// gpu-for-big: 290ms; on the GPU: 0 small, 4 big
}
