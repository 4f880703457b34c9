package core

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/task"
)

type copyKey struct{}

// CopyState is what the runtime knows about a running task copy; it is the
// outermost value of the copy's context, so looking it up is one step.
type CopyState struct {
	Stats *CopyStats
	Scope *Scope
	last  atomic.Pointer[lookup] // the last Lookup's answer
}

type lookup struct{ key, val any }

// CopyFrom returns the state of the task copy whose context this is.
func CopyFrom(ctx context.Context) *CopyState {
	cs, _ := ctx.Value(copyKey{}).(*CopyState)
	return cs
}

// StatsFrom returns the counters of the task copy whose context this is.
func StatsFrom(ctx context.Context) *CopyStats {
	if c := CopyFrom(ctx); c != nil {
		return c.Stats
	}
	return nil
}

// Lookup is Scope.Lookup, remembering the last answer: a task usually gets
// memory from one pool. It is safe for concurrent use (a task may get
// memory from goroutines of its own).
func (c *CopyState) Lookup(key any) (any, bool) {
	if l := c.last.Load(); l != nil && l.key == key {
		return l.val, true
	}
	v, ok := c.Scope.Lookup(key)
	if ok {
		c.last.Store(&lookup{key, v})
	}
	return v, ok
}

// executor is one copy of a node, as the worker loop sees it.
type executor[In any] interface {
	initialize(ctx context.Context, info task.Info) error
	execute(ctx context.Context, in In) error
	canTerminate() bool
	shutdown(ctx context.Context) error
	setActive(bool)
}

// maxBatch is how many values a single-copy node takes from its queue at
// once; nodes with several copies take one at a time to balance load.
const maxBatch = 64

// node is the runtime of a task or bookkeeper: one inbox, several copies.
type node[In any] struct {
	run    *Run
	scope  *Scope
	name   string
	inbox  *Inbox[In]
	execs  []executor[In]
	stats  *NodeStats
	infos  []task.Info
	live   atomic.Int32
	onExit func() // called once, when the last copy has stopped
	batch  int
}

func newNode[In any](sc *Scope, name, kind string, limit int, execs []executor[In], onExit func()) *node[In] {
	full := sc.FullName(name)
	n := &node[In]{run: sc.Run, scope: sc, name: full, execs: execs, onExit: onExit, batch: 1}
	if len(execs) == 1 {
		n.batch = maxBatch
	}
	n.inbox = NewInbox[In](sc.Run, fmt.Sprintf("%s %q", kind, full), limit, true)
	n.stats = &NodeStats{Name: full, Kind: kind, Path: sc.Path, Pipeline: sc.Pipeline,
		QueueLen: n.inbox.Len, QueueMax: n.inbox.MaxLen}
	dev := sc.Device
	if dev == nil {
		dev = device.Host{}
	}
	pipes := max(sc.Pipelines, 1)
	if tr := sc.Run.Trace; tr != nil {
		n.stats.queue = tr.newQueue(full)
	}
	for i := range execs {
		cs := &CopyStats{Thread: i, epoch: sc.Run.Epoch}
		if tr := sc.Run.Trace; tr != nil {
			cs.track = tr.newTrack(full, i, sc.Pipeline)
		}
		n.stats.Copies = append(n.stats.Copies, cs)
		n.infos = append(n.infos, task.Info{Task: full, Thread: i, Threads: len(execs),
			Pipeline: sc.Pipeline, Pipelines: pipes, Device: dev})
	}
	sc.Run.AddNode(n.stats)
	sc.Run.AddTopoNode(TopoNode{ID: full, Label: name, Kind: kind, Path: sc.Path, Stats: n.stats})
	return n
}

func (n *node[In]) In() any { return n.inbox }

func (n *node[In]) Launch(r *Run) {
	n.live.Store(int32(len(n.execs)))
	for i := range n.execs {
		r.Go(func() { n.work(i) })
	}
}

func (n *node[In]) copyExited() {
	if n.live.Add(-1) == 0 {
		n.inbox.Abandon()
		if n.onExit != nil {
			n.onExit()
		}
	}
}

func (n *node[In]) fail(thread int, phase string, err error) error {
	return &task.Error{Task: n.name, Thread: thread, Phase: phase, Err: err}
}

