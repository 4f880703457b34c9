package graph

import (
	"fmt"
	"strings"
	"time"
)

// WithAbandonAfter lets Wait return d after the run was cancelled (or
// failed) even though task copies are still executing: copies whose
// Execute does not honour its context, blocked in a read that ignores ctx
// for instance. Wait then returns an [*AbandonedError] naming them, and
// their goroutines are left running: they keep whatever they hold (memory
// pools are freed only when the last of them returns) and end on their
// own, if ever. Use it where returning matters more than a clean end (a
// service's shutdown, a command that must exit); fix the task otherwise.
//
// Without it, or with d <= 0, Wait returns only once every copy has
// returned, as errgroup's Wait does, and the stall report (see
// [WithStallReport]) names the copies that keep it waiting.
func WithAbandonAfter(d time.Duration) StartOption {
	return startOption(func(c *startConfig) { c.abandonAfter = d })
}

// AbandonedError is the error of a Wait that gave up on task copies still
// executing [AbandonedError.After] after the run was cancelled (see
// [WithAbandonAfter]). It wraps the run's error: errors.Is(err,
// context.DeadlineExceeded) holds for a run that ran out of time.
type AbandonedError struct {
	Graph  string
	After  time.Duration // how long Wait waited after the cancellation
	Copies []StuckCopy   // the copies still executing then
	Err    error         // the run's error (the cancellation's cause)
}

// StuckCopy is a task copy that went on executing after its run was
// cancelled.
type StuckCopy struct {
	Task      string        // the task's full name
	Copy      int           // the copy
	Executing time.Duration // how long it had been executing its batch
}

func (e *AbandonedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "htgs: graph %q: ", e.Graph)
	switch len(e.Copies) {
	case 0:
		fmt.Fprintf(&b, "goroutines still running %v after the run was cancelled", e.After)
	case 1:
		fmt.Fprintf(&b, "1 task copy still executing %v after the run was cancelled", e.After)
	default:
		fmt.Fprintf(&b, "%d task copies still executing %v after the run was cancelled", len(e.Copies), e.After)
	}
	for i, c := range e.Copies {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "task %q copy %d, executing for %v", c.Task, c.Copy, round(c.Executing))
	}
	if len(e.Copies) > 0 {
		b.WriteString(")")
	}
	b.WriteString(" do not honour their context; their goroutines were left running")
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *AbandonedError) Unwrap() error { return e.Err }

// abandoned makes the error of a Wait that gave up on the run's copies.
func (e *Execution) abandoned(err error) error {
	return &AbandonedError{Graph: e.run.Name, After: e.run.AbandonAfter, Copies: e.Stats().stuck(), Err: err}
}
