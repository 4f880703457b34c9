package pats

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/task"
)

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("pats: manager closed")

// Manager is a worker resource manager: it owns one worker goroutine per
// processing unit (CPU core or GPU) and runs the ready operation instances
// of every flow submitted to it, choosing for each idle worker according to
// its Config. A GPU worker with Prefetch pipelines consecutive
// operations: for a [Queuer] unit it is one goroutine that queues the
// copies on the device, otherwise an upload, a compute and a download
// goroutine.
//
// Submit, Report and Close may be called from any goroutine.
type Manager struct {
	cfg    Config
	units  []Unit
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // workers, stagers, committers
	quit   chan struct{}  // closed by Close: the watcher may exit
	quitMu sync.Once
	watch  chan struct{} // closed when the watcher has exited

	mu    sync.Mutex
	cond  *sync.Cond   // Submit waits on it for room in the window
	wake  []*sync.Cond // wake[i]: worker i waits on it for work (Manager.next)
	sched *scheduler
	live  []*flowState
	queue []queued // spawned flows waiting for room in the window
	// finishing counts the flows computed whose commits or Spawn function
	// are not done: they keep their place in the window, as in the
	// simulator (their outputs are still in memory, and not yet stored).
	finishing int
	// With Config.StorageOnCores (and CPU units): storage work for the CPU
	// workers, stagings first; storing counts the items queued or
	// running, committing the commits given out (Config.CoreCommits at
	// most).
	onCores    bool
	storeQ     []*storeItem
	storing    int
	committing int
	closed     bool
	start      time.Time
	last       time.Time
}

// Job follows one submitted flow and the flows spawned from it (see
// Flow.Spawn).
type Job struct {
	name string
	done chan struct{}
	err  error
	m    *Manager
	t    *tree
}

// tree is a stage instance: a submitted flow and the flows spawned from it.
type tree struct {
	h         *Job
	left      int // its flows admitted, queued or spawning, not finished
	spawning  int // its flows whose Spawn function is running
	errs      []error
	cancelled bool
}

// fail records an error of the tree (none after Cancel, whose error
// stands for all).
func (t *tree) fail(err error) {
	if !t.cancelled {
		t.errs = append(t.errs, err)
	}
}

// queued is a spawned flow waiting for room in the window.
type queued struct {
	f *Flow
	t *tree
}

// Cancel fails the flow unless it has already completed, with the flows
// spawned from it: their operations that have not started are dropped,
// those running finish, spawned flows not yet admitted are dropped, and
// the error wraps context.Canceled.
func (h *Job) Cancel() {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	t := h.t
	if t.left == 0 || t.cancelled {
		return
	}
	if t.spawning == 0 && !slices.ContainsFunc(m.live, func(fs *flowState) bool { return fs.tree == t }) &&
		!slices.ContainsFunc(m.queue, func(q queued) bool { return q.t == t }) {
		return // only commits are left: they decide
	}
	err := fmt.Errorf("pats: flow %q: %w", h.name, context.Canceled)
	t.errs = []error{err}
	t.cancelled = true
	for _, fs := range slices.Clone(m.live) {
		if fs.tree == t {
			m.sched.failFlow(fs, err)
			m.sched.maybeComplete(fs)
		}
	}
	dropped := 0
	m.queue = slices.DeleteFunc(m.queue, func(q queued) bool {
		if q.t == t {
			dropped++
			return true
		}
		return false
	})
	for range dropped {
		m.flowFinished(t)
	}
	m.changed()
}

// Done is closed when the flow and the flows spawned from it have completed
// (outputs committed), or when one of them failed and the rest stopped.
func (h *Job) Done() <-chan struct{} { return h.done }

// Err returns the flow's error once Done is closed (nil before).
func (h *Job) Err() error {
	select {
	case <-h.done:
		return h.err
	default:
		return nil
	}
}

// Wait blocks until the flow is done and returns its error, or returns
// ctx's error first.
func (h *Job) Wait(ctx context.Context) error {
	select {
	case <-h.done:
		return h.err
	case <-ctx.Done():
		return fmt.Errorf("pats: waiting for flow %q: %w", h.name, ctx.Err())
	}
}

// stageOnce reads an external input from its store once.
type stageOnce struct {
	once sync.Once
	err  error
}

// do stages through st unless another call did or is doing it (then it
// waits for that one). staged reports whether this call read the store:
// a call that only waited must not count its wait as a staging of the
// bytes (scheduler.stagedIn), or the rate it records would be too high.
func (s *stageOnce) do(ctx context.Context, st Stager) (staged bool, err error) {
	s.once.Do(func() {
		staged = true
		s.err = st.Stage(ctx)
	})
	return staged, s.err
}

