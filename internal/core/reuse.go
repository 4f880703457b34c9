package core

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A Frame is the instantiated form of a blueprint kept between runs: its
// nodes, queues and outlets, and the goroutines of its task copies, which
// park after a run instead of ending. A run that takes a frame from its
// blueprint's pool (TakeFrame) resets it (Reuse) instead of instantiating
// the blueprint, and wakes the parked goroutines instead of starting new
// ones; its task copies are still made anew by their factories, and
// Initialize and Shutdown still run once per copy and run.
//
// Only flat blueprints made of plain tasks are kept this way (see
// NewFrame); graph.Graph.Run uses frames, graph.Graph.Start never does, for
// the Runtime it returns may be read after Wait.
type Frame struct {
	bp      *Blueprint
	version uint64
	insts   []Instance
	nodes   []pooledNode
	sinks   []registered
	nodeSrc []statsMaker
	topo    []TopoNode
	topoAt  []int32
	edges   []edgeGroup
	// Owner is the run's state kept with the frame by the caller (the
	// graph's Runtime).
	Owner any
	// run is the frame's current run, hook its finish hook (see watch).
	run  *Run
	hook func(error) error
	// The nudge: a timer that wakes the consumers whose wake-up is still
	// deferred (see Inbox.handOff) NudgeAfter after the first deferral
	// of a run, so that a task waiting, inside Execute, for a consumer
	// or a sibling it emitted to is not left waiting. nudgeRun is the run
	// it wakes (nil once the run is over), guarded by nudgeMu; arm is
	// armNudge, made once.
	nudgeMu  sync.Mutex
	nudgeRun *Run
	nudgeT   *time.Timer
	arm      func()

	// broken is set when a copy's goroutine ended (runtime.Goexit): the
	// frame then cannot run again.
	broken atomic.Bool
	// reusable is set by the run's finish hook when every goroutine
	// stopped and none ended.
	reusable atomic.Bool
	// idle ends the frame once it has stayed in the pool FrameIdle since
	// usedAt (put back, in nanoseconds since epoch); armed tells whether
	// it is set. Guarded by the pool's mutex.
	idle   *time.Timer
	armed  bool
	usedAt time.Duration
	epoch  time.Time
}

// pooledNode is a node whose copies' goroutines park between runs.
type pooledNode interface {
	// reuse resets the node for run r and makes its task copies anew: an
	// error if its factory failed (Reuse returns it), or errNotReusable.
	reuse(r *Run) error
	// count sets the node's live copies for run r and returns how many
	// they are (the caller adds them to r.live).
	count(r *Run) int
	// endPool makes the node's parked goroutines end.
	endPool()
	// pool makes the node's goroutines park after a run, in f.
	pool(f *Frame)
	// poolable reports whether the node can be kept in a frame.
	poolable() bool
}

// errNotReusable is the error of a frame that cannot be reused after all
// (a task copy made for the run is a task.Placer): the run instantiates
// the blueprint instead.
var errNotReusable = errors.New("htgs: frame not reusable")

// IsNotReusable reports whether err, from Frame.Reuse, only tells that the
// frame cannot be reused: the caller then instantiates the blueprint.
func IsNotReusable(err error) bool { return err == errNotReusable }

// resettable is implemented by the sinks of a frame: they reset their
// state for run r (queues empty, producers as wired).
type resettable interface {
	reset(r *Run)
	// wired records the producer count set by the wiring.
	wired()
}

// FrameIdle is how long a frame stays in its blueprint's pool without
// being taken before its goroutines end.
const FrameIdle = 100 * time.Millisecond

// maxFrames bounds the frames a blueprint keeps (for concurrent runs).
const maxFrames = 4

// framePool holds a blueprint's idle frames.
type framePool struct {
	mu   sync.Mutex
	free []*Frame
}

