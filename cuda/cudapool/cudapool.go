// Package cudapool makes CUDA memory for memmgr's buffer pools: its
// allocators hand a [memmgr.Pool] device buffers ([cuda.DeviceMem]) or
// pinned host buffers ([cuda.HostMem]).
//
// The package sits above both the cuda driver binding and the framework,
// so that cuda imports nothing of the framework but device. Inside an
// execution pipeline each clone's pool is given the clone's device, and
// [DeviceBuffers] and [PinnedBuffers] allocate through it; a pool outside a
// pipeline is given the host, and [DeviceBuffersOn] and [PinnedBuffersOn]
// allocate through the device they name.
//
// Every allocator refuses a device that is not a *cuda.Device with an error
// wrapping [cuda.ErrWrongDevice]. The package builds with or without the
// cuda build tag; without it [cuda.Devices] finds no device to allocate on.
package cudapool

import (
	"fmt"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/memmgr"
)

// DeviceBuffers returns a memory-pool allocator of device buffers of bytes
// bytes. Alloc allocates on the device it is given, which must be a
// *cuda.Device (inside an execution pipeline: the clone's device); Free
// refuses a device other than the one the buffer is on.
func DeviceBuffers(bytes int64) memmgr.Allocator[cuda.DeviceMem] { return deviceBuffers{bytes} }

type deviceBuffers struct{ bytes int64 }

// Alloc allocates a buffer on dev, which must be a *cuda.Device.
func (a deviceBuffers) Alloc(dev device.Device) (cuda.DeviceMem, error) {
	d, err := asCUDA(dev)
	if err != nil {
		return cuda.DeviceMem{}, err
	}
	return d.Alloc(a.bytes)
}

// Free frees m, which must be on dev.
func (a deviceBuffers) Free(dev device.Device, m cuda.DeviceMem) error {
	d, err := asCUDA(dev)
	if err != nil {
		return err
	}
	if owner := m.Device(); owner != nil {
		if err := sameOrdinal(owner.ID(), d.ID()); err != nil {
			return err
		}
	}
	return m.Free()
}

// PinnedBuffers returns a memory-pool allocator of pinned host buffers of
// bytes bytes, allocated through the device the pool is given, which must
// be a *cuda.Device. Pinned memory is portable: Free accepts any CUDA
// device.
func PinnedBuffers(bytes int64) memmgr.Allocator[cuda.HostMem] { return pinnedBuffers{bytes} }

type pinnedBuffers struct{ bytes int64 }

// Alloc allocates a pinned buffer through dev, which must be a *cuda.Device.
func (a pinnedBuffers) Alloc(dev device.Device) (cuda.HostMem, error) {
	d, err := asCUDA(dev)
	if err != nil {
		return cuda.HostMem{}, err
	}
	return d.AllocHost(a.bytes)
}

// Free frees h; dev must be a *cuda.Device (any: pinned memory is portable).
func (a pinnedBuffers) Free(dev device.Device, h cuda.HostMem) error {
	if _, err := asCUDA(dev); err != nil {
		return err
	}
	return h.Free()
}

// DeviceBuffersOn returns a memory-pool allocator of device buffers of
// bytes bytes that always allocates on d, whatever device the pool is
// given: for pools outside execution pipelines, which are given the host.
func DeviceBuffersOn(d *cuda.Device, bytes int64) memmgr.Allocator[cuda.DeviceMem] {
	return fixedBuffers[cuda.DeviceMem]{d, func(d *cuda.Device) (cuda.DeviceMem, error) { return d.Alloc(bytes) }}
}

// PinnedBuffersOn returns a memory-pool allocator of pinned host buffers of
// bytes bytes, allocated through d whatever device the pool is given.
func PinnedBuffersOn(d *cuda.Device, bytes int64) memmgr.Allocator[cuda.HostMem] {
	return fixedBuffers[cuda.HostMem]{d, func(d *cuda.Device) (cuda.HostMem, error) { return d.AllocHost(bytes) }}
}

// fixedBuffers allocates on one device.
type fixedBuffers[T interface{ Free() error }] struct {
	dev   *cuda.Device
	alloc func(*cuda.Device) (T, error)
}

// Alloc allocates on the allocator's device; the pool's device is ignored.
func (a fixedBuffers[T]) Alloc(device.Device) (T, error) {
	if a.dev == nil {
		var zero T
		return zero, fmt.Errorf("cudapool: %w: nil *cuda.Device", cuda.ErrWrongDevice)
	}
	return a.alloc(a.dev)
}

// Free frees v.
func (a fixedBuffers[T]) Free(_ device.Device, v T) error { return v.Free() }

// asCUDA returns dev as a *cuda.Device, or an error wrapping
// cuda.ErrWrongDevice if it is not one (or is nil).
func asCUDA(dev device.Device) (*cuda.Device, error) {
	switch d := dev.(type) {
	case *cuda.Device:
		if d == nil {
			return nil, fmt.Errorf("cudapool: %w: nil *cuda.Device", cuda.ErrWrongDevice)
		}
		return d, nil
	case nil:
		return nil, fmt.Errorf("cudapool: %w: nil device", cuda.ErrWrongDevice)
	default:
		return nil, fmt.Errorf("cudapool: %w: %s is a %s device, not a *cuda.Device", cuda.ErrWrongDevice, dev.Name(), dev.Kind())
	}
}

// sameOrdinal checks that a pool frees memory through the device (by CUDA
// ordinal) it allocated it on.
func sameOrdinal(owner, pool int) error {
	if owner != pool {
		return fmt.Errorf("cudapool: %w: memory of device %d freed through device %d", cuda.ErrWrongDevice, owner, pool)
	}
	return nil
}
