package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/graph/observe"
	"github.com/gohtgs/htgs/task"
)

// A Remote's copies tell the graph where their inputs run: a stall report
// names the worker holding an input while it runs, and after the run the
// graph's Stats, DOT picture and trace name the worker and its host.
func TestRemoteWorkersInGraphObservability(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	serveInProcess(t, nc, "w1", registerV1)
	c := newClient(t, nc)
	r, err := NewRemote[job, answer](c, "square", Version("v1"))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	where := task.Placement{Worker: "w1", Host: host}.String()

	g := graph.New[job, answer]("squares")
	sq := graph.AddTask(g, "square", 4, r.Task)
	graph.Connect(g.Input(), sq)
	graph.Connect(sq, g.Output())
	reports := make(chan graph.Stats, 1)
	rt, err := g.Start(context.Background(), graph.WithTrace(), graph.WithStallReport(300*time.Millisecond, func(st graph.Stats) {
		select {
		case reports <- st:
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	// One long input: the run makes no progress while w1 executes it.
	if err := rt.Send(job{N: 2, Sleep: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-reports:
		text := st.String()
		if !strings.Contains(text, "executing on worker w1 (host "+host+") for ") {
			t.Errorf("the stall report does not name the worker holding the input:\n%s", text)
		}
	case <-time.After(5 * time.Second):
		t.Error("no stall report")
	}
	for _, j := range jobs(20, 0) {
		if err := rt.Send(j); err != nil {
			t.Fatal(err)
		}
	}
	rt.Close()
	n := 0
	for range rt.Results() {
		n++
	}
	if err := rt.Wait(); err != nil || n != 21 {
		t.Fatalf("%d results, %v", n, err)
	}

	st := rt.Stats()
	ts := st.Tasks[0]
	if !ts.Remote || len(ts.Workers) != 1 || ts.Workers[0] != (graph.WorkerStats{Worker: "w1", Host: host, Items: 21}) {
		t.Errorf("task stats: Remote %v, Workers %+v", ts.Remote, ts.Workers)
	}
	for _, cp := range ts.Copies {
		if cp.ItemsIn > 0 && (cp.Worker != "w1" || cp.Host != host) {
			t.Errorf("copy %d: worker %q host %q", cp.Copy, cp.Worker, cp.Host)
		}
	}
	var dot bytes.Buffer
	if err := rt.WriteDOT(&dot, graph.DOTOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dot.String(), "remote: "+where+" ×21") {
		t.Errorf("DOT does not name the worker:\n%s", dot.String())
	}
	var tr bytes.Buffer
	if err := observe.WriteTrace(&tr, rt.Execution); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(tr.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	onW1 := 0
	for _, e := range doc.TraceEvents {
		if e.Ph == "X" && e.Name == "execute on w1" && e.Args["worker"] == "w1" && e.Args["host"] == host {
			onW1++
		}
	}
	if onW1 != 21 {
		t.Errorf("%d trace slices name w1 and its host, want 21", onW1)
	}
}
