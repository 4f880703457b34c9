package cuda

import (
	"context"

	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gohtgs/htgs/device"
)

// Device is one CUDA GPU. It implements [device.Device] with Kind GPU and
// ID equal to the CUDA device ordinal.
//
// A Device is obtained from [Devices]; the zero Device is not usable. It
// retains the GPU's primary context on first use; [Device.Close] releases
// it. Methods may be called from any goroutine.
type Device struct {
	ordinal int
	name    string
	mem     int64
	major   int
	minor   int
	sms     int
	valid   bool // made by Devices (the zero Device is not usable)

	ctx atomic.Uintptr // the retained primary context; 0 until first use or after Close

	mu     sync.Mutex // guards the fields below and the slow path of context
	closed bool       // Close was called
}

// deviceInfo is what the driver reports about a device.
type deviceInfo struct {
	name         string
	mem          int64
	major, minor int
	sms          int
}

// Devices returns the CUDA devices of this machine, in ordinal order. Each
// call returns new Device values (sharing the driver's primary contexts);
// close them with [Device.Close] when done.
//
// When no device can be used it returns an error wrapping [ErrNoDevice]:
// without the cuda build tag (also wrapping [ErrNoCUDA]), when
// libcuda.so.1 cannot be opened, when cuInit fails, or when the driver
// reports no devices.
func Devices() ([]*Device, error) {
	if err := loadDriver(); err != nil {
		return nil, err
	}
	n, err := drvDeviceCount()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoDevice, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: the driver reports no devices", ErrNoDevice)
	}
	ds := make([]*Device, n)
	for i := range ds {
		info, err := drvDeviceInfo(i)
		if err != nil {
			return nil, fmt.Errorf("cuda: device %d: %w", i, err)
		}
		ds[i] = &Device{ordinal: i, name: info.name, mem: info.mem, major: info.major, minor: info.minor, sms: info.sms, valid: true}
	}
	return ds, nil
}

// AsDevices converts ds for APIs that take [device.Device] values, such as
// execution pipelines (one clone per device).
func AsDevices(ds []*Device) []device.Device {
	out := make([]device.Device, len(ds))
	for i, d := range ds {
		out[i] = d
	}
	return out
}

// DriverVersion returns the CUDA version the installed driver supports,
// as 1000*major + 10*minor (13000 for CUDA 13.0).
func DriverVersion() (int, error) {
	if err := loadDriver(); err != nil {
		return 0, err
	}
	return drvVersion()
}

// ID returns the CUDA device ordinal.
func (d *Device) ID() int { return d.ordinal }

// Kind returns [device.GPU].
func (d *Device) Kind() device.Kind { return device.GPU }

// Name returns the product name, such as "NVIDIA H100 80GB HBM3".
func (d *Device) Name() string { return d.name }

// Memory returns the device's total memory in bytes.
func (d *Device) Memory() int64 { return d.mem }

// ComputeCapability returns the device's compute capability, such as 9, 0
// for Hopper.
func (d *Device) ComputeCapability() (major, minor int) { return d.major, d.minor }

// Multiprocessors returns the number of streaming multiprocessors.
func (d *Device) Multiprocessors() int { return d.sms }

// String describes the device: ordinal, name, compute capability, memory.
func (d *Device) String() string {
	return fmt.Sprintf("cuda%d (%s, sm_%d%d, %d MiB)", d.ordinal, d.name, d.major, d.minor, d.mem>>20)
}

