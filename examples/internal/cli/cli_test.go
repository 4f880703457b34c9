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
	warn, err := writeProfile(dir, "phase", fakeRun{})
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
	if _, err := writeProfile(dir, "p", fakeRun{trace: graph.ErrNoTrace}); err != nil {
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
	if got := parseKB([]byte("Name: x\nVmPeak:  9 kB\nVmHWM:\t  1234 kB\n"), "VmHWM:"); got != 1234*1024 {
		t.Fatalf("VmHWM: got %d", got)
	}
	if _, err := os.Stat("/proc/self/status"); err == nil && PeakMemory() <= 0 {
		t.Fatal("no peak memory on a machine with /proc/self/status")
	}
}
