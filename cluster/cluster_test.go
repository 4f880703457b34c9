package cluster

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

func registerV1(w *Worker) error { return register(w, 4, time.Second) }

// runSquares runs the inputs through a graph with one task made by newTask
// and returns the outputs sorted by N.
func runSquares(t *testing.T, newTask func() task.Task[job, answer], threads int, in []job) []answer {
	t.Helper()
	g := graph.New[job, answer]("squares")
	sq := graph.AddTask(g, "square", threads, newTask)
	graph.Connect(g.Input(), sq)
	graph.Connect(sq, g.Output())
	var out []answer
	err := g.Run(context.Background(), slices.Values(in), func(a answer) error {
		out = append(out, a)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b answer) int { return a.N - b.N })
	return out
}

func jobs(n int, sleep time.Duration) []job {
	in := make([]job, n)
	for i := range in {
		in[i] = job{N: i + 20, Sleep: sleep}
	}
	return in
}

func TestRemoteTaskInGraph(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	serveInProcess(t, nc, "w1", registerV1)
	serveInProcess(t, nc, "w2", registerV1)
	c := newClient(t, nc)
	r, err := NewRemote[job, answer](c, "square", Version("v1"))
	if err != nil {
		t.Fatal(err)
	}
	in := jobs(200, 0)
	got := runSquares(t, r.Task, 32, in)
	want := runSquares(t, squareTask, 4, in)
	if !slices.Equal(got, want) {
		t.Fatalf("remote results differ from in-process ones:\n got %v\nwant %v", got, want)
	}
	st := c.Stats()
	if st.Sent != 200 || st.Results != 200 || st.ByWorker["w1"]+st.ByWorker["w2"] != 200 {
		t.Errorf("stats %+v", st)
	}
	ws, err := c.Workers(context.Background())
	if err != nil || len(ws) != 2 || ws[0].Name != "w1" || ws[1].Tasks["square"] != "v1" {
		t.Errorf("workers %+v, %v", ws, err)
	}
}

func TestRemoteManyOutputsAndNone(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	serveInProcess(t, nc, "w", registerV1)
	c := newClient(t, nc, JSON2Gob())
	r, err := NewRemote[int, int](c, "multi", Version("v1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 5} {
		outs, err := r.Call(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) != n || (n > 0 && outs[n-1] != n-1) {
			t.Errorf("multi(%d) = %v", n, outs)
		}
	}
}

// JSON2Gob is a no-op client option (the codec is per task).
func JSON2Gob() Option { return option(func(*config) {}) }

func TestLargePayloadByReference(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	serveInProcess(t, nc, "w", registerV1, InlineLimit(64<<10))
	c := newClient(t, nc, InlineLimit(64<<10))
	r, err := NewRemote[[]byte, []byte](c, "reverse", Version("v1"))
	if err != nil {
		t.Fatal(err)
	}
	in := make([]byte, 3<<20)
	for i := range in {
		in[i] = byte(i * 7)
	}
	outs, err := r.Call(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || len(outs[0]) != len(in) || outs[0][0] != in[len(in)-1] || outs[0][len(in)-1] != in[0] {
		t.Fatalf("reverse of %d bytes: got %d outputs", len(in), len(outs))
	}
	// The payload objects are deleted once read.
	lister, err := c.st.obj.List(context.Background())
	if err == nil && len(lister) > 0 {
		t.Errorf("objects left in the store: %d", len(lister))
	}
}

func TestTaskErrorAndPanic(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	w := serveInProcess(t, nc, "w", registerV1)
	c := newClient(t, nc)
	r, _ := NewRemote[job, answer](c, "square", Version("v1"))
	_, err := r.Call(context.Background(), job{N: -1})
	var re *RemoteError
	if !errors.As(err, &re) || re.Worker != "w" || !strings.Contains(re.Msg, "negative input -1") || errors.Is(err, ErrMismatch) {
		t.Fatalf("error %v", err)
	}
	_, err = r.Call(context.Background(), job{N: 13})
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "panic: unlucky 13") {
		t.Fatalf("panic error %v", err)
	}
	// The worker survives both.
	if outs, err := r.Call(context.Background(), job{N: 3}); err != nil || outs[0].Square != 9 {
		t.Fatalf("after failures: %v, %v", outs, err)
	}
	if st := w.Stats(); st.Executed != 3 {
		t.Errorf("worker stats %+v", st)
	}

	// In a graph, the remote failure stops the run and names the task.
	g := graph.New[job, answer]("g")
	sq := graph.AddTask(g, "remote-square", 2, r.Task)
	graph.Connect(g.Input(), sq)
	graph.Connect(sq, g.Output())
	err = g.Run(context.Background(), slices.Values([]job{{N: 1}, {N: -5}}), func(answer) error { return nil })
	var te *task.Error
	if !errors.As(err, &te) || te.Task != "g/remote-square" && !strings.Contains(te.Task, "remote-square") || !errors.As(err, &re) {
		t.Fatalf("graph error %v", err)
	}
}

// syncBuffer is a log sink for the worker's refusals.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestVersionAndCodecMismatch(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	var log syncBuffer
	w := serveInProcess(t, nc, "w", registerV1, Logger(slog.New(slog.NewTextHandler(&log, nil))))
	c := newClient(t, nc)

	r, _ := NewRemote[job, answer](c, "square", Version("v2"))
	_, err := r.Call(context.Background(), job{N: 2})
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), `version "v2"`) || !strings.Contains(err.Error(), `"v1"`) {
		t.Fatalf("client error %v", err)
	}
	r2, _ := NewRemote[job, answer](c, "square", Version("v1"), WithCodec(JSON()))
	_, err = r2.Call(context.Background(), job{N: 2})
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), `codec "json"`) {
		t.Fatalf("client error %v", err)
	}
	if l := log.String(); !strings.Contains(l, "codec mismatch") || !strings.Contains(l, "client wants task") {
		t.Errorf("worker log lacks the mismatch:\n%s", l)
	}
	if st := w.Stats(); st.Refused != 2 || st.Executed != 0 {
		t.Errorf("worker stats %+v", st)
	}
}

