package graph

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
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
// too. The cancellation of the run (or its failure) starts a new stall:
// if task copies are still executing after more, the report says how long
// ago the run was cancelled and names each copy that does not honour its
// context, and for how long it has been executing (Wait waits for them;
// see [WithAbandonAfter]).
//
// Without this option a stall is reported after [DefaultStallDelay]. A nil
// report logs the report at level Warn through the logger given with
// [WithLogger], or slog.Default() if none was, written for whoever reads
// it: through slog's own default handler (a program that never called
// slog.SetDefault, a person at a terminal) one record whose message is the
// multi-line text of [Stats.String]; through any other handler (JSON, text,
// a log collector) one record for the stall, then one per task and pool,
// with the counters and each copy's state as attributes. To write the text
// to a plain writer instead, pass a report that does:
//
//	graph.WithStallReport(time.Minute, func(s graph.Stats) { fmt.Fprint(os.Stderr, s) })
//
// An after of zero or less turns stall reports off, as
// [WithoutStallReport] does.
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
// "in" counts those taken from the queue, held ones included; a copy
// executing says for how long it has been in its batch. Once the run
// was cancelled (or failed), the first line says how long ago, and a copy
// still executing says for how long and that it does not honour its
// context.
func (r Stats) String() string {
	var b strings.Builder
	b.WriteString(r.headline())
	b.WriteString("\n")
	if r.Cyclic && !r.Done {
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
			fmt.Fprintf(&b, "    copy %d: %s", c.Copy, c.State)
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
			if c.State == core.StateExecuting.String() && c.Executing > 0 {
				fmt.Fprintf(&b, " for %v", round(c.Executing))
			}
			if r.ignoresContext(c) {
				fmt.Fprintf(&b, ", %v after the run was cancelled: it does not honour its context", round(r.Stopped))
			}
			b.WriteString("\n")
		}
	}
	for _, p := range r.Pools {
		fmt.Fprintf(&b, "  pool %q: %d of %d buffers out (peak %d), %d waits\n", p.Name, p.InUse, p.Capacity, p.Peak, p.Waits)
	}
	return b.String()
}

// headline is the first line of the report.
func (r Stats) headline() string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %q after %v", r.Graph, round(r.Elapsed))
	if r.Done {
		b.WriteString(", done")
	}
	if r.Idle > 0 {
		fmt.Fprintf(&b, ", no progress for %v", round(r.Idle))
	}
	if r.Stopped > 0 {
		fmt.Fprintf(&b, ", cancelled %v ago", round(r.Stopped))
		if r.StopReason != "" {
			fmt.Fprintf(&b, " (%s)", r.StopReason)
		}
	}
	return b.String()
}

// ignoresContext reports whether copy c goes on executing although the
// run was cancelled: it began its batch before, and is still in Execute
// (a copy waiting for memory or for room in a queue is woken by the
// runtime).
func (r Stats) ignoresContext(c CopyStats) bool {
	return r.Stopped > 0 && !r.Done && c.State == core.StateExecuting.String() && c.Executing >= r.Stopped
}

// stuck names the copies that ignore the cancellation of the run.
func (r Stats) stuck() []StuckCopy {
	var out []StuckCopy
	for _, t := range r.Tasks {
		for _, c := range t.Copies {
			if r.ignoresContext(c) {
				out = append(out, StuckCopy{Task: t.Name, Copy: c.Copy, Executing: c.Executing})
			}
		}
	}
	return out
}

// round rounds d for a person: to the millisecond.
func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

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
	sawStop  bool // the run's cancellation was seen (and started a stall)

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
// stall. The cancellation of the run starts a new stall: if copies are
// still executing w.after later, they are reported.
func (w *watcher) check() {
	e := w.e
	a := e.progressMark()
	if !w.sawStop && e.run.Stopped() {
		w.sawStop = true
		w.last, w.since, w.reported = a, time.Now(), false
		return
	}
	if a != w.last {
		w.last, w.since, w.reported = a, time.Now(), false
		return
	}
	// No progress for a tick: a copy in its last batch may be waiting
	// for a consumer whose wake-up it deferred (see Graph.Run).
	e.run.WakeDeferred()
	if idle := time.Since(w.since); idle >= w.after && !w.reported {
		w.reported = true
		r := e.Stats()
		r.Idle = idle
		if r.Done {
			return // ended meanwhile
		}
		if w.report != nil {
			w.report(r)
		} else {
			logStall(w.log, r)
		}
	}
}

