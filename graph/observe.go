package graph

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gohtgs/htgs/internal/core"
	"github.com/gohtgs/htgs/task"
)

// WithTrace records a timeline of the run — every Execute and every memory
// wait of every task copy, and queue lengths — for [Execution.Timeline].
// It costs two clock reads per value.
func WithTrace() StartOption { return startOption(func(c *startConfig) { c.trace = true }) }

// WithStarted calls fn with the run's Execution as soon as it has started,
// before Start returns: for code that observes runs it does not start
// itself — a live view (graph/observe's Handler) handed the start options
// of a library that runs several graphs in turn.
func WithStarted(fn func(*Execution)) StartOption {
	return startOption(func(c *startConfig) { c.started = append(c.started, fn) })
}

// WithoutCounters turns off the always-on per-copy counters (items, times,
// states), to measure what they cost. Stats, pictures and stall reports then
// show zeros.
func WithoutCounters() StartOption { return startOption(func(c *startConfig) { c.noStats = true }) }

// DefaultStallDelay is how long a run may make no progress before its stall
// report is logged, unless [WithStallReport] or [WithoutStallReport] says
// otherwise.
const DefaultStallDelay = 10 * time.Second

// WithStallReport calls report when the run has made no progress (no value
// consumed or produced anywhere, no buffer taken from a pool) for after; it
// is called again only once progress has resumed and stopped again. A
// graph waiting for input that never comes — a forgotten Close — is reported
// too.
//
// Without this option a stall is reported after [DefaultStallDelay]. A nil
// report logs the report at level Warn, with the text of [Stats.String] in
// the attribute "report", through the logger given with [WithLogger], or
// slog.Default() if none was. An after of zero or less turns stall reports
// off, as [WithoutStallReport] does.
func WithStallReport(after time.Duration, report func(Stats)) StartOption {
	return startOption(func(c *startConfig) { c.stallAfter, c.stallFn = after, report })
}

// WithoutStallReport turns stall reports off: a run that makes no progress
// is then silent (a service graph that idles for long between inputs, for
// instance). [Execution.Stats] still works.
func WithoutStallReport() StartOption {
	return startOption(func(c *startConfig) { c.stallAfter, c.stallFn = 0, nil })
}

// WithProgress calls fn every interval with a snapshot of the run, and
// once more, with Done set, when the run has finished; for progress bars.
func WithProgress(interval time.Duration, fn func(Stats)) StartOption {
	return startOption(func(c *startConfig) { c.progressEvery, c.progressFn = interval, fn })
}

// String formats the snapshot as a diagnosis: one block per task with each
// copy's state, the queue length, and the pools' levels. Values sent to a
// task are either in its queue ("queue"), in a batch a copy took from the
// queue and has not finished ("held", and per copy "batch of"), or done;
// "in" counts those taken from the queue, held ones included.
func (r Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %q after %v", r.Graph, r.Elapsed.Round(time.Millisecond))
	if r.Idle > 0 {
		fmt.Fprintf(&b, ", no progress for %v", r.Idle.Round(time.Millisecond))
	}
	b.WriteString("\n")
	if r.Cyclic {
		fmt.Fprintf(&b, "  cyclic graph: %d values queued or executing (input open counts 1)\n", r.Pending)
	}
	for _, t := range r.Tasks {
		fmt.Fprintf(&b, "  %s %q: queue %d (max %d), held %d, in %d, out %d\n", t.Kind, t.Name, t.Queue, t.MaxQueue, t.Held, t.ItemsIn, t.ItemsOut)
		if t.Remote {
			b.WriteString("    remote, inputs per worker:")
			if len(t.Workers) == 0 {
				b.WriteString(" none yet")
			}
			for i, w := range t.Workers {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, " %s ×%d", workerName(w.Worker, w.Host), w.Items)
			}
			b.WriteString("\n")
		}
		for _, c := range t.Copies {
			fmt.Fprintf(&b, "    copy %d: %s", c.Thread, c.State)
			if t.Remote {
				c.writePlace(&b)
			}
			if c.MemoryPool != "" {
				fmt.Fprintf(&b, " from pool %q", c.MemoryPool)
			}
			if c.FullQueue != "" {
				fmt.Fprintf(&b, " of %s", c.FullQueue)
			}
			if c.Batch > 0 {
				fmt.Fprintf(&b, " (batch of %d taken from the queue)", c.Batch)
			}
			b.WriteString("\n")
		}
	}
	for _, p := range r.Pools {
		fmt.Fprintf(&b, "  pool %q: %d of %d buffers out (peak %d), %d waits\n", p.Name, p.InUse, p.Capacity, p.Peak, p.Waits)
	}
	return b.String()
}

// writePlace tells where a remote copy's input runs, or ran last.
func (c CopyStats) writePlace(b *strings.Builder) {
	executing := c.State == core.StateExecuting.String()
	switch {
	case c.Worker == "" && executing:
		b.WriteString(", its input not yet taken by a worker")
	case c.Worker == "":
	case executing:
		fmt.Fprintf(b, " on worker %s", c.Worker)
		if c.Host != "" {
			fmt.Fprintf(b, " (host %s)", c.Host)
		}
		if c.OnWorker > 0 {
			fmt.Fprintf(b, " for %v", c.OnWorker.Round(time.Millisecond))
		}
	default:
		fmt.Fprintf(b, " (last input on worker %s", c.Worker)
		if c.Host != "" {
			fmt.Fprintf(b, ", host %s", c.Host)
		}
		b.WriteString(")")
	}
}

