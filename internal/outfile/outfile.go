// Package outfile writes files so that nothing a user owns is lost: an
// output goes to a temporary file in the same folder and is renamed into
// place only when it is complete, so a failed run leaves the file it would
// have replaced as it was. It also holds the checks made before a run
// writes anything: whether two names are the same file, and whether a
// folder can be written.
package outfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Output is a file being written in place of Path. The data goes to Temp, a
// new file in the same folder; Commit renames it onto Path, Abort removes
// it. Until Commit, whatever Path names is untouched.
type Output struct {
	Path string // the file the user asked for
	Temp string // where the data is written until Commit
	done bool
	dir  bool // a folder (NewDirOutput)
}

// NewOutput reserves a temporary file next to path. The caller writes Temp
// (it may recreate or truncate it) and ends with Commit or Abort; a deferred
// Abort after Commit does nothing.
func NewOutput(path string) (*Output, error) {
	f, err := os.CreateTemp(tempPattern(path, ""))
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", path, err)
	}
	name := f.Name()
	if err := f.Close(); err != nil {
		os.Remove(name)
		return nil, fmt.Errorf("output %s: %w", path, err)
	}
	return &Output{Path: path, Temp: name}, nil
}

// NewDirOutput reserves a temporary name next to path for an output that
// is a folder (such as an OME-Zarr image). Temp does not exist: the caller
// creates the folder there, fills it and ends with Commit or Abort.
func NewDirOutput(path string) (*Output, error) {
	name, err := reserveName(path, "")
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", path, err)
	}
	return &Output{Path: path, Temp: name, dir: true}, nil
}

// tempPattern returns the folder and the os.CreateTemp pattern of path's
// temporary names: ".BASE.tmp-PID" then tag, "-" and a random number.
// The name carries the writer's process id, so that a later run can tell
// a file left by a crash from one still being written (see RemoveStale).
func tempPattern(path, tag string) (dir, pattern string) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	return dir, tempPrefix(base) + strconv.Itoa(os.Getpid()) + tag + "-*"
}

// reserveName returns a new temporary name next to path (see
// tempPattern) that nothing holds: the caller creates it.
func reserveName(path, tag string) (string, error) {
	name, err := os.MkdirTemp(tempPattern(path, tag))
	if err != nil {
		return "", err
	}
	return name, os.Remove(name)
}

// commitDir puts the folder Temp in place of Path. A folder (or file)
// already at Path is first renamed aside, under a temporary name of its
// own, and removed once the new folder is in place; if that fails, it is
// renamed back, so Path keeps what it had.
func (o *Output) commitDir() error {
	old := ""
	if _, err := os.Lstat(o.Path); err == nil {
		aside, err := reserveName(o.Path, "-old")
		if err != nil {
			o.Abort()
			return fmt.Errorf("output %s: %w", o.Path, err)
		}
		if err := os.Rename(o.Path, aside); err != nil {
			o.Abort()
			return fmt.Errorf("output %s: %w", o.Path, err)
		}
		old = aside
	}
	if err := os.Rename(o.Temp, o.Path); err != nil {
		if old != "" {
			os.Rename(old, o.Path)
		}
		o.Abort()
		return fmt.Errorf("output %s: %w", o.Path, err)
	}
	o.done = true
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("output %s is in place, but its old content, renamed to %s, could not be removed: %w", o.Path, old, err)
		}
	}
	return nil
}

