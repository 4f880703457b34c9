package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/cluster"
	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/internal/natsconn/natstest"
)

// natsServerErr says why the nats-server executable that -cluster runs
// could not be built for the tests (nil when TestMain built it and put its
// folder first in $PATH).
var natsServerErr error

// setupNATSServer builds the nats-server executable into a temporary
// folder put first in $PATH, and returns the function that removes it.
// On failure the tests that run -cluster skip, saying why.
func setupNATSServer() func() {
	cleanup, err := natstest.OnPath("pathology-test-nats-")
	if natsServerErr = err; err != nil {
		fmt.Fprintf(os.Stderr, "the tests of -cluster skip: %v\n", err)
	}
	return cleanup
}

// needNATSServer skips the test when TestMain could not build nats-server.
func needNATSServer(t testing.TB) {
	t.Helper()
	if natsServerErr != nil {
		t.Skipf("-cluster needs a nats-server executable: %v", natsServerErr)
	}
}

// TestNoNATSServerLinked guards issue 37's cold start: the program runs a
// nats-server executable for -cluster and does not link the server (about
// 40 s of a first build).
func TestNoNATSServerLinked(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	linked, err := natstest.LinkedServer(cluster.NATSServerModule)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range linked {
		t.Errorf("pathology links %s", p)
	}
}

// TestClusterNeedsServerExecutable: -cluster without a nats-server
// executable is a usage error before any work, saying how to get one.
func TestClusterNeedsServerExecutable(t *testing.T) {
	grid := []string{"-cluster", "2", "-tiles", "2", "-tile-size", "32"}
	missing := filepath.Join(t.TempDir(), "no-nats-server")
	t.Setenv("PATH", t.TempDir()) // no nats-server there
	for _, args := range [][]string{grid, append(grid, "-nats-server", missing)} {
		var out, errw strings.Builder
		err := run(context.Background(), args, &out, &errw)
		var ue cli.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", args, err)
			continue
		}
		for _, want := range []string{"-cluster 2 runs a NATS server", "go install " + cluster.NATSServerModule + "@" + cluster.NATSServerVersion} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: %v, want %q in it", args, err, want)
			}
		}
		if out.Len() > 0 {
			t.Errorf("%q: printed %q before the usage error", args, out.String())
		}
	}
	var out, errw strings.Builder
	if err := run(context.Background(), []string{"-nats-server", missing, "-tiles", "2"}, &out, &errw); err == nil || !strings.Contains(err.Error(), "applies to -cluster") {
		t.Errorf("-nats-server without -cluster: %v", err)
	}
}
