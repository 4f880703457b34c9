// Package graph builds and runs HTGS task graphs.
//
// A [Graph] is a blueprint: typed tasks, bookkeepers and nested graphs joined
// by edges whose types are checked by the compiler. [Connect] joins a
// [Producer] of T to a [Consumer] of T; connecting one producer to several
// consumers broadcasts every value to each of them, and several producers
// may feed one consumer.
//
//	g := graph.New[int, int]("square")
//	sq := graph.AddTask(g, "square", 4, func() task.Task[int, int] {
//		return task.Map(func(_ context.Context, v int) (int, error) { return v * v, nil })
//	})
//	graph.Connect(g.Input(), sq)
//	graph.Connect(sq, g.Output())
//
// Besides plain tasks, a node may be a task of several input types, each
// with its own execute ([AddMultiTask], [AddInput]), or a task with several
// implementations bound to devices, the runtime choosing one per value from
// their measured times ([AddVariants]) or a [device.Chooser] such as pats'
// PATS policy choosing for it ([Choose]); a task's queue may order its
// values by priority ([Priority]) instead of FIFO.
//
// Values must not vanish without a word: Start refuses a node whose output
// is connected to nothing, and a graph whose Output nothing feeds. A sink
// says so in one call, [Discard], whatever kind of node it is; a graph with
// a discarded node may leave its Output unconnected.
//
// [Graph.Start] instantiates the blueprint (one set of task copies per start)
// and returns a [Runtime] to send inputs to, read results from, and wait on.
//
// Termination needs no help from tasks: a task stops when all its producers
// have stopped and its queue is empty, and a graph with cycles stops when it
// is quiescent (the input is closed, nothing is queued, and no Execute is
// running). The first error or panic of any task cancels the run, and Wait
// returns it as a *task.Error naming the task.
package graph

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/internal/core"
	"github.com/gohtgs/htgs/task"
)

// Port is a typed reference to one side of a node: the input (of type T) a
// node consumes, or the output (of type T) it produces. Nodes return their
// ports; users never build one, and a zero Port makes [Connect] panic.
// Ports of different types cannot be converted into each other, so the
// compiler checks the type of every edge.
type Port[T any] struct {
	_ [0]T // makes Port[A] and Port[B] distinct, unconvertible types
	portHandle
}

// Producer is anything that emits values of type T: a task, a bookkeeper
// rule, a nested graph, an execution pipeline, or a graph's [Graph.Input].
type Producer[T any] interface {
	// OutPort returns the port of the values the node emits.
	OutPort() Port[T]
}

// Consumer is anything that takes values of type T: a task, a bookkeeper, a
// nested graph, an execution pipeline, or a graph's [Graph.Output].
type Consumer[T any] interface {
	// InPort returns the port of the values the node takes.
	InPort() Port[T]
}

// Vertex is any node of a graph that takes input: a task, a nested graph, a
// bookkeeper or a pipeline (memmgr.Use takes the tasks that get memory as
// Vertices). Only this module's node types implement it.
type Vertex interface {
	Name() string
	specced
}

// Builder is a graph under construction (a [*Graph]); the packages that add
// nodes of their own kinds (bookkeeper, pipeline, memmgr) take one. Only
// this package's Graph implements it.
type Builder interface {
	Name() string
	Err() error
	owner
}

// Connect adds an edge from p to c. Mistakes that the compiler cannot see
// (ports of different graphs, the same edge twice) are reported by Start.
func Connect[T any](p Producer[T], c Consumer[T]) {
	core.Connect[T](core.RefOf(p.OutPort()), core.RefOf(c.InPort()))
}

type (
	owner      = core.Owner
	handle     = core.Handle
	portHandle = core.PortHandle
	specced    = core.Specced
)

// port returns a Port holding ref.
func port[T any](ref core.PortRef) Port[T] { return core.MakePort[Port[T]](ref) }

// graphIn is a graph's input seen from inside: a producer.
type graphIn[T any] struct{ p Port[T] }

func (g graphIn[T]) OutPort() Port[T] { return g.p }

