package pathology

import (
	"context"
	"slices"
	"testing"

	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"
)

// handLabels is a hand-made 12 x 10 label image: a 3x3 square (1), an L
// (2), a ring with a one-pixel hole (3), a single pixel (4), a staircase
// whose pixels touch only diagonally from one step to the next (5), a hook
// along the image's right edge (6), and a shape whose two arms touch only
// diagonally, so that its outline pinches at a vertex and leaves out the
// background pixel between them, which reaches the outside diagonally (7).
var handLabels = []string{
	"111.2.....66",
	"111.2...4..6",
	"111.22.....6",
	"...........6",
	"333....5...6",
	"3.3....55...",
	"333.....55..",
	"777.........",
	"7.7.........",
	"77..........",
}

// parseLabels turns handLabels-like rows into a label image.
func parseLabels(rows []string) (labels []uint16, w, h int) {
	w, h = len(rows[0]), len(rows)
	labels = make([]uint16, w*h)
	for y, row := range rows {
		for x, c := range row {
			if c != '.' {
				labels[y*w+x] = uint16(c - '0')
			}
		}
	}
	return labels, w, h
}

// filledPixels reports, per pixel, whether it lies inside label l's outer
// boundary: l's pixels and the background (every other value) that the
// outside cannot reach 8-connectedly without crossing l — the pixels the
// traced outline of a 4-connected label must cover.
func filledPixels(labels []uint16, w, h int, l uint16) []bool {
	outside := make([]bool, w*h)
	var stack []int
	for y := range h {
		for x := range w {
			if (x == 0 || y == 0 || x == w-1 || y == h-1) && labels[y*w+x] != l {
				outside[y*w+x] = true
				stack = append(stack, y*w+x)
			}
		}
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		x, y := i%w, i/w
		for dy := -1; dy <= 1; dy++ {
			for dx := -1; dx <= 1; dx++ {
				nx, ny := x+dx, y+dy
				if nx < 0 || ny < 0 || nx >= w || ny >= h {
					continue
				}
				if j := ny*w + nx; !outside[j] && labels[j] != l {
					outside[j] = true
					stack = append(stack, j)
				}
			}
		}
	}
	in := make([]bool, w*h)
	for i := range in {
		in[i] = !outside[i]
	}
	return in
}

// checkOutlines checks the traced outlines of a label image: one polygon a
// label, area (shoelace) = the label's pixels plus its enclosed holes,
// every pixel centre inside the polygon exactly when it is one of those.
// It returns the polygons.
func checkOutlines(t *testing.T, labels []uint16, w, h, x0, y0, tile int) []region.Polygon {
	t.Helper()
	n := 0
	for _, l := range labels {
		n = max(n, int(l))
	}
	polys := traceOutlines(labels, w, h, x0, y0, tile)
	if len(polys) != n {
		t.Fatalf("%d outlines for %d labels", len(polys), n)
	}
	for k, p := range polys {
		l := uint16(k + 1)
		if gt, gl := nucleusLabel(p.ID); gt != tile || gl != l {
			t.Errorf("polygon %d: ID %d is tile %d label %d, want tile %d label %d", k, p.ID, gt, gl, tile, l)
		}
		in := filledPixels(labels, w, h, l)
		pixels, filled := 0, 0
		for i, v := range in {
			if labels[i] == l {
				pixels++
			}
			if v {
				filled++
			}
			c := region.Point{X: float64(x0+i%w) + 0.5, Y: float64(y0+i/w) + 0.5}
			if p.Contains(c) != v {
				t.Errorf("label %d: pixel (%d,%d) inside the polygon %v, inside the outline %v", l, i%w, i/w, p.Contains(c), v)
			}
		}
		if a := PolygonArea(p); a != float64(filled) {
			t.Errorf("label %d: polygon area %v, want %d (%d pixels + %d enclosed)", l, a, filled, pixels, filled-pixels)
		}
		for _, q := range p.Ring {
			if q.X < float64(x0) || q.Y < float64(y0) || q.X > float64(x0+w) || q.Y > float64(y0+h) {
				t.Errorf("label %d: vertex %v outside the image", l, q)
			}
		}
	}
	return polys
}

