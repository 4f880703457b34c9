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
	hasShutdown() bool // shutdown may do something
	hasInit() bool     // initialize may do something
	setActive(bool)
}

// maxBatch is how many values a single-copy node takes from its queue at
// once; nodes with several copies take one at a time to balance load.
const maxBatch = 64

// copyRT is the runtime of one copy of a node.
type copyRT[In any] struct {
	ex    executor[In]
	stats CopyStats
	ctx   copyCtx
	buf   [1]In // the first batch's room
	// inited is set once Initialize succeeded: Shutdown is then due.
	inited bool
	// ok is set when the copy's run ends without runtime.Goexit.
	ok bool
	// drained is set when the copy's last take from the queue found it
	// closed and empty for good: the queue needs no abandoning.
	drained bool
	// labelled tells that the goroutine of a copy kept in a Frame has its
	// profiler labels (those of its cached context, the same every run).
	labelled bool
	// stack is the room of the claimed runs to come (see runClaimed).
	stack []handoff
}

// node is the runtime of a task or bookkeeper: one inbox, several copies.
// It lives inside its instance (one allocation for the node, its queue,
// its output and its copies, when it has one).
//
// Its name is its inbox's (inbox.name.s), its kind told by the inbox's
// label; its NodeStats are made when the run's statistics are first asked
// for (see nodeStats).
type node[In any] struct {
	run    *Run
	scope  *Scope
	inbox  Inbox[In]
	copies []copyRT[In]
	one    [1]copyRT[In]
	live   atomic.Int32
	owner  nodeOwner
	queue  *QueueTrack // set when the run is traced
	// frame is set when the node is kept in a Frame: its copies'
	// goroutines then park after a run (see await) instead of ending;
	// launched tells that they are started, eager that a copy has an
	// Initialize (the copies then start at Launch, not at their first
	// value).
	frame    *Frame
	launched bool
	eager    bool
	// offer is the node's owner when it can hand the consumer of its
	// output over (handOff), and hands is set for a run whose copies may
	// defer the wake-up of that consumer in their last batch (no
	// Shutdown between their last Execute and handOff).
	offer handOffer
	hands bool
	// lastCompute is the time the copy of a claimable node spent in
	// Execute in its last run (see cheapExecute); sib is the node claimed
	// after this one by the same producer (see handoff).
	lastCompute time.Duration
	sib         handoff
}

// cheapExecute is the longest time a single-copy task may have spent in
// Execute in its last run of a frame for a producer that is not its
// output's first to defer it and run it after its first consumer, on one
// goroutine: waking a goroutine on the other core costs a few
// microseconds, so running briefer tasks one after the other loses
// nothing.
const cheapExecute = 20 * time.Microsecond

// handOffer is an owner whose output may defer the wake-up of its
// consumer (see Inbox.handOff).
type handOffer interface {
	handOff(claim bool) handoff
}

// nodeOwner is the instance a node lives in.
type nodeOwner interface {
	nodeExited()    // called once, when the last copy has stopped
	emitted() int64 // values emitted by all copies (all rules)
	rules() []string
}

// fullName is the node's name, with enclosing graphs and pipeline clones.
func (n *node[In]) fullName() string { return n.inbox.name.s }

// nodeStats makes the node's statistics in ns.
func (n *node[In]) nodeStats(ns *NodeStats) *NodeStats {
	sc := n.scope
	ns.Name, ns.Path, ns.Pipeline = n.fullName(), sc.Path, sc.Pipeline
	ns.Kind = KindTask
	if n.inbox.name.kind == labelBookkeeper {
		ns.Kind = KindBookkeeper
	}
	ns.Copies = make([]*CopyStats, len(n.copies))
	for i := range n.copies {
		ns.Copies[i] = &n.copies[i].stats
	}
	ns.Rules = n.owner.rules()
	ns.src = n
	return ns
}

