package stitching

import (
	"context"
	"errors"
	"fmt"
	"image"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
	"github.com/gohtgs/htgs/task"
)

// GraphOptions configure [Stitch], the task-graph stitcher.
type GraphOptions struct {
	// Workers is the number of copies of the FFT, PCIAM+CCF and refinement
	// tasks, of which at most Workers compute at once, and the number of
	// flat-field sample tiles loaded and fitted at once. 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
	// Readers is the number of copies of the task that loads tiles. 0 means
	// half the Workers (at least 2), and with GPU all the Workers for the
	// registration, whose other CPU work is light.
	Readers int
	// PoolSize is the number of tile slots (a tile and its spectrum) alive
	// at once. 0 means MIST's choice, min(rows, cols) + 2 + Workers. The
	// smallest size that cannot deadlock is one line of the traversal plus
	// one; a smaller explicit size is an error.
	PoolSize int
	// WeakPairs is the number of noise-limited pairs registered or refined
	// at once, each in a scratch space of about align.DenoiseScratch bytes
	// (some 110 bytes per pixel of a tile, against about 30 for an
	// ordinary pair) that the run's workers share (see align.WeakPairs);
	// the other workers that meet such a pair wait for a free one. 0
	// means a quarter of the Workers, at least one: the scratch then adds
	// about as much per worker as the refinement's own, and data whose
	// pairs are weak only here and there (a few low-contrast tiles) rarely
	// waits. On data where every pair is weak, a larger value trades
	// memory for speed.
	WeakPairs int
	// Start is passed to every graph's Start (tracing, stall reports, ...).
	Start []graph.StartOption
	// Observe, if set, is called after each phase ("registration",
	// "refinement") with the finished run, for pictures and timelines.
	Observe func(phase string, run *graph.Execution)
	// Progress, if set, is called as pairs complete: done of total pairs
	// in the given phase.
	Progress func(phase string, done, total int)
	// GPU runs the registration's FFTs, phase correlations (PCIAM) and
	// cross-correlation factors (CCF) on every GPU of the machine (see
	// package cuda; needs a build with -tags cuda, and fails with a clear
	// error otherwise), and the refinement's NCC searches. Each tile
	// crosses the bus once, as its 16-bit pixels, and stays in device
	// memory, with its spectrum, until its last pair is registered; while
	// a pair is there, the GPU also computes its NCC surface around its
	// translation (exact sums; within twice the repeatability, or 10 px
	// when it is estimated). The refinement, which needs the stage model
	// that all the registered pairs decide, then chooses from those
	// surfaces, giving the CPU refinement's translations to the last bit;
	// the pairs whose searches reach outside them (repaired pairs, boxes
	// widened) are refined in a second GPU pass that uploads their tiles
	// again (Result.RefinedAgain), and those whose NCC is not confident
	// are checked for noise, and searched on denoised tiles, on the CPU
	// (Result.HostRefined). The grid's rows are split into one band per
	// GPU, each stitched by an execution-pipeline clone bound to its GPU.
	GPU bool
	// GPUStreams is the number of copies, each with a stream of its own,
	// of the FFT and of the PCIAM+CCF task (and of the refinement's
	// upload and refine tasks) per GPU. 0 means defaultGPUStreams (10).
	GPUStreams int

	// gpu replaces the cuda backend in tests.
	gpu gpuBackend
	// surface replaces the radius of the NCC surfaces the GPU
	// registration computes (surfaceRadius) in tests; -1 for none.
	surface int
	// refined, if set, gives the CPU refinement the translations already
	// refined (StitchLive's, as the pairs came): the one of pair p when
	// it was refined from start with a model of the same RefineParams.
	refined func(p align.Pair, start align.Translation, rp align.RefineParams) (align.Translation, bool)
}

// tileRef is a tile to load.
type tileRef struct{ row, col int }

// slotData is what a pool slot holds: the tile's spectrum (phase 1 only).
type slotData struct{ spec []complex128 }

