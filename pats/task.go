package pats

import (
	"context"
	"errors"
	"fmt"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// Task is a graph task for hierarchical dataflow: each input is a coarse
// stage instance (a tile, say) that Expand turns into a flow of fine-grained
// operations; the flow runs on a Manager shared by every copy of the task
// (and by other tasks), and once it completes Result makes the task's
// output.
//
// Execute waits for its flow, and for the flows spawned from it (see
// Flow.Spawn), so a node with N copies of the task keeps up to N stage
// instances in progress: N is the window of stage instances the manager
// chooses operations from. A Task keeps no state of its own beyond its
// fields.
type Task[In, Out any] struct {
	// Manager runs the flows; it must outlive the graph run.
	Manager *Manager
	// Expand builds the flow of one input.
	Expand func(ctx context.Context, in In) (*Flow, error)
	// Result returns the output for an input whose flow has completed.
	Result func(ctx context.Context, in In) (Out, error)
}

// Execute expands in, runs its flow on the manager and emits the result.
func (t *Task[In, Out]) Execute(ctx context.Context, in In, out task.Emitter[Out]) error {
	if t.Manager == nil || t.Expand == nil || t.Result == nil {
		return errors.New("pats: Task needs a Manager, Expand and Result")
	}
	f, err := t.Expand(ctx, in)
	if err != nil {
		return fmt.Errorf("pats: expand: %w", err)
	}
	h, err := t.Manager.Submit(ctx, f)
	if err != nil {
		return err
	}
	if err := h.Wait(ctx); err != nil {
		h.Cancel() // the graph is stopping: drop the rest of the flow
		return err
	}
	o, err := t.Result(ctx, in)
	if err != nil {
		return fmt.Errorf("pats: result of flow %q: %w", f.Name(), err)
	}
	return out.Emit(o)
}

// AddTask adds t to graph b as a node with window copies: up to window of
// its inputs are in progress on the manager at a time. Each copy is a
// shallow copy of t: all share the manager.
func AddTask[In, Out any](b graph.Builder, name string, window int, t *Task[In, Out], opts ...graph.Option) *graph.Node[In, Out] {
	return graph.AddTask(b, name, window, func() task.Task[In, Out] {
		c := *t
		return &c
	}, opts...)
}
