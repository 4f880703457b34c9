package observe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/graph/observe"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/pipeline"
	"github.com/gohtgs/htgs/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
		return errors.Join(b.Release(), out.Emit(b.Data[0]+1))
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

// runRich runs richGraph over 200 values and waits for it.
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

type traceDoc struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Cat  string         `json:"cat"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Tid  int            `json:"tid"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
}

func TestTraceIsWellFormed(t *testing.T) {
	var buf bytes.Buffer
	if err := observe.WriteTrace(&buf, runRich(t).Execution); !errors.Is(err, graph.ErrNoTrace) {
		t.Fatalf("untraced run: WriteTrace = %v, want ErrNoTrace", err)
	}
	rt := runRich(t, graph.WithTrace())
	if err := observe.WriteTrace(&buf, rt.Execution); err != nil {
		t.Fatal(err)
	}
	var doc traceDoc
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	names := map[int]string{}
	slices := map[int][][2]float64{}
	counters := 0
	for _, e := range doc.TraceEvents {
		switch e.Ph {
		case "M":
			if e.Name == "thread_name" {
				names[e.Tid] = e.Args["name"].(string)
			}
		case "X":
			slices[e.Tid] = append(slices[e.Tid], [2]float64{e.Ts, e.Ts + e.Dur})
			if (e.Name == "memory wait") != (e.Cat == "memory") || (e.Cat == "memory" && e.Args["pool"] == "") {
				t.Errorf("event %q in category %q, args %v", e.Name, e.Cat, e.Args)
			}
		case "C":
			counters++
		}
	}
	// Every copy has a track: nested/sq x2, cpus[0]/work, cpus[1]/work, evens.
	want := []string{"nested/sq #0", "nested/sq #1", "cpus[0]/work #0", "cpus[1]/work #0", "evens #0"}
	var got []string
	for _, n := range names {
		got = append(got, n)
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("tracks %v, want %v", got, want)
	}
	total := 0
	for tid, ss := range slices {
		sort.Slice(ss, func(i, j int) bool { return ss[i][0] < ss[j][0] })
		for i := 1; i < len(ss); i++ {
			if ss[i][0] < ss[i-1][1]-0.001 {
				t.Fatalf("track %s: slices overlap: %v and %v", names[tid], ss[i-1], ss[i])
			}
		}
		total += len(ss)
	}
	if total < 200*3 || counters == 0 {
		t.Fatalf("%d slices, %d counter samples", total, counters)
	}
}