// context returns the device's primary context, retaining it on first use.
func (d *Device) context() (uintptr, error) {
	if c := d.ctx.Load(); c != 0 {
		return c, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.ctx.Load(); c != 0 {
		return c, nil
	}
	if d.closed {
		return 0, fmt.Errorf("cuda: device %d: %w", d.ordinal, ErrClosed)
	}
	if !d.valid {
		return 0, fmt.Errorf("%w: zero cuda.Device (use cuda.Devices)", ErrWrongDevice)
	}
	if err := loadDriver(); err != nil {
		return 0, err
	}
	c, err := drvPrimaryRetain(d.ordinal)
	if err != nil {
		return 0, fmt.Errorf("cuda: device %d: %w", d.ordinal, err)
	}
	d.ctx.Store(c)
	return c, nil
}

// Close unloads the package's kernels from the device and releases the
// primary context. Free the device's buffers, streams, events, BLAS
// handles and FFT plans first: when the last user of the primary context
// releases it, the driver destroys it with everything allocated in it.
// Close is idempotent; after it the Device's methods fail with
// [ErrClosed].
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	c := d.ctx.Swap(0)
	if c == 0 {
		return nil
	}
	if err := drvPrimaryRelease(d.ordinal); err != nil {
		return fmt.Errorf("cuda: device %d: release context: %w", d.ordinal, err)
	}
	return nil
}

// Synchronize waits until all work queued on the device has completed.
func (d *Device) Synchronize() error {
	c, err := d.context()
	if err != nil {
		return err
	}
	if err := drvCtxSync(c); err != nil {
		return fmt.Errorf("cuda: device %d: %w", d.ordinal, err)
	}
	return nil
}

// MemInfo returns the free and total device memory in bytes.
func (d *Device) MemInfo() (free, total int64, err error) {
	c, err := d.context()
	if err != nil {
		return 0, 0, err
	}
	free, total, err = drvMemInfo(c)
	if err != nil {
		return 0, 0, fmt.Errorf("cuda: device %d: %w", d.ordinal, err)
	}
	return free, total, nil
}

// asDevice returns dev as a *Device, or an error wrapping ErrWrongDevice.
func asDevice(dev device.Device) (*Device, error) {
	switch d := dev.(type) {
	case *Device:
		if d == nil {
			return nil, fmt.Errorf("%w: nil *cuda.Device", ErrWrongDevice)
		}
		return d, nil
	case nil:
		return nil, fmt.Errorf("%w: nil device", ErrWrongDevice)
	default:
		return nil, fmt.Errorf("%w: %s is a %s device, not a *cuda.Device", ErrWrongDevice, dev.Name(), dev.Kind())
	}
}

// Bind prepares the calling goroutine to drive dev: it locks the goroutine
// to its OS thread (runtime.LockOSThread) and makes dev's context current
// on that thread. Call it in a GPU task's Initialize with info.Device, and
// call unbind in Shutdown, on the same goroutine. While bound, every call
// of this package on that goroutine finds its context already current.
//
// Binds nest (each must be undone by its own unbind, innermost first), and
// unbind is safe to call more than once. If a goroutine ends still bound
// (say its Initialize failed after Bind, so no Shutdown runs), the Go
// runtime ends its locked thread, and the binding with it: no harm done. Bind fails with an error wrapping
// [ErrWrongDevice] for a device that is not a *cuda.Device, and returns
// ctx.Err() if ctx is already done.
func Bind(ctx context.Context, dev device.Device) (unbind func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d, err := asDevice(dev)
	if err != nil {
		return nil, err
	}
	c, err := d.context()
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	if err := drvCtxPush(c); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("cuda: bind device %d: %w", d.ordinal, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			// A pop can only fail if the thread's context stack was
			// corrupted by unbalanced calls elsewhere; there is nothing
			// to restore then, and the thread is released anyway.
			_ = drvCtxPop()
			runtime.UnlockOSThread()
		})
	}, nil
}

// Bound reports whether dev's context is current on the calling OS thread,
// as it is between [Bind] and unbind. Without a Bind the answer is only
// meaningful if the goroutine is locked to its thread.
func Bound(dev device.Device) bool {
	d, err := asDevice(dev)
	if err != nil {
		return false
	}
	c := d.ctx.Load()
	if c == 0 {
		return false
	}
	cur, err := drvCtxCurrent()
	return err == nil && cur == c
}
