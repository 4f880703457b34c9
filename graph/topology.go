package graph

import (
	"strings"

	"github.com/gohtgs/htgs/internal/core"
)

// Topology is the instantiated graph of a run, as [Execution.Topology]
// returns it: its nodes and the edges between them, for code that draws or
// lays out a run (graph/observe's live view, for one). Nested graphs and
// pipeline clones are flattened: a node's Path names its enclosing graphs.
type Topology struct {
	Graph string // the graph's name
	Nodes []TopoNode
	Edges []TopoEdge
}

// TopoNode is a node of a [Topology].
type TopoNode struct {
	ID    string // unique in the run: the full name
	Label string // what to write on the node
	// Kind is "task", "bookkeeper" or "variants" for a node that executes
	// values (Task is then its index in [Stats.Tasks]), "memory" for a
	// memory pool (Pool is its index in [Stats.Pools]), or "input",
	// "output", "route" or "merge" for a graph's input or output and a
	// pipeline's router or merge point.
	Kind  string
	Path  []string // the enclosing graphs and pipeline clones, outermost first
	Task  int      // index in Stats.Tasks, or -1
	Pool  int      // index in Stats.Pools, or -1
	Rules []string // a bookkeeper's rules
}

// TopoEdge is an edge of a [Topology], between two [TopoNode] IDs: a data
// edge, or a memory edge from a pool to a task that takes buffers from it.
type TopoEdge struct {
	From, To string
	Type     string // the Go type carried by a data edge
	Memory   bool   // a memory edge
	Rule     string // the bookkeeper rule a data edge leaves from, if any
}

// Topology returns the run's instantiated graph. Its nodes and edges are
// fixed when Start returns; the indices into [Stats.Tasks] and
// [Stats.Pools] hold for every snapshot of the run.
func (e *Execution) Topology() Topology {
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
	t := Topology{Graph: r.Name, Nodes: make([]TopoNode, 0, len(nodes)), Edges: make([]TopoEdge, 0, len(edges))}
	// A bookkeeper's rules are nodes "bookkeeper.rule" in the runtime's
	// topology (and in WriteDOT's picture); here the edges start at the
	// bookkeeper itself and name the rule.
	ruleOf := map[string]string{}
	for _, n := range nodes {
		tn := TopoNode{ID: n.ID, Label: n.Label, Kind: string(n.Kind), Path: n.Path, Task: -1, Pool: -1}
		if tn.Path == nil {
			tn.Path = []string{}
		}
		if n.Stats != nil {
			if k, ok := taskAt[n.Stats]; ok {
				tn.Task = k
			}
			tn.Rules = n.Stats.Rules
			for _, rule := range n.Stats.Rules {
				ruleOf[n.ID+"."+rule] = n.ID
			}
		}
		if n.Pool != nil {
			if k, ok := poolAt[n.Pool]; ok {
				tn.Pool = k
			}
		}
		t.Nodes = append(t.Nodes, tn)
	}
	for _, ed := range edges {
		te := TopoEdge{From: ed.From, To: ed.To, Type: ed.Type, Memory: ed.Memory}
		if bk, ok := ruleOf[te.From]; ok {
			te.From, te.Rule = bk, strings.TrimPrefix(ed.From, bk+".")
		}
		t.Edges = append(t.Edges, te)
	}
	return t
}
