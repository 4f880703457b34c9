package region_test

import (
	"context"
	"fmt"

	"github.com/gohtgs/htgs/region"
)

// Nuclei outlines kept as a polygon set; a query returns the polygons that
// intersect a box (bounding-box prefilter, then an exact test).
func ExamplePolygonSet_Query() {
	ctx := context.Background()
	nuclei, _ := region.NewPolygonSet(region.ID{Name: "slide::nuclei"}, region.Rect(0, 0, 100, 100), region.Box{})
	square := func(id int64, x, y, s float64) region.Polygon {
		return region.Polygon{ID: id, Ring: []region.Point{{x, y}, {x + s, y}, {x + s, y + s}, {x, y + s}}}
	}
	nuclei.Add(ctx, square(1, 18, 18, 5))
	nuclei.Add(ctx, square(2, 40, 40, 20))
	// A thin diagonal sliver whose bounding box overlaps the query box
	// but which does not reach it.
	nuclei.Add(ctx, region.Polygon{ID: 3, Ring: []region.Point{{20, 0}, {30, 0}, {0, 30}}})
	hits, _ := nuclei.Query(ctx, region.Rect(20, 20, 45, 45))
	for _, p := range hits {
		fmt.Println(p.ID, p.Bounds())
	}
	// Output:
	// 1 [18,24)x[18,24)
	// 2 [40,61)x[40,61)
}

// A 100x100 domain split into 50x50 tiles with a 2-pixel ghost border: one
// stage instance per partition reads ROI and commits Core.
func ExampleGrid() {
	parts, _ := region.Grid(region.Rect(0, 0, 100, 100), [3]int{50, 50}, 2)
	for _, p := range parts {
		fmt.Println(p.Index, p.Core, p.ROI)
	}
	// Output:
	// 0 [0,50)x[0,50) [0,52)x[0,52)
	// 1 [50,100)x[0,50) [48,100)x[0,52)
	// 2 [0,50)x[50,100) [0,52)x[48,100)
	// 3 [50,100)x[50,100) [48,100)x[48,100)
}
