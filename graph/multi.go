package graph

import (
	"context"

	"github.com/gohtgs/htgs/internal/core"
	"github.com/gohtgs/htgs/task"
)

// MultiTask is a task with several inputs of different types, each
// executed by a function of its own (Hedgehog's tasks of several input
// types). Its copies are states of type S made by a factory, as a task's
// copies are; every input's function runs on the state of the copy that
// takes the value, so the inputs share the copy's state (what a join of
// several types needs). Add the inputs with [AddInput]; each is a
// Consumer of its own type, so the compiler checks every edge.
//
// The inputs share one queue: a value sent to any input is queued, in
// order of arrival, with the others, and taken by the copies like a task's
// (no goroutine or queue per input). Values that are not pointers are
// boxed in an interface on the way, which allocates for most of them.
//
// S may implement [task.Initializer], [task.Terminator] and
// [task.Shutdowner], which then work as for a task.
type MultiTask[S, Out any] struct {
	portHandle
	name string
	spec *core.MultiSpec[S, Out]
}

// AddMultiTask adds a task named name with several inputs, run by copies
// copies whose states are made by calls of newState. Give it its inputs
// with [AddInput] before the graph starts; a task without inputs is
// refused by Start. The options are those of [AddTask], but for
// [Priority], which a task of several input types refuses.
func AddMultiTask[S, Out any](b Builder, name string, copies int, newState func() S, opts ...Option) *MultiTask[S, Out] {
	o := core.TaskOptions{Copies: copies}
	for _, f := range opts {
		f.applyNode(&o)
	}
	bp := core.BlueprintOf(b)
	ms := core.NewMultiSpec[S, Out](name, o, newState)
	bp.Add(ms.Spec)
	m := &MultiTask[S, Out]{portHandle: core.NewPortHandle(core.PortRef{BP: bp, Spec: ms.Spec}), name: name, spec: ms}
	return m
}

// Name returns the task's name.
func (m *MultiTask[S, Out]) Name() string { return m.name }

// OutPort returns the port of the task's output, shared by all its inputs'
// functions.
func (m *MultiTask[S, Out]) OutPort() Port[Out] { return port[Out](core.RefOf(m)) }

// multiInput is one input of a MultiTask, as a Consumer.
type multiInput[In any] struct{ p Port[In] }

func (c multiInput[In]) InPort() Port[In] { return c.p }

// AddInput adds to m an input of type In whose values exec executes on the
// state of the copy that takes them, and returns it as the Consumer to
// connect producers of In to. A method expression fits exec:
//
//	type joiner struct{ ... }
//	func (j *joiner) Image(ctx context.Context, im *Image, out task.Emitter[*Pair]) error
//	func (j *joiner) Mask(ctx context.Context, mk *Mask, out task.Emitter[*Pair]) error
//
//	join := graph.AddMultiTask[*joiner, *Pair](g, "join", 1, newJoiner)
//	graph.Connect(images, graph.AddInput(join, (*joiner).Image))
//	graph.Connect(masks, graph.AddInput(join, (*joiner).Mask))
//
// An error returned by exec, or a panic, stops the graph as a task's does,
// naming the task.
func AddInput[S, In, Out any](m *MultiTask[S, Out], exec func(s S, ctx context.Context, in In, out task.Emitter[Out]) error) Consumer[In] {
	ref := core.RefOf(m)
	if exec == nil {
		ref.BP.Errorf("htgs: task %q: nil function for an input of type %T", m.name, *new(In))
	}
	ref.Index = core.AddMultiInput(m.spec, exec)
	return multiInput[In]{port[In](ref)}
}
