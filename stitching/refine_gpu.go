package stitching

import (
	"context"
	"errors"
	"fmt"
	"image"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/phase"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/pipeline"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
	"github.com/gohtgs/htgs/task"
)

// refineBackend is a gpuBackend that also refines pairs on its devices:
// the raw NCC search around each pair's repaired translation
// ([align.StageModel.RefineBox]) from exact sums computed on the device,
// which give the CPU refinement's translation to the last bit.
//
// The refinement needs the stage model, which the registration's
// translations of every pair decide, so it runs as a second pass: each
// tile's pixels are uploaded again, into a slot of pixels only, and stay
// on the device until the last of its pairs is refined.
type refineBackend interface {
	gpuBackend
	// pixels returns the allocator of device slots holding the pixels of
	// a w x h tile (no spectrum).
	pixels(w, h int) memmgr.Allocator[devSpectrum]
	// newUploader returns the upload of one task copy.
	newUploader(w, h int) uploader
	// newBoxScorer returns the NCC box search of one task copy.
	newBoxScorer(w, h int) boxScorer
}

// An uploader copies a tile's pixels into its slot on its task copy's
// device; like a transformer it may implement task.Initializer and
// task.Shutdowner.
type uploader interface {
	upload(ctx context.Context, tile *image.Gray16, dst devSpectrum) error
}

// A boxScorer computes the NCC of the tiles of two slots at every
// displacement of a box, exactly as [align.NCC] does (an align.BoxNCC);
// like a transformer it may implement task.Initializer and
// task.Shutdowner.
type boxScorer interface {
	boxNCC(ctx context.Context, t1, t2 devSpectrum, x0, x1, y0, y1 int, dst []float64) error
}

// refineCounts counts what a GPU refinement did on the host.
type refineCounts struct {
	// hostPairs is the number of pairs whose tiles were loaded on the
	// host: those whose best raw NCC is below align.ConfidentCorr (the
	// noise-limited check and denoised search run on the CPU).
	hostPairs atomic.Int64
	// againPairs is the number of pairs refined in a second GPU pass,
	// their searches reaching outside the registration's NCC surfaces.
	againPairs atomic.Int64
}

// gpuRefineGraph builds the refinement graph for GPUs: like the
// registration's (gpuPairGraph), a pipeline with one clone per GPU over
// bands of rows, each clone
//
//	acquire (its band's tiles) -> read (readers) -> upload (GPU, streams copies)
//	-> pairs bookkeeper -> refine (GPU, streams copies)
//
// in which a tile's slot holds its pixels in the clone's device memory
// until the last of the band's pairs that use it is refined. The refine
// task runs model.RefineBox from start (the repaired translations) with
// the device's box sums; a pair whose raw NCC is not confident, which
// needs its tiles on the host, goes on to a CPU task after the pipeline,
// "weak pairs" (workers copies), which loads them from src and refines
// the pair as the CPU does (counted in counts).
//
// need (nil: every pair) restricts the graph to some pairs: a tile is then
// loaded, by the clones whose bands need it, only if some needed pair uses
// it (see needTiles), and its slot returns after the last of them.
func gpuRefineGraph(be refineBackend, src tileio.TileSource, model *align.StageModel, start *align.Translations,
	slots, readers, workers, streams, weakPairs int, counts *refineCounts, need func(align.Pair) bool) (*graph.Graph[tileRef, pairDone], error) {
	rows, cols := src.Rows(), src.Cols()
	w, h := src.TileSize()
	devs, streams, err := gpuClones(be.devices(), streams)
	if err != nil {
		return nil, err
	}
	g := graph.New[tileRef, pairDone]("refinement")
	cg := graph.New[tileRef, pairDone]("gpu")
	pool := memmgr.New(cg, "tiles", slots, be.pixels(w, h), memmgr.Dynamic(), memmgr.Reclaim())
	acquire, read := acquireRead(cg, pool, src, readers, func(ctx context.Context, t tileRef) int {
		info, _ := task.InfoFrom(ctx)
		return usesNeeded(bandOf(info.Clone, max(1, info.Clones), rows), rows, cols, t.row, t.col, need)
	})
	upload := graph.AddTask(cg, "upload", streams, func() task.Task[*loaded, *loaded] {
		return &uploadTask{up: be.newUploader(w, h)}
	})
	bk := bookkeeper.New[*loaded](cg, "pairs")
	pairs := bookkeeper.AddRule(bk, "both tiles ready", func() bookkeeper.Rule[*loaded, pairJob] {
		r := &bandPairs{rows: rows}
		r.Join = newPairRule(rows, cols, func(p align.Pair) bool { return r.band.has(p) && (need == nil || need(p)) })
		return r
	})
	weak := align.NewWeakPairs(weakPairs)
	refine := graph.AddTask(cg, "refine", streams, func() task.Task[pairJob, pairDone] {
		return &refineTask{sc: be.newBoxScorer(w, h), ref: align.NewRefiner(), model: model, start: start}
	})
	graph.Connect(cg.Input(), acquire)
	graph.Connect(acquire, read)
	graph.Connect(read, upload)
	graph.Connect(upload, bk)
	graph.Connect(pairs, refine)
	graph.Connect(refine, cg.Output())

	gpus := pipeline.NewSubset(g, "gpus", cg, devs, func(t tileRef, clones int, add func(int)) {
		for d := range clones {
			if usesNeeded(bandOf(d, clones, rows), rows, cols, t.row, t.col, need) > 0 {
				add(d)
			}
		}
	})
	graph.Connect(g.Input(), gpus)
	// The pairs whose raw NCC is not confident are refined again on the
	// host, on workers CPU copies beside the GPUs: their tiles are loaded
	// again and StageModel.Refine, the CPU refinement itself, runs on
	// them. Refined pairs pass through.
	host := graph.AddTask(g, "weak pairs", workers, func() task.Task[pairDone, pairDone] {
		ref := align.NewRefiner()
		ref.SetWeakPairs(weak)
		return task.Map(func(_ context.Context, d pairDone) (pairDone, error) {
			if !d.host {
				return d, nil
			}
			nr, nc := d.pair.Neighbor()
			t1, err := loadChecked(src, nr, nc, w, h)
			if err != nil {
				return pairDone{}, fmt.Errorf("stitching: %v: reloading a tile of a pair to refine on the host: %w", d.pair, err)
			}
			t2, err := loadChecked(src, d.pair.Row, d.pair.Col, w, h)
			if err != nil {
				return pairDone{}, fmt.Errorf("stitching: %v: reloading a tile of a pair to refine on the host: %w", d.pair, err)
			}
			counts.hostPairs.Add(1)
			return pairDone{pair: d.pair, tr: model.Refine(ref, t1, t2, start.At(d.pair))}, nil
		})
	})
	graph.Connect(gpus, host)
	graph.Connect(host, g.Output())
	return g, nil
}

