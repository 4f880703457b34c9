package cap

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/cputime"
	"github.com/gohtgs/htgs/task"
	"github.com/gohtgs/htgs/tiled"
)

// Terms are the per-tile times of CAP's performance model (Gennart et al.,
// section 3.3) for one construct, operation and tile size. MeasureTerms
// and MeasureGatherTerms time Td, Tp and Tm inside the construct as it
// runs (one worker), each stage's own work only.
type Terms struct {
	// Td reads one tile (with its halo) from the source's tile file
	// through its tile cache, cold at the start: CAP's disk access t_d.
	Td time.Duration
	// Tp processes one tile: t_p.
	Tp time.Duration
	// Tn hands one tile through the graph's three stages with no work
	// done: the queues that replace CAP's network transfer t_n in one
	// address space.
	Tn time.Duration
	// Tm writes one tile into the output image, flush included: CAP's
	// store t_m; in a Gather, merging one partial result (CAP's merge).
	Tm time.Duration
	// Ts builds, starts and stops the construct's graph with its pools
	// (see MeasureStart): a fixed cost CAP's equation leaves out, which
	// PredictShared adds.
	Ts time.Duration
	// To is the construct's own elapsed time per tile with the run's
	// workers and nothing to compute (MeasureOverhead): reads and writes
	// through the tile caches, pool hand-offs, goroutine wake-ups, all
	// stages running at once. Zero: not measured.
	To time.Duration
	// Uo is the processor time per tile of that run (MeasureOverhead).
	Uo time.Duration
	// Gather says the terms are a Gather's: Tm is the caller's merge,
	// work the overhead run leaves out, in one thread; otherwise Tm is
	// the construct's write, which To and Uo include.
	Gather bool
}

// Predict is CAP's equation (1) for n tiles on p workers:
// T = t_d + ceil(n/p)·t_p + p·t_n + t_m. CAP assumes every worker has a
// processor of its own and that disk and network work by DMA, so the
// single-tile read, hand-off and write are all that shows besides the
// processing; p may be fractional (workers times the processors' share).
func (m Terms) Predict(n int, p float64) time.Duration {
	if p <= 0 {
		p = 1
	}
	return m.Td + time.Duration(math.Ceil(float64(n)/p))*m.Tp + time.Duration(p*float64(m.Tn)) + m.Tm
}

// PredictShared adapts equation (1) to one machine with c processors
// (possibly fractional: the share a loaded machine gives) shared by all
// stages, where reading and writing a tile cost processor time instead of
// DMA. It is Ts plus the largest of these bounds on the run:
//
//   - equation (1) with min(p, c) workers, plus, when the overhead terms
//     are measured (MeasureOverhead), n·To: each tile's own cost in the
//     construct (cache copies, pool hand-offs, goroutine wake-ups), which
//     on processors shared by every stage does not overlap the
//     processing as CAP's DMA transfers do;
//   - with the overhead terms: all processor work over c processors,
//     n·(Uo + Tp)/c, and in a Gather the one-thread merge, n·Tm + Tp,
//     whose work the overhead run leaves out: n·(Uo + Tp + Tm)/c;
//   - without them (To and Uo zero): the one-thread read or write stage,
//     n·max(Td, Tm) + Tp (CAP's condition t_d < t_p failing), and all
//     stages' work over c processors, n·(Td + Tp + Tm + 3·Tn)/c.
//
// The overhead terms are what makes the prediction honest for cheap
// per-tile work (microseconds), where that per-tile cost, which the
// stage terms miss, takes most of the time.
func (m Terms) PredictShared(n int, p, c float64) time.Duration {
	if c <= 0 {
		c = 1
	}
	nd := time.Duration(n)
	eq1 := m.Predict(n, min(p, c))
	if m.To == 0 && m.Uo == 0 {
		stage := nd*max(m.Td, m.Tm) + m.Tp
		cpu := time.Duration(float64(n) * float64(m.Td+m.Tp+m.Tm+3*m.Tn) / c)
		return m.Ts + max(eq1, stage, cpu)
	}
	work := m.Tp
	var merge time.Duration
	if m.Gather {
		work += m.Tm
		merge = nd*m.Tm + m.Tp
	}
	cpu := time.Duration(float64(n) * float64(m.Uo+work) / c)
	return m.Ts + max(nd*m.To+eq1, merge, cpu)
}

