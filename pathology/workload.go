package pathology

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/pats"
)

// Operation describes one operation of the synthetic tile pipeline, modelled on
// the segmentation and feature-computation stages of seed 001 (Fig. 1,
// Table I). The costs are for a reference 4K x 4K tile on one CPU core; the
// speedups are synthetic but keep the paper's pattern: the most expensive
// operations (reconstruction, pre-watershed, features) gain most from a GPU,
// the cheap irregular ones (area threshold, fill holes, labelling, opening)
// least.
type Operation struct {
	Name      string        // e.g. "RBCDetection"
	Stage     string        // "segmentation" or "features"
	CPU       time.Duration // time on one CPU core, reference tile
	Speedup   float64       // GPU vs CPU, compute only
	Irregular bool          // cost depends on the tile's content (nuclei density)
	Reads     []string      // data read
	Writes    string        // datum written
}

// Operations returns the operations in a valid sequential order.
func Operations() []Operation {
	ms := time.Millisecond
	return []Operation{
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

// DataBytes returns the size of each datum for a reference 4K x 4K tile:
// RGB bytes, 8-bit masks, 16-bit distance and label maps, small feature
// tables.
func DataBytes() map[string]int64 {
	const mib = 1 << 20
	return map[string]int64{
		"rgb": 48 * mib, "rbc": 16 * mib, "opened": 16 * mib, "candidates": 16 * mib,
		"area": 16 * mib, "filled": 16 * mib, "distance": 32 * mib, "watershed": 32 * mib,
		"labels": 32 * mib, "featIntensity": mib, "featGradient": mib, "featMorph": mib,
	}
}

// ReferenceMachine is the node of the experiments: like a Keeneland node of
// seed 001 (12 cores, 3 GPUs, one core per GPU manager thread left out),
// 9 CPU cores and 3 GPUs, host-GPU transfers at 5 GB/s (PCIe 2.0 x16 as
// measured in practice) with 20 µs per transfer.
func ReferenceMachine() pats.Machine {
	return pats.Machine{CPUs: 9, GPUs: 3, Bandwidth: 5e9, Latency: 20 * time.Microsecond}
}

// Workload is the modelled workload of a slide: the operations of
// Pipeline on a number of 4K x 4K tiles, each operation instance with its
// own cost (irregular operations scale with the tile's nuclei density,
// 0.6 to 1.4; GPU times scatter +-10%), deterministic in the seed. Its
// flows run in the simulator (pats.Simulate) or on a pats.Manager.
type Workload struct {
	specs []Operation
	bytes map[string]int64
	tiles int
	seed  uint64
}

// NewWorkload returns the workload of tiles tiles whose costs vary with
// seed.
func NewWorkload(tiles int, seed uint64) *Workload {
	return &Workload{specs: Operations(), bytes: DataBytes(), tiles: tiles, seed: seed}
}

// tileCost returns the modelled cost of operation o on tile i: irregular
// operations scale with the tile's nuclei density (0.6 to 1.4), and the GPU
// time varies by +-10% around cpu/speedup, so measured speedups scatter a
// little, as real ones do.
func (w *Workload) tileCost(i int, o Operation) pats.Cost {
	r := rand.New(rand.NewPCG(w.seed, uint64(i)))
	density := 0.6 + 0.8*r.Float64()
	for range len(o.Name) { // decorrelate operations of one tile
		r.Float64()
	}
	jitter := 0.9 + 0.2*r.Float64()
	cpu := float64(o.CPU)
	if o.Irregular {
		cpu *= density
	}
	return pats.Cost{CPU: time.Duration(cpu), GPU: time.Duration(cpu / o.Speedup * jitter)}
}

// TrueSpeedups returns mean CPU time / mean GPU time of each operation over
// the tiles: the speedups a perfect estimator would report.
func (w *Workload) TrueSpeedups() map[string]float64 {
	out := map[string]float64{}
	for _, o := range w.specs {
		var c, g float64
		for i := range w.tiles {
			k := w.tileCost(i, o)
			c += float64(k.CPU)
			g += float64(k.GPU)
		}
		out[o.Name] = c / g
	}
	return out
}

// noop is the implementation used in simulations, where nothing runs.
func noop(context.Context, device.Device, int) error { return nil }

// simOps returns one hybrid operation per spec with the given speedup
// estimates (a missing estimate means unknown: 0).
func (w *Workload) simOps(est map[string]float64) map[string]*pats.Op[int] {
	ops := map[string]*pats.Op[int]{}
	for _, o := range w.specs {
		ops[o.Name] = &pats.Op[int]{
			Name:    o.Name,
			Speedup: est[o.Name],
			Impls:   map[device.Kind]pats.Impl[int]{device.CPU: noop, device.GPU: noop},
		}
	}
	return ops
}

// Flows returns one flow per tile, the pipeline expanded into its
// fine-grained operations, each with its modelled cost; the operations
// carry the speedup estimates est by name (nil: none, for a scheduler
// that learns them). The operations do nothing: the flows are for the
// simulator or for simulated units, which emulate the costs.
func (w *Workload) Flows(est map[string]float64) []*pats.Flow {
	ops := w.simOps(est)
	fs := make([]*pats.Flow, w.tiles)
	for i := range fs {
		fs[i] = pats.NewFlow(fmt.Sprintf("tile%03d", i))
		w.addSteps(fs[i], ops, i, "")
	}
	return fs
}

// DynamicFlows returns one segmentation flow per tile that spawns, when it
// completes, the tile's features flow: the pipeline as a stage created at
// run time. In the model every tile has nuclei, so every tile spawns.
func (w *Workload) DynamicFlows(est map[string]float64) []*pats.Flow {
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
func (w *Workload) addSteps(f *pats.Flow, ops map[string]*pats.Op[int], i int, stage string) {
	for _, o := range w.specs {
		if stage != "" && o.Stage != stage {
			continue
		}
		var reads []pats.Data
		for _, k := range o.Reads {
			reads = append(reads, pats.Data{Key: k, Bytes: w.bytes[k]})
		}
		pats.Add(f, ops[o.Name], i, pats.Reads(reads...),
			pats.Writes(pats.Data{Key: o.Writes, Bytes: w.bytes[o.Writes]}),
			pats.WithCost(w.tileCost(i, o)))
	}
}

// Monolithic returns one flow per tile holding a single operation that does
// the whole pipeline (the "non-pipelined" version of seed 001): it reads the
// RGB tile and writes the labels and features; its speedup is the tile's
// total CPU time over its total GPU time.
func (w *Workload) Monolithic(withEstimates bool) []*pats.Flow {
	var c, g float64
	for _, o := range w.specs {
		c += float64(o.CPU)
		g += float64(o.CPU) / o.Speedup
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

// GivenSpeedups returns the speedups of Pipeline by operation name, as
// estimates (the paper's "speedups measured offline").
func (w *Workload) GivenSpeedups() map[string]float64 {
	out := map[string]float64{}
	for _, o := range w.specs {
		out[o.Name] = o.Speedup
	}
	return out
}

// OpNames returns the operation names in pipeline order.
func (w *Workload) OpNames() []string {
	var out []string
	for _, o := range w.specs {
		out = append(out, o.Name)
	}
	return out
}

// SortedBySpeedup returns the names ordered by increasing given speedup.
func (w *Workload) SortedBySpeedup() []string {
	names := w.OpNames()
	sp := w.GivenSpeedups()
	sort.SliceStable(names, func(i, j int) bool { return sp[names[i]] < sp[names[j]] })
	return names
}