// Start starts a manager with one worker per unit; units of kinds other
// than CPU and GPU are refused. Cancelling ctx fails the flows in progress
// and stops the workers; Close must still be called.
func Start(ctx context.Context, cfg Config, units ...Unit) (*Manager, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if len(units) == 0 {
		return nil, errors.New("pats: manager needs at least one unit")
	}
	devs := make([]device.Device, len(units))
	gpus := 0
	for i, u := range units {
		switch u.Kind() {
		case device.CPU:
		case device.GPU:
			gpus++
		default:
			return nil, fmt.Errorf("pats: unit %s has unsupported kind %v", u.Name(), u.Kind())
		}
		devs[i] = u
	}
	if gpus > 64 {
		return nil, fmt.Errorf("pats: at most 64 GPUs, have %d", gpus)
	}
	m := &Manager{cfg: cfg, units: units, sched: newScheduler(cfg, devs), start: time.Now(), onCores: cfg.StorageOnCores && gpus < len(units)}
	m.cond = sync.NewCond(&m.mu)
	for range m.sched.workers {
		m.wake = append(m.wake, sync.NewCond(&m.mu))
	}
	m.ctx, m.cancel = context.WithCancel(ctx)
	m.sched.onDone = m.flowDone
	m.quit, m.watch = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.watch)
		select {
		case <-m.ctx.Done():
			m.abort()
		case <-m.quit:
		}
	}()
	for i, w := range m.sched.workers {
		m.wg.Add(1)
		switch {
		case w.gpu < 0:
			go m.cpuWorker(w, units[i])
		case cfg.Prefetch && queues(units[i]):
			go m.gpuQueued(w, units[i].(Queuer))
		case cfg.Prefetch:
			go m.gpuPipelined(w, units[i])
		default:
			go m.gpuSerial(w, units[i])
		}
	}
	return m, nil
}

// Submit admits flow f, waiting while Config.Window flows are in progress,
// and returns the Job to wait on. It fails if f is malformed or was
// submitted before, if one of its steps has no implementation for the
// manager's units, after Close, and when ctx or the manager's context is
// cancelled.
func (m *Manager) Submit(ctx context.Context, f *Flow) (*Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if err := f.check(m.sched.kinds()); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, m.broadcast)
	defer stop()
	for m.cfg.Window > 0 && m.sched.active+m.finishing+len(m.queue) >= m.cfg.Window {
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("pats: submit %q: %w", f.name, ctx.Err())
		case m.ctx.Err() != nil:
			return nil, fmt.Errorf("pats: submit %q: %w", f.name, m.ctx.Err())
		case m.closed:
			return nil, ErrClosed
		}
		m.cond.Wait()
	}
	if err := m.ctx.Err(); err != nil {
		return nil, fmt.Errorf("pats: submit %q: %w", f.name, err)
	}
	h := &Job{name: f.name, done: make(chan struct{}), m: m}
	h.t = &tree{h: h, left: 1}
	m.admit(f, h.t, false)
	m.changed()
	return h, nil
}

// admit admits f, a flow of stage instance t (m.mu held).
func (m *Manager) admit(f *Flow, t *tree, spawned bool) {
	fs := &flowState{tree: t, spawned: spawned}
	m.live = append(m.live, fs)
	m.sched.admitInto(fs, f)
	if !m.cfg.stagesAhead() || fs.done {
		return
	}
	if !m.onCores {
		m.wg.Add(1)
		go m.stageFlow(fs)
		return
	}
	var stages []*storeItem
	for _, d := range fs.data {
		if d.external && d.store != nil {
			stages = append(stages, &storeItem{fs: fs, stage: d})
		}
	}
	m.storing += len(stages)
	// Stagings go before commits, in admission order.
	k := 0
	for k < len(m.storeQ) && m.storeQ[k].stage != nil {
		k++
	}
	m.storeQ = slices.Insert(m.storeQ, k, stages...)
}

// admitQueued admits spawned flows while the window has room, or drops
// them once the manager's context has ended (m.mu held).
func (m *Manager) admitQueued() {
	for len(m.queue) > 0 {
		err := m.ctx.Err()
		if err == nil && m.cfg.Window > 0 && m.sched.active+m.finishing >= m.cfg.Window {
			return
		}
		q := m.queue[0]
		m.queue = m.queue[1:]
		if err != nil {
			q.t.fail(fmt.Errorf("pats: flow %q: %w", q.f.name, err))
			m.flowFinished(q.t)
			continue
		}
		m.admit(q.f, q.t, true)
	}
}

