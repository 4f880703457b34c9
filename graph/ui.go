package graph

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

	"github.com/gohtgs/htgs/internal/core"
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
	e *Execution

	mu    sync.Mutex
	last  int64
	since time.Time

	svgMu   sync.Mutex
	svgData []byte
	svgAt   time.Time
	svgErr  error
	svgDone bool // drawn after the run finished: final
}

func newUI(e *Execution) *ui { return &ui{e: e, last: -1} }

// wantsHTML reports whether req comes from a browser asking for a page.
func wantsHTML(req *http.Request) bool {
	return strings.Contains(req.Header.Get("Accept"), "text/html")
}

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

// progressMark is a number that grows whenever the run makes progress
// (the stall detector's measure).
func (e *Execution) progressMark() int64 {
	a := activity(e.run) + e.outputs() + e.sent.Load()
	for _, p := range e.run.Pools() {
		a += p.Waits() + int64(p.InUse())
	}
	return a
}

func (e *Execution) finished() bool {
	select {
	case <-e.run.Finished():
		return true
	default:
		return false
	}
}

// runID tells runs apart (a program serving several graphs in turn).
func (e *Execution) runID() int64 { return e.run.Epoch.UnixNano() }

type liveView struct {
	Run    int64       `json:"run"`
	Stats  Stats       `json:"stats"`
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
	done := e.finished()
	v := liveView{Run: e.runID(), Stats: e.Stats(), Done: done, Trace: e.run.Trace != nil}
	v.Stats.Done = done
	now := time.Since(e.run.Epoch)
	v.Now = us(now)
	mark := e.progressMark()
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
			if s.awaitingInput() {
				v.Stall = "it is waiting for input (is Close missing?)\n" + v.Stall
			}
		}
	}
	if tr := e.run.Trace; tr != nil {
		for _, t := range tr.Tracks() {
			lt := liveTrack{Task: t.Task, Thread: t.Thread, Slices: [][3]float64{}}
			for _, s := range t.Recent(now-liveWindow, liveSlices) {
				lt.Slices = append(lt.Slices, [3]float64{us(s.Start), us(s.Dur), float64(s.Kind)})
			}
			v.Tracks = append(v.Tracks, lt)
		}
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
	writeJSON(w, topologyOf(u.e))
}

// topologyOf lays the graph out in layers: each node's layer is the
// longest path to it from a node without inputs (edges closing a cycle
// left out); nodes of a layer are ordered by their enclosing graphs, so
// clusters stay together.
func topologyOf(e *Execution) topoView {
	r := e.run
	taskAt := map[*core.NodeStats]int{}
	for i, n := range r.Nodes() {
		taskAt[n] = i
	}
	poolAt := map[*core.PoolStats]int{}
	for i, p := range r.Pools() {
		poolAt[p] = i
	}
	nodes, edges := r.Topology()
	v := topoView{Graph: r.Name, Run: e.runID(), Dot: dotPath() != ""}
	at := map[string]int{}
	for i, n := range nodes {
		tn := topoNode{ID: n.ID, Label: n.Label, Kind: string(n.Kind), Path: n.Path, Task: -1, Pool: -1}
		if tn.Path == nil {
			tn.Path = []string{}
		}
		if n.Stats != nil {
			if k, ok := taskAt[n.Stats]; ok {
				tn.Task = k
			}
			tn.Rules = n.Stats.Rules
		}
		if n.Pool != nil {
			if k, ok := poolAt[n.Pool]; ok {
				tn.Pool = k
			}
		}
		at[n.ID] = i
		v.Nodes = append(v.Nodes, tn)
	}
	// A bookkeeper's rules are nodes "bookkeeper.rule" in the DOT picture;
	// here the edges start at the bookkeeper itself.
	ruleOf := map[string]string{}
	for _, n := range nodes {
		if n.Stats != nil {
			for _, rule := range n.Stats.Rules {
				ruleOf[n.ID+"."+rule] = n.ID
			}
		}
	}
	out := make([][]int, len(nodes)) // edge indices by source
	for i, ed := range edges {
		te := topoEdge{From: ed.From, To: ed.To, Type: ed.Type, Memory: ed.Memory}
		if bk, ok := ruleOf[te.From]; ok {
			te.From, te.Rule = bk, strings.TrimPrefix(ed.From, bk+".")
		}
		v.Edges = append(v.Edges, te)
		ed := te
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
			if v.Nodes[f].Kind == string(core.KindMemory) {
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
		done := u.e.finished()
		var src bytes.Buffer
		_ = u.e.WriteDOT(&src, DOTOptions{Color: ColorCompute})
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