// graphOut is a graph's output seen from inside: a consumer.
type graphOut[T any] struct{ p Port[T] }

func (g graphOut[T]) InPort() Port[T] { return g.p }

// Graph is a blueprint of a task graph that takes In values and produces Out
// values. Build it with the functions of this package and of bookkeeper,
// memmgr and pipeline, then Start it (as often as needed) or nest it in
// another graph with [AddGraph]. A Graph must not be modified while Start
// runs.
type Graph[In, Out any] struct {
	handle
	in  graphIn[In]
	out graphOut[Out]
}

// New returns an empty graph named name.
func New[In, Out any](name string) *Graph[In, Out] {
	bp := core.NewBlueprint(name)
	return &Graph[In, Out]{
		handle: core.NewHandle(bp),
		in:     graphIn[In]{port[In](core.PortRef{BP: bp})},
		out:    graphOut[Out]{port[Out](core.PortRef{BP: bp})},
	}
}

// Name returns the graph's name.
func (g *Graph[In, Out]) Name() string { return core.BlueprintOf(g).Name }

// Input is the producer of the values sent to the graph: connect it to the
// tasks that consume them.
func (g *Graph[In, Out]) Input() Producer[In] { return g.in }

// Output is the consumer of the graph's results: connect the tasks (or
// bookkeeper rules) whose values leave the graph to it.
func (g *Graph[In, Out]) Output() Consumer[Out] { return g.out }

// Discard declares that p, a task, bookkeeper rule, nested graph or
// pipeline, may be connected to no consumer: it is a sink (it writes files,
// fills a shared structure, ...) and what it emits beyond its edges, if
// anything, is dropped on purpose. Without it, Start refuses a producer
// whose output goes nowhere, because its values would be lost without a
// word.
//
// A graph with a discarded producer may also leave its own Output
// unconnected: it works by side effects, and its Results are empty. For a
// graph whose work loops in a cycle, discard a node of the cycle.
func Discard[T any](p Producer[T]) { core.DiscardRef(core.RefOf(p.OutPort())) }

// Err reports the construction mistakes recorded so far, or nil.
func (g *Graph[In, Out]) Err() error { return core.BlueprintOf(g).Err() }

// Node is a task (or nested graph, or pipeline) in a graph: it consumes In
// and produces Out.
type Node[In, Out any] struct {
	portHandle
	name string
}

// Name returns the node's name.
func (n *Node[In, Out]) Name() string { return n.name }

// InPort returns the port of the node's input.
func (n *Node[In, Out]) InPort() Port[In] { return port[In](core.RefOf(n)) }

// OutPort returns the port of the node's output.
func (n *Node[In, Out]) OutPort() Port[Out] { return port[Out](core.RefOf(n)) }

// newNode adds s to bp and returns it as a typed node.
func newNode[In, Out any](bp *core.Blueprint, s *core.Spec) *Node[In, Out] {
	bp.Add(s)
	return &Node[In, Out]{portHandle: core.NewPortHandle(core.PortRef{BP: bp, Spec: s}), name: s.Name}
}

// Option adjusts a node: [QueueCap], [Priority].
type Option interface{ applyNode(*core.TaskOptions) }

// nodeOption is an Option made of a function.
type nodeOption func(*core.TaskOptions)

func (f nodeOption) applyNode(o *core.TaskOptions) { f(o) }

// QueueCap bounds the node's input queue to n values: producers block in
// Emit while it is full (back-pressure). The default is unbounded, which is
// what cycles need; a bounded queue inside a cycle can deadlock.
func QueueCap(n int) Option { return nodeOption(func(o *core.TaskOptions) { o.QueueCap = n }) }

// Priority makes the node's input queue a priority queue: of the values
// queued, the copies take first the v for which first(v, w) holds against
// every other w, and values equal in priority (neither first of the
// other) in the order they arrived. T must be the node's input type, or
// Start fails with an error naming the node. Without it the queue is FIFO.
//
// A priority queue is taken one value at a time, also by a task with one
// copy (a FIFO queue is taken in batches of up to 64), so that a value
// that arrives while the copies are busy overtakes those queued before
// it; first runs under the queue's lock, on the goroutine of whoever sends
// or takes a value, and must be quick. A panic in first fails the run
// with an error naming the node.
func Priority[T any](first func(a, b T) bool) Option {
	return nodeOption(func(o *core.TaskOptions) {
		o.Priority = nil
		if first != nil {
			o.Priority = first
		}
	})
}

