package pathology

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"
	"github.com/gohtgs/htgs/task"
)

// Slide is the input of a real run: a synthetic slide of square tiles
// stored in a region storage (the region slide::RGB), and the storage the
// outputs go to.
type Slide struct {
	tiles, cols, rows, size int
	seed                    uint64
	in, out                 region.Storage
}

// Identifiers of the slide-wide regions. Each tile's stage instance binds
// them with its tile as region of interest: it reads and writes only its
// partition.
func rgbID() region.ID    { return region.ID{Name: "slide::RGB", Type: region.Dense3D} }
func labelsID() region.ID { return region.ID{Name: "slide::Labels", Type: region.Dense2D} }

// featIDs maps the feature data keys to their regions.
func featIDs() map[string]region.ID {
	return map[string]region.ID{
		"featIntensity": {Name: "slide::FeatIntensity", Type: region.Dense2D},
		"featGradient":  {Name: "slide::FeatGradient", Type: region.Dense2D},
		"featMorph":     {Name: "slide::FeatMorphometry", Type: region.Dense2D},
	}
}

// NewSlide generates a slide of tiles tiles of size x size RGB pixels
// from seed (each tile from its own seed, in parallel), on a grid as
// square as possible, and writes them to in; the outputs of a Run go to
// out.
func NewSlide(ctx context.Context, tiles, size int, seed uint64, in, out region.Storage) (*Slide, error) {
	s := OpenSlide(tiles, size, seed, in, out)
	meta := region.Meta{ID: rgbID(), Elem: region.Uint8, Bounds: region.Cube(0, 0, 0, s.cols*size, s.rows*size, 3)}
	// Tiles are generated in parallel (deterministically: each from its
	// own seed) and written as they are made.
	workers := min(tiles, runtime.GOMAXPROCS(0))
	next := make(chan int)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]uint8, 3*size*size)
			for i := range next {
				if errs[k] != nil {
					continue
				}
				genTile(buf, size, size, seed, i)
				b := s.Box(i)
				if err := in.Write(ctx, meta, region.Cube(b.Lo[0], b.Lo[1], 0, b.Hi[0], b.Hi[1], 3), buf); err != nil {
					errs[k] = fmt.Errorf("write tile %d: %w", i, err)
				}
			}
		}()
	}
	for i := range tiles {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// OpenSlide returns the slide of tiles tiles of size pixels on a grid
// as square as possible, in storage in, its outputs going to out; it
// generates nothing: the slide that NewSlide wrote into in, as another
// process sees it.
func OpenSlide(tiles, size int, seed uint64, in, out region.Storage) *Slide {
	cols := int(math.Ceil(math.Sqrt(float64(tiles))))
	return &Slide{tiles: tiles, cols: cols, rows: (tiles + cols - 1) / cols, size: size, seed: seed, in: in, out: out}
}

// Box returns tile i's 2-D box in slide pixels.
func (s *Slide) Box(i int) region.Box {
	x, y := (i%s.cols)*s.size, (i/s.cols)*s.size
	return region.Rect(x, y, x+s.size, y+s.size)
}

// tileJob is one stage instance: a tile and its region template.
type tileJob struct {
	index, w, h int
	tpl         *region.Template
	rgb         *region.Dense[uint8]
	u8          map[string]*region.Dense[uint8]
	u16         map[string]*region.Dense[uint16]
	feats       map[string]*region.Dense[float64]
	nuclei      int         // BWLabel's count on a CPU core
	gpuLabels   atomic.Bool // BWLabel ran on a GPU: the count is the labels' largest
	dev         tileDevice  // its data in accelerator memory (real GPUs only)
	host        hostAllocator
	held        [][]byte // the host memory of its regions, from host
	// onStore, when set, is told the span of each staging of the RGB
	// from storage and of each commit of an output to storage through the
	// tile's pats data (a hardware run's trace): what is "stage" or
	// "commit", key the datum.
	onStore func(tile int, what, key string, start, end time.Time)
}

// timedStore stages and commits a tile's datum key as its region r does
// and tells the tile's onStore the span of each.
type timedStore struct {
	r   region.Region
	j   *tileJob
	key string
}

func (t timedStore) Stage(ctx context.Context) error {
	t0 := time.Now()
	err := t.r.Stage(ctx)
	t.j.onStore(t.j.index, "stage", t.key, t0, time.Now())
	return err
}

func (t timedStore) Commit(ctx context.Context) error {
	t0 := time.Now()
	err := t.r.Commit(ctx)
	t.j.onStore(t.j.index, "commit", t.key, t0, time.Now())
	return err
}

// newTileJob builds tile i's region template: the RGB input bound lazily to
// the slide storage with the tile as ROI, in-memory intermediates, and the
// labels and feature outputs bound to the output storage. With a non-nil
// host, the image regions (the RGB, the masks, maps and labels; not the
// small feature tables) live in host's memory while it has some to give:
// the transfers of a CUDA GPU then copy them without staging.
func (s *Slide) newTileJob(i int, host hostAllocator) (*tileJob, error) {
	b := s.Box(i)
	tpl, err := region.NewTemplate(tileName(i))
	if err != nil {
		return nil, err
	}
	j := &tileJob{index: i, w: s.size, h: s.size, tpl: tpl, host: host,
		u8: map[string]*region.Dense[uint8]{}, u16: map[string]*region.Dense[uint16]{}, feats: map[string]*region.Dense[float64]{}}
	bounds := region.Cube(0, 0, 0, s.cols*s.size, s.rows*s.size, 3)
	rgbROI := region.Cube(b.Lo[0], b.Lo[1], 0, b.Hi[0], b.Hi[1], 3)
	if m := j.memory(int64(rgbROI.Len()), false); m != nil { // staging fills it
		j.rgb, err = region.BindDenseIn(rgbID(), bounds, rgbROI, s.in, m)
	} else {
		j.rgb, err = region.BindDense[uint8](rgbID(), bounds, rgbROI, s.in)
	}
	if err != nil {
		j.release(true)
		return nil, err
	}
	if err := s.addRegions(j, b); err != nil {
		j.release(true)
		return nil, err
	}
	return j, nil
}

// nucleiCount returns the number of nuclei BWLabel found: its count on a
// CPU core, or where it ran on a GPU the largest label (the same number:
// the labels are 1, 2, ..., 65535 at most, as bwLabel's count), read once
// the labels are on the host (the tile's flow has committed them).
func (j *tileJob) nucleiCount(ctx context.Context) (int, error) {
	if !j.gpuLabels.Load() {
		return j.nuclei, nil
	}
	d, err := j.u16["labels"].Data(ctx)
	if err != nil {
		return 0, fmt.Errorf("tile %d: the labels: %w", j.index, err)
	}
	n := 0
	for _, v := range d {
		n = max(n, int(v))
	}
	return n, nil
}

// memory returns n bytes of the job's host memory, zeroed if zero, or
// nil if it has none.
func (j *tileJob) memory(n int64, zero bool) []byte {
	if j.host == nil {
		return nil
	}
	m, ok := j.host.hostBuffer(n)
	if !ok {
		return nil
	}
	j.held = append(j.held, m)
	if zero {
		clear(m)
	}
	return m
}

// newDense returns the in-memory region id over roi of bounds, in the
// job's host memory if it has some.
func newDense[T uint8 | uint16 | float64](j *tileJob, id region.ID, bounds, roi region.Box) (*region.Dense[T], error) {
	var z T
	if m := j.memory(int64(roi.Len())*int64(unsafe.Sizeof(z)), true); m != nil {
		return region.NewDenseIn(id, bounds, roi, view[T](m))
	}
	return region.NewDenseROI[T](id, bounds, roi)
}

// release gives the tile's device buffers back to their accelerators,
// and with reuse its host memory to its pool; without, the memory is
// left out of the pool (a failed run's operations may still hold it).
func (j *tileJob) release(reuse bool) {
	j.dev.release()
	if reuse {
		for _, m := range j.held {
			j.host.putHost(m)
		}
	}
	j.held = nil
}

// addRegions adds to j its RGB and the regions of its tile box b.
func (s *Slide) addRegions(j *tileJob, b region.Box) error {
	tpl, i := j.tpl, j.index
	add := func(r region.Region, err error) error {
		if err != nil {
			return err
		}
		return tpl.Insert(r)
	}
	if err := add(j.rgb, nil); err != nil {
		return err
	}
	for _, k := range []string{"rbc", "opened", "candidates", "area", "filled"} {
		r, err := newDense[uint8](j, region.ID{Name: "tile::" + k}, b, b)
		j.u8[k] = r
		if err := add(r, err); err != nil {
			return err
		}
	}
	for _, k := range []string{"distance", "watershed"} {
		r, err := newDense[uint16](j, region.ID{Name: "tile::" + k}, b, b)
		j.u16[k] = r
		if err := add(r, err); err != nil {
			return err
		}
	}
	labels, err := newDense[uint16](j, labelsID(), region.Rect(0, 0, s.cols*s.size, s.rows*s.size), b)
	if err := add(labels, err); err != nil {
		return err
	}
	labels.SetOutput(s.out)
	j.u16["labels"] = labels
	for k, id := range featIDs() {
		// In the host memory too: a feature table in Go memory came down
		// from the H200 at 4 GB/s, 0.8 ms a table (GPU call of
		// 2026-11-27 14:13Z), against 40 GB/s into page-locked memory.
		f, err := newDense[float64](j, id, s.featureBounds(), s.tileFeatures(i))
		if err := add(f, err); err != nil {
			return err
		}
		f.SetOutput(s.out)
		j.feats[k] = f
	}
	return nil
}

// featureBounds returns the bounds of the slide's feature tables: a row
// for every label a tile can hold (objectRows), tile after tile.
func (s *Slide) featureBounds() region.Box {
	return region.Rect(0, 0, numFeatures, objectRows(s.size)*s.tiles)
}

// tileFeatures returns tile i's rows of the feature tables.
func (s *Slide) tileFeatures(i int) region.Box {
	r := objectRows(s.size)
	return region.Rect(0, r*i, numFeatures, r*(i+1))
}

// data returns the pats datum for key k of the job: regions read from or
// written to storage carry themselves as Store, intermediates do not. The
// key names the tile too (see dataKey). The size is bytes[k], the modelled
// size of a 4K tile in simulated runs, so that modelled transfer times
// match the simulator's; with a nil bytes, the region's real size.
func (j *tileJob) data(k string, bytes map[string]int64) pats.Data {
	var r region.Region
	switch {
	case k == "rgb":
		r = j.rgb
	case j.u8[k] != nil:
		r = j.u8[k]
	case j.u16[k] != nil:
		r = j.u16[k]
	default:
		r = j.feats[k]
	}
	d := pats.Data{Key: dataKey(j.tpl.Name(), k), Bytes: r.Bytes()}
	if k == "rgb" || committed(k) {
		d.Store = r
		if j.onStore != nil {
			d.Store = timedStore{r, j, k}
		}
	}
	if bytes != nil {
		d.Bytes = bytes[k]
	}
	return d
}

// kernelOps returns the pipeline's operations with real implementations;
// the CPU and the (simulated) GPU implementation run the same kernel.
func kernelOps(est map[string]float64) map[string]*pats.Op[*tileJob] {
	u8 := func(ctx context.Context, r *region.Dense[uint8]) []uint8 {
		d, err := r.Data(ctx)
		if err != nil {
			panic(err) // in-memory regions never fail
		}
		return d
	}
	u16 := func(ctx context.Context, r *region.Dense[uint16]) []uint16 {
		d, err := r.Data(ctx)
		if err != nil {
			panic(err)
		}
		return d
	}
	f64 := func(ctx context.Context, r *region.Dense[float64]) []float64 {
		d, err := r.Data(ctx)
		if err != nil {
			panic(err)
		}
		return d
	}
	rgb := func(ctx context.Context, j *tileJob) ([]uint8, error) { return j.rgb.Data(ctx) }
	kernels := map[string]func(ctx context.Context, j *tileJob) error{
		"RBCDetection": func(ctx context.Context, j *tileJob) error {
			in, err := rgb(ctx, j)
			if err == nil {
				rbcDetect(in, u8(ctx, j.u8["rbc"]), j.w, j.h)
			}
			return err
		},
		"MorphOpen": func(ctx context.Context, j *tileJob) error {
			in, err := rgb(ctx, j)
			if err == nil {
				morphOpen(in, u8(ctx, j.u8["opened"]), j.w, j.h)
			}
			return err
		},
		"ReconToNuclei": func(ctx context.Context, j *tileJob) error {
			in, err := rgb(ctx, j) // the darkness the opening is reconstructed under
			if err == nil {
				reconToNuclei(in, u8(ctx, j.u8["opened"]), u8(ctx, j.u8["rbc"]), u8(ctx, j.u8["candidates"]), j.w, j.h)
			}
			return err
		},
		"AreaThreshold": func(ctx context.Context, j *tileJob) error {
			areaThreshold(u8(ctx, j.u8["candidates"]), u8(ctx, j.u8["area"]), j.w, j.h)
			return nil
		},
		"FillHoles": func(ctx context.Context, j *tileJob) error {
			fillHoles(u8(ctx, j.u8["area"]), u8(ctx, j.u8["filled"]), j.w, j.h)
			return nil
		},
		"PreWatershed": func(ctx context.Context, j *tileJob) error {
			preWatershed(u8(ctx, j.u8["filled"]), u16(ctx, j.u16["distance"]), j.w, j.h)
			return nil
		},
		"Watershed": func(ctx context.Context, j *tileJob) error {
			watershed(u16(ctx, j.u16["distance"]), u8(ctx, j.u8["filled"]), u16(ctx, j.u16["watershed"]), j.w, j.h)
			return nil
		},
		"BWLabel": func(ctx context.Context, j *tileJob) error {
			j.nuclei = bwLabel(u16(ctx, j.u16["watershed"]), u16(ctx, j.u16["labels"]), j.w, j.h)
			return nil
		},
		"FeatIntensity": func(ctx context.Context, j *tileJob) error {
			in, err := rgb(ctx, j)
			if err == nil {
				intensityFeatures(in, u16(ctx, j.u16["labels"]), f64(ctx, j.feats["featIntensity"]))
			}
			return err
		},
		"FeatGradient": func(ctx context.Context, j *tileJob) error {
			in, err := rgb(ctx, j)
			if err == nil {
				gradientFeatures(in, u16(ctx, j.u16["labels"]), f64(ctx, j.feats["featGradient"]), j.w, j.h)
			}
			return err
		},
		"FeatMorphometry": func(ctx context.Context, j *tileJob) error {
			morphometryFeatures(u16(ctx, j.u16["labels"]), f64(ctx, j.feats["featMorph"]), j.w, j.h)
			return nil
		},
	}
	ops := map[string]*pats.Op[*tileJob]{}
	for name, k := range kernels {
		impl := func(ctx context.Context, _ device.Device, j *tileJob) error { return k(ctx, j) }
		ops[name] = &pats.Op[*tileJob]{Name: name, Speedup: est[name], Impls: map[device.Kind]pats.Impl[*tileJob]{device.CPU: impl, device.GPU: impl}}
	}
	return ops
}

// TileResult is the output of one tile: its nuclei count and, when the run
// outlines the nuclei, their polygons (the tile's partition of
// slide::Nuclei) and feature rows, joined by tile.
type TileResult struct {
	index, nuclei int
	job           *tileJob               // the tile's regions, on the way to the outline and measure stages
	outlines      *region.PolygonSet     // the nuclei outlines
	feats         [][numFeatures]float64 // the feature rows of labels 1..
}

// runReal processes the slide through a task graph whose stage task expands
// each tile into the pipeline's operations, run by a pats.Manager on the
// given units. With dynamic, a tile's flow holds the segmentation only and
// spawns the features flow if it found nuclei (pats.Flow.Spawn). After
// the flows, the nuclei are outlined into the polygon set slide::Nuclei of
// the output storage and joined with their feature rows by tile (see
// addOutputs). It returns the per-tile results (in tile order), the
// manager's report and the graph's finished runtime (for a profile; start it
// with graph.WithTrace for a timeline).
func runReal(ctx context.Context, s *Slide, w *Workload, cfg pats.Config, units []pats.Unit, est map[string]float64, dynamic bool, opts ...graph.StartOption) ([]TileResult, *pats.Report, *graph.Execution, error) {
	objs, ok := s.out.(region.ObjectStorage)
	if !ok {
		return nil, nil, nil, fmt.Errorf("output storage %T keeps no polygon sets", s.out)
	}
	run := tileRun{specs: w.specs, ops: kernelOps(est), cost: w.tileCost, bytes: w.bytes, reg: &jobRegistry{}, dynamic: dynamic, nuclei: objs}
	return run.run(ctx, s, cfg, units, opts...)
}

// tileRun is what a real run needs besides the slide: the pipeline, its
// operations, the modelled cost of each instance and the modelled sizes
// of the data (nil: real sizes), and the registry of the tiles in
// progress that GPU units find their data in.
type tileRun struct {
	specs []Operation
	ops   map[string]*pats.Op[*tileJob]
	cost  func(tile int, o Operation) pats.Cost
	bytes map[string]int64
	reg   *jobRegistry
	// dynamic makes the features a stage created at run time: a flow the
	// segmentation flow spawns only when it found nuclei.
	dynamic bool
	// nuclei, when set, makes the graph outline each tile's nuclei into
	// the polygon set slide::Nuclei committed there and read its feature
	// rows, in two stages whose outputs are joined by tile
	// (bookkeeper.NewJoinN) into the tile's result.
	nuclei region.ObjectStorage
	// onStore, when set, is every tile job's onStore.
	onStore func(tile int, what, key string, start, end time.Time)
	// host, when set, holds the tiles' image regions (newTileJob).
	host hostAllocator
}

// addOps adds the instances of the pipeline's operations of the given
// stage ("" for all) for job j, tile i, to f.
func (tr tileRun) addOps(f *pats.Flow, j *tileJob, i int, stage string) {
	for _, o := range tr.specs {
		if stage != "" && o.Stage != stage {
			continue
		}
		var reads []pats.Data
		for _, k := range o.Reads {
			reads = append(reads, j.data(k, tr.bytes))
		}
		var cost pats.Cost
		if tr.cost != nil {
			cost = tr.cost(i, o)
		}
		pats.Add(f, tr.ops[o.Name], j, pats.Reads(reads...), pats.Writes(j.data(o.Writes, tr.bytes)), pats.WithCost(cost))
	}
}

// tileFlow returns the flow of job j, tile i: the whole pipeline, or with
// dynamic the segmentation, spawning the features if it found nuclei.
func (tr tileRun) tileFlow(j *tileJob, i int) *pats.Flow {
	f := pats.NewFlow(j.tpl.Name())
	if !tr.dynamic {
		tr.addOps(f, j, i, "")
		return f
	}
	tr.addOps(f, j, i, "segmentation")
	f.Spawn(func(ctx context.Context) ([]*pats.Flow, error) {
		if n, err := j.nucleiCount(ctx); err != nil || n == 0 {
			return nil, err // nothing to measure, or a failure
		}
		g := pats.NewFlow(j.tpl.Name() + "/features")
		tr.addOps(g, j, i, "features")
		return []*pats.Flow{g}, g.Err()
	})
	return f
}

// run processes the slide on units; see runReal.
func (tr tileRun) run(ctx context.Context, s *Slide, cfg pats.Config, units []pats.Unit, opts ...graph.StartOption) ([]TileResult, *pats.Report, *graph.Execution, error) {
	m, err := pats.Start(ctx, cfg, units...)
	if err != nil {
		return nil, nil, nil, err
	}
	defer func() {
		for _, j := range tr.reg.all() { // tiles of a failed run
			j.release(false)
		}
	}()
	stage := &pats.Task[int, TileResult]{
		Manager: m,
		Expand: func(_ context.Context, i int) (*pats.Flow, error) {
			j, err := s.newTileJob(i, tr.host)
			if err != nil {
				return nil, err
			}
			j.onStore = tr.onStore
			tr.reg.add(j)
			f := tr.tileFlow(j, i)
			return f, f.Err()
		},
		Result: func(ctx context.Context, i int) (TileResult, error) {
			j := tr.reg.remove(tileName(i))
			if j == nil {
				return TileResult{}, fmt.Errorf("tile %d: not in progress", i)
			}
			nuclei, err := j.nucleiCount(ctx)
			if tr.nuclei == nil {
				j.release(err == nil)
			} else {
				j.dev.release() // the result holds the job, and its regions
			}
			if err != nil {
				return TileResult{}, err
			}
			r := TileResult{index: i, nuclei: nuclei}
			if tr.nuclei != nil {
				r.job = j
			}
			return r, nil
		},
	}
	window := cfg.Window
	if window <= 0 {
		window = s.tiles
	}
	g := graph.New[int, TileResult]("pathology")
	seg := pats.AddTask(g, "tiles", window, stage)
	graph.Connect(g.Input(), seg)
	if tr.nuclei == nil {
		graph.Connect(seg, g.Output())
	} else {
		tr.addOutputs(g, s, seg)
	}
	results := make([]TileResult, s.tiles)
	var exec *graph.Execution
	opts = append(slices.Clip(opts), graph.WithStarted(func(e *graph.Execution) { exec = e }))
	runErr := g.Run(ctx, iterCount(s.tiles), func(r TileResult) error {
		results[r.index] = r
		return nil
	}, opts...)
	closeErr := m.Close()
	if runErr != nil {
		return nil, nil, nil, runErr
	}
	if closeErr != nil {
		return nil, nil, nil, closeErr
	}
	return results, m.Report(), exec, nil
}

// iterCount yields 0, 1, ..., n-1.
func iterCount(n int) iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}
}

