package matmul

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gohtgs/htgs/internal/outfile"
	"github.com/gohtgs/htgs/internal/phase"
	"github.com/gohtgs/htgs/internal/stat"
	"github.com/gohtgs/htgs/internal/tracefmt"
	"github.com/gohtgs/htgs/task"
)

// The device trace (HTGS_MATMUL_TRACE=DIR): every copy and product the
// offload graph queues is timed by its device between two stamps, one
// queued just before it (after the fences it waits for) and one after. The
// stamps are the device's own clock (CUDA timing events), so the trace
// shows when the work ran on the device, not when the host queued it:
// whether products wait for uploads, how long the pipeline takes to fill
// and to drain, and how fast the products and the copies ran, alone or
// side by side. Each product in the offload graph then writes two files to
// DIR, named after its shape and the time:
//
//   - matmul-MxKxN-TIME.json, in the Trace Event Format that Perfetto
//     (ui.perfetto.dev) and chrome://tracing open: a row per device queue;
//   - matmul-MxKxN-TIME.txt, the summary that traceSummary prints.
//
// Stamps cost a little (two events per operation), so the trace is for
// diagnosis, not for the runs whose rate is reported.

// A stamper is a devQueue that can stamp points of its work with the
// device's clock (an optional interface: the trace needs it).
type stamper interface {
	// stamp queues a stamp at the end of the work queued so far.
	stamp() (stamp, error)
}

// A stamp is a point in a queue's work, timed by the device once passed.
type stamp interface {
	// since returns the device time from origin's stamp to this one's
	// (both passed, on the same device; negative if this one came first).
	since(origin stamp) (time.Duration, error)
	// free releases the stamp.
	free() error
}

// traceOp is one operation of a device queue in the trace.
type traceOp struct {
	dev        int
	queue      string // the task copy's queue: "copy in", "multiply", "copy out 1", ...
	kind       string // upload, upload-2d, download, download-2d, gemm
	bytes      int64  // copied (copies)
	flops      float64
	start, end stamp
	t0, t1     time.Duration // from the device's first stamp, once timed
}

// offloadTrace collects the operations of one product's device queues.
type offloadTrace struct {
	dir string
	mu  sync.Mutex
	ops []*traceOp
	err error
}

// newOffloadTrace returns the trace of a product, or nil when dir is "".
func newOffloadTrace(dir string) *offloadTrace {
	if dir == "" {
		return nil
	}
	return &offloadTrace{dir: dir}
}

// wrap returns q traced (q itself when t is nil). name names the task
// whose queue q is.
func (t *offloadTrace) wrap(q devQueue, name string) devQueue {
	if t == nil {
		return q
	}
	return &tracedQueue{devQueue: q, tr: t, name: name}
}

func (t *offloadTrace) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
}

// tracedQueue is a devQueue whose copies and products are stamped.
type tracedQueue struct {
	devQueue
	tr    *offloadTrace
	name  string
	queue string
	dev   int
	st    stamper
}

func (q *tracedQueue) Initialize(ctx context.Context, info task.Info) error {
	q.dev, q.queue = info.Clone, q.name
	if info.Copies > 1 {
		q.queue = fmt.Sprintf("%s %d", q.name, info.Copy+1)
	}
	st, ok := q.devQueue.(stamper)
	if !ok {
		return fmt.Errorf("matmul: HTGS_MATMUL_TRACE: the %T queues of this kernel cannot be timed", q.devQueue)
	}
	q.st = st
	return phase.Initialize(ctx, q.devQueue, info)
}

func (q *tracedQueue) Shutdown(ctx context.Context) error { return phase.Shutdown(ctx, q.devQueue) }

// op stamps, queues the operation do, and stamps again.
func (q *tracedQueue) op(kind string, bytes int64, flops float64, do func() error) error {
	start, err := q.st.stamp()
	if err != nil {
		q.tr.fail(err)
		return do()
	}
	err = do()
	end, serr := q.st.stamp()
	if serr != nil {
		q.tr.fail(serr)
		return errors.Join(err, start.free())
	}
	q.tr.mu.Lock()
	q.tr.ops = append(q.tr.ops, &traceOp{dev: q.dev, queue: q.queue, kind: kind, bytes: bytes, flops: flops, start: start, end: end})
	q.tr.mu.Unlock()
	return err
}

func (q *tracedQueue) upload(dst devMem, at int, src stagingMem, from, n int) error {
	return q.op("upload", 8*int64(n), 0, func() error { return q.devQueue.upload(dst, at, src, from, n) })
}

func (q *tracedQueue) download(dst stagingMem, at int, src devMem, from, n int) error {
	return q.op("download", 8*int64(n), 0, func() error { return q.devQueue.download(dst, at, src, from, n) })
}

