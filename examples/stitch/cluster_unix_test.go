//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// watchWriter is a stdout that calls on with everything written so far,
// each time a line is written.
type watchWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
	on  func(string)
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.on(w.buf.String())
	return len(p), nil
}

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

// Cancelling a -cluster run (Ctrl-C) mid-registration stops it with the
// cancellation and leaves no worker process behind; so does a local worker
// that dies, whose end is the error.
func TestClusterStopsLocalWorkers(t *testing.T) {
	before := goleak.IgnoreCurrent()
	dir := generated(t, 4, 5, 1, nil)
	args := []string{"-dir", dir, "-rows", "4", "-cols", "5", "-workers", "2", "-cluster", "2", "-band-rows", "1", "-mosaic=false"}

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := &watchWriter{on: func(s string) {
			if strings.Contains(s, " by worker ") {
				cancel()
			}
		}}
		var errw bytes.Buffer
		code := runMain(ctx, append(args, "-out", t.TempDir()), out, &errw)
		if code != 1 || !strings.Contains(errw.String(), "context canceled") {
			t.Errorf("cancelled run: exit %d, want 1 and the cancellation:\n%s", code, errw.String())
		}
		pids := localPIDs(out.buf.String())
		if len(pids) != 2 {
			t.Fatalf("started %d local workers, want 2:\n%s", len(pids), out.buf.String())
		}
		gone(t, pids)
	})

	t.Run("worker dies", func(t *testing.T) {
		killed := 0
		var once sync.Once
		out := &watchWriter{on: func(s string) {
			if pids := localPIDs(s); len(pids) == 2 {
				once.Do(func() {
					killed = pids[0]
					_ = syscall.Kill(pids[0], syscall.SIGKILL)
				})
			}
		}}
		var errw bytes.Buffer
		start := time.Now()
		code := runMain(context.Background(), append(args, "-out", t.TempDir()), out, &errw)
		want := "local worker local-1 (pid " + strconv.Itoa(killed) + ") ended early: signal: killed"
		if code != 1 || !strings.Contains(errw.String(), want) {
			t.Errorf("run with a killed worker: exit %d, want 1 and %q:\n%s", code, want, errw.String())
		}
		t.Logf("%s", errw.String())
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("the run took %v to notice", d)
		}
		gone(t, localPIDs(out.buf.String()))
	})
	goleak.VerifyNone(t, before, natsLeak)
}
