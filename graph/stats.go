package graph

import (
	"cmp"
	"slices"
	"time"

	"github.com/gohtgs/htgs/internal/core"
)

// Stats is a snapshot of a run: its always-on counters, what every task
// copy is doing, and the pools' levels. [Execution.Stats] takes one at any
// time, [WithProgress] delivers one periodically, and [WithStallReport] one
// when the run makes no progress; its String method is the diagnosis of a
// stuck graph.
type Stats struct {
	Graph   string
	Elapsed time.Duration // since Start; frozen once every task copy has stopped
	Sent    int64         // values given to Send
	Outputs int64         // values that reached the graph's output
	// Done tells that every task copy of the run has stopped (the last
	// WithProgress call has it, and every snapshot taken after).
	Done    bool
	Cyclic  bool          // the graph has cycles: it ends when quiescent
	Pending int64         // queued or executing values (cyclic graphs only; the open input counts 1)
	Idle    time.Duration // in a stall report: how long the run has made no progress
	// Stopped is how long ago the run was cancelled or failed, 0 if it
	// was not; StopReason is its error then (the context's cause, or the
	// first task's error).
	Stopped    time.Duration
	StopReason string
	Tasks      []TaskStats
	Pools      []PoolStats
}

// TaskStats sums the counters of a task's copies (a bookkeeper is a task
// with one copy).
type TaskStats struct {
	Name  string // full name: enclosing graphs and pipeline clones, then the task
	Kind  TaskKind
	Clone int // clone index of the innermost enclosing pipeline
	// ItemsIn counts the values the copies took from the queue: those
	// executed and those held in the batches being executed (Held).
	ItemsIn    int64
	ItemsOut   int64         // values emitted (by all copies, or all rules)
	Compute    time.Duration // total time inside Execute, all copies
	Wait       time.Duration // total time waiting for input
	MemoryWait time.Duration // total time waiting for pool memory
	Queue      int           // values queued now
	MaxQueue   int           // most values ever queued
	// Held is the sum of the copies' Batch: values taken from the queue by
	// copies that have not finished executing them. Every value sent to a
	// task is either queued, held, or done.
	Held   int
	Copies []CopyStats
	// Remote tells a task whose copies run their inputs on worker
	// processes (see [task.Placer]; a cluster.Remote's, for one).
	Remote bool
	// Workers counts a remote task's executed inputs per worker, the
	// busiest first.
	Workers []WorkerStats
}

// WorkerStats is the number of a remote task's inputs that one worker ran.
type WorkerStats struct {
	Worker string // the worker's name
	Host   string // the worker's host
	Items  int64  // inputs it ran
}

// TaskKind tells a task from a bookkeeper in [TaskStats].
type TaskKind string

// The kinds of [TaskStats].
const (
	KindTask       TaskKind = "task"
	KindBookkeeper TaskKind = "bookkeeper"
)

// CopyStats are the counters of one task copy.
type CopyStats struct {
	Copy       int
	State      string // "executing", "waiting for input", "waiting for memory", ...
	MemoryPool string // the pool waited on, in the "waiting for memory" state
	// FullQueue names the consumer whose bounded queue (see [QueueCap])
	// the copy waits to emit into, in the "waiting for room in a full
	// queue" state (a task's copy emitting to its first consumer).
	FullQueue string
	// Batch is the number of values the copy took from the queue at once
	// and is executing, or is blocked in (waiting for memory, or for room
	// in a full queue it emits to): they are no longer queued. A copy of a
	// task with one copy takes up to 64 values at a time; 0 while waiting
	// for input.
	Batch      int
	ItemsIn    int64
	Compute    time.Duration
	Wait       time.Duration
	MemoryWait time.Duration
	// A remote task's copy (see [TaskStats.Remote]) tells where its input
	// runs: while it executes, the worker that has taken the input (Worker
	// is empty while the input waits for one) and for how long it has had
	// it (OnWorker, 0 if not known); otherwise the worker of its last input.
	Worker   string
	Host     string
	OnWorker time.Duration
	// Executing is how long the copy has been in the batch it executes
	// (waits inside it included); 0 outside a batch, and when counters are
	// off ([WithoutCounters]).
	Executing time.Duration
}

