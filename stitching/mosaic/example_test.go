package mosaic_test

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"os"
	"path/filepath"

	"github.com/gohtgs/htgs/stitching/compose"
	"github.com/gohtgs/htgs/stitching/mosaic"
	"github.com/gohtgs/htgs/stitching/tileio"
	"github.com/gohtgs/htgs/tiled"
)

// A 2 x 2 grid of 100 x 80 tiles at the positions a stitch found (here
// given), composed within a 256 MiB budget (in memory) into a tiled pyramidal
// OME-TIFF, and its preview.
func ExampleWrite() {
	tiles := make([]*image.Gray16, 4)
	for i := range tiles {
		tiles[i] = image.NewGray16(image.Rect(0, 0, 100, 80))
		for y := range 80 {
			for x := range 100 {
				tiles[i].SetGray16(x, y, color.Gray16{Y: uint16(1000 * (i + 1))})
			}
		}
	}
	src, err := tileio.NewMemoryTiles(2, 2, tiles, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	pos := []tileio.GlobalPosition{ // row-major, as Result.GlobalPositions
		{Row: 0, Col: 0, X: 0, Y: 1}, {Row: 0, Col: 1, X: 90, Y: 0},
		{Row: 1, Col: 0, X: 1, Y: 71}, {Row: 1, Col: 1, X: 91, Y: 70},
	}
	slots := mosaic.Slots(pos, 100, 80)
	opt := mosaic.Options{
		Format: mosaic.Format{Kind: mosaic.OMETIFF, TileSize: 64, Channels: []string{"DAPI"}},
		Blend:  compose.Linear,
		Memory: 256 << 20,
	}
	plan := mosaic.NewPlan(slots, opt)
	fmt.Printf("mosaic %d x %d, out of core: %v\n", plan.Width, plan.Height, plan.OutOfCore)

	dir, err := os.MkdirTemp("", "mosaic-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "stitched.ome.tif")
	preview, err := mosaic.Write(context.Background(), path, "stitched", slots, []mosaic.Channel{{Tiles: src}}, plan, opt)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("preview", preview.Bounds().Dx(), "x", preview.Bounds().Dy())

	f, err := tiled.OpenBigTIFF(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	for _, lv := range f.Levels {
		fmt.Printf("level %d x %d in %d x %d tiles\n", lv.W, lv.H, lv.TW, lv.TH)
	}
	// Output:
	// mosaic 191 x 151, out of core: false
	// preview 191 x 151
	// level 191 x 151 in 64 x 64 tiles
	// level 96 x 76 in 64 x 64 tiles
	// level 48 x 38 in 64 x 64 tiles
}