// loaded is a tile in flight through a graph, holding a pool slot until
// every pair it belongs to has used it.
type loaded struct {
	row, col int
	img      *image.Gray16
	buf      *memmgr.Buffer[slotData]
	// GPU graphs: the tile's spectrum in device memory, and the DC
	// coefficient (the pixel sum) that scales the cross-power guard.
	dev *memmgr.Buffer[devSpectrum]
	dc  float64
}

// pairJob is an adjacent pair whose two tiles (and spectra) are ready.
type pairJob struct {
	pair   align.Pair
	t1, t2 *loaded // t1 is the neighbour (west or north), t2 the tile
}

// pairDone is the translation of one pair.
type pairDone struct {
	pair align.Pair
	tr   align.Translation
	host bool // GPU refinement: tr is not set, the pair is refined on the host
}

// neighbours returns how many adjacent tiles (row, col) has.
func neighbours(rows, cols, row, col int) int {
	n := 0
	if row > 0 {
		n++
	}
	if row < rows-1 {
		n++
	}
	if col > 0 {
		n++
	}
	if col < cols-1 {
		n++
	}
	return n
}

// newPairRule returns the pairing rule of a rows x cols grid: a keyed join
// by pair, in which a tile takes part in the pairs it belongs to that keep
// accepts (nil: every pair), and a pair is emitted as soon as both of its
// tiles have arrived. A pair's state goes once it is emitted, so a tile
// leaves the join after its last pair and the rule holds no more tiles than
// the pool has slots.
func newPairRule(rows, cols int, keep func(align.Pair) bool) *bookkeeper.Join[*loaded, align.Pair, pairJob] {
	return bookkeeper.NewMultiJoin(func(t *loaded, dst []align.Pair) []align.Pair {
		return pairsOf(rows, cols, t.row, t.col, keep, dst)
	}, func(p align.Pair, got []*loaded) (pairJob, bool) {
		if len(got) < 2 {
			return pairJob{}, false
		}
		t1, t2 := got[0], got[1]
		if t2.row != p.Row || t2.col != p.Col {
			t1, t2 = t2, t1
		}
		return pairJob{pair: p, t1: t1, t2: t2}, true
	})
}

// pairsOf appends to dst the pairs tile (row, col) of a rows x cols grid
// belongs to that keep accepts (nil: every pair): its own west and north
// pairs, the west pair of its east neighbour and the north pair of its
// south one.
func pairsOf(rows, cols, row, col int, keep func(align.Pair) bool, dst []align.Pair) []align.Pair {
	add := func(p align.Pair) {
		if keep == nil || keep(p) {
			dst = append(dst, p)
		}
	}
	if col > 0 {
		add(align.Pair{Row: row, Col: col, Dir: align.West})
	}
	if row > 0 {
		add(align.Pair{Row: row, Col: col, Dir: align.North})
	}
	if col < cols-1 {
		add(align.Pair{Row: row, Col: col + 1, Dir: align.West})
	}
	if row < rows-1 {
		add(align.Pair{Row: row + 1, Col: col, Dir: align.North})
	}
	return dst
}

// sizes returns the task copies, tile readers and pool slots of a run on a
// rows x cols grid, with the defaults for zero fields: one worker per CPU,
// half as many readers (at least 2), and MIST's pool of min(rows, cols)+2+workers slots, at least
// one line of the traversal plus one.
func (gopt GraphOptions) sizes(rows, cols int) (workers, readers, slots int) {
	workers, readers, slots = gopt.Workers, gopt.Readers, gopt.PoolSize
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if readers <= 0 {
		readers = max(2, workers/2)
	}
	if slots <= 0 {
		slots = max(min(rows, cols)+2+workers, newWalker(rows, cols).lineLen()+1)
	}
	return workers, readers, slots
}

