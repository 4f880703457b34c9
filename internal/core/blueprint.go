package core

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/gohtgs/htgs/device"
)

// Blueprint is the untyped description of a graph: node specifications and
// typed edges between their ports. A blueprint can be instantiated any number
// of times (each run, each pipeline clone, each nesting).
type Blueprint struct {
	Name     string
	Specs    []*Spec
	Edges    []*Edge
	MemEdges []MemEdge
	errs     []error
	discard  map[PortRef]bool
	// version changes with every Add, Connect and Discard: it tells
	// whether the shape cached in cache still describes the blueprint.
	version uint64
	cache   atomic.Pointer[shape]
	// Filters of the names of Specs and of the edges, once there are many
	// (see hasName and hasEdge).
	nameSeen, edgeSeen seenSet
	// edgeSlab holds the latest edges made by Connect.
	edgeSlab []Edge
	// frames holds the instantiated forms of b kept between runs (see
	// Frame).
	frames framePool
}

// NewBlueprint returns an empty blueprint.
func NewBlueprint(name string) *Blueprint {
	return &Blueprint{Name: name}
}

// Errorf records a building error; Err reports them all.
func (b *Blueprint) Errorf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

// Err returns every error recorded while building, or nil.
func (b *Blueprint) Err() error { return errors.Join(b.errs...) }

// Add appends a node specification; names must be unique in a blueprint.
func (b *Blueprint) Add(s *Spec) *Spec {
	switch {
	case s.Name == "":
		b.Errorf("htgs: graph %q: a %s needs a name", b.Name, s.Kind)
	case b.hasName(s.Name):
		b.Errorf("htgs: graph %q: two nodes are named %q", b.Name, s.Name)
	}
	s.BP = b
	s.index = len(b.Specs)
	b.Specs = append(b.Specs, s)
	b.version++
	return s
}

// Kind is the kind of a node (Spec.Kind), or of a node of a run's picture
// (TopoNode.Kind, NodeStats.Kind).
type Kind string

// The node kinds. A new kind of node (a remote clone, say) adds its own.
const (
	KindTask       Kind = "task"
	KindBookkeeper Kind = "bookkeeper"
	KindGraph      Kind = "graph"
	KindPipeline   Kind = "pipeline"
	KindMemory     Kind = "memory" // a memmgr pool
	// Kinds of a picture's nodes only.
	KindInput  Kind = "input"
	KindOutput Kind = "output"
	KindRoute  Kind = "route"
	KindMerge  Kind = "merge"
)

// Spec is one node of a blueprint.
type Spec struct {
	Name string
	Kind Kind
	// Copies is the number of copies of a task (1 for a bookkeeper or a
	// nested graph, the clone count of a pipeline); kinds without copies
	// (memory pools, whose capacity is their own) leave it 0.
	Copies int
	BP     *Blueprint
	// Build makes the runtime form of the node inside sc.
	Build func(sc *Scope) (Instance, error)
	// Inner is the blueprint of a nested graph or pipeline, for drawing.
	Inner *Blueprint
	// Extra carries kind-specific description for drawing (rule names ...).
	Extra any
	// Ports names the node's output ports: one "" for a task, nested graph
	// or pipeline, the rule names for a bookkeeper, none for a memory pool.
	Ports []string
	// builder, when set, is used instead of Build (one allocation less per
	// node than a closure).
	builder interface {
		build(sc *Scope) (Instance, error)
	}
	// index is the spec's position in BP.Specs.
	index int
	// multiIn tells that the node has several inputs: its Instance
	// implements inputs, and an edge's To.Index picks one.
	multiIn bool
}

// inputs is implemented by the instances of nodes with several inputs:
// InAt(i) is the Sink of input i.
type inputs interface{ InAt(i int) any }

func (s *Spec) build(sc *Scope) (Instance, error) {
	if s.builder != nil {
		return s.builder.build(sc)
	}
	return s.Build(sc)
}

