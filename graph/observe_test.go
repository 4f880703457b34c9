package graph_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/pipeline"
	"github.com/gohtgs/htgs/task"
)

// richGraph has a thread pool, a bookkeeper, a pool with a memory edge, a
// nested graph and a 2-clone pipeline.
func richGraph() *graph.Graph[int, int] {
	inner := graph.New[int, int]("square")
	sq := graph.AddFunc(inner, "sq", 2, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v * v) })
	graph.Connect(inner.Input(), sq)
	graph.Connect(sq, inner.Output())

	clone := graph.New[int, int]("clone")
	pool := memmgr.New(clone, "scratch", 2, memmgr.Slices[int](16))
	work := graph.AddFunc(clone, "work", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		b, err := pool.Get(ctx)
		if err != nil {
			return err
		}
		b.Data[0] = v
		time.Sleep(50 * time.Microsecond)
		return errorsJoin(b.Release(), out.Emit(b.Data[0]+1))
	})
	memmgr.Use(pool, work)
	graph.Connect(clone.Input(), work)
	graph.Connect(work, clone.Output())

	g := graph.New[int, int]("rich")
	n := graph.AddGraph(g, "nested", inner)
	p := pipeline.New(g, "cpus", clone, device.Hosts(2), pipeline.ByKey(func(v int) int { return v }))
	bk := bookkeeper.New[int](g, "evens")
	even := bookkeeper.AddRule(bk, "even", func() bookkeeper.Rule[int, int] {
		return bookkeeper.RuleFunc[int, int](func(_ context.Context, v int, out task.Emitter[int]) error {
			if v%2 == 0 {
				return out.Emit(v)
			}
			return nil
		})
	})
	graph.Connect(g.Input(), n)
	graph.Connect(n, p)
	graph.Connect(p, bk)
	graph.Connect(even, g.Output())
	return g
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func runRich(t *testing.T, opts ...graph.StartOption) *graph.Runtime[int, int] {
	t.Helper()
	rt, err := richGraph().Start(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		_ = rt.Send(i)
	}
	rt.Close()
	for range rt.Results() {
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestDOTRendersWithGraphviz(t *testing.T) {
	rt := runRich(t)
	var buf bytes.Buffer
	if err := rt.WriteDOT(&buf, graph.DOTOptions{Color: graph.ColorCompute}); err != nil {
		t.Fatal(err)
	}
	dot := buf.String()
	for _, want := range []string{`"nested/sq"`, `"cpus[0]/work"`, `"cpus[1]/work"`, `"cpus[1]/scratch"`,
		`"evens.even"`, "style=dashed", "×2", "in 200", "max queue", "cluster"} {
		if !strings.Contains(dot, want) {
			t.Errorf("DOT lacks %s", want)
		}
	}
	path, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("Graphviz dot not installed; .ci/run installs it")
	}
	cmd := exec.Command(path, "-Tsvg")
	cmd.Stdin = &buf
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("dot -Tsvg: %v\n%s\n%s", err, stderr.String(), dot)
	}
	if !strings.Contains(out.String(), "<svg") || !strings.Contains(out.String(), "cpus[1]/work") {
		t.Fatalf("no SVG with the nodes")
	}
}

