// Package phase forwards a task's optional phases to a value it wraps: a
// kernel, a GPU worker, any per-copy helper that may or may not implement
// task.Initializer and task.Shutdowner.
//
// It matches those interfaces by their methods rather than by name, so
// that it needs no import of package task: internal/ holds the framework's
// runtime and helpers below the public packages, and none of them but the
// runtime imports one.
package phase

import "context"

// Initialize calls v.Initialize(ctx, info) if v has that method, as a
// task.Initializer does (Info is then task.Info).
func Initialize[Info any](ctx context.Context, v any, info Info) error {
	if in, ok := v.(interface {
		Initialize(context.Context, Info) error
	}); ok {
		return in.Initialize(ctx, info)
	}
	return nil
}

// Shutdown calls v.Shutdown(ctx) if v has that method, as a
// task.Shutdowner does.
func Shutdown(ctx context.Context, v any) error {
	if sd, ok := v.(interface{ Shutdown(context.Context) error }); ok {
		return sd.Shutdown(ctx)
	}
	return nil
}
