package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/pipeline"
	"github.com/gohtgs/htgs/task"
)

// tagged is an input with the clone that processed it.
type tagged struct{ V, Clone int }

// An execution pipeline whose clones run on worker processes: the
// decomposition rule routes each input to a clone, and each clone's
// inputs go to the worker that serves it (a band per node).
func TestPipelineClonesOnWorkers(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	const clones = 3
	tag := func() task.Task[int, tagged] {
		return task.Map(func(ctx context.Context, v int) (tagged, error) {
			info, _ := task.InfoFrom(ctx)
			return tagged{v, info.Clone}, nil
		})
	}
	for k := range clones {
		serveInProcess(t, connect(t, s), fmt.Sprintf("node%d", k), func(w *Worker) error {
			return Handle(w, "band", tag, Clone(k), Copies(2))
		})
	}
	c := newClient(t, nc)
	r, err := NewRemote[int, tagged](c, "band", PerClone())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Call(context.Background(), 1); err == nil {
		t.Error("Call on a PerClone task succeeded")
	}

	inner := graph.New[int, tagged]("band")
	node := graph.AddTask(inner, "register", 4, r.Task)
	graph.Connect(inner.Input(), node)
	graph.Connect(node, inner.Output())
	g := graph.New[int, tagged]("bands")
	p := pipeline.New(g, "bands", inner, device.Hosts(clones), pipeline.ByKey(func(v int) int { return v % clones }))
	graph.Connect(g.Input(), p)
	graph.Connect(p, g.Output())
	var out []tagged
	in := make([]int, 30)
	for i := range in {
		in[i] = i
	}
	var exec *graph.Execution
	if err := g.Run(context.Background(), slices.Values(in), func(v tagged) error {
		out = append(out, v)
		return nil
	}, graph.WithStarted(func(e *graph.Execution) { exec = e })); err != nil {
		t.Fatal(err)
	}
	if len(out) != 30 {
		t.Fatalf("%d results", len(out))
	}
	for _, v := range out {
		if v.Clone != v.V%clones {
			t.Errorf("input %d ran as clone %d, want %d", v.V, v.Clone, v.V%clones)
		}
	}
	st := c.Stats()
	for k := range clones {
		if n := st.ByWorker[fmt.Sprintf("node%d", k)]; n != 10 {
			t.Errorf("worker node%d answered %d inputs, want 10", k, n)
		}
	}
	// The graph's statistics name each clone's worker and host.
	host, _ := os.Hostname()
	clonesSeen := 0
	for _, ts := range exec.Stats().Tasks {
		var k int
		if _, err := fmt.Sscanf(ts.Name, "bands[%d]/", &k); err != nil || !strings.HasSuffix(ts.Name, "/register") {
			continue
		}
		clonesSeen++
		want := graph.WorkerStats{Worker: fmt.Sprintf("node%d", k), Host: host, Items: 10}
		if !ts.Remote || len(ts.Workers) != 1 || ts.Workers[0] != want {
			t.Errorf("%s: Remote %v, Workers %+v, want %+v", ts.Name, ts.Remote, ts.Workers, want)
		}
	}
	if clonesSeen != clones {
		t.Errorf("stats of %d clones' remote task, want %d", clonesSeen, clones)
	}
	if outs, err := r.CallClone(context.Background(), 2, 7); err != nil || outs[0] != (tagged{7, 2}) {
		t.Errorf("CallClone: %v, %v", outs, err)
	}
}
