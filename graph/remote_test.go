package graph_test

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// fakeRemote stands for a task whose inputs run on worker processes: odd
// inputs run on w1 (host hostA), even ones on w2 (host hostB). A negative
// input waits, never taken by a worker, and input 100 waits on w1, until
// the run is cancelled.
type fakeRemote struct {
	at atomic.Pointer[task.Placement]
}

func (f *fakeRemote) Placement() task.Placement {
	if p := f.at.Load(); p != nil {
		return *p
	}
	return task.Placement{}
}

func (f *fakeRemote) Execute(ctx context.Context, v int, out task.Emitter[int]) error {
	f.at.Store(nil) // a new input: no worker has it yet
	if v < 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	p := &task.Placement{Worker: "w2", Host: "hostB", Since: time.Now()}
	if v%2 == 1 || v == 100 {
		p.Worker, p.Host = "w1", "hostA"
	}
	f.at.Store(p)
	if v == 100 {
		<-ctx.Done()
		return ctx.Err()
	}
	return out.Emit(v)
}

// remoteGraph is a remote task of two copies feeding a local one.
func remoteGraph() *graph.Graph[int, int] {
	g := graph.New[int, int]("far")
	r := graph.AddTask(g, "remote", 2, func() task.Task[int, int] { return &fakeRemote{} })
	l := graph.AddFunc(g, "local", 1, func(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v) })
	graph.Connect(g.Input(), r)
	graph.Connect(r, l)
	graph.Connect(l, g.Output())
	return g
}