// MeasureStart is the time to build a Process (halo 0) or Exchange of f
// from src to dst with options o, and run it over no tiles: graph and
// pool set-up and tear-down, the Ts of Terms.
func MeasureStart(ctx context.Context, src, dst *tiled.Image, halo int, o Options, f ProcessFunc) (time.Duration, error) {
	t0 := time.Now()
	err := Run(ctx, store("start", src, dst, halo, o, f, nil), nil)
	return time.Since(t0), err
}

// MeasureGatherStart is MeasureStart for a Gather.
func MeasureGatherStart[A any](ctx context.Context, src *tiled.Image, o Options, process func(context.Context, *Tile) (A, error), merge func(A) error) (time.Duration, error) {
	t0 := time.Now()
	err := Run(ctx, Gather(src, o, process, merge), nil)
	return time.Since(t0), err
}

// MeasureTerms measures Terms for a Process (halo 0) or Exchange (halo >
// 0) of f over every tile of the images open returns (called once; the
// images must start with cold caches: fresh from tiled.Open or Create). It
// runs the construct itself with one worker and times each stage's own
// work as it runs there, so that what one stage does to another (caches,
// processors and memory they share) counts: Td is the read stage's
// reading of a tile with its halo, Tp the process function, Tm the write
// stage's writing of a tile (plus the final flush, spread over the tiles);
// Tn comes from a graph of the same shape whose tasks do nothing (see
// Terms). It leaves dst as the construct would, and closes what open
// returns.
func MeasureTerms(ctx context.Context, open func() (src, dst *tiled.Image, err error), halo int, f ProcessFunc) (Terms, error) {
	src, dst, err := open()
	if err != nil {
		return Terms{}, err
	}
	defer src.Close()
	defer dst.Close()
	pr := &probe{}
	var tp atomic.Int64
	timed := func(ctx context.Context, t *Tile, out []uint16) error {
		t0 := time.Now()
		err := f(ctx, t, out)
		tp.Add(int64(time.Since(t0)))
		return err
	}
	if err := Run(ctx, store("measure", src, dst, halo, Options{Copies: 1}, timed, pr), src.Tiles()); err != nil {
		return Terms{}, err
	}
	t0 := time.Now()
	if err := dst.Flush(); err != nil {
		return Terms{}, err
	}
	pr.write.Add(int64(time.Since(t0)))
	return terms(ctx, len(src.Tiles()), pr.read.Load(), tp.Load(), pr.write.Load())
}

// MeasureGatherTerms measures Terms for a Gather of process and merge
// over every tile of the image open returns (cold cache), as MeasureTerms
// does (the construct with one worker, each stage timed where it runs);
// Tm is merging one partial result, and Gather is set. It closes the
// image.
func MeasureGatherTerms[A any](ctx context.Context, open func() (*tiled.Image, error), process func(context.Context, *Tile) (A, error), merge func(A) error) (Terms, error) {
	src, err := open()
	if err != nil {
		return Terms{}, err
	}
	defer src.Close()
	pr := &probe{}
	var tp, tm atomic.Int64
	timedProcess := func(ctx context.Context, t *Tile) (A, error) {
		t0 := time.Now()
		a, err := process(ctx, t)
		tp.Add(int64(time.Since(t0)))
		return a, err
	}
	timedMerge := func(a A) error {
		t0 := time.Now()
		err := merge(a)
		tm.Add(int64(time.Since(t0)))
		return err
	}
	if err := Run(ctx, gather(src, Options{Copies: 1}, timedProcess, timedMerge, pr), src.Tiles()); err != nil {
		return Terms{}, err
	}
	m, err := terms(ctx, len(src.Tiles()), pr.read.Load(), tp.Load(), tm.Load())
	m.Gather = true
	return m, err
}

// terms divides the stages' total times over n tiles and measures Tn.
func terms(ctx context.Context, n int, td, tp, tm int64) (Terms, error) {
	tn, err := handOff(ctx, n)
	if err != nil {
		return Terms{}, err
	}
	d := time.Duration(max(n, 1))
	return Terms{Td: time.Duration(td) / d, Tp: time.Duration(tp) / d, Tn: tn, Tm: time.Duration(tm) / d}, nil
}