// Timeline has a track per copy whose slices do not overlap, queue
// samples, and a window of it is its tail.
func TestTimeline(t *testing.T) {
	if _, err := runRich(t).Timeline(0, 0); err != graph.ErrNoTrace {
		t.Fatalf("untraced run: Timeline error %v, want ErrNoTrace", err)
	}
	rt := runRich(t, graph.WithTrace())
	tl, err := rt.Timeline(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Every copy has a track: nested/sq x2, cpus[0]/work, cpus[1]/work, evens.
	want := []string{"nested/sq #0", "nested/sq #1", "cpus[0]/work #0", "cpus[1]/work #0", "evens #0"}
	var got []string
	total := 0
	for _, tr := range tl.Tracks {
		got = append(got, fmt.Sprintf("%s #%d", tr.Task, tr.Copy))
		for i := 1; i < len(tr.Slices); i++ {
			if a, b := tr.Slices[i-1], tr.Slices[i]; b.Start < a.Start+a.Dur {
				t.Fatalf("track %s #%d: slices overlap: %+v and %+v", tr.Task, tr.Copy, a, b)
			}
		}
		for _, s := range tr.Slices {
			if s.MemoryWait != (s.Pool != "") {
				t.Errorf("slice %+v: a memory wait names its pool, an Execute none", s)
			}
		}
		total += len(tr.Slices)
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") || tl.Graph != "rich" {
		t.Fatalf("graph %q, tracks %v, want %v", tl.Graph, got, want)
	}
	if total < 200*3 || len(tl.Queues) == 0 {
		t.Fatalf("%d slices, %d queue samples", total, len(tl.Queues))
	}
	tail, err := rt.Timeline(0, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range tail.Tracks {
		full := tl.Tracks[i].Slices
		if n := min(3, len(full)); len(tr.Slices) != n || (n > 0 && tr.Slices[n-1] != full[len(full)-1]) {
			t.Errorf("track %s: last 3 slices %+v, of %d", tr.Task, tr.Slices, len(full))
		}
	}
	end := rt.Stats().Elapsed
	if late, _ := rt.Timeline(end, 0); len(late.Queues) != 0 {
		t.Errorf("queue samples after the end: %+v", late.Queues)
	}
}

func TestStallReportNamesStuckTaskAndPool(t *testing.T) {
	g := stuckGraph()
	reports := make(chan graph.Stats, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := g.Start(ctx, graph.WithStallReport(50*time.Millisecond, func(r graph.Stats) {
		select {
		case reports <- r:
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		_ = rt.Send(i)
	}
	var r graph.Stats
	select {
	case r = <-reports:
	case <-time.After(5 * time.Second):
		t.Fatal("no stall report")
	}
	cancel()
	_ = rt.Wait()
	text := r.String()
	if !strings.Contains(text, `"hoarder"`) || !strings.Contains(text, `waiting for memory from pool "frames"`) ||
		!strings.Contains(text, `pool "frames": 2 of 2 buffers out`) {
		t.Fatalf("report does not name the stuck task and pool:\n%s", text)
	}
}

func TestPprofLabelsInCPUProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a CPU profile")
	}
	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		t.Skip("CPU profiling unavailable:", err)
	}
	g := graph.New[int, float64]("labelled")
	burn := graph.AddFunc(g, "burner", 2, func(_ context.Context, v int, out task.Emitter[float64]) error {
		x := 1.0
		for i := range 2_000_000 {
			x = x*1.0000001 + float64(i&3)
		}
		return out.Emit(x)
	})
	graph.Connect(g.Input(), burn)
	graph.Connect(burn, g.Output())
	err := g.Run(context.Background(), seq(40), nil)
	pprof.StopCPUProfile()
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&prof)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	// Label keys and values land in the profile's string table only if a
	// sample carries them.
	if !bytes.Contains(raw, []byte("htgs.task")) || !bytes.Contains(raw, []byte("burner")) {
		t.Fatal("CPU profile has no htgs.task=burner label")
	}
}

func TestProgressAndHTTP(t *testing.T) {
	var mu sync.Mutex
	var last graph.Stats
	rt := runRich(t, graph.WithProgress(time.Millisecond, func(p graph.Stats) {
		mu.Lock()
		last = p
		mu.Unlock()
	}))
	mu.Lock()
	if !last.Done || last.Sent != 200 || last.Outputs != 100 {
		t.Fatalf("final progress %+v", last)
	}
	mu.Unlock()

	select {
	case <-rt.Done():
	default:
		t.Fatal("Done is open after Wait")
	}
}

// Outputs are counted once per Emit, whatever the number of consumers;
// inputs once per value taken.
func TestItemCounters(t *testing.T) {
	g := graph.New[int, int]("counts")
	twice := graph.AddFunc(g, "twice", 3, func(_ context.Context, v int, out task.Emitter[int]) error {
		if err := out.Emit(v); err != nil {
			return err
		}
		return out.Emit(-v)
	})
	a := graph.AddFunc(g, "a", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) })
	b := graph.AddFunc(g, "b", 2, func(_ context.Context, v int, out task.Emitter[int]) error { return nil })
	graph.Discard(b)
	bk := bookkeeper.New[int](g, "bk")
	pos := bookkeeper.AddRule(bk, "pos", func() bookkeeper.Rule[int, int] {
		return bookkeeper.RuleFunc[int, int](func(_ context.Context, v int, out task.Emitter[int]) error {
			if v > 0 {
				return out.Emit(v)
			}
			return nil
		})
	})
	void := bookkeeper.AddRule(bk, "all, to nobody", func() bookkeeper.Rule[int, int] {
		return bookkeeper.RuleFunc[int, int](func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) })
	})
	graph.Discard(void)
	graph.Connect(g.Input(), twice)
	graph.Connect(twice, a)
	graph.Connect(twice, b)
	graph.Connect(a, bk)
	graph.Connect(pos, g.Output())
	rt, err := g.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 50; i++ {
		_ = rt.Send(i)
	}
	rt.Close()
	for range rt.Results() {
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{"twice": {50, 100}, "a": {100, 100}, "b": {100, 0}, "bk": {100, 150}}
	for _, ts := range rt.Stats().Tasks {
		w := want[ts.Name]
		if ts.ItemsIn != w[0] || ts.ItemsOut != w[1] {
			t.Errorf("%s: in %d out %d, want in %d out %d", ts.Name, ts.ItemsIn, ts.ItemsOut, w[0], w[1])
		}
	}
	if p := rt.Stats(); p.Outputs != 50 || p.Sent != 50 {
		t.Errorf("progress %+v", p)
	}
}

