package core

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/task"
)

// State is what a task copy is doing.
type State int32

// Task copy states, for stall diagnosis.
const (
	StateStarting   State = iota // not yet initialized
	StateWaiting                 // waiting for input
	StateExecuting               // inside Execute
	StateMemoryWait              // blocked getting memory from a pool
	StateDone                    // terminated
	StateEmitWait                // blocked in Emit: the consumer's bounded queue is full
)

var stateNames = [...]string{"starting", "waiting for input", "executing", "waiting for memory", "terminated",
	"waiting for room in a full queue"}

// String names the state.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// CopyStats are the always-on counters of one task copy. They are written by
// the copy's goroutine (and by Emit) and may be read at any time.
type CopyStats struct {
	Thread int
	// ItemsIn counts the values the copy took from its queue: those
	// executed, and those of the batch it is executing (see Batch). The
	// values of a batch cut short (CanTerminate, an error) that were not
	// executed are taken off again.
	ItemsIn atomic.Int64
	Compute atomic.Int64 // nanoseconds inside Execute
	Wait    atomic.Int64 // nanoseconds waiting for input
	MemWait atomic.Int64 // nanoseconds waiting for memory
	// state holds the State in its low stateBits bits and, while the copy
	// executes a batch, the batch's size above them: one store per batch
	// says both.
	state atomic.Int32
	// since is when the copy began the batch it executes, in nanoseconds
	// since the run's epoch: one store per batch, while counting.
	since   atomic.Int64
	memPool atomic.Pointer[string] // pool waited on, while in StateMemoryWait
	full    atomic.Pointer[label]  // queue waited on, while in StateEmitWait
	track   *Track                 // set when the run is traced
	epoch   *time.Time             // the run's
	remote  *RemoteStats           // set when the copy's task is a task.Placer
	// last is set while the copy executes its last batch of a run of a
	// Frame (its queue closed and empty for good): its consumer's
	// wake-up may then be deferred (see Inbox.push).
	last atomic.Bool
	// deferred is set once the copy deferred a consumer's wake-up.
	deferred atomic.Bool
}

// reset zeroes the counters for another run of the copy (in a Frame).
func (c *CopyStats) reset(epoch *time.Time) {
	*c = CopyStats{Thread: c.Thread, epoch: epoch}
}

// Remote returns what the runtime knows of where the copy's inputs run, or
// nil for a copy whose task is not a task.Placer.
func (c *CopyStats) Remote() *RemoteStats { return c.remote }

// RemoteStats is kept for a copy whose task runs its inputs elsewhere (a
// task.Placer): the inputs each worker ran, counted after every Execute.
type RemoteStats struct {
	placer task.Placer
	last   atomic.Pointer[task.Placement] // the last Execute's worker and host
	mu     sync.Mutex
	counts []WorkerCount
}

// WorkerCount is the number of inputs of a copy that one worker ran.
type WorkerCount struct {
	Worker, Host string
	Items        int64
}

// Placement asks the task copy where its input runs now (or ran last).
func (r *RemoteStats) Placement() task.Placement { return r.placer.Placement() }

// Workers returns the copy's inputs per worker, in the order the workers
// first ran one.
func (r *RemoteStats) Workers() []WorkerCount {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]WorkerCount(nil), r.counts...)
}

