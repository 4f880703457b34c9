package stitching

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gohtgs/htgs/stitching/align"
)

// The pictures of docs/stitching.md's section on issue 31's classes are
// drawn from the cases the tests check, by the stitcher itself:
//
//	go test ./stitching -run TestDocFigures -stitch.figures ../docs/img
//
// (the folder is relative to the package's, where tests run)
//
// Without the flag the test draws them into a temporary folder and checks
// that each drawing shows what its caption claims (so a regression that
// changes a picture's story fails here, and the pictures cannot drift
// from the code unnoticed for long).
var figuresDir = flag.String("stitch.figures", "", "write docs/stitching.md's figures (SVG) into this folder")

func TestDocFigures(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("-short or -race: the figures are numeric, drawn without the race detector")
	}
	dir := *figuresDir
	if dir == "" {
		dir = t.TempDir()
	}
	figures := []struct {
		name string
		draw func(t *testing.T) ([]byte, error)
	}{
		{"stitching-class1.svg", figureComposition},
		{"stitching-class2.svg", figureSearchBox},
		{"stitching-class4.svg", figureFlatSurface},
	}
	for _, f := range figures {
		svg, err := f.draw(t)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), svg, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// svgDoc accumulates an SVG picture.
type svgDoc struct{ bytes.Buffer }

func (d *svgDoc) f(format string, args ...any) { fmt.Fprintf(&d.Buffer, format, args...) }

