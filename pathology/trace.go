package pathology

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/metrics"
	"strings"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/pats"
)

// traceEvent is one span of a unit's time in a hardware run: an operation
// instance computed, a datum moved to or from a GPU, or a tile's RGB
// staged from storage or an output committed to it (unit "storage").
type traceEvent struct {
	unit, what string // the unit's name; compute, up, down, stage or commit
	tile       int    // the tile (-1 for a transfer, named by key)
	op         string // the operation, or the datum's key for a transfer
	start, end time.Duration
}

// store records the span of a staging of tile's RGB from storage (by
// whichever goroutine staged it: a unit's worker, or a stager with
// Prefetch), or of a commit of its output key to storage (what "stage" or
// "commit"), as an event of unit "storage".
func (r *instTimes) store(tile int, what, key string, start, end time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, traceEvent{unit: "storage", what: what, tile: tile, op: key, start: start.Sub(r.t0), end: end.Sub(r.t0)})
}

// tracedUnit is a GPU unit whose transfers are recorded in rec.
type tracedUnit struct {
	pats.Unit
	rec *instTimes
}

// Move moves d as the wrapped unit does and records the span.
func (u tracedUnit) Move(ctx context.Context, d pats.Data, toDevice bool) error {
	t0 := time.Now()
	err := u.Unit.Move(ctx, d, toDevice)
	u.rec.transfer(u.Name(), d.Key, toDevice, t0, time.Now())
	return err
}

// transfer records the span of a GPU transfer of datum key by unit.
func (r *instTimes) transfer(unit, key string, toDevice bool, start, end time.Time) {
	what := "down"
	if toDevice {
		what = "up"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, traceEvent{unit: unit, what: what, tile: -1, op: key, start: start.Sub(r.t0), end: end.Sub(r.t0)})
}

// Queues reports whether the wrapped unit queues its transfers.
func (u tracedUnit) Queues() bool {
	q, ok := u.Unit.(pats.Queuer)
	return ok && q.Queues()
}

// Queue queues d as the wrapped unit does; the span is recorded once the
// manager has waited for the copy: when the GPU ran it, if the unit timed
// it (queuedCopy), from the queueing to the end of the wait if it did not,
// and the call itself for a copy made at once.
func (u tracedUnit) Queue(ctx context.Context, d pats.Data, toDevice bool) (pats.Pending, error) {
	q, ok := u.Unit.(pats.Queuer)
	if !ok {
		return nil, fmt.Errorf("%s: no queued transfers", u.Name())
	}
	t0 := time.Now()
	p, err := q.Queue(ctx, d, toDevice)
	if err != nil {
		return nil, err
	}
	return tracedPending{p: p, u: u, key: d.Key, up: toDevice, t0: t0, t1: time.Now()}, nil
}

// tracedPending is a queued transfer recorded when waited for; t0 and t1
// are the start and end of the Queue call.
type tracedPending struct {
	p      pats.Pending
	u      tracedUnit
	key    string
	up     bool
	t0, t1 time.Time
}

func (t tracedPending) Done() bool { return t.p.Done() }

func (t tracedPending) Wait(ctx context.Context) (time.Duration, error) {
	took, err := t.p.Wait(ctx)
	start, end := t.t0, t.t1
	if q, ok := t.p.(*queuedCopy); ok {
		start, end = q.span.start, q.span.end
		if start.IsZero() {
			start, end = t.t0, time.Now()
		}
	}
	t.u.rec.transfer(t.u.Name(), t.key, t.up, start, end)
	return took, err
}

// traced returns units with the GPU ones' transfers recorded in rec.
func traced(units []pats.Unit, rec *instTimes) []pats.Unit {
	out := make([]pats.Unit, len(units))
	for i, u := range units {
		out[i] = u
		if u.Kind() == device.GPU {
			out[i] = tracedUnit{u, rec}
		}
	}
	return out
}

// gpuOccupied returns the share of makespan the GPU units spent computing
// or moving data (mean over the units), from the recorded spans.
func (r *instTimes) gpuOccupied(gpus int, names map[string]bool, makespan time.Duration) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var busy time.Duration
	for _, e := range r.events {
		if names[e.unit] {
			busy += e.end - e.start
		}
	}
	if gpus == 0 || makespan <= 0 {
		return 0
	}
	return busy.Seconds() / float64(gpus) / makespan.Seconds()
}