// TestTraceOutlines traces the hand-made labels: each polygon's area is its
// label's pixel area plus the holes it encloses (only the ring, 3, has
// one), and the polygons cover exactly those
// pixels.
func TestTraceOutlines(t *testing.T) {
	labels, w, h := parseLabels(handLabels)
	polys := checkOutlines(t, labels, w, h, 100, 200, 5)
	want := map[uint16]float64{1: 9, 2: 4, 3: 8 + 1, 4: 1, 5: 5, 6: 6, 7: 7}
	for _, p := range polys {
		_, l := nucleusLabel(p.ID)
		if a := PolygonArea(p); a != want[l] {
			t.Errorf("label %d: area %v, want %v", l, a, want[l])
		}
	}
	// The square's outline is its four corners, clockwise in image
	// coordinates, in slide coordinates.
	if sq := []region.Point{{X: 100, Y: 200}, {X: 103, Y: 200}, {X: 103, Y: 203}, {X: 100, Y: 203}}; !slices.Equal(polys[0].Ring, sq) {
		t.Errorf("square outline %v, want %v", polys[0].Ring, sq)
	}
}

// TestTraceOutlinesRandom checks the outlines of bwLabel's components on
// random masks.
func TestTraceOutlinesRandom(t *testing.T) {
	const w, h = 23, 17
	mask := make([]uint16, w*h)
	labels := make([]uint16, w*h)
	seed := uint32(7)
	for trial := range 20 {
		for i := range mask {
			seed = seed*1664525 + 1013904223
			mask[i] = 0
			if seed>>24 < uint32(80+5*trial) {
				mask[i] = 1
			}
		}
		bwLabel(mask, labels, w, h)
		checkOutlines(t, labels, w, h, 0, 0, trial)
	}
}

// TestNucleiROIQuery commits the hand-made labels as tile 1 of a two-tile
// slide and asks the stored polygon set for the nuclei intersecting boxes
// (a ROI query reads only the polygons intersecting its box).
func TestNucleiROIQuery(t *testing.T) {
	ctx := context.Background()
	labels, w, h := parseLabels(handLabels)
	store := region.NewMemory()
	tile := region.Rect(w, 0, 2*w, h) // tile 1: x in [12, 24)
	set, err := outlineTile(ctx, store, nucleiBounds(2, 1, w), tile, 1, labels)
	if err != nil {
		t.Fatal(err)
	}
	if ps, _ := set.Polygons(ctx); len(ps) != 7 {
		t.Fatalf("%d polygons in the tile's set, want 7", len(ps))
	}
	ids := func(box region.Box) []uint16 {
		t.Helper()
		polys, err := nucleiInBox(ctx, store, box)
		if err != nil {
			t.Fatal(err)
		}
		var ls []uint16
		for _, p := range polys {
			tl, l := nucleusLabel(p.ID)
			if tl != 1 {
				t.Errorf("polygon %d from tile %d", p.ID, tl)
			}
			ls = append(ls, l)
		}
		return ls
	}
	for _, c := range []struct {
		box  region.Box
		want []uint16
	}{
		{region.Rect(0, 0, 12, 10), []uint16{1, 3, 7}},              // tile 0's area: the outlines of x = 12 touch it
		{region.Rect(0, 0, 11, 10), nil},                            // nothing in tile 0
		{region.Rect(12, 0, 24, 11), []uint16{1, 2, 3, 4, 5, 6, 7}}, // the whole tile
		{region.Rect(13, 1, 14, 2), []uint16{1}},                    // inside the square
		{region.Rect(13, 5, 14, 6), []uint16{3}},                    // the ring's hole, inside its outline
		{region.Rect(16, 0, 21, 3), []uint16{2, 4}},                 // the L and the single pixel
		{region.Rect(18, 4, 21, 7), []uint16{5}},                    // the staircase
		{region.Rect(17, 7, 18, 8), nil},                            // background between nuclei
		{region.Rect(22, 0, 24, 2), []uint16{6}},                    // the bar on the right edge
	} {
		if got := ids(c.box); !slices.Equal(got, c.want) {
			t.Errorf("nuclei intersecting %v: %v, want %v", c.box, got, c.want)
		}
	}
}

