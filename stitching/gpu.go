package stitching

import (
	"context"
	"errors"
	"fmt"
	"image"
	"slices"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/phase"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/pipeline"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
	"github.com/gohtgs/htgs/task"
)

// ErrNoGPUBuild is returned by [Stitch] with GraphOptions.GPU in a program
// built without the cuda build tag.
var ErrNoGPUBuild = errors.New("stitching: GPU stitching is not built into this program (build with -tags cuda)")

// ErrNoGPU is wrapped by the error of [Stitch] with GraphOptions.GPU in a
// program built with the cuda tag, on a machine where no GPU is usable.
var ErrNoGPU = errors.New("stitching: no usable GPU")

// gpuBackend runs the registration's per-tile and per-pair transforms on
// devices with memory of their own. The cuda backend implements it
// (-tags cuda); the tests implement it with host memory posing as GPUs, so
// that the GPU graph (bands, release counts, device pools) is tested on
// every machine.
type gpuBackend interface {
	// devices lists the GPUs, one pipeline clone each.
	devices() []device.Device
	// spectra returns the allocator of device spectra of w x h tiles.
	spectra(w, h int) memmgr.Allocator[devSpectrum]
	// newTransformer returns the tile FFT of one task copy. With a flat
	// field ff (nil for none) the transformer corrects the tiles it is
	// given, as ff.Apply would, before the transform.
	newTransformer(w, h int, opt align.Options, ff *align.FlatField) transformer
	// newCorrelator returns the PCIAM of one task copy.
	newCorrelator(w, h int, opt align.Options) correlator
}

// memoryBackend is a gpuBackend that knows its devices' memory.
type memoryBackend interface {
	// slotsFit returns how many slots of w x h tiles (see spectra) a
	// quarter of the smallest device's memory holds.
	slotsFit(w, h int) int
}

// slotsFit returns be's slotsFit for src's tiles, or 0 when be does not
// know its devices' memory.
func slotsFit(be gpuBackend, src tileio.TileSource) int {
	m, ok := be.(memoryBackend)
	if !ok {
		return 0
	}
	return m.slotsFit(src.TileSize())
}

// devSpectrum is a tile's spectrum in device memory.
type devSpectrum interface {
	// Size is the buffer's size in bytes.
	Size() int64
}

// A transformer computes tile spectra on its task copy's device. It may
// implement task.Initializer and task.Shutdowner (Initialize runs on the
// goroutine of every later call and receives the clone's device).
type transformer interface {
	// forward computes the spectrum that [align.Aligner.Peaks] expects (of the
	// periodic component unless the options say otherwise) into dst, and
	// returns the sum of the (corrected) tile's pixels, its DC coefficient.
	forward(ctx context.Context, tile *image.Gray16, dst devSpectrum) (dc float64, err error)
}

// A correlator finds the phase-correlation peaks of a pair on its task
// copy's device; like a transformer it may implement task.Initializer and
// task.Shutdowner.
type correlator interface {
	// peaks returns the n highest local maxima of the phase-correlation
	// matrix of the spectra f1 and f2 (as [align.Aligner.Peaks] does); dc1 and
	// dc2 are the tiles' pixel sums, their DC coefficients. The slice may
	// be reused by the next call.
	peaks(ctx context.Context, f1, f2 devSpectrum, dc1, dc2 float64, n int) ([]align.Peak, error)
}

// A scorer is a correlator that also does the CCF on its device: its
// backend's transformer leaves each tile's pixels in the tile's slot, next
// to the spectrum, and score returns the normalized cross-correlation of
// the pair's tiles at each offset (exactly, as [align.NCC] does). The GPU
// graph then chooses each pair's translation in the PCIAM task, and a
// tile's host copy is dropped as soon as it is on the device.
type scorer interface {
	correlator
	score(ctx context.Context, f1, f2 devSpectrum, offs [][2]int, corr []float64) error
	// more extends the peaks of the last call of peaks to the n highest
	// (the same list peaks would have returned for n), for when the first
	// ones do not give a confident match.
	more(ctx context.Context, n int) ([]align.Peak, error)
}

// band is the part of the grid one GPU clone registers: the pairs whose
// tile 2 (Pair.Row, Pair.Col) lies in rows [lo, hi). It needs the tiles of
// those rows and of the row above them, the halo, which the clone above
// also loads and transforms.
type band struct{ lo, hi int }