// writeTrace writes r's spans as CSV lines of run, unit, what, tile, op
// (or datum), start and end in ms from the run's start.
func (r *instTimes) writeTrace(w io.Writer, run string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, e := range r.events {
		fmt.Fprintf(&b, "%s,%s,%s,%d,%s,%.3f,%.3f\n", run, e.unit, e.what, e.tile, e.op,
			e.start.Seconds()*1e3, e.end.Seconds()*1e3)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// simGPUOccupied returns the share of a simulated run's makespan its GPUs
// spent computing or moving data at the machine's bandwidth.
func simGPUOccupied(r *pats.Report, m pats.Machine) float64 {
	if m.GPUs == 0 || r.Makespan <= 0 {
		return 0
	}
	busy := busyShare(r, device.GPU) * r.Makespan.Seconds() * float64(m.GPUs)
	if m.Bandwidth > 0 {
		busy += float64(r.UploadBytes+r.DownloadBytes) / m.Bandwidth
	}
	return busy / float64(m.GPUs) / r.Makespan.Seconds()
}

// hwUnknown returns the first of names that is no HardwareConfigs name, and
// true; false when every name is known.
func hwUnknown(names []string) (string, bool) {
	known := hwConfigs(0, 0, nil, nil, false)
	for _, n := range names {
		if _, ok := known[n]; !ok {
			return n, true
		}
	}
	return "", false
}

// appendTrace appends rec's spans, as run's, to the CSV file path
// (created with its header line when missing).
func appendTrace(path string, rec *instTimes, run string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if st, err := f.Stat(); err == nil && st.Size() == 0 {
		if _, err := io.WriteString(f, "run,unit,what,tile,op,start_ms,end_ms\n"); err != nil {
			f.Close()
			return fmt.Errorf("trace %s: %w", path, err)
		}
	}
	if err := rec.writeTrace(f, strings.ReplaceAll(run, ",", ";")); err != nil {
		f.Close()
		return fmt.Errorf("trace %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("trace %s: %w", path, err)
	}
	return nil
}

// goCPU is the Go runtime's account of the process's CPU time, in
// core-seconds, by class (runtime/metrics' /cpu/classes/): user code, the
// garbage collector, the scavenger and idle Ps.
type goCPU struct{ user, gc, scavenge, idle, total float64 }

// readGoCPU reads the runtime's CPU classes now.
func readGoCPU() goCPU {
	s := []metrics.Sample{
		{Name: "/cpu/classes/user:cpu-seconds"},
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/scavenge/total:cpu-seconds"},
		{Name: "/cpu/classes/idle:cpu-seconds"},
		{Name: "/cpu/classes/total:cpu-seconds"},
	}
	metrics.Read(s)
	v := func(i int) float64 {
		if s[i].Value.Kind() != metrics.KindFloat64 {
			return 0
		}
		return s[i].Value.Float64()
	}
	return goCPU{user: v(0), gc: v(1), scavenge: v(2), idle: v(3), total: v(4)}
}

// sub returns the CPU time spent between b and a (a later).
func (a goCPU) sub(b goCPU) goCPU {
	return goCPU{a.user - b.user, a.gc - b.gc, a.scavenge - b.scavenge, a.idle - b.idle, a.total - b.total}
}

// schedWaits is the Go scheduler's histogram of the time goroutines
// waited, runnable, for a thread to run them (/sched/latencies:seconds).
type schedWaits struct {
	counts  []uint64
	buckets []float64 // len(counts)+1 boundaries, in seconds
}

// readSchedWaits reads the histogram now (empty if the runtime has none).
func readSchedWaits() schedWaits {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return schedWaits{}
	}
	h := s[0].Value.Float64Histogram()
	return schedWaits{counts: append([]uint64(nil), h.Counts...), buckets: h.Buckets}
}

// sub returns the waits between b and a (a later).
func (a schedWaits) sub(b schedWaits) schedWaits {
	if len(b.counts) != len(a.counts) {
		return a
	}
	d := schedWaits{counts: make([]uint64, len(a.counts)), buckets: a.buckets}
	for i := range a.counts {
		d.counts[i] = a.counts[i] - b.counts[i]
	}
	return d
}

// summary returns the number of waits, those of at least 1 ms and of at
// least 10 ms, and a lower bound of their total (each wait counted at its
// bucket's lower boundary).
func (a schedWaits) summary() (n, over1ms, over10ms uint64, total time.Duration) {
	var sum float64
	for i, c := range a.counts {
		lo := a.buckets[i]
		n += c
		if lo >= 1e-3 {
			over1ms += c
		}
		if lo >= 10e-3 {
			over10ms += c
		}
		if lo > 0 && !math.IsInf(lo, 0) {
			sum += lo * float64(c)
		}
	}
	return n, over1ms, over10ms, time.Duration(sum * float64(time.Second))
}