func (d *svgDoc) open(w, h int) {
	d.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	d.f(`<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
}

func (d *svgDoc) text(x, y float64, anchor, s string) {
	d.f(`<text x="%.1f" y="%.1f" text-anchor="%s">%s</text>`+"\n", x, y, anchor, s)
}

func (d *svgDoc) close() []byte { d.f("</svg>\n"); return d.Bytes() }

// figureComposition draws class 1 (the first composition case): the grid
// at its true positions, every pair as a line between tile centres whose
// width follows its correlation, the ghost pair in red, and the tile b as
// the spanning tree and the global solve place it.
func figureComposition(t *testing.T) ([]byte, error) {
	c := compositionCases[0]
	const w, h = 200, 160
	g := doubleEdgeGrid(c.seed, c.rows, c.cols, w, h, 0.2, c.b, c.shift, c.alpha, 40, 500)
	tree, err := Sequential(context.Background(), g.source(t), align.Options{SpanningTree: true})
	if err != nil {
		return nil, err
	}
	glob, err := Sequential(context.Background(), g.source(t), align.Options{})
	if err != nil {
		return nil, err
	}
	bi := c.b[0]*c.cols + c.b[1]
	errOf := func(r *Result) (int, int) {
		// Positions are relative to tile 0's; so are the true ones.
		return (r.Positions[bi].X - r.Positions[0].X) - (g.x[bi] - g.x[0]), (r.Positions[bi].Y - r.Positions[0].Y) - (g.y[bi] - g.y[0])
	}
	tx, ty := errOf(tree)
	gx, gy := errOf(glob)
	if tx == 0 && ty == 0 {
		t.Errorf("class 1 figure: the spanning tree places tile %v exactly; the picture would show nothing", c.b)
	}
	if gx != 0 || gy != 0 {
		t.Errorf("class 1 figure: the global solve places tile %v (%d,%d) px off", c.b, gx, gy)
	}

	const s = 0.5 // picture pixels per image pixel
	x0, y0 := 20.0, 40.0
	W := max(x0*2+s*float64(g.x[len(g.x)-1]-g.x[0]+w), 820)
	H := y0 + 90 + s*float64(g.y[len(g.y)-1]-g.y[0]+h)
	var d svgDoc
	d.open(int(W), int(H))
	d.text(20, 20, "start", fmt.Sprintf("Class 1: tile (%d,%d)'s west pair matches a ghost %d px off, with a higher correlation than its other pairs", c.b[0], c.b[1], c.shift))
	pos := func(i int) (float64, float64) {
		return x0 + s*float64(g.x[i]-g.x[0]), y0 + s*float64(g.y[i]-g.y[0])
	}
	for i := range g.tiles {
		x, y := pos(i)
		fill := "#eef2f7"
		if i == bi {
			fill = "#fde8c8"
		}
		d.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.7" stroke="#8a9bb0"/>`+"\n", x, y, s*w, s*h, fill)
	}
	ghost := align.Pair{Row: c.b[0], Col: c.b[1], Dir: align.West}
	for _, p := range align.Pairs(c.rows, c.cols) {
		i := p.Row*c.cols + p.Col
		nr, nc := p.Neighbor()
		j := nr*c.cols + nc
		xi, yi := pos(i)
		xj, yj := pos(j)
		tr := tree.Relative.At(p)
		ex, ey := g.trueTranslation(p)
		colour := "#2f6db5"
		if tr.X != ex || tr.Y != ey {
			colour = "#d0342c"
		}
		if p == ghost && colour != "#d0342c" {
			t.Errorf("class 1 figure: the ghost pair %v registered right; the picture would show nothing", p)
		}
		d.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"><title>%v corr %.3f</title></line>`+"\n",
			xi+s*w/2, yi+s*h/2, xj+s*w/2, yj+s*h/2, colour, 1+6*math.Max(0, tr.Corr-0.3), p, tr.Corr)
		if i == bi || j == bi {
			d.text((xi+xj)/2+s*w/2+4, (yi+yj)/2+s*h/2-6, "start", fmt.Sprintf("%.3f", tr.Corr))
		}
	}
	// Tile b where the tree puts it (dashed, exaggerated x4) and where the
	// global solve puts it.
	bx, by := pos(bi)
	d.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#d0342c" stroke-width="2" stroke-dasharray="5,3"/>`+"\n", bx+4*s*float64(tx), by+4*s*float64(ty), s*w, s*h)
	ly := H - 60
	d.f(`<line x1="20" y1="%.1f" x2="50" y2="%.1f" stroke="#2f6db5" stroke-width="4"/>`, ly, ly)
	d.text(56, ly+4, "start", "pair registered at the truth (width: correlation)")
	d.f(`<line x1="20" y1="%.1f" x2="50" y2="%.1f" stroke="#d0342c" stroke-width="4"/>`, ly+18, ly+18)
	d.text(56, ly+22, "start", "pair registered off the truth")
	d.f(`<rect x="20" y="%.1f" width="30" height="12" fill="none" stroke="#d0342c" stroke-width="2" stroke-dasharray="5,3"/>`, ly+30)
	d.text(56, ly+40, "start", fmt.Sprintf("tile (%d,%d) placed by MIST's spanning tree: (%+d,%+d) px off (drawn x4); the global L1 solve: (%+d,%+d) px", c.b[0], c.b[1], tx, ty, gx, gy))
	return d.close(), nil
}

// ncc is the normalized cross-correlation of t2 placed at (dx, dy) in
// t1's frame over their overlap (Pearson's r of the overlapping pixels),
// and the overlap's pixel count.
func ncc(t1, t2 *image.Gray16, dx, dy int) (float64, int) {
	w, h := t1.Rect.Dx(), t1.Rect.Dy()
	x0, x1 := max(0, dx), min(w, dx+t2.Rect.Dx())
	y0, y1 := max(0, dy), min(h, dy+t2.Rect.Dy())
	if x1 <= x0 || y1 <= y0 {
		return math.NaN(), 0
	}
	var sa, sb, saa, sbb, sab float64
	n := (x1 - x0) * (y1 - y0)
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			a := float64(t1.Gray16At(x, y).Y)
			b := float64(t2.Gray16At(x-dx, y-dy).Y)
			sa += a
			sb += b
			saa += a * a
			sbb += b * b
			sab += a * b
		}
	}
	fn := float64(n)
	cov := sab - sa*sb/fn
	va, vb := saa-sa*sa/fn, sbb-sb*sb/fn
	if va <= 0 || vb <= 0 {
		return 0, n
	}
	return cov / math.Sqrt(va*vb), n
}

// surface draws the NCC of t2 against t1 over the displacements
// (cx±r, cy±r) as a heat map, with marks at the named displacements, and
// returns the figure and the surface's maximum.
type mark struct {
	x, y   int
	label  string
	colour string
	square int // >0: a square box of this half-width around (x, y)
}