// init prepares n, named name in sc, for spec sp, with the given number
// of copies, whose executors the caller then sets. kind, labelTask or
// labelBookkeeper, names the inbox and tells the node's kind.
func (n *node[In]) init(sc *Scope, sp *Spec, name string, kind labelKind, limit, copies int, owner nodeOwner) {
	full := sc.FullName(name)
	r := sc.Run
	n.run, n.scope, n.owner = r, sc, owner
	if copies == 1 {
		n.copies = n.one[:]
	} else {
		n.copies = make([]copyRT[In], copies)
	}
	n.inbox.init(r, label{kind: kind, s: full}, limit, true)
	tr := r.Trace
	if tr != nil {
		n.queue = tr.newQueue(full)
	}
	sides := sc.sidesOf(sp, copies)
	for i := range n.copies {
		c := &n.copies[i]
		c.stats.Thread, c.stats.epoch = i, &r.Epoch
		if tr != nil {
			c.stats.track = tr.newTrack(full, i, sc.Pipeline)
		}
		c.ctx.Context = r.ctx
		if sides != nil {
			c.ctx.side = sides[i]
		}
		c.ctx.state.Stats, c.ctx.state.Scope = &c.stats, sc
	}
	r.addNode(n)
}

// info describes copy i.
func (n *node[In]) info(i int) task.Info {
	sc := n.scope
	var dev device.Device = device.Host{}
	if sc.Device != nil {
		dev = sc.Device
	}
	return task.Info{Task: n.fullName(), Copy: i, Copies: len(n.copies), Clone: sc.Pipeline, Clones: max(sc.Pipelines, 1), Device: dev}
}

func (n *node[In]) itemsOut() int64 { return n.owner.emitted() }
func (n *node[In]) queueLen() int   { return n.inbox.Len() }
func (n *node[In]) queueMax() int   { return n.inbox.MaxLen() }

func (n *node[In]) In() any { return &n.inbox }

func (n *node[In]) Launch(r *Run) {
	if n.launched {
		n.wakeRun()
		return
	}
	k := len(n.copies)
	n.live.Store(int32(k))
	n.launched = n.frame != nil
	if k > 1 && n.copies[0].ctx.side == nil {
		lctx := n.labelled() // shared by the copies
		for i := range n.copies {
			n.copies[i].ctx.Context = lctx
		}
	}
	r.wg.Add(k)
	r.live.Add(int64(k))
	for i := range n.copies {
		go n.work(i)
	}
}

// labelled returns the run's context with the node's profiler labels.
func (n *node[In]) labelled() context.Context {
	// Keys in order: pprof.Labels sorts them otherwise, at a cost.
	return pprof.WithLabels(n.run.ctx, pprof.Labels("htgs.pipeline", strconv.Itoa(n.scope.Pipeline), "htgs.task", n.fullName()))
}

func (n *node[In]) copyExited(c *copyRT[In]) {
	if n.live.Add(-1) == 0 {
		if !c.drained {
			n.inbox.Abandon()
		}
		n.owner.nodeExited()
	}
}

func (n *node[In]) fail(thread int, phase task.Phase, err error) error {
	return &task.Error{Task: n.fullName(), Copy: thread, Phase: phase, Err: err}
}

