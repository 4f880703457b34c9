package region_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/gohtgs/htgs/region"
)

// A region template holds the data regions of one slide; regions of one
// name differ by version (or timestamp, or kind).
func ExampleTemplate() {
	t, _ := region.NewTemplate("patient")
	rgb, _ := region.NewDense[uint8](region.ID{Name: "slide::RGB"}, region.Cube(0, 0, 0, 100, 100, 3))
	mask, _ := region.NewDense[uint8](region.ID{Name: "slide::Mask"}, region.Rect(0, 0, 100, 100))
	fixed, _ := region.NewDense[uint8](region.ID{Name: "slide::Mask", Version: 1}, region.Rect(0, 0, 120, 100))
	for _, r := range []region.Region{rgb, mask, fixed} {
		if err := t.Insert(r); err != nil {
			panic(err)
		}
	}
	latest, _ := t.Latest("slide::Mask")
	fmt.Println("latest mask:", latest.ID())
	fmt.Println("bounds:", t.Bounds())
	_, err := t.Region(region.ID{Name: "slide::Mask", Type: region.Dense2D, Version: 2})
	fmt.Println(errors.Is(err, region.ErrNotFound))
	// Output:
	// latest mask: slide::Mask/dense2d/t0/v1
	// bounds: [0,120)x[0,100)x[0,3)
	// true
}

// A stage instance binds a stored region with its partition as region of
// interest; the ROI, and only the ROI, is read on first access.
func ExampleBindDense() {
	ctx := context.Background()
	store := region.NewMemory()
	whole, _ := region.NewDense[uint16](region.ID{Name: "image"}, region.Rect(0, 0, 4, 4))
	data, _ := whole.Data(ctx)
	for i := range data {
		data[i] = uint16(i)
	}
	whole.SetOutput(store)
	if err := whole.Commit(ctx); err != nil {
		panic(err)
	}

	part, _ := region.BindDense[uint16](whole.ID(), whole.Bounds(), region.Rect(2, 2, 4, 4), store)
	fmt.Println("loaded before access:", part.Loaded())
	roi, _ := part.Data(ctx)
	fmt.Println("ROI:", roi, "element (3,2):", part.At(3, 2))
	_, err := region.BindDense[uint16](whole.ID(), whole.Bounds(), region.Rect(3, 3, 5, 5), store)
	fmt.Println(errors.Is(err, region.ErrOutOfBounds))
	// Output:
	// loaded before access: false
	// ROI: [10 11 14 15] element (3,2): 11
	// true
}

// Disk storage keeps each region in a file read and written box by box.
func ExampleNewDisk() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "regions")
	defer os.RemoveAll(dir)
	disk, _ := region.NewDisk(dir)
	labels, _ := region.NewDense[int32](region.ID{Name: "labels", Timestamp: 3}, region.Rect(0, 0, 3, 1))
	data, _ := labels.Data(ctx)
	copy(data, []int32{7, -1, 42})
	labels.SetOutput(disk)
	if err := labels.Commit(ctx); err != nil {
		panic(err)
	}
	back, _ := region.OpenDense[int32](ctx, disk, labels.ID(), region.Box{})
	got, _ := back.Data(ctx)
	ids, _ := disk.List(ctx)
	fmt.Println(got, ids)
	// Output: [7 -1 42] [labels/dense2d/t3/v0]
}
