package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/internal/natsconn/natstest"
)

// buildServer builds the nats-server executable into a temporary folder,
// or skips the test saying why it cannot.
func buildServer(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds nats-server")
	}
	path, err := natstest.BuildServer(t.TempDir())
	if err != nil {
		t.Skipf("cannot build the nats-server executable: %v", err)
	}
	return path
}

// TestServerProcess runs a nats-server executable as a child process: it
// accepts only its token on loopback, carries JetStream and 8 MiB
// payloads, and Shutdown stops it and removes its folder.
func TestServerProcess(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	path := buildServer(t)
	s, err := StartServerProcess(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.URL(), "nats://127.0.0.1:") {
		t.Errorf("URL %q: want nats://127.0.0.1:PORT", s.URL())
	}
	if !strings.Contains(s.AuthURL(), s.Token()+"@127.0.0.1:") || len(s.Token()) < 32 {
		t.Errorf("AuthURL %q, token %d characters", s.AuthURL(), len(s.Token()))
	}
	if nc, err := nats.Connect(s.URL(), nats.Token("wrong")); err == nil {
		nc.Close()
		t.Error("a wrong token was accepted")
	}
	if nc, err := nats.Connect(s.URL()); err == nil {
		nc.Close()
		t.Error("no token was accepted")
	}
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AddStream(&nats.StreamConfig{Name: "T", Subjects: []string{"t"}}); err != nil {
		t.Fatalf("JetStream: %v", err)
	}
	big := make([]byte, 6<<20)
	if _, err := js.Publish("t", big); err != nil {
		t.Errorf("6 MiB message: %v", err)
	}
	nc.Close()
	for _, f := range []string{"nats-server.conf", "nats-server.log"} {
		fi, err := os.Stat(filepath.Join(s.dir, f))
		if err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v, mode %v: want only this user's", f, err, fi.Mode())
		}
	}
	if _, err := os.Stat(s.StoreDir()); err != nil {
		t.Errorf("store: %v", err)
	}
	dir := s.dir
	if err := s.Shutdown(); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	select {
	case <-s.done:
	default:
		t.Error("the server process runs on after Shutdown")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after Shutdown: %v, want removed", dir, err)
	}
	if err := s.Shutdown(); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

// TestServerProcessFails: a program that is not a nats-server, or exits
// at once, gives an error with its output, and leaves no folder behind.
func TestServerProcessFails(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	script := filepath.Join(t.TempDir(), "fake-server")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho fake server refuses >&2\nexit 7\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A folder of its own for the servers' folders: other packages' tests,
	// running at the same time, start servers under the shared one.
	t.Setenv("TMPDIR", t.TempDir())
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "htgs-nats-*"))
	_, err := StartServerProcess(context.Background(), script)
	if err == nil || !strings.Contains(err.Error(), "fake server refuses") || !strings.Contains(err.Error(), "exit status 7") {
		t.Errorf("error %v: want the exit status and the program's output", err)
	}
	if _, err := StartServerProcess(context.Background(), filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing executable started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	sleeper := filepath.Join(t.TempDir(), "silent-server")
	if err := os.WriteFile(sleeper, []byte("#!/bin/sh\nexec sleep 30\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := StartServerProcess(ctx, sleeper); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a server that never listens: %v, want the context's deadline", err)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "htgs-nats-*"))
	if len(after) > len(before) {
		t.Errorf("folders left behind: %v (before: %v)", after, before)
	}
}

// TestFindServerExecutable: a missing executable gives an error telling
// how to install the pinned version, which is the one go.mod requires.
func TestFindServerExecutable(t *testing.T) {
	_, err := FindServerExecutable(filepath.Join(t.TempDir(), "nats-server"))
	if err == nil || !strings.Contains(err.Error(), "go install "+NATSServerModule+"@"+NATSServerVersion) {
		t.Errorf("error %v: want how to install it", err)
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), NATSServerModule+" "+NATSServerVersion+"\n") {
		t.Errorf("go.mod does not require %s %s: update NATSServerVersion", NATSServerModule, NATSServerVersion)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := FindServerExecutable(exe); err != nil || got != exe {
		t.Errorf("FindServerExecutable(%s) = %q, %v", exe, got, err)
	}
}