// errNeedHost stops a GPU refinement that needs the pair's tiles on the
// host; the pair goes to the graph's "weak pairs" task.
var errNeedHost = errors.New("stitching: the pair needs its tiles on the host")

// uploadTask is one copy of a GPU clone's upload task: the tile's pixels
// go to its slot, and its host copy is dropped.
type uploadTask struct{ up uploader }

func (t *uploadTask) Initialize(ctx context.Context, info task.Info) error {
	return phase.Initialize(ctx, t.up, info)
}

func (t *uploadTask) Shutdown(ctx context.Context) error { return phase.Shutdown(ctx, t.up) }

func (t *uploadTask) Execute(ctx context.Context, l *loaded, out task.Emitter[*loaded]) error {
	if err := t.up.upload(ctx, l.img, l.dev.Data); err != nil {
		return fmt.Errorf("stitching: uploading tile (%d, %d) to the GPU: %w", l.row, l.col, err)
	}
	l.img = nil
	return out.Emit(l)
}

// refineTask is one copy of a GPU clone's refine task.
type refineTask struct {
	sc    boxScorer
	ref   *align.Refiner
	model *align.StageModel
	start *align.Translations
}

func (t *refineTask) Initialize(ctx context.Context, info task.Info) error {
	return phase.Initialize(ctx, t.sc, info)
}

func (t *refineTask) Shutdown(ctx context.Context) error { return phase.Shutdown(ctx, t.sc) }

func (t *refineTask) Execute(ctx context.Context, j pairJob, out task.Emitter[pairDone]) error {
	s1, s2 := j.t1.dev.Data, j.t2.dev.Data
	ncc := func(x0, x1, y0, y1 int, dst []float64) error {
		return t.sc.boxNCC(ctx, s1, s2, x0, x1, y0, y1, dst)
	}
	tiles := func() (*image.Gray16, *image.Gray16, error) { return nil, nil, errNeedHost }
	tr, _, err := t.model.RefineBox(t.ref, ncc, tiles, t.start.At(j.pair))
	host := errors.Is(err, errNeedHost)
	if err != nil && !host {
		return fmt.Errorf("stitching: refining %v on the GPU: %w", j.pair, err)
	}
	if err := errors.Join(j.t1.dev.Release(), j.t2.dev.Release()); err != nil {
		return err
	}
	return out.Emit(pairDone{pair: j.pair, tr: tr, host: host})
}