// checkedSizes is sizes, and an error when the pool of slots can deadlock.
// Slots are taken in traversal order, so a tile waiting for one only waits
// for the line of tiles before it: every older tile has all of its
// neighbours loaded and will give its slot back, once the pool holds a
// line and one more.
func (gopt GraphOptions) checkedSizes(rows, cols int) (workers, readers, slots int, err error) {
	workers, readers, slots = gopt.sizes(rows, cols)
	if line := newWalker(rows, cols).lineLen(); slots < line+1 {
		return 0, 0, 0, fmt.Errorf("stitching: a pool of %d tile slots can deadlock: the traversal keeps a line of %d tiles alive while the next one waits; use at least %d",
			slots, line, line+1)
	}
	return workers, readers, slots, nil
}

// weakPairs returns the number of scratch spaces of noise-limited pairs of
// a run with the given workers: WeakPairs or its default.
func (gopt GraphOptions) weakPairs(workers int) int {
	if gopt.WeakPairs > 0 {
		return gopt.WeakPairs
	}
	return max(1, workers/4)
}

// defaultGPUStreams is GraphOptions.GPUStreams's default: on the paper
// grid (issue 38, one H200), 4 copies of the PCIAM+CCF task were busy 69%
// of the registration, each pair waiting on its stream for its peaks and
// scores; more streams keep the device fed while some wait (6: busy 81%,
// the GPU itself 62%, registration 2.05 s -> 1.69 s).
const defaultGPUStreams = 10

// gpuWeakPairs is weakPairs for a run on GPUs, whose host cores are free
// for the noise-limited pairs (their recheck in the registration, their
// refinement on the host, which waits for nothing else): WeakPairs or, by
// default, every worker. A scratch space is allocated when a pair first
// needs it (see MemoryEstimate).
func (gopt GraphOptions) gpuWeakPairs(workers int) int {
	if gopt.WeakPairs > 0 {
		return gopt.WeakPairs
	}
	return max(1, workers)
}

// gpuSlots returns the device slots of a GPU registration's pool, given the
// host graphs' slots and fit, how many tile slots a quarter of the
// smallest GPU's memory holds (0: unknown): PoolSize if set, else two
// more lines of the traversal, so that the reads and FFTs of the next
// lines run ahead of the pairs that free the slots (a slot is device
// memory only: the tile's host copy is dropped once it is on the device),
// and up to six lines more where fit allows (on the paper grid, one H200,
// the acquire of slots waited 1.38 s of a 1.74 s registration with two).
func (gopt GraphOptions) gpuSlots(rows, cols, slots, fit int) int {
	if gopt.PoolSize > 0 {
		return slots
	}
	line := newWalker(rows, cols).lineLen()
	n := slots + 2*line
	n = max(n, min(fit, slots+8*line))
	return min(rows*cols, n)
}

// traversal returns the tiles in the order the graphs take them: line by
// line along the grid's shorter dimension, like Sequential, so that one
// line of tiles (plus the slots in flight) is alive at a time.
func traversal(rows, cols int) []tileRef {
	wk := newWalker(rows, cols)
	out := make([]tileRef, 0, rows*cols)
	for line := 0; line < wk.lines(); line++ {
		for k := 0; k < wk.lineLen(); k++ {
			r, c := wk.coord(line, k)
			out = append(out, tileRef{r, c})
		}
	}
	return out
}

// cores admits at most cap(c) goroutines at once into the CPU-bound work of
// a graph's tasks. The FFT and the pair tasks each have Workers copies, so
// without it 2 x Workers goroutines would compete for Workers cores: the Go
// scheduler would switch between them every 10 ms, and a copy's FFTW call
// (a cgo call, which gives its P to another goroutine while it computes)
// would run beside two others. With it, as many transforms and pairs run
// at once as there are workers, each to its end; the light tasks (acquire,
// read, the bookkeeper) are not admitted and run between them.
type cores chan struct{}

// run runs f once one of the cores is free.
func (c cores) run(f func()) {
	c <- struct{}{}
	defer func() { <-c }()
	f()
}