// protect runs f, turning a panic into an error naming the task.
func (n *node[In]) protect(thread int, phase task.Phase, f func() error) (err error) {
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

// work is the goroutine of copy i, counted by Launch in the run's
// goroutines. Its frames are kept small, and few between it and a task's
// Emit, so that a copy's goroutine seldom outgrows its first stack. A node
// kept in a Frame runs the copy again in each run that reuses the frame.
func (n *node[In]) work(i int) {
	c := &n.copies[i]
	gen := n.inbox.gen
	for {
		next := n.runCopy(c, i, false)
		if n.frame == nil {
			return
		}
		if next != nil {
			// The consumer's run is this goroutine's now, and then the
			// ones its copy claimed in turn, depth first: no goroutine
			// is woken and parked for them. Each sets its labels; the
			// copy's own are set again at its next run.
			c.labelled = false
			c.stack = runClaimed(next, c.stack)
		}
		var ok bool
		if gen, ok = n.await(gen); !ok {
			return
		}
	}
}

// runCopy is one run of copy c: Initialize, the loop, Shutdown, and the
// node's and run's accounting; claimed tells that it runs on another
// copy's goroutine (see runClaimed). It returns the consumer whose run it
// claimed (see Inbox.handOff), for the caller to run next.
func (n *node[In]) runCopy(c *copyRT[In], i int, claimed bool) (next handoff) {
	c.ok, c.drained = false, false
	defer n.exit(c, i, &next)
	n.prepare(c, claimed)
	if !n.initialize(c, i) {
		c.ok = true
		return
	}
	c.inited = true
	n.loop(c, i)
	c.ok = true
	return nil
}

// runClaimed runs the run of the node's single copy that a producer's
// goroutine claimed (Inbox.handOff): its queue is closed, so the run
// cannot wait for input; the copy's own goroutine stays parked.
func (n *node[In]) runClaimed() handoff { return n.runCopy(&n.copies[0], 0, true) }

func (n *node[In]) claim() bool { return n.inbox.claim() }

func (n *node[In]) sibling() handoff {
	s := n.sib
	n.sib = nil
	return s
}

func (n *node[In]) setSibling(h handoff) { n.sib = h }

// runClaimed runs first, the consumers each run hands over in turn and
// their siblings, depth first, each if it can still be claimed (nothing
// woke it meanwhile), with stack as room for the siblings to come; it
// returns the room for the next time.
func runClaimed(first handoff, stack []handoff) []handoff {
	stack = append(stack[:0], first)
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack[len(stack)-1] = nil
		stack = stack[:len(stack)-1]
		for h != nil {
			if s := h.sibling(); s != nil {
				stack = append(stack, s)
			}
			if !h.claim() {
				break
			}
			h = h.runClaimed()
		}
	}
	return stack
}

// await parks the goroutine of a copy of a node kept in a Frame between
// runs: until a run after run gen wakes it (a value, the close of the
// queue, a stop, or an eager Launch), or the frame ends (false).
func (n *node[In]) await(gen uint64) (uint64, bool) {
	q := &n.inbox
	q.mu.Lock()
	// A run that another goroutine claimed is not this goroutine's.
	for (q.gen == gen || q.claimedGen == q.gen+1) && !q.ended {
		q.waiting++
		q.notEmpty.Wait()
		q.waiting--
	}
	gen, ok := q.gen, !q.ended
	q.parked = false
	q.mu.Unlock()
	return gen, ok
}

// wakeRun starts the run of a node kept in a Frame, reset and counted in
// the run's goroutines by Frame.Reuse, once the run has started: its
// parked copies start now if they are eager or something is for them
// already, else when their queue wakes them (a value, its close, the
// run's stop).
func (n *node[In]) wakeRun() {
	q := &n.inbox
	q.mu.Lock()
	q.gen++
	if q.waiting > 0 && (n.eager || q.n > 0 || q.closed || n.run.Stopped()) {
		q.notEmpty.Broadcast()
	}
	q.mu.Unlock()
}

// count sets the live copies of a node kept in a Frame for a run, before
// any node of the run is launched, and returns them, for the run's count.
func (n *node[In]) count(*Run) int {
	k := len(n.copies)
	n.live.Store(int32(k))
	return k
}

// endPool makes the parked goroutines of a node kept in a Frame end.
func (n *node[In]) endPool() {
	q := &n.inbox
	q.mu.Lock()
	q.ended = true
	q.notEmpty.Broadcast()
	q.mu.Unlock()
}

// pool keeps the node in f: its copies' goroutines park after a run.
func (n *node[In]) pool(f *Frame) {
	n.frame = f
	n.offer, _ = n.owner.(handOffer)
	n.inbox.consumer = n
}

// poolable reports whether the node can be kept in a Frame: its copies'
// contexts are the blueprint's cached ones.
func (n *node[In]) poolable() bool {
	for i := range n.copies {
		if n.copies[i].ctx.side == nil || n.copies[i].stats.remote != nil {
			return false
		}
	}
	return true
}

