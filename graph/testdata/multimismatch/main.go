// This program must not compile: it connects a task that emits strings to
// the int input of a task of several inputs.
// graph_test.TestMultiInputEdgeDoesNotCompile builds it.
package main

import (
	"context"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

type state struct{}

func (*state) Int(context.Context, int, task.Emitter[int]) error     { return nil }
func (*state) Text(context.Context, string, task.Emitter[int]) error { return nil }
func newState() *state                                               { return &state{} }
func format(context.Context, int, task.Emitter[string]) error        { return nil }

func main() {
	g := graph.New[int, int]("mismatch")
	m := graph.AddMultiTask[*state, int](g, "join", 1, newState)
	ints := graph.AddInput(m, (*state).Int)
	toString := graph.AddFunc(g, "format", 1, format)
	graph.Connect(g.Input(), toString)
	graph.Connect(toString, ints) // string producer, int input: compile error
}