// pairGraph builds the graph shared by both phases: take a slot from a pool
// for each tile (so loading cannot run ahead of memory), load tiles, optionally
// transform them, pair them in a bookkeeper, and run perPair on each pair.
// At most workers transforms and pairs compute at once (see cores).
func pairGraph(name string, src tileio.TileSource, slots, readers, workers int,
	newSlot func() (slotData, error),
	newTransform func() func(*loaded),
	newPerPair func() func(pairJob) align.Translation,
) (*graph.Graph[tileRef, pairDone], *memmgr.Pool[slotData]) {
	rows, cols := src.Rows(), src.Cols()
	w, h := src.TileSize()
	cpu := make(cores, workers)
	g := graph.New[tileRef, pairDone](name)
	pool := memmgr.New[slotData](g, "tile slots", slots, memmgr.AllocFunc[slotData](func(device.Device) (slotData, error) { return newSlot() }), memmgr.Dynamic())
	// One copy takes the slots, strictly in traversal order: with several
	// copies, one could stall between taking a tile off its queue and
	// asking for its slot while another filled the pool with later tiles
	// that all wait for it — a deadlock.
	acquire := graph.AddFunc(g, "acquire", 1, func(ctx context.Context, t tileRef, out task.Emitter[*loaded]) error {
		n := neighbours(rows, cols, t.row, t.col)
		buf, err := pool.GetShared(ctx, n)
		if err != nil {
			return err
		}
		return out.Emit(&loaded{row: t.row, col: t.col, buf: buf})
	})
	read := graph.AddFunc(g, "read", readers, func(_ context.Context, l *loaded, out task.Emitter[*loaded]) error {
		img, err := loadChecked(src, l.row, l.col, w, h)
		if err != nil {
			return err
		}
		l.img = img
		if neighbours(rows, cols, l.row, l.col) == 0 { // a 1x1 grid: nothing will ever use it
			buf := l.buf
			l.buf = nil
			if err := buf.Release(); err != nil {
				return err
			}
		}
		return out.Emit(l)
	})
	memmgr.Use(pool, acquire)
	graph.Connect(g.Input(), acquire)
	graph.Connect(acquire, read)
	var tiles graph.Producer[*loaded] = read
	if newTransform != nil {
		fft := graph.AddTask(g, "fft", workers, func() task.Task[*loaded, *loaded] {
			f := newTransform() // per copy: its plan is scratch
			return task.Map(func(_ context.Context, l *loaded) (*loaded, error) {
				cpu.run(func() { f(l) })
				return l, nil
			})
		})
		graph.Connect(read, fft)
		tiles = fft
	}
	bk := bookkeeper.New[*loaded](g, "pairs")
	pairs := bookkeeper.AddRule(bk, "both tiles ready", func() bookkeeper.Rule[*loaded, pairJob] {
		return newPairRule(rows, cols, nil)
	})
	graph.Connect(tiles, bk)
	perPair := graph.AddTask(g, "pair", workers, func() task.Task[pairJob, pairDone] {
		f := newPerPair() // per copy: its aligner or refiner is scratch
		return task.Map(func(_ context.Context, j pairJob) (pairDone, error) {
			var tr align.Translation
			cpu.run(func() { tr = f(j) })
			// Each tile's slot returns after its last pair (Count = neighbours).
			if err := errors.Join(j.t1.buf.Release(), j.t2.buf.Release()); err != nil {
				return pairDone{}, err
			}
			return pairDone{pair: j.pair, tr: tr}, nil
		})
	})
	graph.Connect(pairs, perPair)
	graph.Connect(perPair, g.Output())
	return g, pool
}

