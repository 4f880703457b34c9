// Package cli holds what the example programs share: outputs written to a
// temporary file and renamed into place only on success, the same flag
// handling (-h exits 0, one error line and a hint for a bad flag), the
// -profile folder, and checks made before a run starts (same-file inputs
// and outputs, writable folders, the machine's memory).
package cli

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Output is a file being written in place of Path. The data goes to Temp, a
// new file in the same folder; Commit renames it onto Path, Abort removes
// it. Until Commit, whatever Path names is untouched.
type Output struct {
	Path string // the file the user asked for
	Temp string // where the data is written until Commit
	done bool
}

// NewOutput reserves a temporary file next to path. The caller writes Temp
// (it may recreate or truncate it) and ends with Commit or Abort; a deferred
// Abort after Commit does nothing.
func NewOutput(path string) (*Output, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
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

// Commit makes the written file visible under Path, replacing what was
// there. The file gets mode 0644, or the mode of the file it replaces.
func (o *Output) Commit() error {
	if o.done {
		return fmt.Errorf("output %s: already committed or aborted", o.Path)
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
	os.Remove(o.Temp)
}

// WriteFile writes path atomically: write's output goes to a temporary file
// in the same folder, which is synced and renamed onto path only when write
// and every step after it succeed. On failure path is left as it was.
func WriteFile(path string, write func(io.Writer) error) (err error) {
	out, err := NewOutput(path)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Abort()
		}
	}()
	f, err := os.OpenFile(out.Temp, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("output %s: %w", path, err)
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
		return fmt.Errorf("writing %s: %w", path, werr)
	}
	return out.Commit()
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
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("output folder %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// UsageError is a mistake in the command line: exit status 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// Parse parses args with fs, printing nothing: it returns flag.ErrHelp for
// -h and -help, and a UsageError for any other mistake (including extra
// arguments). Exit turns both into the programs' common behaviour.
func Parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return UsageError{err}
	}
	if fs.NArg() > 0 {
		return Usagef("unexpected arguments %q", fs.Args())
	}
	return nil
}

// Exit reports the end of program prog and returns its exit status:
//   - nil: 0;
//   - flag.ErrHelp: usage is written to stdout, 0;
//   - a UsageError: one line "prog: error" and a hint to run prog -h, 2;
//   - anything else: one line "prog: error", 1.
func Exit(prog string, err error, stdout, stderr io.Writer, usage func(io.Writer)) int {
	var ue UsageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		usage(stdout)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\nRun '%s -h' for usage.\n", prog, err, prog)
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
}

// PrintDefaults writes fs's flags and their defaults to w.
func PrintDefaults(w io.Writer, fs *flag.FlagSet) {
	old := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(old)
}