// flowFinished records that one flow of t is finished, and completes t's
// job after the last (m.mu held).
func (m *Manager) flowFinished(t *tree) {
	if t.left--; t.left > 0 {
		return
	}
	switch len(t.errs) {
	case 0:
	case 1:
		t.h.err = t.errs[0]
	default:
		t.h.err = errors.Join(t.errs...)
	}
	close(t.h.done)
}

// Close waits for the flows in progress to complete, stops the workers and
// returns. Further submissions fail with ErrClosed. It returns the
// manager's context error if that was cancelled before every flow completed.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	m.wakeAll()
	m.mu.Unlock()
	m.wg.Wait()
	err := m.ctx.Err()
	if err != nil {
		<-m.watch // it fails the flows left in progress
		m.wg.Wait()
	}
	m.quitMu.Do(func() { close(m.quit) })
	<-m.watch
	m.cancel()
	if err != nil {
		return fmt.Errorf("pats: manager stopped: %w", err)
	}
	return nil
}

// Report returns what the manager has done so far. Makespan runs from
// Start to the completion of the last flow.
func (m *Manager) Report() *Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	end := m.last
	if end.IsZero() {
		end = m.start
	}
	return m.sched.report(end.Sub(m.start))
}

func (m *Manager) broadcast() {
	m.mu.Lock()
	m.cond.Broadcast()
	m.mu.Unlock()
}

// abort fails every flow in progress when the manager's context ends.
func (m *Manager) abort() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, fs := range append([]*flowState(nil), m.live...) {
		m.sched.failFlow(fs, fmt.Errorf("pats: flow %q: %w", fs.f.name, m.ctx.Err()))
		m.sched.maybeComplete(fs)
	}
	// Storage work not started is dropped: the workers stop; a flow
	// waiting for its commit fails (one being committed finishes).
	q := m.storeQ
	m.storeQ = nil
	m.storing -= len(q)
	for _, it := range q {
		if it.stage == nil {
			m.committed(it.fs.f, it.fs.tree, it.spawn != nil, nil, fmt.Errorf("pats: flow %q: commit outputs: %w", it.fs.f.name, m.ctx.Err()))
		}
	}
	m.admitQueued() // drops them
	m.wakeAll()
}

// flowDone is the scheduler's completion callback (called with m.mu held).
// A completed flow's outputs are committed and its Spawn function called
// on a goroutine; the flow is finished after those.
func (m *Manager) flowDone(fs *flowState) {
	m.last = time.Now()
	if i := slices.Index(m.live, fs); i >= 0 {
		m.live = slices.Delete(m.live, i, i+1)
	}
	t := fs.tree
	if fs.err != nil {
		m.cfg.Logger.Debug("pats: flow failed", "flow", fs.f.name, "err", fs.err)
		t.fail(fs.err)
		m.flowFinished(t)
		m.admitQueued()
		return
	}
	var commits []Stager
	for _, d := range fs.data {
		if d.final && d.store != nil {
			commits = append(commits, d.store)
		}
	}
	spawn := fs.f.spawn
	if t.cancelled {
		spawn = nil
	}
	if len(commits) == 0 && spawn == nil {
		m.flowFinished(t)
		m.admitQueued()
		return
	}
	m.finishing++ // keeps the flow's place in the window until committed
	if spawn != nil {
		t.spawning++
	}
	if m.onCores && len(commits) > 0 {
		m.storing++
		m.storeQ = append(m.storeQ, &storeItem{fs: fs, commits: commits, spawn: spawn})
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.commit(&storeItem{fs: fs, commits: commits, spawn: spawn}, false)
	}()
}

// commit commits a completed flow's outputs, calls its Spawn function
// (nil: none) and finishes the flow (flowDone's work after the
// scheduler), on a goroutine of its own or, onCore, on a CPU worker
// (Config.StorageOnCores).
func (m *Manager) commit(it *storeItem, onCore bool) {
	kids, err := m.commitAndSpawn(it.fs, it.commits, it.spawn)
	m.mu.Lock()
	defer m.mu.Unlock()
	if onCore {
		m.storing--
		m.committing--
	}
	m.committed(it.fs.f, it.fs.tree, it.spawn != nil, kids, err)
}

