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
	// sides[base[i]+k] is the context carrying the task.Info and the
	// profiler labels of copy k of spec i (a task or bookkeeper), with no
	// parent of its own; a copy's context looks values up there first, then
	// in the run's context (see copyCtx). base[i] is -1 for other specs.
	sides []context.Context
	base  []int32
	// The labels of the graph's boundary in pictures.
	inputLabel, outputLabel string
	// flat tells whether the blueprint is made of tasks, bookkeepers and
	// memory pools only: the wiring of a run is then the blueprint's, and
	// whether it has a cycle (cyclic: 0 not known yet, 1 yes, 2 no) is
	// found by the first run and kept.
	flat   bool
	cyclic atomic.Int32
}

// maxCachedCopies bounds the copies of a node whose contexts are cached.
const maxCachedCopies = 1 << 12

// shape returns b's cached shape, computing it if b changed since.
func (b *Blueprint) shape() *shape {
	if s := b.cache.Load(); s != nil && s.version == b.version && s.specs == len(b.Specs) && s.edges == len(b.Edges) {
		return s
	}
	s := &shape{version: b.version, specs: len(b.Specs), edges: len(b.Edges),
		inputLabel: b.Name + " input", outputLabel: b.Name + " output"}
	n := 0
	for _, sp := range b.Specs {
		if hasCopies(sp) {
			n += sp.Threads
		}
	}
	s.sides = make([]context.Context, 0, n)
	s.base = make([]int32, len(b.Specs))
	s.flat = true
	for i, sp := range b.Specs {
		switch sp.Kind {
		case "task", "bookkeeper", "memory":
		default:
			s.flat = false
		}
		if sp.Inner != nil {
			s.flat = false
		}
		if !hasCopies(sp) {
			s.base[i] = -1
			continue
		}
		s.base[i] = int32(len(s.sides))
		lctx := pprof.WithLabels(context.Background(), pprof.Labels("htgs.pipeline", "0", "htgs.task", sp.Name))
		for k := range sp.Threads {
			s.sides = append(s.sides, task.WithInfo(lctx, rootInfo(sp.Name, k, sp.Threads)))
		}
	}
	b.cache.Store(s)
	return s
}

// hasCopies reports whether sp runs as a node with sp.Threads copies.
func hasCopies(sp *Spec) bool {
	return (sp.Kind == "task" || sp.Kind == "bookkeeper") && sp.Threads >= 1 && sp.Threads <= maxCachedCopies
}

// rootInfo is the Info of copy k of n of a node named name at the root
// of a run.
func rootInfo(name string, k, n int) task.Info {
	return task.Info{Task: name, Thread: k, Threads: n, Pipeline: 0, Pipelines: 1, Device: device.Host{}}
}

// sidesOf returns the cached contexts of the copies of spec sp in scope
// sc, or nil if they are not cached (the node then builds its own).
func (sc *Scope) sidesOf(sp *Spec, copies int) []context.Context {
	s := sc.shape
	if s == nil || sp.BP != sc.bp || sp.index < 0 || sp.index >= len(s.base) || sc.bp.Specs[sp.index] != sp {
		return nil
	}
	b := s.base[sp.index]
	if b < 0 || sp.Threads != copies {
		return nil
	}
	return s.sides[b : int(b)+copies]
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