// exit ends copy c: its Shutdown if it was initialized, then the node's
// and the run's accounting, which also runs if Shutdown calls
// runtime.Goexit.
func (n *node[In]) exit(c *copyRT[In], i int, next *handoff) {
	r := n.run
	if !r.noWG {
		defer r.wg.Done()
	}
	defer r.exited()
	if n.hands {
		// After the node's accounting, which may close the consumer's
		// queue, and before the run's, which may end the run.
		defer n.handOff(c, next)
	}
	defer n.copyExited(c)
	defer c.stats.SetState(StateDone)
	defer n.checkGoexit(c)
	ok := c.ok
	c.ok = false
	if c.inited {
		n.shutdown(c, i)
	}
	c.ok = ok
}

// handOff wakes the consumer whose wake-up copy c deferred in its last
// batch, or claims its run for this goroutine (*next) if the copy's run
// ended normally; a goroutine that ends in runtime.Goexit only wakes it.
func (n *node[In]) handOff(c *copyRT[In], next *handoff) {
	if n.inbox.claimable {
		n.lastCompute = time.Duration(c.stats.Compute.Load())
	}
	if c.stats.deferred.Load() {
		*next = n.offer.handOff(c.ok)
	}
}

// checkGoexit marks the frame of a copy whose goroutine ends in
// runtime.Goexit as one that cannot run again.
func (n *node[In]) checkGoexit(c *copyRT[In]) {
	if !c.ok && n.frame != nil {
		n.frame.broken.Store(true)
	}
}

// prepare makes the context of copy c and labels its goroutine for the
// profiler; a claimed run labels the goroutine that runs it.
func (n *node[In]) prepare(c *copyRT[In], claimed bool) {
	if claimed {
		pprof.SetGoroutineLabels(&c.ctx)
		return
	}
	if c.ctx.side == nil {
		lctx := c.ctx.Context // labelled by Launch if there are several copies
		if len(n.copies) == 1 {
			lctx = n.labelled()
		}
		c.ctx.Context = task.WithInfo(lctx, n.info(c.stats.Thread))
	}
	if c.labelled {
		return // a copy kept in a Frame: the same labels as its last run
	}
	pprof.SetGoroutineLabels(&c.ctx)
	c.labelled = n.frame != nil && c.ctx.side != nil
}

// initialize runs the copy's Initialize, failing the run if it fails.
func (n *node[In]) initialize(c *copyRT[In], i int) bool {
	if !c.ex.hasInit() {
		return true
	}
	if err := n.protect(i, task.PhaseInitialize, func() error { return c.ex.initialize(&c.ctx, n.info(i)) }); err != nil {
		n.run.Fail(err)
		return false
	}
	return true
}

// shutdown runs the copy's Shutdown, failing the run if it fails.
func (n *node[In]) shutdown(c *copyRT[In], i int) {
	if !c.ex.hasShutdown() {
		return
	}
	sctx := context.WithoutCancel(&c.ctx)
	if err := n.protect(i, task.PhaseShutdown, func() error { return c.ex.shutdown(sctx) }); err != nil {
		n.run.Fail(err)
	}
}

// batchState is the batch a copy executes, and its accounting.
type batchState[In any] struct {
	batch    []In
	last     time.Duration // when the copy's last wait or execution ended
	done     int64         // values of the batch executed
	active   bool          // inside the batch's execution
	counting bool          // the run keeps counters
	// final is set when the batch taken was the queue's last: closed and
	// empty for good, nothing more can come.
	final bool
}