// Instance is a node's runtime form within one run.
type Instance interface {
	In() any       // the Sink[In] consumers are wired to; nil if none
	Out(i int) any // the *Outlet[Out] of output port i
	Launch(r *Run) // starts the node's goroutines
}

// Discard records that the values of producer port p may go nowhere: it is
// allowed to have no edge out (see CheckOutputs).
func (b *Blueprint) Discard(p PortRef) {
	if b.discard == nil {
		b.discard = map[PortRef]bool{}
	}
	b.discard[p] = true
	b.version++
}

// CheckOutputs refuses values that would silently go nowhere: a producer
// port of a node with no edge out (unless declared with Discard, or unless
// it is the output of a nested graph or pipeline that nothing feeds), and a
// blueprint whose output port nothing feeds, unless one of its ports is
// declared with Discard (a graph that ends in sinks, or works by side
// effects).
func (b *Blueprint) CheckOutputs() error {
	// Bit i of used is set when port 0 of spec i has an edge out; other
	// ports (bookkeeper rules) are looked up in the edges.
	var small [4]uint64
	used := small[:]
	if n := (len(b.Specs) + 63) / 64; n > len(small) {
		used = make([]uint64, n)
	}
	fed := false
	for _, e := range b.Edges {
		if f := e.From; f.Spec != nil && f.Index == 0 && b.owns(f.Spec) {
			used[f.Spec.index/64] |= 1 << (f.Spec.index % 64)
		}
		if e.To.Spec == nil {
			fed = true
		}
	}
	var errs []error
	for si, s := range b.Specs {
		for i, name := range s.Ports {
			p := PortRef{BP: b, Spec: s, Index: i, Name: name}
			if i == 0 && s.index == si && b.owns(s) {
				if used[si/64]&(1<<(si%64)) != 0 {
					continue
				}
			} else if b.hasEdgeFrom(p) {
				continue
			}
			if len(b.discard) > 0 && b.discard[p] {
				continue
			}
			if s.Inner != nil && !s.Inner.feedsOutput() {
				continue // it never emits anything: nothing is lost
			}
			errs = append(errs, fmt.Errorf("htgs: graph %q: the output of %s is connected to nothing, so its values would be lost; connect it, or call graph.Discard on it if dropping them is intended",
				b.Name, p.label()))
		}
	}
	if !fed && len(b.discard) == 0 {
		errs = append(errs, fmt.Errorf("htgs: graph %q: nothing is connected to its Output, so it would return no results; connect a node to it, or call graph.Discard on the node whose values end there if it only works by side effects",
			b.Name))
	}
	return errors.Join(errs...)
}

// owns reports whether s is in b.Specs at its index.
func (b *Blueprint) owns(s *Spec) bool {
	return s.index >= 0 && s.index < len(b.Specs) && b.Specs[s.index] == s
}

// hasEdgeFrom reports whether an edge leaves p.
func (b *Blueprint) hasEdgeFrom(p PortRef) bool {
	for _, e := range b.Edges {
		if e.From == p {
			return true
		}
	}
	return false
}

// feedsOutput reports whether an edge reaches b's output port.
func (b *Blueprint) feedsOutput() bool {
	for _, e := range b.Edges {
		if e.To.Spec == nil {
			return true
		}
	}
	return false
}

// PortRef names a port of a spec, or the blueprint's own input (as a
// producer) or output (as a consumer) when Spec is nil.
type PortRef struct {
	BP    *Blueprint
	Spec  *Spec
	Index int
	Name  string // for drawing: the rule name of a bookkeeper port
}

// MemEdge records that Getter gets memory from the pool Pool (for drawing
// and validation; pools are found at run time through the task's scope).
type MemEdge struct{ Pool, Getter *Spec }

// PortHandle holds a PortRef for the public port and node types, which
// embed it through an unexported alias: go doc hides it, and its unexported
// methods let core (and only core) read and set the reference.
type PortHandle struct{ r PortRef }

// NewPortHandle wraps r.
func NewPortHandle(r PortRef) PortHandle { return PortHandle{r: r} }