func surfaceFigure(title string, t1, t2 *image.Gray16, cx, cy, r int, marks []mark, note string) ([]byte, [2]int) {
	n := 2*r + 1
	vals := make([]float64, n*n)
	lo, hi := math.Inf(1), math.Inf(-1)
	var best [2]int
	for j := range n {
		for i := range n {
			v, _ := ncc(t1, t2, cx-r+i, cy-r+j)
			vals[j*n+i] = v
			if v < lo {
				lo = v
			}
			if v > hi {
				hi, best = v, [2]int{cx - r + i, cy - r + j}
			}
		}
	}
	const cell = 22
	ox, oy := 60.0, 50.0
	W := int(ox) + n*cell + 330
	H := int(oy) + n*cell + 86
	var d svgDoc
	d.open(W, H)
	d.text(ox, 22, "start", title)
	for j := range n {
		for i := range n {
			f := (vals[j*n+i] - lo) / math.Max(hi-lo, 1e-12)
			// dark blue (low) to yellow (high)
			rr, gg, bb := int(20+235*f), int(30+200*f), int(90*(1-f)+30)
			d.f(`<rect x="%.0f" y="%.0f" width="%d" height="%d" fill="rgb(%d,%d,%d)"><title>(%d,%d) NCC %.4f</title></rect>`+"\n",
				ox+float64(i*cell), oy+float64(j*cell), cell, cell, rr, gg, bb, cx-r+i, cy-r+j, vals[j*n+i])
		}
	}
	at := func(x, y int) (float64, float64) {
		return ox + float64((x-cx+r)*cell) + cell/2, oy + float64((y-cy+r)*cell) + cell/2
	}
	for k, m := range marks {
		x, y := at(m.x, m.y)
		if m.square > 0 {
			half := float64(m.square*cell) + cell/2
			d.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="%s" stroke-width="2.5" stroke-dasharray="6,3"/>`+"\n", x-half, y-half, 2*half, 2*half, m.colour)
		} else {
			d.f(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="none" stroke="%s" stroke-width="3"/>`+"\n", x, y, 6.0+2*float64(k%2), m.colour)
		}
		ly := oy + float64(k*22) + 10
		lx := ox + float64(n*cell) + 20
		if m.square > 0 {
			d.f(`<rect x="%.1f" y="%.1f" width="14" height="14" fill="none" stroke="%s" stroke-width="2.5" stroke-dasharray="4,2"/>`, lx, ly-11, m.colour)
		} else {
			d.f(`<circle cx="%.1f" cy="%.1f" r="6" fill="none" stroke="%s" stroke-width="3"/>`, lx+7, ly-4, m.colour)
		}
		d.text(lx+22, ly, "start", m.label)
	}
	d.text(ox+float64(n*cell)/2, oy+float64(n*cell)+20, "middle", fmt.Sprintf("x displacement %d … %d px", cx-r, cx+r))
	d.f(`<text x="%.0f" y="%.0f" text-anchor="middle" transform="rotate(-90 %.0f %.0f)">y displacement %d … %d px</text>`+"\n",
		ox-14, oy+float64(n*cell)/2, ox-14, oy+float64(n*cell)/2, cy-r, cy+r)
	d.text(ox, oy+float64(n*cell)+44, "start", fmt.Sprintf("NCC from %.4f (dark) to %.4f (light).", lo, hi))
	d.text(ox, oy+float64(n*cell)+62, "start", note)
	return d.close(), best
}