// executed counts the input the copy has just executed under the worker
// that ran it, and keeps the worker for the Execute's trace slice.
func (r *RemoteStats) executed() {
	p := r.placer.Placement()
	if p.Worker == "" {
		r.last.Store(nil)
		return
	}
	if l := r.last.Load(); l == nil || l.Worker != p.Worker || l.Host != p.Host {
		r.last.Store(&task.Placement{Worker: p.Worker, Host: p.Host})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.counts {
		if c := &r.counts[i]; c.Worker == p.Worker && c.Host == p.Host {
			c.Items++
			return
		}
	}
	r.counts = append(r.counts, WorkerCount{Worker: p.Worker, Host: p.Host, Items: 1})
}

// stateBits is the number of low bits of CopyStats.state that hold the
// State; the batch size is above them.
const stateBits = 8

// State returns what the copy is doing now.
func (c *CopyStats) State() State { return State(c.state.Load() & (1<<stateBits - 1)) }

// Batch returns the number of values of the batch the copy took from its
// queue and is executing (or is blocked in, getting memory): values no
// longer queued and not yet done. It is 0 while the copy waits for input.
func (c *CopyStats) Batch() int { return int(c.state.Load() >> stateBits) }

// Executing returns for how long the copy has been in the batch it
// executes (waits inside it included), or 0 when it executes none or the
// run keeps no counters (no batch is recorded then).
func (c *CopyStats) Executing() time.Duration {
	if c.Batch() == 0 {
		return 0
	}
	return max(time.Since(*c.epoch)-time.Duration(c.since.Load()), 0)
}

// SetState records what the copy is doing (outside a batch).
func (c *CopyStats) SetState(s State) { c.state.Store(int32(s)) }

// setExecuting records that the copy executes a batch of k values.
func (c *CopyStats) setExecuting(k int) {
	c.state.Store(int32(StateExecuting) | int32(min(k, 1<<(31-stateBits)-1))<<stateBits)
}

// BeginMemoryWait marks the copy as blocked on pool and returns the start
// time, and the state to give back to EndMemoryWait (the batch the copy
// executes included).
func (c *CopyStats) BeginMemoryWait(pool string) (prev State, start time.Time) {
	c.memPool.Store(&pool)
	raw := c.state.Load()
	prev = State(raw)
	c.state.Store(raw&^(1<<stateBits-1) | int32(StateMemoryWait))
	return prev, time.Now()
}

// EndMemoryWait records the time spent since start and restores prev.
func (c *CopyStats) EndMemoryWait(prev State, start time.Time) {
	d := time.Since(start)
	c.MemWait.Add(int64(d))
	if c.track != nil {
		c.track.Add(Slice{Start: start.Sub(*c.epoch), Dur: d, Kind: SliceMemoryWait, Detail: c.MemoryPool()})
	}
	c.SetState(prev)
	c.memPool.Store(nil)
}

// beginEmitWait marks the copy as blocked emitting into the full queue q
// and returns the state to give back to endEmitWait.
func (c *CopyStats) beginEmitWait(q *label) int32 {
	c.full.Store(q)
	raw := c.state.Load()
	c.state.Store(raw&^(1<<stateBits-1) | int32(StateEmitWait))
	return raw
}

// endEmitWait restores the state prev.
func (c *CopyStats) endEmitWait(prev int32) {
	c.state.Store(prev)
	c.full.Store(nil)
}

// FullQueue names the queue the copy waits to emit into, or "".
func (c *CopyStats) FullQueue() string {
	if q := c.full.Load(); q != nil {
		return q.String()
	}
	return ""
}

// MemoryPool returns the pool the copy waits on, or "".
func (c *CopyStats) MemoryPool() string {
	if p := c.memPool.Load(); p != nil {
		return *p
	}
	return ""
}

// NodeStats describes one runtime node and its copies.
type NodeStats struct {
	Name     string   // full name, with enclosing graphs and pipeline clones
	Kind     Kind     // KindTask or KindBookkeeper
	Path     []string // enclosing graphs/pipeline clones, outermost first
	Pipeline int
	Copies   []*CopyStats
	Rules    []string     // bookkeeper rule names
	ItemsOut func() int64 // values emitted by all copies (all rules)
	QueueLen func() int   // current input queue length (nil: none)
	QueueMax func() int   // largest input queue length
	// src gives ItemsOut, QueueLen and QueueMax, which are filled from it
	// when the run's statistics are first asked for (Run.Nodes).
	src statsSource
}

// label is the node's name without the enclosing graphs.
func (n *NodeStats) label() string {
	k := 0
	for _, p := range n.Path {
		k += len(p) + 1
	}
	if k > len(n.Name) {
		return n.Name
	}
	return n.Name[k:]
}

// statsSource is what a node's counter functions read.
type statsSource interface {
	itemsOut() int64
	queueLen() int
	queueMax() int
}

// fill sets the counter functions from src.
func (n *NodeStats) fill() {
	if n.src == nil {
		return
	}
	if n.ItemsOut == nil {
		n.ItemsOut = n.src.itemsOut
	}
	if n.QueueLen == nil {
		n.QueueLen = n.src.queueLen
	}
	if n.QueueMax == nil {
		n.QueueMax = n.src.queueMax
	}
}

// PoolStats describes one memory pool instance.
type PoolStats struct {
	Name     string // full name, with enclosing graphs and pipeline clones
	Path     []string
	Pipeline int
	Capacity int
	InUse    func() int   // buffers handed out and not yet back
	Peak     func() int   // largest InUse ever
	Waits    func() int64 // Gets that had to wait
}
