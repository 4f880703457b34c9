package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/cluster"
	"github.com/gohtgs/htgs/cluster/natsserver"
	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/internal/natsconn"
)

// The test binary doubles as the program: with envTestProcess set,
// TestMain runs the program on its arguments instead of the tests, so that
// a -cluster run in a test starts its workers from the test binary
// (os.Executable) with -worker.
const (
	envTestProcess = "HTGS_PATHOLOGY_TEST_PROCESS"
	envTestExit    = "HTGS_PATHOLOGY_TEST_EXIT" // a worker name: that worker process exits at once, status 3
)

// testProcessMain is the program in a test binary run as a worker process.
func testProcessMain() int {
	if name := os.Getenv(envTestExit); name != "" && slices.Contains(os.Args, name) {
		fmt.Fprintf(os.Stderr, "%s: exiting on purpose (test)\n", name)
		return 3
	}
	return processMain()
}

// natsLeak ignores a goroutine nats.go v1.48 leaks now and then from an
// object store Put (see cluster's tests); every other goroutine is checked.
func natsLeak() goleak.Option {
	return goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect")
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of worker
// processes' output.
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

// workerPIDs returns the worker processes a -cluster run's output lists.
func workerPIDs(t *testing.T, out string) map[string]int {
	t.Helper()
	line := regexp.MustCompile(`(?m)^cluster: NATS server at .*$`).FindString(out)
	pids := map[string]int{}
	for _, m := range regexp.MustCompile(`(\S+) \(pid (\d+)\)`).FindAllStringSubmatch(line, -1) {
		pid, _ := strconv.Atoi(m[2])
		pids[m[1]] = pid
	}
	return pids
}

// checkGone fails the test if a process is still running.
func checkGone(t *testing.T, pids map[string]int) {
	t.Helper()
	for name, pid := range pids {
		if p, err := os.FindProcess(pid); err == nil && p.Signal(syscall.Signal(0)) == nil {
			t.Errorf("worker process %s (pid %d) still running after the run", name, pid)
		}
	}
}

// TestClusterMatchesSingleProcess runs the real run on two worker
// processes, re-executed from the test binary, and in one process: the
// nuclei (polygons and features, as GeoJSON), their count, the ROI query
// and the spawned features must be the same, every tile must have been
// done by one of the workers, and no worker process may outlive the run.
func TestClusterMatchesSingleProcess(t *testing.T) {
	needNATSServer(t)
	t.Setenv(envTestProcess, "1")
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		extra []string
	}{{"static", nil}, {"dynamic", []string{"-dynamic"}}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			common := append([]string{"-tiles", "6", "-tile-size", "40", "-scale", "0.002", "-window", "1", "-roi", "10,10,70,50"}, tc.extra...)
			var single, errOut bytes.Buffer
			if err := run(ctx, append(common, "-nuclei", filepath.Join(dir, "single.json")), &single, &errOut); err != nil {
				t.Fatal(err)
			}
			var multi bytes.Buffer
			stderr := &syncBuffer{}
			err := run(ctx, append(common, "-cluster", "2", "-nuclei", filepath.Join(dir, "cluster.json")), &multi, stderr)
			if err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, multi.String(), stderr.String())
			}
			out := multi.String()
			pids := workerPIDs(t, out)
			if len(pids) != 2 || pids["pathology-w1"] == 0 || pids["pathology-w2"] == 0 {
				t.Fatalf("worker processes %v, want pathology-w1 and pathology-w2\n%s", pids, out)
			}
			checkGone(t, pids)

			a, err := os.ReadFile(filepath.Join(dir, "single.json"))
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("the nuclei (GeoJSON) differ:\nsingle:  %.300s\ncluster: %.300s", a, b)
			}
			if !bytes.Contains(a, []byte(`"meanDarkness"`)) || bytes.Count(a, []byte(`"Feature"`)) == 0 {
				t.Errorf("no nuclei with features in %.200s", a)
			}
			nuclei := regexp.MustCompile(`(?m)^processed 6 tiles .*: (\d+) nuclei$`)
			sn, cn := nuclei.FindStringSubmatch(single.String()), nuclei.FindStringSubmatch(out)
			if sn == nil || cn == nil || sn[1] != cn[1] {
				t.Errorf("nuclei counts: single %q, cluster %q", sn, cn)
			}
			for _, prefix := range []string{"ROI [10,70)x[10,50): ", "features computed for "} {
				sl, cl := lineWith(single.String(), prefix), lineWith(out, prefix)
				if sl != cl || (sl == "" && (prefix != "features computed for " || tc.extra != nil)) {
					t.Errorf("single-process %q, cluster %q", sl, cl)
				}
			}
			// The token for more workers was in a file, gone with the run.
			if m := regexp.MustCompile(`join with: HTGS_NATS_TOKEN=\$\(cat (\S+)\) pathology -worker -nats nats://127\.0\.0\.1:\d+\n`).FindStringSubmatch(out); m == nil {
				t.Errorf("no line telling how more workers join:\n%s", out)
			} else if _, err := os.Stat(m[1]); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("token file %s after the run: %v", m[1], err)
			}
			// Per-worker progress and totals: every tile done once.
			if !strings.Contains(out, "progress: 6/6 tiles (") {
				t.Errorf("no final progress line:\n%s", out)
			}
			tiles := 0
			for _, m := range regexp.MustCompile(`(?m)^worker (pathology-w[12]): (\d+) tiles, (\d+) nuclei, (\d+) operations on CPU cores, (\d+) on GPUs$`).FindAllStringSubmatch(out, -1) {
				n, _ := strconv.Atoi(m[2])
				c, _ := strconv.Atoi(m[4])
				g, _ := strconv.Atoi(m[5])
				if n > 0 && c+g < n*8 {
					t.Errorf("worker %s ran %d operations for %d tiles", m[1], c+g, n)
				}
				tiles += n
			}
			if tiles != 6 || !strings.Contains(out, "cluster: 6 tiles sent, 6 results received") {
				t.Errorf("the workers report %d tiles, want 6:\n%s", tiles, out)
			}
			// Both workers served and stopped cleanly.
			for _, w := range []string{"pathology-w1", "pathology-w2"} {
				if !strings.Contains(stderr.String(), "["+w+"] worker "+w+": stopped after ") {
					t.Errorf("worker %s did not stop cleanly:\n%s", w, stderr.String())
				}
			}
		})
	}
}

