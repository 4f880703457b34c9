package stitching_test

import (
	"context"
	"fmt"
	"image"
	"log"
	"slices"

	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// Stitch a grid while its tiles are acquired: a program driving the
// microscope hands each tile over as it comes (here from a generated
// grid, in a snake), and gets the Result Stitch gives on the whole grid.
func ExampleStitchLive() {
	_, mem := grid()
	live, err := tileio.NewLiveTiles(mem.Rows(), mem.Cols(), nil)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		defer live.Close() // no more tiles
		snake := tileio.Layout{Numbering: tileio.HorizontalContinuous}
		order := make([]image.Point, mem.Rows()*mem.Cols())
		for r := range mem.Rows() {
			for c := range mem.Cols() {
				order[snake.Index(r, c, mem.Rows(), mem.Cols())] = image.Pt(c, r)
			}
		}
		for _, p := range order {
			tile, _ := mem.Load(p.Y, p.X) // the camera's frame
			if err := live.Add(p.Y, p.X, tile); err != nil {
				log.Fatal(err)
			}
		}
	}()
	opt, gopt := align.Options{}, stitching.GraphOptions{Workers: 2}
	var last stitching.LiveState
	res, err := stitching.StitchLive(context.Background(), live, live.Arrivals(), opt, gopt,
		stitching.LiveOptions{Update: func(s stitching.LiveState) { last = s }})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d of %d tiles, %d of %d pairs registered, %d placed\n", last.Arrived, last.Tiles, last.Registered, last.Pairs, last.Placed)
	offline, err := stitching.Stitch(context.Background(), mem, opt, gopt)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the positions of Stitch:", slices.Equal(res.Positions, offline.Positions))
	// Output:
	// 12 of 12 tiles, 17 of 17 pairs registered, 12 placed
	// the positions of Stitch: true
}
