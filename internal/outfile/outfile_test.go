package outfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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

func TestAbortNil(t *testing.T) {
	var o *Output
	o.Abort() // must not panic
}

// checkAborted fails t unless a still holds "old a" and is the only file
// left in dir.
func checkAborted(t *testing.T, dir, a string) {
	t.Helper()
	if got, _ := os.ReadFile(a); string(got) != "old a" {
		t.Fatalf("a replaced by a failed batch: %q", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("files left: %v", ents)
	}
}

func TestBatchCommitsTogether(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("old a"), 0o600)
	var batch Batch
	if err := batch.Add(a, func(w io.Writer) error { _, err := io.WriteString(w, "new a"); return err }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := batch.Add(b, func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Add: %v, want boom", err)
	}
	batch.Abort()
	checkAborted(t, dir, a)
	batch = Batch{}
	for _, p := range []string{a, b} {
		if err := batch.Add(p, func(w io.Writer) error { _, err := io.WriteString(w, "v2"); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(b); err == nil {
		t.Fatal("b visible before Commit")
	}
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := batch.Commit(); err != nil {
		t.Fatalf("second Commit: %v", err)
	}
	for _, p := range []string{a, b} {
		if got, _ := os.ReadFile(p); string(got) != "v2" {
			t.Fatalf("%s = %q after Commit", p, got)
		}
	}
}

// AddFile stages a file written by name: invisible until Commit, removed
// by Abort after a failure.
func TestBatchAddFile(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	os.WriteFile(a, []byte("old a"), 0o600)
	var batch Batch
	boom := errors.New("boom")
	if err := batch.AddFile(a, func(tmp string) error {
		os.WriteFile(tmp, []byte("partial"), 0o600)
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("AddFile: %v, want boom", err)
	}
	batch.Abort()
	checkAborted(t, dir, a)
	batch = Batch{}
	if err := batch.AddFile(a, func(tmp string) error { return os.WriteFile(tmp, []byte("new a"), 0o600) }); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(a); string(got) != "old a" {
		t.Fatalf("a visible before Commit: %q", got)
	}
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(a); string(got) != "new a" {
		t.Fatalf("a = %q after Commit", got)
	}
}

// RemoveStale removes the temporary files that dead writers left, and
// keeps those of live ones (this process's included), other outputs'
// files and names it does not make.
func TestRemoveStale(t *testing.T) {
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("no process table to test against")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "mosaic.tif")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("cannot start a process: %v", err)
	}
	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Skipf("cannot start a process: %v", err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	write := func(name string, age time.Duration) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		if age > 0 {
			old := time.Now().Add(-age)
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	gone := []string{
		write(fmt.Sprintf(".mosaic.tif.tmp-%d-123", dead.Process.Pid), 0),
		write(".mosaic.tif.tmp-1377231836", time.Hour), // an earlier version's name, abandoned
	}
	kept := []string{
		write(fmt.Sprintf(".mosaic.tif.tmp-%d-55", live.Process.Pid), 0),
		write(fmt.Sprintf(".mosaic.tif.tmp-%d-56", os.Getpid()), 0),
		write(".mosaic.tif.tmp-99", 0), // an earlier version's, maybe still written
		write(fmt.Sprintf(".other.tif.tmp-%d-1", dead.Process.Pid), 0),
		write(".mosaic.tif.tmp-x-1", time.Hour),
		write("mosaic.tif", time.Hour),
	}
	removed, err := RemoveStale(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range removed {
		got = append(got, s.Temp)
		if s.Size != int64(len("partial")) {
			t.Errorf("%s: size %d", s.Temp, s.Size)
		}
	}
	slices.Sort(got)
	slices.Sort(gone)
	if !slices.Equal(got, gone) {
		t.Errorf("removed %q, want %q", got, gone)
	}
	for _, p := range gone {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s still there", p)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	// NewOutput's own temporary file carries this process's id, so a
	// concurrent RemoveStale of this process keeps it.
	out, err := NewOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Abort()
	if !strings.HasPrefix(filepath.Base(out.Temp), fmt.Sprintf(".mosaic.tif.tmp-%d-", os.Getpid())) {
		t.Errorf("temporary name %s carries no process id", out.Temp)
	}
}

// A folder output (an OME-Zarr image) replaces what was at its path as a
// whole on Commit, leaves it as it was on Abort or a failed write, and
// never shows a half-written folder under the final name.
func TestBatchAddDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mosaic.ome.zarr")
	fill := func(content string) func(string) error {
		return func(temp string) error {
			if _, err := os.Stat(path); err == nil {
				if b, _ := os.ReadFile(filepath.Join(path, "zarr.json")); string(b) == content {
					return fmt.Errorf("the new content is visible before Commit")
				}
			}
			if err := os.MkdirAll(filepath.Join(temp, "0", "c"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(temp, "zarr.json"), []byte(content), 0o644)
		}
	}
	read := func() string {
		b, err := os.ReadFile(filepath.Join(path, "zarr.json"))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	var b Batch
	if err := b.AddDir(path, fill("one")); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "one" {
		t.Fatalf("after the first commit: %q", got)
	}
	// A second run replaces it whole.
	if err := os.WriteFile(filepath.Join(path, "stale-chunk"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.AddDir(path, fill("two")); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "two" {
		t.Fatalf("after the second commit: %q", got)
	}
	if _, err := os.Stat(filepath.Join(path, "stale-chunk")); err == nil {
		t.Error("the old folder's files survived the replacement")
	}
	// A failed write leaves the folder as it was, and nothing else.
	if err := b.AddDir(path, func(temp string) error {
		if err := fill("three")(temp); err != nil {
			return err
		}
		return fmt.Errorf("disk full")
	}); err == nil {
		t.Fatal("the failing write succeeded")
	}
	b.Abort()
	if got := read(); got != "two" {
		t.Errorf("after a failed write: %q", got)
	}
	es, _ := os.ReadDir(dir)
	if len(es) != 1 {
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		t.Errorf("folder holds %q, want only the output", names)
	}
}

// A folder left by a killed writer is removed by RemoveStale like a file.
func TestRemoveStaleFolder(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("cannot start a process: %v", err)
	}
	dir := t.TempDir()
	stale := filepath.Join(dir, fmt.Sprintf(".m.ome.zarr.tmp-%d-9", dead.Process.Pid))
	if err := os.MkdirAll(filepath.Join(stale, "0", "c", "0"), 0o755); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveStale(filepath.Join(dir, "m.ome.zarr"))
	if err != nil || len(removed) != 1 || removed[0].Temp != stale {
		t.Fatalf("removed %v, %v", removed, err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("stale folder still there")
	}
}
