package htgs_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeExample returns the fenced block that follows the marker
// "<!-- readme-example: name -->" in README.md.
func readmeExample(t *testing.T, readme, name string) string {
	t.Helper()
	marker := "<!-- readme-example: " + name + " -->\n"
	i := strings.Index(readme, marker)
	if i < 0 {
		t.Fatalf("README.md has no %q marker", strings.TrimSpace(marker))
	}
	rest := readme[i+len(marker):]
	if !strings.HasPrefix(rest, "```") {
		t.Fatalf("README.md: the %s marker is not followed by a fenced block", name)
	}
	rest = rest[strings.Index(rest, "\n")+1:]
	end := strings.Index(rest, "\n```")
	if end < 0 {
		t.Fatalf("README.md: the %s block is not closed", name)
	}
	return rest[:end+1]
}

// TestREADMEExample builds and runs the README's "own module" example
// exactly as written, with the replace directive pointed at this checkout.
// It follows the README's steps (copy go.sum, go mod tidy, build, run) and
// needs no network: GOPROXY=off, and the dependencies come from the module
// cache that building this module filled.
func TestREADMEExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command; skipped with -short")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH:", err)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)

	// The README still starts with the two commands a newcomer runs, and
	// the go get block is gone from there.
	first := strings.Index(readme, "## First two commands")
	if first < 0 || strings.Count(readme[:first], "\n## ") > 0 {
		t.Error(`README.md: "## First two commands" is not the first section`)
	}
	if j := strings.Index(readme, "go get github.com/gohtgs/htgs"); j >= 0 && j < first {
		t.Error("README.md tells a newcomer to go get the unpublished module before the first two commands")
	}
	for _, cmd := range []string{"go run ./examples/stitch", "go test ./..."} {
		if k := strings.Index(readme, cmd); k < first || first < 0 {
			t.Errorf("README.md: %q is not in the first section", cmd)
		}
	}

	mod := readmeExample(t, readme, "go.mod")
	main := readmeExample(t, readme, "main.go")
	const repl = "replace github.com/gohtgs/htgs => ../htgs"
	if !strings.Contains(mod, repl+"\n") {
		t.Fatalf("README.md's go.mod lacks %q:\n%s", repl, mod)
	}
	dir := t.TempDir()
	mod = strings.Replace(mod, repl, "replace github.com/gohtgs/htgs => "+root, 1)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum")) // the README's cp ../htgs/go.sum .
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"go.mod": mod, "main.go": main, "go.sum": string(sum)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=-mod=mod")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, gobin, args...)
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	run("mod", "tidy")
	run("build", "-o", "hello", ".")
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "hello")).CombinedOutput()
	if err != nil {
		t.Fatalf("hello: %v\n%s", err, out)
	}
	if want := "sum of i*i+1 for i < 100: 328450\n"; string(out) != want {
		t.Errorf("hello printed %q, want %q (as the README says)", out, want)
	}
	if !strings.Contains(readme, "# prints: "+strings.TrimSuffix(string(out), "\n")) {
		t.Errorf("README.md does not show the output %q", out)
	}
}