// protect runs f, turning a panic into an error naming the task.
func (n *node[In]) protect(thread int, phase string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = n.fail(thread, phase, &task.PanicError{Value: p, Stack: debug.Stack()})
		}
	}()
	if e := f(); e != nil {
		return n.fail(thread, phase, e)
	}
	return nil
}

func (n *node[In]) work(i int) {
	r, ex, cs, info := n.run, n.execs[i], n.stats.Copies[i], n.infos[i]
	defer n.copyExited()
	defer cs.SetState(StateDone)
	ctx := pprof.WithLabels(task.WithInfo(r.ctx, info), pprof.Labels("htgs.task", n.name, "htgs.pipeline", strconv.Itoa(info.Pipeline)))
	pprof.SetGoroutineLabels(ctx)
	ctx = context.WithValue(ctx, copyKey{}, &CopyState{Stats: cs, Scope: n.scope})

	if err := n.protect(i, "initialize", func() error { return ex.initialize(ctx, info) }); err != nil {
		r.Fail(err)
		return
	}
	defer func() {
		sctx := context.WithoutCancel(ctx)
		if err := n.protect(i, "shutdown", func() error { return ex.shutdown(sctx) }); err != nil {
			r.Fail(err)
		}
	}()

	batch := make([]In, 0, n.batch)
	counting := !r.NoStats
	var last time.Duration
	if counting {
		last = time.Since(r.Epoch)
	}
	for !ex.canTerminate() {
		if counting {
			cs.SetState(StateWaiting)
		}
		var blocked, ok bool
		batch, blocked, ok = n.inbox.Pop(batch[:0], n.batch)
		if blocked && counting {
			now := time.Since(r.Epoch)
			cs.Wait.Add(int64(now - last))
			last = now
		}
		if !ok {
			return
		}
		if q := n.stats.queue; q != nil {
			q.Add(time.Since(r.Epoch), n.inbox.Len())
		}
		var done int64
		var stop bool
		var err error
		if counting {
			cs.SetState(StateExecuting)
			done, stop, err = n.runBatch(ctx, ex, batch, i, cs.track)
			now := time.Since(r.Epoch)
			cs.Compute.Add(int64(now - last))
			last = now
			cs.ItemsIn.Add(done)
		} else {
			_, stop, err = n.runBatch(ctx, ex, batch, i, nil)
		}
		clear(batch)
		r.Done(int64(len(batch)))
		if err != nil {
			r.Fail(err)
			return
		}
		if stop {
			return
		}
	}
}

func (n *node[In]) runBatch(ctx context.Context, ex executor[In], batch []In, thread int, track *Track) (done int64, stop bool, err error) {
	ex.setActive(true)
	defer ex.setActive(false)
	defer func() {
		if p := recover(); p != nil {
			stop, err = true, n.fail(thread, "execute", &task.PanicError{Value: p, Stack: debug.Stack()})
		}
	}()
	for _, v := range batch {
		if n.run.Stopped() {
			return done, true, nil
		}
		var t0 time.Duration
		if track != nil {
			t0 = time.Since(n.run.Epoch)
		}
		e := ex.execute(ctx, v)
		if track != nil {
			track.Add(Slice{Start: t0, Dur: time.Since(n.run.Epoch) - t0, Kind: SliceExecute})
		}
		if e != nil {
			return done, true, n.fail(thread, "execute", e)
		}
		done++
		if ex.canTerminate() {
			return done, true, nil
		}
	}
	return done, false, nil
}

// emitter is the Emitter handed to a task copy (or bookkeeper rule).
type emitter[T any] struct {
	out    *Outlet[T]
	active *atomic.Bool
	name   string
}

func (e *emitter[T]) Emit(v T) error {
	if !e.active.Load() {
		return fmt.Errorf("htgs: %s: %w", e.name, task.ErrEmitClosed)
	}
	return e.out.Push(v)
}

// taskExec runs one copy of a user task.
type taskExec[In, Out any] struct {
	t      task.Task[In, Out]
	init   task.Initializer
	term   task.Terminator
	shut   task.Shutdowner
	em     emitter[Out]
	active atomic.Bool
}

