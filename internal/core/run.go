package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/task"
)

// ErrTerminated is task.ErrTerminated: a value was sent into a graph, or
// emitted to consumers, that have terminated.
var ErrTerminated = task.ErrTerminated

type registered interface {
	sinkName() string
	isCounted() bool
	wake()
	forceClose()
	// Where values go from here, for cycle detection: nextN of them,
	// nextAt(i) (nil for a sink that is not registered).
	nextN() int
	nextAt(i int) registered
	// mark is the sink's colour in cycle detection.
	mark() *uint8
}

// Run is the shared state of one execution of a graph: its context, first
// error, goroutines, and the quiescence counter.
//
// Acyclic graphs end through producer counting alone, so the counter (two
// shared atomic operations per value) is only kept for graphs with a cycle.
// It holds one token for the open graph input plus one per value
// queued in (or being executed by) a task. Emits happen inside Execute, so a
// value's children are counted before the value itself is released; when
// the counter reaches zero nothing can produce work again, and every task
// inbox is closed. This is what ends cyclic graphs without a hand-written
// CanTerminate.
type Run struct {
	Name   string
	Log    *slog.Logger
	Epoch  time.Time
	ctx    context.Context
	cancel context.CancelCauseFunc

	// stopAt is when the run was stopped (failed or cancelled), in
	// nanoseconds since Epoch, plus one; 0 while it runs.
	stopAt atomic.Int64
	errMu  sync.Mutex
	err    error

	// AbandonAfter, when positive, lets Wait return that long after the
	// run was stopped although some of its goroutines are still running
	// (task copies that do not honour their context): see Wait.
	AbandonAfter time.Duration
	// Abandoned makes the error Wait returns when it gives up on the run's
	// goroutines, from the run's error; set with AbandonAfter.
	Abandoned func(err error) error
	// fate tells, once the last goroutine has stopped or Wait has given up
	// on them, which came first: fateEnded or fateAbandoned.
	fate atomic.Int32
	// endAt is when the last goroutine stopped, since Epoch (set before
	// finished is closed).
	endAt atomic.Int64

	wg sync.WaitGroup
	// noWG tells that the run's goroutines are counted in live only, not
	// in wg (the copies of a reused Frame): Wait waits for finished.
	noWG      bool
	counting  bool // the graph has a cycle: track pending work
	pending   atomic.Int64
	quiescent atomic.Bool

	sinks      []registered
	nodeSrc    []statsMaker // the nodes, in the order added
	nodes      []*NodeStats // made from nodeSrc when asked for
	statsOnce  sync.Once    // fills the nodes' counter functions and the topology, when asked
	pools      []*PoolStats
	topoNodes  []TopoNode
	topoNodeAt []int32 // len(nodes) when each of topoNodes was added
	topoNodes1 [2]TopoNode
	topoAt1    [2]int32
	topoEdges  []TopoEdge
	// The edges of the blueprints, made into topoEdges when asked for.
	edgeGroups []edgeGroup
	edgeGroup1 [1]edgeGroup

	// NoStats turns the always-on counters off (to measure what they cost).
	NoStats bool
	// Trace, when set, records every Execute and memory wait.
	Trace     *Trace
	stopAfter func() bool
	afterDone chan struct{}
	hooks     []func(error) error
	hooks1    [2]func(error) error // hooks' first room
	waitOnce  sync.Once
	waitErr   error

	// live counts the run's goroutines, plus one until Launched is called;
	// finished is closed when it reaches zero.
	live     atomic.Int64
	finished chan struct{}
	watcher  Watcher

	// started is when Start was called, since Epoch.
	started time.Duration
	// bounded counts the run's bounded queues.
	bounded atomic.Int32

	// cancellable tells whether the parent context can be cancelled;
	// parentLabels whether it carries profiler labels.
	cancellable  bool
	parentLabels bool
	// shape is the cached shape of the run's blueprint, when it was
	// instantiated with one, and rootName its name.
	shape    *shape
	rootName string
	// nudge, set for a run of a reused Frame, sets the frame's nudge
	// timer; nudgeArmed tells that it is set (see Inbox.push).
	nudge      func()
	nudgeArmed atomic.Bool
}

// discardLog is the logger of runs given none.
var discardLog = slog.New(slog.DiscardHandler)

// NewRun prepares a run under parent. Start must be called after wiring.
func NewRun(parent context.Context, name string, log *slog.Logger) *Run {
	if log == nil {
		log = discardLog
	}
	ctx, cancel := context.WithCancelCause(parent)
	r := &Run{Name: name, Log: log, Epoch: time.Now(), ctx: ctx, cancel: cancel,
		finished: make(chan struct{}), cancellable: parent.Done() != nil, parentLabels: hasLabels(parent)}
	r.pending.Store(1) // the open graph input
	r.live.Store(1)    // until Launched
	return r
}

