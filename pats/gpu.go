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
// the worker's upload, compute and download goroutines call Move and Run
// concurrently, so Transfer and the implementations should use a stream
// per direction (upload, compute, download) to overlap.
//
// A DeviceUnit is a value: copies share Bind and Transfer.
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
