package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
)

// deafGraph has a task "read" whose copy given 1 blocks, ignoring its
// context, until release is closed (a read from a device that knows no
// context); given other values it honours the context. A pool's buffer is held by the deaf
// copy, so that the pool's finish hook matters.
func deafGraph(release <-chan struct{}, entered chan<- struct{}) *graph.Graph[int, int] {
	g := graph.New[int, int]("deaf")
	pool := memmgr.New(g, "frames", 2, memmgr.Slices[byte](8))
	read := graph.AddFunc(g, "read", 2, func(ctx context.Context, v int, out task.Emitter[int]) error {
		if v == 1 {
			b, err := pool.Get(ctx)
			if err != nil {
				return err
			}
			defer b.Release()
			entered <- struct{}{}
			<-release // ignores ctx
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	})
	graph.Discard(read)
	graph.Connect(g.Input(), read)
	return g
}

// waitAsync calls Wait on another goroutine; the channel gets its error.
func waitAsync(rt *graph.Runtime[int, int]) <-chan error {
	done := make(chan error, 1)
	go func() { done <- rt.Wait() }()
	return done
}

// After a cancellation Wait waits for the copy that ignores its context,
// and the stall report says the run was cancelled, names the copy, how
// long it has been executing, and that it does not honour its context.
func TestCancelWaitsForCopyIgnoringContext(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	var mu sync.Mutex
	var reports []graph.Stats
	ctx, cancel := context.WithTimeout(context.Background(), 24*time.Hour)
	defer cancel()
	rt, err := deafGraph(release, entered).Start(ctx, graph.WithStallReport(40*time.Millisecond, func(s graph.Stats) {
		mu.Lock()
		reports = append(reports, s)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Send(1)
	<-entered
	rt.Close()
	// A stall before the cancellation is reported, and the cancellation
	// starts a new one.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(reports)
		mu.Unlock()
		if n > 0 {
			break
		}
	}
	mu.Lock()
	if len(reports) != 1 || reports[0].Stopped != 0 || strings.Contains(reports[0].String(), "cancelled") {
		t.Errorf("%d reports before the cancellation, want 1 not saying cancelled", len(reports))
	}
	mu.Unlock()
	cancel()
	done := waitAsync(rt)
	var after graph.Stats
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		for _, s := range reports {
			if s.Stopped > 0 {
				after = s
			}
		}
		mu.Unlock()
		if after.Stopped > 0 {
			break
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v while a copy is still executing", err)
	default:
	}
	text := after.String()
	for _, want := range []string{
		`graph "deaf" after `, `, cancelled `, `ago (context canceled)`,
		`: executing (batch of 1 taken from the queue) for `, `after the run was cancelled: it does not honour its context`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report after cancel lacks %q:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "does not honour"); n != 1 {
		t.Errorf("%d copies said not to honour their context, want 1:\n%s", n, text)
	}
	c := after.Tasks[0].Copies[0]
	if c.State != "executing" {
		c = after.Tasks[0].Copies[1]
	}
	if after.Stopped < 40*time.Millisecond || c.Executing < after.Stopped+40*time.Millisecond {
		t.Errorf("cancelled %v ago, copy executing for %v", after.Stopped, c.Executing)
	}
	close(release)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v, want context.Canceled", err)
	}
}

// WithAbandonAfter: Wait returns after the delay, naming the copy still
// executing, saying it was left running; the pool is freed once the copy
// returns.
func TestAbandonAfter(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 24*time.Hour)
	defer cancel()
	rt, err := deafGraph(release, entered).Start(ctx, graph.WithAbandonAfter(60*time.Millisecond), graph.WithoutStallReport())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(release)
		<-rt.Done() // the abandoned goroutine ends before goleak looks
	}()
	_ = rt.Send(1)
	<-entered
	cancel()
	stop := time.Now()
	err = rt.Wait()
	if d := time.Since(stop); d < 50*time.Millisecond || d > 2*time.Second {
		t.Errorf("Wait returned %v after the cancellation, want about 60ms", d)
	}
	var ab *graph.AbandonedError
	if !errors.As(err, &ab) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v (%T), want an *AbandonedError wrapping context.Canceled", err, err)
	}
	if len(ab.Copies) != 1 || ab.Copies[0].Task != "read" || ab.Copies[0].Executing < 60*time.Millisecond {
		t.Errorf("stuck copies %+v", ab.Copies)
	}
	for _, want := range []string{`task "read" copy `, `, executing for `, "do not honour their context", "goroutines were left running", "context canceled"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	select {
	case <-rt.Done():
		t.Fatal("Done closed while the copy still executes")
	default:
	}
	if err2 := rt.Wait(); err2 != err {
		t.Errorf("second Wait: %v", err2)
	}
	if p := rt.Stats().Pools[0]; p.InUse != 1 {
		t.Errorf("pool in use %d while the abandoned copy holds a buffer", p.InUse)
	}
}

