package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/cluster"
	"github.com/gohtgs/htgs/internal/natsconn"
)

// workerBand is a worker's line for a band it registered.
var workerBand = regexp.MustCompile(`(?m)^band \d+/\d+ \(rows `)

// extOutput is a process's or a run's output, safe for concurrent writes,
// calling on (unless nil) with everything written so far after each write.
type extOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
	on  func(string)
}

func (o *extOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	if o.on != nil {
		o.on(o.buf.String())
	}
	return len(p), nil
}

func (o *extOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// extWorker is an external worker: a stitch -worker process joined to a
// -nats server, which no supervisor of the client's watches.
type extWorker struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   extOutput
	done  chan struct{}
	err   error // cmd.Wait's, once done is closed
}

// startExtWorker starts the test binary as worker name of the server at
// url (TestMain runs main when envChild is set; such a worker also stops
// when its standard input closes, which is how the test's clean-up stops
// it).
func startExtWorker(t *testing.T, url, name string) *extWorker {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w := &extWorker{name: name, done: make(chan struct{})}
	w.cmd = exec.Command(exe, "-worker", "-nats", url, "-name", name, "-workers", "1")
	w.cmd.Env = append(os.Environ(), envChild+"=1") // $HTGS_NATS_TOKEN from tokenServer
	w.cmd.Stdout, w.cmd.Stderr = &w.out, &w.out
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() { _ = w.stop() })
	return w
}

