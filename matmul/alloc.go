package matmul

import (
	"sync"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/memmgr"
)

// BufferCache recycles the block buffers of finished products for later
// ones. A fresh 2048x2048 block is 32 MiB of pages that the kernel must
// fault in and zero (0.6-1.6 s per GiB on the VM this was measured on);
// reusing them saves that on every product after the first. Give the same
// cache to every Config of a program that multiplies repeatedly. It is safe
// for concurrent use; the zero value is ready, and the garbage collector
// empties it when its buffers stay unused.
type BufferCache struct {
	pools sync.Map // int -> *sync.Pool of *[]float64
}

func (bc *BufferCache) pool(n int) *sync.Pool {
	if p, ok := bc.pools.Load(n); ok {
		return p.(*sync.Pool)
	}
	p, _ := bc.pools.LoadOrStore(n, &sync.Pool{})
	return p.(*sync.Pool)
}

// blockBuffers is the allocator of the graphs' pools: host buffers of n
// float64s, from and back to cache when there is one. Recycled buffers
// come back with old contents: loaders and multiplies overwrite them whole.
func blockBuffers(n int, cache *BufferCache) memmgr.Allocator[[]float64] {
	if cache == nil {
		return memmgr.Slices[float64](n)
	}
	return recycler{n, cache}
}

type recycler struct {
	n     int
	cache *BufferCache
}

// Alloc returns a cached buffer or a new one.
func (r recycler) Alloc(device.Device) ([]float64, error) {
	if v, ok := r.cache.pool(r.n).Get().(*[]float64); ok {
		return *v, nil
	}
	return make([]float64, r.n), nil
}

// Free puts the buffer in the cache.
func (r recycler) Free(_ device.Device, v []float64) error {
	r.cache.pool(r.n).Put(&v)
	return nil
}