// surfaceCache holds the NCC surfaces the GPU registration computed around
// each pair's translation while the pair's tiles were on the device, so
// that the refinement, which needs the stage model and so runs after every
// pair is registered, finds most of its searches there without uploading
// the tiles again. A pair's surface covers the displacements within radius
// of its registered translation (and leaving some overlap); a refinement
// search whose box lies inside it is served from it (the values are the
// exact NCC, as the GPU refinement computes them), and the others, when
// the stage model asks for a wider search or another start (repaired
// pairs), go to a second GPU pass over the tiles of those pairs only.
type surfaceCache struct {
	radius int
	mu     sync.Mutex
	boxes  map[align.Pair]cachedBox
	// ahead, if not nil, refines the noise-limited pairs on the host
	// during the registration (see hostAhead).
	ahead *hostAhead
}

// aheadOf returns c's hostAhead; nil for a nil c.
func (c *surfaceCache) aheadOf() *hostAhead {
	if c == nil {
		return nil
	}
	return c.ahead
}

// cachedBox is the NCC of a pair at every displacement of [x0, x1] x [y0,
// y1], row by row.
type cachedBox struct {
	x0, x1, y0, y1 int
	vals           []float64
}

func newSurfaceCache(radius int) *surfaceCache {
	return &surfaceCache{radius: radius, boxes: map[align.Pair]cachedBox{}}
}

// compute computes and stores pair p's surface around tr with box, from
// the slots f1 and f2 of w x h tiles.
func (c *surfaceCache) compute(ctx context.Context, box boxScorer, p align.Pair, f1, f2 devSpectrum, w, h int, tr align.Translation) error {
	x0, x1 := max(tr.X-c.radius, -(w-1)), min(tr.X+c.radius, w-1)
	y0, y1 := max(tr.Y-c.radius, -(h-1)), min(tr.Y+c.radius, h-1)
	if x0 > x1 || y0 > y1 {
		return nil
	}
	vals := make([]float64, (x1-x0+1)*(y1-y0+1))
	if err := box.boxNCC(ctx, f1, f2, x0, x1, y0, y1, vals); err != nil {
		return err
	}
	c.mu.Lock()
	c.boxes[p] = cachedBox{x0, x1, y0, y1, vals}
	c.mu.Unlock()
	return nil
}

// errNotCached is returned by a surfaceCache's BoxNCC for a box it does
// not cover.
var errNotCached = errors.New("stitching: search box outside the cached NCC surface")

// ncc returns pair p's cached surface as an align.BoxNCC, which fails with
// errNotCached for a box the surface does not cover.
func (c *surfaceCache) ncc(p align.Pair) align.BoxNCC {
	c.mu.Lock()
	b, ok := c.boxes[p]
	c.mu.Unlock()
	return func(x0, x1, y0, y1 int, dst []float64) error {
		if !ok || x0 < b.x0 || x1 > b.x1 || y0 < b.y0 || y1 > b.y1 {
			return errNotCached
		}
		bw, cw := x1-x0+1, b.x1-b.x0+1
		for y := y0; y <= y1; y++ {
			copy(dst[(y-y0)*bw:(y-y0+1)*bw], b.vals[(y-b.y0)*cw+x0-b.x0:])
		}
		return nil
	}
}

// usesNeeded is band.uses counting only the pairs need accepts (nil:
// every pair).
func usesNeeded(b band, rows, cols, row, col int, need func(align.Pair) bool) int {
	if need == nil {
		return b.uses(rows, cols, row, col)
	}
	n := 0
	for _, p := range pairsOf(rows, cols, row, col, nil, nil) {
		if b.has(p) && need(p) {
			n++
		}
	}
	return n
}