// commitAndSpawn commits a completed flow's outputs and calls its Spawn
// function (nil: none), returning the flows it spawned.
func (m *Manager) commitAndSpawn(fs *flowState, commits []Stager, spawn func(context.Context) ([]*Flow, error)) ([]*Flow, error) {
	var errs []error
	for _, st := range commits {
		if err := st.Commit(m.ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("pats: flow %q: commit outputs: %w", fs.f.name, err)
	}
	if spawn == nil {
		return nil, nil
	}
	return m.callSpawn(fs.f, spawn)
}

// committed finishes flow f of t after its commits and Spawn function
// (m.mu held).
func (m *Manager) committed(f *Flow, t *tree, spawned bool, kids []*Flow, err error) {
	m.finishing--
	m.last = time.Now() // the flow is done when its outputs are stored
	if spawned {
		t.spawning--
	}
	if err != nil {
		t.fail(err)
	} else if !t.cancelled {
		m.enqueue(f, t, kids)
	}
	m.flowFinished(t)
	m.admitQueued()
	m.changed()
}

// storeItem is storage work for a CPU worker (Config.StorageOnCores):
// staging an input of a flow, or committing a completed flow's outputs
// and calling its Spawn function.
type storeItem struct {
	fs      *flowState
	stage   *datum // the input to stage; nil for a commit
	commits []Stager
	spawn   func(context.Context) ([]*Flow, error)
}

// nextStore removes and returns the storage work a CPU worker should do
// next, stagings first, a commit only while fewer than Config.CoreCommits
// run (m.mu held).
func (m *Manager) nextStore() *storeItem {
	for i, it := range m.storeQ {
		if it.stage == nil && m.committing >= max(m.cfg.CoreCommits, 1) {
			continue
		}
		m.storeQ = slices.Delete(m.storeQ, i, i+1)
		if it.stage == nil {
			m.committing++
		}
		return it
	}
	return nil
}

// runStore does storage work on a CPU worker.
func (m *Manager) runStore(it *storeItem) {
	fs := it.fs
	if d := it.stage; d != nil {
		m.mu.Lock()
		skip := fs.done
		m.mu.Unlock()
		var err error
		if !skip {
			_, err = d.stage.do(m.ctx, d.store)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.storing--
		if skip {
			m.changed()
			return
		}
		m.stagedAhead(fs, d, err)
		return
	}
	m.commit(it, true)
}

// callSpawn calls a completed flow's Spawn function, turning a panic into
// an error.
func (m *Manager) callSpawn(f *Flow, fn func(context.Context) ([]*Flow, error)) (kids []*Flow, err error) {
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = &task.PanicError{Value: p, Stack: debug.Stack()}
			}
		}()
		kids, err = fn(m.ctx)
	}()
	if err != nil {
		return nil, fmt.Errorf("pats: flow %q: spawn: %w", f.name, err)
	}
	return kids, nil
}

// enqueue queues the flows spawned by parent, of stage instance t, for
// admission; a malformed one fails t instead (m.mu held).
func (m *Manager) enqueue(parent *Flow, t *tree, kids []*Flow) {
	kinds := m.sched.kinds()
	for _, k := range kids {
		var err error
		if k == nil {
			err = errors.New("nil flow")
		} else {
			err = k.check(kinds)
		}
		if err != nil {
			t.fail(fmt.Errorf("pats: flow %q: spawn: %w", parent.name, err))
			continue
		}
		k.used = true // a flow returned twice is refused
		t.left++
		m.queue = append(m.queue, queued{f: k, t: t})
	}
}

// stageFlow reads a flow's storage inputs in the background (Prefetch,
// StageAhead).
func (m *Manager) stageFlow(fs *flowState) {
	defer m.wg.Done()
	for _, d := range fs.data {
		if !d.external || d.store == nil {
			continue
		}
		_, err := d.stage.do(m.ctx, d.store)
		m.mu.Lock()
		m.stagedAhead(fs, d, err)
		done := fs.done
		m.mu.Unlock()
		if done {
			return
		}
	}
}

// stagedAhead records the background staging of fs's input d, which
// failed with err or succeeded (m.mu held).
func (m *Manager) stagedAhead(fs *flowState, d *datum, err error) {
	if err != nil {
		m.sched.failFlow(fs, fmt.Errorf("pats: flow %q: stage %q: %w", fs.f.name, d.key, err))
		m.sched.maybeComplete(fs)
	} else {
		d.staged = true
	}
	m.changed()
}

// exiting reports whether workers should stop (m.mu held).
func (m *Manager) exiting() bool {
	return m.ctx.Err() != nil || m.closed && m.sched.active == 0 && m.finishing == 0 && len(m.queue) == 0 && m.storing == 0
}