// workerName is "worker@host", or the worker alone if the host is unknown.
func workerName(worker, host string) string {
	return task.Placement{Worker: worker, Host: host}.String()
}

// activity is a number that grows whenever the run makes progress.
func activity(r *core.Run) int64 {
	var a int64
	for _, n := range r.Nodes() {
		a += itemsOut(n)
		for _, c := range n.Copies {
			a += c.ItemsIn.Load()
		}
	}
	return a
}

// progressMark is a number that grows whenever the run makes progress
// (the stall detector's measure).
func (e *Execution) progressMark() int64 {
	a := activity(e.run) + e.outputs() + e.sent.Load()
	for _, p := range e.run.Pools() {
		a += p.Waits() + int64(p.InUse())
	}
	return a
}

// watch starts what the options ask for: the stall detector, a timer
// that checks the run's activity now and then (no goroutine while it
// waits), and the progress callback's goroutine. They end when Wait is
// called or when every goroutine of the run has ended, whichever is first,
// so a run nobody waits for leaves nothing behind.
func (e *Execution) watch(cfg *startConfig) {
	stall := cfg.stallAfter > 0
	progress := cfg.progressFn != nil && cfg.progressEvery > 0
	if !stall && cfg.progressFn == nil {
		return
	}
	w := &watcher{e: e, progressFn: cfg.progressFn}
	if stall {
		w.stall, w.after, w.tick = true, cfg.stallAfter, max(cfg.stallAfter/4, time.Millisecond)
		w.report, w.log, w.last, w.since = cfg.stallFn, cfg.log, -1, time.Now()
		w.mu.Lock()
		w.t = time.AfterFunc(w.tick, w.fire)
		w.mu.Unlock()
	}
	if progress {
		w.stop = make(chan struct{})
		w.done.Add(1)
		go w.progressLoop(cfg.progressEvery)
	}
	e.run.Watch(w) // End when the run's goroutines are done, Finish in Wait
}

// watcher is what watch starts for a run: the stall detector (fire runs
// on a timer every tick until halt) and the progress callback.
type watcher struct {
	e *Execution

	stall       bool
	after, tick time.Duration
	report      func(Stats) // nil: logStall through log
	log         *slog.Logger
	mu          sync.Mutex
	t           *time.Timer
	stopped     bool
	busy        sync.WaitGroup // held while fire runs
	// Used by fire only (one at a time: the timer is set again at its end).
	last     int64
	since    time.Time
	reported bool

	progressFn func(Stats)
	stop       chan struct{} // closed to end the progress goroutine
	done       sync.WaitGroup
}

// progressLoop calls the progress callback every interval.
func (w *watcher) progressLoop(every time.Duration) {
	defer w.done.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.e.run.Finished():
			return
		case <-t.C:
			w.progressFn(w.e.Stats())
		}
	}
}

// End stops the stall timer once every goroutine of the run has ended.
func (w *watcher) End() {
	if w.stall {
		w.halt()
	}
}

// Finish ends everything, when the run ends (Wait), and reports the final
// progress.
func (w *watcher) Finish(error) error {
	if w.stall {
		w.halt()
		w.busy.Wait()
	}
	if w.stop != nil {
		close(w.stop)
		w.done.Wait()
	}
	if w.progressFn != nil {
		p := w.e.Stats()
		p.Done = true
		w.progressFn(p)
	}
	return nil
}

// halt stops the stall timer; a check already running goes on (wait for
// it with busy).
func (w *watcher) halt() {
	w.mu.Lock()
	w.stopped = true
	w.t.Stop()
	w.mu.Unlock()
}

func (w *watcher) fire() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.busy.Add(1)
	w.mu.Unlock()
	defer w.busy.Done()
	select {
	case <-w.e.run.Finished():
		return
	default:
	}
	w.check()
	w.mu.Lock()
	if !w.stopped {
		w.t.Reset(w.tick)
	}
	w.mu.Unlock()
}

// check reports the run if it has made no progress for w.after, once per
// stall.
func (w *watcher) check() {
	e := w.e
	a := e.progressMark()
	if a != w.last {
		w.last, w.since, w.reported = a, time.Now(), false
		return
	}
	if idle := time.Since(w.since); idle >= w.after && !w.reported {
		w.reported = true
		r := e.Stats()
		r.Idle = idle
		if w.report != nil {
			w.report(r)
		} else {
			logStall(w.log, r)
		}
	}
}

// logStall is the default stall report: a warning through log, or through
// slog.Default() when log is nil.
func logStall(log *slog.Logger, r Stats) {
	if log == nil {
		log = slog.Default()
	}
	msg := fmt.Sprintf("htgs: graph %q has made no progress for %v", r.Graph, r.Idle.Round(time.Millisecond))
	if r.awaitingInput() {
		msg += "; it is waiting for input (is Close missing?)"
	}
	log.Warn(msg, "graph", r.Graph, "idle", r.Idle, "report", r.String())
}

// awaitingInput reports whether every task copy waits for input (or has
// ended) with nothing queued and no pool buffer out: the graph only needs
// more input, or Close.
func (r Stats) awaitingInput() bool {
	for _, t := range r.Tasks {
		if t.Queue > 0 {
			return false
		}
		for _, c := range t.Copies {
			if c.State != core.StateWaiting.String() && c.State != core.StateDone.String() {
				return false
			}
		}
	}
	for _, p := range r.Pools {
		if p.InUse > 0 {
			return false
		}
	}
	return true
}
