package graph_test

import (
	"os/exec"
	"strings"
	"testing"
)

func TestMismatchedEdgeDoesNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the compiler")
	}
	out, err := exec.Command("go", "build", "-o", t.TempDir()+"/x", "./testdata/mismatch").CombinedOutput()
	if err == nil {
		t.Fatal("a string producer connected to an int consumer compiled")
	}
	if !strings.Contains(string(out), "does not match") || !strings.Contains(string(out), "main.go:17") {
		t.Fatalf("unexpected compiler output:\n%s", out)
	}
}
