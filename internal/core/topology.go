package core

import (
	"fmt"
	"slices"
)

// TopoNode is a node of a run's instantiated graph, for pictures and
// reports: a task or bookkeeper (Stats set), a memory pool (Pool set), or a
// port: a graph's input or output, a pipeline's router or merge point.
type TopoNode struct {
	ID    string
	Label string
	Kind  Kind
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
func (r *Run) AddTopoNode(n TopoNode) {
	if r.topoNodes == nil {
		r.topoNodes, r.topoNodeAt = r.topoNodes1[:0], r.topoAt1[:0]
	}
	r.topoNodes = append(r.topoNodes, n)
	r.topoNodeAt = append(r.topoNodeAt, int32(len(r.nodeSrc)))
}

// AddTopoEdge records an edge of the instantiated graph.
func (r *Run) AddTopoEdge(e TopoEdge) { r.topoEdges = append(r.topoEdges, e) }

// Topology returns the instantiated graph's nodes and edges.
func (r *Run) Topology() ([]TopoNode, []TopoEdge) {
	r.materialize()
	return r.topoNodes, r.topoEdges
}

// reserve makes room in the run's lists for what instantiating b adds, so
// that they grow once rather than as nodes are added.
func (r *Run) reserve(b *Blueprint) {
	n := len(b.Specs)
	r.sinks = slices.Grow(r.sinks, 2*n)
	r.nodeSrc = slices.Grow(r.nodeSrc, n)
}

// srcID names the producer end of an edge in scope sc.
func srcID(sc *Scope, p PortRef) string {
	if p.Spec == nil {
		return sc.FullName("input")
	}
	full := sc.FullName(p.Spec.Name)
	switch p.Spec.Kind {
	case KindBookkeeper:
		return full + "." + p.Name
	case KindGraph:
		return full + "/output"
	case KindPipeline, KindVariants:
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
	case KindGraph:
		return full + "/input"
	case KindPipeline, KindVariants:
		return full + ":route"
	}
	return full
}

// recordBoundary adds the input and output ports of b instantiated in sc.
func recordBoundary(sc *Scope, b *Blueprint) {
	var in, out string
	if sc.shape != nil {
		// At the root: labelled when the topology is asked for.
		sc.Run.rootName = b.Name
	} else {
		label := b.Name
		if len(sc.Path) > 0 {
			label = sc.Path[len(sc.Path)-1]
		}
		in, out = label+" input", label+" output"
	}
	sc.Run.AddTopoNode(TopoNode{ID: sc.FullName("input"), Label: in, Kind: KindInput, Path: sc.Path})
	sc.Run.AddTopoNode(TopoNode{ID: sc.FullName("output"), Label: out, Kind: KindOutput, Path: sc.Path})
}

// edgeGroup is the edges of a blueprint instantiated in a scope, recorded
// at Start and turned into TopoEdges when the topology is asked for.
type edgeGroup struct {
	bp         *Blueprint
	sc         *Scope
	edges, mem int // how many of bp's edges and memory edges
	at         int // how many other TopoEdges were added before them
}

func recordEdges(b *Blueprint, sc *Scope) {
	r := sc.Run
	g := edgeGroup{bp: b, sc: sc, edges: len(b.Edges), mem: len(b.MemEdges), at: len(r.topoEdges)}
	if r.edgeGroups == nil {
		r.edgeGroups = r.edgeGroup1[:0]
	}
	r.edgeGroups = append(r.edgeGroups, g)
}

// topology merges the TopoNodes and TopoEdges added as such with those of
// the nodes and blueprints, in the order they were instantiated.
func (r *Run) topology() ([]TopoNode, []TopoEdge) {
	// The TopoNodes of the task and bookkeeper nodes (those with a src)
	// are made here; topoNodeAt[k] tells how many nodes were added before
	// topoNodes[k].
	nodes := make([]TopoNode, 0, len(r.topoNodes)+len(r.nodes))
	j := 0
	addNodes := func(upTo int) {
		for ; j < upTo && j < len(r.nodes); j++ {
			if n := r.nodes[j]; n.src != nil {
				nodes = append(nodes, TopoNode{ID: n.Name, Label: n.label(), Kind: n.Kind, Path: n.Path, Stats: n})
			}
		}
	}
	for k, t := range r.topoNodes {
		addNodes(int(r.topoNodeAt[k]))
		if t.Label == "" && len(t.Path) == 0 && (t.Kind == KindInput || t.Kind == KindOutput) {
			t.Label = r.rootName + " " + string(t.Kind)
		}
		nodes = append(nodes, t)
	}
	addNodes(len(r.nodes))
	k := 0
	var edges []TopoEdge
	k = 0
	for _, g := range r.edgeGroups {
		for ; k < g.at && k < len(r.topoEdges); k++ {
			edges = append(edges, r.topoEdges[k])
		}
		sc := g.sc
		for _, e := range g.bp.Edges[:g.edges] {
			edges = append(edges, TopoEdge{From: srcID(sc, e.From), To: dstID(sc, e.To), Type: e.Type})
		}
		for _, m := range g.bp.MemEdges[:g.mem] {
			edges = append(edges, TopoEdge{From: sc.FullName(m.Pool.Name), To: sc.FullName(m.Getter.Name), Memory: true})
		}
	}
	edges = append(edges, r.topoEdges[k:]...)
	return nodes, edges
}

func recordPipeline(sc *Scope, name string, clones int) {
	full := sc.FullName(name)
	sc.Run.AddTopoNode(TopoNode{ID: full + ":route", Label: fmt.Sprintf("%s: route to %d clones", name, clones), Kind: KindRoute, Path: sc.Path})
	sc.Run.AddTopoNode(TopoNode{ID: full + ":merge", Label: name + ": merge", Kind: KindMerge, Path: sc.Path})
	for i := range clones {
		clone := fmt.Sprintf("%s[%d]", full, i)
		sc.Run.AddTopoEdge(TopoEdge{From: full + ":route", To: clone + "/input"})
		sc.Run.AddTopoEdge(TopoEdge{From: clone + "/output", To: full + ":merge"})
	}
}
