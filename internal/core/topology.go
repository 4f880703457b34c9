package core

import "fmt"

// TopoNode is a node of a run's instantiated graph, for pictures and
// reports: a task or bookkeeper (Stats set), a memory pool (Pool set), or a
// port: a graph's input or output, a pipeline's router or merge point.
type TopoNode struct {
	ID    string
	Label string
	Kind  string // "task", "bookkeeper", "memory", "input", "output", "route", "merge"
	Path  []string
	Stats *NodeStats // rule i of a bookkeeper is node ID+"."+Stats.Rules[i]
	Pool  *PoolStats
}

// TopoEdge is a data edge (or a memory edge) between two TopoNode IDs.
type TopoEdge struct {
	From, To string
	Type     string // the Go type carried
	Memory   bool
}

// AddTopoNode records a node of the instantiated graph.
func (r *Run) AddTopoNode(n TopoNode) { r.topoNodes = append(r.topoNodes, n) }

// AddTopoEdge records an edge of the instantiated graph.
func (r *Run) AddTopoEdge(e TopoEdge) { r.topoEdges = append(r.topoEdges, e) }

// Topology returns the instantiated graph's nodes and edges.
func (r *Run) Topology() ([]TopoNode, []TopoEdge) { return r.topoNodes, r.topoEdges }

// srcID names the producer end of an edge in scope sc.
func srcID(sc *Scope, p PortRef) string {
	if p.Spec == nil {
		return sc.FullName("input")
	}
	full := sc.FullName(p.Spec.Name)
	switch p.Spec.Kind {
	case "bookkeeper":
		return full + "." + p.Name
	case "graph":
		return full + "/output"
	case "pipeline":
		return full + ":merge"
	}
	return full
}

// dstID names the consumer end of an edge in scope sc.
func dstID(sc *Scope, p PortRef) string {
	if p.Spec == nil {
		return sc.FullName("output")
	}
	full := sc.FullName(p.Spec.Name)
	switch p.Spec.Kind {
	case "graph":
		return full + "/input"
	case "pipeline":
		return full + ":route"
	}
	return full
}

// recordBoundary adds the input and output ports of a graph instantiated in sc.
func recordBoundary(sc *Scope, name string) {
	label := name
	if len(sc.Path) > 0 {
		label = sc.Path[len(sc.Path)-1]
	}
	sc.Run.AddTopoNode(TopoNode{ID: sc.FullName("input"), Label: label + " input", Kind: "input", Path: sc.Path})
	sc.Run.AddTopoNode(TopoNode{ID: sc.FullName("output"), Label: label + " output", Kind: "output", Path: sc.Path})
}

func recordEdges(b *Blueprint, sc *Scope) {
	for _, e := range b.Edges {
		sc.Run.AddTopoEdge(TopoEdge{From: srcID(sc, e.From), To: dstID(sc, e.To), Type: e.Type})
	}
	for _, m := range b.MemEdges {
		sc.Run.AddTopoEdge(TopoEdge{From: sc.FullName(m.Pool.Name), To: sc.FullName(m.Getter.Name), Memory: true})
	}
}

func recordPipeline(sc *Scope, name string, clones int) {
	full := sc.FullName(name)
	sc.Run.AddTopoNode(TopoNode{ID: full + ":route", Label: fmt.Sprintf("%s: route to %d clones", name, clones), Kind: "route", Path: sc.Path})
	sc.Run.AddTopoNode(TopoNode{ID: full + ":merge", Label: name + ": merge", Kind: "merge", Path: sc.Path})
	for i := range clones {
		clone := fmt.Sprintf("%s[%d]", full, i)
		sc.Run.AddTopoEdge(TopoEdge{From: full + ":route", To: clone + "/input"})
		sc.Run.AddTopoEdge(TopoEdge{From: clone + "/output", To: full + ":merge"})
	}
}