// bandOf returns clone d's band of rows rows among clones clones.
func bandOf(d, clones, rows int) band {
	return band{lo: d * rows / clones, hi: (d + 1) * rows / clones}
}

// has reports whether pair p is registered in the band.
func (b band) has(p align.Pair) bool { return p.Row >= b.lo && p.Row < b.hi }

// uses returns the number of the band's pairs that use tile (row, col) of
// a rows x cols grid: the release count of its slot in the clone.
func (b band) uses(rows, cols, row, col int) int {
	in := func(r int) bool { return r >= b.lo && r < b.hi && r < rows }
	n := 0
	if in(row) {
		if col > 0 { // its west pair
			n++
		}
		if row > 0 { // its north pair
			n++
		}
		if col < cols-1 { // the west pair of its east neighbour
			n++
		}
	}
	if in(row + 1) { // the north pair of its south neighbour
		n++
	}
	return n
}

// bandPairs is a GPU clone's pairing rule: the pairs of its band.
type bandPairs struct {
	*bookkeeper.Join[*loaded, align.Pair, pairJob]
	band band
	rows int
}

// Initialize learns the clone's band.
func (r *bandPairs) Initialize(_ context.Context, info task.Info) error {
	r.band = bandOf(info.Clone, max(1, info.Clones), r.rows)
	return nil
}

// bandsOf is the GPU pipeline's decomposition rule: a tile goes to the
// clones whose bands use it, that of its row and, for a tile of the row
// above a band (its halo), that of the band below too.
func bandsOf(rows, cols int) pipeline.Subset[tileRef] {
	return func(t tileRef, clones int, add func(int)) {
		for d := range clones {
			if bandOf(d, clones, rows).uses(rows, cols, t.row, t.col) > 0 {
				add(d)
			}
		}
	}
}

// peaksJob is a pair with its PCIAM peaks, waiting for the CCF.
type peaksJob struct {
	pairJob
	peaks []align.Peak
}