// loop takes values from the inbox and executes them until the inbox is
// closed and empty, the run stops, or the copy can terminate. A panic in
// Execute (or CanTerminate) fails the run, naming the task (see
// recoverBatch). All but the execution itself is done in other functions,
// to keep this frame, which is under every Execute, small.
func (n *node[In]) loop(c *copyRT[In], i int) {
	var b batchState[In]
	b.batch = c.buf[:0]
	defer n.recoverBatch(c, i, &b)
	n.startLoop(c, &b)
	ex := c.ex
	ctx := context.Context(&c.ctx)
	for !ex.canTerminate() {
		if !n.next(c, &b) {
			return
		}
		b.active = true
		ex.setActive(true)
		stop := false
		var err error
		for _, v := range b.batch {
			if n.run.Stopped() {
				stop = true
				break
			}
			if c.stats.track != nil {
				err = n.executeTraced(c, ctx, v)
			} else {
				err = ex.execute(ctx, v)
			}
			if err != nil {
				stop = true
				break
			}
			b.done++
			if ex.canTerminate() {
				stop = true
				break
			}
		}
		ex.setActive(false)
		b.active = false
		n.batchDone(&c.stats, &b)
		if err != nil {
			n.run.Fail(n.fail(i, task.PhaseExecute, err))
			return
		}
		if stop {
			return
		}
	}
}

//go:noinline
func (n *node[In]) startLoop(c *copyRT[In], b *batchState[In]) {
	b.counting = !n.run.NoStats
	if b.counting {
		// The copy has waited for input since the run started, or since
		// its Initialize ended.
		b.last = n.run.started
		if c.ex.hasInit() {
			b.last = time.Since(n.run.Epoch)
		}
	}
}

// next takes the next batch from the inbox into b; false when there is
// none to come.
//
//go:noinline
func (n *node[In]) next(c *copyRT[In], b *batchState[In]) bool {
	r, cs := n.run, &c.stats
	if b.final {
		// The last batch was the queue's last: taking again would find
		// it closed and empty, without waiting.
		c.drained = true
		return false
	}
	var blocked, ok bool
	max := 1
	if len(n.copies) == 1 {
		max = maxBatch
	}
	// The copy is marked as waiting for input only if it waits (then
	// under the queue's lock, before it blocks).
	var mark *CopyStats
	if b.counting {
		mark = cs
	}
	var last bool
	b.batch, blocked, ok, last = n.inbox.pop(b.batch[:0], max, mark)
	if !ok {
		c.drained = last
	} else if b.final = last; last && n.hands {
		// Nothing more will come: the consumer's wake-up may wait for
		// the end of this run of the copy (see Inbox.push).
		cs.last.Store(true)
	}
	if blocked && b.counting {
		now := time.Since(r.Epoch)
		cs.Wait.Add(int64(now - b.last))
		b.last = now
	}
	if !ok {
		return false
	}
	if q := n.queue; q != nil {
		q.Add(time.Since(r.Epoch), n.inbox.Len())
	}
	if b.counting {
		// Counted when taken, so that a copy blocked in the middle of a
		// batch shows where the values are (ItemsIn and Batch).
		cs.ItemsIn.Add(int64(len(b.batch)))
		cs.since.Store(int64(b.last))
		cs.setExecuting(len(b.batch))
	}
	b.done = 0
	return true
}

// executeTraced executes v, recording the slice on the copy's track.
//
//go:noinline
func (n *node[In]) executeTraced(c *copyRT[In], ctx context.Context, v In) error {
	if n.run.NoStats {
		return c.ex.execute(ctx, v)
	}
	t0 := time.Since(n.run.Epoch)
	err := c.ex.execute(ctx, v)
	s := Slice{Start: t0, Dur: time.Since(n.run.Epoch) - t0, Kind: SliceExecute}
	if rs := c.stats.remote; rs != nil {
		s.Place = rs.last.Load()
	}
	c.stats.track.Add(s)
	return err
}

// batchDone counts a batch executed (or cut short) and releases it.
//
//go:noinline
func (n *node[In]) batchDone(cs *CopyStats, b *batchState[In]) {
	if b.counting {
		now := time.Since(n.run.Epoch)
		cs.Compute.Add(int64(now - b.last))
		b.last = now
		if k := int64(len(b.batch)) - b.done; k > 0 {
			cs.ItemsIn.Add(-k) // cut short: not executed, dropped
		}
	}
	clear(b.batch)
	n.run.Done(int64(len(b.batch)))
}