// runPairs runs a pair graph over the whole grid and collects the
// translations.
func runPairs(ctx context.Context, phase string, g *graph.Graph[tileRef, pairDone], rows, cols int, gopt GraphOptions) (*align.Translations, error) {
	rel := align.NewTranslations(rows, cols)
	if err := runPairsInto(ctx, phase, g, traversal(rows, cols), len(align.Pairs(rows, cols)), gopt, rel); err != nil {
		return nil, err
	}
	return rel, nil
}

// runPairsInto runs a pair graph over tiles, which must give total pairs,
// and sets their translations in rel.
func runPairsInto(ctx context.Context, phase string, g *graph.Graph[tileRef, pairDone], tiles []tileRef, total int, gopt GraphOptions, rel *align.Translations) error {
	var exec *graph.Execution
	opts := append(slices.Clip(gopt.Start), graph.WithStarted(func(e *graph.Execution) { exec = e }))
	done := 0
	err := g.Run(ctx, slices.Values(tiles), func(d pairDone) error {
		rel.Set(d.pair, d.tr)
		done++
		if gopt.Progress != nil {
			gopt.Progress(phase, done, total)
		}
		return nil
	}, opts...)
	if err != nil {
		return fmt.Errorf("stitching: %s: %w", phase, err)
	}
	if done != total {
		return fmt.Errorf("stitching: %s: %d of %d pairs computed", phase, done, total)
	}
	if gopt.Observe != nil && exec != nil {
		gopt.Observe(phase, exec)
	}
	return nil
}

// Stitch stitches the grid of src with two task graphs, producing the same
// result as [Sequential]:
//
//  1. registration: acquire a slot -> read (Readers copies) -> FFT (Workers) -> bookkeeper
//     pairing each tile with its west and north neighbours as soon as both
//     spectra exist -> PCIAM+CCF (Workers);
//  2. after the stage model is estimated and outliers repaired,
//     refinement: acquire -> read -> bookkeeper -> refine each pair (Workers).
//
// In each graph at most Workers FFTs and pairs compute at once, so that
// the work does not oversubscribe the cores it was sized for, and at most
// GraphOptions.WeakPairs of the pairs are noise-limited ones, which share
// that many scratch spaces (see align.WeakPairs).
//
// Tiles enter line by line along the shorter grid dimension. Each tile
// takes a slot from a memory pool (see GraphOptions.PoolSize), in that
// order, before it is read, and the slot returns when all of its 2 to 4
// neighbours have used it, so at most PoolSize tiles and spectra are alive.
// The flat-field estimate (unless opt.NoFlatField) fits Workers sample
// tiles at once; the stage model and the placement of the tiles run on the calling
// goroutine (well under a millisecond for 8x10 tiles).
func Stitch(ctx context.Context, src tileio.TileSource, opt align.Options, gopt GraphOptions) (*Result, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	rows, cols := src.Rows(), src.Cols()
	workers, readers, slots, err := gopt.checkedSizes(rows, cols)
	if err != nil {
		return nil, err
	}

	be := gopt.gpu
	if gopt.GPU && be == nil {
		var err error
		if be, err = newCUDABackend(); err != nil {
			return nil, err
		}
	}
	res, src, err := beginWorkers(ctx, src, opt, workers)
	if err != nil {
		return nil, err
	}

	// Phase 1: registration.
	var rel *align.Translations
	var rb refineBackend
	var cache *surfaceCache
	if be != nil {
		rb, _ = be.(refineBackend)
		if r := gopt.surfaceRadius(opt); rb != nil && r >= 0 {
			cache = newSurfaceCache(r)
			cache.ahead = newHostAhead(ctx, src, cache, opt, workers*3/4, align.NewWeakPairs(gopt.gpuWeakPairs(workers)))
			defer cache.ahead.stop()
		}
		gpuReaders := readers
		if gopt.Readers <= 0 {
			gpuReaders = max(2, workers)
		}
		g, err := gpuPairGraph(be, src, opt, gopt.gpuSlots(rows, cols, slots, slotsFit(be, src)), gpuReaders, workers, gopt.GPUStreams, gopt.gpuWeakPairs(workers), cache)
		if err != nil {
			return nil, err
		}
		if rel, err = runPairs(ctx, "registration", g, rows, cols, gopt); err != nil {
			return nil, err
		}
	} else if rel, err = registerCPU(ctx, src, opt, gopt, slots, readers, workers); err != nil {
		return nil, err
	}
	res.Relative = rel
	return finishOn(ctx, res, src, opt, gopt, slots, readers, workers, rel, rb, cache)
}