// lineWith returns the first line of out starting with prefix, or "".
func lineWith(out, prefix string) string {
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestClusterWorkerExit: a worker process that cannot run (it exits at
// once, status 3, each time it starts) is reported by name with its exit
// status, restarted, given up after three failed starts, and the run ends
// well on the other worker. With -restart=false and every worker gone, the
// run fails after -worker-timeout with an error saying so.
func TestClusterWorkerExit(t *testing.T) {
	needNATSServer(t)
	t.Setenv(envTestProcess, "1")
	t.Setenv(envTestExit, "pathology-w2")
	t.Run("restarts", func(t *testing.T) {
		var out bytes.Buffer
		stderr := &syncBuffer{}
		err := run(context.Background(), []string{"-cluster", "2", "-tiles", "4", "-tile-size", "32", "-scale", "0.001"}, &out, stderr)
		if err != nil {
			t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
		}
		died := regexp.MustCompile(`(?m)^cluster: worker pathology-w2 \(pid \d+\) died after \S+: exit status 3; its inputs go to the other workers; `)
		if n := len(died.FindAllString(stderr.String(), -1)); n < 1 || n > 3 {
			t.Errorf("%d reports of pathology-w2's exit, want 1 to 3:\n%s", n, stderr.String())
		}
		if !strings.Contains(stderr.String(), "[pathology-w2] pathology-w2: exiting on purpose") {
			t.Errorf("the worker's output is not passed on:\n%s", stderr.String())
		}
		if !strings.Contains(out.String(), "worker pathology-w1: 4 tiles") {
			t.Errorf("pathology-w1 did not run the 4 tiles:\n%s", out.String())
		}
	})
	t.Run("none left", func(t *testing.T) {
		t.Setenv(envTestExit, "pathology-w1")
		var out bytes.Buffer
		stderr := &syncBuffer{}
		start := time.Now()
		err := run(context.Background(), []string{"-cluster", "1", "-restart=false", "-worker-timeout", "1s", "-tiles", "4", "-tile-size", "32", "-scale", "0.001"}, &out, stderr)
		if err == nil || !strings.Contains(err.Error(), `task "pathology-tile": no worker has served it for 1`) || !strings.Contains(err.Error(), "pathology-w1 (dead, given up)") {
			t.Fatalf("run: %v, want no worker served\nstderr:\n%s", err, stderr.String())
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("the failed run took %v", d)
		}
		if !strings.Contains(stderr.String(), "cluster: worker pathology-w1 (pid ") || !strings.Contains(stderr.String(), "exit status 3; its inputs go to the other workers; not restarted (restarts are off)") {
			t.Errorf("stderr:\n%s", stderr.String())
		}
	})
}

// TestClusterSurvivesKilledWorker kills one of three worker processes with
// SIGKILL in the middle of a run, while every worker holds a tile: the
// run ends well, the GeoJSON of the nuclei is byte for byte a
// single-process run's, the death is reported and the worker restarted.
func TestClusterSurvivesKilledWorker(t *testing.T) {
	needNATSServer(t)
	t.Setenv(envTestProcess, "1")
	ctx := context.Background()
	dir := t.TempDir()
	// -scale sets the time a tile takes, not what is found in it: the
	// cluster's tiles take long enough (about 0.3 s each) for the kill to
	// find every worker in one.
	common := []string{"-tiles", "12", "-tile-size", "40", "-window", "1"}
	var single, errOut bytes.Buffer
	if err := run(ctx, append(common, "-scale", "0.01", "-nuclei", filepath.Join(dir, "single.json")), &single, &errOut); err != nil {
		t.Fatal(err)
	}
	var pid int
	out := &triggerWriter{on: "progress: "}
	out.fire = func() {
		pid = workerPIDs(t, out.b.String())["pathology-w2"]
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	stderr := &syncBuffer{}
	err := run(ctx, append(common, "-scale", "0.5", "-cluster", "3", "-nuclei", filepath.Join(dir, "cluster.json")), out, stderr)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out.b.String(), stderr.String())
	}
	a, _ := os.ReadFile(filepath.Join(dir, "single.json"))
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil || !bytes.Equal(a, b) || len(a) == 0 {
		t.Errorf("the nuclei (GeoJSON) differ (%v):\nsingle:  %.300s\ncluster: %.300s", err, a, b)
	}
	died := `cluster: worker pathology-w2 (pid ` + strconv.Itoa(pid) + `) died after `
	if pid == 0 || !strings.Contains(stderr.String(), died) || !strings.Contains(stderr.String(), "signal: killed; its inputs go to the other workers; restarting it in") {
		t.Errorf("no report of pathology-w2's death (pid %d):\n%s", pid, stderr.String())
	}
	if !strings.Contains(out.b.String(), "progress: 12/12 tiles") || !strings.Contains(out.b.String(), "cluster: 1 worker process(es) died, 1 restarted, 0 given up") {
		t.Errorf("stdout:\n%s", out.b.String())
	}
	// The tile it held is reported sent or delivered again, named, with
	// pathology-w2 as the worker that had it; or, if it had taken the
	// tile less than 100 ms before (it had just finished one: the kill
	// comes with a progress line), that worker unknown and pathology-w2
	// among the workers lost lately.
	report := regexp.MustCompile(`(?m)^cluster: task "` + tileTask + `": tile \d+ of 12 \(input \S+\)(: (worker (\S+) on \S+, which had it,|its worker \(which one is unknown: it never said\)) said nothing for 5s| (delivered|run) again \(delivery 2\) (to|by) worker pathology-w\d on \S+: (worker (\S+) on \S+, which had it,|the worker that had it) did not finish it).*$`)
	ms := report.FindAllStringSubmatch(stderr.String(), -1)
	redelivered := 0
	if m := regexp.MustCompile(`results received \((\d+) redelivered`).FindStringSubmatch(out.b.String()); m != nil {
		redelivered, _ = strconv.Atoi(m[1])
	}
	if redelivered > 0 && len(ms) == 0 || redelivered == 0 && len(ms) > 0 {
		// (pathology-w2 may have held no tile at the kill: it had just
		// finished one and not yet taken the next.)
		t.Errorf("%d reports of a tile delivered again, the client counted %d:\n%s", len(ms), redelivered, stderr.String())
	}
	lost := "workers lost lately: pathology-w2 (pid " + strconv.Itoa(pid) + ") on "
	for _, m := range ms {
		if prev := m[3] + m[7]; prev != "pathology-w2" && (prev != "" || !strings.Contains(m[0], lost)) {
			t.Errorf("report %q: want pathology-w2 as the worker that had the tile, or among the workers lost lately", m[0])
		}
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", out.b.String(), stderr.String())
}

// TestClusterCancel cancels a -cluster run in the middle, with tiles on
// the workers: the run stops at once, with the context's error, and leaves
// no worker process behind.
func TestClusterCancel(t *testing.T) {
	needNATSServer(t)
	t.Setenv(envTestProcess, "1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &triggerWriter{on: "progress: ", fire: cancel} // after a second
	stderr := &syncBuffer{}
	err := run(ctx, []string{"-cluster", "2", "-tiles", "64", "-tile-size", "32", "-scale", "0.5"}, out, stderr)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v, want context.Canceled\nstdout:\n%s\nstderr:\n%s", err, out.b.String(), stderr.String())
	}
	if d := time.Since(out.at); d > stopWait {
		t.Errorf("the cancelled run took %v to stop", d)
	} else {
		t.Logf("the cancelled run stopped in %v", d.Round(time.Millisecond))
	}
	pids := workerPIDs(t, out.b.String())
	if len(pids) != 2 {
		t.Fatalf("worker processes %v\n%s", pids, out.b.String())
	}
	checkGone(t, pids)
	if !out.fired || strings.Contains(out.b.String(), "progress: 64/64") {
		t.Errorf("the run was not cancelled in the middle:\n%s", out.b.String())
	}
}

// triggerWriter calls fire once what was written contains on.
type triggerWriter struct {
	b     bytes.Buffer
	on    string
	fire  func()
	fired bool
	at    time.Time // when it fired
}

func (w *triggerWriter) Write(p []byte) (int, error) {
	n, err := w.b.Write(p)
	if !w.fired && strings.Contains(w.b.String(), w.on) {
		w.fired, w.at = true, time.Now()
		w.fire()
	}
	return n, err
}

// TestWorkerToken: a worker without the server's token, or with a wrong
// one, fails at once with an error saying so, and never prints the token
// it was given.
func TestWorkerToken(t *testing.T) {
	srv, err := natsserver.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	withToken := strings.Replace(srv.URL(), "nats://", "nats://not-the-token@", 1)
	for _, tc := range []struct {
		name, env, url, want string
	}{
		{"missing", "", srv.URL(), "no token given: set $" + natsconn.EnvToken},
		{"wrong in env", "not-the-token", srv.URL(), "the server refused the token in $" + natsconn.EnvToken},
		{"wrong in URL", "", withToken, "the server refused the token in the URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(natsconn.EnvToken, tc.env)
			var out, errOut bytes.Buffer
			err := run(context.Background(), []string{"-worker", "-nats", tc.url, "-name", "w-test"}, &out, &errOut)
			if !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "worker w-test") {
				t.Fatalf("run: %v, want an authorization error with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "not-the-token") {
				t.Errorf("the error shows the token: %v", err)
			}
			if code := realMain(context.Background(), []string{"-worker", "-nats", tc.url}, &out, &errOut); code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
		})
	}
}

// TestWorkerServes runs a worker in this process with the token from the
// environment: it registers, stops with nil when its context is
// cancelled, and fails with a clear error when the server goes away.
func TestWorkerServes(t *testing.T) {
	for _, stop := range []string{"cancel", "server gone"} {
		t.Run(stop, func(t *testing.T) {
			srv, err := natsserver.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown()
			t.Setenv(natsconn.EnvToken, srv.Token())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := &syncBuffer{}
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"-worker", "-nats", srv.URL(), "-name", "w-test", "-cpus", "1", "-gpus", "0"}, out, out)
			}()

			nc, err := srv.Connect()
			if err != nil {
				t.Fatal(err)
			}
			client, err := cluster.NewClient(ctx, nc)
			if err != nil {
				nc.Close()
				t.Fatal(err)
			}
			werr := waitRegistered(ctx, client, "w-test")
			if err := client.Close(); err != nil {
				t.Error(err)
			}
			nc.Close()
			if werr != nil {
				cancel()
				<-done
				t.Fatalf("%v\n%s", werr, out.String())
			}
			start := time.Now()
			if stop == "cancel" {
				cancel()
			} else {
				srv.Shutdown()
			}
			select {
			case err := <-done:
				switch {
				case stop == "cancel" && err != nil:
					t.Errorf("cancelled worker: %v", err)
				case stop != "cancel" && (err == nil || !strings.Contains(err.Error(), "worker w-test") || !strings.Contains(err.Error(), "server went away")):
					t.Errorf("worker after the server's end: %v", err)
				}
			case <-time.After(30 * time.Second):
				cancel()
				<-done
				t.Fatalf("the worker did not stop (%s)", stop)
			}
			t.Logf("%s: the worker stopped in %v", stop, time.Since(start).Round(time.Millisecond))
			if !strings.Contains(out.String(), "worker w-test: stopped after 0 tiles") {
				t.Errorf("output:\n%s", out.String())
			}
		})
	}
}