// Renew makes r, a run of a Frame whose Wait has returned and whose frame
// was given back (nothing refers to the run's state any more: its copies
// are parked, its watcher finished), a new run under parent, as NewRun
// would, without allocating the Run again: a Run is most of what a
// graph.Graph.Run of a kept frame allocates. The rooms of the lists that
// the frame keeps (topology and edges) stay as they are.
func (r *Run) Renew(parent context.Context, name string, log *slog.Logger) {
	if log == nil {
		log = discardLog
	}
	ctx, cancel := context.WithCancelCause(parent)
	topo1, at1, edges1 := r.topoNodes1, r.topoAt1, r.edgeGroup1
	*r = Run{Name: name, Log: log, Epoch: time.Now(), ctx: ctx, cancel: cancel,
		finished: make(chan struct{}), cancellable: parent.Done() != nil, parentLabels: hasLabels(parent)}
	r.topoNodes1, r.topoAt1, r.edgeGroup1 = topo1, at1, edges1
	r.pending.Store(1) // the open graph input
	r.live.Store(1)    // until Launched
}

// Context returns the run's context, cancelled when the run fails or its
// parent is cancelled.
func (r *Run) Context() context.Context { return r.ctx }

func (r *Run) register(s registered) { r.sinks = append(r.sinks, s) }

// AddNode records a node's statistics for profiling.
func (r *Run) AddNode(n *NodeStats) { r.addNode(givenStats{n}) }

// statsMaker makes a node's statistics, in ns if it has none of its own.
type statsMaker interface {
	nodeStats(ns *NodeStats) *NodeStats
}

// givenStats are the statistics given to AddNode.
type givenStats struct{ ns *NodeStats }

func (g givenStats) nodeStats(*NodeStats) *NodeStats { return g.ns }

func (r *Run) addNode(m statsMaker) { r.nodeSrc = append(r.nodeSrc, m) }

// Nodes returns the statistics of every node of the run.
func (r *Run) Nodes() []*NodeStats {
	r.materialize()
	return r.nodes
}

// materialize fills the counter functions of the nodes' statistics, once:
// they are made when first asked for rather than at Start.
func (r *Run) materialize() {
	r.statsOnce.Do(func() {
		all := make([]NodeStats, len(r.nodeSrc))
		r.nodes = make([]*NodeStats, len(r.nodeSrc))
		for i, m := range r.nodeSrc {
			r.nodes[i] = m.nodeStats(&all[i])
		}
		for _, n := range r.nodes {
			n.fill()
		}
		r.topoNodes, r.topoEdges = r.topology()
	})
}

// AddPool records a memory pool's statistics.
func (r *Run) AddPool(p *PoolStats) { r.pools = append(r.pools, p) }

// Pools returns the statistics of every memory pool of the run.
func (r *Run) Pools() []*PoolStats { return r.pools }

// OnFinish registers f to run (once) when the run ends, with the run's
// error: in Wait, after every goroutine of the run has stopped, or in Abort.
// A non-nil error returned by f is joined to the error Wait returns. Hooks
// run in the order they were registered.
func (r *Run) OnFinish(f func(error) error) {
	if r.hooks == nil {
		r.hooks = r.hooks1[:0]
	}
	r.hooks = append(r.hooks, f)
}

// finish runs the hooks once, with the run's error, and returns it joined
// with theirs (err itself, unwrapped, when they all succeed).
func (r *Run) finish(err error) error {
	errs := r.runHooks(err)
	if w := r.watcher; w != nil {
		r.watcher = nil
		if e := w.Finish(err); e != nil {
			errs = append(errs, e)
		}
	}
	if len(errs) == 0 {
		return err
	}
	return errors.Join(append([]error{err}, errs...)...)
}

// runHooks runs the OnFinish hooks, once, and returns their errors.
func (r *Run) runHooks(err error) []error {
	var errs []error
	for _, h := range r.hooks {
		if e := h(err); e != nil {
			errs = append(errs, e)
		}
	}
	r.hooks = nil
	return errs
}

// Validate checks the wiring: every sink other than the graph's result queue
// needs a producer, or it would never close.
func (r *Run) Validate(results registered) error {
	sh := r.shape
	if sh != nil && sh.flat && sh.checked.Load() {
		return nil // as for the previous run of the same blueprint
	}
	var errs []error
	for _, s := range r.sinks {
		if s == results {
			continue
		}
		if p, ok := s.(interface{ Producers() int }); ok && p.Producers() == 0 {
			if t, ok := s.(interface{ Targets() int }); ok && t.Targets() == 0 {
				continue // an unused port of a nested graph
			}
			errs = append(errs, fmt.Errorf("htgs: %s has no producer connected", s.sinkName()))
		}
	}
	if len(errs) == 0 && sh != nil && sh.flat {
		sh.checked.Store(true) // and CheckOutputs passed in Instantiate
	}
	return errors.Join(errs...)
}