// get serves req through h and returns the status, the content type and
// the body.
func get(h http.Handler, method, query string, accept string) (int, string, string) {
	req := httptest.NewRequest(method, "/"+query, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Header().Get("Content-Type"), rec.Body.String()
}

func TestHandlerFormats(t *testing.T) {
	h := observe.Handler(runRich(t).Execution)
	code, _, body := get(h, "GET", "", "")
	var st graph.Stats
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || len(st.Tasks) != 4 || len(st.Pools) != 2 {
		t.Fatalf("json: %d %s", code, body)
	}
	if code, _, body := get(h, "GET", "?format=dot&color=wait", ""); code != 200 || !strings.HasPrefix(body, "digraph") {
		t.Fatalf("dot: %d %s", code, body)
	}
	if code, _, body := get(h, "GET", "?format=text", ""); code != 200 || !strings.Contains(body, `task "cpus[0]/work"`) {
		t.Fatalf("text: %d %s", code, body)
	}
	if code, _, _ := get(h, "GET", "?format=trace", ""); code != 404 {
		t.Fatalf("trace of an untraced run: %d", code)
	}
	if code, _, _ := get(h, "GET", "?format=png", ""); code != 400 {
		t.Fatalf("bad format: %d", code)
	}
	if code, _, _ := get(h, "POST", "", ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", code)
	}
	for _, q := range []string{"", "?format=ui"} {
		accept := "text/html"
		if q != "" {
			accept = ""
		}
		code, ctype, body := get(h, "GET", q, accept)
		if code != 200 || !strings.HasPrefix(ctype, "text/html") || !strings.Contains(body, "<script>") || strings.Contains(body, "/*SCRIPT*/") {
			t.Fatalf("page %q: %d %s, %.200s", q, code, ctype, body)
		}
	}

	traced := observe.Handler(runRich(t, graph.WithTrace()).Execution)
	code, _, body = get(traced, "GET", "?format=trace", "")
	var doc traceDoc
	if code != 200 || json.Unmarshal([]byte(body), &doc) != nil || len(doc.TraceEvents) < 600 {
		t.Fatalf("trace: %d, %d events", code, len(doc.TraceEvents))
	}
}

type liveView struct {
	Run    int64       `json:"run"`
	Stats  graph.Stats `json:"stats"`
	Done   bool        `json:"done"`
	Idle   float64     `json:"idle"`
	Stall  string      `json:"stall"`
	Trace  bool        `json:"trace"`
	Now    float64     `json:"now"`
	Tracks []struct {
		Task   string       `json:"task"`
		Thread int          `json:"thread"`
		Slices [][3]float64 `json:"slices"`
	} `json:"tracks"`
}

type topoView struct {
	Graph string `json:"graph"`
	Run   int64  `json:"run"`
	Nodes []struct {
		ID    string   `json:"id"`
		Kind  string   `json:"kind"`
		Task  int      `json:"task"`
		Pool  int      `json:"pool"`
		Rules []string `json:"rules"`
		Layer int      `json:"layer"`
	} `json:"nodes"`
	Edges []struct {
		From   string `json:"from"`
		To     string `json:"to"`
		Memory bool   `json:"memory"`
		Rule   string `json:"rule"`
		Back   bool   `json:"back"`
	} `json:"edges"`
}

// The page's feeds: the live snapshot with the recent timeline, and the
// topology laid out in layers, with the indices into the snapshot.
func TestLiveAndTopology(t *testing.T) {
	rt := runRich(t, graph.WithTrace())
	h := observe.Handler(rt.Execution)
	code, _, body := get(h, "GET", "?format=live", "")
	var v liveView
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil {
		t.Fatalf("live: %d %s", code, body)
	}
	if !v.Done || !v.Stats.Done || !v.Trace || v.Stall != "" || len(v.Tracks) != 5 || v.Now <= 0 {
		t.Fatalf("live view of a finished traced run: %+v", v)
	}
	total := 0
	for _, tr := range v.Tracks {
		if len(tr.Slices) > 400 {
			t.Errorf("track %s #%d: %d slices, more than the view's 400", tr.Task, tr.Thread, len(tr.Slices))
		}
		total += len(tr.Slices)
	}
	if total == 0 {
		t.Error("no slices in the live view's timeline")
	}

	code, _, body = get(h, "GET", "?format=topology", "")
	var topo topoView
	if code != 200 || json.Unmarshal([]byte(body), &topo) != nil {
		t.Fatalf("topology: %d %s", code, body)
	}
	if topo.Graph != "rich" || topo.Run != v.Run {
		t.Errorf("topology of graph %q run %d, live run %d", topo.Graph, topo.Run, v.Run)
	}
	layer := map[string]int{}
	tasks, pools := 0, 0
	for _, n := range topo.Nodes {
		layer[n.ID] = n.Layer
		if n.Task >= 0 {
			tasks++
			if v.Stats.Tasks[n.Task].Name != n.ID {
				t.Errorf("node %s points at task %q", n.ID, v.Stats.Tasks[n.Task].Name)
			}
		}
		if n.Pool >= 0 {
			pools++
			if n.Kind != "memory" || v.Stats.Pools[n.Pool].Name != n.ID {
				t.Errorf("node %s (%s) points at pool %q", n.ID, n.Kind, v.Stats.Pools[n.Pool].Name)
			}
		}
	}
	if tasks != len(v.Stats.Tasks) || pools != len(v.Stats.Pools) {
		t.Errorf("%d task nodes and %d pool nodes for %d tasks and %d pools", tasks, pools, len(v.Stats.Tasks), len(v.Stats.Pools))
	}
	rules := 0
	for _, e := range topo.Edges {
		if e.Rule != "" {
			rules++
			if e.From != "evens" || e.Rule != "even" {
				t.Errorf("rule edge %+v", e)
			}
		}
		if !e.Memory && !e.Back && layer[e.To] <= layer[e.From] {
			t.Errorf("edge %s -> %s goes from layer %d to %d", e.From, e.To, layer[e.From], layer[e.To])
		}
	}
	if rules != 1 {
		t.Errorf("%d edges leave from a rule, want 1", rules)
	}

	// Without a trace the view says so and sends no tracks.
	code, _, body = get(observe.Handler(runRich(t).Execution), "GET", "?format=live", "")
	v = liveView{}
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || v.Trace || len(v.Tracks) != 0 {
		t.Fatalf("live view of an untraced run: %d %s", code, body)
	}
}

// A graph waiting for input that never comes shows as stalled, with the
// hint that Close may be missing.
func TestLiveShowsStall(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 2 s for the stall")
	}
	g := graph.New[int, int]("idle")
	n := graph.AddFunc(g, "echo", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) })
	graph.Connect(g.Input(), n)
	graph.Connect(n, g.Output())
	rt, err := g.Start(context.Background(), graph.WithoutStallReport())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		rt.Close()
		for range rt.Results() {
		}
		_ = rt.Wait()
	}()
	h := observe.Handler(rt.Execution)
	get(h, "GET", "?format=live", "")
	time.Sleep(2100 * time.Millisecond)
	var v liveView
	if _, _, body := get(h, "GET", "?format=live", ""); json.Unmarshal([]byte(body), &v) != nil ||
		v.Done || v.Idle < 2 || !strings.Contains(v.Stall, "is Close missing?") {
		t.Fatalf("live view of a graph waiting for input: %s", body)
	}
}