// logStall is the default stall report: warnings through log, or through
// slog.Default() when log is nil. The report is written for whoever reads
// the logger's output: through slog's default handler (slog.SetDefault
// never called: lines on standard error) it is one record whose message
// is the whole multi-line report; through any other handler (JSON, text,
// a collector) it is one record for the stall and one per task, with
// attributes rather than text.
func logStall(log *slog.Logger, r Stats) {
	if log == nil {
		log = slog.Default()
	}
	ctx := context.Background()
	if !log.Enabled(ctx, slog.LevelWarn) {
		return
	}
	msg := stallMessage(r)
	if isDefaultHandler(log.Handler()) {
		log.Warn(msg + "\n" + strings.TrimSuffix(r.String(), "\n"))
		return
	}
	attrs := []slog.Attr{slog.String("graph", r.Graph), slog.Duration("elapsed", r.Elapsed), slog.Duration("idle", r.Idle)}
	if r.Stopped > 0 {
		attrs = append(attrs, slog.Duration("cancelled_ago", r.Stopped), slog.String("reason", r.StopReason))
	}
	if r.Cyclic {
		attrs = append(attrs, slog.Int64("pending", r.Pending))
	}
	attrs = append(attrs, slog.Int("tasks", len(r.Tasks)), slog.Int("pools", len(r.Pools)))
	log.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
	for _, t := range r.Tasks {
		copies := make([]any, 0, len(t.Copies))
		for _, c := range t.Copies {
			copies = append(copies, slog.Group(strconv.Itoa(c.Copy), copyAttrs(r, c)...))
		}
		log.LogAttrs(ctx, slog.LevelWarn, "htgs: stalled graph: task", slog.String("graph", r.Graph),
			slog.String("task", t.Name), slog.String("kind", string(t.Kind)),
			slog.Int("queue", t.Queue), slog.Int("max_queue", t.MaxQueue), slog.Int("held", t.Held),
			slog.Int64("in", t.ItemsIn), slog.Int64("out", t.ItemsOut), slog.Group("copies", copies...))
	}
	for _, p := range r.Pools {
		log.LogAttrs(ctx, slog.LevelWarn, "htgs: stalled graph: pool", slog.String("graph", r.Graph),
			slog.String("pool", p.Name), slog.Int("in_use", p.InUse), slog.Int("capacity", p.Capacity),
			slog.Int("peak", p.Peak), slog.Int64("waits", p.Waits))
	}
}

// copyAttrs are the attributes of copy c in a stall record.
func copyAttrs(r Stats, c CopyStats) []any {
	a := []any{slog.String("state", c.State)}
	if c.Batch > 0 {
		a = append(a, slog.Int("batch", c.Batch), slog.Duration("executing", c.Executing))
	}
	if c.MemoryPool != "" {
		a = append(a, slog.String("pool", c.MemoryPool))
	}
	if c.FullQueue != "" {
		a = append(a, slog.String("full_queue", c.FullQueue))
	}
	if c.Worker != "" {
		a = append(a, slog.String("worker", workerName(c.Worker, c.Host)))
	}
	if r.ignoresContext(c) {
		a = append(a, slog.Bool("ignores_context", true))
	}
	return a
}

// stallMessage is the first line of a logged stall report.
func stallMessage(r Stats) string {
	if stuck := r.stuck(); len(stuck) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "htgs: graph %q was cancelled %v ago", r.Graph, round(r.Stopped))
		if r.StopReason != "" {
			fmt.Fprintf(&b, " (%s)", r.StopReason)
		}
		if len(stuck) == 1 {
			b.WriteString(", but 1 task copy is still executing and does not honour its context:")
		} else {
			fmt.Fprintf(&b, ", but %d task copies are still executing and do not honour their context:", len(stuck))
		}
		for i, c := range stuck {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " task %q copy %d (executing for %v)", c.Task, c.Copy, round(c.Executing))
		}
		b.WriteString("; Wait returns when they do (see graph.WithAbandonAfter)")
		return b.String()
	}
	msg := fmt.Sprintf("htgs: graph %q has made no progress for %v", r.Graph, round(r.Idle))
	if r.Stopped > 0 {
		msg += fmt.Sprintf(" since it was cancelled %v ago", round(r.Stopped))
	} else if r.AwaitingInput() {
		msg += "; it is waiting for input (is Close missing?)"
	}
	return msg
}

// isDefaultHandler reports whether h is slog's own default handler, which
// writes through package log (to standard error unless redirected): its
// message is written as is, so a multi-line report stays readable there.
func isDefaultHandler(h slog.Handler) bool {
	return reflect.TypeOf(h).String() == "*slog.defaultHandler"
}

// AwaitingInput reports whether every task copy waits for input (or has
// ended) with nothing queued and no pool buffer out: the graph only needs
// more input, or Close (the hint a stall report gives).
func (r Stats) AwaitingInput() bool {
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
