package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runArgs runs the program in-process and returns its exit status, stdout
// and stderr.
func runArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := realMain(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// Every output is checked before the work: a -nuclei that is a folder, a
// -profile file, or in a folder that is missing or cannot be written is
// refused with nothing run (no "processed" line); so is a -dir that no
// disk storage would use.
func TestOutputsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	small := []string{"-tiles", "2", "-tile-size", "48", "-scale", "0.001"}
	cases := []struct {
		args []string
		code int
	}{
		{[]string{"-nuclei", dir}, 2},
		{[]string{"-nuclei", filepath.Join(dir, "p", "pathology.dot"), "-profile", filepath.Join(dir, "p")}, 2},
		{[]string{"-dir", dir}, 2},
		{[]string{"-sim", "-storage", "disk", "-dir", dir}, 2},
		{[]string{"-nuclei", filepath.Join(dir, "missing", "n.json")}, 1},
		{[]string{"-nuclei", filepath.Join(file, "n.json")}, 1},
		{[]string{"-cluster", "1", "-nuclei", dir}, 2},
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct {
			args []string
			code int
		}{[]string{"-nuclei", filepath.Join(ro, "n.json")}, 1})
	}
	for _, c := range cases {
		code, out, errOut := runArgs(t, append(small, c.args...)...)
		if code != c.code || out != "" || !strings.HasPrefix(errOut, "pathology: ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d and nothing run", c.args, code, out, errOut, c.code)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 3 {
		t.Errorf("the refused runs left files: %v", ents)
	}
}

// Temporary files that killed runs left beside the outputs (-nuclei, the
// -profile files, -experiment's files in -out) are removed before the
// work, each named on stderr; files of a live writer and other files are
// kept.
func TestStaleOutputsRemoved(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("cannot start a process: %v", err)
	}
	pid := dead.Process.Pid
	dir, prof := t.TempDir(), t.TempDir()
	write := func(path string) string {
		t.Helper()
		if err := os.WriteFile(path, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	stale := []string{
		write(filepath.Join(dir, fmt.Sprintf(".n.json.tmp-%d-7", pid))),
		write(filepath.Join(prof, fmt.Sprintf(".pathology.dot.tmp-%d-8", pid))),
	}
	live := write(filepath.Join(dir, fmt.Sprintf(".n.json.tmp-%d-9", os.Getpid())))
	other := write(filepath.Join(dir, fmt.Sprintf(".other.json.tmp-%d-7", pid)))
	code, out, errOut := runArgs(t, "-tiles", "2", "-tile-size", "48", "-scale", "0.001", "-nuclei", filepath.Join(dir, "n.json"), "-profile", prof)
	if code != 0 || !strings.Contains(out, "nuclei written to") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, s := range stale {
		if _, err := os.Stat(s); err == nil || !strings.Contains(errOut, "removed "+s) {
			t.Errorf("stale file %s: %v; stderr %q", s, err, errOut)
		}
	}
	for _, k := range []string{live, other} {
		if _, err := os.Stat(k); err != nil {
			t.Errorf("%s removed: %v", k, err)
		}
	}

	// -experiment's outputs, checked without running the experiment.
	out2 := t.TempDir()
	results := write(filepath.Join(out2, fmt.Sprintf(".results.md.tmp-%d-1", pid)))
	fig := write(filepath.Join(out2, fmt.Sprintf(".fig-window.svg.tmp-%d-2", pid)))
	o, err := parseFlags([]string{"-experiment", "-out", out2})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := o.prepareOutputs(&buf); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{results, fig} {
		if _, err := os.Stat(s); err == nil || !strings.Contains(buf.String(), "removed "+s) {
			t.Errorf("stale file %s: %v; stderr %q", s, err, buf.String())
		}
	}
}
