package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/graph"
)

func TestWriteFileFailureKeepsExisting(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.txt")
	if err := os.WriteFile(p, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteFile(p, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "precious" {
		t.Fatalf("existing file now %q", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
	if err := WriteFile(p, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if string(got) != "new" || st.Mode().Perm() != 0o600 {
		t.Fatalf("after success: %q mode %v, want \"new\" mode 0600", got, st.Mode().Perm())
	}
}

func TestOutputAbortAndCommit(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.npy")
	o, err := NewOutput(p)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(o.Temp, []byte("x"), 0o600)
	o.Abort()
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("aborted output exists: %v", err)
	}
	if _, err := os.Stat(o.Temp); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("temporary file left after Abort")
	}
	o, _ = NewOutput(p)
	os.WriteFile(o.Temp, []byte("y"), 0o600)
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	o.Abort() // no-op after Commit
	if got, _ := os.ReadFile(p); string(got) != "y" {
		t.Fatalf("committed %q", got)
	}
	if err := o.Commit(); err == nil {
		t.Fatal("second Commit succeeded")
	}
}

func TestSameFile(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	os.WriteFile(a, nil, 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(a, link); err != nil {
		t.Skip("no symlinks:", err)
	}
	for _, c := range []struct {
		x, y string
		want bool
	}{{a, a, true}, {a, link, true}, {a, filepath.Join(dir, ".", "a"), true}, {a, filepath.Join(dir, "missing"), false}} {
		got, err := SameFile(c.x, c.y)
		if err != nil || got != c.want {
			t.Errorf("SameFile(%s, %s) = %v, %v; want %v", c.x, c.y, got, err, c.want)
		}
	}
}

func TestCheckDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "out")
	if err := CheckDir(dir); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("check left files: %v", ents)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if err := CheckDir(filepath.Join(file, "sub")); err == nil {
		t.Fatal("folder under a file accepted")
	}
	if os.Geteuid() != 0 {
		ro := t.TempDir()
		os.Chmod(ro, 0o500)
		defer os.Chmod(ro, 0o700)
		if err := CheckDir(ro); err == nil {
			t.Fatal("read-only folder accepted")
		}
	}
}

func TestParseAndExit(t *testing.T) {
	newFS := func() *flag.FlagSet {
		fs := flag.NewFlagSet("prog", flag.ContinueOnError)
		fs.Int("n", 0, "a number")
		return fs
	}
	usage := func(w io.Writer) { io.WriteString(w, "usage: prog [-n N]\n") }
	for _, c := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{[]string{"-n", "3"}, 0, "", ""},
		{[]string{"-h"}, 0, "usage: prog", ""},
		{[]string{"-bogus"}, 2, "", "prog: flag provided but not defined: -bogus\nRun 'prog -h' for usage.\n"},
		{[]string{"extra"}, 2, "", "prog: unexpected arguments [\"extra\"]\n"},
	} {
		var out, errb bytes.Buffer
		code := Exit("prog", Parse(newFS(), c.args), &out, &errb, usage)
		if code != c.code || !strings.HasPrefix(out.String(), c.stdout) || !strings.HasPrefix(errb.String(), c.errs) {
			t.Errorf("%v: code %d stdout %q stderr %q", c.args, code, out.String(), errb.String())
		}
		if strings.Count(errb.String(), "bogus") > 1 {
			t.Errorf("%v: error printed twice: %q", c.args, errb.String())
		}
	}
	var errb bytes.Buffer
	if code := Exit("prog", errors.New("failed"), io.Discard, &errb, usage); code != 1 || errb.String() != "prog: failed\n" {
		t.Errorf("run error: code %d, %q", code, errb.String())
	}
}

type fakeRun struct{ trace error }

func (fakeRun) Stats() graph.Stats { return graph.Stats{} }
func (fakeRun) WriteDOT(w io.Writer, _ graph.DOTOptions) error {
	_, err := io.WriteString(w, "digraph { this is not valid dot ( }\n")
	return err
}
func (f fakeRun) WriteTrace(w io.Writer) error {
	if f.trace != nil {
		return f.trace
	}
	_, err := io.WriteString(w, `{"traceEvents":[]}`)
	return err
}

func TestWriteProfileKeepsTraceWhenDotFails(t *testing.T) {
	dir := t.TempDir()
	warn, err := WriteProfile(dir, "phase", fakeRun{})
	if err != nil {
		t.Fatal(err)
	}
	if warn == nil {
		t.Fatal("invalid DOT (or no dot installed) gave no warning")
	}
	for _, f := range []string{"phase-trace.json", "phase-stats.json", "phase.dot"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "phase.svg")); err == nil {
		t.Error("an SVG was written for invalid DOT")
	}
	// A run without a trace still gets its statistics and picture.
	dir = t.TempDir()
	if _, err := WriteProfile(dir, "p", fakeRun{trace: graph.ErrNoTrace}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "p-trace.json")); err == nil {
		t.Error("trace written for a run without one")
	}
}

func TestParseMemAvailable(t *testing.T) {
	in := "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n"
	if got := parseMemAvailable([]byte(in)); got != 2048*1024 {
		t.Fatalf("got %d", got)
	}
	for _, bad := range []string{"", "MemAvailable: x kB", "MemAvailable: 99999999999999999999 kB"} {
		if got := parseMemAvailable([]byte(bad)); got != 0 {
			t.Errorf("%q: got %d, want 0", bad, got)
		}
	}
	if AvailableMemory() < 0 {
		t.Fatal("negative memory")
	}
}

func TestAbortNil(t *testing.T) {
	var o *Output
	o.Abort() // must not panic
}