// addOutputs adds the stages after the tiles' flows: outline (the label
// image's nuclei as polygons, committed to tr.nuclei) and measure (the
// feature rows), both fed every tile's result, and the keyed join of their
// parts by tile, whose results leave the graph.
func (tr tileRun) addOutputs(g *graph.Graph[int, TileResult], s *Slide, seg *graph.Node[int, TileResult]) {
	bounds := nucleiBounds(s.cols, s.rows, s.size)
	outline := graph.AddFunc(g, "outline", 2, func(ctx context.Context, r TileResult, out task.Emitter[tilePart]) error {
		labels, err := r.job.u16["labels"].Data(ctx)
		if err != nil {
			return err
		}
		set, err := outlineTile(ctx, tr.nuclei, bounds, s.Box(r.index), r.index, labels)
		if err != nil {
			return fmt.Errorf("tile %d: nuclei outlines: %w", r.index, err)
		}
		return out.Emit(tilePart{index: r.index, nuclei: r.nuclei, outlines: set})
	})
	measure := graph.AddFunc(g, "measure", 1, func(ctx context.Context, r TileResult, out task.Emitter[tilePart]) error {
		var tables [][]float64
		for _, k := range []string{"featIntensity", "featGradient", "featMorph"} {
			d, err := r.job.feats[k].Data(ctx)
			if err != nil {
				return err
			}
			tables = append(tables, d)
		}
		return out.Emit(tilePart{index: r.index, nuclei: r.nuclei, feats: featureRows(r.nuclei, tables...), isFeats: true})
	})
	bk := bookkeeper.New[tilePart](g, "tile outputs")
	joined := bookkeeper.AddRule(bk, "outlines and features", func() bookkeeper.Rule[tilePart, TileResult] { return newTileJoin() })
	graph.Connect(seg, outline)
	graph.Connect(seg, measure)
	graph.Connect(outline, bk)
	graph.Connect(measure, bk)
	graph.Connect(joined, g.Output())
}