// NewFrame makes a frame of the run r of b just instantiated in the root
// scope sc (insts are its instances, not yet launched), or returns nil when
// the run cannot be kept: a blueprint of other nodes than plain tasks, a
// traced run, a run whose context carries profiler labels. The frame's
// goroutines then park after the run; the caller puts it back with
// PutFrame once the run is over and nothing refers to it.
func NewFrame(b *Blueprint, sc *Scope, insts []Instance) *Frame {
	r := sc.Run
	sh := sc.shape
	if sh == nil || !sh.flat || r.Trace != nil || r.parentLabels || sc.Parent != nil || len(sc.Values) > 0 {
		return nil
	}
	f := &Frame{bp: b, version: sh.version, insts: insts}
	for _, in := range insts {
		p, ok := in.(pooledNode)
		if !ok || !p.poolable() {
			return nil
		}
		f.nodes = append(f.nodes, p)
	}
	for _, s := range r.sinks {
		if _, ok := s.(resettable); !ok {
			return nil
		}
	}
	for _, s := range r.sinks {
		s.(resettable).wired()
	}
	f.sinks = r.sinks[:len(r.sinks):len(r.sinks)]
	f.nodeSrc = r.nodeSrc[:len(r.nodeSrc):len(r.nodeSrc)]
	f.topo = r.topoNodes[:len(r.topoNodes):len(r.topoNodes)]
	f.topoAt = r.topoNodeAt[:len(r.topoNodeAt):len(r.topoNodeAt)]
	f.edges = r.edgeGroups[:len(r.edgeGroups):len(r.edgeGroups)]
	for _, p := range f.nodes {
		p.pool(f)
	}
	f.watch(r)
	return f
}

// watch registers the finish hook of run r, which tells whether the frame
// may run again, or else ends its goroutines. The hook is made once per
// frame (a run of a frame is over before the next one starts).
func (f *Frame) watch(r *Run) {
	f.run = r
	if f.hook == nil {
		f.hook = f.finished
	}
	r.OnFinish(f.hook)
}

// NudgeAfter is how long after the first deferred wake-up of a run of a
// Frame the consumers still deferred are woken (see Frame.nudgeT).
const NudgeAfter = time.Millisecond

// armNudge sets the nudge timer of the frame's run; called once per run,
// by the first deferral.
func (f *Frame) armNudge() { f.nudgeT.Reset(NudgeAfter) }

// nudge wakes the consumers of the frame's run whose wake-up is still
// deferred, and lets a later deferral set the timer again.
func (f *Frame) nudge() {
	f.nudgeMu.Lock()
	defer f.nudgeMu.Unlock()
	if r := f.nudgeRun; r != nil {
		r.nudgeArmed.Store(false)
		r.WakeDeferred()
	}
}

// finished is the finish hook of the frame's run.
func (f *Frame) finished(error) error {
	if f.nudgeT != nil {
		f.nudgeMu.Lock()
		f.nudgeRun = nil
		f.nudgeMu.Unlock()
		f.nudgeT.Stop()
	}
	if f.run.fate.Load() == fateEnded && !f.broken.Load() {
		f.reusable.Store(true)
	} else {
		// Abandoned copies, or a goroutine that ended: never reused.
		f.end()
	}
	return nil
}

// End makes the goroutines of f end, once its run is over, instead of
// parking for another run; f must not be put back (PutFrame).
func (f *Frame) End() { f.end() }

// end makes the frame's parked goroutines end.
func (f *Frame) end() {
	if f.nudgeT != nil {
		f.nudgeT.Stop()
	}
	for _, p := range f.nodes {
		p.endPool()
	}
}

// Instances returns the frame's instances, to launch.
func (f *Frame) Instances() []Instance { return f.insts }

// TakeFrame returns an idle frame of b, or nil.
func TakeFrame(b *Blueprint) *Frame {
	p := &b.frames
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.free) > 0 {
		f := p.free[len(p.free)-1]
		p.free[len(p.free)-1] = nil
		p.free = p.free[:len(p.free)-1]
		if f.version == b.version && f.version == b.shape().version {
			return f
		}
		f.end()
	}
	return nil
}