// needTiles returns the tiles, in traversal order, that some pair need
// accepts uses.
func needTiles(rows, cols int, need func(align.Pair) bool) []tileRef {
	var out []tileRef
	for _, t := range traversal(rows, cols) {
		if len(pairsOf(rows, cols, t.row, t.col, need, nil)) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// refineGPU refines every pair of the grid of src from start (the repaired
// translations) with the stage model, on the GPUs of be, to the
// translations of the CPU refinement:
//
//   - the pairs whose searches the NCC surfaces of cache (nil: none)
//     serve are refined from them on the host (the values are exact;
//     choosing from them is cheap);
//   - those whose raw NCC is not confident, which need their tiles on the
//     host, are loaded and refined on the CPU (workers at once);
//   - the others (repaired pairs, boxes widened past the cached surface,
//     or all of them without a cache) in a GPU pass over the tiles of
//     those pairs only (gpuRefineGraph), beside the CPU's.
func refineGPU(ctx context.Context, be refineBackend, cache *surfaceCache, src tileio.TileSource, model *align.StageModel, start *align.Translations,
	gopt GraphOptions, slots, readers, workers int, counts *refineCounts, res *Result) (*align.Translations, error) {
	rows, cols := src.Rows(), src.Cols()
	w, h := src.TileSize()
	pairs := align.Pairs(rows, cols)
	const (
		fromCache = iota
		onGPU
		onHost
	)
	kinds := make([]int, len(pairs))
	trs := make([]align.Translation, len(pairs))
	weak := align.NewWeakPairs(gopt.gpuWeakPairs(workers))
	// forEach runs f on the pairs i with kinds[i] == kind, on workers
	// goroutines, each with its Refiner.
	forEach := func(kind int, f func(ref *align.Refiner, i int) error) error {
		next := atomic.Int64{}
		errs := make([]error, workers)
		var wg sync.WaitGroup
		for k := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ref := align.NewRefiner()
				ref.SetWeakPairs(weak)
				for {
					i := int(next.Add(1) - 1)
					if i >= len(pairs) || ctx.Err() != nil {
						return
					}
					if kinds[i] == kind {
						if err := f(ref, i); err != nil {
							errs[k] = err
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		return errors.Join(append(errs, ctx.Err())...)
	}
	t0 := time.Now()
	if cache == nil {
		for i := range kinds {
			kinds[i] = onGPU
		}
	} else if err := forEach(fromCache, func(ref *align.Refiner, i int) error {
		p := pairs[i]
		tr, _, err := model.RefineBox(ref, cache.ncc(p), func() (*image.Gray16, *image.Gray16, error) { return nil, nil, errNeedHost }, start.At(p))
		switch {
		case err == nil:
			trs[i] = tr
		case errors.Is(err, errNotCached):
			kinds[i] = onGPU
		case errors.Is(err, errNeedHost):
			kinds[i] = onHost
		default:
			return fmt.Errorf("stitching: refining %v from its NCC surface: %w", p, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if cache != nil {
		t0 = res.step("refinement from surfaces", t0)
	}
	refined := align.NewTranslations(rows, cols)
	gpuSet := map[align.Pair]bool{}
	for i, p := range pairs {
		if kinds[i] == onGPU {
			gpuSet[p] = true
		}
	}
	counts.againPairs.Store(int64(len(gpuSet)))
	var gpuErr error
	var gpuTime time.Duration
	var wg sync.WaitGroup
	if len(gpuSet) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			need := func(p align.Pair) bool { return gpuSet[p] }
			g, err := gpuRefineGraph(be, src, model, start, slots, readers, workers, gopt.GPUStreams, gopt.gpuWeakPairs(workers), counts, need)
			if err == nil {
				err = runPairsInto(ctx, "refinement", g, needTiles(rows, cols, need), len(gpuSet), gopt, refined)
			}
			gpuErr, gpuTime = err, time.Since(t0)
		}()
	}
	// The noise-limited pairs refined ahead during the registration,
	// from the same start with the same RefineParams, are taken as they
	// are: RefineBox's result, bit for bit.
	ahead := cache.aheadOf()
	ahead.stop()
	rp := model.RefineParams()
	var fromAhead atomic.Int64
	hostErr := forEach(onHost, func(ref *align.Refiner, i int) error {
		p := pairs[i]
		if tr, ok := ahead.refined(p, start.At(p), rp); ok {
			trs[i] = tr
			fromAhead.Add(1)
			counts.hostPairs.Add(1)
			return nil
		}
		var t1, t2 *image.Gray16
		var lerr error
		load := func() (*image.Gray16, *image.Gray16, error) {
			if t1 == nil && lerr == nil {
				nr, nc := p.Neighbor()
				if t1, lerr = loadChecked(src, nr, nc, w, h); lerr == nil {
					t2, lerr = loadChecked(src, p.Row, p.Col, w, h)
				}
				if lerr != nil {
					t1, lerr = nil, fmt.Errorf("stitching: %v: loading a tile of a pair to refine on the host: %w", p, lerr)
				}
			}
			return t1, t2, lerr
		}
		counts.hostPairs.Add(1)
		if cache != nil {
			// The raw NCC boxes from the surface, the tiles only for
			// the noise-limited pair's denoised search: Refine's result.
			tr, _, err := model.RefineBox(ref, cache.ncc(p), load, start.At(p))
			if err == nil {
				trs[i] = tr
				return nil
			}
			if !errors.Is(err, errNotCached) {
				return fmt.Errorf("stitching: refining %v on the host: %w", p, err)
			}
		}
		if _, _, err := load(); err != nil {
			return err
		}
		trs[i] = model.Refine(ref, t1, t2, start.At(p))
		return nil
	})
	if slices.Contains(kinds, onHost) {
		res.step("refinement on the host", t0)
	}
	res.RefinedAhead = int(fromAhead.Load())
	wg.Wait()
	if len(gpuSet) > 0 {
		res.Steps = append(res.Steps, Step{Name: "refinement on the GPUs", Elapsed: gpuTime})
	}
	if err := errors.Join(gpuErr, hostErr); err != nil {
		return nil, err
	}
	for i, p := range pairs {
		if kinds[i] != onGPU {
			refined.Set(p, trs[i])
		}
	}
	return refined, nil
}
