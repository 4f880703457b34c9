package observe

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/tracefmt"
)

// The live view: a page (ui/index.html with its CSS and script inlined)
// that polls ?format=live about five times a second and draws the graph
// from ?format=topology (a layered layout of its own) or ?format=svg
// (Graphviz, when dot is installed).

//go:embed ui/index.html ui/style.css ui/app.js
var uiFiles embed.FS

// liveStallAfter is how long the live view waits without progress before
// it shows the stall banner.
const liveStallAfter = 2 * time.Second

// liveWindow is how much of the timeline the live view shows, and
// liveSlices the most slices per copy it sends.
const (
	liveWindow = 5 * time.Second
	liveSlices = 400
)

// svgTimeout bounds one run of dot; svgEvery is how often the picture is
// drawn again at most (requests in between get the last one).
const (
	svgTimeout = 5 * time.Second
	svgEvery   = time.Second
)

// ui is the state the live view keeps for one Execution: the progress
// marker that tells a stall, and the last Graphviz picture.
type ui struct {
	e   *graph.Execution
	run int64 // tells this view's run from others (a program serving several in turn)

	mu    sync.Mutex
	last  int64
	since time.Time

	svgMu   sync.Mutex
	svgData []byte
	svgAt   time.Time
	svgErr  error
	svgDone bool // drawn after the run finished: final
}

func newUI(e *graph.Execution) *ui { return &ui{e: e, run: time.Now().UnixNano(), last: -1} }

