package pathology_test

import (
	"context"
	"fmt"
	"io"
	"log"

	"github.com/gohtgs/htgs/pathology"
	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"
)

// A slide of four tiles of 64 x 64 pixels, processed on simulated units
// of the reference machine (9 CPU cores and 3 GPUs, a modelled second
// taking a millisecond) under PATS: the nuclei found do not depend on
// the schedule. The nuclei are polygons in the output storage.
func ExampleRun() {
	ctx := context.Background()
	s, err := pathology.NewSlide(ctx, 4, 64, 1, region.NewMemory(), region.NewMemory())
	if err != nil {
		log.Fatal(err)
	}
	w := pathology.NewWorkload(s.Tiles(), s.Seed())
	res, err := pathology.Run(ctx, s, w, pathology.RunOptions{
		Config:   pats.Config{Policy: pats.PATS, Window: 2},
		Units:    pathology.ReferenceMachine().Units(0.001),
		Speedups: w.GivenSpeedups(),
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range res.Tiles {
		fmt.Printf("tile %d: %d nuclei\n", t.Tile(), t.Nuclei())
	}
	fmt.Printf("%d flows, %d failed\n", res.Report.Flows, res.Report.Failed)
	// A ROI query on the nuclei polygons the run stored.
	polys, err := s.NucleiInBox(ctx, region.Rect(0, 0, 32, 32))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d nuclei intersect the box (0,0)-(32,32)\n", len(polys))
	// Output:
	// tile 0: 4 nuclei
	// tile 1: 4 nuclei
	// tile 2: 5 nuclei
	// tile 3: 4 nuclei
	// 4 flows, 0 failed
	// 2 nuclei intersect the box (0,0)-(32,32)
}

// The modelled workload in the simulator: PATS against FCFS on the
// reference machine, 60 tiles, 24 in progress at a time.
func ExampleWorkload() {
	w := pathology.NewWorkload(60, 1)
	for _, p := range []pats.Policy{pats.FCFS, pats.PATS} {
		r, err := pats.Simulate(pats.Config{Policy: p, Window: 24}, pathology.ReferenceMachine(), w.Flows(w.GivenSpeedups()))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %.2f tiles/s\n", p, 60/r.Makespan.Seconds())
	}
	// Output:
	// fcfs: 4.15 tiles/s
	// pats: 6.19 tiles/s
}

// A hardware experiment with host memory posing as one GPU (HostGPUs; on
// a machine with CUDA GPUs and a -tags cuda build, CUDAGPUs), on small
// tiles, FCFS then PATS with locality and prefetch.
func ExampleHardware() {
	gpus := pathology.HostGPUs(1)
	defer gpus.Close()
	h := pathology.Hardware{CPUs: 2, GPUs: gpus, Tiles: 4, TileSize: 32, Window: 6, Seed: 1, Configs: []string{"fcfs", "dl"}}
	res, err := h.Run(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	if err := res.Err(); err != nil {
		log.Fatal(err)
	}
	if err := res.WriteMarkdown(io.Discard, "ExampleHardware"); err != nil { // the tables of docs/pats/hardware.md
		log.Fatal(err)
	}
	fmt.Println("every GPU output equals the CPU's; every configuration found the same nuclei")
	// Output: every GPU output equals the CPU's; every configuration found the same nuclei
}
