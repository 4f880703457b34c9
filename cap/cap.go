// Package cap builds CAP's tile-parallel constructs (Gennart et al.,
// "computer-aided parallelization") as task graphs over out-of-core tiled
// images (package tiled), reusable by any application:
//
//   - Process: pipelined read -> process -> write over the tiles of an
//     image; reading tile i+1 and writing tile i-1 overlap processing tile i.
//   - Gather: process-and-gather, a map over tiles whose partial results
//     are merged, in one thread, as they arrive.
//   - Exchange: exchange-process-and-store, a neighbourhood operation whose
//     tiles first take a border of halo pixels from their neighbours, then
//     are processed and stored.
//
// Memory is bounded by memmgr pools: at most Options.Slots input and Slots
// output tile buffers are out at once, plus each image's tile cache (whose
// budget is in bytes), whatever the image size.
//
// Terms, MeasureTerms and Predict are CAP's analytic model of a
// construct's time, T = t_d + ceil(T/P)·t_p + P·t_n + t_m, measured on the
// machine; PredictShared adapts it to stages sharing a few processors. See
// docs/cap.md for the constructs, the model against measurements, and a
// picture.
package cap

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
	"github.com/gohtgs/htgs/tiled"
)

// Options size a construct's graph.
type Options struct {
	Copies int // copies of the process task (default 1)
	Slots  int // tile buffers in each pool (default 2*Copies+2)
}

func (o Options) norm() Options {
	if o.Copies <= 0 {
		o.Copies = 1
	}
	if o.Slots <= 0 {
		o.Slots = 2*o.Copies + 2
	}
	return o
}

// Tile is one tile in flight: its coordinate and clipped pixel rectangle in
// the image, and its input pixels with a border of Halo pixels on every
// side (row stride Stride = TW+2*Halo; pixel (x, y) of the tile is at
// In[(y+Halo)*Stride + x+Halo]; outside the image the border repeats the
// edge pixel).
type Tile struct {
	C            tiled.Coord
	X0, Y0, W, H int
	Halo, Stride int
	In           []uint16

	in  *memmgr.Buffer[[]uint16]
	out *memmgr.Buffer[[]uint16]
}

// ProcessFunc computes an output tile (TW*TH values, row stride TW) from t.
type ProcessFunc func(ctx context.Context, t *Tile, out []uint16) error

// BufferBytes is the memory the pools of a Process or Exchange over
// tw x th tiles with the given halo and options hold at most, besides the
// images' tile caches.
func BufferBytes(tw, th, halo int, o Options) int64 {
	o = o.norm()
	in := int64(tw+2*halo) * int64(th+2*halo) * 2
	return int64(o.Slots) * (in + int64(tw)*int64(th)*2)
}

// probe, when not nil, adds up the time a construct's read and write
// stages spend reading and writing tiles (MeasureTerms).
type probe struct{ read, write atomic.Int64 }

// since adds the time since t0 to d when the probe is on.
func (p *probe) since(d *atomic.Int64, t0 time.Time) {
	if p != nil {
		d.Add(int64(time.Since(t0)))
	}
}

// reader adds the pooled read task (with its halo exchange) to g.
func reader(g graph.Builder, src *tiled.Image, halo int, o Options, pr *probe) *graph.Node[tiled.Coord, *Tile] {
	stride := src.TW + 2*halo
	pool := memmgr.New(g, "tiles in", o.Slots, memmgr.Slices[uint16](stride*(src.TH+2*halo)))
	name := "read"
	if halo > 0 {
		name = "read+exchange"
	}
	read := graph.AddFunc(g, name, 1, func(ctx context.Context, c tiled.Coord, out task.Emitter[*Tile]) error {
		b, err := pool.Get(ctx)
		if err != nil {
			return err
		}
		x0, y0, w, h := src.Rect(c)
		var t0 time.Time
		if pr != nil {
			t0 = time.Now()
		}
		// The tile itself and, with a halo, the borders held by its
		// neighbours: in one address space the exchange is a read of the
		// neighbours' edge strips through the shared tile cache.
		if err := src.ReadRect(x0-halo, y0-halo, stride, src.TH+2*halo, b.Data, tiled.Clamp); err != nil {
			b.Release()
			return err
		}
		if pr != nil {
			pr.since(&pr.read, t0)
		}
		return out.Emit(&Tile{C: c, X0: x0, Y0: y0, W: w, H: h, Halo: halo, Stride: stride, In: b.Data, in: b})
	})
	memmgr.Use(pool, read)
	return read
}

