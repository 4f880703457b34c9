package memmgr

import (
	"github.com/gohtgs/htgs/device"
)

// Allocator makes and frees the buffers of a pool. A pool inside an
// execution pipeline calls it with the device of its clone, so one allocator
// value can serve every device (the cuda package's allocators make the
// device's context current themselves). Alloc and Free may be called from
// any goroutine, but never concurrently for one pool. An error or a panic
// in either is reported as an error of the run naming the pool (see the
// package documentation for where it comes out).
type Allocator[T any] interface {
	Alloc(dev device.Device) (T, error)
	Free(dev device.Device, v T) error
}

// AllocFunc adapts a function to an Allocator whose buffers need no freeing
// (Go memory left to the garbage collector).
type AllocFunc[T any] func(dev device.Device) (T, error)

// Alloc calls f.
func (f AllocFunc[T]) Alloc(dev device.Device) (T, error) { return f(dev) }

// Free does nothing: the garbage collector reclaims the buffer.
func (f AllocFunc[T]) Free(device.Device, T) error { return nil }

// Slices returns an allocator of []E buffers of length n in host memory.
func Slices[E any](n int) Allocator[[]E] {
	return AllocFunc[[]E](func(device.Device) ([]E, error) { return make([]E, n), nil })
}
