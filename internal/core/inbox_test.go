package core

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newTestRun(t *testing.T) *Run {
	t.Helper()
	r := NewRun(context.Background(), "test", nil)
	t.Cleanup(func() { _ = r.Abort(nil) })
	return r
}

// FIFO order survives the ring buffer wrapping around and growing.
func TestInboxFIFOAcrossWrapAndGrowth(t *testing.T) {
	q := NewInbox[int](newTestRun(t), "q", 0, false)
	q.AddProducer()
	next, want := 0, 0
	var buf []int
	for round := range 50 {
		for range round%7 + 5 { // push more than we pop: the ring wraps and grows
			if err := q.Push(next); err != nil {
				t.Fatal(err)
			}
			next++
		}
		var ok bool
		buf, _, ok = q.Pop(buf[:0], 3)
		if !ok {
			t.Fatal("pop failed")
		}
		for _, v := range buf {
			if v != want {
				t.Fatalf("popped %d, want %d", v, want)
			}
			want++
		}
	}
	q.ProducerDone()
	for {
		var ok bool
		buf, _, ok = q.Pop(buf[:0], 64)
		if !ok {
			break
		}
		for _, v := range buf {
			if v != want {
				t.Fatalf("popped %d, want %d", v, want)
			}
			want++
		}
	}
	if want != next || q.MaxLen() < 100 {
		t.Fatalf("drained %d of %d, max length %d", want, next, q.MaxLen())
	}
}

// A bounded inbox blocks its producer while full and releases it on Pop.
func TestInboxBoundedBlocksProducer(t *testing.T) {
	q := NewInbox[int](newTestRun(t), "q", 2, false)
	q.AddProducer()
	_ = q.Push(1)
	_ = q.Push(2)
	pushed := make(chan struct{})
	go func() { _ = q.Push(3); close(pushed) }()
	select {
	case <-pushed:
		t.Fatal("Push on a full bounded inbox did not block")
	case <-time.After(20 * time.Millisecond):
	}
	buf, _, _ := q.Pop(nil, 1)
	<-pushed
	if buf[0] != 1 || q.Len() != 2 {
		t.Fatalf("popped %v, %d left", buf, q.Len())
	}
}

// A consumer blocked in Pop wakes when the last producer is done, and when
// the run stops.
func TestInboxWakeups(t *testing.T) {
	r := newTestRun(t)
	q := NewInbox[int](r, "q", 0, true)
	q.AddProducer()
	q.AddProducer()
	done := make(chan bool)
	go func() { _, blocked, ok := q.Pop(nil, 1); done <- blocked && !ok }()
	time.Sleep(5 * time.Millisecond)
	q.ProducerDone() // one producer left: still open
	select {
	case <-done:
		t.Fatal("Pop returned while a producer was left")
	case <-time.After(10 * time.Millisecond):
	}
	q.ProducerDone()
	if !<-done {
		t.Fatal("Pop did not report a closed inbox")
	}

	q2 := NewInbox[int](r, "q2", 1, true)
	q2.AddProducer()
	_ = q2.Push(0)
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	wg.Add(1)
	go func() { defer wg.Done(); errs <- q2.Push(1) }() // blocks: full
	time.Sleep(5 * time.Millisecond)
	r.Fail(errors.New("stop"))
	wg.Wait()
	if err := <-errs; err == nil || err.Error() != "stop" {
		t.Fatalf("blocked Push after the run failed: %v", err)
	}
}

// Abandon drops what is queued and ignores later pushes.
func TestInboxAbandon(t *testing.T) {
	q := NewInbox[int](newTestRun(t), "q", 0, false)
	q.AddProducer()
	_ = q.Push(1)
	_ = q.Push(2)
	q.Abandon()
	if err := q.Push(3); err != nil {
		t.Fatal(err)
	}
	if q.Len() != 0 || q.Dropped() != 3 {
		t.Fatalf("len %d dropped %d", q.Len(), q.Dropped())
	}
}