func TestNoWorkerServesTheName(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	serveInProcess(t, nc, "w", registerV1, fastProbe())
	c := newClient(t, nc, fastProbe())
	r, _ := NewRemote[job, answer](c, "cube", Version("v1"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.Call(ctx, job{N: 2})
	if !errors.Is(err, ErrNoWorker) || !strings.Contains(err.Error(), "w:square@v1") {
		t.Fatalf("error %v", err)
	}
}

func TestForeignAndMalformedMessages(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	w := serveInProcess(t, nc, "w", registerV1)
	c := newClient(t, nc)
	js := c.st.js
	ctx := context.Background()

	// A foreign message: no headers at all.
	if _, err := js.Publish(ctx, "htgs.work.square", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	// A client-like message whose payload is not gob, answered with an error.
	m := nats.NewMsg("htgs.work.square")
	m.Header.Set(hProto, protoVersion)
	m.Header.Set(hTask, "square")
	m.Header.Set(hVersion, "v1")
	m.Header.Set(hCodec, "gob")
	m.Header.Set(hReply, c.st.n.result(c.id))
	m.Header.Set(hMsgID, c.id+"-bad")
	m.Data = []byte{0xff, 0x00, 0x13}
	ch := make(chan *result, 1)
	c.mu.Lock()
	c.waiting[c.id+"-bad"] = &waiter{ch: ch}
	c.mu.Unlock()
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	r, _ := NewRemote[job, answer](c, "square", Version("v1"))
	select {
	case res := <-ch:
		_, err := r.decode(ctx, res)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "decode input") {
			t.Fatalf("malformed input answered with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to a malformed input")
	}
	// A reply subject outside the namespace is not answered.
	m = nats.NewMsg("htgs.work.square")
	m.Header.Set(hProto, protoVersion)
	m.Header.Set(hReply, "elsewhere.x")
	m.Header.Set(hMsgID, "x1")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The worker keeps serving.
	if outs, err := r.Call(ctx, job{N: 4}); err != nil || outs[0].Square != 16 {
		t.Fatalf("after foreign messages: %v, %v", outs, err)
	}
	if st := w.Stats(); st.Refused != 3 || st.Executed != 1 {
		t.Errorf("worker stats %+v", st)
	}
	// A forged result for an unknown request is dropped, not delivered.
	res := nats.NewMsg(c.st.n.result(c.id))
	res.Header.Set(hID, "nobody")
	if _, err := js.PublishMsg(ctx, res); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().Duplicates != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := c.Stats(); st.Duplicates != 1 {
		t.Errorf("client stats %+v", st)
	}
}

func TestClientWithoutCredentialsIsRefused(t *testing.T) {
	s := startServer(t)
	if !strings.HasPrefix(s.URL(), "nats://127.0.0.1:") {
		t.Errorf("server URL %s is not on loopback", s.URL())
	}
	for _, opts := range [][]nats.Option{nil, {nats.Token("wrong")}} {
		nc, err := nats.Connect(s.URL(), append(opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Fatal("connected without the token")
		}
		if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("error %v, want an authorization violation", err)
		}
	}
	nc, err := nats.Connect(s.AuthURL())
	if err != nil {
		t.Fatalf("AuthURL: %v", err)
	}
	nc.Close()
}

func TestInProgressKeepsLongTasks(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	reg := func(w *Worker) error {
		return Handle(w, "square", squareTask, Copies(2), AckWait(300*time.Millisecond), Version("v1"))
	}
	serveInProcess(t, nc, "a", reg)
	serveInProcess(t, nc, "b", reg)
	c := newClient(t, nc)
	r, _ := NewRemote[job, answer](c, "square", Version("v1"))
	got := runSquares(t, r.Task, 8, jobs(6, time.Second)) // > 3 ack waits each
	if len(got) != 6 {
		t.Fatalf("%d results", len(got))
	}
	if st := c.Stats(); st.Redelivered != 0 || st.Duplicates != 0 {
		t.Errorf("long tasks were delivered again: %+v", st)
	}
}

// An input whose Execute gives up (the graph failed, a deadline) is
// withdrawn from the work stream: no worker runs it later.
func TestCancelledInputIsWithdrawn(t *testing.T) {
	s := startServer(t)
	c := newClient(t, connect(t, s))
	r, _ := NewRemote[job, answer](c, "square", Version("v1")) // no worker yet
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.Call(ctx, job{N: 3}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Call = %v, want the deadline", err)
	}
	str, err := c.st.js.Stream(context.Background(), c.st.n.workStream())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the input's removal", func() bool {
		info, err := str.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
}

// The client acknowledges its results in batches, a few milliseconds late:
// every result still leaves the result stream soon after it is received,
// and the last batch is acknowledged by Close.
func TestResultsAcknowledgedInBatches(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	serveInProcess(t, nc, "w1", registerV1)
	c, err := NewClient(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, _ := NewRemote[job, answer](c, "square", Version("v1"))
	ctx := context.Background()
	str, err := c.st.js.Stream(ctx, c.st.n.resultStream())
	if err != nil {
		t.Fatal(err)
	}
	stored := func() uint64 {
		info, err := str.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	in := jobs(100, 0)
	if got := runSquares(t, r.Task, 16, in); len(got) != len(in) {
		t.Fatalf("%d results, want %d", len(got), len(in))
	}
	deadline := time.Now().Add(5 * time.Second)
	for stored() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d results still in the stream 5 s after the run", stored())
		}
		time.Sleep(time.Millisecond)
	}
	// A result received just before Close: Close acknowledges it before
	// the consumer goes, so that it does not stay in the stream.
	if _, err := r.Call(ctx, job{N: 3}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for stored() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d results still in the stream after Close", stored())
		}
		time.Sleep(time.Millisecond)
	}
	if st := c.Stats(); st.Results != 101 || st.Duplicates != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A worker asked to stop before its set-up is done stops like one asked
// once serving: Serve returns nil, and registers nothing. (A supervisor
// closing a worker it had just restarted met this as an exit status 1.)
func TestServeStoppedDuringSetUp(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	w := NewWorker(WorkerName("early"))
	if err := Handle(w, "square", squareTask, Version("v1")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Serve(ctx, nc); err != nil {
		t.Fatalf("Serve with its context cancelled before the set-up = %v, want nil", err)
	}
	c := newClient(t, connect(t, s))
	ws, err := c.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 0 {
		t.Errorf("workers registered: %+v", ws)
	}
}
