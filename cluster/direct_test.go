package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// heardOnce waits until c's only waiting input has been reported running
// by a worker (its started notice).
func heardOnce(t *testing.T, c *Client) {
	t.Helper()
	var sent int64
	waitFor(t, "the worker's started notice", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, w := range c.waiting {
			if sent == 0 {
				sent = w.heard.Load()
			}
			return w.heard.Load() > sent
		}
		return false
	})
}

// A small input goes as a direct request to a worker process; when that
// worker is killed with SIGKILL mid-task, it falls silent, and the client
// sends the input through the work stream after the task's ack wait (1 s):
// another worker runs it, and it counts once, as delivered again.
func TestDirectRequestWorkerKilled(t *testing.T) {
	s := startServer(t)
	c := newClient(t, connect(t, s))
	r, _ := NewRemote[job, answer](c, "square", Version("v1"))
	a := startProc(t, s, "A", 1)
	waitDirect(t, c, "square")

	type result struct {
		outs []answer
		err  error
	}
	res := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		outs, err := r.Call(ctx, job{N: 7, Sleep: 1500 * time.Millisecond})
		res <- result{outs, err}
	}()
	heardOnce(t, c) // A runs it
	a.kill(t)
	startProc(t, s, "B", 1)
	got := <-res
	if got.err != nil || len(got.outs) != 1 || got.outs[0] != (answer{7, 49}) {
		t.Fatalf("Call = %v, %v", got.outs, got.err)
	}
	st := c.Stats()
	if st.Sent != 1 || st.Direct != 1 || st.Fallback != 1 || st.Results != 1 || st.Redelivered != 1 || st.ByWorker["B"] != 1 {
		t.Errorf("stats %+v, want one input sent direct, resent through the stream and answered by B", st)
	}
}

// A worker whose only copy runs a direct request answers a second client's
// direct request "busy": that input goes through the work stream, and the
// work stream's delivery to the busy copy's waiting pull is kept, reported
// in progress (the ack wait is 300 ms, the first input runs 1.5 s, the pull
// waits 3 s), and run next on it, never delivered twice.
func TestDirectRequestBusyWorker(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	serveInProcess(t, nc, "w", func(w *Worker) error {
		return Handle(w, "square", squareTask, Version("v1"), Copies(1), AckWait(300*time.Millisecond))
	}, PullWait(3*time.Second)) // the copy's pull request stays out while it runs the first input
	c1, c2 := newClient(t, nc), newClient(t, nc)
	r1, _ := NewRemote[job, answer](c1, "square", Version("v1"))
	r2, _ := NewRemote[job, answer](c2, "square", Version("v1"))
	waitDirect(t, c1, "square")
	waitDirect(t, c2, "square")
	// A second worker, taking inputs from the stream only: its pull
	// requests (100 ms each) queue behind w's, so the stream delivers the
	// second input to w's copy; were that delivery not reported in
	// progress, it would go to this worker after 300 ms.
	time.Sleep(200 * time.Millisecond)
	serveInProcess(t, nc, "stream-only", func(w *Worker) error {
		return Handle(w, "square", squareTask, Version("v1"), Copies(1), AckWait(300*time.Millisecond), DirectLimit(0))
	})

	first := make(chan error, 1)
	go func() {
		outs, err := r1.Call(context.Background(), job{N: 5, Sleep: 1500 * time.Millisecond})
		if err == nil && (len(outs) != 1 || outs[0] != (answer{5, 25})) {
			t.Errorf("first Call = %v", outs)
		}
		first <- err
	}()
	heardOnce(t, c1)
	t0 := time.Now()
	outs, err := r2.Call(context.Background(), job{N: 3})
	if err != nil || len(outs) != 1 || outs[0] != (answer{3, 9}) {
		t.Fatalf("second Call = %v, %v", outs, err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	st1, st2 := c1.Stats(), c2.Stats()
	if st1.Direct != 1 || st1.Fallback != 0 || st1.Redelivered != 0 {
		t.Errorf("first client: %+v, want its input run as a direct request", st1)
	}
	if st2.Direct != 1 || st2.Fallback != 1 || st2.Redelivered != 0 || st2.Duplicates != 0 || st2.ByWorker["w"] != 1 {
		t.Errorf("second client: %+v, want its input answered busy, then run once through the stream", st2)
	}
	if d := time.Since(t0); d < time.Second {
		t.Errorf("the second input took %v: it did not wait for the busy copy", d)
	}
}

// Direct requests keep the outputs of a graph equal to the in-process
// run's, with some inputs direct and the rest through the work stream.
func TestDirectRequestsInGraph(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	serveInProcess(t, nc, "w1", registerV1)
	serveInProcess(t, nc, "w2", registerV1)
	c := newClient(t, nc)
	r, _ := NewRemote[job, answer](c, "square", Version("v1"))
	waitDirect(t, c, "square")
	in := jobs(200, 0)
	got := runSquares(t, r.Task, 16, in)
	want := runSquares(t, squareTask, 4, in)
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("result %d: %v, want %v", i, got[i], want[i])
		}
	}
	st := c.Stats()
	if st.Direct == 0 || st.Direct == st.Sent || st.Results != 200 || st.Duplicates != 0 {
		t.Errorf("stats %+v: want some inputs direct, some through the stream, each counted once", st)
	}
	t.Logf("stats %+v", st)
}

