package cudapool_test

import (
	"fmt"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/cuda/cudapool"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/memmgr"
)

// A pool of four 1 MiB device buffers on the first GPU, for a graph that
// runs outside an execution pipeline: its pool is given the host, and
// DeviceBuffersOn allocates on the GPU it names. Tasks that take buffers
// from the pool are declared with memmgr.Use.
func ExampleDeviceBuffersOn() {
	ds, err := cuda.Devices()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	defer ds[0].Close()
	g := graph.New[int, int]("gpu")
	pool := memmgr.New(g, "frames", 4, cudapool.DeviceBuffersOn(ds[0], 1<<20))
	fmt.Println(pool.Name(), pool.Capacity())
}