// Reuse prepares f for run r, whose root scope is sc: the run's lists are
// the frame's, every queue and outlet is reset, every task copy made anew.
// Launch the instances afterwards, as after Instantiate. On error (a task
// factory failed, or IsNotReusable) the frame's goroutines end.
func (f *Frame) Reuse(r *Run, sc *Scope) error {
	f.reusable.Store(false)
	sh := f.bp.shape()
	sc.Run, sc.bp, sc.shape = r, f.bp, sh
	r.shape, r.rootName = sh, f.bp.Name
	r.sinks, r.nodeSrc = f.sinks, f.nodeSrc
	r.topoNodes, r.topoNodeAt = f.topo, f.topoAt
	r.edgeGroups = f.edges
	for _, p := range f.nodes {
		if err := p.reuse(r); err != nil {
			// Nothing was counted or woken yet.
			f.end()
			return err
		}
	}
	// Counted before any node is launched: a copy may end as soon as its
	// node is.
	k := 0
	for _, p := range f.nodes {
		k += p.count(r)
	}
	// Counted in live only: one shared atomic operation fewer per copy.
	r.noWG = true
	r.live.Add(int64(k))
	for _, s := range f.sinks {
		s.(resettable).reset(r)
	}
	f.watch(r)
	if f.nudgeT == nil {
		f.nudgeT = time.AfterFunc(time.Hour, f.nudge)
		f.nudgeT.Stop()
		f.arm = f.armNudge
	}
	f.nudgeMu.Lock()
	f.nudgeRun = r
	f.nudgeMu.Unlock()
	r.nudge = f.arm
	return nil
}

// Fits reports whether a run under ctx may use a frame: a context with
// profiler labels of its own gives the copies contexts of their own.
func Fits(ctx context.Context) bool { return !hasLabels(ctx) }

// PutFrame gives f back to its blueprint's pool once its run is over (its
// Wait has returned) and nothing refers to the run's state any more; a
// frame that cannot run again has its goroutines ended instead. A frame
// not taken within FrameIdle ends its goroutines.
func PutFrame(f *Frame) {
	if !f.reusable.Load() {
		if f.broken.Load() {
			f.end()
		}
		return
	}
	b := f.bp
	p := &b.frames
	p.mu.Lock()
	if len(p.free) >= maxFrames || f.version != b.version {
		p.mu.Unlock()
		f.end()
		return
	}
	p.free = append(p.free, f)
	// The timer is set once, not at every run: expire looks at usedAt.
	if f.idle == nil {
		f.epoch = time.Now()
		f.armed = true
		f.idle = time.AfterFunc(FrameIdle, func() { expire(b, f) })
	} else {
		f.usedAt = time.Since(f.epoch)
		if !f.armed {
			f.armed = true
			f.idle.Reset(FrameIdle)
		}
	}
	p.mu.Unlock()
}

// expire ends f if it is in b's pool and was put back FrameIdle ago or
// more; if it was put back since, it looks again later.
func expire(b *Blueprint, f *Frame) {
	p := &b.frames
	p.mu.Lock()
	i := slices.Index(p.free, f)
	if i < 0 {
		f.armed = false // taken: PutFrame sets the timer again
		p.mu.Unlock()
		return
	}
	if left := FrameIdle - (time.Since(f.epoch) - f.usedAt); left > 0 {
		f.idle.Reset(left)
		p.mu.Unlock()
		return
	}
	f.armed = false
	p.free = slices.Delete(p.free, i, i+1)
	p.mu.Unlock()
	f.end()
}

// ReleaseFrames ends the goroutines of every idle frame of b.
func ReleaseFrames(b *Blueprint) {
	p := &b.frames
	p.mu.Lock()
	free := p.free
	p.free = nil
	p.mu.Unlock()
	for _, f := range free {
		f.idle.Stop()
		f.end()
	}
}
