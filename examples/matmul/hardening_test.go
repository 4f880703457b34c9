package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fmt"
	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/matmul"
	"github.com/gohtgs/htgs/matmul/npy"
	"os/exec"
)

// writeNpy writes d to dir/name and returns the path.
func writeNpy(t *testing.T, dir, name string, d *matmul.Dense) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := npy.Write(p, d.R, d.C, d.Data); err != nil {
		t.Fatal(err)
	}
	return p
}

func readBytes(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// noTempFiles fails if dir holds a temporary file of an output.
func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left in %s", e.Name(), dir)
		}
	}
}

// stub replaces *v with x for the test.
func stub[T any](t *testing.T, v *T, x T) {
	t.Helper()
	old := *v
	*v = x
	t.Cleanup(func() { *v = old })
}

// Issue 12, item 1: -o naming an input (or a link to one) is refused
// before anything is read or written, in memory and out of core.
func TestOutputSameAsInputRefused(t *testing.T) {
	dir := t.TempDir()
	ap := writeNpy(t, dir, "a.npy", matmul.Random(40, 40, 1))
	bp := writeNpy(t, dir, "b.npy", matmul.Random(40, 40, 2))
	link := filepath.Join(dir, "link.npy")
	if err := os.Symlink(ap, link); err != nil {
		t.Fatal(err)
	}
	wantA, wantB := readBytes(t, ap), readBytes(t, bp)
	for _, extra := range [][]string{
		nil,                                  // in memory
		{"-mem", "32KiB"},                    // out of core
		{"-op", "hadamard"},                  // in memory
		{"-op", "hadamard", "-mem", "32KiB"}, // out of core
	} {
		for _, out := range []string{ap, bp, link} {
			args := append([]string{"-a", ap, "-b", bp, "-o", out, "-block", "16", "-verify"}, extra...)
			code, stdout, errOut := runArgs(t, args...)
			if code != 2 || !strings.Contains(errOut, "same file") || !strings.Contains(errOut, "Run 'matmul -h'") {
				t.Errorf("-o %s %v: exit %d, stderr %q, stdout %q; want 2 and a same-file usage error",
					filepath.Base(out), extra, code, errOut, stdout)
			}
			if !bytes.Equal(readBytes(t, ap), wantA) || !bytes.Equal(readBytes(t, bp), wantB) {
				t.Fatalf("-o %s %v: an input was overwritten", filepath.Base(out), extra)
			}
		}
	}
	noTempFiles(t, dir)
}

