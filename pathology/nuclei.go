package pathology

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/region"
)

// The nuclei of a slide are kept as polygons: after labelling, each
// nucleus's outer boundary is traced from the label image into the
// slide-wide polygon set slide::Nuclei, one partition (ROI) per tile, and
// committed to the output storage (a region.ObjectStorage). The tile's
// output joins the polygons with the feature tables by tile key
// (bookkeeper.NewJoinN) before it leaves the graph.

// nucleiID is the identifier of the slide's nuclei polygon set.
func nucleiID() region.ID { return region.ID{Name: "slide::Nuclei", Type: region.Polygons} }

// nucleiBounds returns the bounds of the nuclei polygon set of a slide of
// cols x rows tiles of size pixels: the slide grown by one on the high
// sides, since a pixel's outline reaches its far corner (x+1, y+1).
func nucleiBounds(cols, rows, size int) region.Box {
	return region.Rect(0, 0, cols*size+1, rows*size+1)
}

// nucleusID is the polygon identifier of label l of tile: unique in the
// slide's set.
func nucleusID(tile int, l uint16) int64 { return int64(tile)<<16 | int64(l) }

// nucleusLabel is the inverse of nucleusID.
func nucleusLabel(id int64) (tile int, l uint16) { return int(id >> 16), uint16(id) }

// traceOutlines returns the outer boundary of every label (1..) of the w x h
// label image, as polygons in slide coordinates (the image's pixel (x, y)
// is the slide's (x0+x, y0+y)), sorted by label, with IDs nucleusID(tile,
// l). The outline follows the pixel edges (crack following, object on the
// right, clockwise in image coordinates): the polygon covers exactly the
// label's pixels and the holes they enclose, so its area (shoelace) is the
// label's pixel area plus its holes. A label is taken to be 4-connected,
// as bwLabel makes them: at a vertex where two of its pixels touch only
// diagonally the outline turns away from the diagonal one, and a label of
// several 4-components gets the outline of the first one in raster order.
func traceOutlines(labels []uint16, w, h, x0, y0, tile int) []region.Polygon {
	start := map[uint16]int{}
	var order []uint16
	for i, l := range labels {
		if l == 0 {
			continue
		}
		if _, ok := start[l]; !ok {
			start[l] = i
			order = append(order, l)
		}
	}
	sort.Slice(order, func(a, b int) bool { return order[a] < order[b] })
	polys := make([]region.Polygon, 0, len(order))
	for _, l := range order {
		sx, sy := start[l]%w, start[l]/w
		polys = append(polys, region.Polygon{ID: nucleusID(tile, l), Ring: traceLabel(labels, w, h, l, sx, sy, x0, y0)})
	}
	return polys
}

// Directions in image coordinates (y down), clockwise: +x, +y, -x, -y; and
// for each, the offsets from a vertex to the pixels ahead on the right and
// on the left of the edge leaving it.
var (
	dirs   = [4][2]int{{1, 0}, {0, 1}, {-1, 0}, {0, -1}}
	aheadR = [4][2]int{{0, 0}, {-1, 0}, {-1, -1}, {0, -1}}
	aheadL = [4][2]int{{0, -1}, {0, 0}, {-1, 0}, {-1, -1}}
)

// traceLabel traces the outer boundary of label l from its first pixel in
// raster order (sx, sy), keeping only the corners.
func traceLabel(labels []uint16, w, h int, l uint16, sx, sy, x0, y0 int) []region.Point {
	obj := func(x, y int) bool { return x >= 0 && y >= 0 && x < w && y < h && labels[y*w+x] == l }
	var ring []region.Point
	vx, vy, d := sx, sy, 0
	for first := true; ; first = false {
		nd := d
		switch {
		case !obj(vx+aheadR[d][0], vy+aheadR[d][1]):
			nd = (d + 1) % 4 // turn right
		case obj(vx+aheadL[d][0], vy+aheadL[d][1]):
			nd = (d + 3) % 4 // turn left
		}
		if !first && vx == sx && vy == sy && nd == 0 {
			return ring
		}
		if first || nd != d {
			ring = append(ring, region.Point{X: float64(x0 + vx), Y: float64(y0 + vy)})
		}
		d = nd
		vx, vy = vx+dirs[d][0], vy+dirs[d][1]
	}
}

// PolygonArea returns the area of a polygon (shoelace formula).
func PolygonArea(p region.Polygon) float64 {
	var s float64
	for i, a := range p.Ring {
		b := p.Ring[(i+1)%len(p.Ring)]
		s += a.X*b.Y - b.X*a.Y
	}
	return math.Abs(s) / 2
}

// outlineTile traces the nuclei of tile i (box b, labels of its w x h
// pixels) into its partition of the slide's polygon set and commits them
// to out.
func outlineTile(ctx context.Context, out region.ObjectStorage, bounds, b region.Box, i int, labels []uint16) (*region.PolygonSet, error) {
	set, err := region.NewPolygonSet(nucleiID(), bounds, b)
	if err != nil {
		return nil, err
	}
	w, h := b.Shape()[0], b.Shape()[1]
	for _, p := range traceOutlines(labels, w, h, b.Lo[0], b.Lo[1], i) {
		if err := set.Add(ctx, p); err != nil {
			return nil, err
		}
	}
	set.SetOutput(out)
	if err := set.Commit(ctx); err != nil {
		return nil, err
	}
	return set, nil
}

// tilePart is one of the two halves of a tile's output that the join
// waits for: its nuclei outlines (from the outline stage) or its feature
// rows (from the measure stage).
type tilePart struct {
	index, nuclei int
	outlines      *region.PolygonSet     // the outline half
	feats         [][numFeatures]float64 // the measure half: rows of labels 1..
	isFeats       bool
}

