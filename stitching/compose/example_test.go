package compose_test

import (
	"context"
	"fmt"
	"image"
	"image/color"

	"github.com/gohtgs/htgs/stitching/compose"
)

func ExampleCompose() {
	// Two 4 x 1 tiles of constant value; the second starts at x = 2, so
	// mosaic columns 2 and 3 are covered by both.
	tile := func(v uint16) *image.Gray16 {
		img := image.NewGray16(image.Rect(0, 0, 4, 1))
		for x := range 4 {
			img.SetGray16(x, 0, color.Gray16{Y: v})
		}
		return img
	}
	tiles := []compose.Placement{
		{Image: tile(100), X: 0, Y: 0},
		{Image: tile(400), X: 2, Y: 0},
	}
	for _, mode := range []compose.Blend{compose.Overlay, compose.Average, compose.Linear} {
		m, err := compose.Compose(context.Background(), tiles, mode)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%-7s", mode)
		for x := range m.Bounds().Dx() {
			fmt.Printf(" %d", m.Gray16At(x, 0).Y)
		}
		fmt.Println()
	}
	// Output:
	// overlay 100 100 400 400 400 400
	// average 100 100 250 250 400 400
	// linear  100 100 200 300 400 400
}

func ExamplePrefetch() {
	// Three tiles in a column, "decoded" by a loader that is safe for
	// concurrent use; Prefetch loads them two at a time ahead of the
	// sweep, which still takes them top to bottom.
	slots := []compose.Slot{
		{X: 0, Y: 0, Width: 2, Height: 2},
		{X: 0, Y: 2, Width: 2, Height: 2},
		{X: 0, Y: 4, Width: 2, Height: 2},
	}
	load := func(i int) (*image.Gray16, error) {
		img := image.NewGray16(image.Rect(0, 0, 2, 2))
		for y := range 2 {
			for x := range 2 {
				img.SetGray16(x, y, color.Gray16{Y: uint16(100 * (i + 1))})
			}
		}
		return img, nil
	}
	ctx := context.Background()
	loader, stop := compose.Prefetch(ctx, slots, load, 2)
	defer stop()
	m, err := compose.ComposeFunc(ctx, slots, loader, compose.Overlay)
	if err != nil {
		fmt.Println(err)
		return
	}
	var column []uint16
	for y := range m.Bounds().Dy() {
		column = append(column, m.Gray16At(0, y).Y)
	}
	fmt.Println(column)
	// Output:
	// [100 100 200 200 300 300]
}
