// Package memmgr provides HTGS memory edges: bounded pools of buffers that
// tasks get before producing data and release when the data is used up.
//
// A pool bounds how much data is alive at once. Get blocks while every
// buffer is out, which slows the producer down to the pace of the consumers
// (back-pressure), and gives up when the task's context is cancelled; the
// time spent waiting is recorded as the task's memory-wait time. Each buffer
// carries a release count, given to Get: it goes back to the pool after
// that many calls of its Release method (a stitching FFT is released by
// each of its 2, 3 or 4 neighbours).
//
//	pool := memmgr.New(g, "fft", 16, memmgr.Slices[complex128](w*h))
//	memmgr.Use(pool, fftTask) // fftTask gets memory from pool
//	...
//	// in fftTask's Execute:
//	buf, err := pool.GetShared(ctx, neighbours)
//	...
//	// in each consumer, when done with it:
//	err := buf.Release()
//
// A [SizedPool] ([NewSized]) sizes each buffer per request instead, as
// HTGS's dynamic memory does: its Get takes an element count, and the
// buffer is freed on its last release.
//
// A pool declared in a graph is instantiated with the graph: every run, and
// every execution-pipeline clone, has its own buffers (allocated with the
// clone's device). When the run ends the pool frees its buffers; buffers
// still out are reported in the log and freed when released. An allocator
// that fails or panics is an error of the run naming the pool: from Start
// when a pool is filled, from Get (and so from the task) for a [Dynamic]
// pool, and from Wait when the pool frees its buffers at the end (a late
// release returns it instead). Misuse is an error, never a hang: releasing
// a buffer more often than its count allows ([ErrDoubleRelease]), and Get
// after the run ended ([ErrClosed]).
package memmgr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/core"
	"github.com/gohtgs/htgs/task"
)

// Errors of pool misuse.
var (
	ErrDoubleRelease = errors.New("htgs: buffer released after it went back to its pool")
	ErrClosed        = errors.New("htgs: pool is closed (the graph run has ended)")
	ErrNoScope       = errors.New("htgs: Get needs the context of a running task")
)

// Option configures a pool: [Dynamic], [Reclaim].
type Option interface{ applyPool(*config) }

// poolOption is an Option made of a function.
type poolOption func(*config)

func (f poolOption) applyPool(c *config) { f(c) }

type config struct{ dynamic, reclaim bool }

// Dynamic makes a pool that allocates buffers on demand, never more than its
// capacity, instead of all of them when the run starts (the default).
func Dynamic() Option { return poolOption(func(c *config) { c.dynamic = true }) }

// Reclaim declares that the pool's buffers never leave the graph (device
// memory that tasks copy out of before emitting results, for instance).
// When the run ends, buffers still out are then freed at once instead of
// when they are released: after a failure or a cancellation, the values
// dropped from the queues hold buffers that nobody will release. Releasing
// a reclaimed buffer later does nothing.
func Reclaim() Option { return poolOption(func(c *config) { c.reclaim = true }) }

// Pool is a memory pool declared in a graph. Its methods find the pool
// instance of the calling task's run and pipeline clone through ctx.
type Pool[T any] struct {
	name     string
	capacity int
	alloc    Allocator[T]
	sized    SizedAllocator[T] // set instead of alloc for a SizedPool
	cfg      config
	spec     *core.Spec
	bp       *core.Blueprint
}

// New declares a pool named name of capacity buffers made by alloc in the
// graph b.
func New[T any](b graph.Builder, name string, capacity int, alloc Allocator[T], opts ...Option) *Pool[T] {
	p := &Pool[T]{name: name, capacity: capacity, alloc: alloc, bp: core.BlueprintOf(b)}
	for _, o := range opts {
		o.applyPool(&p.cfg)
	}
	p.spec = &core.Spec{Name: name, Kind: core.KindMemory, Extra: p}
	p.spec.Build = p.build
	p.bp.Add(p.spec)
	return p
}

