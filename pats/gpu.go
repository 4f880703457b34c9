package pats

import (
	"context"
	"errors"
	"fmt"

	"github.com/gohtgs/htgs/device"
)

// DeviceUnit is the unit of a real GPU (or of host memory posing as one in
// tests): the manager's worker for it runs the operations' GPU
// implementations, and moves data through Transfer. With Config.Prefetch
// the worker queues uploads through Queue, if set, and otherwise calls
// Move and Run from concurrent goroutines; downloads run beside both. So
// Transfer, Queue and the implementations should use a stream per
// direction (upload, compute, download) to overlap.
//
// A DeviceUnit is a value: copies share Bind, Transfer and Queue.
type DeviceUnit struct {
	// Device is the GPU; its Kind must be device.GPU.
	Device device.Device
	// Bind, if not nil, is called before each Run and Move on the calling
	// goroutine (cuda.Bind for a CUDA device) and its unbind after.
	Bind func(ctx context.Context, dev device.Device) (unbind func(), err error)
	// Transfer copies d between host memory and the device (toDevice) or
	// back. The application finds the datum from d.Key, which should then
	// be unique among the flows in progress.
	Transfer func(ctx context.Context, d Data, toDevice bool) error
	// Queue, if not nil, starts copying d from host memory to the device
	// and returns at once (see [Queuer]): with Config.Prefetch the
	// manager then drives the unit from one goroutine.
	Queue func(ctx context.Context, d Data) (Pending, error)
}

// Queuer is an optional interface of a GPU [Unit] whose uploads can be
// queued: QueueUpload starts copying d into the unit's memory and returns
// at once, the copy proceeding beside the unit's computations. With
// Config.Prefetch the manager then drives the unit from one goroutine: it
// queues the uploads of the next operation, runs the current one, and
// waits for the queued copies only before it runs the next. Without it
// the worker is an upload goroutine beside a compute goroutine, each
// waiting for its copy or kernel; when every core runs an operation, the
// Go scheduler can leave those two goroutines a single thread between
// them, and then each waits for the other to finish, the copies no longer
// overlapping the computations (docs/pats/hardware.md measured it).
//
// QueuesUploads reports whether the unit can queue (a unit that wraps
// another, or a DeviceUnit without Queue, may not); the manager calls it
// once, at Start.
type Queuer interface {
	Unit
	QueuesUploads() bool
	QueueUpload(ctx context.Context, d Data) (Pending, error)
}

// Pending is an upload queued by a [Queuer].
type Pending interface {
	// Wait blocks until the copy has completed and returns its error. It
	// may return early with ctx's error only if the unit is not used
	// again: the manager releases the copy's memory after Wait.
	Wait(ctx context.Context) error
}

// completed is a Pending that has completed, with err.
type completed struct{ err error }

func (p completed) Wait(context.Context) error { return p.err }

// Completed returns a Pending that has already completed with err: what
// QueueUpload returns after copying synchronously (from memory the device
// cannot read asynchronously, say).
func Completed(err error) Pending { return completed{err} }

// QueuesUploads reports whether u.Queue is set.
func (u DeviceUnit) QueuesUploads() bool { return u.Queue != nil }

// QueueUpload binds the device and calls Queue (Transfer, synchronously,
// if Queue is nil).
func (u DeviceUnit) QueueUpload(ctx context.Context, d Data) (Pending, error) {
	if u.Queue == nil {
		return Completed(u.Move(ctx, d, true)), nil
	}
	unbind, err := u.bind(ctx)
	if err != nil {
		return nil, err
	}
	defer unbind()
	return u.Queue(ctx, d)
}

// ID returns the device's ID.
func (u DeviceUnit) ID() int { return u.Device.ID() }

// Kind returns the device's kind.
func (u DeviceUnit) Kind() device.Kind { return u.Device.Kind() }

// Name returns the device's name.
func (u DeviceUnit) Name() string { return u.Device.Name() }

// Memory returns the device's memory size.
func (u DeviceUnit) Memory() int64 { return u.Device.Memory() }

func (u DeviceUnit) bind(ctx context.Context) (func(), error) {
	if u.Device == nil {
		return nil, errors.New("pats: DeviceUnit without a Device")
	}
	if u.Bind == nil {
		return func() {}, nil
	}
	unbind, err := u.Bind(ctx, u.Device)
	if err != nil {
		return nil, fmt.Errorf("pats: bind %s: %w", u.Device.Name(), err)
	}
	return unbind, nil
}

// Run binds the device and calls impl; the modelled cost is ignored.
func (u DeviceUnit) Run(ctx context.Context, impl func(context.Context) error, _ Cost) error {
	unbind, err := u.bind(ctx)
	if err != nil {
		return err
	}
	defer unbind()
	return impl(ctx)
}

// Move binds the device and calls Transfer.
func (u DeviceUnit) Move(ctx context.Context, d Data, toDevice bool) error {
	if u.Transfer == nil {
		return fmt.Errorf("pats: DeviceUnit %s has no Transfer", u.Name())
	}
	unbind, err := u.bind(ctx)
	if err != nil {
		return err
	}
	defer unbind()
	return u.Transfer(ctx, d, toDevice)
}