// recoverBatch, deferred by loop, turns a panic in the execution of a
// batch into the run's error naming the task.
func (n *node[In]) recoverBatch(c *copyRT[In], i int, b *batchState[In]) {
	if !b.active {
		return // not in a batch: a panic elsewhere is not the task's
	}
	c.ex.setActive(false)
	p := recover()
	if p == nil {
		return // runtime.Goexit
	}
	err := n.fail(i, task.PhaseExecute, &task.PanicError{Value: p, Stack: debug.Stack()})
	n.batchDone(&c.stats, b)
	n.run.Fail(err)
}

// emitter is the Emitter handed to a task copy (or bookkeeper rule).
type emitter[T any] struct {
	out    *Outlet[T]
	active *atomic.Bool
	name   *string    // the task's or rule's full name
	rule   bool       // a bookkeeper rule's, not a task's
	stats  *CopyStats // the copy's, marked while Emit waits for room
}

func (e *emitter[T]) Emit(v T) error {
	if !e.active.Load() {
		return e.closed()
	}
	return e.out.push(v, nil, e.stats)
}

// closed is the error of an Emit outside Execute; apart from Emit to keep
// Emit's frame small.
//
//go:noinline
func (e *emitter[T]) closed() error {
	what := "task"
	if e.rule {
		what = "rule"
	}
	return fmt.Errorf("htgs: %s %q: %w", what, *e.name, task.ErrEmitClosed)
}

// taskExec runs one copy of a user task.
type taskExec[In, Out any] struct {
	t      task.Task[In, Out]
	term   task.Terminator
	init   task.Initializer // t, if it is one
	shut   task.Shutdowner  // t, if it is one
	em     emitter[Out]
	active atomic.Bool
}

