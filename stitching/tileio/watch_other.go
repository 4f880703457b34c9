//go:build !linux

package tileio

import (
	"context"
	"errors"
)

// eventSource is inotify's, on Linux only: elsewhere the folder is polled.
type eventSource struct{ names chan string }

func newEventSource(string) (*eventSource, error) {
	return nil, errors.New("inotify is available on Linux only")
}

func (e *eventSource) read(context.Context) {}
func (e *eventSource) close()               {}