// Name returns the pool's name.
func (p *Pool[T]) Name() string { return p.name }

// Capacity returns the number of buffers of each pool instance.
func (p *Pool[T]) Capacity() int { return p.capacity }

// Declared is a pool declared in a graph: a [*Pool] or a [*SizedPool],
// for [Use]. Only this package's pools implement it.
type Declared interface {
	Name() string
	declared() (*core.Spec, *core.Blueprint)
}

func (p *Pool[T]) declared() (*core.Spec, *core.Blueprint) { return p.spec, p.bp }

// Use declares that the given tasks get memory from pool (the memory
// edges of HTGS). Pools work without it; it shapes the graph's picture,
// and a declared getter must belong to the pool's graph.
func Use(pool Declared, getters ...graph.Vertex) {
	spec, bp := pool.declared()
	for _, g := range getters {
		s := core.SpecOf(g)
		if s == nil || s.BP != bp {
			bp.Errorf("htgs: pool %q: memory edge to a node of another graph", pool.Name())
			continue
		}
		bp.MemEdges = append(bp.MemEdges, core.MemEdge{Pool: spec, Getter: s})
	}
}

// Get takes a buffer from the pool instance of the calling task, waiting
// while none is free. The buffer goes back to the pool when its Release
// method is called. ctx must be (or derive from) the context given to the
// task.
func (p *Pool[T]) Get(ctx context.Context) (*Buffer[T], error) {
	return p.GetShared(ctx, 1)
}

// GetShared is [Pool.Get] for a buffer that holders tasks (or values) hold
// at once: it goes back to the pool after holders calls of its Release
// method, one by each holder (holders < 1 is taken as 1). A stitching FFT,
// for one, is held by each of its 2, 3 or 4 neighbouring pairs.
func (p *Pool[T]) GetShared(ctx context.Context, holders int) (*Buffer[T], error) {
	in, err := p.instance(ctx)
	if err != nil {
		return nil, err
	}
	return in.get(ctx, holders, 0)
}

func (p *Pool[T]) instance(ctx context.Context) (*instance[T], error) {
	c := core.CopyFrom(ctx)
	if c == nil {
		return nil, fmt.Errorf("pool %q: %w", p.name, ErrNoScope)
	}
	v, ok := c.Lookup(p.spec)
	if !ok {
		return nil, fmt.Errorf("htgs: pool %q is not declared in the graph of this task (or an enclosing one)", p.name)
	}
	return v.(*instance[T]), nil
}

// Buffer is one use of a pooled buffer: the value returned by Get, shared by
// everyone who releases it.
type Buffer[T any] struct {
	// Data is the pooled buffer itself.
	Data T

	inst *instance[T]
	slot *slot[T]
	left atomic.Int64 // releases still due
}

// Release records one release; after the number of releases given to Get,
// the buffer goes back to its pool. Releasing a buffer that already went
// back is ErrDoubleRelease. A release after the run ended frees the buffer
// at once, and returns the allocator's error if that fails.
func (b *Buffer[T]) Release() error {
	n := b.left.Add(-1)
	if n < 0 {
		return fmt.Errorf("pool %q: %w", b.inst.name, ErrDoubleRelease)
	}
	if n == 0 {
		return b.inst.put(b.slot)
	}
	return nil
}

type slot[T any] struct {
	data      T
	reclaimed bool // freed by close; guarded by the instance's mu
}

// instance is a pool in one run (and pipeline clone). Free buffers sit in a
// mutex-guarded stack; a waiting Get sleeps on the wake channel so that it
// can also watch its context.
type instance[T any] struct {
	name     string
	capacity int
	alloc    Allocator[T]
	sized    SizedAllocator[T] // a SizedPool's: buffers made per Get, freed per release
	dev      device.Device
	log      *slog.Logger
	reclaim  bool

	mu        sync.Mutex
	free      []*slot[T]
	out       map[*slot[T]]struct{} // buffers out, kept only when reclaim
	allocated int
	waiters   int
	closed    bool
	wake      chan struct{} // a token per put while Gets wait
	stop      chan struct{} // closed with the pool

	inUse atomic.Int64
	peak  atomic.Int64
	waits atomic.Int64
}

