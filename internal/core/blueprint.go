package core

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

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
	// NoOutput records that nothing is meant to feed the blueprint's
	// output port (see CheckOutputs).
	NoOutput bool
	errs     []error
	names    map[string]bool
	discard  map[PortRef]bool
}

// NewBlueprint returns an empty blueprint.
func NewBlueprint(name string) *Blueprint {
	return &Blueprint{Name: name, names: map[string]bool{}}
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
	case b.names[s.Name]:
		b.Errorf("htgs: graph %q: two nodes are named %q", b.Name, s.Name)
	}
	b.names[s.Name] = true
	s.BP = b
	b.Specs = append(b.Specs, s)
	return s
}

// Spec is one node of a blueprint.
type Spec struct {
	Name    string
	Kind    string // "task", "bookkeeper", "graph", "pipeline", ...
	Threads int
	BP      *Blueprint
	// Build makes the runtime form of the node inside sc.
	Build func(sc *Scope) (Instance, error)
	// Inner is the blueprint of a nested graph or pipeline, for drawing.
	Inner *Blueprint
	// Extra carries kind-specific description for drawing (rule names ...).
	Extra any
	// Ports names the node's output ports: one "" for a task, nested graph
	// or pipeline, the rule names for a bookkeeper, none for a memory pool.
	Ports []string
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
}

// CheckOutputs refuses values that would silently go nowhere: a producer
// port of a node with no edge out (unless declared with Discard, or unless
// it is the output of a nested graph or pipeline that nothing feeds), and a
// blueprint whose output port nothing feeds, unless NoOutput is set or one
// of its ports is declared with Discard (a graph that ends in sinks).
func (b *Blueprint) CheckOutputs() error {
	used := map[PortRef]bool{}
	fed := false
	for _, e := range b.Edges {
		used[e.From] = true
		if e.To.Spec == nil {
			fed = true
		}
	}
	var errs []error
	for _, s := range b.Specs {
		for i, name := range s.Ports {
			p := PortRef{BP: b, Spec: s, Index: i, Name: name}
			if used[p] || b.discard[p] {
				continue
			}
			if s.Inner != nil && !s.Inner.feedsOutput() {
				continue // it never emits anything: nothing is lost
			}
			how := "call graph.Discard on it"
			if s.Kind == "task" {
				how = "add it with the graph.DiscardOutput() option"
			}
			errs = append(errs, fmt.Errorf("htgs: graph %q: the output of %s is connected to nothing, so its values would be lost; connect it, or %s if dropping them is intended",
				b.Name, p.label(), how))
		}
	}
	if !fed && !b.NoOutput && len(b.discard) == 0 {
		errs = append(errs, fmt.Errorf("htgs: graph %q: nothing is connected to its Output, so it would return no results; connect a node to it, or call NoOutput on the graph if it only works by side effects",
			b.Name))
	}
	return errors.Join(errs...)
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

// Specced is implemented by every consumer port reference, and so by every
// node that takes input.
type Specced interface{ spec() *Spec }

// SpecOf returns the spec behind a node reference (nil for graph ports).
func SpecOf(s Specced) *Spec { return s.spec() }

// Edge connects a producer port to a consumer port; Wire does it at run time.
type Edge struct {
	From, To PortRef
	Type     string // the Go type carried, for drawing
	Wire     func(src, dst any)
}

// Out is a typed reference to a producer port.
type Out[T any] struct{ Ref PortRef }

func (o Out[T]) producer() Out[T] { return o }

// In is a typed reference to a consumer port.
type In[T any] struct{ Ref PortRef }

func (i In[T]) consumer() In[T] { return i }
func (i In[T]) spec() *Spec     { return i.Ref.Spec }

// Producer is anything that emits T into a graph: a task, a bookkeeper rule,
// a nested graph or pipeline, or a graph's input. Only this module's types
// implement it.
type Producer[T any] interface{ producer() Out[T] }

// DiscardPort records that p's values may go nowhere (Blueprint.Discard).
func DiscardPort[T any](p Producer[T]) {
	ref := p.producer().Ref
	if ref.BP == nil {
		panic("htgs: Discard of a zero-value port")
	}
	ref.BP.Discard(ref)
}

// Consumer is anything that takes T: a task, a bookkeeper, a nested graph or
// pipeline, or a graph's output.
type Consumer[T any] interface{ consumer() In[T] }

// Connect records an edge from p to c.
func Connect[T any](p Producer[T], c Consumer[T]) {
	from, to := p.producer().Ref, c.consumer().Ref
	if from.BP == nil || to.BP == nil {
		panic("htgs: Connect with a zero-value port")
	}
	if from.BP != to.BP {
		from.BP.Errorf("htgs: cannot connect %s (graph %q) to %s (graph %q): ports belong to different graphs",
			from.label(), from.BP.Name, to.label(), to.BP.Name)
		return
	}
	for _, e := range from.BP.Edges {
		if e.From == from && e.To == to {
			from.BP.Errorf("htgs: graph %q: %s is connected to %s twice", from.BP.Name, from.label(), to.label())
			return
		}
	}
	from.BP.Edges = append(from.BP.Edges, &Edge{From: from, To: to, Type: reflect.TypeFor[T]().String(), Wire: func(src, dst any) {
		src.(*Outlet[T]).Connect(dst.(Sink[T]))
	}})
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
	s := ""
	for _, p := range sc.Path {
		s += p + "/"
	}
	return s + name
}

// Child returns the scope of a nested graph named name.
func (sc *Scope) Child(name string) *Scope {
	c := *sc
	c.Parent = sc
	c.Path = append(append([]string(nil), sc.Path...), name)
	c.Values = nil
	c.bp = nil
	return &c
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
	chain := []string{b.Name}
	for s := sc; s != nil; s = s.Parent {
		if s.bp == nil {
			continue
		}
		chain = append(chain, s.bp.Name)
		if s.bp == b {
			slices.Reverse(chain)
			return nil, fmt.Errorf("htgs: graph %q contains itself: %s", b.Name, strings.Join(chain, " > "))
		}
	}
	sc.bp = b
	recordBoundary(sc, b.Name)
	insts := make(map[*Spec]Instance, len(b.Specs))
	list := make([]Instance, 0, len(b.Specs))
	for _, s := range b.Specs {
		in, err := s.Build(sc)
		if err != nil {
			return nil, err
		}
		insts[s] = in
		list = append(list, in)
	}
	for _, e := range b.Edges {
		var src, dst any
		if e.From.Spec == nil {
			src = input
		} else {
			src = insts[e.From.Spec].Out(e.From.Index)
		}
		if e.To.Spec == nil {
			dst = output
		} else {
			dst = insts[e.To.Spec].In()
		}
		if src == nil || dst == nil {
			return nil, fmt.Errorf("htgs: graph %q: edge %s -> %s has no port", b.Name, e.From.label(), e.To.label())
		}
		e.Wire(src, dst)
	}
	recordEdges(b, sc)
	// Checked last, so that what makes the blueprint unbuildable is
	// reported first.
	if err := b.CheckOutputs(); err != nil {
		return nil, err
	}
	return list, nil
}
