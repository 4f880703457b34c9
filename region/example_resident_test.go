package region_test

import (
	"context"
	"fmt"

	"github.com/gohtgs/htgs/region"
)

// A region's data lives on a device while operations there reuse it. Host
// memory poses as the GPU here; with a real one, the operation would launch
// a kernel on the buffer.
func ExampleDense_Upload() {
	ctx := context.Background()
	mask, _ := region.NewDense[uint8](region.ID{Name: "tile::Mask"}, region.Rect(0, 0, 4, 1))
	data, _ := mask.Data(ctx)
	copy(data, []uint8{0, 1, 0, 1})
	gpu := region.HostDevice{Index: 0}

	invert := func() { // an operation on the device
		buf, err := mask.Upload(ctx, gpu) // copies only the first time
		if err != nil {
			panic(err)
		}
		for i, v := range buf.(region.HostBuffer) {
			buf.(region.HostBuffer)[i] = 1 - v
		}
		if err := mask.DeviceWrote(gpu); err != nil {
			panic(err)
		}
	}
	invert()
	fmt.Println("after one operation:", mask.Where())
	invert()

	down := mask.DownloadAsync(ctx) // overlaps with other work
	if err := down.Wait(ctx); err != nil {
		panic(err)
	}
	fmt.Println("after download:", mask.Where())
	data, _ = mask.Data(ctx)
	fmt.Println(data)
	// Output:
	// after one operation: hostgpu0
	// after download: host+hostgpu0
	// [0 1 0 1]
}