// tileName is the name of tile i's region template and flow.
func tileName(i int) string { return fmt.Sprintf("tile%03d", i) }

// Tiles returns the number of tiles of the slide.
func (s *Slide) Tiles() int { return s.tiles }

// TileSize returns the edge of the slide's square tiles in pixels.
func (s *Slide) TileSize() int { return s.size }

// Seed returns the seed the slide's tiles were generated from.
func (s *Slide) Seed() uint64 { return s.seed }

// Tile returns the index of the tile in its slide.
func (r TileResult) Tile() int { return r.index }

// Nuclei returns the number of nuclei found in the tile.
func (r TileResult) Nuclei() int { return r.nuclei }

// RunOptions are the settings of Run.
type RunOptions struct {
	// Config is the scheduler's configuration.
	Config pats.Config
	// Units are the processing units the operations run on: simulated
	// ones (pats.Machine.Units) or real ones.
	Units []pats.Unit
	// Speedups are the operations' estimated GPU speedups by name
	// (Workload.GivenSpeedups); nil gives none, for Config.Learn.
	Speedups map[string]float64
	// Dynamic makes the features a stage created at run time: a tile's
	// segmentation flow spawns its features flow only if it found nuclei
	// (pats.Flow.Spawn).
	Dynamic bool
	// Start are the task graph's start options, such as graph.WithTrace
	// or graph.WithStarted for a live view.
	Start []graph.StartOption
}

