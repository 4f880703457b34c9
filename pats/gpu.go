package pats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gohtgs/htgs/device"
)

// DeviceUnit is the unit of a real GPU (or of host memory posing as one in
// tests): the manager's worker for it runs the operations' GPU
// implementations, and moves data through Transfer. With Config.Prefetch
// the worker queues its transfers through QueueTransfer, if set, and runs
// the operations from the same goroutine; otherwise it calls Move and Run
// from concurrent goroutines. Either way Transfer, QueueTransfer and the
// implementations should use a stream per direction (upload, compute,
// download), so that copies overlap kernels.
//
// A DeviceUnit is a value: copies share Bind, Transfer and QueueTransfer.
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
	// QueueTransfer, if not nil, starts the copy Transfer makes and
	// returns at once (see [Queuer]).
	QueueTransfer func(ctx context.Context, d Data, toDevice bool) (Pending, error)
}

// Queuer is an optional interface of a GPU [Unit] whose transfers can be
// queued: Queue starts copying d to the unit (toDevice) or back and
// returns at once, the copy proceeding on the device beside its
// computations. With Config.Prefetch the manager drives such a unit from
// one goroutine: it queues the uploads of the next operation, runs the
// current one, and queues the downloads of its results, looking at the
// copies between operations and while Run waits for the device (see
// [WhileComputing]); it waits for a copy only when it needs it done.
// Without it the worker is an upload, a compute and a download goroutine,
// each waiting for its copy or kernel; when every core runs an
// operation, the Go scheduler can leave those goroutines a single thread
// between them, and then each waits for the others, the copies no longer
// overlapping the computations (docs/pats/hardware.md measured it).
//
// Queues reports whether the unit can queue (a unit that wraps another,
// or a DeviceUnit without QueueTransfer, may not); the manager calls it
// once, at Start.
type Queuer interface {
	Unit
	Queues() bool
	Queue(ctx context.Context, d Data, toDevice bool) (Pending, error)
}

// Pending is a transfer queued by a [Queuer].
type Pending interface {
	// Done reports, without blocking, whether the copy has completed.
	Done() bool
	// Wait blocks until the copy has completed and returns how long the
	// device took to make it (0 if unknown: the manager then leaves it
	// out of its transfer-rate estimate) and its error. It may return
	// early with ctx's error only if the unit is not used again: the
	// manager releases the copy's memory after Wait.
	Wait(ctx context.Context) (took time.Duration, err error)
}

// completed is a Pending that has completed, with err.
type completed struct{ err error }

func (completed) Done() bool                                    { return true }
func (p completed) Wait(context.Context) (time.Duration, error) { return 0, p.err }

// Completed returns a Pending that has already completed with err: what
// Queue returns after copying synchronously (memory the device cannot
// reach asynchronously, say).
func Completed(err error) Pending { return completed{err} }

// Queues reports whether u.QueueTransfer is set.
func (u DeviceUnit) Queues() bool { return u.QueueTransfer != nil }

// Queue binds the device and calls QueueTransfer, or Move, synchronously,
// if QueueTransfer is nil.
func (u DeviceUnit) Queue(ctx context.Context, d Data, toDevice bool) (Pending, error) {
	if u.QueueTransfer == nil {
		return Completed(u.Move(ctx, d, toDevice)), nil
	}
	unbind, err := u.bind(ctx)
	if err != nil {
		return nil, err
	}
	defer unbind()
	return u.QueueTransfer(ctx, d, toDevice)
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
