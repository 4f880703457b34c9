package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// The constructs' graphs and the parallelism probe start goroutines; none
// may outlive a run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runArgs runs the program in-process with a short spin loop and returns
// its exit status, stdout and stderr.
func runArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := realMain(args, &out, &errOut, 1_000_000)
	return code, out.String(), errOut.String()
}

// A small model run writes a well-formed figure and CSV; a small
// throughput run completes.
func TestSmallRuns(t *testing.T) {
	dir := t.TempDir()
	svg, csv := filepath.Join(dir, "m.svg"), filepath.Join(dir, "runs.csv")
	code, out, errOut := runArgs(t, "-width", "256", "-height", "192", "-sizes", "64,128", "-workers", "1,2", "-rounds", "1",
		"-svg", svg, "-raw", csv, "-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(s, "<svg") || !strings.HasSuffix(s, "</svg>\n") || strings.Count(s, "<circle") < 2*2*2 {
		t.Fatalf("figure malformed:\n%s", s)
	}
	if !strings.Contains(out, "figure written to "+svg) {
		t.Errorf("output does not say where the figure went:\n%s", out)
	}
	if b, err := os.ReadFile(csv); err != nil || strings.Count(string(b), "\n") != 1+3*2*2 {
		t.Errorf("CSV (%v):\n%s", err, b)
	}
	if code, _, errOut := runArgs(t, "-mosaic", "2x2", "-mem", "16", "-rounds", "1", "-dir", dir); code != 0 {
		t.Fatalf("throughput: exit %d: %s", code, errOut)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("-dir holds %v, want only the figure and the CSV", ents)
	}
}

// -h prints usage and exits 0 (the image's height is -height); mistakes in
// the command line, and options a mode would not use, exit 2 before any
// work; a folder that is missing or cannot be written exits 1, also before
// any work.
func TestFlags(t *testing.T) {
	code, out, errOut := runArgs(t, "-h")
	if code != 0 || errOut != "" || !strings.Contains(out, "usage:") || !strings.Contains(out, "-height") {
		t.Errorf("-h: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	dir := t.TempDir()
	svg := filepath.Join(dir, "f.svg")
	for _, bad := range [][]string{
		{"-mosaic", "4x"}, {"-mosaic", "0x5"}, {"-mosaic", "4x5x"}, {"-sizes", "128,x"}, {"-workers", "0"},
		{"-rounds", "0"}, {"-rounds", "-1"}, {"-dd", "sync"}, {"-paths", "tiled,bogus", "-mosaic", "4x5"},
		{"-paths", "model,stream", "-mosaic", "4x5"}, {"-tile", "256"}, {"-paths", "stream"},
		{"-mosaic", "4x5", "-paths", "model", "-svg", svg}, {"-mosaic", "4x5", "-raw", svg}, {"-mosaic", "4x5", "-height", "8"},
		{"-mosaic", "4x5", "-sizes", "256"}, {"-svg", dir}, {"-raw", dir}, {"-svg", svg, "-raw", svg},
		{"-svg", filepath.Join(dir, "dst.raw"), "-dir", dir}, {"-w", "8"}, {"extra"},
	} {
		code, out, errOut := runArgs(t, bad...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "capmodel: ") || !strings.HasSuffix(errOut, "Run 'capmodel -h' for usage.\n") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, one error and the hint", bad, code, out, errOut)
		}
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	failing := [][]string{
		{"-dir", filepath.Join(dir, "missing")}, {"-mosaic", "2x2", "-dir", filepath.Join(dir, "missing")}, {"-dir", file},
		{"-svg", filepath.Join(dir, "missing", "f.svg")}, {"-raw", filepath.Join(file, "f.csv")},
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		failing = append(failing, []string{"-svg", filepath.Join(ro, "f.svg")}, []string{"-mosaic", "2x2", "-dir", ro})
	}
	for _, bad := range failing {
		code, out, errOut := runArgs(t, bad...)
		if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 1, one error line and no work", bad, code, out, errOut)
		}
	}
}

// A temporary file that a killed run left beside -svg is removed by the
// next run, which says so on stderr.
func TestStaleTemporaryRemoved(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("cannot start a process: %v", err)
	}
	dir := t.TempDir()
	stale := filepath.Join(dir, fmt.Sprintf(".m.svg.tmp-%d-7", dead.Process.Pid))
	if err := os.WriteFile(stale, []byte("<svg"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runArgs(t, "-width", "64", "-height", "64", "-sizes", "64", "-workers", "1", "-rounds", "1", "-svg", filepath.Join(dir, "m.svg"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(stale); err == nil || !strings.Contains(errOut, "removed "+stale) {
		t.Errorf("stale file: %v; stderr %q", err, errOut)
	}
}
