//go:build linux

package tileio

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// eventSource is an inotify instance watching one folder for files closed
// after writing and files renamed into it.
type eventSource struct {
	f     *os.File
	names chan string // a file's name; "" when events were dropped
	once  sync.Once
}

// newEventSource starts watching dir with inotify.
func newEventSource(dir string) (*eventSource, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("inotify: watch %s: %w", dir, err)
	}
	// Non-blocking, so that the runtime's poller waits for events and
	// close ends a read in progress.
	return &eventSource{f: os.NewFile(uintptr(fd), "inotify"), names: make(chan string, 256)}, nil
}

// read delivers the names of the files the events are about until the
// source is closed or ctx is done; it closes names when it returns.
func (e *eventSource) read(ctx context.Context) {
	defer close(e.names)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := e.f.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			l := int(binary.NativeEndian.Uint32(buf[off+12:]))
			start := off + unix.SizeofInotifyEvent
			off = start + l
			if off > n {
				break
			}
			name := strings.TrimRight(string(buf[start:off]), "\x00")
			switch {
			case mask&unix.IN_Q_OVERFLOW != 0:
				name = "" // a listing finds what the dropped events said
			case name == "":
				continue // about the folder itself
			}
			select {
			case e.names <- name:
			case <-ctx.Done():
				return
			}
		}
	}
}

// close ends the watch; read returns.
func (e *eventSource) close() {
	e.once.Do(func() { e.f.Close() })
}