// handOff is the time per item of a graph shaped like Process's (read,
// one process copy, write) whose tasks do nothing, over n items.
func handOff(ctx context.Context, n int) (time.Duration, error) {
	g := graph.New[tiled.Coord, tiled.Coord]("hand-off")
	pass := func(_ context.Context, t *Tile, out task.Emitter[*Tile]) error { return out.Emit(t) }
	read := graph.AddFunc(g, "read", 1, func(_ context.Context, c tiled.Coord, out task.Emitter[*Tile]) error {
		return out.Emit(&Tile{C: c})
	})
	proc := graph.AddFunc(g, "process", 1, pass)
	write := graph.AddFunc(g, "write", 1, func(_ context.Context, t *Tile, out task.Emitter[tiled.Coord]) error {
		return out.Emit(t.C)
	})
	chain(g, read, proc, write)
	cs := make([]tiled.Coord, max(n, 1))
	t0 := time.Now()
	if err := Run(ctx, g, cs); err != nil {
		return 0, err
	}
	return time.Since(t0) / time.Duration(len(cs)), nil
}

// MeasureOverhead is the construct's own cost per tile, apart from the
// work it is given: it runs a Process (halo 0) or Exchange with options o
// and a process function that does nothing over every tile of the images
// open returns (called once; cold caches; it closes them, and dst's
// pixels are left undefined). It returns the start-up time with no tiles
// (ts, as MeasureStart), the elapsed time per tile beyond it (to: cache
// reads and writes, pool hand-offs and goroutine wake-ups, every stage
// running at once as in a real run) and the processor time per tile
// (uo: user and system time of the whole process, so other goroutines'
// work counts too; 0 where unknown).
func MeasureOverhead(ctx context.Context, open func() (src, dst *tiled.Image, err error), halo int, o Options) (ts, to, uo time.Duration, err error) {
	src, dst, err := open()
	if err != nil {
		return 0, 0, 0, err
	}
	defer src.Close()
	defer dst.Close()
	nop := func(context.Context, *Tile, []uint16) error { return nil }
	return overhead(func(tiles []tiled.Coord) error {
		if err := Run(ctx, store("overhead", src, dst, halo, o, nop, nil), tiles); err != nil {
			return err
		}
		return dst.Flush()
	}, src.Tiles())
}

// MeasureGatherOverhead is MeasureOverhead for a Gather: a process
// function that does nothing and a merge that does nothing, so the merge
// of the caller's partials (Tm) is not part of to or uo.
func MeasureGatherOverhead(ctx context.Context, open func() (*tiled.Image, error), o Options) (ts, to, uo time.Duration, err error) {
	src, err := open()
	if err != nil {
		return 0, 0, 0, err
	}
	defer src.Close()
	nop := func(context.Context, *Tile) (struct{}, error) { return struct{}{}, nil }
	merge := func(struct{}) error { return nil }
	return overhead(func(tiles []tiled.Coord) error {
		return Run(ctx, Gather(src, o, nop, merge), tiles)
	}, src.Tiles())
}

// overhead times run over no tiles (ts, the faster of a run before and
// one after, so that one preempted start-up does not swallow the tiles'
// time), then over tiles, and returns the per-tile elapsed time beyond ts
// and processor time.
func overhead(run func([]tiled.Coord) error, tiles []tiled.Coord) (ts, to, uo time.Duration, err error) {
	start := func() (time.Duration, error) {
		t0 := time.Now()
		err := run(nil)
		return time.Since(t0), err
	}
	ts, err = start()
	if err != nil {
		return 0, 0, 0, err
	}
	c0, t0 := cputime.Process(), time.Now()
	if err := run(tiles); err != nil {
		return 0, 0, 0, err
	}
	el, cpu := time.Since(t0), cputime.Process()-c0
	ts2, err := start()
	if err != nil {
		return 0, 0, 0, err
	}
	ts = min(ts, ts2)
	n := time.Duration(max(len(tiles), 1))
	return ts, max(0, el-ts) / n, cpu / n, nil
}
