package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/cluster"
	"github.com/gohtgs/htgs/cluster/natsserver"
	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/internal/natsconn"
)

// natsLeak is a goroutine nats.go leaks now and then from an object store
// Put (see cluster's tests); every other goroutine is checked.
var natsLeak = goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect")

// tokenServer starts an embedded server and puts its token in
// $HTGS_NATS_TOKEN for the runs of the test; the caller shuts it down.
func tokenServer(t *testing.T) *natsserver.Server {
	t.Helper()
	srv, err := natsserver.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(natsconn.EnvToken, srv.Token())
	return srv
}

// startWorker runs the program with args (a -worker) until the function
// it returns is called, which stops it and returns its run.
func startWorker(ctx context.Context, args ...string) (stop func() result) {
	wctx, cancel := context.WithCancel(ctx)
	worker := make(chan result, 1)
	go func() {
		var o, e bytes.Buffer
		code := runMain(wctx, args, &o, &e)
		worker <- result{code, o.String(), e.String()}
	}()
	return func() result {
		cancel()
		return <-worker
	}
}

// sameOutputs fails unless every output of a run in want (the log and
// statistics, which hold times and paths, excepted) is in got, byte for
// byte.
func sameOutputs(t *testing.T, want, got string) {
	t.Helper()
	for _, name := range outputNames {
		if name == logName(defaultPrefix) || name == statsName(defaultPrefix) {
			continue
		}
		a, err := os.ReadFile(filepath.Join(want, name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(got, name))
		if err != nil {
			t.Fatalf("distributed run: %v", err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from the single-process run's", name)
		}
	}
}

// bandLine is a client's progress line for a band.
var bandLine = regexp.MustCompile(`(?m)^band (\d+)/(\d+) \(rows \d+\.\.\d+\): \d+ pairs by worker (\S+) on (\S+) in `)

// The registration by bands of rows on two local worker processes
// (-cluster 2, re-executed from the test binary) and on a worker that
// joined a server with the token of $HTGS_NATS_TOKEN (-nats) gives the
// single-process run's outputs byte for byte, and prints a line per band
// naming its worker and host.
func TestClusterMatchesSingleProcess(t *testing.T) {
	needNATSServer(t)
	before := goleak.IgnoreCurrent()
	ctx := context.Background()
	dir := generated(t, 4, 5, 1, nil)
	single := t.TempDir()
	grid := []string{"-dir", dir, "-rows", "4", "-cols", "5", "-workers", "2"}
	if r := runArgs(t, ctx, append(grid, "-out", single)...); r.code != 0 {
		t.Fatalf("single process: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	t.Run("cluster", func(t *testing.T) {
		out := t.TempDir()
		r := runArgs(t, ctx, append(grid, "-out", out, "-cluster", "2", "-band-rows", "1")...)
		if r.code != 0 {
			t.Fatalf("-cluster 2: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		sameOutputs(t, single, out)
		host, _ := os.Hostname()
		lines := bandLine.FindAllStringSubmatch(r.stdout, -1)
		bands := map[string]bool{}
		for _, m := range lines {
			if m[2] != "4" || (m[3] != "local-1" && m[3] != "local-2") || m[4] != host {
				t.Errorf("band line %q: want band k/4 by local-1 or local-2 on %s", m[0], host)
			}
			bands[m[1]] = true
		}
		if len(lines) != 4 || len(bands) != 4 {
			t.Errorf("%d band lines for %d bands, want 4:\n%s", len(lines), len(bands), r.stdout)
		}
		if !strings.Contains(r.stdout, "registered 31 pairs in 4 bands") || !strings.Contains(r.stdout, "  worker local-") {
			t.Errorf("no per-worker summary:\n%s", r.stdout)
		}
		t.Logf("\n%s", r.stdout)
	})

	t.Run("nats", func(t *testing.T) {
		srv := tokenServer(t)
		defer srv.Shutdown()
		stop := startWorker(ctx, "-worker", "-nats", srv.URL(), "-name", "joined", "-workers", "2")
		out := t.TempDir()
		r := runArgs(t, ctx, append(grid, "-out", out, "-nats", srv.URL(), "-band-rows", "3")...)
		w := stop()
		if r.code != 0 || w.code != 0 {
			t.Fatalf("-nats: exit %d\n%s%s\nworker: exit %d\n%s%s", r.code, r.stdout, r.stderr, w.code, w.stdout, w.stderr)
		}
		sameOutputs(t, single, out)
		if n := len(bandLine.FindAllString(r.stdout, -1)); n != 2 || !strings.Contains(r.stdout, "by worker joined on ") {
			t.Errorf("want 2 bands by worker joined:\n%s", r.stdout)
		}
		if !strings.Contains(w.stdout, "band 2/2 (rows 3..3 of 4 x 5 tiles") || !strings.Contains(w.stdout, "stopped after 2 bands") {
			t.Errorf("worker's output:\n%s", w.stdout)
		}
	})

	t.Run("no worker", func(t *testing.T) {
		srv := tokenServer(t)
		defer srv.Shutdown()
		start := time.Now()
		r := runArgs(t, ctx, append(grid, "-out", t.TempDir(), "-nats", srv.URL(), "-worker-timeout", "1s")...)
		want := `task "stitch-band": no worker has served it for 1`
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("-nats without workers: exit %d, want 1 and %q\n%s%s", r.code, want, r.stdout, r.stderr)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("took %v to fail", d)
		}
	})

	t.Run("store", func(t *testing.T) {
		// The worker may read only a folder of its own (-allow): it
		// cannot see the client's tiles, and gets them from the object
		// store.
		srv := tokenServer(t)
		defer srv.Shutdown()
		stop := startWorker(ctx, "-worker", "-nats", srv.URL(), "-name", "fenced", "-workers", "2", "-allow", t.TempDir())
		out := t.TempDir()
		r := runArgs(t, ctx, append(grid, "-out", out, "-nats", srv.URL(), "-band-rows", "2", "-tiles-via", "store")...)
		w := stop()
		if r.code != 0 || w.code != 0 {
			t.Fatalf("-tiles-via store: exit %d\n%s%s\nworker: exit %d\n%s%s", r.code, r.stdout, r.stderr, w.code, w.stdout, w.stderr)
		}
		sameOutputs(t, single, out)
		if !strings.Contains(r.stdout, "tiles: 20 files (") || !strings.Contains(r.stdout, "by worker fenced on ") {
			t.Errorf("stdout:\n%s", r.stdout)
		}
		// The bucket is gone with the run.
		nc, err := natsconn.Connect(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		for name := range js.ObjectStoreNames(ctx).Name() {
			if strings.HasPrefix(name, "HTGS_STITCH_TILES_") {
				t.Errorf("bucket %s left after the run", name)
			}
		}
	})
	goleak.VerifyNone(t, before, natsLeak)
}

// A wrong token is refused with a message that says where the token comes
// from and shows none; nothing is written.
func TestClusterWrongToken(t *testing.T) {
	before := goleak.IgnoreCurrent()
	srv, err := natsserver.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	dir := generated(t, 4, 5, 1, nil)
	out := filepath.Join(t.TempDir(), "out")
	ctx := context.Background()
	t.Setenv(natsconn.EnvToken, "not-the-token")
	withToken := strings.Replace(srv.URL(), "//", "//wrong-secret@", 1)
	for _, args := range [][]string{
		{"-dir", dir, "-rows", "4", "-cols", "5", "-out", out, "-nats", srv.URL()},
		{"-dir", dir, "-rows", "4", "-cols", "5", "-out", out, "-nats", withToken},
		{"-worker", "-nats", srv.URL()},
	} {
		r := runArgs(t, ctx, args...)
		if r.code != 1 || !strings.Contains(strings.ToLower(r.stderr), "authorization") || !strings.Contains(r.stderr, natsconn.EnvToken) {
			t.Errorf("%q: exit %d, want 1 and an authorization error naming $%s:\n%s", args, r.code, natsconn.EnvToken, r.stderr)
		}
		t.Logf("%q: %s", args[len(args)-1], r.stderr)
		if strings.Contains(r.stderr+r.stdout, "wrong-secret") || strings.Contains(r.stderr+r.stdout, srv.Token()) {
			t.Errorf("%q: a token is shown:\n%s", args, r.stderr)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused run created %s (%v)", out, err)
	}
	srv.Shutdown()
	goleak.VerifyNone(t, before, natsLeak)
}

func TestClusterUsageErrors(t *testing.T) {
	t.Setenv(cluster.EnvURL, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-cluster", "-1"}, "-cluster -1"},
		{[]string{"-cluster", "0"}, "-cluster 0"},
		{[]string{"-cluster", "2", "-band-rows", "-2"}, "-band-rows -2"},
		{[]string{"-cluster", "2", "-nats", "nats://127.0.0.1:4222"}, "give one of them"},
		{[]string{"-dir", "d", "-rows", "2", "-cols", "2", "-out", "o", "-band-rows", "3"}, "-band-rows applies"},
		{[]string{"-name", "w1"}, "-name names a worker"},
		{[]string{"-worker"}, "-worker needs the server"},
		{[]string{"-allow", "d"}, "it applies to -worker"},
		{[]string{"-worker", "-nats", "nats://127.0.0.1:4222", "-allow", ""}, "-allow needs a folder"},
		{[]string{"-worker", "-nats", "nats://127.0.0.1:4222", "-dir", "d"}, "-dir is theirs"},
		{[]string{"-worker", "-nats", "nats://127.0.0.1:4222", "-out", "o"}, "-out is theirs"},
		{[]string{"-worker", "-cluster", "2"}, "exclude each other"},
		{[]string{"-nats", "http://127.0.0.1:4222"}, "want a NATS server URL"},
		{[]string{"-nats", "nats://secret@"}, "want a NATS server URL"},
		{[]string{"-generate", "d", "-cluster", "2"}, "-generate writes tiles locally"},
		{[]string{"-gpu", "-nats", "nats://127.0.0.1:4222", "-dir", "d", "-rows", "2", "-cols", "2", "-out", "o"}, "give -gpu to them"},
	} {
		var out, errw bytes.Buffer
		err := run(context.Background(), tc.args, &out, &errw)
		var ue cli.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want a usage error with %q", tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error shows the token: %v", tc.args, err)
		}
	}
}

// Bands cover the rows once, in order; the automatic height gives about 3
// bands per worker, but bands of 4 rows when the grid has 4 per worker.
func TestBandRows(t *testing.T) {
	for _, tc := range []struct{ rows, workers, want int }{
		{4, 2, 2}, {8, 2, 4}, {100, 4, 9}, {1, 3, 1}, {3, 8, 1}, {16, 1, 6},
	} {
		if got := autoBandRows(tc.rows, tc.workers); got != tc.want {
			t.Errorf("autoBandRows(%d, %d) = %d, want %d", tc.rows, tc.workers, got, tc.want)
		}
	}
	for _, tc := range []struct{ rows, h int }{{1, 1}, {7, 3}, {9, 3}, {5, 9}} {
		next := 0
		for _, b := range splitRows(tc.rows, tc.h) {
			if b[0] != next || b[1] <= b[0] || b[1]-b[0] > tc.h {
				t.Errorf("splitRows(%d, %d): band %v after row %d", tc.rows, tc.h, b, next)
			}
			next = b[1]
		}
		if next != tc.rows {
			t.Errorf("splitRows(%d, %d) covers %d rows", tc.rows, tc.h, next)
		}
	}
}

// A worker started with -allow refuses a band whose tiles lie outside that
// folder, and the client's run fails saying so; nothing is written.
func TestClusterWorkerAllow(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ctx := context.Background()
	srv := tokenServer(t)
	dir := generated(t, 2, 2, 1, nil)
	stop := startWorker(ctx, "-worker", "-nats", srv.URL(), "-name", "fenced", "-allow", t.TempDir())
	out := filepath.Join(t.TempDir(), "out")
	r := runArgs(t, ctx, "-dir", dir, "-rows", "2", "-cols", "2", "-out", out, "-nats", srv.URL())
	code := stop().code
	srv.Shutdown()
	if code != 0 {
		t.Errorf("worker: exit %d", code)
	}
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "outside the folder this worker may read") {
		t.Fatalf("exit %d, want a failure naming -allow:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(out); err == nil {
		if ents, _ := os.ReadDir(out); len(ents) > 0 {
			t.Errorf("the failed run wrote %d files into %s", len(ents), out)
		}
	}
	goleak.VerifyNone(t, before, natsLeak)
}

// -workers on a worker is its copies of each compute task, and its default
// is the machine's cores; -cluster N's local workers get -workers when it
// is given, otherwise a share of the cores.
func TestClusterWorkerCopies(t *testing.T) {
	needNATSServer(t)
	cores := runtime.GOMAXPROCS(0)
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-worker", "-nats", "nats://127.0.0.1:4222"}, cores},
		{[]string{"-worker", "-nats", "nats://127.0.0.1:4222", "-workers", "3"}, 3},
		{[]string{"-cluster", "2", "-dir", "d", "-rows", "2", "-cols", "2", "-out", "o"}, max(1, cores/2)},
		{[]string{"-cluster", "2", "-dir", "d", "-rows", "2", "-cols", "2", "-out", "o", "-workers", "3"}, 3},
		{[]string{"-cluster", "4", "-dir", "d", "-rows", "2", "-cols", "2", "-out", "o", "-workers", "4"}, 4},
	} {
		c, err := parseFlags(tc.args)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		got := c.workers
		if c.cl.cluster > 0 {
			got = c.localCopies()
		}
		if got != tc.want {
			t.Errorf("%q: each worker runs %d copies of each compute task, want %d (%d cores)", tc.args, got, tc.want, cores)
		}
	}
	// The worker says so when it starts.
	srv := tokenServer(t)
	defer srv.Shutdown()
	stop := startWorker(context.Background(), "-worker", "-nats", srv.URL(), "-name", "cores")
	waitDirectory(t, context.Background(), srv.URL(), "cores")
	w := stop()
	if want := fmt.Sprintf("worker cores on %s: registering bands of rows, one at a time, with %d workers (copies of each compute task)", hostname(t), cores); w.code != 0 || !strings.Contains(w.stdout, want) {
		t.Errorf("worker: exit %d, want %q:\n%s%s", w.code, want, w.stdout, w.stderr)
	}
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	return h
}