// AddTask adds a task named name run by copies copies (at least 1), each
// made by a call of newTask. The copies run concurrently and share one
// input queue.
func AddTask[In, Out any](b Builder, name string, copies int, newTask func() task.Task[In, Out], opts ...Option) *Node[In, Out] {
	o := core.TaskOptions{Copies: copies}
	if len(opts) > 0 {
		p := &core.TaskOptions{Copies: copies} // o itself stays on the stack
		for _, f := range opts {
			f.applyNode(p)
		}
		o = *p
	}
	bp := core.BlueprintOf(b)
	if o.Priority != nil {
		if _, ok := o.Priority.(func(a, b In) bool); !ok {
			bp.Errorf("%w", core.PriorityTypeError[In](name, o.Priority))
		}
	}
	return newNode[In, Out](bp, core.TaskSpec(name, o, newTask))
}

// AddFunc adds a stateless task running f in copies copies.
func AddFunc[In, Out any](b Builder, name string, copies int, f func(ctx context.Context, in In, out task.Emitter[Out]) error, opts ...Option) *Node[In, Out] {
	return AddTask(b, name, copies, func() task.Task[In, Out] { return task.Func[In, Out](f) }, opts...)
}

// AddGraph nests inner in b as one node (hierarchical dataflow). Each start
// of b, and each pipeline clone containing it, instantiates inner afresh;
// its tasks appear under the name "name/task".
func AddGraph[In, Out any](b Builder, name string, inner *Graph[In, Out]) *Node[In, Out] {
	return newNode[In, Out](core.BlueprintOf(b), core.GraphSpec[In, Out](name, core.BlueprintOf(inner)))
}

// StartOption configures a run: [WithLogger], [WithTrace],
// [WithoutCounters], [WithStallReport], [WithoutStallReport],
// [WithProgress], [WithAbandonAfter].
type StartOption interface{ applyStart(*startConfig) }

// startOption is a StartOption made of a function.
type startOption func(*startConfig)

func (f startOption) applyStart(c *startConfig) { f(c) }

type startConfig struct {
	log           *slog.Logger
	trace         bool
	noStats       bool
	stallAfter    time.Duration
	stallFn       func(Stats)
	progressEvery time.Duration
	progressFn    func(Stats)
	started       []func(*Execution)
	abandonAfter  time.Duration
}

// WithLogger sends the run's diagnostics to l. By default they are
// discarded, except stall reports (see [WithStallReport]), which go to
// slog.Default() so that a run that hangs does not hang silently.
func WithLogger(l *slog.Logger) StartOption { return startOption(func(c *startConfig) { c.log = l }) }

// Start instantiates the graph and starts every task copy. It returns an
// error, and starts nothing, if the graph is malformed: construction
// mistakes, a task that no producer feeds, a node whose output goes nowhere
// (see [Discard]), a failing task factory or memory allocator.
func (g *Graph[In, Out]) Start(ctx context.Context, opts ...StartOption) (*Runtime[In, Out], error) {
	cfg := newStartConfig(opts)
	return g.start(ctx, &cfg, false)
}

// newStartConfig applies opts to the defaults.
func newStartConfig(opts []StartOption) startConfig {
	cfg := startConfig{stallAfter: DefaultStallDelay}
	for _, o := range opts {
		o.applyStart(&cfg)
	}
	return cfg
}