// Cyclic reports whether values can flow from a task back to itself.
func (r *Run) Cyclic() bool { return r.counting }

// findCycle reports whether the wiring has a cycle through a task inbox.
// It runs once, before the run starts, and colours the sinks themselves.
func (r *Run) findCycle() bool {
	for _, s := range r.sinks {
		if *s.mark() == white && visit(s) {
			return true
		}
	}
	return false
}

// Colours of depth-first search.
const (
	white = iota
	grey
	black
)

func visit(s registered) bool {
	*s.mark() = grey
	for i, n := 0, s.nextN(); i < n; i++ {
		t := s.nextAt(i)
		if t == nil {
			continue
		}
		switch *t.mark() {
		case grey:
			return true
		case white:
			if visit(t) {
				return true
			}
		}
	}
	*s.mark() = black
	return false
}

// Start arms cancellation and quiescence detection; call it after wiring and
// before launching workers.
func (r *Run) Start() {
	r.started = time.Since(r.Epoch)
	if sh := r.shape; sh != nil && sh.flat {
		switch sh.cyclic.Load() {
		case 1:
			r.counting = true
		case 2:
			r.counting = false
		default:
			r.counting = r.findCycle()
			if r.counting {
				sh.cyclic.Store(1)
			} else {
				sh.cyclic.Store(2)
			}
		}
	} else {
		r.counting = r.findCycle()
	}
	if !r.cancellable {
		// The run's context is then cancelled only by Fail, which records
		// the error itself, by Abort, and by Wait once the run is over.
		return
	}
	r.afterDone = make(chan struct{})
	r.stopAfter = context.AfterFunc(r.ctx, func() {
		defer close(r.afterDone)
		r.fail(context.Cause(r.ctx))
	})
}

// Go runs f on a new goroutine tracked by Wait.
func (r *Run) Go(f func()) {
	r.wg.Add(1)
	r.live.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.exited()
		f()
	}()
}

func (r *Run) exited() {
	if r.live.Add(-1) == 0 {
		r.endAt.Store(int64(time.Since(r.Epoch)))
		// The fate and the watcher are read before finished is closed: a
		// run counted without wg (noWG) may be waited for by then.
		ended := r.fate.CompareAndSwap(fateRunning, fateEnded)
		w := r.watcher
		close(r.finished)
		if !ended {
			r.lateFinish() // Wait has given up on this goroutine
			return
		}
		if w != nil {
			w.End()
		}
	}
}

// Elapsed returns the time since Epoch, frozen when the run's last
// goroutine stopped, and whether it has.
func (r *Run) Elapsed() (time.Duration, bool) {
	select {
	case <-r.finished:
		return time.Duration(r.endAt.Load()), true
	default:
		return time.Since(r.Epoch), false
	}
}

// The fates of a run (Run.fate).
const (
	fateRunning   = iota
	fateEnded     // every goroutine stopped before Wait gave up
	fateAbandoned // Wait gave up (AbandonAfter) before they stopped
)

// Watcher watches a run: End is called once every goroutine of the run has
// stopped (when Finished is closed), on the goroutine that stopped last;
// Finish as the OnFinish hooks are, after them.
type Watcher interface {
	End()
	Finish(err error) error
}

// Watch sets the run's watcher; call it before Launched.
func (r *Run) Watch(w Watcher) { r.watcher = w }

// Reserve makes room for the sinks of a graph of specs nodes; call it
// before anything is added to the run.
func (r *Run) Reserve(specs int) {
	r.sinks = slices.Grow(r.sinks, 2*specs+2)
}

// Launched is called once every node has been launched; Finished can then
// be closed.
func (r *Run) Launched() { r.exited() }

// Finished is closed when every goroutine of the run has stopped (after
// Launched), whether or not anyone calls Wait.
func (r *Run) Finished() <-chan struct{} { return r.finished }

// WakeProducers wakes every goroutine blocked pushing into a full bounded
// queue of the run (see Outlet.PushAbort): there is none if no queue is
// bounded.
func (r *Run) WakeProducers() {
	if r.bounded.Load() == 0 {
		return
	}
	r.WakeAll()
}

// WakeAll wakes every goroutine blocked in a queue of the run, so that it
// checks again the condition it waits for.
func (r *Run) WakeAll() {
	for _, s := range r.sinks {
		s.wake()
	}
}

