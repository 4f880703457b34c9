package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/cluster/natsserver"
	"github.com/gohtgs/htgs/internal/natsconn"
)

// otherHost is a worker process on another "host": a network namespace of
// its own, reached over a veth pair, and a mount namespace with its own
// /tmp, so that it sees none of the client's files (the tiles are under
// /tmp).
type otherHost struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   syncOutput
	done  chan error
}

// syncOutput is a bytes.Buffer safe for a process's concurrent writes.
type syncOutput struct {
	buf bytes.Buffer
	mu  chan struct{}
}

func (s *syncOutput) Write(p []byte) (int, error) {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.buf.Write(p)
}

func (s *syncOutput) String() string {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.buf.String()
}

// startOtherHost makes the namespaces (skipping the test where it cannot:
// not root, no ip or unshare) and starts a stitch worker in them joining a
// server listening on the host side's address. It returns the server.
func startOtherHost(t *testing.T, name string) (*natsserver.Server, *otherHost) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making network and mount namespaces needs root")
	}
	for _, tool := range []string{"ip", "unshare", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here: %v", tool, err)
		}
	}
	sh := func(args ...string) error {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	id := os.Getpid() % 100000
	ns, hostIf, peerIf := fmt.Sprintf("htgs-host-%d", id), fmt.Sprintf("htgsh%d", id), fmt.Sprintf("htgsp%d", id)
	hostIP, peerIP := fmt.Sprintf("10.213.%d.1", id%250), fmt.Sprintf("10.213.%d.2", id%250)
	if err := sh("ip", "netns", "add", ns); err != nil {
		t.Skipf("no network namespace here: %v", err)
	}
	t.Cleanup(func() { _ = sh("ip", "netns", "del", ns) })
	if err := sh("ip", "link", "add", hostIf, "type", "veth", "peer", "name", peerIf); err != nil {
		t.Skipf("no veth pair here: %v", err)
	}
	t.Cleanup(func() { _ = sh("ip", "link", "del", hostIf) })
	for _, cmd := range [][]string{
		{"ip", "link", "set", peerIf, "netns", ns},
		{"ip", "addr", "add", hostIP + "/30", "dev", hostIf},
		{"ip", "link", "set", hostIf, "up"},
		{"ip", "netns", "exec", ns, "ip", "addr", "add", peerIP + "/30", "dev", peerIf},
		{"ip", "netns", "exec", ns, "ip", "link", "set", peerIf, "up"},
		{"ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"},
	} {
		if err := sh(cmd...); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := natsserver.Start(natsserver.Host(hostIP))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)

	// The worker's own /tmp hides the test binary too: it runs a copy
	// from elsewhere.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	binDir, err := os.MkdirTemp("/var/tmp", "htgs-other-host-")
	if err != nil {
		t.Skipf("no folder outside /tmp for the worker's program: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	prog, err := os.ReadFile(exe)
	if err == nil {
		err = os.WriteFile(filepath.Join(binDir, "stitch.test"), prog, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	h := &otherHost{done: make(chan error, 1)}
	h.out.mu = make(chan struct{}, 1)
	h.cmd = exec.Command("ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private",
		"sh", "-c", `mount -t tmpfs tmpfs /tmp && exec "$0" "$@"`,
		filepath.Join(binDir, "stitch.test"), "-worker", "-nats", srv.URL(), "-name", name, "-workers", "2")
	h.cmd.Env = append(os.Environ(), natsconn.EnvToken+"="+srv.Token(), envChild+"=1")
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.out
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.done <- h.cmd.Wait() }()
	t.Cleanup(func() {
		h.stdin.Close() // a supervised worker stops when its stdin closes
		select {
		case err := <-h.done:
			if err != nil {
				t.Errorf("worker on the other host: %v\n%s", err, h.out.String())
			}
		case <-time.After(15 * time.Second):
			_ = h.cmd.Process.Kill()
			<-h.done
			t.Errorf("worker on the other host did not stop\n%s", h.out.String())
		}
	})
	return srv, h
}

// A worker on another "host" (its own network and mount namespaces, so its
// own /tmp: the client's tiles are not there) registers the bands of a
// -nats client with -tiles-via store, and the outputs are the
// single-process run's byte for byte; with -tiles-via folder the same
// worker cannot read the tiles, and the run fails naming it.
func TestClusterWorkerOtherHost(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before, natsLeak) }) // after the other clean-ups
	ctx := context.Background()
	dir := generated(t, 4, 5, 1, nil)
	grid := []string{"-dir", dir, "-rows", "4", "-cols", "5", "-workers", "2"}
	single := t.TempDir()
	if r := runArgs(t, ctx, append(grid, "-out", single)...); r.code != 0 {
		t.Fatalf("single process: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	srv, h := startOtherHost(t, "otherhost")
	t.Setenv(natsconn.EnvToken, srv.Token())

	out := t.TempDir()
	r := runArgs(t, ctx, append(grid, "-out", out, "-nats", srv.URL(), "-band-rows", "2", "-tiles-via", "store")...)
	if r.code != 0 {
		t.Fatalf("-tiles-via store: exit %d\n%s%s\nworker:\n%s", r.code, r.stdout, r.stderr, h.out.String())
	}
	sameOutputs(t, single, out)
	if !strings.Contains(r.stdout, "by worker otherhost on ") {
		t.Errorf("stdout:\n%s", r.stdout)
	}

	r = runArgs(t, ctx, append(grid, "-out", t.TempDir(), "-nats", srv.URL(), "-band-rows", "2")...)
	if r.code == 0 || !strings.Contains(r.stderr, "worker otherhost") || !strings.Contains(r.stderr, "no such file or directory") {
		t.Errorf("-tiles-via folder on a worker without the folder: exit %d, want a failure naming the worker and the missing folder\n%s", r.code, r.stderr)
	}
	t.Logf("worker:\n%s", h.out.String())
}