// defaultSurfaceRadius is the half-width of the NCC surfaces the GPU
// registration computes for the refinement when the stage repeatability
// is not given: the search radius (twice the repeatability) of stages
// repeatable to 5 px.
const defaultSurfaceRadius = 10

// surfaceRadius returns the half-width of the NCC surfaces the GPU
// registration computes for the refinement (see surfaceCache): the
// search radius the stage model will use when the options give the
// repeatability, else defaultSurfaceRadius; -1 for none.
func (gopt GraphOptions) surfaceRadius(opt align.Options) int {
	switch {
	case gopt.surface != 0:
		return gopt.surface
	case opt.Repeatability > 0:
		return 2 * opt.Repeatability
	}
	return defaultSurfaceRadius
}

// registerCPU runs the registration graph on the CPU.
func registerCPU(ctx context.Context, src tileio.TileSource, opt align.Options, gopt GraphOptions, slots, readers, workers int) (*align.Translations, error) {
	rows, cols := src.Rows(), src.Cols()
	w, h := src.TileSize()
	specLen := align.NewTileFFT(w, h, opt).SpectrumLen()
	weak := align.NewWeakPairs(gopt.weakPairs(workers)) // shared by the task copies
	g1, _ := pairGraph("registration", src, slots, readers, workers,
		func() (slotData, error) { return slotData{spec: make([]complex128, specLen)}, nil },
		func() func(*loaded) {
			f := align.NewTileFFT(w, h, opt) // one plan per task copy
			return func(l *loaded) {
				if l.buf != nil {
					f.Forward(l.img, l.buf.Data.spec)
				}
			}
		},
		func() func(pairJob) align.Translation {
			a := align.NewAligner(w, h, opt) // one aligner (scratch) per task copy
			a.SetWeakPairs(weak)
			return func(j pairJob) align.Translation {
				return a.Align(j.t1.img, j.t2.img, j.t1.buf.Data.spec, j.t2.buf.Data.spec, j.pair.Dir)
			}
		})
	return runPairs(ctx, "registration", g1, rows, cols, gopt)
}

// finish estimates the stage model, repairs the translations and refines
// them on the CPU.
func finish(ctx context.Context, res *Result, src tileio.TileSource, opt align.Options, gopt GraphOptions, slots, readers, workers int, rel *align.Translations) (*Result, error) {
	return finishOn(ctx, res, src, opt, gopt, slots, readers, workers, rel, nil, nil)
}