// WakeDeferred wakes the consumers whose wake-up a producer in its last
// batch deferred (see Inbox.handOff): the stall watcher calls it when the
// run makes no progress, in case that producer waits for its consumer.
func (r *Run) WakeDeferred() {
	for _, s := range r.sinks {
		if d, ok := s.(interface{ undefer() }); ok {
			d.undefer()
		}
	}
}

// Stopped reports whether the run failed or was cancelled.
func (r *Run) Stopped() bool { return r.stopAt.Load() != 0 }

// StopErr returns the error that stopped the run.
func (r *Run) StopErr() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if r.err == nil {
		return context.Canceled
	}
	return r.err
}

// Err returns the first error recorded, or nil.
func (r *Run) Err() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

// Fail records err (the first error wins), cancels the run and wakes every
// blocked goroutine.
func (r *Run) Fail(err error) {
	r.fail(err)
	r.cancel(err)
}

func (r *Run) fail(err error) {
	if err == nil {
		err = context.Canceled
	}
	r.errMu.Lock()
	if r.err == nil {
		// A task that returns ctx.Err() after the caller cancelled should not
		// hide the cancellation behind its own name.
		if cause := context.Cause(r.ctx); cause != nil && isCtxErr(err) {
			err = cause
		}
		r.err = err
	}
	r.errMu.Unlock()
	if r.stopAt.Load() == 0 && r.stopAt.CompareAndSwap(0, int64(time.Since(r.Epoch))+1) {
		r.WakeAll()
	}
}

// StoppedAt returns when the run was stopped — it failed or was
// cancelled — since Epoch, and false while it runs.
func (r *Run) StoppedAt() (time.Duration, bool) {
	at := r.stopAt.Load()
	return time.Duration(at - 1), at != 0
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Done releases k units of pending work; at zero the run is quiescent and
// every task inbox closes.
func (r *Run) Done(k int64) {
	if r.counting && r.pending.Add(-k) == 0 {
		r.quiesce()
	}
}

func (r *Run) quiesce() {
	if r.quiescent.Swap(true) {
		return
	}
	for _, s := range r.sinks {
		if s.isCounted() {
			s.forceClose()
		}
	}
}

// Pending returns the quiescence counter (for diagnosis).
func (r *Run) Pending() int64 { return r.pending.Load() }

// Wait waits for every goroutine of the run, then returns the first error.
// After Wait returns no goroutine of the run is left, unless AbandonAfter
// is set: Wait then returns AbandonAfter after the run was stopped even
// if goroutines are still running (a task copy that ignores its context),
// with the error Abandoned makes; the OnFinish hooks run when the last of
// them stops (their errors are logged), and the watcher's Finish at once.
// Wait may be called more than once.
func (r *Run) Wait() error {
	r.waitOnce.Do(func() {
		gaveUp := r.AbandonAfter > 0 && !r.waitOrAbandon()
		switch {
		case gaveUp:
		case r.noWG:
			<-r.finished
		default:
			r.wg.Wait()
		}
		if r.stopAfter != nil && !r.stopAfter() {
			<-r.afterDone
		}
		err := r.Err()
		r.cancel(nil)
		if !gaveUp {
			r.waitErr = r.finish(err)
			return
		}
		// The hooks run when the last goroutine stops (lateFinish).
		err = r.Abandoned(err)
		if w := r.watcher; w != nil {
			if e := w.Finish(err); e != nil {
				err = errors.Join(err, e)
			}
		}
		r.waitErr = err
	})
	return r.waitErr
}

// waitOrAbandon waits for every goroutine of the run to stop, or for
// AbandonAfter to pass since the run stopped; false if it gave up on
// them.
func (r *Run) waitOrAbandon() bool {
	select {
	case <-r.finished:
		return true
	case <-r.ctx.Done():
	}
	wait := r.AbandonAfter
	if at, ok := r.StoppedAt(); ok {
		wait -= time.Since(r.Epoch) - at
	}
	t := time.NewTimer(max(wait, 0))
	defer t.Stop()
	select {
	case <-r.finished:
		return true
	case <-t.C:
	}
	if !r.fate.CompareAndSwap(fateRunning, fateAbandoned) {
		<-r.finished // the last goroutine is stopping now
		return true
	}
	return false
}

// lateFinish runs the OnFinish hooks of a run that Wait gave up on, when
// its last goroutine stops; their errors are logged, for Wait has returned.
func (r *Run) lateFinish() {
	for _, e := range r.runHooks(r.Err()) {
		r.Log.Warn("htgs: a finish hook of an abandoned run failed", "graph", r.Name, "err", e)
	}
}
