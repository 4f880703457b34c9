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