func (h PortHandle) portRef() PortRef      { return h.r }
func (h *PortHandle) setPortRef(r PortRef) { h.r = r }
func (h PortHandle) spec() *Spec           { return h.r.Spec }

// Ported is implemented by the types that embed a PortHandle.
type Ported interface{ portRef() PortRef }

// RefOf returns the port reference held by p.
func RefOf(p Ported) PortRef { return p.portRef() }

// MakePort returns a P (a public port type embedding a PortHandle) holding r.
func MakePort[P any, PP interface {
	*P
	setPortRef(PortRef)
}](r PortRef) P {
	var p P
	PP(&p).setPortRef(r)
	return p
}

// Specced is implemented by the public node types (through their
// PortHandle): it gives the spec of the node.
type Specced interface{ spec() *Spec }

// SpecOf returns the spec behind a node reference (nil for graph ports).
func SpecOf(s Specced) *Spec { return s.spec() }

// Edge connects a producer port to a consumer port; Wire does it at run
// time (Connect leaves Wire nil and sets wirer, which costs no allocation).
type Edge struct {
	From, To PortRef
	Type     string // the Go type carried, for drawing
	Wire     func(src, dst any)
	wirer    wirer
}

// wirer connects the runtime ports of an edge.
type wirer interface{ wire(src, dst any) }

// wireOf connects an outlet of T to a sink of T.
type wireOf[T any] struct{}

func (wireOf[T]) wire(src, dst any) { src.(*Outlet[T]).Connect(dst.(Sink[T])) }

// wire connects src to dst.
func (e *Edge) wire(src, dst any) {
	if e.wirer != nil {
		e.wirer.wire(src, dst)
		return
	}
	e.Wire(src, dst)
}

// DiscardRef records that the values of port ref may go nowhere
// (Blueprint.Discard).
func DiscardRef(ref PortRef) {
	if ref.BP == nil {
		panic("htgs: Discard of a zero-value port")
	}
	ref.BP.Discard(ref)
}

// Connect records an edge carrying T from the producer port from to the
// consumer port to.
func Connect[T any](from, to PortRef) {
	if from.BP == nil || to.BP == nil {
		panic("htgs: Connect with a zero-value port")
	}
	if from.BP != to.BP {
		from.BP.Errorf("htgs: cannot connect %s (graph %q) to %s (graph %q): ports belong to different graphs",
			from.label(), from.BP.Name, to.label(), to.BP.Name)
		return
	}
	if from.BP.hasEdge(from, to) {
		from.BP.Errorf("htgs: graph %q: %s is connected to %s twice", from.BP.Name, from.label(), to.label())
		return
	}
	b := from.BP
	if len(b.edgeSlab) == cap(b.edgeSlab) {
		// Edges are allocated a few at a time.
		b.edgeSlab = make([]Edge, 0, min(max(4, 2*cap(b.edgeSlab)), 64))
	}
	b.edgeSlab = append(b.edgeSlab, Edge{From: from, To: to, Type: reflect.TypeFor[T]().String(), wirer: wireOf[T]{}})
	b.Edges = append(b.Edges, &b.edgeSlab[len(b.edgeSlab)-1])
	b.version++
}

// seenMin is the number of specs or edges from which hasName and hasEdge
// use a filter rather than compare with each.
const seenMin = 16

// seenSet is a filter of the hashes of n items (the first n specs, or
// edges, of a blueprint): a clear bit tells an item is new; a set bit that
// it may not be, which is then checked item by item.
type seenSet struct {
	bits []uint64
	n    int
}

// sync makes s hold the hashes of the items 0..count-1 (hash(i)).
func (s *seenSet) sync(count int, hash func(i int) uint64) {
	if s.n > count || len(s.bits)*64 < 32*count {
		// Rebuilt as the items grow: 32 to 128 bits per item, so that few
		// new items are checked item by item.
		size := 64
		for size < 64*count {
			size *= 2
		}
		s.bits = make([]uint64, size/64)
		s.n = 0
	}
	for ; s.n < count; s.n++ {
		s.set(hash(s.n))
	}
}