// Issue 12, item 2: a failed run leaves an existing output (and the
// profile folder) as it was; a successful one replaces it; no temporary
// file is left either way.
func TestFailedRunKeepsExistingOutput(t *testing.T) {
	dir := t.TempDir()
	ap := writeNpy(t, dir, "a.npy", matmul.Random(40, 30, 1))
	bp := writeNpy(t, dir, "b.npy", matmul.Random(30, 50, 2))
	cp := filepath.Join(dir, "c.npy")
	prof := filepath.Join(dir, "prof")
	if err := os.MkdirAll(prof, 0o755); err != nil {
		t.Fatal(err)
	}
	precious := []byte("precious, not a matrix")
	profFiles := []string{"matmul-stats.json", "matmul-trace.json", "matmul.dot", "matmul-report.json"}
	reset := func() {
		if err := os.WriteFile(cp, precious, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, f := range profFiles {
			if err := os.WriteFile(filepath.Join(prof, f), precious, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"budget too small, files", []string{"-a", ap, "-b", bp, "-mem", "1KiB"}},
		{"budget too small, random", []string{"-n", "100", "-mem", "1KiB", "-tmp", t.TempDir()}},
		{"budget too small, hadamard", []string{"-a", ap, "-b", ap, "-op", "hadamard", "-mem", "1KiB"}},
		{"shapes differ", []string{"-a", ap, "-b", ap}},
	} {
		reset()
		args := append([]string{"-o", cp, "-block", "16", "-profile", prof}, tc.args...)
		code, _, errOut := runArgs(t, args...)
		if code == 0 {
			t.Errorf("%s: succeeded", tc.name)
		}
		if got := readBytes(t, cp); !bytes.Equal(got, precious) {
			t.Errorf("%s: the failed run (stderr %q) changed the existing -o file (now %d bytes)", tc.name, errOut, len(got))
		}
		for _, f := range profFiles {
			if got := readBytes(t, filepath.Join(prof, f)); !bytes.Equal(got, precious) {
				t.Errorf("%s: the failed run changed %s", tc.name, f)
			}
		}
		noTempFiles(t, dir)
		noTempFiles(t, prof)
	}
	// A cancelled run, in memory and out of core.
	for _, mem := range []string{"", "32KiB"} {
		reset()
		args := []string{"-a", ap, "-b", bp, "-o", cp, "-block", "16"}
		if mem != "" {
			args = append(args, "-mem", mem)
		}
		ctx, cancel := contextCancelled()
		var o, e bytes.Buffer
		code := run(ctx, args, &o, &e)
		cancel()
		if code != 1 || !bytes.Equal(readBytes(t, cp), precious) {
			t.Errorf("cancelled run -mem %q: exit %d (stderr %q); -o file kept: %v", mem, code, e.String(), bytes.Equal(readBytes(t, cp), precious))
		}
		noTempFiles(t, dir)
	}
	// Success replaces the file, keeping its mode.
	for _, mem := range []string{"", "32KiB"} {
		reset()
		if err := os.Chmod(cp, 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"-a", ap, "-b", bp, "-o", cp, "-block", "16", "-verify"}
		if mem != "" {
			args = append(args, "-mem", mem)
		}
		if code, out, errOut := runArgs(t, args...); code != 0 {
			t.Fatalf("-mem %q: exit %d\n%s%s", mem, code, out, errOut)
		}
		if r, c, _, err := npy.Read(cp); err != nil || r != 40 || c != 50 {
			t.Errorf("-mem %q: C after success: %dx%d, %v", mem, r, c, err)
		}
		if st, err := os.Stat(cp); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("-mem %q: mode of the replaced C: %v %v", mem, st.Mode(), err)
		}
		noTempFiles(t, dir)
	}
}

// Issue 12, item 8: sizes whose byte counts overflow are refused, not a
// makeslice panic.
func TestSizeOverflowRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "3000000000"},
		{"-n", "3000000000", "-mem", "1GiB"},
		{"-n", "1100000000", "-mem", "1GiB", "-op", "hadamard"},
		{"-n", "9223372036854775807"},
	} {
		code, _, errOut := runArgs(t, args...)
		if code != 2 || !strings.Contains(errOut, "too large") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and \"too large\"", args, code, errOut)
		}
	}
}

// Issue 12, item 8: a product that does not fit in the machine's memory is
// refused before any work, with the size needed and a hint to use -mem;
// with -mem it runs out of core.
func TestMemoryRefused(t *testing.T) {
	stub(t, &availableMemory, func() int64 { return 1 << 20 })
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-n", "300"}, []string{"2.05 MiB", "1 MiB", "-mem"}},
		{[]string{"-n", "40000"}, []string{"35.76 GiB", "-mem"}},
		{[]string{"-n", "300", "-mem", "512KiB", "-verify"}, []string{"-verify", "2.74 MiB", "1 MiB"}},
	} {
		code, out, errOut := runArgs(t, tc.args...)
		if code != 1 || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want 1 and nothing done", tc.args, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, errOut, w)
			}
		}
	}
	// With -mem it runs out of core; a budget above the available memory
	// is lowered to it.
	for _, mem := range []string{"512KiB", "1GiB"} {
		code, out, errOut := runArgs(t, "-n", "300", "-block", "64", "-mem", mem, "-tmp", t.TempDir())
		if code != 0 || !strings.Contains(out, "out of core") {
			t.Errorf("-mem %s: exit %d\n%s%s", mem, code, out, errOut)
		}
		if mem == "1GiB" && !strings.Contains(errOut, "more than the 1 MiB") {
			t.Errorf("-mem 1GiB: no note that the budget was lowered: %q", errOut)
		}
	}
	// -n 40000 without the stub, where this machine cannot hold it.
	if avail := cli.AvailableMemory(); avail > 0 && avail < 3*8*40000*40000 {
		stub(t, &availableMemory, cli.AvailableMemory)
		if code, _, errOut := runArgs(t, "-n", "40000"); code != 1 || !strings.Contains(errOut, "-mem") {
			t.Errorf("-n 40000: exit %d, stderr %q", code, errOut)
		}
	}
}