func (q *tracedQueue) uploadFrom(dst devMem, at, ldd int, src []float64, lds, rows, cols int) error {
	return q.op("upload-2d", 8*int64(rows)*int64(cols), 0, func() error { return q.devQueue.uploadFrom(dst, at, ldd, src, lds, rows, cols) })
}

func (q *tracedQueue) downloadTo(dst []float64, ldd int, src devMem, at, lds, rows, cols int) error {
	return q.op("download-2d", 8*int64(rows)*int64(cols), 0, func() error { return q.devQueue.downloadTo(dst, ldd, src, at, lds, rows, cols) })
}

func (q *tracedQueue) gemm(m, n, k int, a, b, c devMem, beta float64) error {
	return q.op("gemm", 0, 2*float64(m)*float64(n)*float64(k), func() error { return q.devQueue.gemm(m, n, k, a, b, c, beta) })
}

// finish times the operations (after every queue's work has passed),
// writes the trace's two files and frees the stamps. name is the product's
// shape, MxKxN.
func (t *offloadTrace) finish(name string) error {
	if t == nil {
		return nil
	}
	defer t.free()
	if t.err != nil {
		return fmt.Errorf("matmul: trace: %w", t.err)
	}
	if len(t.ops) == 0 {
		return nil
	}
	origin := map[int]stamp{} // per device: the first stamp queued
	for _, op := range t.ops {
		if origin[op.dev] == nil {
			origin[op.dev] = op.start
		}
	}
	var errs []error
	for _, op := range t.ops {
		var e0, e1 error
		op.t0, e0 = op.start.since(origin[op.dev])
		op.t1, e1 = op.end.since(origin[op.dev])
		errs = append(errs, e0, e1)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("matmul: trace: %w", err)
	}
	// Each device's time from its first operation's start.
	first := map[int]time.Duration{}
	for _, op := range t.ops {
		if f, ok := first[op.dev]; !ok || op.t0 < f {
			first[op.dev] = op.t0
		}
	}
	for _, op := range t.ops {
		op.t0 -= first[op.dev]
		op.t1 -= first[op.dev]
	}
	slices.SortStableFunc(t.ops, func(a, b *traceOp) int { return cmp.Or(cmp.Compare(a.dev, b.dev), cmp.Compare(a.t0, b.t0)) })
	base := filepath.Join(t.dir, fmt.Sprintf("matmul-%s-%s", name, time.Now().UTC().Format("20060102T150405.000000")))
	var b outfile.Batch
	err := errors.Join(b.Add(base+".json", t.writeJSON), b.Add(base+".txt", func(w io.Writer) error {
		_, err := io.WriteString(w, traceSummary(t.ops))
		return err
	}))
	if err != nil {
		b.Abort()
		return fmt.Errorf("matmul: trace: %w", err)
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("matmul: trace: %w", err)
	}
	return nil
}

// free releases the stamps (of a run that failed too).
func (t *offloadTrace) free() {
	if t == nil {
		return
	}
	for _, op := range t.ops {
		op.start.free()
		op.end.free()
	}
	t.ops = nil
}

// writeJSON writes the operations in the Trace Event Format: complete
// events ("X") in microseconds, a process per device and a thread per
// queue, named by metadata events ("M").
func (t *offloadTrace) writeJSON(w io.Writer) error {
	var evs []tracefmt.Event
	type queueKey struct {
		dev   int
		queue string
	}
	tids := map[queueKey]int{}
	named := map[int]bool{}
	for _, op := range t.ops {
		k := queueKey{op.dev, op.queue}
		if _, ok := tids[k]; !ok {
			tids[k] = len(tids) + 1
			evs = append(evs, tracefmt.Event{Name: "thread_name", Ph: "M", Pid: op.dev, Tid: tids[k], Args: map[string]any{"name": op.queue}})
		}
		if !named[op.dev] {
			named[op.dev] = true
			evs = append(evs, tracefmt.Event{Name: "process_name", Ph: "M", Pid: op.dev, Args: map[string]any{"name": fmt.Sprintf("device %d", op.dev)}})
		}
	}
	for _, op := range t.ops {
		d := op.t1 - op.t0
		args := map[string]any{}
		if op.bytes > 0 {
			args["bytes"] = op.bytes
			args["GB/s"] = rate(float64(op.bytes), d)
		}
		if op.flops > 0 {
			args["TFLOP/s"] = rate(op.flops, d) / 1e3
		}
		evs = append(evs, tracefmt.Event{Name: op.kind, Ph: "X", Ts: tracefmt.Micros(op.t0), Dur: tracefmt.Micros(d), Pid: op.dev, Tid: tids[queueKey{op.dev, op.queue}], Args: args})
	}
	enc := json.NewEncoder(w)
	return enc.Encode(map[string]any{"traceEvents": evs, "displayTimeUnit": "ms"})
}

// rate is x per d in units of 1e9 per second (GB/s for bytes).
func rate(x float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return x / d.Seconds() / 1e9
}

