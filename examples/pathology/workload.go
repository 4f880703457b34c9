package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/pats"
)

// opSpec describes one operation of the synthetic tile pipeline, modelled on
// the segmentation and feature-computation stages of seed 001 (Fig. 1,
// Table I). The costs are for a reference 4K x 4K tile on one CPU core; the
// speedups are synthetic but keep the paper's pattern: the most expensive
// operations (reconstruction, pre-watershed, features) gain most from a GPU,
// the cheap irregular ones (area threshold, fill holes, labelling, opening)
// least.
type opSpec struct {
	name      string
	stage     string        // "segmentation" or "features"
	cpu       time.Duration // time on one CPU core, reference tile
	speedup   float64       // GPU vs CPU, compute only
	irregular bool          // cost depends on the tile's content (nuclei density)
	reads     []string      // data read
	writes    string        // datum written
}

// pipeline returns the operations in a valid sequential order.
func pipeline() []opSpec {
	ms := time.Millisecond
	return []opSpec{
		{"RBCDetection", "segmentation", 400 * ms, 9, false, []string{"rgb"}, "rbc"},
		{"MorphOpen", "segmentation", 300 * ms, 2.5, false, []string{"rgb"}, "opened"},
		{"ReconToNuclei", "segmentation", 900 * ms, 12, true, []string{"opened", "rbc"}, "candidates"},
		{"AreaThreshold", "segmentation", 150 * ms, 1.5, true, []string{"candidates"}, "area"},
		{"FillHoles", "segmentation", 400 * ms, 2, true, []string{"area"}, "filled"},
		{"PreWatershed", "segmentation", 1200 * ms, 14, true, []string{"filled"}, "distance"},
		{"Watershed", "segmentation", 700 * ms, 10, true, []string{"distance", "filled"}, "watershed"},
		{"BWLabel", "segmentation", 250 * ms, 2, true, []string{"watershed"}, "labels"},
		{"FeatIntensity", "features", 500 * ms, 16, true, []string{"rgb", "labels"}, "featIntensity"},
		{"FeatGradient", "features", 800 * ms, 20, true, []string{"rgb", "labels"}, "featGradient"},
		{"FeatMorphometry", "features", 400 * ms, 12, true, []string{"labels"}, "featMorph"},
	}
}

// dataBytes returns the size of each datum for a reference 4K x 4K tile:
// RGB bytes, 8-bit masks, 16-bit distance and label maps, small feature
// tables.
func dataBytes() map[string]int64 {
	const mib = 1 << 20
	return map[string]int64{
		"rgb": 48 * mib, "rbc": 16 * mib, "opened": 16 * mib, "candidates": 16 * mib,
		"area": 16 * mib, "filled": 16 * mib, "distance": 32 * mib, "watershed": 32 * mib,
		"labels": 32 * mib, "featIntensity": mib, "featGradient": mib, "featMorph": mib,
	}
}

// referenceMachine is the node of the experiments: like a Keeneland node of
// seed 001 (12 cores, 3 GPUs, one core per GPU manager thread left out),
// 9 CPU cores and 3 GPUs, host-GPU transfers at 5 GB/s (PCIe 2.0 x16 as
// measured in practice) with 20 µs per transfer.
func referenceMachine() pats.Machine {
	return pats.Machine{CPUs: 9, GPUs: 3, Bandwidth: 5e9, Latency: 20 * time.Microsecond}
}

// workload is a set of tiles with per-tile cost variation.
type workload struct {
	specs []opSpec
	bytes map[string]int64
	tiles int
	seed  uint64
}

func newWorkload(tiles int, seed uint64) *workload {
	return &workload{specs: pipeline(), bytes: dataBytes(), tiles: tiles, seed: seed}
}

// tileCost returns the modelled cost of operation o on tile i: irregular
// operations scale with the tile's nuclei density (0.6 to 1.4), and the GPU
// time varies by +-10% around cpu/speedup, so measured speedups scatter a
// little, as real ones do.
func (w *workload) tileCost(i int, o opSpec) pats.Cost {
	r := rand.New(rand.NewPCG(w.seed, uint64(i)))
	density := 0.6 + 0.8*r.Float64()
	for range len(o.name) { // decorrelate operations of one tile
		r.Float64()
	}
	jitter := 0.9 + 0.2*r.Float64()
	cpu := float64(o.cpu)
	if o.irregular {
		cpu *= density
	}
	return pats.Cost{CPU: time.Duration(cpu), GPU: time.Duration(cpu / o.speedup * jitter)}
}

// trueSpeedups returns mean CPU time / mean GPU time of each operation over
// the tiles: the speedups a perfect estimator would report.
func (w *workload) trueSpeedups() map[string]float64 {
	out := map[string]float64{}
	for _, o := range w.specs {
		var c, g float64
		for i := range w.tiles {
			k := w.tileCost(i, o)
			c += float64(k.CPU)
			g += float64(k.GPU)
		}
		out[o.name] = c / g
	}
	return out
}