// gpuPairGraph builds the registration graph for GPUs: a pipeline with one
// clone per GPU, in which each tile goes to the clones that use it (one, or
// two for a halo tile: see bandsOf), and each clone
//
//	acquire (its band's tiles) -> read (readers) -> fft (GPU, streams copies)
//	-> pairs bookkeeper -> pciam+ccf (GPU, streams copies)
//
// registers the pairs of its band of rows. A tile's slot holds its
// spectrum (and its pixels, for the CCF) in the clone's device memory and
// returns after the last of the band's pairs that use it. A backend whose
// correlators cannot score offsets (no scorer) gets the CCF on the CPU
// instead: pciam (GPU) -> ccf (CPU, workers copies), with the tiles' host
// copies kept until then.
//
// When the CCF runs on the devices and src corrects its tiles with a flat
// field (CorrectedSource), the graph reads them uncorrected and the
// transformers correct them on the devices, which also sum them. After the
// pipeline a CPU task, "weak pairs" (workers copies), loads the tiles of
// each pair the CCF leaves unconfirmed again from src and gives a
// noise-limited one the CPU's denoised search (align.WeakPairs.Recheck).
//
// With a cache (and the CCF on the devices, and a backend that refines:
// refineBackend), the PCIAM+CCF task also computes the NCC surface of each
// pair around its translation, within cache.radius, while the pair's tiles
// are on the device, for the refinement (see surfaceCache).
func gpuPairGraph(be gpuBackend, src tileio.TileSource, opt align.Options, slots, readers, workers, streams, weakPairs int, cache *surfaceCache) (*graph.Graph[tileRef, pairDone], error) {
	rows, cols := src.Rows(), src.Cols()
	w, h := src.TileSize()
	_, onDevice := be.newCorrelator(w, h, opt).(scorer)
	var ff *align.FlatField
	hostSrc := src // corrected on the host: for the pairs the CCF leaves unconfirmed
	if cs, ok := src.(correctedSource); ok && onDevice {
		src, ff = cs.TileSource, cs.ff
	}
	devs, streams, err := gpuClones(be.devices(), streams)
	if err != nil {
		return nil, err
	}

	g := graph.New[tileRef, pairDone]("registration")
	cg := graph.New[tileRef, pairDone]("gpu")
	pool := memmgr.New(cg, "spectra", slots, be.spectra(w, h), memmgr.Dynamic(), memmgr.Reclaim())
	clone := func(ctx context.Context) band {
		info, _ := task.InfoFrom(ctx)
		return bandOf(info.Clone, max(1, info.Clones), rows)
	}
	acquire, read := acquireRead(cg, pool, src, readers, func(ctx context.Context, t tileRef) int {
		return clone(ctx).uses(rows, cols, t.row, t.col)
	})
	fft := graph.AddTask(cg, "fft", streams, func() task.Task[*loaded, *loaded] {
		return &fftTask{tr: be.newTransformer(w, h, opt, ff), dropHost: onDevice}
	})
	bk := bookkeeper.New[*loaded](cg, "pairs")
	pairs := bookkeeper.AddRule(bk, "both tiles ready", func() bookkeeper.Rule[*loaded, pairJob] {
		r := &bandPairs{rows: rows}
		r.Join = newPairRule(rows, cols, func(p align.Pair) bool { return r.band.has(p) })
		return r
	})
	graph.Connect(cg.Input(), acquire)
	graph.Connect(acquire, read)
	graph.Connect(read, fft)
	graph.Connect(fft, bk)
	// Scratch of noise-limited pairs, shared by the copies (and with the
	// refinements ahead, if any).
	weak := align.NewWeakPairs(weakPairs)
	if a := cache.aheadOf(); a != nil {
		weak = a.weak
	}
	if onDevice {
		// PCIAM and CCF on the device: the pair's translation comes back.
		pciam := graph.AddTask(cg, "pciam+ccf", streams, func() task.Task[pairJob, pairDone] {
			sc := be.newCorrelator(w, h, opt).(scorer)
			t := &pciamTask{phases: phases{sc}, sc: sc, n: opt.EffectivePeakCount(), max: opt.EffectiveMaxPeakCount(), w: w, h: h, opt: opt}
			if rb, ok := be.(refineBackend); ok && cache != nil {
				t.box, t.cache = rb.newBoxScorer(w, h), cache
			}
			return t
		})
		graph.Connect(pairs, pciam)
		graph.Connect(pciam, cg.Output())
	} else {
		pciam := graph.AddTask(cg, "pciam", streams, func() task.Task[pairJob, peaksJob] {
			return &peaksTask{phases: phases{be.newCorrelator(w, h, opt)}, n: opt.EffectiveMaxPeakCount()}
		})
		ccfTask := graph.AddFunc(cg, "ccf", workers, func(_ context.Context, j peaksJob, out task.Emitter[pairDone]) error {
			tr := weak.ChoosePeak(j.t1.img, j.t2.img, j.pair.Dir, j.peaks, opt)
			if err := errors.Join(j.t1.dev.Release(), j.t2.dev.Release()); err != nil {
				return err
			}
			return out.Emit(pairDone{pair: j.pair, tr: tr})
		})
		graph.Connect(pairs, pciam)
		graph.Connect(pciam, ccfTask)
		graph.Connect(ccfTask, cg.Output())
	}

	gpus := pipeline.NewSubset(g, "gpus", cg, devs, bandsOf(rows, cols))
	graph.Connect(g.Input(), gpus)
	if !onDevice {
		graph.Connect(gpus, g.Output())
		return g, nil
	}
	// The device's CCF leaves a pair unconfirmed below ConfidentCorr, and
	// its host tiles are gone: they are loaded again (corrected) and a
	// noise-limited pair gets the CPU's denoised search, on workers CPU
	// copies beside the GPUs, so that ChoosePeak's choice stands as on the
	// CPU. Confirmed pairs pass through.
	ahead := cache.aheadOf()
	recheck := graph.AddFunc(g, "weak pairs", workers, func(_ context.Context, d pairDone, out task.Emitter[pairDone]) error {
		if d.tr.Corr >= align.ConfidentCorr {
			ahead.add(d.pair, d.tr)
			return out.Emit(d)
		}
		nr, nc := d.pair.Neighbor()
		t1, err := loadChecked(hostSrc, nr, nc, w, h)
		if err != nil {
			return fmt.Errorf("stitching: %v: reloading a tile of an unconfirmed pair: %w", d.pair, err)
		}
		t2, err := loadChecked(hostSrc, d.pair.Row, d.pair.Col, w, h)
		if err != nil {
			return fmt.Errorf("stitching: %v: reloading a tile of an unconfirmed pair: %w", d.pair, err)
		}
		d.tr = weak.Recheck(t1, t2, d.pair.Dir, d.tr, opt)
		ahead.add(d.pair, d.tr)
		return out.Emit(d)
	})
	graph.Connect(gpus, recheck)
	graph.Connect(recheck, g.Output())
	return g, nil
}