// refineKnown is the CPU refinement when gopt.refined already holds most
// pairs' refined translations: it takes those whose start (the repaired
// translation) and model agree with the final ones, and refines the
// others, at most three quarters of the pairs, on up to workers goroutines
// that load their tiles from src (two loads a pair, against about one a
// pair in the graph, but a load costs far less than a search). It returns
// nil translations (and no error) when gopt.refined is unset or misses
// more pairs than that: the refinement graph then does it all.
func refineKnown(ctx context.Context, src tileio.TileSource, model *align.StageModel, repaired *align.Translations, gopt GraphOptions, workers int) (*align.Translations, error) {
	if gopt.refined == nil {
		return nil, nil
	}
	rows, cols := src.Rows(), src.Cols()
	w, h := src.TileSize()
	rp := model.RefineParams()
	pairs := align.Pairs(rows, cols)
	out := align.NewTranslations(rows, cols)
	var missing []align.Pair
	for _, p := range pairs {
		if tr, ok := gopt.refined(p, repaired.At(p), rp); ok {
			out.Set(p, tr)
		} else {
			missing = append(missing, p)
		}
	}
	if 4*len(missing) > 3*len(pairs) {
		return nil, nil
	}
	// Progress is called by one goroutine at a time, as the graphs do.
	var mu sync.Mutex
	done := len(pairs) - len(missing)
	progress := func(more int) {
		mu.Lock()
		defer mu.Unlock()
		done += more
		if gopt.Progress != nil {
			gopt.Progress("refinement", done, len(pairs))
		}
	}
	progress(0)
	weak := align.NewWeakPairs(gopt.weakPairs(workers))
	next := make(chan align.Pair)
	n := max(1, min(workers, len(missing)))
	errs := make(chan error, n)
	for range n {
		go func() {
			ref := align.NewRefiner()
			ref.SetWeakPairs(weak)
			var err error
			for p := range next {
				if err != nil {
					continue
				}
				r, c := p.Neighbor()
				var t1, t2 *image.Gray16
				if t1, err = loadChecked(src, r, c, w, h); err != nil {
					continue
				}
				if t2, err = loadChecked(src, p.Row, p.Col, w, h); err != nil {
					continue
				}
				out.Set(p, model.Refine(ref, t1, t2, repaired.At(p)))
				progress(1)
			}
			errs <- err
		}()
	}
	var err error
feed:
	for _, p := range missing {
		select {
		case next <- p:
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	for range n {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		return nil, fmt.Errorf("stitching: refinement: %w", err)
	}
	return out, nil
}

// finishOn is finish with the refinement on the GPUs of be (nil: on the
// CPU), starting from the NCC surfaces of cache (nil: none): the pairs
// whose searches the cache serves are refined from it on the host, those
// that need their tiles on the host are refined there, and the others in
// a GPU pass over their tiles.
func finishOn(ctx context.Context, res *Result, src tileio.TileSource, opt align.Options, gopt GraphOptions, slots, readers, workers int, rel *align.Translations, be refineBackend, cache *surfaceCache) (*Result, error) {
	rows, cols := src.Rows(), src.Cols()
	w, h := src.TileSize()
	// Global optimization: stage model and repair, then refinement.
	t0 := time.Now()
	model, err := align.EstimateModel(rel, w, h, opt)
	if err != nil {
		return nil, err
	}
	repaired := model.Repair(rel)
	t0 = res.step("stage model and repair", t0)
	var refined *align.Translations
	if be != nil {
		var counts refineCounts
		if refined, err = refineGPU(ctx, be, cache, src, model, repaired, gopt, slots, readers, workers, &counts, res); err != nil {
			return nil, err
		}
		res.HostRefined = int(counts.hostPairs.Load())
		res.RefinedAgain = int(counts.againPairs.Load())
	} else if refined, err = refineKnown(ctx, src, model, repaired, gopt, workers); err != nil {
		return nil, err
	} else if refined != nil {
		res.step("refinement", t0)
	} else {
		weak := align.NewWeakPairs(gopt.weakPairs(workers)) // shared by the task copies
		g2, _ := pairGraph("refinement", src, slots, readers, workers,
			func() (slotData, error) { return slotData{}, nil },
			nil,
			func() func(pairJob) align.Translation {
				ref := align.NewRefiner() // scratch per task copy
				ref.SetWeakPairs(weak)
				return func(j pairJob) align.Translation {
					return model.Refine(ref, j.t1.img, j.t2.img, repaired.At(j.pair))
				}
			})
		if refined, err = runPairs(ctx, "refinement", g2, rows, cols, gopt); err != nil {
			return nil, err
		}
		res.step("refinement", t0)
	}
	t0 = time.Now()
	pl, err := place(ctx, src, model, refined, opt, workers)
	if err != nil {
		return nil, err
	}
	res.setOptimization(optimization(model, repaired, refined, pl))
	res.step("global solve", t0)
	return res, nil
}