func (s *seenSet) bit(h uint64) (int, uint64) {
	h &= uint64(len(s.bits)*64 - 1)
	return int(h / 64), 1 << (h % 64)
}

func (s *seenSet) set(h uint64) {
	i, m := s.bit(h)
	s.bits[i] |= m
}

func (s *seenSet) mayHave(h uint64) bool {
	i, m := s.bit(h)
	return s.bits[i]&m != 0
}

// hasName reports whether a spec of b is named name.
func (b *Blueprint) hasName(name string) bool {
	if len(b.Specs) >= seenMin {
		b.nameSeen.sync(len(b.Specs), func(i int) uint64 { return nameHash(b.Specs[i].Name) })
		if !b.nameSeen.mayHave(nameHash(name)) {
			return false
		}
	}
	for _, s := range b.Specs {
		if s.Name == name {
			return true
		}
	}
	return false
}

// nameHash hashes a spec's name (FNV-1a, mixed).
func nameHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return mix(h)
}

// edgeHash hashes the ends of an edge.
func edgeHash(from, to PortRef) uint64 {
	f, t := uint64(0), uint64(0)
	if from.Spec != nil {
		f = uint64(from.Spec.index) + 1
	}
	if to.Spec != nil {
		t = uint64(to.Spec.index) + 1
	}
	return mix(mix(f<<20^uint64(from.Index)) ^ t<<20 ^ uint64(to.Index))
}

// mix is splitmix64's finalizer.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

// hasEdge reports whether an edge from → to exists already.
func (b *Blueprint) hasEdge(from, to PortRef) bool {
	if len(b.Edges) >= seenMin {
		b.edgeSeen.sync(len(b.Edges), func(i int) uint64 { return edgeHash(b.Edges[i].From, b.Edges[i].To) })
		if !b.edgeSeen.mayHave(edgeHash(from, to)) {
			return false
		}
	}
	for _, e := range b.Edges {
		if e.From.Spec == from.Spec && e.To.Spec == to.Spec && e.From == from && e.To == to {
			return true
		}
	}
	return false
}

func (p PortRef) label() string {
	switch {
	case p.Spec == nil:
		return "the graph boundary"
	case p.Name != "":
		return fmt.Sprintf("%s %q rule %q", p.Spec.Kind, p.Spec.Name, p.Name)
	}
	return fmt.Sprintf("%s %q", p.Spec.Kind, p.Spec.Name)
}

// Scope is where a blueprint is instantiated: the run, the name prefix of
// enclosing graphs, and the pipeline clone it belongs to.
type Scope struct {
	Run       *Run
	Parent    *Scope
	Path      []string
	Pipeline  int
	Pipelines int
	Device    device.Device
	// Values holds the objects (memory pools) instantiated in this scope,
	// keyed by their spec; Lookup also searches enclosing scopes.
	Values map[any]any
	// bp is the blueprint being instantiated in this scope.
	bp *Blueprint
	// prefix is Path joined with "/" and ending in "/" ("" at the root).
	prefix string
	// shape is bp's cached shape when this is the root scope of a run
	// whose context carries no profiler labels: what nodes need that
	// depends only on the blueprint is then taken from it.
	shape *shape
}

// Lookup finds the object stored under key in sc or an enclosing scope.
func (sc *Scope) Lookup(key any) (any, bool) {
	for s := sc; s != nil; s = s.Parent {
		if v, ok := s.Values[key]; ok {
			return v, true
		}
	}
	return nil, false
}

// Set stores v under key in this scope.
func (sc *Scope) Set(key, v any) {
	if sc.Values == nil {
		sc.Values = map[any]any{}
	}
	sc.Values[key] = v
}

// ScopeFrom returns the scope of the task copy whose context this is.
func ScopeFrom(ctx context.Context) *Scope {
	if c := CopyFrom(ctx); c != nil {
		return c.Scope
	}
	return nil
}

