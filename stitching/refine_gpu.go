package stitching

import (
	"context"
	"errors"
	"fmt"
	"image"
	"sync/atomic"

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
func gpuRefineGraph(be refineBackend, src tileio.TileSource, model *align.StageModel, start *align.Translations,
	slots, readers, workers, streams, weakPairs int, counts *refineCounts) (*graph.Graph[tileRef, pairDone], error) {
	rows, cols := src.Rows(), src.Cols()
	w, h := src.TileSize()
	devs := be.devices()
	if len(devs) == 0 {
		return nil, ErrNoGPU
	}
	if streams <= 0 {
		streams = 4
	}
	g := graph.New[tileRef, pairDone]("refinement")
	cg := graph.New[tileRef, pairDone]("gpu")
	pool := memmgr.New(cg, "tiles", slots, be.pixels(w, h), memmgr.Dynamic(), memmgr.Reclaim())
	acquire := graph.AddFunc(cg, "acquire", 1, func(ctx context.Context, t tileRef, out task.Emitter[*loaded]) error {
		info, _ := task.InfoFrom(ctx)
		n := bandOf(info.Pipeline, max(1, info.Pipelines), rows).uses(rows, cols, t.row, t.col)
		if n == 0 {
			return fmt.Errorf("stitching: tile (%d, %d) routed to a GPU clone whose band does not use it", t.row, t.col)
		}
		buf, err := pool.Get(ctx, n)
		if err != nil {
			return err
		}
		return out.Emit(&loaded{row: t.row, col: t.col, dev: buf})
	})
	memmgr.Use(pool, acquire)
	read := graph.AddFunc(cg, "read", readers, func(_ context.Context, l *loaded, out task.Emitter[*loaded]) error {
		img, err := loadChecked(src, l.row, l.col, w, h)
		if err != nil {
			return err
		}
		l.img = img
		return out.Emit(l)
	})
	upload := graph.AddTask(cg, "upload", streams, func() task.Task[*loaded, *loaded] {
		return &uploadTask{up: be.newUploader(w, h)}
	})
	bk := bookkeeper.New[*loaded](cg, "pairs")
	pairs := bookkeeper.AddRule(bk, "both tiles ready", func() bookkeeper.Rule[*loaded, pairJob] {
		r := &bandPairs{rows: rows}
		r.Join = newPairRule(rows, cols, func(p align.Pair) bool { return r.band.has(p) })
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

	gpus := pipeline.NewSubset(g, "gpus", cg, devs, bandsOf(rows, cols))
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