// WithAbandonAfter changes nothing for a run whose copies honour their
// context, or that is not cancelled.
func TestAbandonAfterCleanRun(t *testing.T) {
	rt, err := squareGraph(2).Start(context.Background(), graph.WithAbandonAfter(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		_ = rt.Send(i)
	}
	rt.Close()
	n := 0
	for range rt.Results() {
		n++
	}
	if err := rt.Wait(); err != nil || n != 100 {
		t.Fatalf("Wait: %v, %d results", err, n)
	}

	release, entered := make(chan struct{}), make(chan struct{}, 1)
	close(release)
	ctx, cancel := context.WithCancel(context.Background())
	rt, err = deafGraph(release, entered).Start(ctx, graph.WithAbandonAfter(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Send(1)
	<-entered
	cancel()
	if err := rt.Wait(); !errors.Is(err, context.Canceled) || errors.As(err, new(*graph.AbandonedError)) {
		t.Fatalf("Wait: %v", err)
	}
}

// runDeafLogged runs deafGraph until a report after the cancellation was
// logged into buf (a record saying "cancelled"), and releases it.
func runDeafLogged(t *testing.T, buf *syncBuffer, opts ...graph.StartOption) {
	t.Helper()
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := deafGraph(release, entered).Start(ctx, append(opts, graph.WithStallReport(30*time.Millisecond, nil))...)
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Send(1)
	<-entered
	cancel()
	// The reports come every 30 ms; on a loaded machine the first after
	// the cancellation may come much later.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s := rt.Stats(); s.Stopped > 120*time.Millisecond && strings.Contains(buf.String(), "cancelled") {
			break
		}
	}
	close(release)
	_ = rt.Wait()
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Through a JSON handler a stall is one record for the run and one per
// task, each a JSON object with the counters as fields.
func TestStallReportJSON(t *testing.T) {
	var buf syncBuffer
	runDeafLogged(t, &buf, graph.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	var head, read map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not one JSON record per line: %v\n%s", err, buf.String())
		}
		if rec["task"] == "read" {
			read = rec
		} else if rec["tasks"] != nil && rec["cancelled_ago"] != nil {
			head = rec
		}
		if strings.Contains(line, `\n`) {
			t.Errorf("a record with text in it: %s", line)
		}
	}
	if head == nil || read == nil {
		t.Fatalf("no record for the cancelled run, or for task read:\n%s", buf.String())
	}
	msg, _ := head["msg"].(string)
	if !strings.Contains(msg, `graph "deaf" was cancelled `) || !strings.Contains(msg, `(executing for `) ||
		!strings.Contains(msg, "does not honour its context") || head["level"] != "WARN" {
		t.Errorf("head record %v", head)
	}
	copies, _ := read["copies"].(map[string]any)
	c0, _ := copies["0"].(map[string]any)
	if c0["state"] != "executing" {
		c0, _ = copies["1"].(map[string]any)
	}
	if c0["state"] != "executing" || c0["ignores_context"] != true || c0["executing"] == nil {
		t.Errorf("task record %v", read)
	}
}

// Through slog's default handler (slog.SetDefault never called), a stall
// is one record whose message is the multi-line report, as a person reads
// it on a terminal.
func TestStallReportDefaultHandlerIsText(t *testing.T) {
	var buf syncBuffer
	out, flags := log.Writer(), log.Flags()
	log.SetOutput(&buf)
	log.SetFlags(0)
	defer func() {
		log.SetOutput(out)
		log.SetFlags(flags)
	}()
	runDeafLogged(t, &buf)
	text := buf.String()
	for _, want := range []string{
		"WARN htgs: graph \"deaf\" was cancelled ",
		"\ngraph \"deaf\" after ",
		"\n  task \"read\": queue 0",
		": executing (batch of 1 taken from the queue) for ",
		"it does not honour its context\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("default handler output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, `\n`) || strings.Contains(text, "report=") {
		t.Errorf("escaped text in:\n%s", text)
	}
}

// After the run, a snapshot says it is done, with its elapsed time frozen
// and nothing pending.
func TestStatsAfterRunAreFinal(t *testing.T) {
	rt, err := squareGraph(2).Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Send(2)
	rt.Close()
	for range rt.Results() {
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	a := rt.Stats()
	time.Sleep(20 * time.Millisecond)
	b := rt.Stats()
	if !a.Done || a.Pending != 0 || a.Elapsed != b.Elapsed || a.Stopped != 0 {
		t.Fatalf("after the run: done %v, pending %d, elapsed %v then %v, stopped %v", a.Done, a.Pending, a.Elapsed, b.Elapsed, a.Stopped)
	}
	if !strings.Contains(a.String(), ", done\n") {
		t.Errorf("report of a finished run:\n%s", a)
	}
}

// Through a text handler a stall is one line for the run and one per task,
// none with text quoted in it.
func TestStallReportTextHandler(t *testing.T) {
	var buf syncBuffer
	runDeafLogged(t, &buf, graph.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	var head, read string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(line, `\n`) {
			t.Errorf("a record with text in it: %s", line)
		}
		if strings.Contains(line, "task=read ") {
			read = line
		} else if strings.Contains(line, "cancelled_ago=") {
			head = line
		}
	}
	if !strings.Contains(head, `does not honour its context`) || !strings.Contains(head, "level=WARN") {
		t.Errorf("head line %q", head)
	}
	if !strings.Contains(read, "copies.") || !strings.Contains(read, ".state=executing") || !strings.Contains(read, ".ignores_context=true") {
		t.Errorf("task line %q\n%s", read, buf.String())
	}
}

// Graph.Run honours WithAbandonAfter too: it returns, naming the copy.
func TestRunAbandonAfter(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-entered
		cancel()
	}()
	var exec *graph.Execution
	err := deafGraph(release, entered).Run(ctx, func(yield func(int) bool) { yield(1) }, nil,
		graph.WithAbandonAfter(30*time.Millisecond), graph.WithStarted(func(e *graph.Execution) { exec = e }))
	var ab *graph.AbandonedError
	close(release)
	<-exec.Done() // the abandoned copy has returned
	if !errors.As(err, &ab) || len(ab.Copies) != 1 || ab.Copies[0].Task != "read" {
		t.Fatalf("Run: %v", err)
	}
}
