// Package bookkeeper provides the HTGS bookkeeper: a single-threaded task
// that keeps the state of a computation and decides, through rules, what to
// produce when.
//
// Every input of a bookkeeper is handed to each of its rules in turn, on one
// goroutine, so rules need no locks for their own state. Each rule has its
// own output type and its own consumers:
//
//	bk := bookkeeper.New[*Tile](g, "pairs")
//	west := bookkeeper.AddRule(bk, "west", func() bookkeeper.Rule[*Tile, Pair] { return &westRule{} })
//	graph.Connect(fft, bk)
//	graph.Connect(west, pcm)
//
// Rules Apply where tasks Execute, on purpose: a task computes, and its N
// copies share a queue, so any copy may see any input; a rule decides, and
// sees every input of its bookkeeper, in order, on one goroutine, next to
// the other rules. The method name says which guarantee the code may rely
// on (a rule's state needs no lock; a task's shared state does).
//
// A rule's state belongs to the bookkeeper instance that made it: every run,
// and every execution-pipeline clone, calls the rule factory again. To share
// state between clones, make the factory return rules that point to a shared
// (and properly synchronized) value; that choice is then explicit.
//
// Every rule of a bookkeeper receives the same input value, one rule after
// the other; the consumers of an earlier rule may already be working on what
// it emitted while a later rule still reads the input. So a value (or what
// it points to) must not be modified once it has been emitted: emit a new
// value instead.
//
// The commonest rule, a keyed join that emits once all the inputs of a key
// have arrived and then frees the key, is built in: see [Join].
//
// A rule that implements task.Terminator stops receiving inputs once
// CanTerminate returns true, and its consumers then see it as finished; the
// bookkeeper stops when all its rules have. Rules may also implement
// task.Initializer and task.Shutdowner.
package bookkeeper

import (
	"context"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/core"
	"github.com/gohtgs/htgs/task"
)

// Rule decides what to emit for each input of its bookkeeper. Apply may emit
// any number of values, now or (from state kept in the rule) on a later
// input.
type Rule[In, Out any] interface {
	Apply(ctx context.Context, in In, out task.Emitter[Out]) error
}

// RuleFunc adapts a function to a Rule (for rules whose state lives in the
// closure: one closure per factory call).
type RuleFunc[In, Out any] func(ctx context.Context, in In, out task.Emitter[Out]) error

// Apply calls f.
func (f RuleFunc[In, Out]) Apply(ctx context.Context, in In, out task.Emitter[Out]) error {
	return f(ctx, in, out)
}

type handle = core.PortHandle

// Bookkeeper is a bookkeeper node in a graph. Connect producers of In to it,
// and connect each rule (returned by AddRule) to its consumers.
type Bookkeeper[In any] struct {
	handle
	spec *core.BookkeeperSpec[In]
	bp   *core.Blueprint
}

// New adds a bookkeeper named name to b. Options such as graph.QueueCap are
// not supported: a bookkeeper's queue is unbounded.
func New[In any](b graph.Builder, name string) *Bookkeeper[In] {
	bp := core.BlueprintOf(b)
	spec := core.NewBookkeeperSpec[In](name, 0)
	bp.Add(spec.Spec)
	return &Bookkeeper[In]{handle: core.NewPortHandle(core.PortRef{BP: bp, Spec: spec.Spec}), spec: spec, bp: bp}
}

// Name returns the bookkeeper's name.
func (bk *Bookkeeper[In]) Name() string { return bk.spec.Spec.Name }

// InPort returns the port of the bookkeeper's input.
func (bk *Bookkeeper[In]) InPort() graph.Port[In] {
	return core.MakePort[graph.Port[In]](core.RefOf(bk))
}

// RuleOutput is the producer side of one rule: connect it to the rule's
// consumers (or to the graph's output).
type RuleOutput[Out any] struct {
	port graph.Port[Out]
	name string
}

// Name returns the rule's name.
func (r *RuleOutput[Out]) Name() string { return r.name }

// OutPort returns the port of the values the rule emits.
func (r *RuleOutput[Out]) OutPort() graph.Port[Out] { return r.port }

// AddRule adds a rule named name to bk; newRule is called once per
// bookkeeper instance. Connect the rule to its consumers: Start refuses a
// rule connected to nothing, unless it is declared with graph.Discard.
func AddRule[In, Out any](bk *Bookkeeper[In], name string, newRule func() Rule[In, Out]) *RuleOutput[Out] {
	if newRule == nil {
		bk.bp.Errorf("htgs: bookkeeper %q: rule %q has a nil factory", bk.spec.Spec.Name, name)
		newRule = func() Rule[In, Out] { return nil }
	}
	for _, n := range bk.spec.RuleNames() {
		if n == name {
			bk.bp.Errorf("htgs: bookkeeper %q: two rules are named %q", bk.spec.Spec.Name, name)
		}
	}
	idx := core.AddRule(bk.spec, name, newRule)
	return &RuleOutput[Out]{
		port: core.MakePort[graph.Port[Out]](core.PortRef{BP: bk.bp, Spec: bk.spec.Spec, Index: idx, Name: name}),
		name: name,
	}
}
