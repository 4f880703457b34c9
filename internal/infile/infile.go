// Package infile opens the files a program reads from its user (tiles,
// positions files, matrices) so that a path which is not a plain file gives
// a clear error instead of a hang or a misleading message.
//
// A named pipe (FIFO) opened for reading blocks until some process opens it
// for writing, possibly forever, and no context can interrupt that open.
// Open therefore opens without blocking (O_NONBLOCK where the system has
// it), checks what the descriptor refers to, and refuses anything but a
// regular file (a symbolic link is followed: a link to a regular file is
// accepted). The check is made on the open descriptor, so a file swapped
// for a FIFO between a check and the open cannot slip through.
package infile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrNotRegular is wrapped by the errors about a path that exists but is
// not a regular file (a directory, a FIFO, a device, a socket).
var ErrNotRegular = errors.New("not a regular file")

// Open opens path for reading if it is a regular file (or a link to one).
// The error names path and says what it is otherwise.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, err
	}
	return checked(f, path)
}

// OpenIn is Open for name inside root: the name cannot leave the root's
// folder, by ".." or through a symbolic link (see [os.Root]).
func OpenIn(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, err
	}
	return checked(f, name)
}

// ReadFile reads the whole of the regular file at path (see [Open]).
func ReadFile(path string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f)
}

// readAll reads f in one buffer sized from its length.
func readAll(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(make([]byte, 0, int(fi.Size())+bytes.MinRead))
	_, err = buf.ReadFrom(f)
	return buf.Bytes(), err
}

// checked returns f if it is a regular file, else closes it and returns
// an error naming name and its kind, wrapping [ErrNotRegular].
func checked(f *os.File, name string) (*os.File, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if fi.Mode().IsRegular() {
		if err := blocking(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return f, nil
	}
	f.Close()
	return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: %s", ErrNotRegular, kind(fi.Mode()))}
}

// kind says in words what a file of mode m is, as the end of a sentence
// about it: "is a directory", "is a named pipe (FIFO)", "is a socket", ...
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "is a directory"
	case m&fs.ModeNamedPipe != 0:
		return "is a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "is a character device"
	case m&fs.ModeDevice != 0:
		return "is a block device"
	case m&fs.ModeSocket != 0:
		return "is a socket"
	}
	return "is not a regular file"
}
