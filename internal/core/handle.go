package core

import "fmt"

// Handle gives a public graph type access to its blueprint. Public types
// embed it, which lets them satisfy Owner without exposing the blueprint.
type Handle struct{ bp *Blueprint }

// NewHandle wraps bp.
func NewHandle(bp *Blueprint) Handle { return Handle{bp: bp} }

func (h Handle) blueprint() *Blueprint { return h.bp }

// Owner is implemented by types that embed a Handle.
type Owner interface{ blueprint() *Blueprint }

// BlueprintOf returns the blueprint of o.
func BlueprintOf(o Owner) *Blueprint { return o.blueprint() }

// Abort releases a run that was never started (a failed Start): its
// context is cancelled and the OnFinish hooks run with err (memory pools
// free what they allocated). It returns err joined with the hooks' errors.
func (r *Run) Abort(err error) error {
	r.cancel(nil)
	return r.finish(err)
}

// GraphSpec returns the specification of a nested graph.
func GraphSpec[In, Out any](name string, inner *Blueprint) *Spec {
	s := &Spec{Name: name, Kind: KindGraph, Copies: 1, Inner: inner, Ports: []string{""}}
	s.Build = func(sc *Scope) (Instance, error) {
		sub := sc.Child(name)
		full := sc.FullName(name)
		in := NewOutletNamed[In](sc.Run, "input of graph ", full, true)
		out := NewOutletNamed[Out](sc.Run, "output of graph ", full, true)
		insts, err := Instantiate(inner, sub, in, out)
		if err != nil {
			return nil, fmt.Errorf("graph %q: %w", full, err)
		}
		return &Group{InPort: in, OutPorts: []any{out}, Members: insts}, nil
	}
	return s
}

// Group is an instance made of other instances: a nested graph, a pipeline.
type Group struct {
	InPort   any
	OutPorts []any
	Members  []Instance
}

// In returns the group's input sink.
func (g *Group) In() any { return g.InPort }

// Out returns output port i.
func (g *Group) Out(i int) any {
	if i < 0 || i >= len(g.OutPorts) {
		return nil
	}
	return g.OutPorts[i]
}

// Launch starts every member.
func (g *Group) Launch(r *Run) {
	for _, m := range g.Members {
		m.Launch(r)
	}
}