// set makes tk the copy's task, looking up its optional methods once.
func (x *taskExec[In, Out]) set(tk task.Task[In, Out]) {
	x.t = tk
	x.term, _ = tk.(task.Terminator)
	x.init, _ = tk.(task.Initializer)
	x.shut, _ = tk.(task.Shutdowner)
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

func (x *taskExec[In, Out]) hasInit() bool     { return x.init != nil }
func (x *taskExec[In, Out]) hasShutdown() bool { return x.shut != nil }

func (x *taskExec[In, Out]) setActive(b bool) { x.active.Store(b) }

// placedExec runs one copy of a task whose inputs run elsewhere (a
// task.Placer), counting each input under the worker that ran it. Only
// such copies have one: other tasks pay nothing for it.
type placedExec[In, Out any] struct {
	*taskExec[In, Out]
	rs *RemoteStats
}

func (x placedExec[In, Out]) execute(ctx context.Context, in In) error {
	err := x.t.Execute(ctx, in, &x.em)
	x.rs.executed()
	return err
}

// taskInst is a running task: its node, output and (single) copy in one
// allocation.
type taskInst[In, Out any] struct {
	node[In]
	out   Outlet[Out]
	x1    [1]taskExec[In, Out]
	spec  *taskSpec[In, Out]
	execs []taskExec[In, Out]
}

// reuse resets a task kept in a Frame for run r: its copies are made anew
// by the task's factory.
func (t *taskInst[In, Out]) reuse(r *Run) error {
	n := &t.node
	n.run = r
	var one [1]task.Task[In, Out]
	tasks := one[:]
	if len(n.copies) > 1 {
		tasks = make([]task.Task[In, Out], len(n.copies))
	}
	if err := fillCopies(n.fullName(), tasks, t.spec.factory); err != nil {
		return err
	}
	n.eager = false
	for i, tk := range tasks {
		if placerOf(tk) != nil {
			return errNotReusable
		}
		x := &t.execs[i]
		x.set(tk)
		x.active.Store(false)
		c := &n.copies[i]
		c.ex = x
		c.stats.reset(&r.Epoch)
		c.ctx.Context = r.ctx
		if c.ctx.state.last.Load() != nil {
			c.ctx.state.last.Store(nil)
		}
		c.inited = false
		if i == 0 {
			// Only a single copy without Initialize and Shutdown has
			// its run claimed; copies without Shutdown defer waking
			// their consumer in their last batch.
			n.inbox.claimable = len(tasks) == 1 && !x.hasInit() && !x.hasShutdown()
			n.inbox.cheap = n.inbox.claimable && n.lastCompute > 0 && n.lastCompute <= cheapExecute
			n.hands = n.offer != nil && !x.hasShutdown()
		}
		if x.hasInit() {
			n.eager = true
		} else {
			// It waits for its first value parked, not starting.
			c.stats.SetState(StateWaiting)
		}
	}
	return nil
}

// poolable reports whether the task can be kept in a Frame.
func (t *taskInst[In, Out]) poolable() bool { return t.spec != nil && t.node.poolable() }

func (t *taskInst[In, Out]) Out(i int) any {
	if i != 0 {
		return nil
	}
	return &t.out
}

func (t *taskInst[In, Out]) nodeExited() { t.out.ProducerDone() }

// handOff hands the consumer of the task's output over (Inbox.handOff):
// only the first target of an outlet is given the emitting copy's
// counters, so only its wake-up may have been deferred.
func (t *taskInst[In, Out]) handOff(claim bool) handoff {
	var first, last handoff
	for _, s := range t.out.targets {
		q, ok := s.(*Inbox[Out])
		if !ok {
			continue
		}
		h := q.handOff(claim)
		switch {
		case h == nil:
		case first == nil:
			first = h
		default:
			last.setSibling(h)
		}
		if h != nil {
			last = h
		}
	}
	return first
}
func (t *taskInst[In, Out]) nextN() int            { return 1 }
func (t *taskInst[In, Out]) nextAt(int) registered { return &t.out }
func (t *taskInst[In, Out]) emitted() int64        { return t.out.Pushed() }
func (t *taskInst[In, Out]) rules() []string       { return nil }

// TaskOptions are the settings of a task node.
type TaskOptions struct {
	Copies   int
	QueueCap int // 0: unbounded
	// Priority, when set, is a func(a, b In) bool ordering the input
	// queue (Inbox.SetPriority); nil keeps it FIFO.
	Priority any
	// Chooser, for a task with variants only (VariantsSpec), replaces the
	// chooser's own policy; Speedup is then nil or a func(In) float64
	// giving each value's estimate.
	Chooser device.Chooser
	Speedup any
}

// taskSpec is the specification of a task node.
type taskSpec[In, Out any] struct {
	Spec
	opt     TaskOptions
	factory func() task.Task[In, Out]
}

// TaskSpec returns the specification of a task node whose copies are made
// by factory. Its Build is nil: Instantiate builds it.
func TaskSpec[In, Out any](name string, opt TaskOptions, factory func() task.Task[In, Out]) *Spec {
	ts := &taskSpec[In, Out]{Spec: Spec{Name: name, Kind: KindTask, Copies: opt.Copies, Ports: []string{""}}, opt: opt, factory: factory}
	ts.builder = ts
	return &ts.Spec
}

func (ts *taskSpec[In, Out]) build(sc *Scope) (Instance, error) {
	name, opt := ts.Name, ts.opt
	full := sc.FullName(name)
	if opt.Copies < 1 {
		return nil, fmt.Errorf("htgs: task %q: %d copies, want at least 1", full, opt.Copies)
	}
	if ts.factory == nil {
		return nil, fmt.Errorf("htgs: task %q: nil task factory", full)
	}
	if opt.Chooser != nil {
		return nil, chooserOnlyForVariants(full)
	}
	var one [1]task.Task[In, Out]
	tasks := one[:]
	if opt.Copies > 1 {
		tasks = make([]task.Task[In, Out], opt.Copies)
	}
	if err := fillCopies(full, tasks, ts.factory); err != nil {
		return nil, err
	}
	t := &taskInst[In, Out]{spec: ts}
	t.out.init(sc.Run, label{kind: labelTaskOutput, s: full})
	t.out.AddProducer() // the node itself
	execs := t.x1[:]
	if len(tasks) > 1 {
		execs = make([]taskExec[In, Out], len(tasks))
	}
	t.execs = execs
	t.node.init(sc, &ts.Spec, name, labelTask, opt.QueueCap, len(tasks), t)
	t.inbox.succ = t
	if opt.Priority != nil {
		first, ok := opt.Priority.(func(a, b In) bool)
		if !ok {
			return nil, PriorityTypeError[In](full, opt.Priority)
		}
		t.inbox.SetPriority(first, full)
	}
	for i, tk := range tasks {
		x := &execs[i]
		x.set(tk)
		x.em = emitter[Out]{out: &t.out, active: &x.active, name: &t.inbox.name.s, stats: &t.copies[i].stats}
		t.copies[i].ex = x
		if p := placerOf(tk); p != nil {
			place(&t.copies[i].stats, p)
			if !sc.Run.NoStats {
				t.copies[i].ex = placedExec[In, Out]{x, t.copies[i].stats.remote}
			}
		}
	}
	return t, nil
}

// wrappedPlacer is a task copy made by the runtime around the user's (an
// implementation's copy among variants), which may be a task.Placer.
type wrappedPlacer interface{ placer() task.Placer }

// placerOf returns t, or the copy t wraps, if it runs its inputs elsewhere.
func placerOf(t any) task.Placer {
	if p, ok := t.(task.Placer); ok {
		return p
	}
	if w, ok := t.(wrappedPlacer); ok {
		return w.placer()
	}
	return nil
}

// place marks the copy whose counters are cs as one whose inputs run
// elsewhere, where p says.
func place(cs *CopyStats, p task.Placer) {
	cs.remote = &RemoteStats{placer: p}
	if cs.track != nil {
		cs.track.Remote = true
	}
}

// MakeCopies calls factory n times, refusing nil results, panics, and a
// factory that hands out the same pointer twice (copies would then share
// state by accident).
func MakeCopies[T any](name string, n int, factory func() T) ([]T, error) {
	out := make([]T, n)
	if err := fillCopies(name, out, factory); err != nil {
		return nil, err
	}
	return out, nil
}

// fillCopies is MakeCopies filling dst.
func fillCopies[T any](name string, dst []T, factory func() T) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &task.Error{Task: name, Phase: task.PhaseBuild, Err: &task.PanicError{Value: p, Stack: debug.Stack()}}
		}
	}()
	var seen map[uintptr]int
	for i := range dst {
		t := factory()
		v := reflect.ValueOf(t)
		if !v.IsValid() || (isNillable(v.Kind()) && v.IsNil()) {
			return &task.Error{Task: name, Copy: i, Phase: task.PhaseBuild, Err: fmt.Errorf("factory returned nil")}
		}
		// Pointers to zero-size values may all be equal and hold no state.
		if len(dst) > 1 && v.Kind() == reflect.Pointer && v.Type().Elem().Size() > 0 {
			if seen == nil {
				seen = make(map[uintptr]int, len(dst))
			}
			if j, dup := seen[v.Pointer()]; dup {
				return &task.Error{Task: name, Copy: i, Phase: task.PhaseBuild,
					Err: fmt.Errorf("factory returned the same %T for copies %d and %d; return a new value per call so copies do not share state", t, j, i)}
			}
			seen[v.Pointer()] = i
		}
		dst[i] = t
	}
	return nil
}

func isNillable(k reflect.Kind) bool {
	switch k {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Interface, reflect.Chan:
		return true
	}
	return false
}

// chooserOnlyForVariants is the error of a chooser given to a task that
// has one implementation.
func chooserOnlyForVariants(name string) error {
	return fmt.Errorf("htgs: task %q: a chooser (graph.Choose) applies only to a task with several implementations (graph.AddVariants)", name)
}

// PriorityTypeError is the error of a priority function f that does not
// order the input type In of the task named name.
func PriorityTypeError[In any](name string, f any) error {
	return fmt.Errorf("htgs: task %q: the priority function is a %T, but the task's input is %v: give a func(a, b %v) bool", name, f, reflect.TypeFor[In](), reflect.TypeFor[In]())
}