// start is Start; keep tells that the run may use, and then keep, a frame
// of the graph (see Run): the caller then gives it back with recycle.
func (g *Graph[In, Out]) start(ctx context.Context, cfg *startConfig, keep bool) (*Runtime[In, Out], error) {
	bp := core.BlueprintOf(g)
	// A run whose Execution is handed to callbacks may be looked at after
	// Run returns: it keeps nothing.
	keep = keep && !cfg.trace && len(cfg.started) == 0 && core.Fits(ctx)
	if keep {
		if f := core.TakeFrame(bp); f != nil {
			rt, err := g.restart(ctx, cfg, f)
			if !core.IsNotReusable(err) {
				return rt, err
			}
		}
	}
	r := core.NewRun(ctx, bp.Name, cfg.log)
	r.NoStats = cfg.noStats
	if cfg.trace {
		r.Trace = &core.Trace{}
	}
	// The runtime holds the graph's input and output queues and the root
	// scope: one allocation for them all.
	rt := &Runtime[In, Out]{}
	rt.Execution = &rt.exec
	rt.exec.run = r
	if cfg.abandonAfter > 0 {
		r.AbandonAfter, r.Abandoned = cfg.abandonAfter, rt.exec.abandoned
	}
	r.Reserve(len(bp.Specs))
	input, results := &rt.in, &rt.out
	input.InitNamed(r, "input of graph ", bp.Name, true)
	input.AddProducer() // the caller, until Close
	results.InitNamed(r, "output of graph ", bp.Name, true, 0, false)
	rt.input, rt.results = input, results
	rt.exec.outputs = results.Pushed
	rt.scope = core.Scope{Run: r, Pipelines: 1}
	insts, err := core.Instantiate(bp, &rt.scope, input, results)
	if err == nil {
		err = r.Validate(results)
	}
	if err != nil {
		return nil, r.Abort(err)
	}
	if keep {
		if rt.frame = core.NewFrame(bp, &rt.scope, insts); rt.frame != nil {
			rt.frame.Owner = rt
		}
	}
	rt.launch(cfg, insts)
	return rt, nil
}

// launch starts the run of rt, instantiated (or reset) and wired.
func (rt *Runtime[In, Out]) launch(cfg *startConfig, insts []core.Instance) {
	r := rt.run
	if rt.results.Producers() == 0 {
		rt.results.Close() // nothing feeds the output: it is empty for good
	}
	r.Start()
	rt.exec.watch(cfg)
	for _, in := range insts {
		in.Launch(r)
	}
	r.Launched()
	for _, f := range cfg.started {
		f(rt.Execution)
	}
}

// restart starts a run of g on the frame f kept by an earlier Run: its
// queues and copies' goroutines are reset and woken rather than made.
func (g *Graph[In, Out]) restart(ctx context.Context, cfg *startConfig, f *core.Frame) (*Runtime[In, Out], error) {
	rt := f.Owner.(*Runtime[In, Out])
	bp := core.BlueprintOf(g)
	// The previous run of f is over and nothing refers to it: its Run is
	// renewed rather than allocated again.
	r := rt.exec.run
	r.Renew(ctx, bp.Name, cfg.log)
	r.NoStats = cfg.noStats
	rt.exec.sent.Store(0)
	if cfg.abandonAfter > 0 {
		r.AbandonAfter, r.Abandoned = cfg.abandonAfter, rt.exec.abandoned
	}
	rt.closed = false
	rt.closing.Store(false)
	rt.left = nil
	if err := f.Reuse(r, &rt.scope); err != nil {
		return nil, r.Abort(err)
	}
	rt.launch(cfg, f.Instances())
	return rt, nil
}

// feed sends every value of inputs, until a Send fails, and closes the
// input.
func (rt *Runtime[In, Out]) feed(inputs iter.Seq[In]) {
	defer rt.Close()
	// inputs is given one yield per Runtime, made once, rather than a
	// range loop's body made at every Run of a kept frame.
	if rt.send1 == nil {
		rt.send1 = rt.sendOne
	}
	inputs(rt.send1)
}

// sendOne is the yield given to the inputs of a Run: Send, and go on
// while it succeeds.
func (rt *Runtime[In, Out]) sendOne(v In) bool { return rt.Send(v) == nil }

// drop waits for a run that Run left (a panic), and ends the goroutines
// of its frame.
func (rt *Runtime[In, Out]) drop() {
	_ = rt.Wait()
	if f := rt.frame; f != nil {
		f.End()
	}
}

