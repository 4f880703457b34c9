package memmgr

import (
	"context"
	"fmt"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/core"
)

// SizedAllocator makes and frees the buffers of a [SizedPool], whose size
// is given per request: AllocSize makes a buffer of n elements (HTGS's
// dynamic memory, which takes an element count). It is called as an
// [Allocator] is: with the device of the pool's clone, never concurrently
// for one pool, an error or panic being an error of the run naming the
// pool.
type SizedAllocator[T any] interface {
	AllocSize(dev device.Device, n int) (T, error)
	Free(dev device.Device, v T) error
}

// SizedFunc adapts a function to a SizedAllocator whose buffers need no
// freeing (Go memory left to the garbage collector).
type SizedFunc[T any] func(dev device.Device, n int) (T, error)

// AllocSize calls f.
func (f SizedFunc[T]) AllocSize(dev device.Device, n int) (T, error) { return f(dev, n) }

// Free does nothing: the garbage collector reclaims the buffer.
func (f SizedFunc[T]) Free(device.Device, T) error { return nil }

// SizedSlices returns a sized allocator of []E buffers in host memory,
// of the length each Get asks for.
func SizedSlices[E any]() SizedAllocator[[]E] {
	return SizedFunc[[]E](func(_ device.Device, n int) ([]E, error) {
		if n < 0 {
			return nil, fmt.Errorf("negative size %d", n)
		}
		return make([]E, n), nil
	})
}

// SizedPool is a memory pool whose buffers are sized per request: each
// Get allocates a buffer of the size it asks for, and the buffer is freed
// when its last release comes (HTGS's dynamic memory). The capacity bounds
// the number of buffers out at once, as for a [Pool]: Get waits while
// that many are out. Everything else — scope per run and pipeline clone,
// release counts, statistics, [Reclaim], errors — is as for a Pool.
type SizedPool[T any] struct {
	p *Pool[T]
}

// NewSized declares in the graph b a pool named name of at most capacity
// buffers at once, each made by alloc at the size given to Get. The
// [Dynamic] option is implied.
func NewSized[T any](b graph.Builder, name string, capacity int, alloc SizedAllocator[T], opts ...Option) *SizedPool[T] {
	p := New[T](b, name, capacity, nil, append(opts, Dynamic())...)
	p.sized = alloc // nil: Start reports the missing allocator
	return &SizedPool[T]{p: p}
}

// Name returns the pool's name.
func (s *SizedPool[T]) Name() string { return s.p.name }

// Capacity returns the number of buffers each pool instance hands out at
// most at once.
func (s *SizedPool[T]) Capacity() int { return s.p.capacity }

func (s *SizedPool[T]) declared() (*core.Spec, *core.Blueprint) { return s.p.declared() }

// Get allocates a buffer of n elements in the pool instance of the
// calling task, waiting while the pool's capacity is out. The buffer is
// freed when its Release method is called. ctx must be (or derive from)
// the context given to the task.
func (s *SizedPool[T]) Get(ctx context.Context, n int) (*Buffer[T], error) {
	return s.GetShared(ctx, n, 1)
}

// GetShared is [SizedPool.Get] for a buffer that holders hold at once: it
// is freed after holders calls of its Release method (holders < 1 is taken
// as 1), as with [Pool.GetShared].
func (s *SizedPool[T]) GetShared(ctx context.Context, n, holders int) (*Buffer[T], error) {
	in, err := s.p.instance(ctx)
	if err != nil {
		return nil, err
	}
	return in.get(ctx, holders, n)
}
