// Package natstest builds the nats-server executable for the tests of
// programs that run one (cluster.StartServerProcess, -cluster N).
package natstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
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