// interval is a stretch of time on a device.
type interval struct{ t0, t1 time.Duration }

// union returns the total length of the intervals' union.
func union(ss []interval) time.Duration {
	return stat.Covered(ss, func(s interval) (time.Duration, time.Duration) { return s.t0, s.t1 })
}

// overlap returns how much of s the intervals of ss cover.
func overlap(s interval, ss []interval) time.Duration {
	var in []interval
	for _, o := range ss {
		if t0, t1 := max(s.t0, o.t0), min(s.t1, o.t1); t1 > t0 {
			in = append(in, interval{t0, t1})
		}
	}
	return union(in)
}

// traceSummary describes each device's operations: how long the whole
// took, how long the products took to start (fill) and the last download
// after the last product (drain), how busy each kind of operation kept the
// device and at what rate, and the products' rate with and without copies
// running beside them.
func traceSummary(ops []*traceOp) string {
	var sb strings.Builder
	byDev := map[int][]*traceOp{}
	var devs []int
	for _, op := range ops {
		if byDev[op.dev] == nil {
			devs = append(devs, op.dev)
		}
		byDev[op.dev] = append(byDev[op.dev], op)
	}
	slices.Sort(devs)
	for _, d := range devs {
		var all, gemms, ups, downs []interval
		var flops, upBytes, downBytes float64
		var gemmOps []*traceOp
		for _, op := range byDev[d] {
			s := interval{op.t0, op.t1}
			all = append(all, s)
			switch {
			case op.kind == "gemm":
				gemms, flops = append(gemms, s), flops+op.flops
				gemmOps = append(gemmOps, op)
			case strings.HasPrefix(op.kind, "upload"):
				ups, upBytes = append(ups, s), upBytes+float64(op.bytes)
			default:
				downs, downBytes = append(downs, s), downBytes+float64(op.bytes)
			}
		}
		whole := interval{all[0].t0, all[0].t1}
		for _, s := range all {
			whole.t0, whole.t1 = min(whole.t0, s.t0), max(whole.t1, s.t1)
		}
		total := whole.t1 - whole.t0
		ms := func(x time.Duration) float64 { return float64(x) / 1e6 }
		fmt.Fprintf(&sb, "device %d: %d operations in %.3f ms\n", d, len(byDev[d]), ms(total))
		if len(gemms) > 0 {
			g0, g1 := gemms[0].t0, gemms[0].t1
			for _, s := range gemms {
				g0, g1 = min(g0, s.t0), max(g1, s.t1)
			}
			busy := union(gemms)
			fmt.Fprintf(&sb, "  products: %d, busy %.3f ms (%.0f%% of the whole), %.2f TFLOP/s while busy; first starts at %.3f ms (fill), last ends %.3f ms before the end (drain)\n",
				len(gemms), ms(busy), 100*busy.Seconds()/max(1e-12, total.Seconds()), rate(flops, busy)/1e3, ms(g0-whole.t0), ms(whole.t1-g1))
			// Products with copies beside them for more than half their
			// time, and the others.
			copies := append(slices.Clone(ups), downs...)
			var fBeside, fAlone float64
			var tBeside, tAlone time.Duration
			for _, op := range gemmOps {
				s := interval{op.t0, op.t1}
				if 2*overlap(s, copies) > s.t1-s.t0 {
					fBeside, tBeside = fBeside+op.flops, tBeside+s.t1-s.t0
				} else {
					fAlone, tAlone = fAlone+op.flops, tAlone+s.t1-s.t0
				}
			}
			fmt.Fprintf(&sb, "  products with copies beside them: %.2f TFLOP/s over %.3f ms; without: %.2f TFLOP/s over %.3f ms\n",
				rate(fBeside, tBeside)/1e3, ms(tBeside), rate(fAlone, tAlone)/1e3, ms(tAlone))
			fmt.Fprintf(&sb, "  device idle between its first and last product: %.3f ms\n", ms(g1-g0-busy))
		}
		for _, c := range []struct {
			what  string
			ss    []interval
			bytes float64
		}{{"uploads", ups, upBytes}, {"downloads", downs, downBytes}} {
			if len(c.ss) == 0 {
				continue
			}
			busy := union(c.ss)
			fmt.Fprintf(&sb, "  %s: %d, %.1f MiB, bus busy %.3f ms (%.0f%% of the whole), %.1f GB/s while busy\n",
				c.what, len(c.ss), c.bytes/(1<<20), ms(busy), 100*busy.Seconds()/max(1e-12, total.Seconds()), rate(c.bytes, busy))
		}
		if len(ups) > 0 && len(downs) > 0 {
			both := 0 * time.Nanosecond
			for _, u := range ups {
				both += overlap(u, downs)
			}
			fmt.Fprintf(&sb, "  uploads and downloads at once: %.3f ms\n", ms(both))
		}
	}
	return sb.String()
}