// figureSearchBox draws class 2 (TestSearchWindowContainsTruth's seed 1):
// the NCC surface around the truth, the box of the stage model's radius
// centred 3 px off it, the box's best (on its edge) and the widened
// search's answer.
func figureSearchBox(t *testing.T) ([]byte, error) {
	g := blobGrid(1, 1, 2, 160, 120, 0.25, 3, 30)
	p := align.Pair{Row: 0, Col: 1, Dir: align.West}
	tx, ty := g.trueTranslation(p)
	rel := align.NewTranslations(1, 2)
	rel.Set(p, align.Translation{X: tx, Y: ty, Corr: 0.9})
	m, err := align.EstimateModel(rel, 160, 120, align.Options{Repeatability: 1})
	if err != nil {
		return nil, err
	}
	start := align.Translation{X: tx + 3, Y: ty - 3, Corr: -1}
	ref := align.NewRefiner()
	r := m.SearchRadius()
	boxed := ref.Refine(g.tiles[0], g.tiles[1], start, r, 1, 1)
	got := m.Refine(ref, g.tiles[0], g.tiles[1], start)
	if boxed.X == tx && boxed.Y == ty {
		t.Errorf("class 2 figure: the box holds the truth; the picture would show nothing")
	}
	if got.X != tx || got.Y != ty {
		t.Errorf("class 2 figure: widened search ends at (%d,%d), not the truth (%d,%d)", got.X, got.Y, tx, ty)
	}
	svg, best := surfaceFigure("Class 2: the refinement box centred 3 px off the truth",
		g.tiles[0], g.tiles[1], tx+1, ty-1, 6,
		[]mark{
			{start.X, start.Y, fmt.Sprintf("box of radius %d around the start", r), "#e0309a", r},
			{boxed.X, boxed.Y, "the box's best: on its edge", "#d0342c", 0},
			{got.X, got.Y, "after widening: interior, the truth", "#2fb55a", 0},
			{tx, ty, "the truth", "#2f6db5", 0},
		}, "A best match on the box's edge widens the box until it is interior.")
	if best != [2]int{tx, ty} {
		t.Errorf("class 2 figure: the surface's maximum is at %v, not at the truth (%d,%d)", best, tx, ty)
	}
	return svg, nil
}

// figureFlatSurface draws class 4 (TestInformationLimited's seed 7): the
// NCC surface of a pair placed off the truth, truth, choice and the
// surface's maximum marked.
func figureFlatSurface(t *testing.T) ([]byte, error) {
	g := phaseCellGrid(7, 4, 5, 400, 300, 0.1, 2, 29)
	res, err := Sequential(context.Background(), g.source(t), align.Options{})
	if err != nil {
		return nil, err
	}
	// The pair whose chosen displacement misses the truth, or else the one
	// with the smallest margin.
	var pick align.Pair
	worst := math.Inf(1)
	missed := false
	for _, p := range align.Pairs(g.rows, g.cols) {
		tr := res.Optimized.At(p)
		ex, ey := g.trueTranslation(p)
		off := tr.X != ex || tr.Y != ey
		if (off && !missed) || (off == missed && tr.Margin < worst) {
			pick, worst, missed = p, tr.Margin, off
		}
	}
	tr := res.Optimized.At(pick)
	ex, ey := g.trueTranslation(pick)
	i := pick.Row*g.cols + pick.Col
	nr, nc := pick.Neighbor()
	j := nr*g.cols + nc
	ct, _ := ncc(g.tiles[j], g.tiles[i], ex, ey)
	cc, _ := ncc(g.tiles[j], g.tiles[i], tr.X, tr.Y)
	if !missed {
		t.Errorf("class 4 figure: every pair registered at the truth; the picture would show no miss")
	}
	_, best := surfaceFigure("", g.tiles[j], g.tiles[i], ex, ey, 5, nil, "")
	cb, _ := ncc(g.tiles[j], g.tiles[i], best[0], best[1])
	svg, _ := surfaceFigure(fmt.Sprintf("Class 4: pair %v of a low-contrast grid, placed 1-2 px off the truth", pick),
		g.tiles[j], g.tiles[i], ex, ey, 5,
		[]mark{
			{ex, ey, fmt.Sprintf("the truth: NCC %.4f", ct), "#2f6db5", 0},
			{tr.X, tr.Y, fmt.Sprintf("chosen: NCC %.4f", cc), "#d0342c", 0},
			{best[0], best[1], fmt.Sprintf("the surface's maximum: NCC %.4f", cb), "#2fb55a", 0},
		}, "Flat along the bands: no search can tell these apart; a WARNING names the uncertain tiles.")
	return svg, nil
}
