// Package natstest builds the nats-server executable for the tests of
// programs that run one (cluster.StartServerProcess, -cluster N).
package natstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
)

// BuildServer builds the nats-server executable of the version go.mod
// requires into dir and returns its path. The build inherits the
// environment (GOFLAGS, CGO_ENABLED) and, when the running binary was
// built with the race detector, -race, so that it reuses the packages the
// tests' own build left in the cache. It fails when the go command is not
// on $PATH or the module's source is not at hand.
func BuildServer(dir string) (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("natstest: build nats-server: %w", err)
	}
	path := filepath.Join(dir, "nats-server")
	args := []string{"build", "-o", path}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	cmd := exec.Command(goCmd, append(args, "github.com/nats-io/nats-server/v2")...)
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("natstest: go %v: %w\n%s", cmd.Args[1:], err, out)
	}
	return path, nil
}

// OnPath builds the nats-server executable into a new temporary folder
// (its name starting with prefix) and puts that folder first in $PATH, for
// a test binary's TestMain. It returns the function that removes the
// folder (also on failure) and why the executable could not be built.
func OnPath(prefix string) (cleanup func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return func() {}, fmt.Errorf("natstest: %w", err)
	}
	cleanup = func() { os.RemoveAll(dir) }
	if _, err := BuildServer(dir); err != nil {
		return cleanup, err
	}
	return cleanup, os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// LinkedServer lists the packages of module (the NATS server's,
// cluster.NATSServerModule) that the package in the current folder links
// (go list -deps); a program that
// runs a nats-server executable should list none. It is an error when
// go list fails or the package does not even import package cluster (the
// check would then prove nothing).
func LinkedServer(module string) ([]string, error) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("natstest: go list -deps: %w\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/gohtgs/htgs/cluster") {
		return nil, fmt.Errorf("natstest: go list -deps lists %d packages without cluster: %s", len(deps), out)
	}
	var linked []string
	for _, p := range deps {
		if strings.HasPrefix(p, module) {
			linked = append(linked, p)
		}
	}
	return linked, nil
}