// waitRegistered waits up to registerWait until worker name serves the
// tile task.
func waitRegistered(ctx context.Context, client *cluster.Client, name string) error {
	ctx, cancel := context.WithTimeout(ctx, registerWait)
	defer cancel()
	for {
		ws, err := client.Workers(ctx)
		if err == nil && slices.ContainsFunc(ws, func(w cluster.WorkerInfo) bool { return w.Name == name && w.Tasks[tileTask] == tileVersion }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("worker %s did not register: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestClusterFlags: -cluster and -worker misuse is a usage error (status
// 2) saying what is wrong.
func TestClusterFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-worker"}, "-worker needs -nats URL"},
		{[]string{"-nats", "nats://127.0.0.1:4222"}, "-nats goes with -worker"},
		{[]string{"-name", "w1"}, "-name goes with -worker"},
		{[]string{"-cluster", "0"}, "-cluster 0: want 1 to 64"},
		{[]string{"-cluster", "-3"}, "-cluster -3: want 1 to 64"},
		{[]string{"-cluster", "2", "-sim"}, "-cluster is a real run"},
		{[]string{"-cluster", "2", "-experiment"}, "-cluster is a real run"},
		{[]string{"-cluster", "2", "-hardware"}, "-cluster is a real run"},
		{[]string{"-cluster", "2", "-storage", "disk"}, "-storage and -dir do not apply"},
		{[]string{"-cluster", "2", "-worker", "-nats", "nats://127.0.0.1:4222"}, "-worker and -cluster do not go together"},
		{[]string{"-worker", "-nats", "nats://127.0.0.1:4222", "-tiles", "3", "-nuclei", "x.json"}, "-nuclei, -tiles belong to the -cluster run"},
		{[]string{"-worker", "-nats", "nats://127.0.0.1:4222", "-sim"}, "-sim belong to the -cluster run"},
		{[]string{"-restart=false"}, "-restart and -worker-timeout supervise the workers of -cluster"},
		{[]string{"-cluster", "2", "-worker-timeout", "0s"}, "-worker-timeout 0s: must be positive"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), tc.args, &out, &errOut)
		var usage cli.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want a usage error with %q", tc.args, err, tc.want)
		}
		if code := realMain(context.Background(), tc.args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit status %d, want 2", tc.args, code)
		}
	}
	// The worker command line a -cluster run builds parses, and carries
	// the node settings but no token.
	needNATSServer(t) // -cluster looks for it
	o, err := parseFlags([]string{"-cluster", "3", "-policy", "fcfs", "-window", "4", "-cpus", "2", "-gpus", "1", "-locality", "-learn"})
	if err != nil {
		t.Fatal(err)
	}
	args := o.workerArgs("nats://127.0.0.1:4222", "pathology-w1")
	w, err := parseFlags(args)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if !w.worker || w.policy != "fcfs" || w.window != 4 || w.cpus != 2 || w.gpus != 1 || !w.locality || !w.learn || w.prefetch || w.workerName != "pathology-w1" {
		t.Errorf("worker options %+v from %v", w, args)
	}
}
