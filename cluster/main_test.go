package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/task"

	"github.com/gohtgs/htgs/cluster/natsserver"
)

// The test binary doubles as a worker process: with envWorker set, TestMain
// runs a worker instead of the tests (the re-exec pattern).
const (
	envWorker  = "HTGS_CLUSTER_TEST_WORKER"  // the worker's name
	envThreads = "HTGS_CLUSTER_TEST_THREADS" // copies per task
	envExitAt  = "HTGS_CLUSTER_TEST_EXIT_AT" // exit after storing this many results, before acking the last
	envBeat    = "HTGS_CLUSTER_TEST_BEAT"    // the worker's heartbeat, a time.Duration (default 2s)
	// envProfile, if set, makes a worker process write its CPU profile to
	// $envProfile.cpu and its heap (allocation) profile to $envProfile.mem
	// when it stops: profiling the worker's side of the benchmarks.
	envProfile = "HTGS_CLUSTER_TEST_PROFILE"
	floorEcho  = "floor.echo" // a worker process answers requests here with their data
)

func TestMain(m *testing.M) {
	if name := os.Getenv(envWorker); name != "" {
		os.Exit(workerMain(name))
	}
	goleak.VerifyTestMain(m, natsLeak)
}

// natsLeak ignores a goroutine that nats.go v1.48.0 (and v1.49.0; v1.55.0
// has the same code) leaks now and then from an object store Put: the Put's private JetStream context
// starts resetPendingAcksOnReconnect, and if the Put is over before that
// goroutine first takes its lock, it reads the status channel the clean-up
// has just set to nil and blocks on it forever. It is not ours to fix here;
// every other goroutine is checked.
var natsLeak = goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect")

// job is the input of the test tasks.
type job struct {
	N     int
	Sleep time.Duration
}

// answer is the output of the "square" task.
type answer struct {
	N, Square int
}

func squareTask() task.Task[job, answer] {
	return task.Func[job, answer](func(ctx context.Context, j job, out task.Emitter[answer]) error {
		if j.Sleep > 0 {
			select {
			case <-time.After(j.Sleep):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		switch {
		case j.N < 0:
			return fmt.Errorf("negative input %d", j.N)
		case j.N == 13:
			panic("unlucky 13")
		}
		return out.Emit(answer{j.N, j.N * j.N})
	})
}

// multiTask emits N outputs, 0..N-1.
func multiTask() task.Task[int, int] {
	return task.Func[int, int](func(_ context.Context, n int, out task.Emitter[int]) error {
		for i := range n {
			if err := out.Emit(i); err != nil {
				return err
			}
		}
		return nil
	})
}

// reverseTask reverses a byte slice (large payloads).
func reverseTask() task.Task[[]byte, []byte] {
	return task.Map(func(_ context.Context, b []byte) ([]byte, error) {
		r := make([]byte, len(b))
		for i, v := range b {
			r[len(b)-1-i] = v
		}
		return r, nil
	})
}

// register adds the test tasks to w.
func register(w *Worker, threads int, ackWait time.Duration) error {
	opts := []TaskOption{Copies(threads), AckWait(ackWait), Version("v1")}
	return errors.Join(
		Handle(w, "square", squareTask, opts...),
		Handle(w, "multi", multiTask, opts...),
		Handle(w, "reverse", reverseTask, opts...),
	)
}

// workerMain is a worker process: it joins the server named by EnvURL and
// serves the test tasks until SIGTERM (or, started by a Supervisor, until
// its standard input closes).
func workerMain(name string) int {
	nc, err := nats.Connect(os.Getenv(EnvURL))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	defer nc.Close()
	if p := os.Getenv(envProfile); p != "" {
		stop, err := profileTo(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 2
		}
		defer stop()
	}
	threads, _ := strconv.Atoi(os.Getenv(envThreads))
	opts := []Option{WorkerName(name), Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))}
	if beat, err := time.ParseDuration(os.Getenv(envBeat)); err == nil {
		opts = append(opts, option(func(c *config) { c.heartbeat = beat }))
	}
	w := NewWorker(opts...)
	if at, _ := strconv.Atoi(os.Getenv(envExitAt)); at > 0 {
		var mu sync.Mutex
		answered := 0
		w.afterAnswer = func() {
			mu.Lock()
			defer mu.Unlock()
			if answered++; answered == at {
				os.Exit(3) // dies with a stored but unacknowledged result
			}
		}
	}
	poison := func() task.Task[int, int] {
		return task.Map(func(_ context.Context, n int) (int, error) {
			if n == 666 {
				os.Exit(4) // kills every worker that takes it
			}
			return n, nil
		})
	}
	if err := errors.Join(register(w, max(threads, 1), time.Second),
		Handle(w, "poison", poison, AckWait(time.Second), MaxDeliver(2))); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	// An echo for BenchmarkBrokerFloor: the floor of a round trip to
	// another process.
	echo, err := nc.Subscribe(floorEcho, func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	defer echo.Unsubscribe()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := Supervised(ctx) // a Supervisor's worker stops when its stdin closes
	defer cancel()
	if err := w.Serve(ctx, nc); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

// startServer starts an embedded server shut down at the end of the test.
func startServer(t testing.TB, opts ...natsserver.Option) *natsserver.Server {
	t.Helper()
	s, err := natsserver.Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func connect(t testing.TB, s *natsserver.Server) *nats.Conn {
	t.Helper()
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// fastProbe makes a Remote look for a serving worker after 100 ms.
func fastProbe() Option {
	return option(func(c *config) { c.probe = 100 * time.Millisecond; c.heartbeat = 200 * time.Millisecond })
}

func newClient(t testing.TB, nc *nats.Conn, opts ...Option) *Client {
	t.Helper()
	c, err := NewClient(context.Background(), nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// serveInProcess runs a worker in this process until the test ends.
func serveInProcess(t testing.TB, nc *nats.Conn, name string, reg func(*Worker) error, opts ...Option) *Worker {
	t.Helper()
	w := NewWorker(append([]Option{WorkerName(name), PullWait(100 * time.Millisecond)}, opts...)...)
	if err := reg(w); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Serve(ctx, nc) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return w
}

// workerProc is a worker process started from the test binary.
type workerProc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan error
}

// profileTo starts a CPU profile written to prefix.cpu; the function it
// returns stops it and writes the heap profile (allocations since the
// start) to prefix.mem, and the count of heap allocations since the start
// to prefix.mallocs.
func profileTo(prefix string) (stop func(), err error) {
	f, err := os.Create(prefix + ".cpu")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		runtime.ReadMemStats(&ms)
		_ = os.WriteFile(prefix+".mallocs", []byte(strconv.FormatUint(ms.Mallocs-mallocs, 10)+"\n"), 0o644)
		if m, err := os.Create(prefix + ".mem"); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(m, 0)
			m.Close()
		}
	}, nil
}

func startProc(t testing.TB, s *natsserver.Server, name string, threads int, env ...string) *workerProc {
	t.Helper()
	p := &workerProc{cmd: exec.Command(os.Args[0], "-test.run=^$"), done: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), envWorker+"="+name, envThreads+"="+strconv.Itoa(threads), EnvURL+"="+s.AuthURL())
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() && p.stderr.Len() > 0 {
			t.Logf("worker %s stderr:\n%s", name, p.stderr.String())
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *workerProc) kill(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	p.done <- nil // for Cleanup
}
