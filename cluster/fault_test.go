package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"

	"github.com/gohtgs/htgs/cluster/natsserver"
)

// runAsync runs the inputs through a graph with the remote square task and
// returns a channel that yields the sorted outputs (or fails the test).
func runAsync(t *testing.T, r *Remote[job, answer], in []job) <-chan []answer {
	t.Helper()
	return runAsyncN(t, r, in, 32)
}

// runAsyncN is runAsync with width inputs in flight.
func runAsyncN(t *testing.T, r *Remote[job, answer], in []job, width int) <-chan []answer {
	t.Helper()
	g := graph.New[job, answer]("squares")
	sq := graph.AddTask(g, "square", width, r.Task)
	graph.Connect(g.Input(), sq)
	graph.Connect(sq, g.Output())
	res := make(chan []answer, 1)
	go func() {
		var out []answer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := g.Run(ctx, slices.Values(in), func(a answer) error {
			out = append(out, a)
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		slices.SortFunc(out, func(a, b answer) int { return a.N - b.N })
		res <- out
	}()
	return res
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A worker process killed with SIGKILL while it holds inputs loses none:
// they are delivered again after the ack wait (1 s) to another worker, and
// every input is counted once.
func TestWorkerKilledMidTask(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	c := newClient(t, nc)
	r, _ := NewRemote[job, answer](c, "square", Version("v1"))
	in := jobs(40, 150*time.Millisecond)
	want := runSquares(t, squareTask, 4, jobs(40, 0))

	a := startProc(t, s, "A", 4)
	done := runAsync(t, r, in)
	waitFor(t, "worker A's first results", func() bool { return c.Stats().ByWorker["A"] >= 4 })
	a.kill(t) // A holds 4 unacknowledged inputs, mid-sleep
	killedAt := c.Stats().Results
	startProc(t, s, "B", 4)
	got := <-done

	if !slices.Equal(got, want) {
		t.Fatalf("after the kill: %d results, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	st := c.Stats()
	if st.Results != 40 || st.ByWorker["A"]+st.ByWorker["B"] != 40 || st.ByWorker["A"] != killedAt {
		t.Errorf("stats %+v (A had %d results when killed)", st, killedAt)
	}
	if st.Redelivered < 1 {
		t.Errorf("no input was delivered again: %+v", st)
	}
	t.Logf("A answered %d before SIGKILL, B %d; %d inputs delivered again", st.ByWorker["A"], st.ByWorker["B"], st.Redelivered)
}

// A worker that dies after its result is stored but before its input is
// acknowledged makes another worker run the input again; the second result
// has the same message ID and is dropped, so the input counts once.
func TestResultBeforeAckCountedOnce(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	c := newClient(t, nc)
	r, _ := NewRemote[job, answer](c, "square", Version("v1"))
	in := jobs(20, 20*time.Millisecond)
	want := runSquares(t, squareTask, 4, jobs(20, 0))

	a := startProc(t, s, "A", 1, envExitAt+"=3")
	done := runAsync(t, r, in)
	err := <-a.done
	a.done <- err
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("worker A ended with %v, want exit status 3", err)
	}
	startProc(t, s, "B", 2)
	got := <-done
	if !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	st := c.Stats()
	if st.Results != 20 || st.ByWorker["A"] != 3 || st.ByWorker["B"] != 17 {
		t.Errorf("stats %+v, want 3 results from A and 17 from B", st)
	}
	t.Logf("stats %+v", st)
}

// Goroutines of the client, the worker and the server are all gone after
// the server shuts down first, under their feet.
func TestNoLeakAfterServerShutdown(t *testing.T) {
	before := goleak.IgnoreCurrent()
	s, err := natsserver.Start()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	w := NewWorker(WorkerName("w"))
	if err := registerV1(w); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- w.Serve(ctx, nc) }()
	c, err := NewClient(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := NewRemote[job, answer](c, "square", Version("v1"))
	if outs, err := r.Call(context.Background(), job{N: 5}); err != nil || outs[0].Square != 25 {
		t.Fatalf("%v %v", outs, err)
	}
	s.Shutdown()
	cancel()
	if err := <-served; err != nil {
		t.Error(err)
	}
	_ = c.Close() // its consumer cannot be deleted any more
	nc.Close()
	goleak.VerifyNone(t, before, natsLeak)
}

// freePort returns a loopback port nobody listens on (now).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// With file storage, a server shut down and restarted mid-run (same store
// directory, port and token) loses nothing: clients and workers reconnect,
// and every input is counted once.
func TestServerRestartWithFileStorage(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	s1, err := natsserver.Start(natsserver.StoreDir(dir), natsserver.Port(port))
	if err != nil {
		t.Fatal(err)
	}
	token := s1.Token()
	reconnect := []nats.Option{nats.ReconnectWait(50 * time.Millisecond), nats.MaxReconnects(-1)}
	nc, err := s1.Connect(reconnect...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	wnc, err := s1.Connect(reconnect...)
	if err != nil {
		t.Fatal(err)
	}
	defer wnc.Close()
	serveInProcess(t, wnc, "w", func(w *Worker) error {
		return Handle(w, "square", squareTask, Copies(4), AckWait(time.Second), Version("v1"))
	}, FileStorage())
	c := newClient(t, nc, FileStorage())
	r, _ := NewRemote[job, answer](c, "square", Version("v1"))
	want := runSquares(t, squareTask, 4, jobs(60, 0))

	done := runAsync(t, r, jobs(60, 40*time.Millisecond))
	waitFor(t, "the first results", func() bool { return c.Stats().Results >= 12 })
	s1.Shutdown()
	if n := c.Stats().Results; n >= 60 {
		t.Fatalf("the run ended (%d results) before the restart", n)
	}
	time.Sleep(300 * time.Millisecond)
	s2, err := natsserver.Start(natsserver.StoreDir(dir), natsserver.Port(port), natsserver.Token(token))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s2.Shutdown)
	got := <-done
	if !slices.Equal(got, want) {
		t.Fatalf("after the restart: %d results\n got %v\nwant %v", len(got), got, want)
	}
	t.Logf("stats %+v", c.Stats())
}

// With three servers in a JetStream cluster and replicated (R3) streams,
// shutting down the work stream's leader mid-run, with more than 60
// inputs in flight, loses none: the 120 results are the in-process run's.
// Run 50 times in a row under CPU load with nats-server v2.15.3 and
// nats.go v1.55.0, it passed 50 times (docs/cluster.md).
func TestClusterLosesOneServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server cluster")
	}
	const n = 3
	var ports, cports [n]int
	for i := range n {
		ports[i], cports[i] = freePort(t), freePort(t)
	}
	var servers [n]*natsserver.Server
	token := ""
	for i := range n {
		var routes []string
		for j := range n {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", cports[j]))
			}
		}
		opts := []natsserver.Option{natsserver.Name(fmt.Sprintf("n%d", i)), natsserver.Port(ports[i]), natsserver.Cluster("htgs-test", cports[i], routes...)}
		if token != "" {
			opts = append(opts, natsserver.Token(token))
		}
		s, err := natsserver.Start(opts...)
		if err != nil {
			t.Fatal(err)
		}
		token = s.Token()
		servers[i] = s
		t.Cleanup(s.Shutdown)
	}
	var urls []string
	for i := range n {
		urls = append(urls, servers[i].URL())
	}
	dial := func() *nats.Conn {
		nc, err := nats.Connect(strings.Join(urls, ","), nats.Token(token), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	nc, wnc := dial(), dial()
	// Wait for the cluster to elect its JetStream meta leader.
	var c *Client
	waitFor(t, "a JetStream meta leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		c, err = NewClient(ctx, nc, Replicas(3), FileStorage())
		return err == nil
	})
	t.Cleanup(func() { c.Close() })
	// The worker answers 12 inputs, then holds the next ones until the
	// server is down, so that the shutdown finds 72 inputs in flight
	// however slowly this machine gets there (with the server shut down
	// after a look at the results, a loaded machine let the run get to
	// 72 results and 48 inputs in flight first).
	release := make(chan struct{})
	var closeRelease sync.Once
	releaseAll := func() { closeRelease.Do(func() { close(release) }) }
	t.Cleanup(releaseAll)
	var answered atomic.Int64
	held := func() task.Task[job, answer] {
		inner := squareTask()
		return task.Func[job, answer](func(ctx context.Context, j job, out task.Emitter[answer]) error {
			if answered.Add(1) > 12 {
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return inner.Execute(ctx, j, out)
		})
	}
	serveInProcess(t, wnc, "w", func(w *Worker) error {
		return Handle(w, "square", held, Copies(8), AckWait(2*time.Second), Version("v1"))
	}, Replicas(3), FileStorage())
	r, _ := NewRemote[job, answer](c, "square", Version("v1"))
	want := runSquares(t, squareTask, 4, jobs(120, 0))

	// 72 inputs in flight; the leader goes down after the first 12
	// results, with 72 inputs sent and not answered.
	done := runAsyncN(t, r, jobs(120, 100*time.Millisecond), 72)
	waitFor(t, "the first results", func() bool { return c.Stats().Results >= 12 })
	// Shut down the leader of the work stream, the hardest member to lose.
	victim := 0
	if str, err := c.st.js.Stream(context.Background(), c.st.n.workStream()); err == nil {
		if ci := str.CachedInfo().Cluster; ci != nil {
			fmt.Sscanf(ci.Leader, "n%d", &victim)
		}
	}
	at := c.Stats()
	servers[victim].Shutdown()
	releaseAll()
	if at.Sent-at.Results <= 60 {
		t.Fatalf("%d inputs in flight when the server went down (%d results), want more than 60", at.Sent-at.Results, at.Results)
	}
	t.Logf("shut down n%d, the work stream's leader, after %d results, %d inputs in flight", victim, at.Results, at.Sent-at.Results)
	var got []answer
	select {
	case got = <-done:
	case <-time.After(15 * time.Second):
		// Stalled: say where the missing inputs are before the run's
		// deadline withdraws them.
		t.Errorf("no end 15 s after the shutdown (%d results)\n%s", c.Stats().Results, streamState(c))
		got = <-done
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after losing a server: %d results\n got %v\nwant %v", len(got), got, want)
	}
	t.Logf("stats %+v", c.Stats())
}

// An input that kills every worker that takes it is given up after
// MaxDeliver deliveries: its Execute fails with ErrPoison, the input is
// removed, and the workers go on with the next inputs.
func TestPoisonInputGivenUp(t *testing.T) {
	s := startServer(t)
	c := newClient(t, connect(t, s))
	r, _ := NewRemote[int, int](c, "poison")
	res := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := r.Call(ctx, 666)
		res <- err
	}()
	for _, name := range []string{"A", "B"} { // each dies on the poison
		p := startProc(t, s, name, 1)
		err := <-p.done
		p.done <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 4 {
			t.Fatalf("worker %s ended with %v, want exit status 4", name, err)
		}
	}
	startProc(t, s, "C", 1) // its pull makes the server give up the input
	select {
	case err := <-res:
		if !errors.Is(err, ErrPoison) || !strings.Contains(err.Error(), "delivered 2 times") {
			t.Fatalf("poison input: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the poison input was not given up")
	}
	if outs, err := r.Call(context.Background(), 5); err != nil || len(outs) != 1 || outs[0] != 5 {
		t.Fatalf("after the poison: %v, %v", outs, err)
	}
}

// streamState describes the work and result streams and their consumers,
// and the inputs still in the work stream, for a stalled test.
func streamState(c *Client) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b strings.Builder
	c.mu.Lock()
	for id := range c.waiting {
		fmt.Fprintf(&b, "client waits for %s\n", id)
	}
	c.mu.Unlock()
	for _, name := range []string{c.st.n.workStream(), c.st.n.resultStream()} {
		str, err := c.st.js.Stream(ctx, name)
		if err != nil {
			fmt.Fprintf(&b, "stream %s: %v\n", name, err)
			continue
		}
		si := str.CachedInfo()
		fmt.Fprintf(&b, "stream %s: %d messages, seq %d..%d, leader %v\n", name, si.State.Msgs, si.State.FirstSeq, si.State.LastSeq, si.Cluster)
		for cons := range str.ListConsumers(ctx).Info() {
			fmt.Fprintf(&b, "  consumer %s: pending %d, ack pending %d, redelivered %d, waiting %d, delivered %+v, ack floor %+v, leader %v\n",
				cons.Name, cons.NumPending, cons.NumAckPending, cons.NumRedelivered, cons.NumWaiting, cons.Delivered, cons.AckFloor, cons.Cluster)
		}
		if name == c.st.n.workStream() {
			for seq := si.State.FirstSeq; seq <= si.State.LastSeq && seq > 0; seq++ {
				if m, err := str.GetMsg(ctx, seq); err == nil {
					fmt.Fprintf(&b, "  input seq %d: %s %s\n", seq, m.Subject, m.Header.Get(hMsgID))
				}
			}
		}
	}
	return b.String()
}