// FullName returns name prefixed by the scope's path.
func (sc *Scope) FullName(name string) string {
	if len(sc.Path) == 0 {
		return name
	}
	if sc.prefix == "" {
		// A scope made elsewhere than Child.
		s := ""
		for _, p := range sc.Path {
			s += p + "/"
		}
		return s + name
	}
	return sc.prefix + name
}

// Child returns the scope of a nested graph named name.
func (sc *Scope) Child(name string) *Scope {
	c := *sc
	c.Parent = sc
	c.Path = append(append([]string(nil), sc.Path...), name)
	c.prefix = sc.FullName(name) + "/"
	c.Values = nil
	c.bp = nil
	c.shape = nil
	return &c
}

// root reports whether sc is the outermost scope of a run: no enclosing
// graph or pipeline.
func (sc *Scope) root() bool {
	return sc.Parent == nil && len(sc.Path) == 0 && sc.Pipeline == 0 && sc.Pipelines == 1 && sc.Device == nil
}

// Instantiate builds every node of b in sc, wires the edges, and returns the
// instances to launch. input is the *Outlet the blueprint's input feeds,
// output the Sink its output port feeds.
func Instantiate(b *Blueprint, sc *Scope, input, output any) ([]Instance, error) {
	if err := b.Err(); err != nil {
		return nil, err
	}
	// A graph nested in itself, directly or through others, would be
	// instantiated forever.
	for s := sc; s != nil; s = s.Parent {
		if s.bp == b {
			return nil, selfNesting(b, sc)
		}
	}
	sc.bp = b
	sc.shape = nil
	if sc.root() && !sc.Run.parentLabels {
		sc.shape = b.shape()
		sc.Run.shape = sc.shape
	}
	r := sc.Run
	r.reserve(b)
	recordBoundary(sc, b)
	insts := make([]Instance, len(b.Specs))
	for i, s := range b.Specs {
		in, err := s.build(sc)
		if err != nil {
			return nil, err
		}
		insts[i] = in
	}
	instOf := func(s *Spec) Instance {
		if s.index >= 0 && s.index < len(b.Specs) && b.Specs[s.index] == s {
			return insts[s.index]
		}
		for i, t := range b.Specs { // an edge to a spec of another blueprint
			if t == s {
				return insts[i]
			}
		}
		return nil
	}
	for _, e := range b.Edges {
		var src, dst any
		if e.From.Spec == nil {
			src = input
		} else if in := instOf(e.From.Spec); in != nil {
			src = in.Out(e.From.Index)
		}
		if e.To.Spec == nil {
			dst = output
		} else if in := instOf(e.To.Spec); in != nil {
			if e.To.Spec.multiIn {
				dst = in.(inputs).InAt(e.To.Index)
			} else {
				dst = in.In()
			}
		}
		if src == nil || dst == nil {
			return nil, fmt.Errorf("htgs: graph %q: edge %s -> %s has no port", b.Name, e.From.label(), e.To.label())
		}
		e.wire(src, dst)
	}
	recordEdges(b, sc)
	// Checked last, so that what makes the blueprint unbuildable is
	// reported first; not again for a flat blueprint whose run passed.
	if sh := sc.shape; sh == nil || !sh.flat || !sh.checked.Load() {
		if err := b.CheckOutputs(); err != nil {
			return nil, err
		}
	}
	return insts, nil
}

// selfNesting is the error of a blueprint b instantiated in sc, inside
// itself.
func selfNesting(b *Blueprint, sc *Scope) error {
	chain := []string{b.Name}
	for s := sc; s != nil; s = s.Parent {
		if s.bp == nil {
			continue
		}
		chain = append(chain, s.bp.Name)
		if s.bp == b {
			break
		}
	}
	slices.Reverse(chain)
	return fmt.Errorf("htgs: graph %q contains itself: %s", b.Name, strings.Join(chain, " > "))
}
