package htgs_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// publicPackages are the packages whose documentation users read.
var publicPackages = []string{
	"task", "graph", "graph/observe", "bookkeeper", "memmgr", "pipeline", "device", "cuda", "cuda/cudapool",
	"matmul", "matmul/npy", "stitching", "stitching/align", "stitching/tileio",
	"stitching/compose", "stitching/synth", "pats", "region", "tiled", "cap", "cluster",
}

// TestPublicAPINamesNoInternals guards issue 23's first rule: the public
// API a reader follows with go doc names no internal type. A signature,
// field or embedded type that mentions internal/core (or the aliases the
// packages once embedded) shows in go doc -all and fails this test.
func TestPublicAPINamesNoInternals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go doc")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	// Whole words only: "score." in a sentence is not the package core.
	forbidden := regexp.MustCompile(`\bcore\.|internal/|\binRef\b|\boutRef\b`)
	for _, p := range publicPackages {
		out, err := exec.Command("go", "doc", "-all", "./"+p).CombinedOutput()
		if err != nil {
			t.Errorf("go doc -all ./%s: %v\n%s", p, err, out)
			continue
		}
		for i, line := range strings.Split(string(out), "\n") {
			if f := forbidden.FindString(line); f != "" {
				t.Errorf("go doc -all ./%s, line %d mentions %q: %s", p, i+1, f, strings.TrimSpace(line))
			}
		}
	}
}

// module prefixes the import paths of the module's packages.
const module = "github.com/gohtgs/htgs/"

// frameworkPackages are the framework's own: they link nothing but the
// standard library, and neither its HTTP server nor os/exec (a program
// opts in to those by importing graph/observe).
var frameworkPackages = []string{"task", "device", "graph", "bookkeeper", "memmgr", "pipeline", "internal/core"}

// TestFrameworkLinksOnlyTheStandardLibrary guards issue 30's first rule:
// go list -deps of a framework package shows, beside the module's own
// framework packages, only standard-library packages, and neither
// net/http nor os/exec.
func TestFrameworkLinksOnlyTheStandardLibrary(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	own := map[string]bool{}
	for _, p := range frameworkPackages {
		own[module+p] = true
	}
	for _, p := range frameworkPackages {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", "./"+p).CombinedOutput()
		if err != nil {
			t.Errorf("go list -deps ./%s: %v\n%s", p, err, out)
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			path, std, _ := strings.Cut(line, " ")
			switch {
			case path == "net/http" || path == "os/exec":
				t.Errorf("%s links %s", p, path)
			case std != "true" && !own[path]:
				t.Errorf("%s links %s, which is neither the standard library nor a framework package", p, path)
			}
		}
	}
}

// TestInternalImportsNoPublicPackage guards issue 30's layering: the
// packages under internal/ sit below the public ones, so none imports a
// public package of the module, but the runtime (internal/core), which
// runs the tasks of package task on the devices of package device.
func TestInternalImportsNoPublicPackage(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./internal/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list ./internal/...: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := fields[0]
		for _, imp := range fields[1:] {
			public := strings.HasPrefix(imp, module) && !strings.HasPrefix(imp, module+"internal/")
			allowed := pkg == module+"internal/core" && (imp == module+"task" || imp == module+"device")
			if public && !allowed {
				t.Errorf("%s imports the public package %s", pkg, imp)
			}
		}
	}
}