// With Graphviz installed, ?format=svg draws the graph.
func TestSVG(t *testing.T) {
	h := observe.Handler(runRich(t).Execution)
	code, ctype, body := get(h, "GET", "?format=svg", "")
	if _, err := exec.LookPath("dot"); err != nil {
		if code != http.StatusNotFound {
			t.Fatalf("svg without Graphviz: %d %s", code, body)
		}
		t.Skip("Graphviz dot not installed; .ci/run installs it")
	}
	if code != 200 || ctype != "image/svg+xml" || !strings.Contains(body, "<svg") || !strings.Contains(body, "cpus[1]/work") {
		t.Fatalf("svg: %d %s %.300s", code, ctype, body)
	}
}

// fakeRemote stands for a task whose inputs run on worker processes: odd
// inputs run on w1 (host hostA), even ones on w2 (host hostB).
type fakeRemote struct {
	at atomic.Pointer[task.Placement]
}

func (f *fakeRemote) Placement() task.Placement {
	if p := f.at.Load(); p != nil {
		return *p
	}
	return task.Placement{}
}

func (f *fakeRemote) Execute(_ context.Context, v int, out task.Emitter[int]) error {
	p := &task.Placement{Worker: "w2", Host: "hostB", Since: time.Now()}
	if v%2 == 1 {
		p.Worker, p.Host = "w1", "hostA"
	}
	f.at.Store(p)
	return out.Emit(v)
}