// Issue 12, item 8: an out-of-core run whose files do not fit on the disk
// is refused before writing them.
func TestDiskSpaceRefused(t *testing.T) {
	tmp := t.TempDir()
	stub(t, &freeSpace, func(dir string) (int64, uint64, bool) { return 1 << 20, 1, true })
	code, out, errOut := runArgs(t, "-n", "300", "-block", "64", "-mem", "512KiB", "-tmp", tmp)
	if code != 1 || out != "" || !strings.Contains(errOut, "free") || !strings.Contains(errOut, "2.06 MiB") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and a disk-space error", code, out, errOut)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("temporary files written: %v", ents)
	}
}

// sparseNpy creates a .npy file claiming rows x cols elements whose data
// section is a hole, or skips the test where the file system cannot.
func sparseNpy(t *testing.T, dir, name string, rows, cols int) string {
	t.Helper()
	p := filepath.Join(dir, name)
	w, err := npy.Create(p, rows, cols)
	if err != nil {
		t.Skipf("cannot create a sparse %dx%d file: %v", rows, cols, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue 12, item 8: -a/-b files whose headers claim huge shapes are
// refused before anything is allocated.
func TestHugeHeadersRefused(t *testing.T) {
	stub(t, &availableMemory, func() int64 { return 1 << 30 })
	stub(t, &freeSpace, func(dir string) (int64, uint64, bool) { return 1 << 30, 1, true })
	if math.MaxInt == math.MaxInt32 {
		t.Skip("32-bit int: no such shapes")
	}
	one := 1 // a variable, so that 1<<31 compiles for 32-bit ints too
	dir := t.TempDir()
	tall := sparseNpy(t, dir, "tall.npy", one<<31, 1) // 16 GiB, a hole
	wide := sparseNpy(t, dir, "wide.npy", 1, one<<31)
	a := sparseNpy(t, dir, "a.npy", 1<<20, 1<<10) // 8 GiB
	b := sparseNpy(t, dir, "b.npy", 1<<10, 1<<20)
	cp := filepath.Join(dir, "c.npy")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-a", tall, "-b", wide}, 2, "too large"}, // C has 2⁶² elements
		{[]string{"-a", tall, "-b", wide, "-mem", "1GiB"}, 2, "too large"},
		{[]string{"-a", a, "-b", b}, 1, "-mem"},                          // 8 TiB of C in memory
		{[]string{"-a", a, "-b", b, "-mem", "64MiB"}, 1, "free"},         // 8 TiB of C on disk
		{[]string{"-a", a, "-b", a, "-op", "hadamard"}, 1, "-mem"},       // 24 GiB in memory
		{[]string{"-a", tall, "-b", tall, "-op", "hadamard"}, 1, "-mem"}, // 48 GiB in memory
	} {
		args := append([]string{"-o", cp}, tc.args...)
		code, _, errOut := runArgs(t, args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
	if _, err := os.Stat(cp); err == nil {
		t.Error("C was written")
	}
	noTempFiles(t, dir)
}

func TestBytesOf(t *testing.T) {
	for _, tc := range []struct {
		elems []uint64
		want  int64
		ok    bool
	}{
		{nil, 0, true},
		{[]uint64{1, 2, 3}, 48, true},
		{[]uint64{1 << 60}, 0, false},
		{[]uint64{1<<59 - 1, 1}, 1<<62 - 8 + 8, true},
		{[]uint64{1 << 59, 1 << 59}, 0, false},
		{[]uint64{math.MaxUint64}, 0, false},
		{[]uint64{1 << 62, 1 << 62, 1 << 62, 1 << 62}, 0, false},
	} {
		got, ok := bytesOf(tc.elems...)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("bytesOf(%v) = %d, %v; want %d, %v", tc.elems, got, ok, tc.want, tc.ok)
		}
	}
}

// Issue 12, item 14: -verify passes correct products of inputs holding NaN
// and infinities.
func TestVerifyNonFinite(t *testing.T) {
	dir := t.TempDir()
	a, b := matmul.Random(30, 20, 1), matmul.Random(20, 25, 2)
	a.Set(3, 4, math.NaN())
	a.Set(7, 1, math.Inf(1))
	b.Set(2, 5, math.Inf(-1))
	b.Set(9, 9, math.NaN())
	h := matmul.Random(30, 20, 3)
	h.Set(0, 0, math.NaN())
	h.Set(5, 5, math.Inf(1))
	h.Set(6, 6, math.Inf(-1))
	ap, bp, hp := writeNpy(t, dir, "a.npy", a), writeNpy(t, dir, "b.npy", b), writeNpy(t, dir, "h.npy", h)
	for _, args := range [][]string{
		{"-a", ap, "-b", bp},
		{"-a", ap, "-b", bp, "-mem", "10KiB"},
		{"-a", ap, "-b", hp, "-op", "hadamard"},
		{"-a", hp, "-b", ap, "-op", "hadamard", "-mem", "8KiB"},
	} {
		args = append(args, "-o", filepath.Join(dir, "c.npy"), "-block", "8", "-verify")
		code, out, errOut := runArgs(t, args...)
		if code != 0 || !strings.Contains(out, "PASS") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}

// -h prints the synopsis and the flags to stdout and exits 0; a bad flag
// is reported once, with a hint naming the program.
func TestHelpAndBadFlag(t *testing.T) {
	for _, h := range []string{"-h", "-help", "--help"} {
		code, out, errOut := runArgs(t, h)
		if code != 0 || errOut != "" || !strings.Contains(out, "matmul -a A.npy -b B.npy -o C.npy") ||
			!strings.Contains(out, "-block") || !strings.Contains(out, "-profile") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", h, code, out, errOut)
		}
	}
	code, out, errOut := runArgs(t, "-bogus")
	want := "matmul: flag provided but not defined: -bogus\nRun 'matmul -h' for usage.\n"
	if code != 2 || out != "" || errOut != want {
		t.Errorf("-bogus: exit %d, stdout %q, stderr %q; want 2 and %q", code, out, errOut, want)
	}
	for _, args := range [][]string{{"-bogus"}, {"-n", "x"}, {}, {"-n", "10", "-kernel", "fortran"}} {
		_, _, errOut := runArgs(t, args...)
		if strings.Contains(errOut, "go run") || strings.Count(errOut, "matmul -h") != 1 {
			t.Errorf("%v: hint %q should name matmul once, never go run", args, errOut)
		}
	}
}

// fakeDot puts a dot on PATH that runs script.
func fakeDot(t *testing.T, script string) {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "dot"), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
}

// -profile DIR writes the DOT picture, the SVG (when dot works), the trace,
// the statistics and the matmul report; a failing dot is a warning.
func TestProfileFolder(t *testing.T) {
	for _, tc := range []struct {
		name, dot string
		svg       bool
	}{
		{"dot works", "cat >/dev/null; echo '<svg/>'", true},
		{"dot fails", "echo broken >&2; exit 3", false},
	} {
		dir := filepath.Join(t.TempDir(), "nested", "prof")
		fakeDot(t, tc.dot)
		for _, mem := range []string{"", "200KiB"} {
			args := []string{"-n", "100", "-block", "32", "-profile", dir, "-tmp", t.TempDir()}
			if mem != "" {
				args = append(args, "-mem", mem)
			}
			code, out, errOut := runArgs(t, args...)
			if code != 0 || !strings.Contains(out, "profile: "+dir) {
				t.Fatalf("%s %v: exit %d\n%s%s", tc.name, args, code, out, errOut)
			}
			if hasWarning := strings.Contains(errOut, "matmul: warning: ") && strings.Contains(errOut, "dot"); hasWarning == tc.svg {
				t.Errorf("%s: stderr %q", tc.name, errOut)
			}
			var trace struct{ TraceEvents []json.RawMessage }
			if err := json.Unmarshal(readBytes(t, filepath.Join(dir, "matmul-trace.json")), &trace); err != nil || len(trace.TraceEvents) == 0 {
				t.Errorf("%s: trace: %v, %d events", tc.name, err, len(trace.TraceEvents))
			}
			var stats struct{ Tasks []struct{ Name string } }
			if err := json.Unmarshal(readBytes(t, filepath.Join(dir, "matmul-stats.json")), &stats); err != nil || len(stats.Tasks) < 6 {
				t.Errorf("%s: stats: %v, %d tasks", tc.name, err, len(stats.Tasks))
			}
			var rep struct {
				Plan   struct{ Order string }
				Kernel string
				GFLOPS float64
			}
			if err := json.Unmarshal(readBytes(t, filepath.Join(dir, "matmul-report.json")), &rep); err != nil || rep.Plan.Order == "" || rep.Kernel == "" {
				t.Errorf("%s: report: %v %+v", tc.name, err, rep)
			}
			if !strings.HasPrefix(string(readBytes(t, filepath.Join(dir, "matmul.dot"))), "digraph") {
				t.Errorf("%s: matmul.dot is not a DOT graph", tc.name)
			}
			_, err := os.Stat(filepath.Join(dir, "matmul.svg"))
			if (err == nil) != tc.svg {
				t.Errorf("%s: matmul.svg: %v", tc.name, err)
			}
			noTempFiles(t, dir)
		}
	}
}

// Every phase that takes time shows on the progress display: writing the
// random matrices of an out-of-core run, the product and -verify.
func TestProgressShowsEveryPhase(t *testing.T) {
	code, out, errOut := runArgs(t, "-n", "200", "-block", "64", "-mem", "600KiB", "-tmp", t.TempDir(), "-progress", "-verify")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"200/200 rows of random A", "200/200 rows of random B", "16/16 blocks of C", "verify: reading", "verify: computing"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// contextCancelled returns a context that is already cancelled.
func contextCancelled() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx, cancel
}

// -o naming a folder is refused before the run; -o naming a link to a file
// (not an input) replaces the file it points to and keeps the link.
func TestOutputFolderAndLink(t *testing.T) {
	dir := t.TempDir()
	if code, out, errOut := runArgs(t, "-n", "20", "-o", dir); code != 2 || out != "" || !strings.Contains(errOut, "is a directory") {
		t.Errorf("-o DIR: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	target := filepath.Join(dir, "target.npy")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.npy")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runArgs(t, "-n", "20", "-o", link); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", st.Mode(), err)
	}
	if r, c, _, err := npy.Read(target); err != nil || r != 20 || c != 20 {
		t.Errorf("target: %dx%d %v", r, c, err)
	}
	noTempFiles(t, dir)
}

// An output in /proc (whose free space reads 0) used to be refused with
// "need 256 B of disk space in /proc, but only 0 B is free"; the reason is
// that /proc holds no files.
func TestUnwritableOutputExplained(t *testing.T) {
	if unwritable("/proc") == "" {
		t.Skip("no /proc here")
	}
	code, _, errOut := runArgs(t, "-n", "4", "-o", "/proc/c.npy")
	if code != 1 || !strings.Contains(errOut, "virtual file system") || strings.Contains(errOut, "free") {
		t.Errorf("exit %d, stderr %q; want 1 and an error saying /proc holds no files", code, errOut)
	}
}

// A temporary file that a killed run left beside -o is removed by the next
// run, which says so.
func TestStaleTemporaryRemoved(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("cannot start a process: %v", err)
	}
	dir := t.TempDir()
	stale := filepath.Join(dir, fmt.Sprintf(".c.npy.tmp-%d-7", dead.Process.Pid))
	if err := os.WriteFile(stale, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runArgs(t, "-n", "8", "-o", filepath.Join(dir, "c.npy"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(stale); err == nil || !strings.Contains(errOut, "removed "+stale) {
		t.Errorf("stale file: %v; stderr %q", err, errOut)
	}
}