// dispatch hands work to the waiting workers, GPUs first (so that, as in
// the simulator, a GPU and a CPU core idle at the same moment take the
// highest and the lowest speedups rather than racing for the same
// operation), then CPU cores; an idle GPU with nothing to run flushes the
// results it holds. Called with m.mu held after every change of state.
func (m *Manager) dispatch() {
	if m.ctx.Err() != nil {
		return
	}
	for _, gpus := range []bool{true, false} {
		if !gpus {
			m.sched.beginPicks()
			defer m.sched.endPicks()
		}
		for _, w := range m.sched.workers {
			if (w.gpu >= 0) != gpus || !w.waiting || w.assigned != nil || w.flushed != nil || w.store != nil {
				continue
			}
			if !gpus {
				if it := m.nextStore(); it != nil {
					w.store = it
					continue
				}
			}
			if n := m.sched.pick(w); n != nil {
				a := m.sched.take(w, n)
				w.assigned = &a
				w.offered.Store(true)
			} else if w.gpu >= 0 && w.inflight == 0 {
				if fl := m.sched.flush(w); len(fl) > 0 {
					w.flushed = fl
				}
			}
		}
	}
}

// changed dispatches work and wakes the workers it gave work to, and any
// submitter waiting for room (m.mu held). Only those: a worker given
// nothing would take m.mu only to wait again, and in a PATS run most
// cores are idle (three quarters of the time on the H200 machine) while
// the GPU's worker needs m.mu between each two of its steps.
func (m *Manager) changed() {
	m.dispatch()
	if m.exiting() {
		m.wakeAll()
		return
	}
	m.cond.Broadcast()
	for _, w := range m.sched.workers {
		if w.waiting && (w.assigned != nil || w.flushed != nil || w.store != nil) {
			if w.parked && w.wokenAt.IsZero() {
				w.wokenAt = time.Now()
			}
			m.wake[w.idx].Signal()
		}
	}
}

// wakeAll wakes every waiting worker and submitter (m.mu held): to stop,
// or to look at a flow that failed.
func (m *Manager) wakeAll() {
	m.cond.Broadcast()
	for _, c := range m.wake {
		c.Broadcast()
	}
}

// work is what the dispatcher gives a worker: an operation (with its
// evictions and uploads), data to flush (an idle GPU), or storage work
// (a CPU worker, Config.StorageOnCores).
type work struct {
	a     action
	flush []*datum
	store *storeItem
}

// next waits for work for w. ok is false when the worker should stop.
func (m *Manager) next(w *worker) (wk work, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w.waiting = true
	m.changed()
	for {
		if wk, ok := m.given(w); ok {
			if !w.wokenAt.IsZero() {
				d := time.Since(w.wokenAt)
				w.woken++
				w.wakeDelay += d
				w.wakeMax = max(w.wakeMax, d)
				w.wokenAt = time.Time{}
			}
			return wk, true
		}
		if m.exiting() {
			w.waiting = false
			return work{}, false
		}
		w.parked = true
		m.wake[w.idx].Wait()
		w.parked = false
	}
}

// given takes what the dispatcher gave w (m.mu held). ok is false if it
// gave nothing.
func (m *Manager) given(w *worker) (wk work, ok bool) {
	switch {
	case w.assigned != nil:
		wk.a, w.assigned = *w.assigned, nil
		w.offered.Store(false)
	case w.flushed != nil:
		wk.flush, w.flushed = w.flushed, nil
	case w.store != nil:
		wk.store, w.store = w.store, nil
	default:
		return work{}, false
	}
	w.waiting = false
	return wk, true
}

// prepare stages a node's storage inputs (when not prefetched) and uploads
// its inputs to u. It returns skip if the node's flow has failed.
func (m *Manager) prepare(w *worker, u Unit, a action) (skip bool, err error) {
	m.mu.Lock()
	skip = a.n.fl.err != nil
	m.mu.Unlock()
	if skip {
		return true, nil
	}
	if err := m.stageInputs(w, a.n); err != nil {
		return false, err
	}
	for _, d := range a.upload {
		t0 := time.Now()
		if err := u.Move(m.ctx, Data{Key: d.key, Bytes: d.bytes, Store: d.store}, true); err != nil {
			return false, m.nodeErr(w, a.n, fmt.Errorf("upload %q: %w", d.key, err))
		}
		m.mu.Lock()
		m.sched.moved(d.bytes, moveTook(u, d.bytes, time.Since(t0)))
		m.mu.Unlock()
	}
	return false, nil
}

// stageInputs stages n's inputs that are still in storage (when not
// prefetched: with Prefetch a node is eligible only once they are staged).
func (m *Manager) stageInputs(w *worker, n *node) error {
	for _, d := range n.reads {
		if d.external && d.store != nil {
			t0 := time.Now()
			staged, err := d.stage.do(m.ctx, d.store)
			if err != nil {
				return m.nodeErr(w, n, fmt.Errorf("stage %q: %w", d.key, err))
			}
			m.mu.Lock()
			if staged {
				m.sched.stagedIn(d.bytes, time.Since(t0))
			}
			d.staged = true
			m.mu.Unlock()
		}
	}
	return nil
}