// noop is the implementation used in simulations, where nothing runs.
func noop(context.Context, device.Device, int) error { return nil }

// simOps returns one hybrid operation per spec with the given speedup
// estimates (a missing estimate means unknown: 0).
func (w *workload) simOps(est map[string]float64) map[string]*pats.Op[int] {
	ops := map[string]*pats.Op[int]{}
	for _, o := range w.specs {
		ops[o.name] = &pats.Op[int]{
			Name:    o.name,
			Speedup: est[o.name],
			Impls:   map[device.Kind]pats.Impl[int]{device.CPU: noop, device.GPU: noop},
		}
	}
	return ops
}

// flows returns one flow per tile, the pipeline expanded into its
// fine-grained operations.
func (w *workload) flows(est map[string]float64) []*pats.Flow {
	ops := w.simOps(est)
	fs := make([]*pats.Flow, w.tiles)
	for i := range fs {
		fs[i] = pats.NewFlow(fmt.Sprintf("tile%03d", i))
		w.addSteps(fs[i], ops, i, "")
	}
	return fs
}

// dynamicFlows returns one segmentation flow per tile that spawns, when it
// completes, the tile's features flow: the pipeline as a stage created at
// run time. In the model every tile has nuclei, so every tile spawns.
func (w *workload) dynamicFlows(est map[string]float64) []*pats.Flow {
	ops := w.simOps(est)
	fs := make([]*pats.Flow, w.tiles)
	for i := range fs {
		f := pats.NewFlow(fmt.Sprintf("tile%03d", i))
		w.addSteps(f, ops, i, "segmentation")
		f.Spawn(func(context.Context) ([]*pats.Flow, error) {
			g := pats.NewFlow(fmt.Sprintf("tile%03d/features", i))
			w.addSteps(g, ops, i, "features")
			return []*pats.Flow{g}, nil
		})
		fs[i] = f
	}
	return fs
}

// addSteps adds to f tile i's operations of stage ("" for every stage),
// with their reads, writes and modelled costs.
func (w *workload) addSteps(f *pats.Flow, ops map[string]*pats.Op[int], i int, stage string) {
	for _, o := range w.specs {
		if stage != "" && o.stage != stage {
			continue
		}
		var reads []pats.Data
		for _, k := range o.reads {
			reads = append(reads, pats.Data{Key: k, Bytes: w.bytes[k]})
		}
		pats.Add(f, ops[o.name], i, pats.Reads(reads...),
			pats.Writes(pats.Data{Key: o.writes, Bytes: w.bytes[o.writes]}),
			pats.WithCost(w.tileCost(i, o)))
	}
}

// monolithic returns one flow per tile holding a single operation that does
// the whole pipeline (the "non-pipelined" version of seed 001): it reads the
// RGB tile and writes the labels and features; its speedup is the tile's
// total CPU time over its total GPU time.
func (w *workload) monolithic(withEstimates bool) []*pats.Flow {
	var c, g float64
	for _, o := range w.specs {
		c += float64(o.cpu)
		g += float64(o.cpu) / o.speedup
	}
	est := 0.0
	if withEstimates {
		est = c / g
	}
	op := &pats.Op[int]{Name: "WholeTile", Speedup: est, Impls: map[device.Kind]pats.Impl[int]{device.CPU: noop, device.GPU: noop}}
	fs := make([]*pats.Flow, w.tiles)
	for i := range fs {
		var cost pats.Cost
		for _, o := range w.specs {
			k := w.tileCost(i, o)
			cost.CPU += k.CPU
			cost.GPU += k.GPU
		}
		f := pats.NewFlow(fmt.Sprintf("tile%03d", i))
		pats.Add(f, op, i,
			pats.Reads(pats.Data{Key: "rgb", Bytes: w.bytes["rgb"]}),
			pats.Writes(pats.Data{Key: "labels", Bytes: w.bytes["labels"]}, pats.Data{Key: "features", Bytes: 3 * w.bytes["featMorph"]}),
			pats.WithCost(cost))
		fs[i] = f
	}
	return fs
}

// givenSpeedups returns the estimates of the specs (the paper's "speedups
// measured offline").
func (w *workload) givenSpeedups() map[string]float64 {
	out := map[string]float64{}
	for _, o := range w.specs {
		out[o.name] = o.speedup
	}
	return out
}

// opNames returns the operation names in pipeline order.
func (w *workload) opNames() []string {
	var out []string
	for _, o := range w.specs {
		out = append(out, o.name)
	}
	return out
}

// sortedBySpeedup returns the names ordered by increasing given speedup.
func (w *workload) sortedBySpeedup() []string {
	names := w.opNames()
	sp := w.givenSpeedups()
	sort.SliceStable(names, func(i, j int) bool { return sp[names[i]] < sp[names[j]] })
	return names
}