// gpuClones checks that there are GPUs to clone a graph on and returns
// them with the streams per GPU (defaultGPUStreams for 0 or less).
func gpuClones(devs []device.Device, streams int) ([]device.Device, int, error) {
	if len(devs) == 0 {
		return nil, 0, ErrNoGPU
	}
	if streams <= 0 {
		streams = defaultGPUStreams
	}
	return devs, streams, nil
}

// acquireRead adds a GPU clone's first two tasks: "acquire" (one copy,
// taking device slots in traversal order, see pairGraph) gives each tile a
// slot of pool that returns after uses(ctx, tile) releases, and "read"
// (readers copies) loads the tile's pixels on the host. uses is the number
// of the clone's pairs that need the tile; 0 is an error, since the
// pipeline's rule sends a tile only to the clones that use it.
func acquireRead(cg *graph.Graph[tileRef, pairDone], pool *memmgr.Pool[devSpectrum], src tileio.TileSource, readers int,
	uses func(context.Context, tileRef) int) (acquire *graph.Node[tileRef, *loaded], read *graph.Node[*loaded, *loaded]) {
	w, h := src.TileSize()
	acq := graph.AddFunc(cg, "acquire", 1, func(ctx context.Context, t tileRef, out task.Emitter[*loaded]) error {
		n := uses(ctx, t)
		if n == 0 {
			return fmt.Errorf("stitching: tile (%d, %d) routed to a GPU clone whose band does not use it", t.row, t.col)
		}
		buf, err := pool.GetShared(ctx, n)
		if err != nil {
			return err
		}
		return out.Emit(&loaded{row: t.row, col: t.col, dev: buf})
	})
	memmgr.Use(pool, acq)
	read = graph.AddFunc(cg, "read", readers, func(_ context.Context, l *loaded, out task.Emitter[*loaded]) error {
		img, err := loadChecked(src, l.row, l.col, w, h)
		if err != nil {
			return err
		}
		l.img = img
		return out.Emit(l)
	})
	return acq, read
}

// pixelSum returns the sum of a tile's pixels: its DC coefficient, also
// that of its periodic component.
func pixelSum(img *image.Gray16) float64 {
	b := img.Bounds()
	var s uint64
	for y := b.Min.Y; y < b.Max.Y; y++ {
		row := img.Pix[img.PixOffset(b.Min.X, y):img.PixOffset(b.Max.X, y)]
		for i := 0; i+1 < len(row); i += 2 {
			s += uint64(row[i])<<8 | uint64(row[i+1])
		}
	}
	return float64(s)
}

// fftTask is one copy of a GPU clone's FFT task. With dropHost (the
// device keeps the pixels) the tile's host copy is dropped after the
// transform.
type fftTask struct {
	tr       transformer
	dropHost bool
}

func (t *fftTask) Initialize(ctx context.Context, info task.Info) error {
	return phase.Initialize(ctx, t.tr, info)
}

func (t *fftTask) Shutdown(ctx context.Context) error { return phase.Shutdown(ctx, t.tr) }

func (t *fftTask) Execute(ctx context.Context, l *loaded, out task.Emitter[*loaded]) error {
	dc, err := t.tr.forward(ctx, l.img, l.dev.Data)
	if err != nil {
		return fmt.Errorf("stitching: FFT of tile (%d, %d) on the GPU: %w", l.row, l.col, err)
	}
	l.dc = dc
	if t.dropHost {
		l.img = nil
	}
	return out.Emit(l)
}

// phases gives a task the optional phases of its correlator.
type phases struct{ c correlator }

func (p phases) Initialize(ctx context.Context, info task.Info) error {
	return phase.Initialize(ctx, p.c, info)
}

func (p phases) Shutdown(ctx context.Context) error { return phase.Shutdown(ctx, p.c) }

// peaksTask is one copy of a GPU clone's PCIAM task when the CCF runs on
// the CPU.
type peaksTask struct {
	phases
	n int
}