// store builds the graph named name that reads each tile (with halo),
// processes it with f and writes it to dst: Process and Exchange.
func store(name string, src, dst *tiled.Image, halo int, o Options, f ProcessFunc, pr *probe) *graph.Graph[tiled.Coord, tiled.Coord] {
	o = o.norm()
	g := graph.New[tiled.Coord, tiled.Coord](name)
	read := reader(g, src, halo, o, pr)
	outPool := memmgr.New(g, "tiles out", o.Slots, memmgr.Slices[uint16](dst.TW*dst.TH))
	proc := graph.AddFunc(g, "process", o.Copies, func(ctx context.Context, t *Tile, out task.Emitter[*Tile]) error {
		b, err := outPool.Get(ctx)
		if err != nil {
			t.in.Release()
			return err
		}
		err = f(ctx, t, b.Data)
		t.in.Release()
		t.In = nil
		if err != nil {
			b.Release()
			return err
		}
		t.out = b
		return out.Emit(t)
	})
	memmgr.Use(outPool, proc)
	write := graph.AddFunc(g, "write", 1, func(ctx context.Context, t *Tile, out task.Emitter[tiled.Coord]) error {
		var t0 time.Time
		if pr != nil {
			t0 = time.Now()
		}
		err := dst.WriteTile(t.C, t.out.Data)
		if pr != nil {
			pr.since(&pr.write, t0)
		}
		t.out.Release()
		if err != nil {
			return err
		}
		return out.Emit(t.C)
	})
	chain(g, read, proc, write)
	return g
}

// chain wires g's input through read, proc and last to its output.
func chain[A, B any](g *graph.Graph[tiled.Coord, tiled.Coord], read *graph.Node[tiled.Coord, A], proc *graph.Node[A, B], last *graph.Node[B, tiled.Coord]) {
	graph.Connect(g.Input(), read)
	graph.Connect(read, proc)
	graph.Connect(proc, last)
	graph.Connect(last, g.Output())
}

// Process builds CAP's pipelined read -> process -> write: every tile sent
// in is read from src, processed by f (Copies copies) and written to dst
// (same tile size), and its coordinate comes out.
func Process(src, dst *tiled.Image, o Options, f ProcessFunc) *graph.Graph[tiled.Coord, tiled.Coord] {
	return store("cap pipeline", src, dst, 0, o, f, nil)
}

// Exchange builds CAP's exchange-process-and-store: as Process, but each
// tile is read with a border of halo pixels taken from its neighbours
// (edge pixels repeated outside the image), so f can compute a
// neighbourhood operation of radius halo exactly.
func Exchange(src, dst *tiled.Image, halo int, o Options, f ProcessFunc) *graph.Graph[tiled.Coord, tiled.Coord] {
	return store("cap exchange-process-and-store", src, dst, halo, o, f, nil)
}

// Gather builds CAP's process-and-gather: each tile sent in is read,
// mapped to a partial result by process (Copies copies) and handed to
// merge, which runs in one thread (so it may update shared state without
// locks); the coordinate comes out once merged.
func Gather[A any](src *tiled.Image, o Options, process func(ctx context.Context, t *Tile) (A, error), merge func(A) error) *graph.Graph[tiled.Coord, tiled.Coord] {
	return gather(src, o, process, merge, nil)
}

// gather is Gather, its read stage timed by pr (when not nil).
func gather[A any](src *tiled.Image, o Options, process func(ctx context.Context, t *Tile) (A, error), merge func(A) error, pr *probe) *graph.Graph[tiled.Coord, tiled.Coord] {
	o = o.norm()
	g := graph.New[tiled.Coord, tiled.Coord]("cap process-and-gather")
	read := reader(g, src, 0, o, pr)
	type part struct {
		c tiled.Coord
		a A
	}
	proc := graph.AddFunc(g, "process", o.Copies, func(ctx context.Context, t *Tile, out task.Emitter[part]) error {
		a, err := process(ctx, t)
		t.in.Release()
		if err != nil {
			return err
		}
		return out.Emit(part{t.C, a})
	})
	gather := graph.AddFunc(g, "merge", 1, func(_ context.Context, p part, out task.Emitter[tiled.Coord]) error {
		if err := merge(p.a); err != nil {
			return err
		}
		return out.Emit(p.c)
	})
	chain(g, read, proc, gather)
	return g
}

// Run sends tiles through g and waits for it to finish.
func Run(ctx context.Context, g *graph.Graph[tiled.Coord, tiled.Coord], tiles []tiled.Coord) error {
	return g.Run(ctx, slices.Values(tiles), func(tiled.Coord) error { return nil })
}
