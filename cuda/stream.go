package cuda

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Stream is a CUDA stream: a queue of copies and kernels that run in
// order on one device, asynchronously to the host and concurrently with
// other streams. Streams are created non-blocking: they do not
// synchronize with the legacy default stream (the nil *Stream).
//
// A stream may be used from several goroutines, but work queued from
// different goroutines interleaves in no defined order; the usual pattern
// is one stream per task copy.
type Stream struct {
	dev *Device
	ctx uintptr        // dev's context when the stream was made
	h   atomic.Uintptr // the CUstream; 0 after Close
}

// NewStream creates a stream on d.
func (d *Device) NewStream() (*Stream, error) {
	c, err := d.context()
	if err != nil {
		return nil, err
	}
	h, err := drvStreamCreate(c)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: create stream: %w", d.ordinal, err)
	}
	s := &Stream{dev: d, ctx: c}
	s.h.Store(h)
	return s, nil
}

// Device returns the stream's device.
func (s *Stream) Device() *Device { return s.dev }

// handle returns the CUstream, or an error after Close.
func (s *Stream) handle() (uintptr, error) {
	h := s.h.Load()
	if h == 0 {
		return 0, fmt.Errorf("cuda: stream: %w", ErrClosed)
	}
	return h, nil
}

// on returns the stream's handle for work on device d (what names the
// work's object, for the error); it fails with ErrClosed for a closed (or
// zero) stream and ErrWrongDevice for a stream of another device.
func (s *Stream) on(d *Device, what string) (uintptr, error) {
	h, err := s.handle()
	if err != nil {
		return 0, err
	}
	if d == nil {
		return 0, fmt.Errorf("%w: %s of no device on a stream of device %d", ErrWrongDevice, what, s.dev.ordinal)
	}
	if s.dev.ordinal != d.ordinal {
		return 0, fmt.Errorf("%w: %s of device %d on a stream of device %d", ErrWrongDevice, what, d.ordinal, s.dev.ordinal)
	}
	return h, nil
}

// Synchronize waits until all work queued on s has completed, and returns
// the first asynchronous error it met.
func (s *Stream) Synchronize() error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	if err := drvStreamSync(s.ctx, h); err != nil {
		return fmt.Errorf("cuda: device %d: stream synchronize: %w", s.dev.ordinal, err)
	}
	return nil
}

// Wait makes work queued on s after this call wait until e has
// completed; the host does not block.
func (s *Stream) Wait(e *Event) error {
	eh, err := e.handle()
	if err != nil {
		return err
	}
	h, err := s.on(e.dev, "wait for an event")
	if err != nil {
		return err
	}
	if err := drvStreamWait(s.ctx, h, eh); err != nil {
		return fmt.Errorf("cuda: device %d: stream wait: %w", s.dev.ordinal, err)
	}
	return nil
}

// Close destroys the stream once its queued work has completed (the call
// does not wait). Close is idempotent.
func (s *Stream) Close() error {
	h := s.h.Swap(0)
	if h == 0 {
		return nil
	}
	if err := drvStreamDestroy(s.ctx, h); err != nil {
		return fmt.Errorf("cuda: device %d: destroy stream: %w", s.dev.ordinal, err)
	}
	return nil
}

// Event marks a point in a stream's work. Record it on one stream and
// Wait for it on another (or Synchronize on the host) to order work
// across streams, for instance to start a kernel on a compute stream only
// when its upload on a copy stream is done. Events are created without
// timing, which makes them cheap.
type Event struct {
	dev *Device
	ctx uintptr
	h   atomic.Uintptr // the CUevent; 0 after Close
}

// NewEvent creates an event on d.
func (d *Device) NewEvent() (*Event, error) {
	return d.newEvent("create event", drvEventCreate)
}

// newEvent makes an event on d with create (one of the driver's event
// constructors); what names the step in an error.
func (d *Device) newEvent(what string, create func(ctx uintptr) (uintptr, error)) (*Event, error) {
	c, err := d.context()
	if err != nil {
		return nil, err
	}
	h, err := create(c)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %s: %w", d.ordinal, what, err)
	}
	e := &Event{dev: d, ctx: c}
	e.h.Store(h)
	return e, nil
}

func (e *Event) handle() (uintptr, error) {
	h := e.h.Load()
	if h == 0 {
		return 0, fmt.Errorf("cuda: event: %w", ErrClosed)
	}
	return h, nil
}

// Record captures the work queued on s so far; the event completes when
// that work has. A nil s records on the legacy default stream. Recording
// again moves the event to the new point.
func (e *Event) Record(s *Stream) error {
	eh, err := e.handle()
	if err != nil {
		return err
	}
	var sh uintptr
	if s != nil {
		if sh, err = s.on(e.dev, "event"); err != nil {
			return err
		}
	}
	if err := drvEventRecord(e.ctx, eh, sh); err != nil {
		return fmt.Errorf("cuda: device %d: record event: %w", e.dev.ordinal, err)
	}
	return nil
}

// Synchronize blocks the calling goroutine until the event has completed.
func (e *Event) Synchronize() error {
	eh, err := e.handle()
	if err != nil {
		return err
	}
	if err := drvEventSync(e.ctx, eh); err != nil {
		return fmt.Errorf("cuda: device %d: event synchronize: %w", e.dev.ordinal, err)
	}
	return nil
}

// Done reports whether the event has completed, without blocking.
//
// A goroutine that waits by calling Done in a loop keeps its P (the Go
// scheduler's processor) throughout: one blocked in Synchronize gives
// it up, and with every P busy (a core per CPU worker) it may wait for
// one when the event completes, a scheduling slice or more.
func (e *Event) Done() (bool, error) {
	eh, err := e.handle()
	if err != nil {
		return false, err
	}
	done, err := drvEventQuery(e.ctx, eh)
	if err != nil {
		return false, fmt.Errorf("cuda: device %d: event query: %w", e.dev.ordinal, err)
	}
	return done, nil
}

// Wait waits for the event to complete: it polls Done for up to spin,
// keeping the calling goroutine's P, then blocks as Synchronize does. A
// goroutine that waits for short GPU work while every other P is busy
// (a core per CPU worker) loses no scheduling slice to the wait; one that
// waits longer than spin gives its P up, as with Synchronize. It does not
// yield between looks: with runtime.Gosched there, on the H200 of the call
// of 2026-11-27 15:28Z, FCFS's pathology run (every core busy) took 5.8-6.0
// s against 3.8-4.0 without: a yielding poller queues behind whatever
// takes its P, a staging copy for one, for a scheduling slice.
func (e *Event) Wait(spin time.Duration) error { return e.WaitServing(spin, nil) }

// WaitServing is Wait that calls serve, if not nil, between its looks at
// the event while it polls: the waiting goroutine can do other short work
// meanwhile (a pats GPU worker takes its next operation, see
// pats.WhileComputing) without giving up its P.
func (e *Event) WaitServing(spin time.Duration, serve func()) error {
	t0 := time.Now()
	for time.Since(t0) < spin {
		if done, err := e.Done(); err != nil || done {
			return err
		}
		if serve != nil {
			serve()
		}
	}
	return e.Synchronize()
}

// Close destroys the event. Close is idempotent.
func (e *Event) Close() error {
	h := e.h.Swap(0)
	if h == 0 {
		return nil
	}
	if err := drvEventDestroy(e.ctx, h); err != nil {
		return fmt.Errorf("cuda: device %d: destroy event: %w", e.dev.ordinal, err)
	}
	return nil
}
