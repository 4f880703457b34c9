//go:build unix

package cluster

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gohtgs/htgs/cluster/natsserver"
)

// testWorker is a local worker process from the test binary, joining s.
func testWorker(s *natsserver.Server, name string, threads int, env ...string) LocalWorker {
	return LocalWorker{Name: name, Path: os.Args[0], Args: []string{"-test.run=^$"},
		Env: append([]string{envWorker + "=" + name, envThreads + "=" + strconv.Itoa(threads), EnvURL + "=" + s.AuthURL()}, env...)}
}

// alive reports whether process pid exists.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// A supervised local worker killed with SIGKILL mid-run is reported (its
// name, pid and signal), restarted, and loses no input: the run's results
// are those of a run without the kill, each input once. Close stops every
// process.
func TestSupervisorRestartsKilledWorker(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	c := newClient(t, nc, fastProbe())
	var reports, output syncBuffer
	sup, ctx := Supervise(context.Background(), c, "square", "v1", Reports(&reports), WorkerOutput(&output), WorkerTimeout(20*time.Second))
	for _, n := range []string{"A", "B"} {
		if _, err := sup.Start(testWorker(s, n, 4)); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ws, err := sup.WaitServing(wctx, 2)
	cancel()
	if err != nil || len(ws) != 2 {
		t.Fatalf("waiting for A and B: %v %v", ws, err)
	}
	r, _ := NewRemote[job, answer](c, "square", Version("v1"))
	want := runSquares(t, squareTask, 4, jobs(40, 0))
	done := runAsync(t, r, jobs(40, 150*time.Millisecond))
	waitFor(t, "worker A's first results", func() bool { return c.Stats().ByWorker["A"] >= 2 })
	pidA := sup.PIDs()["A"]
	if err := syscall.Kill(pidA, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if !slices.Equal(got, want) {
		t.Fatalf("after the kill: %d results, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	if st := c.Stats(); st.Results != 40 {
		t.Errorf("client stats %+v", st)
	}
	waitFor(t, "A's restart", func() bool { return sup.Stats().Restarts == 1 })
	pids := sup.PIDs()
	if len(pids) != 2 || pids["A"] == pidA {
		t.Errorf("after the restart: %v (A was %d)", pids, pidA)
	}
	if err := sup.Close(); err != nil {
		t.Error(err)
	}
	if ctx.Err() == nil || context.Cause(ctx) != context.Canceled {
		t.Errorf("the supervisor's context after Close: %v", context.Cause(ctx))
	}
	for n, pid := range pids {
		if alive(pid) {
			t.Errorf("worker %s (pid %d) still running after Close", n, pid)
		}
	}
	rep := reports.String()
	died := regexp.MustCompile(`cluster: worker A \(pid ` + strconv.Itoa(pidA) + `\) died after \S+: signal: killed; its inputs go to the other workers; restarting it in 500ms`)
	if !died.MatchString(rep) || !regexp.MustCompile(`cluster: worker A restarted \(pid \d+\)`).MatchString(rep) {
		t.Errorf("reports:\n%s", rep)
	}
	if st := sup.Stats(); st != (SupervisorStats{Deaths: 1, Restarts: 1}) {
		t.Errorf("supervisor stats %+v", st)
	}
	t.Logf("reports:\n%s", rep)
}

// A local worker that cannot start (it dies at once, three times) is given
// up; with no worker serving, the supervisor's context fails after the
// WorkerTimeout with an error that says so and names the worker.
func TestSupervisorNoWorkerServed(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	c := newClient(t, nc)
	var reports syncBuffer
	start := time.Now()
	sup, ctx := Supervise(context.Background(), c, "square", "v1", Reports(&reports), WorkerTimeout(3*time.Second))
	defer sup.Close()
	bad := testWorker(s, "broken", 1)
	bad.Env = append(bad.Env, EnvURL+"=nats://127.0.0.1:1") // no server there: exits with status 2
	if _, err := sup.Start(bad); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("no failure 20 s after the start")
	}
	err := context.Cause(ctx)
	d := time.Since(start)
	if !errors.Is(err, ErrNoWorkerServed) || !strings.Contains(err.Error(), `task "square": no worker has served it for 3`) ||
		!strings.Contains(err.Error(), "broken (dead, given up)") {
		t.Errorf("cause %v", err)
	}
	if d < 3*time.Second || d > 6*time.Second {
		t.Errorf("failed after %v, want about 3 s", d)
	}
	if st := sup.Stats(); st != (SupervisorStats{Deaths: 3, Restarts: 2, GivenUp: 1}) {
		t.Errorf("stats %+v\n%s", st, reports.String())
	}
	if rep := reports.String(); !strings.Contains(rep, "exit status 2") || !strings.Contains(rep, "given up: it died within 10s of its start 3 times in a row") {
		t.Errorf("reports:\n%s", rep)
	}
	if err := sup.Close(); err != nil {
		t.Error(err)
	}
}

// A supervisor with no local worker reports what happens to the external
// workers of its client's run: worker A, killed with SIGKILL while it
// holds inputs, falls silent in the directory, and its inputs, delivered
// again to B, are reported by their labels with both workers named; B,
// started mid-run, is reported joining. The run's results are those of a
// run without the kill.
func TestSupervisorReportsExternalWorkers(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	c := newClient(t, nc)
	var reports syncBuffer
	sup, _ := Supervise(context.Background(), c, "square", "v1", Reports(&reports), WorkerTimeout(30*time.Second))
	defer sup.Close()
	const beat = "300ms" // A is reported silent 0.9 s after its last renewal
	a := startProc(t, s, "A", 4, envBeat+"="+beat)
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	ws, err := sup.WaitServing(wctx, 1)
	cancel()
	if err != nil || len(ws) != 1 {
		t.Fatalf("waiting for A: %v %v", ws, err)
	}
	r, _ := NewRemote[job, answer](c, "square", Version("v1"), InputLabel(func(j job) string { return "square of " + strconv.Itoa(j.N) }))
	want := runSquares(t, squareTask, 4, jobs(40, 0))
	done := runAsync(t, r, jobs(40, 150*time.Millisecond))
	waitFor(t, "worker A's first results", func() bool { return c.Stats().ByWorker["A"] >= 4 })
	// A's next inputs have run for over 100 ms (A has said it has them)
	// and less than their 150 ms.
	time.Sleep(120 * time.Millisecond)
	a.kill(t)
	startProc(t, s, "B", 4)
	got := <-done
	if !slices.Equal(got, want) {
		t.Fatalf("after the kill: %d results, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	again := regexp.MustCompile(`cluster: task "square": square of \d+ \(input \S+\) (delivered|run) again \(delivery 2\) (to|by) worker B on \S+: worker A on \S+, which had it, did not finish it`)
	joined := regexp.MustCompile(`cluster: worker B \(pid \d+\) on \S+ joined: it serves task "square" \(\d workers serve it now\)`)
	silent := regexp.MustCompile(`cluster: worker A \(pid ` + strconv.Itoa(a.cmd.Process.Pid) + `\) on \S+ is silent: it has not renewed its directory entry for \S+ \(it does every 300ms\): it died`)
	deadline := time.Now().Add(20 * time.Second)
	for rep := reports.String(); !again.MatchString(rep) || !joined.MatchString(rep) || !silent.MatchString(rep); rep = reports.String() {
		if time.Now().After(deadline) {
			t.Fatalf("reports, want A's inputs delivered again to B (%v), B joined (%v), A silent (%v):\n%s", again.MatchString(rep), joined.MatchString(rep), silent.MatchString(rep), rep)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := c.Stats(); st.Redelivered < 1 || st.Results != 40 {
		t.Errorf("client stats %+v", st)
	}
	if n := len(again.FindAllString(reports.String(), -1)); int64(n) > c.Stats().Redelivered {
		t.Errorf("%d inputs reported delivered again, %d results say so:\n%s", n, c.Stats().Redelivered, reports.String())
	}
	t.Logf("reports:\n%s", reports.String())
}