func (t *peaksTask) Execute(ctx context.Context, j pairJob, out task.Emitter[peaksJob]) error {
	ps, err := t.c.peaks(ctx, j.t1.dev.Data, j.t2.dev.Data, j.t1.dc, j.t2.dc, t.n)
	if err != nil {
		return fmt.Errorf("stitching: PCIAM of %v on the GPU: %w", j.pair, err)
	}
	return out.Emit(peaksJob{pairJob: j, peaks: append([]align.Peak(nil), ps...)})
}

// pciamTask is one copy of a GPU clone's PCIAM+CCF task: peaks, then the
// CCF of their candidates, on the device. It extracts the first n peaks,
// and the others up to max only when those give no confident match: the
// translation is the one align.ChoosePeak gives for all max peaks (before
// its denoised search of a noise-limited pair, which the graph's "weak
// pairs" task runs on the host).
type pciamTask struct {
	phases
	sc     scorer
	n, max int
	w, h   int
	opt    align.Options
	// With a cache: the pair's NCC surface around its translation goes
	// there, computed by box.
	box   boxScorer
	cache *surfaceCache
	// The offsets scored for the current pair and their correlations:
	// the second choice, over all the peaks, scores only new offsets.
	offs [][2]int
	corr []float64
}

func (t *pciamTask) Execute(ctx context.Context, j pairJob, out task.Emitter[pairDone]) error {
	f1, f2 := j.t1.dev.Data, j.t2.dev.Data
	ps, err := t.sc.peaks(ctx, f1, f2, j.t1.dc, j.t2.dc, t.n)
	if err != nil {
		return fmt.Errorf("stitching: PCIAM of %v on the GPU: %w", j.pair, err)
	}
	t.offs, t.corr = t.offs[:0], t.corr[:0]
	score := func(offs [][2]int, corr []float64) error { return t.score(ctx, f1, f2, offs, corr) }
	tr, err := align.ChoosePeakScored(t.w, t.h, j.pair.Dir, ps, t.opt, score)
	if err == nil && !(tr.Corr >= align.ConfidentCorr) && len(ps) == t.n && t.max > t.n {
		// Not confident: ChoosePeak would go on to the next peaks. With
		// all of them it chooses as it does.
		if ps, err = t.sc.more(ctx, t.max); err != nil {
			return fmt.Errorf("stitching: PCIAM of %v on the GPU: %w", j.pair, err)
		}
		tr, err = align.ChoosePeakScored(t.w, t.h, j.pair.Dir, ps, t.opt, score)
	}
	if err != nil {
		return fmt.Errorf("stitching: CCF of %v on the GPU: %w", j.pair, err)
	}
	if t.box != nil {
		if err := t.cache.compute(ctx, t.box, j.pair, f1, f2, t.w, t.h, tr); err != nil {
			return fmt.Errorf("stitching: NCC surface of %v on the GPU: %w", j.pair, err)
		}
	}
	if err := errors.Join(j.t1.dev.Release(), j.t2.dev.Release()); err != nil {
		return err
	}
	return out.Emit(pairDone{pair: j.pair, tr: tr})
}

func (t *pciamTask) Initialize(ctx context.Context, info task.Info) error {
	if err := t.phases.Initialize(ctx, info); err != nil {
		return err
	}
	return phase.Initialize(ctx, t.box, info)
}

func (t *pciamTask) Shutdown(ctx context.Context) error {
	return errors.Join(phase.Shutdown(ctx, t.box), t.phases.Shutdown(ctx))
}

// score fills corr for offs, on the device for the offsets not scored yet
// for this pair.
func (t *pciamTask) score(ctx context.Context, f1, f2 devSpectrum, offs [][2]int, corr []float64) error {
	var todo [][2]int
	var at []int
	for i, o := range offs {
		if k := slices.Index(t.offs, o); k >= 0 {
			corr[i] = t.corr[k]
		} else {
			todo, at = append(todo, o), append(at, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	got := make([]float64, len(todo))
	if err := t.sc.score(ctx, f1, f2, todo, got); err != nil {
		return err
	}
	for k, i := range at {
		corr[i] = got[k]
	}
	t.offs, t.corr = append(t.offs, todo...), append(t.corr, got...)
	return nil
}

// CheckGPU reports whether GraphOptions.GPU can work in this program on
// this machine: nil, or an error wrapping [ErrNoGPUBuild] (built without
// the cuda tag) or [ErrNoGPU] (no usable GPU). Programs call it to fail
// early, before reading any tile.
func CheckGPU() error {
	_, err := newCUDABackend()
	return err
}