// recycle gives the frame of a finished Run back to the graph.
func (rt *Runtime[In, Out]) recycle() {
	if f := rt.frame; f != nil {
		core.PutFrame(f)
	}
}

// Release ends the goroutines that [Graph.Run] keeps parked between runs
// of g (see Run). They also end by themselves once no Run has used them
// for a while (100 ms); g stays usable.
func (g *Graph[In, Out]) Release() { core.ReleaseFrames(core.BlueprintOf(g)) }

// Runtime is one running instance of a graph: Send its inputs, Close, read
// its Results. Its [*Execution] (Wait, Cancel, Stats, pictures) is the part
// that depends on no type: hand rt.Execution to code that only observes or
// waits for runs of any graph.
type Runtime[In, Out any] struct {
	*Execution
	exec    Execution
	input   *core.Outlet[In] // &in
	results *core.Inbox[Out] // &out
	in      core.Outlet[In]
	out     core.Inbox[Out]
	scope   core.Scope
	mu      sync.RWMutex // held (read) by Send, (write) by Close
	closed  bool
	closing atomic.Bool // set by Close first: Sends waiting for room give up

	leftMu sync.Mutex
	left   []Out // taken from the output queue by a range that stopped early
	// send1 is sendOne, made once (see feed).
	send1 func(In) bool

	// frame is the graph's frame this runtime lives in, when Run keeps it
	// for the next Run.
	frame *core.Frame
}

// ErrClosed is returned by Send after Close, and by a Send that was waiting
// for room in a full queue (see [QueueCap]) when Close was called.
var ErrClosed = errors.New("htgs: graph input is closed")

// Send gives v to the tasks connected to the graph's input. It fails after
// Close, or with the run's error once the run has stopped. Send may be
// called from several goroutines. It blocks while a bounded queue fed by
// the input is full; if Close is called meanwhile, Send returns ErrClosed
// and v is not delivered (to the consumers still full, when the input feeds
// several). If every task fed by the input has terminated (see
// task.Terminator), Send returns [task.ErrTerminated].
func (rt *Runtime[In, Out]) Send(v In) error {
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	if rt.closed {
		return ErrClosed
	}
	if rt.run.Stopped() {
		return rt.run.StopErr()
	}
	rt.exec.sent.Add(1)
	err := rt.input.PushAbort(v, &rt.closing)
	if err == core.ErrClosed {
		return ErrClosed
	}
	return err
}

// Close tells the graph no more input will come; the graph then finishes
// the work in flight and terminates. It returns at once, even while a Send
// on another goroutine waits for room in a full queue: that Send returns
// ErrClosed. Close is idempotent.
func (rt *Runtime[In, Out]) Close() {
	if !rt.closing.Swap(true) {
		rt.run.WakeProducers() // Sends waiting for room see closing and return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return
	}
	rt.closed = true
	rt.input.ProducerDone()
	rt.run.Done(1)
}

// resultsBatch is how many outputs Results takes from the queue at once.
const resultsBatch = 64

// Results yields the graph's outputs as they are produced, until the graph
// has terminated (or failed) and every output was yielded. Outputs are
// buffered, so reading them is not required for the graph to finish.
//
// Results may be ranged over several times, one range at a time: a range
// that stops early (break, return) loses nothing. Outputs are taken from
// the graph's queue in batches; those of the batch that were not yet
// yielded when the range stopped are kept, and the next range over Results
// yields them first, in order, before reading the queue again.
func (rt *Runtime[In, Out]) Results() iter.Seq[Out] {
	return func(yield func(Out) bool) {
		rt.leftMu.Lock()
		buf := rt.left
		rt.left = nil
		rt.leftMu.Unlock()
		if buf == nil {
			buf = make([]Out, 0, resultsBatch)
		}
		for {
			for i, v := range buf {
				if !yield(v) {
					rt.keep(buf[i+1:])
					clear(buf)
					return
				}
			}
			clear(buf)
			var ok bool
			buf, _, ok = rt.results.Pop(buf[:0], resultsBatch)
			if !ok {
				return
			}
		}
	}
}