// The trace names the worker of each remote Execute, and the handler's
// JSON the workers of the remote task.
func TestRemoteWorkersInTraceAndJSON(t *testing.T) {
	g := graph.New[int, int]("far")
	r := graph.AddTask(g, "remote", 2, func() task.Task[int, int] { return &fakeRemote{} })
	l := graph.AddFunc(g, "local", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) })
	graph.Connect(g.Input(), r)
	graph.Connect(r, l)
	graph.Connect(l, g.Output())
	rt, err := g.Start(context.Background(), graph.WithTrace())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 11 { // 5 odd inputs on w1, 6 even ones on w2
		_ = rt.Send(i)
	}
	rt.Close()
	for range rt.Results() {
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	checkRemote(t, rt.Execution)
}

func checkRemote(t *testing.T, e *graph.Execution) {
	var buf bytes.Buffer
	if err := observe.WriteTrace(&buf, e); err != nil {
		t.Fatal(err)
	}
	var doc traceDoc
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	byWorker := map[string]int{}
	remoteTracks, plain := 0, 0
	for _, ev := range doc.TraceEvents {
		switch {
		case ev.Ph == "M" && ev.Name == "thread_name" && strings.HasSuffix(ev.Args["name"].(string), "(remote)"):
			remoteTracks++
		case ev.Ph == "X" && ev.Name == "execute":
			plain++
		case ev.Ph == "X":
			w, h := ev.Args["worker"], ev.Args["host"]
			if ev.Name != "execute on "+w.(string) || ev.Cat != "remote" {
				t.Errorf("event %q (%s) has worker %v", ev.Name, ev.Cat, w)
			}
			byWorker[w.(string)+"@"+h.(string)]++
		}
	}
	if remoteTracks != 2 || plain != 11 || byWorker["w1@hostA"] != 5 || byWorker["w2@hostB"] != 6 {
		t.Errorf("trace: %d remote tracks, %d local executes, remote executes %v", remoteTracks, plain, byWorker)
	}

	_, _, body := get(observe.Handler(e), "GET", "?format=json", "")
	var js graph.Stats
	if err := json.Unmarshal([]byte(body), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Tasks) == 0 || len(js.Tasks[0].Workers) != 2 || js.Tasks[0].Workers[0].Worker != "w2" {
		t.Errorf("the handler's JSON lacks the workers: %s", body)
	}
}

// The handler serves over a real server too (what the programs' -http
// flag does).
func TestHandlerOverHTTP(t *testing.T) {
	srv := httptest.NewServer(observe.Handler(runRich(t).Execution))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "?format=text")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `graph "rich"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// After the run every view says it is done, with nothing pending and the
// elapsed time frozen: what -http-wait serves once the work is over.
func TestFinalStateIsDone(t *testing.T) {
	h := observe.Handler(runRich(t).Execution)
	var first graph.Stats
	for i := range 2 {
		code, _, body := get(h, "GET", "?format=json", "")
		var st graph.Stats
		if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
			t.Fatalf("json view: %d %v", code, err)
		}
		if !st.Done || st.Pending != 0 {
			t.Errorf("final json view: Done %v, Pending %d", st.Done, st.Pending)
		}
		if i == 0 {
			first = st
			time.Sleep(20 * time.Millisecond)
		} else if st.Elapsed != first.Elapsed {
			t.Errorf("elapsed grows after the run: %v then %v", first.Elapsed, st.Elapsed)
		}
	}
	_, _, body := get(h, "GET", "?format=live", "")
	var v struct {
		Done  bool        `json:"done"`
		Stats graph.Stats `json:"stats"`
		Idle  float64     `json:"idle"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || !v.Done || !v.Stats.Done || v.Stats.Pending != 0 || v.Stats.Elapsed != first.Elapsed || v.Idle != 0 {
		t.Errorf("final live view (%v): done %v/%v, pending %d, elapsed %v (want %v), idle %v", err, v.Done, v.Stats.Done, v.Stats.Pending, v.Stats.Elapsed, first.Elapsed, v.Idle)
	}
	if _, _, text := get(h, "GET", "?format=text", ""); !strings.Contains(text, ", done\n") {
		t.Errorf("final text view:\n%s", text)
	}
}
