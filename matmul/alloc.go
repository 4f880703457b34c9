package matmul

import (
	"sync"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/memmgr"
)

// bufferCaches holds, per buffer length, the block buffers that the pools
// of finished runs gave back.
var bufferCaches sync.Map // int -> *sync.Pool of *[]float64

// recycledSlices is the allocator of the graphs' pools: host buffers of n
// float64s that go, when a run frees them, to a cache shared by later runs
// (a sync.Pool, which the garbage collector empties when they stay unused).
// A fresh 2048x2048 block is 32 MiB of pages that the kernel must fault in
// and zero; reusing them saves that on every product after the first.
// Buffers come back with old contents: loaders and multiplies overwrite
// them whole.
func recycledSlices(n int) memmgr.Allocator[[]float64] { return recycler{n} }

type recycler struct{ n int }

func (r recycler) cache() *sync.Pool {
	if p, ok := bufferCaches.Load(r.n); ok {
		return p.(*sync.Pool)
	}
	p, _ := bufferCaches.LoadOrStore(r.n, &sync.Pool{})
	return p.(*sync.Pool)
}

// Alloc returns a cached buffer or a new one.
func (r recycler) Alloc(device.Device) ([]float64, error) {
	if v, ok := r.cache().Get().(*[]float64); ok {
		return *v, nil
	}
	return make([]float64, r.n), nil
}

// Free puts the buffer in the cache.
func (r recycler) Free(_ device.Device, v []float64) error {
	r.cache().Put(&v)
	return nil
}