var uiPage = sync.OnceValue(func() []byte {
	read := func(n string) string {
		b, err := uiFiles.ReadFile("ui/" + n)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	page := read("index.html")
	page = strings.Replace(page, "/*STYLE*/", read("style.css"), 1)
	page = strings.Replace(page, "/*SCRIPT*/", read("app.js"), 1)
	return []byte(page)
})

func (u *ui) page(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(uiPage())
}

// progressMark is a number that grows whenever the run makes progress:
// values taken and emitted, sent and output, buffers taken from pools.
func progressMark(st graph.Stats) int64 {
	a := st.Sent + st.Outputs
	for _, t := range st.Tasks {
		a += t.ItemsIn + t.ItemsOut
	}
	for _, p := range st.Pools {
		a += p.Waits + int64(p.InUse)
	}
	return a
}

// finished reports whether every task copy of e has stopped.
func finished(e *graph.Execution) bool {
	select {
	case <-e.Done():
		return true
	default:
		return false
	}
}

type liveView struct {
	Run    int64       `json:"run"`
	Stats  graph.Stats `json:"stats"`
	Done   bool        `json:"done"`
	Idle   float64     `json:"idle"`            // seconds without progress
	Stall  string      `json:"stall,omitempty"` // the stall report, when idle long enough
	Trace  bool        `json:"trace"`
	Now    float64     `json:"now"` // µs since the run's epoch
	Tracks []liveTrack `json:"tracks,omitempty"`
}

type liveTrack struct {
	Task   string       `json:"task"`
	Thread int          `json:"thread"`
	Slices [][3]float64 `json:"slices"` // start µs, duration µs, kind (0 execute, 1 memory wait)
}

func (u *ui) live(w http.ResponseWriter) {
	e := u.e
	st := e.Stats()
	done := st.Done
	tl, err := e.Timeline(st.Elapsed-liveWindow, liveSlices)
	v := liveView{Run: u.run, Stats: st, Done: done, Trace: err == nil}
	v.Now = tracefmt.Micros(st.Elapsed)
	mark := progressMark(st)
	u.mu.Lock()
	if mark != u.last {
		u.last, u.since = mark, time.Now()
	}
	idle := time.Since(u.since)
	u.mu.Unlock()
	if !done {
		v.Idle = idle.Seconds()
		if idle >= liveStallAfter {
			s := v.Stats
			s.Idle = idle
			v.Stall = s.String()
			if s.AwaitingInput() {
				v.Stall = "it is waiting for input (is Close missing?)\n" + v.Stall
			}
		}
	}
	for _, t := range tl.Tracks {
		lt := liveTrack{Task: t.Task, Thread: t.Copy, Slices: make([][3]float64, 0, len(t.Slices))}
		for _, s := range t.Slices {
			kind := 0.0
			if s.MemoryWait {
				kind = 1
			}
			lt.Slices = append(lt.Slices, [3]float64{tracefmt.Micros(s.Start), tracefmt.Micros(s.Dur), kind})
		}
		v.Tracks = append(v.Tracks, lt)
	}
	writeJSON(w, v)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

type topoView struct {
	Graph string     `json:"graph"`
	Run   int64      `json:"run"`
	Dot   bool       `json:"dot"` // Graphviz is installed: ?format=svg works
	Nodes []topoNode `json:"nodes"`
	Edges []topoEdge `json:"edges"`
}

type topoNode struct {
	ID    string   `json:"id"`
	Label string   `json:"label"`
	Kind  string   `json:"kind"`
	Path  []string `json:"path"`
	Task  int      `json:"task"` // index in Stats.Tasks, or -1
	Pool  int      `json:"pool"` // index in Stats.Pools, or -1
	Rules []string `json:"rules,omitempty"`
	Layer int      `json:"layer"`
	Row   int      `json:"row"`
}

type topoEdge struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Type   string `json:"type"`
	Memory bool   `json:"memory,omitempty"`
	Rule   string `json:"rule,omitempty"` // the bookkeeper rule it leaves from
	Back   bool   `json:"back,omitempty"` // closes a cycle
}

// dotPath is where Graphviz's dot is, or "".
var dotPath = sync.OnceValue(func() string {
	p, err := exec.LookPath("dot")
	if err != nil {
		return ""
	}
	return p
})

func (u *ui) topology(w http.ResponseWriter) {
	writeJSON(w, topologyOf(u.e.Topology(), u.run))
}

// topologyOf lays the graph out in layers: each node's layer is the
// longest path to it from a node without inputs (edges closing a cycle
// left out); nodes of a layer are ordered by their enclosing graphs, so
// clusters stay together.
func topologyOf(t graph.Topology, run int64) topoView {
	v := topoView{Graph: t.Graph, Run: run, Dot: dotPath() != ""}
	at := map[string]int{}
	for i, n := range t.Nodes {
		at[n.ID] = i
		v.Nodes = append(v.Nodes, topoNode{ID: n.ID, Label: n.Label, Kind: n.Kind, Path: n.Path,
			Task: n.Task, Pool: n.Pool, Rules: n.Rules})
	}
	nodes := t.Nodes
	out := make([][]int, len(nodes)) // edge indices by source
	for i, ed := range t.Edges {
		v.Edges = append(v.Edges, topoEdge{From: ed.From, To: ed.To, Type: ed.Type, Memory: ed.Memory, Rule: ed.Rule})
		if f, ok := at[ed.From]; ok {
			if _, ok := at[ed.To]; ok {
				out[f] = append(out[f], i)
			}
		}
	}
	// Depth-first search marks the edges that close cycles.
	state := make([]int8, len(nodes)) // 0 new, 1 on the stack, 2 done
	var order []int                   // reverse postorder: a topological order
	var dfs func(int)
	dfs = func(n int) {
		state[n] = 1
		for _, ei := range out[n] {
			to := at[v.Edges[ei].To]
			switch state[to] {
			case 0:
				dfs(to)
			case 1:
				v.Edges[ei].Back = true
			}
		}
		state[n] = 2
		order = append(order, n)
	}
	for i := range nodes {
		if state[i] == 0 {
			dfs(i)
		}
	}
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		for _, ei := range out[n] {
			if ed := v.Edges[ei]; !ed.Back {
				to := at[ed.To]
				v.Nodes[to].Layer = max(v.Nodes[to].Layer, v.Nodes[n].Layer+1)
			}
		}
	}
	// A pool sits just before the first task that takes from it.
	for _, ed := range v.Edges {
		if ed.Memory {
			f, t := at[ed.From], at[ed.To]
			if v.Nodes[f].Kind == "memory" {
				v.Nodes[f].Layer = max(v.Nodes[t].Layer-1, 0)
			}
		}
	}
	byLayer := map[int][]int{}
	for i, n := range v.Nodes {
		byLayer[n.Layer] = append(byLayer[n.Layer], i)
	}
	for _, l := range byLayer {
		sort.SliceStable(l, func(a, b int) bool {
			return strings.Join(v.Nodes[l[a]].Path, "\x00") < strings.Join(v.Nodes[l[b]].Path, "\x00")
		})
		for row, i := range l {
			v.Nodes[i].Row = row
		}
	}
	return v
}

// svg serves the graph drawn by Graphviz from WriteDOT (colored by compute
// time), drawn again at most every svgEvery and, once the run is over, no
// more.
func (u *ui) svg(w http.ResponseWriter, req *http.Request) {
	dot := dotPath()
	if dot == "" {
		http.Error(w, "Graphviz (dot) is not installed", http.StatusNotFound)
		return
	}
	u.svgMu.Lock()
	defer u.svgMu.Unlock()
	if !u.svgDone && (u.svgData == nil || time.Since(u.svgAt) >= svgEvery) {
		done := finished(u.e)
		var src bytes.Buffer
		_ = u.e.WriteDOT(&src, graph.DOTOptions{Color: graph.ColorCompute})
		ctx, cancel := context.WithTimeout(req.Context(), svgTimeout)
		cmd := exec.CommandContext(ctx, dot, "-Tsvg")
		cmd.Stdin = &src
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		cancel()
		u.svgAt = time.Now()
		if err != nil {
			u.svgErr = err
			if msg := strings.TrimSpace(errb.String()); msg != "" {
				u.svgErr = errString(err.Error() + ": " + msg)
			}
		} else {
			u.svgData, u.svgErr, u.svgDone = out.Bytes(), nil, done
		}
	}
	if u.svgData == nil {
		http.Error(w, "dot: "+u.svgErr.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(u.svgData)
}

type errString string

func (e errString) Error() string { return string(e) }