// Commit makes the written file visible under Path, replacing what was
// there. The file gets mode 0644, or the mode of the file it replaces. A
// folder output (NewDirOutput) replaces what was at Path as a whole.
func (o *Output) Commit() error {
	if o.done {
		return fmt.Errorf("output %s: already committed or aborted", o.Path)
	}
	if o.dir {
		return o.commitDir()
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(o.Path); err == nil && st.Mode().IsRegular() {
		mode = st.Mode().Perm()
	}
	if err := os.Chmod(o.Temp, mode); err != nil {
		o.Abort()
		return fmt.Errorf("output %s: %w", o.Path, err)
	}
	if err := os.Rename(o.Temp, o.Path); err != nil {
		o.Abort()
		return fmt.Errorf("output %s: %w", o.Path, err)
	}
	o.done = true
	return nil
}

// Abort removes the temporary file; Path keeps what it had. It does nothing
// on a nil Output, so it can be deferred before NewOutput's error is checked.
func (o *Output) Abort() {
	if o == nil || o.done {
		return
	}
	o.done = true
	if o.dir {
		os.RemoveAll(o.Temp)
		return
	}
	os.Remove(o.Temp)
}

// Write fills the temporary file with write's output, buffered, and syncs
// it to disk. It does not commit.
func (o *Output) Write(write func(io.Writer) error) error {
	f, err := os.OpenFile(o.Temp, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("output %s: %w", o.Path, err)
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	werr := write(bw)
	if werr == nil {
		werr = bw.Flush()
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("writing %s: %w", o.Path, werr)
	}
	return nil
}

// sync flushes the temporary file, written by name, to disk.
func (o *Output) sync() error {
	f, err := os.OpenFile(o.Temp, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("writing %s: %w", o.Path, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", o.Path, err)
	}
	return nil
}

// WriteFile writes path atomically: write's output goes to a temporary file
// in the same folder, which is synced and renamed onto path only when write
// and every step after it succeed. On failure path is left as it was.
func WriteFile(path string, write func(io.Writer) error) error {
	out, err := NewOutput(path)
	if err != nil {
		return err
	}
	if err := out.Write(write); err != nil {
		out.Abort()
		return err
	}
	return out.Commit()
}

// Batch is a set of outputs renamed into place together: a run that fails
// before Commit leaves every file it would have replaced as it was.
type Batch struct{ list []*Output }

// Add writes the temporary file of path with write. After an error the
// caller still ends the batch with Abort.
func (b *Batch) Add(path string, write func(io.Writer) error) error {
	out, err := NewOutput(path)
	if err != nil {
		return err
	}
	b.list = append(b.list, out)
	return out.Write(write)
}

// AddFile is Add for a writer that wants a file name rather than an
// io.Writer (it may create or truncate the file): write fills the temporary
// file whose name it is given, which is then synced. After an error the
// caller still ends the batch with Abort.
func (b *Batch) AddFile(path string, write func(temp string) error) error {
	out, err := NewOutput(path)
	if err != nil {
		return err
	}
	b.list = append(b.list, out)
	if err := write(out.Temp); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return out.sync()
}

// AddDir is AddFile for an output that is a folder: write creates and
// fills the folder whose name it is given (see NewDirOutput). After an
// error the caller still ends the batch with Abort.
func (b *Batch) AddDir(path string, write func(temp string) error) error {
	out, err := NewDirOutput(path)
	if err != nil {
		return err
	}
	b.list = append(b.list, out)
	if err := write(out.Temp); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Commit renames every file added since the last Commit into place, in the
// order they were added.
func (b *Batch) Commit() error {
	for _, out := range b.list {
		if err := out.Commit(); err != nil {
			b.Abort()
			return err
		}
	}
	b.list = b.list[:0]
	return nil
}

// Abort removes the temporary files not yet committed.
func (b *Batch) Abort() {
	for _, out := range b.list {
		out.Abort()
	}
}

// SameFile reports whether the files a and b name are the same file
// (through links too). A name that does not exist is the same as nothing.
func SameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}

// CheckDir makes sure dir exists (creating it and its parents) and that a
// file can be created in it, so that a run can refuse an unwritable output
// folder before doing any work.
func CheckDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output folder: %w", err)
	}
	if err := Writable(dir); err != nil {
		return fmt.Errorf("output %w", err)
	}
	return nil
}

// Writable checks that dir is an existing folder in which a file can be
// created (it creates and removes one). The error names dir.
func Writable(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("folder: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("folder %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// tempPrefix is the start of the names of base's temporary files:
// ".BASE.tmp-", then the writer's process id, "-" and a random number.
func tempPrefix(base string) string { return "." + base + ".tmp-" }

// Stale is a temporary file that an earlier run left behind (killed while
// it wrote path) and RemoveStale removed.
type Stale struct {
	Temp string // the file removed
	Size int64  // its size in bytes
	PID  int    // the process that wrote it, 0 when its name does not say
}

// String says what was removed, for the program to print.
func (s Stale) String() string {
	by := ""
	if s.PID > 0 {
		by = fmt.Sprintf(" by process %d", s.PID)
	}
	return fmt.Sprintf("removed %s (%d bytes), a temporary file left%s by an earlier run that did not finish", s.Temp, s.Size, by)
}

// legacyStaleAge is how long a temporary file whose name carries no
// process id (written by an earlier version) must have been left
// unmodified before RemoveStale takes it as abandoned.
const legacyStaleAge = 10 * time.Minute

// RemoveStale removes the temporary files of the outputs paths that
// earlier runs left behind: only files named as NewOutput names them, only
// in the outputs' folders, and only when the process that wrote them is
// gone (its id is in the name; a file written by this process or by a
// live one is kept). A name without a process id, from an earlier
// version, is removed once unmodified for 10 minutes. It returns what it
// removed, for the program to say; errors reading a folder are ignored
// (the run's own checks report them).
func RemoveStale(paths ...string) ([]Stale, error) {
	var removed []Stale
	for _, path := range paths {
		dir, base := filepath.Split(path)
		if dir == "" {
			dir = "."
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		prefix := tempPrefix(base)
		for _, e := range ents {
			rest, ok := strings.CutPrefix(e.Name(), prefix)
			if !ok || !e.Type().IsRegular() && !e.IsDir() {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			pid := 0
			if p, _, ok := strings.Cut(rest, "-"); ok {
				if pid, err = strconv.Atoi(p); err != nil || pid <= 0 {
					continue // not a name NewOutput makes
				}
				if pid == os.Getpid() || alive(pid) {
					continue
				}
			} else if _, err := strconv.ParseUint(rest, 10, 64); err != nil || time.Since(fi.ModTime()) < legacyStaleAge {
				continue
			}
			temp := filepath.Join(dir, e.Name())
			remove := os.Remove
			if e.IsDir() {
				remove = os.RemoveAll // a folder output's (NewDirOutput)
			}
			if err := remove(temp); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				return removed, fmt.Errorf("removing the stale temporary file %s: %w", temp, err)
			}
			removed = append(removed, Stale{Temp: temp, Size: fi.Size(), PID: pid})
		}
	}
	return removed, nil
}