// A remote task's copies show their workers and hosts in Stats, the DOT
// picture and the timeline; a local task shows none.
func TestRemoteCopiesNameTheirWorkers(t *testing.T) {
	rt, err := remoteGraph().Start(context.Background(), graph.WithTrace())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 { // 5 odd inputs on w1, 5 even ones on w2
		_ = rt.Send(i)
	}
	_ = rt.Send(11) // w1 has one more
	rt.Close()
	for range rt.Results() {
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}

	st := rt.Stats()
	var remote, local graph.TaskStats
	for _, ts := range st.Tasks {
		switch ts.Name {
		case "remote":
			remote = ts
		case "local":
			local = ts
		}
	}
	want := []graph.WorkerStats{{Worker: "w1", Host: "hostA", Items: 6}, {Worker: "w2", Host: "hostB", Items: 5}}
	if !remote.Remote || len(remote.Workers) != 2 || remote.Workers[0] != want[0] || remote.Workers[1] != want[1] {
		t.Errorf("remote task: Remote %v, Workers %+v, want %+v", remote.Remote, remote.Workers, want)
	}
	for _, c := range remote.Copies {
		if c.ItemsIn > 0 && (c.Worker == "" || c.Host == "") {
			t.Errorf("copy %d ran %d inputs but names no worker: %+v", c.Copy, c.ItemsIn, c)
		}
	}
	if local.Remote || len(local.Workers) != 0 || local.Copies[0].Worker != "" {
		t.Errorf("local task looks remote: %+v", local)
	}
	if text := st.String(); !strings.Contains(text, "inputs per worker: w1@hostA ×6, w2@hostB ×5") ||
		!strings.Contains(text, "(last input on worker w") {
		t.Errorf("Stats.String does not name the workers:\n%s", text)
	}

	var dot bytes.Buffer
	if err := rt.WriteDOT(&dot, graph.DOTOptions{Copies: true}); err != nil {
		t.Fatal(err)
	}
	d := dot.String()
	if !strings.Contains(d, `remote: w1@hostA ×6, w2@hostB ×5`) || !strings.Contains(d, ", on w") {
		t.Errorf("DOT does not name the workers:\n%s", d)
	}
	nodes := 0
	for _, line := range strings.Split(d, "\n") {
		line = strings.TrimSpace(line)
		isRemote := strings.HasPrefix(line, `"remote" [`)
		isLocal := strings.HasPrefix(line, `"local" [`)
		if isRemote || isLocal {
			nodes++
			if strings.Contains(line, "dashed") != isRemote {
				t.Errorf("only the remote task should be dashed: %s", line)
			}
		}
	}
	if nodes != 2 {
		t.Errorf("%d task nodes in the DOT, want 2:\n%s", nodes, d)
	}

	tl, err := rt.Timeline(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	byWorker := map[string]int{}
	remoteTracks, plain := 0, 0
	for _, tr := range tl.Tracks {
		if tr.Remote {
			remoteTracks++
		}
		for _, s := range tr.Slices {
			switch {
			case s.Worker == "":
				plain++
			case !tr.Remote:
				t.Errorf("slice %+v of local track %s names a worker", s, tr.Task)
			default:
				byWorker[s.Worker+"@"+s.Host]++
			}
		}
	}
	if remoteTracks != 2 || plain != 11 || byWorker["w1@hostA"] != 6 || byWorker["w2@hostB"] != 5 {
		t.Errorf("timeline: %d remote tracks, %d local executes, remote executes %v", remoteTracks, plain, byWorker)
	}
}

// A stall report says which worker holds a remote copy's input, and since
// when, or that no worker has taken it yet.
func TestStallReportNamesRemoteWorker(t *testing.T) {
	reports := make(chan graph.Stats, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := remoteGraph().Start(ctx, graph.WithStallReport(100*time.Millisecond, func(r graph.Stats) {
		select {
		case reports <- r:
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Send(100) // held by w1
	_ = rt.Send(-1)  // taken by no worker
	var r graph.Stats
	select {
	case r = <-reports:
	case <-time.After(5 * time.Second):
		t.Fatal("no stall report")
	}
	cancel()
	_ = rt.Wait()
	text := r.String()
	if !strings.Contains(text, "executing on worker w1 (host hostA) for ") ||
		!strings.Contains(text, "executing, its input not yet taken by a worker") {
		t.Fatalf("the stall report does not say where the inputs are:\n%s", text)
	}
	for _, c := range r.Tasks[0].Copies {
		if c.Worker == "w1" && c.OnWorker < 100*time.Millisecond {
			t.Errorf("w1 has held its input for %v, less than the stall delay", c.OnWorker)
		}
	}
}

// An implementation among variants whose copies run remotely is a remote
// task of its own in Stats; the local one is not.
func TestRemoteVariant(t *testing.T) {
	g := graph.New[int, int]("mixed")
	v := graph.AddVariants(g, "work", []graph.Variant[int, int]{
		{Device: device.Host{}, New: func() task.Task[int, int] { return &fakeRemote{} }},
		{Device: fakeGPU{id: 0}, New: func() task.Task[int, int] {
			return task.Map(func(_ context.Context, v int) (int, error) { return v, nil })
		}},
	})
	graph.Connect(g.Input(), v)
	graph.Connect(v, g.Output())
	var exec *graph.Execution
	if err := g.Run(context.Background(), seqInts(40), func(int) error { return nil },
		graph.WithStarted(func(e *graph.Execution) { exec = e })); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, ts := range exec.Stats().Tasks {
		var ran int64
		for _, w := range ts.Workers {
			ran += w.Items
		}
		switch {
		case strings.HasSuffix(ts.Name, "/"+device.Host{}.Name()):
			seen++
			if !ts.Remote || ran != ts.ItemsIn {
				t.Errorf("%s: Remote %v, workers %+v, %d inputs", ts.Name, ts.Remote, ts.Workers, ts.ItemsIn)
			}
		case strings.HasSuffix(ts.Name, "/gpu0"):
			seen++
			if ts.Remote || len(ts.Workers) != 0 {
				t.Errorf("%s looks remote: %+v", ts.Name, ts)
			}
		}
	}
	if seen != 2 {
		t.Errorf("found %d of the 2 implementations in Stats", seen)
	}
}

// BenchmarkPlacerOverhead measures what the graph adds per value for a
// task whose copies are task.Placers (counting each input under its
// worker) against the same task that is not one: one copy, no work.
func BenchmarkPlacerOverhead(b *testing.B) {
	for _, placer := range []bool{false, true} {
		name := "plain"
		if placer {
			name = "placer"
		}
		b.Run(name, func(b *testing.B) {
			g := graph.New[int, int]("overhead")
			n := graph.AddTask(g, "t", 1, func() task.Task[int, int] {
				f := &fakeRemote{}
				if placer {
					return f
				}
				return task.Func[int, int](func(ctx context.Context, v int, out task.Emitter[int]) error {
					return f.Execute(ctx, v, out)
				})
			})
			graph.Discard(n)
			graph.Connect(g.Input(), n)
			rt, err := g.Start(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				_ = rt.Send(2 * (i % 50)) // inputs that return at once
			}
			rt.Close()
			if err := rt.Wait(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
