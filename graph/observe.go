package graph

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gohtgs/htgs/internal/core"
)

// WithTrace records a timeline of the run — every Execute and every memory
// wait of every task copy, and queue lengths — for [Runtime.WriteTrace].
// It costs two clock reads per value.
func WithTrace() StartOption { return func(c *startConfig) { c.trace = true } }

// WithoutCounters turns off the always-on per-copy counters (items, times,
// states), to measure what they cost. Stats, pictures and stall reports then
// show zeros.
func WithoutCounters() StartOption { return func(c *startConfig) { c.noStats = true } }

// WithStallReport calls report when the run has made no progress (no value
// consumed or produced anywhere, no buffer taken from a pool) for after; it
// is called again only once progress has resumed and stopped again. A
// graph waiting for input that never comes — a forgotten Close — is reported
// too.
func WithStallReport(after time.Duration, report func(Report)) StartOption {
	return func(c *startConfig) { c.stallAfter, c.stallFn = after, report }
}

// WithProgress calls fn every interval with the run's progress, and once
// more when the run has finished; for progress bars.
func WithProgress(interval time.Duration, fn func(Progress)) StartOption {
	return func(c *startConfig) { c.progressEvery, c.progressFn = interval, fn }
}

// Progress counts what a run has done so far.
type Progress struct {
	Elapsed time.Duration
	Sent    int64 // values given to Send
	Outputs int64 // values that reached the graph's output
	Done    bool  // the run has finished
	Tasks   []TaskProgress
}

// TaskProgress counts one task's values (all copies).
type TaskProgress struct {
	Name              string
	ItemsIn, ItemsOut int64
}

// Progress returns the run's counts now.
func (rt *Runtime[In, Out]) Progress() Progress {
	p := Progress{Elapsed: time.Since(rt.run.Epoch), Sent: rt.sent.Load(), Outputs: rt.results.Pushed()}
	for _, n := range rt.run.Nodes() {
		tp := TaskProgress{Name: n.Name, ItemsOut: itemsOut(n)}
		for _, c := range n.Copies {
			tp.ItemsIn += c.ItemsIn.Load()
		}
		p.Tasks = append(p.Tasks, tp)
	}
	return p
}

// Report describes what every part of a run is doing: for diagnosing a
// graph that makes no progress.
type Report struct {
	Stats
	Cyclic  bool
	Pending int64 // queued or executing values (cyclic graphs only)
	Idle    time.Duration
}

// Diagnose returns a report on the run's state now. It is safe to call at
// any time, from any goroutine (a signal handler, an HTTP handler).
func (rt *Runtime[In, Out]) Diagnose() Report {
	return Report{Stats: rt.Stats(), Cyclic: rt.run.Cyclic(), Pending: rt.run.Pending()}
}

// String formats the report: one block per task with each copy's state, the
// queue length, and the pools' levels.
func (r Report) String() string {
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
		fmt.Fprintf(&b, "  %s %q: queue %d (max %d), in %d, out %d\n", t.Kind, t.Name, t.Queue, t.MaxQueue, t.ItemsIn, t.ItemsOut)
		for _, c := range t.Copies {
			fmt.Fprintf(&b, "    copy %d: %s", c.Thread, c.State)
			if c.MemoryPool != "" {
				fmt.Fprintf(&b, " from pool %q", c.MemoryPool)
			}
			b.WriteString("\n")
		}
	}
	for _, p := range r.Pools {
		fmt.Fprintf(&b, "  pool %q: %d of %d buffers out (peak %d), %d waits\n", p.Name, p.InUse, p.Capacity, p.Peak, p.Waits)
	}
	return b.String()
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

// watcher runs the stall detector and the progress callback until stop is
// closed.
type watcher struct {
	stop chan struct{}
	done sync.WaitGroup
}

func (rt *Runtime[In, Out]) watch(cfg *startConfig) {
	if cfg.stallFn == nil && cfg.progressFn == nil {
		return
	}
	w := &watcher{stop: make(chan struct{})}
	if cfg.stallFn != nil && cfg.stallAfter > 0 {
		w.done.Add(1)
		go func() {
			defer w.done.Done()
			rt.stallLoop(cfg.stallAfter, cfg.stallFn, w.stop)
		}()
	}
	if cfg.progressFn != nil && cfg.progressEvery > 0 {
		w.done.Add(1)
		go func() {
			defer w.done.Done()
			t := time.NewTicker(cfg.progressEvery)
			defer t.Stop()
			for {
				select {
				case <-w.stop:
					return
				case <-t.C:
					cfg.progressFn(rt.Progress())
				}
			}
		}()
	}
	rt.run.OnFinish(func(error) error {
		close(w.stop)
		w.done.Wait()
		if cfg.progressFn != nil {
			p := rt.Progress()
			p.Done = true
			cfg.progressFn(p)
		}
		return nil
	})
}

func (rt *Runtime[In, Out]) stallLoop(after time.Duration, fn func(Report), stop <-chan struct{}) {
	tick := max(after/4, time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	last, since, reported := int64(-1), time.Now(), false
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		a := activity(rt.run) + rt.results.Pushed() + rt.sent.Load()
		for _, p := range rt.run.Pools() {
			a += p.Waits() + int64(p.InUse())
		}
		if a != last {
			last, since, reported = a, time.Now(), false
			continue
		}
		if idle := time.Since(since); idle >= after && !reported {
			reported = true
			r := rt.Diagnose()
			r.Idle = idle
			fn(r)
		}
	}
}
