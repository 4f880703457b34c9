package task_test

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/task"
)

// A PanicError's message is one line; the stack stays in its Stack field.
func TestPanicErrorIsOneLine(t *testing.T) {
	for _, v := range []any{"boom", errors.New("bad\nworse"), fmt.Errorf("wrapped: %w", errors.ErrUnsupported)} {
		pe := &task.PanicError{Value: v, Stack: debug.Stack()}
		msg := pe.Error()
		if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "panic: ") {
			t.Errorf("Error() = %q, want one line starting with \"panic: \"", msg)
		}
		if !strings.Contains(string(pe.Stack), "TestPanicErrorIsOneLine") {
			t.Errorf("the stack is lost")
		}
		wrapped := &task.Error{Task: "t", Phase: "execute", Err: pe}
		if strings.Contains(wrapped.Error(), "\n") {
			t.Errorf("task.Error = %q, want one line", wrapped.Error())
		}
	}
	pe := &task.PanicError{Value: errors.ErrUnsupported}
	if !errors.Is(pe, errors.ErrUnsupported) {
		t.Error("a panic with an error value does not unwrap to it")
	}
}

func TestPlacementString(t *testing.T) {
	for _, c := range []struct {
		p    task.Placement
		want string
	}{
		{task.Placement{}, ""},
		{task.Placement{Worker: "w1"}, "w1"},
		{task.Placement{Worker: "w1", Host: "hostA"}, "w1@hostA"},
		{task.Placement{Host: "hostA"}, ""},
	} {
		if got := c.p.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.p, got, c.want)
		}
	}
}