// DirectLimit(0) on a Remote sends every input through the work stream;
// on a worker, it takes no direct request for the task (the directory
// lists none), nor does a worker for a task with MaxDeliver.
func TestDirectLimitZero(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	serveInProcess(t, nc, "direct", registerV1)
	serveInProcess(t, nc, "stream-only", func(w *Worker) error {
		return errors.Join(
			Handle(w, "square", squareTask, Version("v1"), DirectLimit(0)),
			Handle(w, "multi", multiTask, Version("v1"), MaxDeliver(3)),
		)
	})
	c := newClient(t, nc)
	waitDirect(t, c, "square")
	// Both workers announce themselves; under load the second may come
	// after the first's direct tasks are listed.
	var ws []WorkerInfo
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ws, err = c.Workers(context.Background())
		if err != nil || len(ws) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || len(ws) != 2 {
		t.Fatalf("workers %+v, %v", ws, err)
	}
	for _, w := range ws {
		_, sq := w.Direct["square"]
		_, multi := w.Direct["multi"]
		if w.Name == "direct" && (!sq || !multi || w.Direct["square"] != (DirectTask{Copies: 4, AckWait: time.Second, Proto: directProto})) ||
			w.Name == "stream-only" && (sq || multi) {
			t.Errorf("worker %s lists direct tasks %+v", w.Name, w.Direct)
		}
	}
	r, _ := NewRemote[job, answer](c, "square", Version("v1"), DirectLimit(0))
	for i := range 5 {
		if outs, err := r.Call(context.Background(), job{N: i}); err != nil || len(outs) != 1 || outs[0].Square != i*i {
			t.Fatalf("Call(%d) = %v, %v", i, outs, err)
		}
	}
	if st := c.Stats(); st.Sent != 5 || st.Direct != 0 {
		t.Errorf("stats %+v: want every input through the stream", st)
	}
}

// slots returns how many reply slots c has open and free.
func slots(c *Client) (open, free int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open), len(c.free)
}

// A direct request's reply slot serves the next request once its answer
// has come; a slot whose request was given up on (cancelled) is closed,
// so that its late answer cannot be taken for the next request's.
func TestReplySlots(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	serveInProcess(t, nc, "w", func(w *Worker) error {
		return Handle(w, "square", squareTask, Version("v1"), Copies(2))
	})
	c := newClient(t, nc)
	r, _ := NewRemote[job, answer](c, "square", Version("v1"))
	waitDirect(t, c, "square")
	for i := 20; i < 40; i++ { // the test task panics on 13
		if outs, err := r.Call(context.Background(), job{N: i}); err != nil || len(outs) != 1 || outs[0] != (answer{i, i * i}) {
			t.Fatalf("Call(%d) = %v, %v", i, outs, err)
		}
	}
	if open, free := slots(c); open != 1 || free != 1 {
		t.Fatalf("after 20 calls one at a time: %d reply slots open, %d free; want the same one kept", open, free)
	}
	// Cancelled while its worker runs it: the slot goes, and its answer,
	// which comes later, is no one's.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := r.Call(ctx, job{N: 4, Sleep: 300 * time.Millisecond})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled Call: %v", err)
	}
	if open, free := slots(c); open != 0 || free != 0 {
		t.Fatalf("after a cancelled call: %d reply slots open, %d free; want none", open, free)
	}
	for i := range 10 { // while the cancelled input's answer comes
		if outs, err := r.Call(context.Background(), job{N: 50 + i, Sleep: 40 * time.Millisecond}); err != nil || len(outs) != 1 || outs[0] != (answer{50 + i, (50 + i) * (50 + i)}) {
			t.Fatalf("Call(%d) after a cancelled one = %v, %v", 50+i, outs, err)
		}
	}
	if st := c.Stats(); st.Sent != 31 || st.Direct != 31 || st.Fallback != 0 || st.Results != 30 {
		t.Errorf("stats %+v: want 31 direct requests, 30 answered", st)
	}
}