// keep saves outputs taken from the queue but not yielded, for the next
// range over Results.
func (rt *Runtime[In, Out]) keep(rest []Out) {
	if len(rest) == 0 {
		return
	}
	rt.leftMu.Lock()
	rt.left = append(slices.Clone(rest), rt.left...)
	rt.leftMu.Unlock()
}

// Execution is a started run of any graph, seen without its types: what
// observing, profiling and waiting need. Every [Runtime] embeds one.
type Execution struct {
	run     *core.Run
	sent    atomic.Int64
	outputs func() int64 // values that reached the graph's output
}

// Name returns the name of the running graph.
func (e *Execution) Name() string { return e.run.Name }

// Wait blocks until every task copy has stopped and returns the first error:
// a *task.Error naming the failing task, or the context's error if the run
// was cancelled. No goroutine of the run is left when Wait returns, unless
// [WithAbandonAfter] let it give up on copies that ignore their context:
// it then returns an [*AbandonedError] naming them.
func (e *Execution) Wait() error { return e.run.Wait() }

// Done returns a channel that is closed when every task copy of the run has
// stopped, whether or not anyone calls Wait; Wait then returns without
// waiting for the run.
func (e *Execution) Done() <-chan struct{} { return e.run.Finished() }

// Cancel stops the run as if its context had been cancelled.
func (e *Execution) Cancel() { e.run.Fail(context.Canceled) }

// Wait blocks until every task copy has stopped and returns the first
// error, as [Execution.Wait] does: call it after Close, or after reading
// Results to the end.
func (rt *Runtime[In, Out]) Wait() error { return rt.exec.Wait() }

// Cancel stops the run as if its context had been cancelled, as
// [Execution.Cancel] does.
func (rt *Runtime[In, Out]) Cancel() { rt.exec.Cancel() }

// Run is the common case in one call: start g, send every value of inputs,
// close, pass each result to yield (in the order they leave the graph), and
// wait. If yield returns an error the run is cancelled and that error is
// returned. A nil yield drops the results as they come (a graph run for
// its side effects).
//
// Unlike Start, Run keeps what it instantiated for the next Run of g when
// g is made of tasks only (no bookkeeper, nested graph, pipeline, variants
// or memory pool), and neither [WithTrace] nor [WithStarted] is given, nor
// a context with profiler labels: the next Run resets the queues, makes
// the task copies anew with their factories (Initialize and Shutdown still
// run once per copy and run), and wakes the copies' goroutines, which park
// on their queues between runs instead of ending. Running a graph many
// times this way costs about what go-taskflow's Run().Wait() does per task
// (docs/model.md). Runs of g at the same time each get their own. The
// parked goroutines end after 100 ms without a Run, or at once with
// [Graph.Release]; a run that [WithAbandonAfter] gave up on, or a copy
// whose goroutine ended in runtime.Goexit, is never reused.
func (g *Graph[In, Out]) Run(ctx context.Context, inputs iter.Seq[In], yield func(Out) error, opts ...StartOption) (err error) {
	cfg := newStartConfig(opts)
	rt, err := g.start(ctx, &cfg, true)
	if err != nil {
		return err
	}
	waited := false
	defer func() {
		if !waited {
			// inputs or yield panicked: the run is cancelled, and its
			// goroutines end with it rather than park.
			rt.Cancel()
			go rt.drop()
		}
	}()
	if yield == nil {
		// Nobody reads the results: they are counted and dropped as they
		// come, rather than queued and read here, and this goroutine feeds
		// the inputs itself.
		rt.results.Discard()
		rt.feed(inputs)
		err = rt.Wait()
		waited = true
		rt.recycle()
		return err
	}
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		rt.feed(inputs)
	}()
	var yerr error
	for v := range rt.Results() {
		if yerr = yield(v); yerr != nil {
			rt.Cancel()
			break
		}
	}
	err = rt.Wait()
	waited = true
	<-fed
	rt.recycle()
	if yerr != nil {
		return yerr
	}
	return err
}