// RunResult is the outcome of Run.
type RunResult struct {
	// Tiles are the results of the tiles, in tile order.
	Tiles []TileResult
	// Report is the pats.Manager's report of the run.
	Report *pats.Report
	// Execution is the finished task graph, for its profile.
	Execution *graph.Execution
}

// Run processes every tile of s through a task graph whose stage task
// expands a tile into the pipeline's operations (Operations), run by a
// pats.Manager on o.Units with the image kernels of this package; each
// operation instance costs the time w models for its tile, which
// simulated units emulate. The labels and feature tables are committed to
// the slide's output storage, which must keep polygon sets
// (region.ObjectStorage): after its flow, each tile's nuclei are outlined
// into the polygon set slide::Nuclei there and joined with their feature
// rows (see WriteNucleiGeoJSON and Slide.NucleiInBox).
func Run(ctx context.Context, s *Slide, w *Workload, o RunOptions) (*RunResult, error) {
	tiles, rep, exec, err := runReal(ctx, s, w, o.Config, o.Units, o.Speedups, o.Dynamic, o.Start...)
	if err != nil {
		return nil, fmt.Errorf("pathology: run %d tiles: %w", s.tiles, err)
	}
	return &RunResult{Tiles: tiles, Report: rep, Execution: exec}, nil
}