func (m *Manager) nodeErr(w *worker, n *node, err error) error {
	return fmt.Errorf("pats: flow %q: step %d (%s) on %s: %w", n.fl.f.name, n.step.index, n.step.op, w.dev.Name(), err)
}

// compute runs a node's implementation on u, turning panics into errors.
// ctx is m.ctx, or one derived from it (gpuQueued's, with its
// WhileComputing function).
func (m *Manager) compute(ctx context.Context, w *worker, u Unit, n *node) (dur time.Duration, err error) {
	impl := n.step.impl(w.kind)
	start := time.Now()
	var own time.Duration // the implementation's own time
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = &task.PanicError{Value: p, Stack: debug.Stack()}
			}
		}()
		err = u.Run(ctx, func(ctx context.Context) error {
			t0 := time.Now()
			defer func() { own = time.Since(t0) }()
			return impl(ctx, w.dev)
		}, n.step.cost)
	}()
	dur = time.Since(start)
	if mt, ok := u.(modelTimed); ok {
		dur = max(mt.computeTime(n.step.cost), own) // a model's unit: its time, or the implementation's if longer
	}
	if err != nil {
		err = m.nodeErr(w, n, err)
	}
	return dur, err
}

// moveTook returns the time to record for a move of b bytes by u that
// took took on the wall clock: a model's unit's modelled time (modelTimed).
func moveTook(u Unit, b int64, took time.Duration) time.Duration {
	if mt, ok := u.(modelTimed); ok {
		return mt.moveTime(b)
	}
	return took
}

// finish hands a computed node to the scheduler and returns the downloads
// to do. With free and nothing to download, w counts as waiting for its
// next operation in the same step (see download).
func (m *Manager) finish(w *worker, n *node, dur time.Duration, err error, free bool) []*datum {
	m.mu.Lock()
	defer m.mu.Unlock()
	downs := m.sched.computed(w, n, dur, err)
	if free && len(downs) == 0 {
		w.waiting = true
	}
	m.changed()
	return downs
}

// download moves data from GPU unit u back to host memory. A worker w
// (nil: none) that asks for its next operation once ds are down
// (gpuSerial) counts as waiting from
// the moment the last of them reaches the scheduler, in the same step, so
// that the dispatcher, GPUs first, may give w the operations that this
// download makes ready, as the simulator frees a serial GPU when its
// downloads end. Otherwise the cores waiting for those results (FCFS's
// cores in a run's last tiles) took them all before w asked: on the H200
// (tenth session, three calls) each FCFS run had 20-37 operations begun
// by a core while the GPU sat idle, most of them a tile's three feature
// operations right after the GPU's BWLabel, its labels just down.
func (m *Manager) download(u Unit, ds []*datum, w *worker) {
	for i, d := range ds {
		t0 := time.Now()
		err := u.Move(m.ctx, Data{Key: d.key, Bytes: d.bytes, Store: d.store}, false)
		free := w
		if i < len(ds)-1 {
			free = nil
		}
		m.downloaded(u, d, moveTook(u, d.bytes, time.Since(t0)), err, free)
	}
}

func (m *Manager) cpuWorker(w *worker, u Unit) {
	defer m.wg.Done()
	for {
		wk, ok := m.next(w)
		if !ok {
			return
		}
		if wk.store != nil {
			m.runStore(wk.store)
			continue
		}
		a := wk.a
		var dur time.Duration
		skip, err := m.prepare(w, u, a)
		if !skip && err == nil {
			dur, err = m.compute(m.ctx, w, u, a.n)
		}
		m.finish(w, a.n, dur, err, false)
	}
}

// gpuSerial runs one operation at a time: evictions, uploads, compute,
// downloads.
func (m *Manager) gpuSerial(w *worker, u Unit) {
	defer m.wg.Done()
	for {
		wk, ok := m.next(w)
		if !ok {
			return
		}
		if wk.flush != nil {
			m.download(u, wk.flush, w)
			continue
		}
		a := wk.a
		m.download(u, a.evict, nil)
		var dur time.Duration
		skip, err := m.prepare(w, u, a)
		if !skip && err == nil {
			dur, err = m.compute(m.ctx, w, u, a.n)
		}
		m.download(u, m.finish(w, a.n, dur, err, true), w)
	}
}

// prepared is an action whose inputs are on the GPU (or failed to get
// there), on its way from the upload goroutine to the compute goroutine.
type prepared struct {
	a    action
	skip bool
	err  error
}