// recorder is a slog handler keeping every record.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h *recorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recorder) WithGroup(string) slog.Handler      { return h }

// records returns the stall reports recorded.
func (h *recorder) records() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var rs []slog.Record
	for _, r := range h.recs {
		if strings.Contains(r.Message, "no progress") {
			rs = append(rs, r)
		}
	}
	return rs
}

// stuckGraph takes every buffer of a pool and never releases them.
func stuckGraph() *graph.Graph[int, int] {
	g := graph.New[int, int]("stuck")
	pool := memmgr.New(g, "frames", 2, memmgr.Slices[byte](8))
	hog := graph.AddFunc(g, "hoarder", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		_, err := pool.Get(ctx) // never released
		return err
	})
	graph.Discard(hog)
	graph.Connect(g.Input(), hog)
	return g
}

// runStuck starts stuckGraph with opts, lets it stall for a while, and
// cancels it.
func runStuck(t *testing.T, stall time.Duration, opts ...graph.StartOption) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := stuckGraph().Start(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		_ = rt.Send(i)
	}
	time.Sleep(stall)
	cancel()
	_ = rt.Wait()
}

// Without a report function, a stall is logged (once per stall) through
// slog.Default(), or through the logger given with WithLogger; it can be
// turned off. By default the delay is DefaultStallDelay.
func TestStallReportIsLoggedByDefault(t *testing.T) {
	if graph.DefaultStallDelay != 10*time.Second {
		t.Fatalf("DefaultStallDelay = %v", graph.DefaultStallDelay)
	}
	def := &recorder{}
	old := slog.Default()
	slog.SetDefault(slog.New(def))
	defer slog.SetDefault(old)

	runStuck(t, 400*time.Millisecond, graph.WithStallReport(40*time.Millisecond, nil))
	recs := def.records()
	if len(recs) != 1 {
		t.Fatalf("%d records through slog.Default, want 1 for one stall", len(recs))
	}
	r := recs[0]
	if r.Level != slog.LevelWarn || !strings.Contains(r.Message, `"stuck"`) {
		t.Fatalf("record %v %q", r.Level, r.Message)
	}
	// Then one record per task, with the copies' states as attributes.
	var task slog.Record
	for _, rec := range def.recs {
		if rec.Message == "htgs: stalled graph: task" {
			task = rec
		}
	}
	attrs := map[string]string{}
	task.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	if attrs["task"] != "hoarder" || !strings.Contains(attrs["copies"], "waiting for memory") || !strings.Contains(attrs["copies"], "frames") {
		t.Fatalf("task record %q: %v", task.Message, attrs)
	}

	own := &recorder{}
	runStuck(t, 200*time.Millisecond, graph.WithLogger(slog.New(own)), graph.WithStallReport(40*time.Millisecond, nil))
	if n, m := len(own.records()), len(def.records()); n != 1 || m != 1 {
		t.Fatalf("with WithLogger: %d records there, %d more through slog.Default; want 1 and 0", n, m-1)
	}

	runStuck(t, 200*time.Millisecond, graph.WithoutStallReport())
	runStuck(t, 200*time.Millisecond, graph.WithStallReport(0, nil))
	if n := len(def.records()); n != 1 {
		t.Fatalf("stall reports turned off, yet %d more records", n-1)
	}
}

// The stall detector started by default ends with the run's goroutines,
// whether or not Wait is called.
func TestStallDetectorEndsWithoutWait(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rt, err := squareGraph(2).Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Send(3)
	rt.Close()
	for range rt.Results() {
	}
}

// A graph that only waits for input is reported as such.
func TestStallReportHintsAtMissingClose(t *testing.T) {
	own := &recorder{}
	rt, err := squareGraph(2).Start(context.Background(), graph.WithLogger(slog.New(own)), graph.WithStallReport(30*time.Millisecond, nil))
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Send(3)
	for range 100 {
		if len(own.records()) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	rt.Close()
	for range rt.Results() {
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	recs := own.records()
	if len(recs) != 1 || !strings.Contains(recs[0].Message, "waiting for input") {
		t.Fatalf("records %v, want one about waiting for input", recs)
	}
}