func (x *taskExec[In, Out]) initialize(ctx context.Context, info task.Info) error {
	if x.init != nil {
		return x.init.Initialize(ctx, info)
	}
	return nil
}

func (x *taskExec[In, Out]) execute(ctx context.Context, in In) error {
	return x.t.Execute(ctx, in, &x.em)
}

func (x *taskExec[In, Out]) canTerminate() bool { return x.term != nil && x.term.CanTerminate() }

func (x *taskExec[In, Out]) shutdown(ctx context.Context) error {
	if x.shut != nil {
		return x.shut.Shutdown(ctx)
	}
	return nil
}

func (x *taskExec[In, Out]) setActive(b bool) { x.active.Store(b) }

type taskInst[In, Out any] struct {
	*node[In]
	out *Outlet[Out]
}

func (t *taskInst[In, Out]) Out(i int) any {
	if i != 0 {
		return nil
	}
	return t.out
}

// TaskOptions are the settings of a task node.
type TaskOptions struct {
	Threads  int
	QueueCap int // 0: unbounded
	// DiscardOutput allows the task's output to be connected to nothing.
	DiscardOutput bool
}

// TaskSpec returns the specification of a task node whose copies are made
// by factory.
func TaskSpec[In, Out any](name string, opt TaskOptions, factory func() task.Task[In, Out]) *Spec {
	s := &Spec{Name: name, Kind: "task", Threads: opt.Threads, Ports: []string{""}}
	s.Build = func(sc *Scope) (Instance, error) {
		full := sc.FullName(name)
		if opt.Threads < 1 {
			return nil, fmt.Errorf("htgs: task %q: thread count %d, want at least 1", full, opt.Threads)
		}
		if factory == nil {
			return nil, fmt.Errorf("htgs: task %q: nil task factory", full)
		}
		tasks, err := MakeCopies(full, opt.Threads, factory)
		if err != nil {
			return nil, err
		}
		out := NewOutlet[Out](sc.Run, fmt.Sprintf("output of task %q", full))
		out.AddProducer() // the node itself
		execs := make([]executor[In], len(tasks))
		for i, t := range tasks {
			x := &taskExec[In, Out]{t: t}
			x.init, _ = t.(task.Initializer)
			x.term, _ = t.(task.Terminator)
			x.shut, _ = t.(task.Shutdowner)
			execs[i] = x
		}
		n := newNode(sc, name, "task", opt.QueueCap, execs, out.ProducerDone)
		n.inbox.SetNext(out)
		n.stats.ItemsOut = out.Pushed
		for _, x := range execs {
			te := x.(*taskExec[In, Out])
			te.em = emitter[Out]{out: out, active: &te.active, name: fmt.Sprintf("task %q", full)}
		}
		return &taskInst[In, Out]{node: n, out: out}, nil
	}
	return s
}

// MakeCopies calls factory n times, refusing nil results, panics, and a
// factory that hands out the same pointer twice (copies would then share
// state by accident).
func MakeCopies[T any](name string, n int, factory func() T) (out []T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &task.Error{Task: name, Phase: "build", Err: &task.PanicError{Value: p, Stack: debug.Stack()}}
		}
	}()
	seen := map[uintptr]int{}
	for i := range n {
		t := factory()
		v := reflect.ValueOf(t)
		if !v.IsValid() || (isNillable(v.Kind()) && v.IsNil()) {
			return nil, &task.Error{Task: name, Thread: i, Phase: "build", Err: fmt.Errorf("factory returned nil")}
		}
		// Pointers to zero-size values may all be equal and hold no state.
		if v.Kind() == reflect.Pointer && v.Type().Elem().Size() > 0 {
			if j, dup := seen[v.Pointer()]; dup {
				return nil, &task.Error{Task: name, Thread: i, Phase: "build",
					Err: fmt.Errorf("factory returned the same %T for copies %d and %d; return a new value per call so copies do not share state", t, j, i)}
			}
			seen[v.Pointer()] = i
		}
		out = append(out, t)
	}
	return out, nil
}

func isNillable(k reflect.Kind) bool {
	switch k {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Interface, reflect.Chan:
		return true
	}
	return false
}
