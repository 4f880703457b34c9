package pathology

import (
	"context"
	"fmt"
	"sync"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"
)

// TileRunner runs single tiles of slides on one pats.Manager, each as a
// flow of its own: what a worker of a distributed run does with the tiles
// it is sent, the slide's regions in a storage every process reads
// (OpenSlide), its outputs written back there (read with ReadTileResult).
// Its methods may be called concurrently: the tiles' flows share the
// manager, as the stage instances of Run do.
type TileRunner struct {
	m   *pats.Manager
	ops map[string]*pats.Op[*tileJob]

	mu     sync.Mutex
	placed map[*tileJob]*TileReport // the tiles in progress, counting where their operations run
}

// TileReport is what TileRunner.Run found in a tile and where its
// operations ran.
type TileReport struct {
	// Nuclei is the number of nuclei found.
	Nuclei int
	// Spawned says whether the features flow was spawned (a dynamic run
	// that found nuclei).
	Spawned bool
	// CPU and GPU count the operation instances run on CPU cores and on
	// GPUs, by operation.
	CPU, GPU map[string]int
}

// NewTileRunner returns a runner of tiles on m, whose operations carry
// the speedup estimates speedups (nil: none, for a manager that learns
// them). The caller closes m when the runner is no longer used.
func NewTileRunner(m *pats.Manager, speedups map[string]float64) *TileRunner {
	r := &TileRunner{m: m, ops: map[string]*pats.Op[*tileJob]{}, placed: map[*tileJob]*TileReport{}}
	for opName, op := range kernelOps(speedups) {
		impls := map[device.Kind]pats.Impl[*tileJob]{}
		for kind, impl := range op.Impls {
			impls[kind] = func(ctx context.Context, dev device.Device, j *tileJob) error {
				r.record(j, opName, dev.Kind())
				return impl(ctx, dev, j)
			}
		}
		r.ops[opName] = &pats.Op[*tileJob]{Name: op.Name, Speedup: op.Speedup, Impls: impls}
	}
	return r
}

// record counts an operation of tile j run on a unit of kind k.
func (r *TileRunner) record(j *tileJob, op string, k device.Kind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.placed[j]
	if d == nil {
		return
	}
	if k == device.GPU {
		d.GPU[op]++
	} else {
		d.CPU[op]++
	}
}

// Run runs tile i of s: it builds the tile's region template on the
// slide's storage (its RGB read lazily from the input storage, its labels
// and feature rows committed to the output storage when its flow
// completes), runs the tile's flow (with dynamic, the segmentation,
// spawning the features if it found nuclei) with the costs of
// NewWorkload(s.Tiles(), s.Seed()), and outlines the nuclei into the
// slide's polygon set in the output storage, which must keep polygon sets
// (region.ObjectStorage).
func (r *TileRunner) Run(ctx context.Context, s *Slide, i int, dynamic bool) (TileReport, error) {
	rep, err := r.run(ctx, s, i, dynamic)
	if err != nil {
		return TileReport{}, fmt.Errorf("pathology: tile %d: %w", i, err)
	}
	return rep, nil
}

// run runs one tile; see Run.
func (r *TileRunner) run(ctx context.Context, s *Slide, i int, dynamic bool) (TileReport, error) {
	if i < 0 || i >= s.tiles {
		return TileReport{}, fmt.Errorf("no tile %d in a slide of %d", i, s.tiles)
	}
	objs, ok := s.out.(region.ObjectStorage)
	if !ok {
		return TileReport{}, fmt.Errorf("output storage %T keeps no polygon sets", s.out)
	}
	j, err := s.newTileJob(i, nil)
	if err != nil {
		return TileReport{}, err
	}
	w := NewWorkload(s.tiles, s.seed)
	tr := tileRun{specs: w.specs, ops: r.ops, cost: w.tileCost, bytes: w.bytes, dynamic: dynamic}
	f := tr.tileFlow(j, i)
	if err := f.Err(); err != nil {
		return TileReport{}, err
	}
	done := &TileReport{CPU: map[string]int{}, GPU: map[string]int{}}
	r.mu.Lock()
	r.placed[j] = done
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.placed, j)
		r.mu.Unlock()
	}()
	h, err := r.m.Submit(ctx, f)
	if err != nil {
		return TileReport{}, fmt.Errorf("submit the flow: %w", err)
	}
	if err := h.Wait(ctx); err != nil {
		h.Cancel()
		return TileReport{}, fmt.Errorf("flow: %w", err)
	}
	labels, err := j.u16["labels"].Data(ctx)
	if err != nil {
		return TileReport{}, fmt.Errorf("labels: %w", err)
	}
	if _, err := outlineTile(ctx, objs, nucleiBounds(s.cols, s.rows, s.size), s.Box(i), i, labels); err != nil {
		return TileReport{}, fmt.Errorf("nuclei outlines: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	done.Nuclei = j.nuclei
	done.Spawned = dynamic && j.nuclei > 0
	return *done, nil
}

// ReadTileResult reads the outputs that a TileRunner wrote for tile i of
// s, which found nuclei nuclei, from the slide's output storage: its
// nuclei polygons (those of the tile, out of the polygons intersecting
// its box) and its feature rows.
func ReadTileResult(ctx context.Context, s *Slide, i, nuclei int) (TileResult, error) {
	r, err := readTileOutputs(ctx, s, i, nuclei)
	if err != nil {
		return TileResult{}, fmt.Errorf("pathology: read tile %d: %w", i, err)
	}
	return r, nil
}

// readTileOutputs reads tile i's outputs; see ReadTileResult.
func readTileOutputs(ctx context.Context, s *Slide, i, nuclei int) (TileResult, error) {
	store, ok := s.out.(region.ObjectStorage)
	if !ok {
		return TileResult{}, fmt.Errorf("output storage %T keeps no polygon sets", s.out)
	}
	if i < 0 || i >= s.tiles {
		return TileResult{}, fmt.Errorf("no tile %d in a slide of %d", i, s.tiles)
	}
	b := s.Box(i)
	set, err := region.NewPolygonSet(nucleiID(), nucleiBounds(s.cols, s.rows, s.size), b)
	if err != nil {
		return TileResult{}, err
	}
	r := TileResult{index: i, nuclei: nuclei, outlines: set, feats: featureRows(0)}
	if nuclei == 0 {
		return r, nil // nothing was outlined or measured
	}
	stored, err := region.OpenPolygonSet(ctx, store, nucleiID(), b)
	if err != nil {
		return TileResult{}, fmt.Errorf("nuclei polygons: %w", err)
	}
	polys, err := stored.Polygons(ctx)
	if err != nil {
		return TileResult{}, fmt.Errorf("nuclei polygons: %w", err)
	}
	for _, p := range polys {
		if t, _ := nucleusLabel(p.ID); t == i {
			if err := set.Add(ctx, p); err != nil {
				return TileResult{}, err
			}
		}
	}
	var tables [][]float64
	rows := s.tileFeatures(i)
	for _, k := range []string{"featIntensity", "featGradient", "featMorph"} {
		f, err := region.OpenDense[float64](ctx, s.out, featIDs()[k], rows)
		if err != nil {
			return TileResult{}, fmt.Errorf("feature table %s: %w", k, err)
		}
		data, err := f.Data(ctx)
		if err != nil {
			return TileResult{}, fmt.Errorf("feature table %s: %w", k, err)
		}
		tables = append(tables, data)
	}
	r.feats = featureRows(nuclei, tables...)
	return r, nil
}
