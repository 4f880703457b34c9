// This program must not compile: it connects a task that emits strings to a
// task that takes ints. graph_test.TestMismatchedEdgeDoesNotCompile builds it.
package main

import (
	"context"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

func main() {
	g := graph.New[int, int]("mismatch")
	toString := graph.AddFunc(g, "format", 1, func(context.Context, int, task.Emitter[string]) error { return nil })
	double := graph.AddFunc(g, "double", 1, func(context.Context, int, task.Emitter[int]) error { return nil })
	graph.Connect(g.Input(), toString)
	graph.Connect(toString, double) // string producer, int consumer: compile error
}