func (p *Pool[T]) build(sc *core.Scope) (core.Instance, error) {
	full := sc.FullName(p.name)
	if p.capacity < 1 {
		return nil, fmt.Errorf("htgs: pool %q: capacity %d, want at least 1", full, p.capacity)
	}
	if p.alloc == nil && p.sized == nil {
		return nil, fmt.Errorf("htgs: pool %q: nil allocator", full)
	}
	dev := sc.Device
	if dev == nil {
		dev = device.Host{}
	}
	in := &instance[T]{name: full, capacity: p.capacity, alloc: p.alloc, sized: p.sized, dev: dev, log: sc.Run.Log, reclaim: p.cfg.reclaim,
		free: make([]*slot[T], 0, p.capacity), wake: make(chan struct{}, p.capacity), stop: make(chan struct{})}
	if !p.cfg.dynamic && p.sized == nil {
		for range p.capacity {
			s, err := in.newSlot(0)
			if err != nil {
				return nil, errors.Join(err, in.close(err))
			}
			in.free = append(in.free, s)
		}
	}
	sc.Set(p.spec, in)
	ps := &core.PoolStats{Name: full, Path: sc.Path, Pipeline: sc.Pipeline, Capacity: p.capacity,
		InUse: func() int { return int(in.inUse.Load()) },
		Peak:  func() int { return int(in.peak.Load()) },
		Waits: in.waits.Load}
	sc.Run.AddPool(ps)
	sc.Run.AddTopoNode(core.TopoNode{ID: full, Label: p.name, Kind: core.KindMemory, Path: sc.Path, Pool: ps})
	if in.reclaim {
		in.out = make(map[*slot[T]]struct{}, p.capacity)
	}
	sc.Run.OnFinish(in.close)
	return poolInst{}, nil
}

// newSlot allocates a buffer (of n elements in a sized pool); in.mu is
// held (or the pool is being built). A panicking allocator is an error
// naming the pool, so the lock is released and the run can end.
func (in *instance[T]) newSlot(n int) (*slot[T], error) {
	var v T
	err := protect(func() (err error) {
		if in.sized != nil {
			v, err = in.sized.AllocSize(in.dev, n)
		} else {
			v, err = in.alloc.Alloc(in.dev)
		}
		return err
	})
	if err != nil {
		if in.sized != nil {
			return nil, fmt.Errorf("htgs: pool %q: allocating %d elements on %s: %w", in.name, n, in.dev.Name(), err)
		}
		return nil, fmt.Errorf("htgs: pool %q: allocating on %s: %w", in.name, in.dev.Name(), err)
	}
	in.allocated++
	return &slot[T]{data: v}, nil
}

// protect calls f, turning a panic into a *task.PanicError.
func protect(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &task.PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	return f()
}

func (in *instance[T]) get(ctx context.Context, releases, n int) (*Buffer[T], error) {
	s, err := in.take(ctx, n)
	if err != nil {
		return nil, err
	}
	out := in.inUse.Add(1)
	for {
		p := in.peak.Load()
		if out <= p || in.peak.CompareAndSwap(p, out) {
			break
		}
	}
	b := &Buffer[T]{Data: s.data, inst: in, slot: s}
	b.left.Store(int64(max(releases, 1)))
	return b, nil
}