// PoolStats describes a memory pool instance.
type PoolStats struct {
	Name     string
	Clone    int
	Capacity int
	InUse    int   // buffers out now
	Peak     int   // most buffers out at once
	Waits    int64 // Gets that had to wait
}

// Stats returns a snapshot of the run; it is safe to call at any time, from
// any goroutine (a signal handler, an HTTP handler), also after Wait.
func (e *Execution) Stats() Stats {
	s := snapshot(e.run)
	s.Sent, s.Outputs = e.sent.Load(), e.outputs()
	s.Cyclic = e.run.Cyclic()
	if s.Cyclic && !s.Done {
		s.Pending = e.run.Pending()
	}
	return s
}

// itemsOut returns what a node emitted. Outputs are counted per task, not
// per copy: an outlet counts under its first consumer's queue lock, which
// costs nothing extra per value.
func itemsOut(n *core.NodeStats) int64 {
	if n.ItemsOut == nil {
		return 0
	}
	return n.ItemsOut()
}

func snapshot(r *core.Run) Stats {
	s := Stats{Graph: r.Name}
	s.Elapsed, s.Done = r.Elapsed()
	if at, ok := r.StoppedAt(); ok {
		s.Stopped = max(s.Elapsed-at, 0)
		if err := r.Err(); err != nil {
			s.StopReason = err.Error()
		}
	}
	for _, n := range r.Nodes() {
		ts := TaskStats{Name: n.Name, Kind: TaskKind(n.Kind), Clone: n.Pipeline, ItemsOut: itemsOut(n)}
		if n.QueueLen != nil {
			ts.Queue, ts.MaxQueue = n.QueueLen(), n.QueueMax()
		}
		for _, c := range n.Copies {
			cs := CopyStats{
				Copy: c.Thread, State: c.State().String(), MemoryPool: c.MemoryPool(), FullQueue: c.FullQueue(),
				Batch: c.Batch(), ItemsIn: c.ItemsIn.Load(),
				Compute: time.Duration(c.Compute.Load()), Wait: time.Duration(c.Wait.Load()),
				MemoryWait: time.Duration(c.MemWait.Load()), Executing: c.Executing(),
			}
			ts.ItemsIn += cs.ItemsIn
			ts.Held += cs.Batch
			ts.Compute += cs.Compute
			ts.Wait += cs.Wait
			ts.MemoryWait += cs.MemoryWait
			if rs := c.Remote(); rs != nil {
				remoteCopy(&ts, &cs, rs)
			}
			ts.Copies = append(ts.Copies, cs)
		}
		sortWorkers(ts.Workers)
		s.Tasks = append(s.Tasks, ts)
	}
	for _, p := range r.Pools() {
		s.Pools = append(s.Pools, PoolStats{Name: p.Name, Clone: p.Pipeline, Capacity: p.Capacity,
			InUse: p.InUse(), Peak: p.Peak(), Waits: p.Waits()})
	}
	return s
}

// sortWorkers puts the busiest workers first.
func sortWorkers(ws []WorkerStats) {
	slices.SortStableFunc(ws, func(a, b WorkerStats) int { return cmp.Compare(b.Items, a.Items) })
}

// remoteCopy adds to ts and cs what the runtime knows of the remote copy
// rs: where its input runs, and its inputs per worker.
func remoteCopy(ts *TaskStats, cs *CopyStats, rs *core.RemoteStats) {
	ts.Remote = true
	p := rs.Placement()
	cs.Worker, cs.Host = p.Worker, p.Host
	if !p.Since.IsZero() && cs.State == core.StateExecuting.String() {
		cs.OnWorker = time.Since(p.Since)
	}
next:
	for _, w := range rs.Workers() {
		for i := range ts.Workers {
			if t := &ts.Workers[i]; t.Worker == w.Worker && t.Host == w.Host {
				t.Items += w.Items
				continue next
			}
		}
		ts.Workers = append(ts.Workers, WorkerStats{Worker: w.Worker, Host: w.Host, Items: w.Items})
	}
}
