package core

import (
	"context"
	"runtime/pprof"
	"sync/atomic"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/task"
)

// shape is what instantiating a blueprint at the root of a run needs that
// depends only on the blueprint: it is computed at the first Start after
// the blueprint changed, and shared (read-only) by every later Start.
type shape struct {
	version uint64
	specs   int
	edges   int
	// sides[i][k] is the context carrying the task.Info and the profiler
	// labels of copy k of spec i (a task or bookkeeper), with no parent of
	// its own; a copy's context looks values up there first, then in the
	// run's context (see copyCtx). sides[i] is nil for other specs.
	sides [][]context.Context
	// flat tells whether the blueprint is made of tasks, bookkeepers and
	// memory pools only: the wiring of a run is then the blueprint's, and
	// whether it has a cycle (cyclic: 0 not known yet, 1 yes, 2 no) is
	// found by the first run and kept.
	flat   bool
	cyclic atomic.Int32
	// checked is set once a run of a flat blueprint passed CheckOutputs
	// and Run.Validate, which later runs then skip.
	checked atomic.Bool
}

// maxCachedCopies bounds the copies of a node whose contexts are cached.
const maxCachedCopies = 1 << 12

// shape returns b's cached shape, computing it if b changed since.
func (b *Blueprint) shape() *shape {
	if s := b.cache.Load(); s != nil && s.version == b.version && s.specs == len(b.Specs) && s.edges == len(b.Edges) {
		return s
	}
	s := &shape{version: b.version, specs: len(b.Specs), edges: len(b.Edges), flat: true}
	s.sides = make([][]context.Context, len(b.Specs))
	for _, sp := range b.Specs {
		switch sp.Kind {
		case KindTask, KindBookkeeper, KindMemory:
		default:
			s.flat = false
		}
		if sp.Inner != nil {
			s.flat = false
		}
	}
	s.makeSides(b)
	if s.flat && forward(b) {
		s.cyclic.Store(2) // no cycle
	}
	b.cache.Store(s)
	return s
}

// forward reports whether every edge of b goes from a spec to one added
// after it (or from the graph's input, or to its output): then b has no
// cycle. Graphs are usually built in this order.
func forward(b *Blueprint) bool {
	for _, e := range b.Edges {
		if e.From.Spec != nil && e.To.Spec != nil && e.From.Spec.index >= e.To.Spec.index {
			return false
		}
	}
	return true
}

// makeSides makes the contexts of s.sides. They are kept with the
// blueprint's shape, so a graph started many times makes them once; a
// graph built anew for each run makes them at each Start.
func (s *shape) makeSides(b *Blueprint) {
	for i, sp := range b.Specs {
		if !hasCopies(sp) {
			continue
		}
		lctx := pprof.WithLabels(context.Background(), pprof.Labels("htgs.pipeline", "0", "htgs.task", sp.Name))
		cs := make([]context.Context, sp.Copies)
		for k := range cs {
			cs[k] = task.WithInfo(lctx, rootInfo(sp.Name, k, sp.Copies))
		}
		s.sides[i] = cs
	}
}

// hasCopies reports whether sp runs as a node with sp.Copies copies.
func hasCopies(sp *Spec) bool {
	return (sp.Kind == KindTask || sp.Kind == KindBookkeeper) && sp.Copies >= 1 && sp.Copies <= maxCachedCopies
}

// rootInfo is the Info of copy k of n of a node named name at the root
// of a run.
func rootInfo(name string, k, n int) task.Info {
	return task.Info{Task: name, Copy: k, Copies: n, Clone: 0, Clones: 1, Device: device.Host{}}
}

// sidesOf returns the cached contexts of the copies of spec sp in scope
// sc, or nil if they are not cached (the node then builds its own).
func (sc *Scope) sidesOf(sp *Spec, copies int) []context.Context {
	s := sc.shape
	if s == nil || sp.BP != sc.bp || sp.index < 0 || sp.index >= len(s.sides) || sc.bp.Specs[sp.index] != sp {
		return nil
	}
	cs := s.sides[sp.index]
	if len(cs) != copies {
		return nil
	}
	return cs
}

// copyCtx is the context of a task copy: the run's context, in which the
// copy's task.Info, profiler labels and CopyState can be found. It costs no
// allocation of its own: it lives in the copy's runtime.
type copyCtx struct {
	context.Context // the run's context (or one built on it holding side's values)
	// side, when set, holds the task.Info and profiler labels; it has no
	// parent, and is looked up before the run's context.
	side  context.Context
	state CopyState
}

func (c *copyCtx) Value(key any) any {
	if _, ok := key.(copyKey); ok {
		return &c.state
	}
	if c.side != nil {
		if v := c.side.Value(key); v != nil {
			return v
		}
	}
	return c.Context.Value(key)
}

// hasLabels reports whether ctx carries profiler labels.
func hasLabels(ctx context.Context) bool {
	has := false
	pprof.ForLabels(ctx, func(string, string) bool {
		has = true
		return false
	})
	return has
}
