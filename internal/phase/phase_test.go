package phase

import (
	"context"
	"errors"
	"testing"

	"github.com/gohtgs/htgs/task"
)

type both struct{ got task.Info }

func (b *both) Initialize(_ context.Context, info task.Info) error { b.got = info; return nil }
func (b *both) Shutdown(context.Context) error                     { return errors.New("down") }

// What implements task.Initializer and task.Shutdowner is forwarded to;
// anything else is left alone.
func TestForwardsTheTaskPhases(t *testing.T) {
	var _ task.Initializer = (*both)(nil)
	var _ task.Shutdowner = (*both)(nil)
	ctx := context.Background()
	b := &both{}
	info := task.Info{Copy: 3}
	if err := Initialize(ctx, b, info); err != nil || b.got != info {
		t.Errorf("Initialize: %v, got %+v", err, b.got)
	}
	if err := Shutdown(ctx, b); err == nil || err.Error() != "down" {
		t.Errorf("Shutdown: %v", err)
	}
	if Initialize(ctx, 42, info) != nil || Shutdown(ctx, "none") != nil {
		t.Error("a value without the phases gave an error")
	}
}