// stop closes the worker's standard input and waits for it to end
// (killing it after 15 s); it returns cmd.Wait's error. Calling it again
// returns the same.
func (w *extWorker) stop() error {
	w.stdin.Close()
	select {
	case <-w.done:
	case <-time.After(15 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
	return w.err
}

// waitDirectory waits until the server's worker directory lists every one
// of names serving the band task.
func waitDirectory(t *testing.T, ctx context.Context, url string, names ...string) {
	t.Helper()
	nc, err := natsconn.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	client, err := cluster.NewClient(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ws, err := client.Workers(ctx)
		serving := map[string]bool{}
		for _, w := range ws {
			if w.Tasks[bandTask] == bandVersion {
				serving[w.Name] = true
			}
		}
		all := err == nil
		for _, n := range names {
			all = all && serving[n]
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers %q not all serving %s after 30 s (directory: %v, %v)", names, bandTask, ws, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killRun is one attempt of TestClusterExternalWorkerKilled: the client's
// run with its worker killed, or why the attempt proves nothing.
type killRun struct {
	void             string // why the attempt proves nothing ("": it does)
	code             int
	stdout, stderr   string
	victim, survivor *extWorker
	workers          []*extWorker
	start, killedAt  time.Time
	lastBand, end    time.Time // the client's last band line, the run's end
}

// killOne starts two external workers and runs the client of grid on
// them, killing a worker that holds a band.
func killOne(t *testing.T, ctx context.Context, url string, attempt int, grid []string, out string) *killRun {
	t.Helper()
	workers := map[string]*extWorker{}
	names := []string{fmt.Sprintf("ext-%d-a", attempt), fmt.Sprintf("ext-%d-b", attempt)}
	for _, name := range names {
		workers[name] = startExtWorker(t, url, name)
	}
	r := &killRun{workers: []*extWorker{workers[names[0]], workers[names[1]]}}
	waitDirectory(t, ctx, url, names...)

	var once sync.Once
	stdout := &extOutput{on: func(s string) {
		m := bandLine.FindStringSubmatch(s)
		if m == nil {
			return
		}
		if r.lastBand.IsZero() && len(bandLine.FindAllString(s, -1)) == 4 {
			r.lastBand = time.Now()
		}
		once.Do(func() {
			// The first band is done: kill the other worker, which holds
			// its first band unless it has finished that too.
			r.survivor = workers[m[3]]
			other := names[0]
			if m[3] == other {
				other = names[1]
			}
			if w := workers[other]; r.survivor != nil && !workerBand.MatchString(w.out.String()) {
				r.victim, r.killedAt = w, time.Now()
				if err := w.cmd.Process.Kill(); err != nil { // SIGKILL
					r.void = fmt.Sprintf("killing %s: %v", w.name, err)
				}
			}
		})
	}}
	var stderr extOutput
	// A band lost for good would stall the client for minutes: bound it.
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r.start = time.Now()
	r.code = runMain(cctx, append(grid, "-out", out, "-nats", url, "-band-rows", "1", "-worker-timeout", "30s"), stdout, &stderr)
	r.end = time.Now()
	r.stdout, r.stderr = stdout.String(), stderr.String()
	switch {
	case r.void != "":
		t.Fatal(r.void)
	case r.victim == nil:
		r.void = "both workers finished their first bands together, so none was killed mid-band"
	case strings.Contains(r.stdout, " by worker "+r.victim.name+" on "):
		// Its band line was on the way when the kill came.
		r.void = fmt.Sprintf("%s had finished its band when it was killed", r.victim.name)
	}
	return r
}

// Two external workers (stitch -worker -nats processes, which the client
// does not supervise) serve a -nats client; one of them is killed with
// SIGKILL while it holds a band: when the client reports its first band,
// done by the other worker, and the killed one has finished none (it took
// a band at the start: both were serving, one band at a time each, with
// more bands than workers). The client completes: the band the dead worker
// held goes to the survivor after the task's AckWait, the survivor does
// every band, and the outputs are the single-process run's byte for byte;
// the client reports the bands the killed worker held, naming it.
// (When both workers finish their first bands at once, none can be killed
// mid-band: the attempt is made again with new workers, up to 3 times.)
func TestClusterExternalWorkerKilled(t *testing.T) {
	switch runtime.GOOS {
	case "windows", "plan9", "js", "wasip1":
		t.Skipf("a worker process cannot be killed with SIGKILL on %s", runtime.GOOS)
	}
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before, natsLeak) }) // after the other clean-ups
	ctx := context.Background()
	dir := generated(t, 4, 5, 1, nil)
	grid := []string{"-dir", dir, "-rows", "4", "-cols", "5", "-workers", "1", "-mosaic=false"}
	single := t.TempDir()
	if r := runArgs(t, ctx, append(grid, "-out", single)...); r.code != 0 {
		t.Fatalf("single process: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	srv := tokenServer(t)
	t.Cleanup(srv.Shutdown) // after the workers'

	var (
		r   *killRun
		got string
	)
	for attempt := 1; ; attempt++ {
		got = t.TempDir()
		r = killOne(t, ctx, srv.URL(), attempt, grid, got)
		if r.code != 0 {
			victim := "none"
			if r.victim != nil {
				victim = r.victim.name
			}
			t.Fatalf("-nats client, worker killed: %s: exit %d\nstdout:\n%s\nstderr:\n%s", victim, r.code, r.stdout, r.stderr)
		}
		if r.void == "" {
			break
		}
		if attempt == 3 {
			t.Fatalf("no attempt killed a worker holding a band; the last: %s\n%s", r.void, r.stdout)
		}
		t.Logf("attempt %d: %s; again", attempt, r.void)
		for _, w := range r.workers {
			_ = w.stop()
		}
	}
	victim, survivor := r.victim, r.survivor
	<-victim.done
	if victim.err == nil || !strings.Contains(victim.err.Error(), "killed") {
		t.Errorf("worker %s ended with %v, want killed by SIGKILL", victim.name, victim.err)
	}
	for _, name := range []string{defNames.global, defNames.relative, defNames.noOpt} {
		a, err := os.ReadFile(filepath.Join(single, name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(got, name))
		if err != nil {
			t.Fatalf("the client's run: %v", err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from the single-process run's", name)
		}
	}

	// Every band was done once, all by the survivor: the victim's band
	// too, once the victim had been silent for the AckWait.
	lines := bandLine.FindAllStringSubmatch(r.stdout, -1)
	bands := map[string]bool{}
	for _, m := range lines {
		if m[3] != survivor.name {
			t.Errorf("band line %q: want every band by %s (%s was killed holding its first)", m[0], survivor.name, victim.name)
		}
		bands[m[1]] = true
	}
	if len(lines) != 4 || len(bands) != 4 {
		t.Errorf("%d band lines for %d bands, want 4:\n%s", len(lines), len(bands), r.stdout)
	}
	if !strings.Contains(r.stdout, "registered 31 pairs in 4 bands on 1 worker(s)") || !strings.Contains(r.stdout, "  worker "+survivor.name+" on ") {
		t.Errorf("summary: want 31 pairs in 4 bands on %s alone:\n%s", survivor.name, r.stdout)
	}
	if err := survivor.stop(); err != nil || !strings.Contains(survivor.out.String(), "stopped after 4 bands") {
		t.Errorf("worker %s: stopped with %v, want a clean stop after 4 bands:\n%s", survivor.name, err, survivor.out.String())
	}
	// The victim's band came back only after the AckWait of silence (its
	// last progress report was at most a third of it before the kill): the
	// last band cannot have come sooner after the kill. (Had the victim
	// held none, the survivor would have done the other three in a moment.)
	after := r.lastBand.Sub(r.killedAt)
	if after < bandAckWait*2/3 {
		t.Errorf("the last band came %v after %s was killed, before its band could have been given to %s (AckWait %v): was it holding one?",
			after, victim.name, survivor.name, bandAckWait)
	}
	// The client reports the bands the killed worker held, sent again or
	// delivered again to the survivor, naming the band and the killed
	// worker. (A band the stream gave the victim while it ran a direct
	// request, which it had not yet said it held, is reported with its
	// previous worker unknown.)
	report := regexp.MustCompile(`(?m)^cluster: task "` + bandTask + `": band (\d)/4 \(rows (\d)\.\.(\d)\) \(input \S+\)(: worker (\S+) on \S+, which had it, said nothing for 5s \(its ack wait\)| (delivered|run) again \(delivery \d\) (to|by) worker ` +
		regexp.QuoteMeta(survivor.name) + ` on \S+: (worker (\S+) on \S+, which had it,|the worker that had it) did not finish it)`)
	named := 0
	for _, m := range report.FindAllStringSubmatch(r.stderr, -1) {
		prev := m[5] + m[9]
		if n, _ := strconv.Atoi(m[1]); m[2] != m[3] || strconv.Itoa(n-1) != m[2] || prev != "" && prev != victim.name {
			t.Errorf("report %q: want a band of 4 and its row, and %s as the worker that had it", m[0], victim.name)
		}
		if prev == victim.name {
			named++
		}
	}
	if named == 0 {
		t.Errorf("the client's stderr: want a report of a band %s held, naming it:\n%s", victim.name, r.stderr)
	}
	t.Logf("run %v; %s killed after %v, the last band %v later; stdout:\n%s\nstderr:\n%s",
		r.end.Sub(r.start).Round(time.Millisecond), victim.name, r.killedAt.Sub(r.start).Round(time.Millisecond), after.Round(time.Millisecond), r.stdout, r.stderr)
}
