// Package phase forwards a task's optional phases to a value it wraps: a
// kernel, a GPU worker, any per-copy helper that may or may not implement
// task.Initializer and task.Shutdowner.
package phase

import (
	"context"

	"github.com/gohtgs/htgs/task"
)

// Initialize calls v.Initialize(ctx, info) if v is a task.Initializer.
func Initialize(ctx context.Context, v any, info task.Info) error {
	if in, ok := v.(task.Initializer); ok {
		return in.Initialize(ctx, info)
	}
	return nil
}

// Shutdown calls v.Shutdown(ctx) if v is a task.Shutdowner.
func Shutdown(ctx context.Context, v any) error {
	if sd, ok := v.(task.Shutdowner); ok {
		return sd.Shutdown(ctx)
	}
	return nil
}