// gpuPipelined runs a GPU as three goroutines: this one chooses the next
// operation and uploads its inputs while the compute goroutine runs the
// previous one; a download goroutine moves evicted data and results back.
func (m *Manager) gpuPipelined(w *worker, u Unit) {
	defer m.wg.Done()
	computeCh := make(chan prepared) // unbuffered: one operation prepared ahead
	downCh := make(chan []*datum, 16)
	var inner sync.WaitGroup
	inner.Add(2)
	go func() {
		defer inner.Done()
		defer close(downCh)
		for p := range computeCh {
			var dur time.Duration
			err := p.err
			if !p.skip && err == nil {
				dur, err = m.compute(m.ctx, w, u, p.a.n)
			}
			if downs := m.finish(w, p.a.n, dur, err, false); len(downs) > 0 {
				downCh <- downs
			}
		}
	}()
	go func() {
		defer inner.Done()
		for ds := range downCh {
			m.download(u, ds, nil)
		}
	}()
	for {
		wk, ok := m.next(w)
		if !ok {
			break
		}
		if wk.flush != nil {
			downCh <- wk.flush
			continue
		}
		a := wk.a
		if len(a.evict) > 0 {
			downCh <- a.evict
		}
		skip, err := m.prepare(w, u, a)
		computeCh <- prepared{a: a, skip: skip, err: err}
	}
	close(computeCh)
	inner.Wait()
}

// queues reports whether u is a GPU unit whose transfers can be queued.
func queues(u Unit) bool {
	q, ok := u.(Queuer)
	return ok && u.Kind() == device.GPU && q.Queues()
}

// queuedOp is an operation whose uploads are queued, waiting to run.
type queuedOp struct {
	a       action
	pending []Pending
	skip    bool  // its flow has failed
	err     error // queueing an upload failed
}

// queuedDown is a download queued by a gpuQueued worker.
type queuedDown struct {
	d *datum
	p Pending
}

// gpuQueued runs a GPU whose transfers are queued ([Queuer]) from one
// goroutine: it takes the next operation and queues its uploads, runs the
// current one while they copy, and queues the downloads of its results
// (and of evicted or flushed data), handing each to the scheduler once it
// sees it complete: between operations, and while the unit's Run calls
// the WhileComputing function. A unit that calls it also has the next
// operation taken there, so that the dispatcher's work overlaps the
// device's. The worker waits for work only with nothing queued, after its
// downloads are done; while it computes it stays waiting for the
// dispatcher. It never waits for another goroutine of its own, so it
// needs one thread only.
func (m *Manager) gpuQueued(w *worker, u Queuer) {
	defer m.wg.Done()
	var (
		cur, nxt *queuedOp
		downs    []queuedDown
	)
	// down queues the downloads of ds.
	down := func(ds []*datum) {
		for _, d := range ds {
			p, err := u.Queue(m.ctx, Data{Key: d.key, Bytes: d.bytes, Store: d.store}, false)
			if err != nil {
				m.downloaded(u, d, 0, err, nil)
				continue
			}
			downs = append(downs, queuedDown{d, p})
		}
	}
	// reap hands the downloads that are done (all, with wait) to the
	// scheduler.
	reap := func(wait bool) {
		k := 0
		for _, q := range downs {
			if !wait && !q.p.Done() {
				downs[k] = q
				k++
				continue
			}
			took, err := q.p.Wait(m.ctx)
			m.downloaded(u, q.d, took, err, nil)
		}
		clear(downs[k:])
		downs = downs[:k]
	}
	// take queues the uploads of a, the next operation.
	take := func(a action) {
		down(a.evict)
		nxt = m.queueInputs(w, u, a)
	}
	// poll takes the next operation if the dispatcher has one for w, and
	// otherwise leaves w waiting for one.
	poll := func() {
		if wk, ok := m.poll(w); wk.flush != nil {
			down(wk.flush) // not while an operation is in flight: none
		} else if ok {
			take(wk.a)
		}
	}
	// A unit that calls WhileComputing gets its next operation polled
	// there, the dispatcher's work overlapping the device's; for one that
	// does not, the worker polls before it runs the current operation.
	served, polled := false, false
	serve := func() {
		served = true
		if len(downs) > 0 {
			reap(false)
		}
		switch {
		case nxt != nil:
		case !polled:
			polled = true
			poll()
		case w.offered.Load():
			if a, ok := m.takeOffered(w); ok {
				take(a)
			}
		}
	}
	ctx := context.WithValue(m.ctx, serveKey{}, serve)
	for {
		if cur == nil {
			reap(true) // before the worker may sleep
			wk, ok := m.next(w)
			if !ok {
				break
			}
			if wk.flush != nil {
				down(wk.flush)
				continue
			}
			nxt = nil
			take(wk.a)
			cur = nxt
		}
		nxt, polled = nil, false
		if !served {
			polled = true
			poll()
		}
		served = false
		down(m.runQueued(ctx, w, u, cur))
		reap(false)
		if nxt == nil {
			poll() // the unit did not call WhileComputing, or nothing was ready then
		}
		cur = nxt
	}
	reap(true)
}