// newTileJoin returns the keyed join of a tile's two parts: by tile index,
// two parts a tile, merged into the tile's result.
func newTileJoin() *bookkeeper.Join[tilePart, int, TileResult] {
	return bookkeeper.NewJoinN(func(p tilePart) int { return p.index }, func(int) int { return 2 },
		func(i int, got []tilePart) TileResult {
			r := TileResult{index: i}
			for _, p := range got {
				r.nuclei = p.nuclei
				if p.isFeats {
					r.feats = p.feats
				} else {
					r.outlines = p.outlines
				}
			}
			return r
		})
}

// featureRows returns the rows of the feature tables for labels 1..n
// (every label has one: objectRows), merging the three tables: each
// operation fills its own columns.
func featureRows(n int, tables ...[]float64) [][numFeatures]float64 {
	have := n
	for _, t := range tables {
		have = min(have, len(t)/numFeatures)
	}
	rows := make([][numFeatures]float64, have)
	for r := range rows {
		for _, t := range tables {
			for c := range numFeatures {
				if v := t[r*numFeatures+c]; v != 0 {
					rows[r][c] = v
				}
			}
		}
	}
	return rows
}

// nucleus is one nucleus of the output: its polygon and its features.
type nucleus struct {
	tile  int
	label uint16
	poly  region.Polygon
	feats [numFeatures]float64
}

// nucleiList returns the tile's nuclei (those anchored in it), by label,
// each polygon with its feature row.
func (r TileResult) nucleiList(ctx context.Context) ([]nucleus, error) {
	if r.outlines == nil {
		return nil, nil
	}
	polys, err := r.outlines.Polygons(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]nucleus, 0, len(polys))
	for _, p := range polys {
		t, l := nucleusLabel(p.ID)
		n := nucleus{tile: t, label: l, poly: p}
		if int(l) <= len(r.feats) {
			n.feats = r.feats[l-1]
		}
		out = append(out, n)
	}
	return out, nil
}

// nucleiInBox returns the nuclei of the slide's polygon set stored in in
// that intersect box (a ROI query: only the polygons intersecting box are
// read).
func nucleiInBox(ctx context.Context, in region.ObjectStorage, box region.Box) ([]region.Polygon, error) {
	set, err := region.OpenPolygonSet(ctx, in, nucleiID(), box)
	if err != nil {
		return nil, err
	}
	return set.Query(ctx, box)
}

// WriteNucleiGeoJSON writes the nuclei of the results as a GeoJSON
// FeatureCollection: one Polygon feature a nucleus, in pixel coordinates
// of the slide, with its tile, label, polygon area and features: area
// (pixels), meanDarkness (255 minus the mean of RGB), meanHematoxylin
// (the mean hematoxylin optical density by colour deconvolution),
// meanGradient (the mean Sobel magnitude of the grey image), edgeShare
// (the share of its pixels on a Canny edge) and perimeter (pixels).
func WriteNucleiGeoJSON(ctx context.Context, w io.Writer, results []TileResult) error {
	type geometry struct {
		Type        string         `json:"type"`
		Coordinates [][][2]float64 `json:"coordinates"`
	}
	type feature struct {
		Type       string         `json:"type"`
		ID         int64          `json:"id"`
		Geometry   geometry       `json:"geometry"`
		Properties map[string]any `json:"properties"`
	}
	fc := struct {
		Type     string    `json:"type"`
		Features []feature `json:"features"`
	}{Type: "FeatureCollection", Features: []feature{}}
	for _, r := range results {
		ns, err := r.nucleiList(ctx)
		if err != nil {
			return err
		}
		for _, n := range ns {
			ring := make([][2]float64, 0, len(n.poly.Ring)+1)
			for _, q := range n.poly.Ring {
				ring = append(ring, [2]float64{q.X, q.Y})
			}
			ring = append(ring, ring[0]) // GeoJSON rings repeat the first point
			fc.Features = append(fc.Features, feature{Type: "Feature", ID: n.poly.ID,
				Geometry: geometry{Type: "Polygon", Coordinates: [][][2]float64{ring}},
				Properties: map[string]any{"tile": n.tile, "label": n.label, "polygonArea": PolygonArea(n.poly),
					"area": n.feats[featArea], "meanDarkness": n.feats[featMean], "meanGradient": n.feats[featGrad], "perimeter": n.feats[featPerim],
					"meanHematoxylin": n.feats[featHema], "edgeShare": n.feats[featEdge]}})
		}
	}
	enc := json.NewEncoder(w)
	if err := enc.Encode(fc); err != nil {
		return fmt.Errorf("nuclei GeoJSON: %w", err)
	}
	return nil
}

// NucleiInBox returns the nuclei outlined by a Run of s, in its output
// storage, whose polygons intersect box (slide pixels): a ROI query that
// reads only the polygons intersecting box. A box outside the slide has
// none.
func (s *Slide) NucleiInBox(ctx context.Context, box region.Box) ([]region.Polygon, error) {
	box = box.Intersect(nucleiBounds(s.cols, s.rows, s.size))
	if box.Empty() {
		return nil, nil
	}
	objs, ok := s.out.(region.ObjectStorage)
	if !ok {
		return nil, fmt.Errorf("pathology: output storage %T keeps no polygon sets", s.out)
	}
	polys, err := nucleiInBox(ctx, objs, box)
	if err != nil {
		return nil, fmt.Errorf("pathology: nuclei in %v: %w", box, err)
	}
	return polys, nil
}
