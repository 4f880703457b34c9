//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"image"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/cluster"
	"github.com/gohtgs/htgs/internal/natsconn"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
)

// localPIDs are the process ids of the local workers a run started.
func localPIDs(stdout string) []int {
	var pids []int
	for _, m := range regexp.MustCompile(`started local worker \S+ \(pid (\d+),`).FindAllStringSubmatch(stdout, -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	return pids
}

// gone fails unless none of pids is running (they have been waited for).
func gone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("local worker pid %d is still there (kill 0: %v)", pid, err)
		}
	}
}

// localPID returns the pid of local worker name, from the run's output.
func localPID(stdout, name string) int {
	m := regexp.MustCompile(`started local worker ` + regexp.QuoteMeta(name) + ` \(pid (\d+),`).FindStringSubmatch(stdout)
	if m == nil {
		return 0
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// Cancelling a -cluster run (Ctrl-C) mid-registration stops it with the
// cancellation and leaves no worker process behind.
func TestClusterStopsLocalWorkers(t *testing.T) {
	needNATSServer(t)
	before := goleak.IgnoreCurrent()
	dir := generated(t, 4, 5, 1, nil)
	args := []string{"-dir", dir, "-rows", "4", "-cols", "5", "-workers", "2", "-cluster", "2", "-band-rows", "1", "-mosaic=false"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &extOutput{on: func(s string) {
		if strings.Contains(s, " by worker ") {
			cancel()
		}
	}}
	var errw bytes.Buffer
	code := runMain(ctx, append(args, "-out", t.TempDir()), out, &errw)
	if code != 1 || !strings.Contains(errw.String(), "context canceled") {
		t.Errorf("cancelled run: exit %d, want 1 and the cancellation:\n%s", code, errw.String())
	}
	pids := localPIDs(out.String())
	if len(pids) != 2 {
		t.Fatalf("started %d local workers, want 2:\n%s", len(pids), out.String())
	}
	gone(t, pids)
	goleak.VerifyNone(t, before, natsLeak)
}

// A local worker of -cluster 3 killed with SIGKILL mid-registration, while
// the others hold bands too, does not fail the run: its death is reported
// (name, pid, signal), it is restarted, the band it held goes to another
// worker, and the outputs are the single-process run's byte for byte. With
// -restart=false and the only worker killed, the run fails after
// -worker-timeout with an error saying that no worker served.
func TestClusterSurvivesKilledWorker(t *testing.T) {
	needNATSServer(t)
	before := goleak.IgnoreCurrent()
	ctx := context.Background()
	dir := generated(t, 6, 5, 1, nil)
	grid := []string{"-dir", dir, "-rows", "6", "-cols", "5", "-workers", "1"}
	single := t.TempDir()
	if r := runArgs(t, ctx, append(grid, "-out", single)...); r.code != 0 {
		t.Fatalf("single process: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	t.Run("restarted", func(t *testing.T) {
		var (
			once   sync.Once
			killed string
			pid    int
		)
		out := &extOutput{on: func(s string) {
			m := bandLine.FindStringSubmatch(s)
			if m == nil {
				return
			}
			once.Do(func() {
				// The first band is done: kill another worker, mid-band.
				killed = "local-1"
				if m[3] == killed {
					killed = "local-2"
				}
				pid = localPID(s, killed)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			})
		}}
		var errw bytes.Buffer
		got := t.TempDir()
		code := runMain(ctx, append(grid, "-out", got, "-cluster", "3", "-band-rows", "1"), out, &errw)
		stdout := out.String()
		if code != 0 {
			t.Fatalf("-cluster 3 with %s killed: exit %d\n%s%s", killed, code, stdout, errw.String())
		}
		sameOutputs(t, single, got)
		died := regexp.MustCompile(`cluster: worker ` + killed + ` \(pid ` + strconv.Itoa(pid) + `\) died after \S+: signal: killed; its inputs go to the other workers; restarting it in`)
		if pid == 0 || !died.MatchString(errw.String()) {
			t.Errorf("no report of %s's death (pid %d):\n%s", killed, pid, errw.String())
		}
		if !strings.Contains(stdout, "registered 49 pairs in 6 bands") || !strings.Contains(stdout, "local workers: 1 died, ") {
			t.Errorf("stdout:\n%s", stdout)
		}
		gone(t, localPIDs(stdout))
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout, errw.String())
	})

	t.Run("no worker left", func(t *testing.T) {
		var once sync.Once
		out := &extOutput{on: func(s string) {
			if strings.Contains(s, "registration: ") {
				once.Do(func() { _ = syscall.Kill(localPID(s, "local-1"), syscall.SIGKILL) })
			}
		}}
		var errw bytes.Buffer
		start := time.Now()
		code := runMain(ctx, append(grid, "-out", t.TempDir(), "-cluster", "1", "-restart=false", "-worker-timeout", "2s"), out, &errw)
		want := `task "stitch-band": no worker has served it for 2`
		if code != 1 || !strings.Contains(errw.String(), want) || !strings.Contains(errw.String(), "local-1 (dead, given up)") {
			t.Errorf("exit %d, want 1 and %q:\n%s", code, want, errw.String())
		}
		if d := time.Since(start); d < 2*time.Second || d > 30*time.Second {
			t.Errorf("the run took %v to fail, want a little more than -worker-timeout (2 s)", d)
		}
		gone(t, localPIDs(out.String()))
	})
	goleak.VerifyNone(t, before, natsLeak)
}

// A hostile client holding the token sends band jobs straight to a worker
// started with -allow, each naming a file outside the allowed folder in a
// way the folder check alone missed: a pattern with "..", a tile that is a
// link out of the folder, a job folder that is such a link, and a FIFO
// that would block the open forever. The worker refuses every one of them
// promptly, reads nothing outside, and keeps serving.
func TestClusterWorkerAllowHostileClient(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ctx := context.Background()
	srv := tokenServer(t)
	grid := generated(t, 2, 2, 1, nil) // img_r{rrr}_c{ccc}.tif, from 1
	allow, outside := t.TempDir(), t.TempDir()
	copyGrid := func(to string) {
		if err := os.MkdirAll(to, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"img_r001_c001.tif", "img_r001_c002.tif", "img_r002_c001.tif", "img_r002_c002.tif"} {
			b, err := os.ReadFile(filepath.Join(grid, n))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(to, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyGrid(filepath.Join(outside, "secret"))
	copyGrid(filepath.Join(allow, "ok"))
	copyGrid(filepath.Join(allow, "linked"))
	os.Remove(filepath.Join(allow, "linked", "img_r002_c002.tif"))
	if err := os.Symlink(filepath.Join(outside, "secret", "img_r002_c002.tif"), filepath.Join(allow, "linked", "img_r002_c002.tif")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(allow, "dirlink")); err != nil {
		t.Fatal(err)
	}
	// A grid whose first tile is larger than the worker's -max-tile-pixels
	// (the generated tiles are 256 x 192 = 49152 px, the worker's limit).
	copyGrid(filepath.Join(allow, "big"))
	if err := synth.WriteTIFF(filepath.Join(allow, "big", "img_r001_c001.tif"), image.NewGray16(image.Rect(0, 0, 300, 200))); err != nil {
		t.Fatal(err)
	}
	copyGrid(filepath.Join(allow, "fifo"))
	os.Remove(filepath.Join(allow, "fifo", "img_r001_c002.tif"))
	if err := syscall.Mkfifo(filepath.Join(allow, "fifo", "img_r001_c002.tif"), 0o644); err != nil {
		srv.Shutdown()
		t.Skipf("no FIFOs here: %v", err)
	}

	stop := startWorker(ctx, "-worker", "-nats", srv.URL(), "-name", "fenced", "-workers", "1", "-allow", allow, "-max-tile-pixels", "49152")
	defer func() {
		if w := stop(); w.code != 0 {
			t.Errorf("worker: exit %d\n%s%s", w.code, w.stdout, w.stderr)
		}
		srv.Shutdown()
		goleak.VerifyNone(t, before, natsLeak)
	}()
	nc, err := natsconn.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	client, err := cluster.NewClient(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	remote, err := cluster.NewRemote[bandJob, bandDone](client, bandTask, cluster.Version(bandVersion))
	if err != nil {
		t.Fatal(err)
	}
	job := func(dir, pattern string) bandJob {
		return bandJob{Dir: dir, Pattern: pattern, Start: 1, Numbering: "HORIZONTALCOMBING", Origin: "UL",
			Rows: 2, Cols: 2, Row0: 0, Row1: 2, Bands: 1, Options: align.Options{}}
	}
	call := func(j bandJob) error {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		_, err := remote.Call(cctx, j)
		if cctx.Err() != nil {
			t.Fatalf("job %q %q: no answer within 60 s (worker blocked?)", j.Dir, j.Pattern)
		}
		return err
	}
	for _, c := range []struct {
		name string
		job  bandJob
		want string
	}{
		{"dotdot pattern", job(filepath.Join(allow, "ok"), "../../"+filepath.Base(outside)+"/secret/img_r{rrr}_c{ccc}.tif"), "leave the tile folder"},
		{"tile links out", job(filepath.Join(allow, "linked"), "img_r{rrr}_c{ccc}.tif"), "img_r002_c002.tif"},
		{"folder links out", job(filepath.Join(allow, "dirlink"), "img_r{rrr}_c{ccc}.tif"), "outside the folder this worker may read"},
		{"folder outside", job(filepath.Join(outside, "secret"), "img_r{rrr}_c{ccc}.tif"), "outside the folder this worker may read"},
		{"fifo", job(filepath.Join(allow, "fifo"), "img_r{rrr}_c{ccc}.tif"), "is a named pipe (FIFO)"},
		{"no pixel limit", func() bandJob {
			j := job(filepath.Join(allow, "big"), "img_r{rrr}_c{ccc}.tif")
			j.MaxTilePixels = -1
			return j
		}(), "tile too large"},
	} {
		if err := call(c.job); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a refusal containing %q", c.name, err, c.want)
		}
	}
	// The worker still serves a well-formed job inside its folder.
	if err := call(job(filepath.Join(allow, "ok"), "img_r{rrr}_c{ccc}.tif")); err != nil {
		t.Errorf("a job inside -allow: %v", err)
	}
}
