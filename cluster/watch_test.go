package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// A slot's chore runs while its input runs, at the times begin set, and
// never after end; a watch with nothing to watch parks, and begin wakes it.
func TestWatchSlots(t *testing.T) {
	var w *watch
	var s *slot
	w = newWatch(watchTick(10*time.Millisecond), func() bool { return s.tick() })
	s = &slot{w: w}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()

	var runs atomic.Int32
	s.begin(0, 10*time.Millisecond, func() { runs.Add(1) })
	waitFor(t, "three chores", func() bool { return runs.Load() >= 3 })
	s.end()
	after := runs.Load()
	waitFor(t, "the watch to park", w.parked.Load)
	if n := runs.Load(); n != after {
		t.Fatalf("%d chores after end", n-after)
	}

	// Parked: begin wakes it; a chore due in an hour does not run.
	s.begin(time.Hour, time.Hour, func() { runs.Add(100) })
	if w.parked.Load() {
		t.Fatal("still parked after begin")
	}
	s.end()
	s.begin(0, time.Hour, func() { runs.Add(1) })
	waitFor(t, "the chore after the watch woke", func() bool { return runs.Load() == after+1 })
	s.end()
	if runs.Load() >= 100 {
		t.Fatal("a chore ran before it was due")
	}
}

// watchTick keeps a chore's lateness to a quarter of its period, within
// bounds.
func TestWatchTick(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{10 * time.Millisecond, 2500 * time.Microsecond},
		{40 * time.Millisecond, 10 * time.Millisecond},
		{100 * time.Millisecond, 25 * time.Millisecond},
		{30 * time.Second, 25 * time.Millisecond},
	} {
		if got := watchTick(c.in); got != c.want {
			t.Errorf("watchTick(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// A slot's chore is due a tick before its time, so that the tick that runs
// it comes at most a tick early and never late.
func TestWatchEarly(t *testing.T) {
	w := newWatch(25*time.Millisecond, func() bool { return false })
	if got := w.early(100 * time.Millisecond); got != 75*time.Millisecond {
		t.Errorf("early(100ms) = %v, want 75ms", got)
	}
	if got := w.early(10 * time.Millisecond); got != 0 {
		t.Errorf("early(10ms) = %v, want 0", got)
	}
	s := &slot{w: w}
	before := time.Now()
	s.begin(100*time.Millisecond, time.Second, func() {})
	after := time.Now()
	s.mu.Lock()
	due := s.due
	s.mu.Unlock()
	if due.Before(before.Add(75*time.Millisecond)) || due.After(after.Add(75*time.Millisecond)) {
		t.Errorf("due %v after begin, want 75ms", due.Sub(before))
	}
	s.end()
}