// TestTileJoin joins the two parts of each tile by tile key, in either
// order and interleaved with other tiles, and frees each key when its
// result is out.
func TestTileJoin(t *testing.T) {
	ctx := context.Background()
	j := newTileJoin()
	out := &collect[TileResult]{}
	set, _ := region.NewPolygonSet(nucleiID(), region.Rect(0, 0, 10, 10), region.Box{})
	feats := [][numFeatures]float64{{3, 1, 2, 4}}
	parts := []tilePart{
		{index: 0, nuclei: 1, outlines: set},
		{index: 1, nuclei: 0, feats: nil, isFeats: true},
		{index: 2, nuclei: 1, feats: feats, isFeats: true},
		{index: 1, nuclei: 0, outlines: set},
		{index: 0, nuclei: 1, feats: feats, isFeats: true},
		{index: 2, nuclei: 1, outlines: set},
	}
	for _, p := range parts {
		if err := j.Apply(ctx, p, out); err != nil {
			t.Fatal(err)
		}
	}
	var order []int
	for _, r := range out.got {
		order = append(order, r.index)
		if r.outlines != set || (r.nuclei == 1) != (len(r.feats) == 1) {
			t.Errorf("tile %d joined to %+v", r.index, r)
		}
	}
	if !slices.Equal(order, []int{1, 0, 2}) {
		t.Errorf("tiles joined in order %v, want [1 0 2]", order)
	}
	if j.Len() != 0 {
		t.Errorf("%d tiles still pending", j.Len())
	}
}

type collect[T any] struct{ got []T }

func (c *collect[T]) Emit(v T) error { c.got = append(c.got, v); return nil }

// TestRealRunNuclei runs the real pipeline, static and dynamic: every tile's
// result holds one polygon per nucleus it reports, each covering its
// label's pixels and enclosed holes, joined with the label's feature row;
// the slide's committed polygon set answers ROI queries.
func TestRealRunNuclei(t *testing.T) {
	ctx := context.Background()
	w := NewWorkload(6, 3)
	for _, dynamic := range []bool{false, true} {
		in, out := region.NewMemory(), region.NewMemory()
		s, err := NewSlide(ctx, 6, 64, 3, in, out)
		if err != nil {
			t.Fatal(err)
		}
		cfg := pats.Config{Policy: pats.PATS, Window: 3}
		res, _, _, err := runReal(ctx, s, w, cfg, pats.Machine{CPUs: 2, GPUs: 1, Bandwidth: 5e9}.Units(0.001), w.GivenSpeedups(), dynamic)
		if err != nil {
			t.Fatal(err)
		}
		lr, err := region.OpenDense[uint16](ctx, out, labelsID(), region.Box{})
		if err != nil {
			t.Fatal(err)
		}
		all, err := lr.Data(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for i, r := range res {
			total += r.nuclei
			ns, err := r.nucleiList(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(ns) != r.nuclei {
				t.Errorf("dynamic=%v: tile %d: %d polygons, %d nuclei", dynamic, i, len(ns), r.nuclei)
			}
			b := s.Box(i)
			tl := make([]uint16, s.size*s.size)
			for y := range s.size {
				copy(tl[y*s.size:(y+1)*s.size], all[(b.Lo[1]+y)*s.cols*s.size+b.Lo[0]:])
			}
			polys := checkOutlines(t, tl, s.size, s.size, b.Lo[0], b.Lo[1], i)
			for k, n := range ns {
				if !slices.Equal(n.poly.Ring, polys[k].Ring) {
					t.Errorf("tile %d nucleus %d: joined polygon differs from the committed labels' outline", i, n.label)
				}
				pixels := 0
				for _, l := range tl {
					if l == n.label {
						pixels++
					}
				}
				if n.feats[featArea] != float64(pixels) || n.feats[featPerim] <= 0 {
					t.Errorf("tile %d nucleus %d: %d pixels, features %v", i, n.label, pixels, n.feats)
				}
				if a := PolygonArea(n.poly); a < float64(pixels) {
					t.Errorf("tile %d nucleus %d: polygon area %v < %d pixels", i, n.label, a, pixels)
				}
			}
			// A ROI query on the tile's box finds its nuclei (and those of
			// its neighbours touching its edges).
			inBox, err := nucleiInBox(ctx, out, b)
			if err != nil {
				t.Fatal(err)
			}
			mine := 0
			for _, p := range inBox {
				if tt, _ := nucleusLabel(p.ID); tt == i {
					mine++
				}
			}
			if mine != r.nuclei {
				t.Errorf("tile %d: ROI query found %d of its %d nuclei", i, mine, r.nuclei)
			}
		}
		whole, err := nucleiInBox(ctx, out, nucleiBounds(s.cols, s.rows, s.size))
		if err != nil {
			t.Fatal(err)
		}
		if len(whole) != total || total == 0 {
			t.Errorf("dynamic=%v: the stored set holds %d polygons, %d nuclei found", dynamic, len(whole), total)
		}
	}
}
