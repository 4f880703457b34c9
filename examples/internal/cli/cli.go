// Package cli holds what the example programs share: the same flag handling
// (-h exits 0, one error line and a hint for a bad flag), the -profile
// folder, and the machine's available memory. Outputs are written with
// package outfile.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

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
