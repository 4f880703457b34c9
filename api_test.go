package htgs_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// publicPackages are the packages whose documentation users read.
var publicPackages = []string{
	"task", "graph", "bookkeeper", "memmgr", "pipeline", "device", "cuda",
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