// take hands out a free buffer, or allocates one (of n elements in a sized
// pool), waiting while the pool's capacity is out.
func (in *instance[T]) take(ctx context.Context, n int) (*slot[T], error) {
	var waited bool
	var prev core.State
	var t0 time.Time
	var cs *core.CopyStats
	defer func() {
		if waited && cs != nil {
			cs.EndMemoryWait(prev, t0)
		}
	}()
	for {
		in.mu.Lock()
		if in.closed {
			in.mu.Unlock()
			return nil, fmt.Errorf("pool %q: %w", in.name, ErrClosed)
		}
		if k := len(in.free); k > 0 {
			s := in.free[k-1]
			in.free = in.free[:k-1]
			in.markOut(s)
			in.mu.Unlock()
			return s, nil
		}
		if in.allocated < in.capacity {
			s, err := in.newSlot(n)
			if err == nil {
				in.markOut(s)
			}
			in.mu.Unlock()
			return s, err
		}
		in.waiters++
		in.mu.Unlock()

		if !waited {
			waited = true
			in.waits.Add(1)
			if cs = core.StatsFrom(ctx); cs != nil {
				prev, t0 = cs.BeginMemoryWait(in.name)
			}
		}
		var err error
		select {
		case <-in.wake:
		case <-ctx.Done():
			err = context.Cause(ctx)
		case <-in.stop:
			err = fmt.Errorf("pool %q: %w", in.name, ErrClosed)
		}
		in.mu.Lock()
		in.waiters--
		in.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// markOut records a buffer handed out by a reclaiming pool; in.mu is held.
func (in *instance[T]) markOut(s *slot[T]) {
	if in.out != nil {
		in.out[s] = struct{}{}
	}
}

func (in *instance[T]) put(s *slot[T]) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if s.reclaimed {
		return nil // freed when the run ended
	}
	in.inUse.Add(-1)
	if in.out != nil {
		delete(in.out, s)
	}
	if in.closed {
		// The run has ended: free late releases at once.
		return in.freeSlot(s)
	}
	var err error
	if in.sized != nil {
		err = in.freeSlot(s) // sized buffers are made per Get
	} else {
		in.free = append(in.free, s)
	}
	if in.waiters > 0 {
		select {
		case in.wake <- struct{}{}:
		default: // enough tokens are pending already
		}
	}
	return err
}

// freeSlot frees a buffer; in.mu is held. A failing or panicking Free is
// returned as an error naming the pool.
func (in *instance[T]) freeSlot(s *slot[T]) error {
	in.allocated--
	free := func() error {
		if in.sized != nil {
			return in.sized.Free(in.dev, s.data)
		}
		return in.alloc.Free(in.dev, s.data)
	}
	if err := protect(free); err != nil {
		return fmt.Errorf("htgs: pool %q: freeing a buffer on %s: %w", in.name, in.dev.Name(), err)
	}
	return nil
}

// close frees every buffer in the pool, and those still out too for a
// reclaiming pool; it reports buffers still out after a successful run.
// It returns the allocator's failures to free (the first few of them).
func (in *instance[T]) close(runErr error) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil
	}
	in.closed = true
	close(in.stop)
	var errs []error
	free := func(s *slot[T]) {
		// One Free failing usually means they all do: keep a few.
		if err := in.freeSlot(s); err != nil && len(errs) < 3 {
			errs = append(errs, err)
		}
	}
	for _, s := range in.free {
		free(s)
	}
	in.free = nil
	if in.reclaim {
		if n := len(in.out); n > 0 {
			level := slog.LevelDebug
			if runErr == nil {
				level = slog.LevelWarn
			}
			in.log.Log(context.Background(), level, "htgs: reclaiming buffers still out when the graph ended", "pool", in.name, "out", n)
		}
		for s := range in.out {
			s.reclaimed = true
			in.inUse.Add(-1)
			free(s)
		}
		in.out = nil
		return errors.Join(errs...)
	}
	if in.allocated > 0 {
		in.log.Warn("htgs: buffers still out when the graph ended; they are freed when released",
			"pool", in.name, "out", in.allocated)
	}
	return errors.Join(errs...)
}

// poolInst is the (portless) runtime node of a pool.
type poolInst struct{}

func (poolInst) In() any          { return nil }
func (poolInst) Out(int) any      { return nil }
func (poolInst) Launch(*core.Run) {}