// downloaded hands a download by u, which took took (0: unknown), to the
// scheduler, and counts free (if not nil) as waiting for its next
// operation in the same step (see download).
func (m *Manager) downloaded(u Unit, d *datum, took time.Duration, err error, free *worker) {
	if err != nil {
		err = fmt.Errorf("pats: flow %q: download %q from %s: %w", d.fl.f.name, d.key, u.Name(), err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil && took > 0 {
		m.sched.moved(d.bytes, took)
	}
	m.sched.downloaded(d, err)
	if free != nil {
		free.waiting = true
	}
	m.changed()
}

// serveKey is the context key of a queued GPU worker's WhileComputing
// function.
type serveKey struct{}

// WhileComputing returns the function that a GPU unit's Run may call, as
// often as it likes and on the goroutine that called Run, while it waits
// for its device to compute. With Config.Prefetch and a [Queuer] unit the
// manager's worker then hands the downloads that completed to the
// scheduler, and takes the operation to run next and queues its uploads,
// so that they copy during the computation (the worker otherwise does
// both after Run returns). The function costs little when there is
// nothing to do (an atomic load, and a look at each download in flight).
// Outside such a Run it does nothing.
func WhileComputing(ctx context.Context) func() {
	if f := serveOf(ctx); f != nil {
		return f
	}
	return func() {}
}

// serveOf returns ctx's WhileComputing function, nil if it has none.
func serveOf(ctx context.Context) func() {
	f, _ := ctx.Value(serveKey{}).(func())
	return f
}

// poll is next without the wait: it returns what the dispatcher gave w,
// if anything (ok), and otherwise leaves w waiting, so that the dispatcher
// can give it the next operation while its unit computes.
func (m *Manager) poll(w *worker) (wk work, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.assigned == nil && w.flushed == nil && !m.exiting() {
		w.waiting = true
		m.changed()
	}
	return m.given(w)
}

// takeOffered returns the operation the dispatcher gave w, if any,
// without changing anything else: w, computing, stays waiting otherwise.
func (m *Manager) takeOffered(w *worker) (action, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.assigned == nil {
		return action{}, false
	}
	wk, ok := m.given(w)
	return wk.a, ok
}

// queueInputs stages a's storage inputs (when not prefetched) and queues
// their uploads to u.
func (m *Manager) queueInputs(w *worker, u Queuer, a action) *queuedOp {
	q := &queuedOp{a: a}
	m.mu.Lock()
	q.skip = a.n.fl.err != nil
	m.mu.Unlock()
	if q.skip {
		return q
	}
	if q.err = m.stageInputs(w, a.n); q.err != nil {
		return q
	}
	for _, d := range a.upload {
		p, err := u.Queue(m.ctx, Data{Key: d.key, Bytes: d.bytes, Store: d.store}, true)
		if err != nil {
			q.err = m.nodeErr(w, a.n, fmt.Errorf("upload %q: %w", d.key, err))
			break
		}
		q.pending = append(q.pending, p)
	}
	return q
}

// runQueued waits for q's uploads, runs q's operation on u, hands it to the
// scheduler and returns the downloads to do. It waits for every queued
// copy, even after one failed, so that none is still writing when the
// operation's memory is released.
func (m *Manager) runQueued(ctx context.Context, w *worker, u Queuer, q *queuedOp) []*datum {
	err := q.err
	for i, p := range q.pending {
		took, werr := p.Wait(m.ctx)
		if werr != nil && err == nil {
			err = m.nodeErr(w, q.a.n, fmt.Errorf("upload %q: %w", q.a.upload[i].key, werr))
		}
		if werr == nil && took > 0 {
			m.mu.Lock()
			m.sched.moved(q.a.upload[i].bytes, took)
			m.mu.Unlock()
		}
	}
	var dur time.Duration
	if !q.skip && err == nil {
		m.mu.Lock()
		skip := q.a.n.fl.err != nil // failed while the copies ran
		m.mu.Unlock()
		if !skip {
			dur, err = m.compute(ctx, w, u, q.a.n)
		}
	}
	return m.finish(w, q.a.n, dur, err, false)
}
