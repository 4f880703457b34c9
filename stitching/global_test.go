package stitching

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// Failure classes of issue 31 ("a global, loop-consistent solve instead of
// a spanning tree, search windows that contain the truth, and honest
// uncertainty"), each built from the package's own generators.

// doubleEdgeGrid is a blob grid (see blobGrid) in which the overlap of
// tile b with its west neighbour carries two peaks: the strip of b that
// overlaps it shows the plane's content at b's true position weighted by
// 1-alpha plus the content shift px further right weighted by alpha (a
// ghost, as from a sample that moved between the two exposures, or
// repeated structure). With alpha above 0.5 the west pair's best
// displacement is shift px off with a higher correlation than the true
// one, a local maximum of its own. The rest of tile b gets extra read
// noise (extra DN), so that b's other pairs correlate less than the
// wrong one: the maximum spanning tree places b through the wrong pair.
func doubleEdgeGrid(seed uint64, rows, cols, w, h int, overlap float64, b [2]int, shift int, alpha, noise, extra float64) *testGrid {
	rng := rand.New(rand.NewPCG(seed, 31))
	g, plane, pw, ph := jitterGrid(rng, rows, cols, w, h, overlap, 2)
	addWaves(rng, plane, pw, ph, 30)
	addBlobs(rng, plane, pw, ph, pw*ph/100, func() (s, amp float64) {
		return 1 + rng.ExpFloat64()*0.7, (rng.Float64()*2 - 0.5) * 3000
	})
	g.cut(rng, plane, pw, w, h, 20000, 65535, noise)
	i := b[0]*cols + b[1]
	strip := int(float64(w)*overlap) + 6
	t := g.tiles[i]
	at := func(x, y int) float64 { return plane[min(ph-1, y)*pw+min(pw-1, x)] }
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			px, py := g.x[i]+x, g.y[i]+y
			v := 20000.0
			if x < strip {
				v += (1-alpha)*at(px, py) + alpha*at(px+shift, py) + rng.NormFloat64()*noise
			} else {
				v += at(px, py) + rng.NormFloat64()*math.Hypot(noise, extra)
			}
			setPixel(t, x, y, v, 65535)
		}
	}
	return g
}

// exactCheck stitches g with opt (both stitchers when graph is set),
// asserts that every pair is exact and every tile within 1 px, and
// returns the Sequential result.
func exactCheck(t *testing.T, name string, g *testGrid, opt align.Options) *Result {
	t.Helper()
	res, err := Sequential(context.Background(), g.source(t), opt)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	a := measure(g, res)
	t.Logf("%s: %d/%d pairs exact (relative %d), max tile error %d px, %d re-searches, inconsistent %v",
		name, a.ExactOptimal, a.Pairs, a.ExactRelative, a.MaxTileError, res.Researched, res.Inconsistent)
	if a.ExactOptimal != a.Pairs || a.MaxTileError > 1 {
		t.Errorf("%s: %d of %d pairs exact, max tile error %d px; want all and <= 1 px", name, a.ExactOptimal, a.Pairs, a.MaxTileError)
		logWrongPairs(t, g, res)
	}
	return res
}

// compositionCases are the grids of class 1: tile b's west pair is wrong
// (a ghost shift px to the right) and correlates better than b's other
// pairs. The cases marked kept aside were not used to tune anything (the
// two corner ones were run once, after align.SettleCorners was written
// and its threshold set).
var compositionCases = []struct {
	name       string
	seed       uint64
	rows, cols int
	b          [2]int
	shift      int
	alpha      float64
}{
	{"interior tile", 1, 4, 5, [2]int{2, 2}, 7, 0.7},
	{"top-row tile", 2, 4, 5, [2]int{0, 3}, 6, 0.6},
	{"kept aside: bottom-row tile, 3x6", 9, 3, 6, [2]int{2, 4}, 8, 0.65},
	// A corner tile has two pairs, both in one loop: the fit alone keeps
	// the ghost (seeds 1, 3) or splits the difference between re-searched
	// peaks, 1 px off (seed 2); align.SettleCorners decides by the pairs'
	// NCC.
	{"corner tile", 1, 4, 5, [2]int{0, 4}, 7, 0.7},
	{"corner tile", 2, 4, 5, [2]int{0, 4}, 6, 0.6},
	{"bottom corner tile", 3, 4, 5, [2]int{3, 4}, 7, 0.7},
	{"kept aside: bottom corner tile, 5x4", 13, 5, 4, [2]int{4, 3}, 5, 0.62},
	{"kept aside: corner tile, 4x4", 14, 4, 4, [2]int{0, 3}, 9, 0.68},
}

// TestGlobalComposition is class 1 of issue 31: a pair's own
// displacement is wrong with a higher correlation than the correct pairs
// of its tile, so the maximum spanning tree places the tile through it.
// The global solve places it right, and the pair, contradicted by the
// loops around it, reports the displacement the positions imply; so
// does a corner tile, whose two pairs lie in one loop only.
func TestGlobalComposition(t *testing.T) {
	for _, c := range compositionCases[:underRace(len(compositionCases))] {
		g := doubleEdgeGrid(c.seed, c.rows, c.cols, 200, 160, 0.2, c.b, c.shift, c.alpha, 40, 500)
		name := fmt.Sprintf("class 1 %s seed %d", c.name, c.seed)
		tree, err := Sequential(context.Background(), g.source(t), align.Options{SpanningTree: true})
		if err != nil {
			t.Fatal(err)
		}
		a := measure(g, tree)
		t.Logf("%s, spanning tree: %d/%d pairs exact, max tile error %d px", name, a.ExactOptimal, a.Pairs, a.MaxTileError)
		if a.MaxTileError <= 1 {
			t.Errorf("%s: the spanning tree places every tile within 1 px: the case does not exercise class 1", name)
		}
		exactCheck(t, name, g, align.Options{})
	}
}

// TestSolvePositionsLoops is class 1 on translations alone (the issue's
// example): in a 3x3 grid, the centre tile has a wrong west pair of
// correlation 0.712 and a correct north pair of 0.55, and every other
// pair is correct with 0.6; the tree takes the wrong pair, the L1 fit
// over the loops does not.
func TestSolvePositionsLoops(t *testing.T) {
	tr := align.NewTranslations(3, 3)
	// Truth: tile (r, c) at (100c, 80r).
	for _, p := range align.Pairs(3, 3) {
		x, y := 100, 0
		if p.Dir == align.North {
			x, y = 0, 80
		}
		tr.Set(p, align.Translation{X: x, Y: y, Corr: 0.6})
	}
	tr.Set(align.Pair{Row: 1, Col: 1, Dir: align.West}, align.Translation{X: 104, Y: 1, Corr: 0.712})
	tr.Set(align.Pair{Row: 1, Col: 1, Dir: align.North}, align.Translation{X: 0, Y: 80, Corr: 0.55})
	tree := align.GlobalPositions(tr)
	sol := align.SolvePositions(tr, nil, tree)
	if p := tree[4]; p.X-tree[0].X == 100 && p.Y-tree[0].Y == 80 {
		t.Fatalf("the tree places tile (1,1) right: the case does not exercise class 1")
	}
	for i, p := range sol.Positions {
		if wx, wy := 100*(i%3), 80*(i/3); p.X != wx || p.Y != wy {
			t.Errorf("tile %d at (%d,%d), want (%d,%d)", i, p.X, p.Y, wx, wy)
		}
	}
	if x, y := sol.Implied(align.Pair{Row: 1, Col: 1, Dir: align.West}); x != 100 || y != 0 {
		t.Errorf("implied west(1,1) = (%d,%d), want (100,0)", x, y)
	}
	// Consistent translations: the start comes back unchanged.
	tr.Set(align.Pair{Row: 1, Col: 1, Dir: align.West}, align.Translation{X: 100, Y: 0, Corr: 0.712})
	tree = align.GlobalPositions(tr)
	if sol := align.SolvePositions(tr, nil, tree); fmt.Sprint(sol.Positions) != fmt.Sprint(tree) || sol.Cost != 0 {
		t.Errorf("consistent grid: solve %v (cost %v), tree %v", sol.Positions, sol.Cost, tree)
	}
}

// TestGlobalCompositionGraph checks that Stitch places the class 1 grids
// as Sequential does (the placement runs its re-searches on the workers).
func TestGlobalCompositionGraph(t *testing.T) {
	c := compositionCases[0]
	g := doubleEdgeGrid(c.seed, c.rows, c.cols, 200, 160, 0.2, c.b, c.shift, c.alpha, 40, 800)
	seq, err := Sequential(context.Background(), g.source(t), align.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := Stitch(context.Background(), g.source(t), align.Options{}, GraphOptions{Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seq.Positions) != fmt.Sprint(gr.Positions) || fmt.Sprint(seq.Optimized) != fmt.Sprint(gr.Optimized) ||
		fmt.Sprint(seq.Uncertainty) != fmt.Sprint(gr.Uncertainty) {
		t.Errorf("Stitch and Sequential differ:\n%v\n%v", seq.Positions, gr.Positions)
	}
}

// TestSearchWindowContainsTruth is class 2 of issue 31: the refinement
// box is centred 3 px from the truth with a radius of 2 (repeatability
// 1), so the truth lies outside it and the box's maximum on its edge.
// Before, that edge was the answer; now the box widens until the maximum
// is interior.
func TestSearchWindowContainsTruth(t *testing.T) {
	for _, seed := range []uint64{1, 2, 5} { // 5: kept aside
		g := blobGrid(seed, 1, 2, 160, 120, 0.25, 3, 30)
		p := align.Pair{Row: 0, Col: 1, Dir: align.West}
		tx, ty := g.trueTranslation(p)
		rel := align.NewTranslations(1, 2)
		rel.Set(p, align.Translation{X: tx, Y: ty, Corr: 0.9})
		m, err := align.EstimateModel(rel, 160, 120, align.Options{Repeatability: 1})
		if err != nil {
			t.Fatal(err)
		}
		start := align.Translation{X: tx + 3, Y: ty - 3, Corr: -1}
		ref := align.NewRefiner()
		boxed := ref.Refine(g.tiles[0], g.tiles[1], start, m.SearchRadius(), 1, 1)
		got := m.Refine(ref, g.tiles[0], g.tiles[1], start)
		t.Logf("seed %d: truth (%d,%d), box of radius %d: %+v, widened: %+v", seed, tx, ty, m.SearchRadius(), boxed, got)
		if boxed.X == tx && boxed.Y == ty {
			t.Errorf("seed %d: the box contains the truth: the case does not exercise class 2", seed)
		}
		if got.X != tx || got.Y != ty {
			t.Errorf("seed %d: refined to (%d,%d), want the truth (%d,%d)", seed, got.X, got.Y, tx, ty)
		}
	}
}

// TestInformationLimited is class 4 of issue 31: low-contrast grids (one
// cell on a faint banded background, noise near the content's spread)
// whose NCC surfaces are flat to 1e-3 along the bands. No search can be
// sure there; the bar is every tile within 2 px of the truth and a
// WARNING naming the tiles whose placement is uncertain, whenever a tile
// is off (see informationLimitedCheck). Seed 8 is kept aside.
func TestInformationLimited(t *testing.T) {
	for _, seed := range []uint64{4, 7, 8}[:underRace(3)] {
		informationLimitedCheck(t, seed, 4, 5)
	}
}

// TestInformationLimitedLarge is class 4 on 8x10 grids (the docs' table
// row "low-contrast (class 4) 8x10" is seed 4; seed 7 a second grid), with
// -stitch.large (about 8 s each on one core).
func TestInformationLimitedLarge(t *testing.T) {
	if !*largeTests {
		t.Skip("8x10 grids of 400x300 tiles; run with -stitch.large")
	}
	for _, seed := range []uint64{4, 7} {
		informationLimitedCheck(t, seed, 8, 10)
	}
}

// informationLimitedCheck stitches the low-contrast grid of seed and
// asserts class 4's bar: every tile within 2 px of the truth and, for
// every pair off the truth, a WARNING of uncertain tiles that names at
// least one of its two tiles (a tile that is off is not reported certain
// relative to both neighbours of the wrong pair).
func informationLimitedCheck(t *testing.T, seed uint64, rows, cols int) {
	t.Helper()
	g := phaseCellGrid(seed, rows, cols, 400, 300, 0.1, 2, 29)
	res, err := Sequential(context.Background(), g.source(t), align.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := measure(g, res)
	warned := ""
	for _, w := range res.Warnings() {
		if strings.Contains(w, "uncertainty of 1 px or more") {
			warned = w
		}
	}
	named := map[[2]int]bool{}
	for _, u := range res.Quality().Uncertain {
		named[[2]int{u.Row, u.Col}] = true
	}
	t.Logf("class 4 %dx%d seed %d: %d/%d pairs exact, max tile error %d px, %d tiles named uncertain; warning %.120q",
		rows, cols, seed, a.ExactOptimal, a.Pairs, a.MaxTileError, len(named), warned)
	if a.MaxTileError > 2 {
		t.Errorf("%dx%d seed %d: max tile error %d px, want <= 2", rows, cols, seed, a.MaxTileError)
	}
	if a.ExactOptimal < a.Pairs && warned == "" {
		t.Errorf("%dx%d seed %d: %d of %d pairs off the truth and no warning names uncertain tiles: %q", rows, cols, seed, a.Pairs-a.ExactOptimal, a.Pairs, res.Warnings())
	}
	for _, p := range align.Pairs(rows, cols) {
		tx, ty := g.trueTranslation(p)
		o := res.Optimized.At(p)
		nr, nc := p.Neighbor()
		if (o.X != tx || o.Y != ty) && !named[[2]int{p.Row, p.Col}] && !named[[2]int{nr, nc}] {
			t.Errorf("%dx%d seed %d: %v off the truth by (%d,%d), neither of its tiles named uncertain (%d, %d)",
				rows, cols, seed, p, o.X-tx, o.Y-ty, res.Uncertainty[nr*cols+nc], res.Uncertainty[p.Row*cols+p.Col])
		}
	}
}

// BenchmarkPlacement times the placement alone (the global solve and its
// re-searches, against the spanning tree) after one Sequential run that
// provides the refined translations, on generated grids: the synth
// generator's realistic and hard levels (512 x 384 tiles), the
// low-contrast phase cell of class 4 and the ghost pairs of class 1 (8 x
// 10 of 400 x 300 and 200 x 160), where pairs contradict their loops:
//
//	go test ./stitching -run '^$' -bench Placement -benchtime 3x
func BenchmarkPlacement(b *testing.B) {
	for _, c := range []struct {
		name string
		grid func() *testGrid
	}{
		{"realistic_8x10", func() *testGrid { return synthGrid(b, synthConfig(synth.Realistic, 1, 8, 10, 512, 384)) }},
		{"realistic_16x20", func() *testGrid { return synthGrid(b, synthConfig(synth.Realistic, 1, 16, 20, 512, 384)) }},
		{"hard_8x10", func() *testGrid { return synthGrid(b, synthConfig(synth.Hard, 1, 8, 10, 512, 384)) }},
		{"hard_16x20", func() *testGrid { return synthGrid(b, synthConfig(synth.Hard, 1, 16, 20, 512, 384)) }},
		{"lowcontrast_8x10", func() *testGrid { return phaseCellGrid(4, 8, 10, 400, 300, 0.1, 2, 29) }},
		{"ghost_8x10", func() *testGrid {
			return doubleEdgeGrid(1, 8, 10, 200, 160, 0.2, [2]int{4, 5}, 7, 0.7, 40, 500)
		}},
	} {
		if !strings.Contains(c.name, benchFilter()) {
			continue
		}
		g := c.grid()
		var src tileio.TileSource = g.source(b)
		opt := align.Options{}
		t0 := time.Now()
		res, err := Sequential(context.Background(), src, opt)
		if err != nil {
			b.Fatal(err)
		}
		stitch := time.Since(t0)
		if ff := res.FlatField; ff != nil && !ff.Identity() {
			src = CorrectedSource(src, ff) // the pixels Sequential refined
		}
		o, err := Optimize(context.Background(), src, res.Relative, opt)
		if err != nil {
			b.Fatal(err)
		}
		for _, tree := range []bool{false, true} {
			name := c.name + "/solve"
			if tree {
				name = c.name + "/tree"
			}
			b.Run(name, func(b *testing.B) {
				po := opt
				po.SpanningTree = tree
				var pl *Placement
				for b.Loop() {
					if pl, err = place(context.Background(), src, o.Model, o.Refined, po, 1); err != nil {
						b.Fatal(err)
					}
				}
				a := Evaluate(&Result{Rows: g.rows, Cols: g.cols, Relative: res.Relative, Optimized: pl.Optimized, Positions: pl.Positions}, g.x, g.y)
				b.ReportMetric(float64(pl.Researched), "researches")
				b.ReportMetric(float64(len(pl.Inconsistent)), "contradicted")
				b.ReportMetric(stitch.Seconds(), "stitch-s")
				b.ReportMetric(float64(a.ExactOptimal), "exact-pairs")
				b.ReportMetric(float64(a.MaxTileError), "max-tile-err")
			})
		}
	}
}

// benchFilter is the grid name part of -test.bench after
// "Placement/", or "" for every grid (the grids are generated before
// the sub-benchmarks that the filter would skip).
func benchFilter() string {
	f := flag.Lookup("test.bench")
	if f == nil {
		return ""
	}
	_, after, ok := strings.Cut(f.Value.String(), "Placement/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(after, "/")
	return name
}

// TestWarningsAgreeWithNumbers is the "silence" finding of issue 31: on a
// 2x3 grid the warning said "too few pairs (3 of 3 matched, want at least
// 3)". The count is now the model's before any translation was trusted
// on its own correlation, which is below the minimum whenever the model
// is skipped.
func TestWarningsAgreeWithNumbers(t *testing.T) {
	for _, c := range []struct {
		seed       uint64
		rows, cols int
	}{{3, 2, 3}, {2, 2, 2}, {4, 1, 3}} {
		g := synthGrid(t, synthConfig(synth.Realistic, c.seed, c.rows, c.cols, 256, 192))
		res, err := Sequential(context.Background(), g.source(t), align.Options{})
		if err != nil {
			t.Fatal(err)
		}
		skipped := 0
		for _, w := range res.Warnings() {
			var k, n, want int
			i := strings.Index(w, "too few pairs (")
			if i < 0 {
				continue
			}
			if _, err := fmt.Sscanf(w[i:], "too few pairs (%d of %d matched the stage model, want at least %d)", &k, &n, &want); err != nil {
				t.Fatalf("%q: %v", w, err)
			}
			skipped++
			t.Logf("%dx%d seed %d: %s", c.rows, c.cols, c.seed, w)
			if k >= want || k > n {
				t.Errorf("%dx%d seed %d: %q contradicts itself", c.rows, c.cols, c.seed, w)
			}
		}
		if skipped == 0 {
			t.Errorf("%dx%d seed %d: no \"model skipped\" warning in %q", c.rows, c.cols, c.seed, res.Warnings())
		}
	}
}

// TestOverrideOutvoted is the mechanism by which the global solve answers
// class 3 of issue 31 (the denoised search moving a pair 1-2 px off a raw
// match that was the truth): no generator of ours makes the denoised
// search err that way (on the low-contrast grids it is right where the
// raw maximum is wrong), so the override is injected into the refined
// translations of a blob grid: one pair 2 px off the truth, with the raw
// NCC there as its correlation. The pair's loops contradict it, the raw
// re-search around the loop-consistent displacement finds the truth's
// peak, and the pair reports it. With the spanning tree the pair stays
// off (and so would a tile the tree hung on it).
func TestOverrideOutvoted(t *testing.T) {
	for _, c := range []struct {
		seed uint64
		p    align.Pair
		dx   int
	}{{1, align.Pair{Row: 1, Col: 2, Dir: align.West}, 2}, {2, align.Pair{Row: 2, Col: 1, Dir: align.North}, -2}, {3, align.Pair{Row: 1, Col: 1, Dir: align.North}, 1}} { // seed 3 kept aside
		g := blobGrid(c.seed, 3, 4, 160, 120, 0.2, 2, 200)
		src := g.source(t)
		opt := align.Options{NoFlatField: true}
		res, err := Sequential(context.Background(), src, opt)
		if err != nil {
			t.Fatal(err)
		}
		if a := measure(g, res); a.ExactOptimal != a.Pairs {
			t.Fatalf("seed %d: %d of %d pairs exact before the injection", c.seed, a.ExactOptimal, a.Pairs)
		}
		o, err := Optimize(context.Background(), src, res.Relative, opt)
		if err != nil {
			t.Fatal(err)
		}
		refined := o.Refined.Clone()
		tr := refined.At(c.p)
		tr.X += c.dx
		tr.Y += c.dx / 2
		nr, nc := c.p.Neighbor()
		tr.Corr = align.NCC(g.tiles[nr*g.cols+nc], g.tiles[c.p.Row*g.cols+c.p.Col], tr.X, tr.Y)
		refined.Set(c.p, tr)
		for _, tree := range []bool{true, false} {
			po := opt
			po.SpanningTree = tree
			pl, err := place(context.Background(), src, o.Model, refined, po, 1)
			if err != nil {
				t.Fatal(err)
			}
			a := Evaluate(&Result{Rows: g.rows, Cols: g.cols, Relative: res.Relative, Optimized: pl.Optimized, Positions: pl.Positions}, g.x, g.y)
			t.Logf("seed %d, %v moved by (%d,%d), spanning tree %v: %d/%d pairs exact, max tile error %d px, %d re-searches",
				c.seed, c.p, c.dx, c.dx/2, tree, a.ExactOptimal, a.Pairs, a.MaxTileError, pl.Researched)
			switch {
			case tree && a.ExactOptimal == a.Pairs:
				t.Errorf("seed %d: the tree reports every pair exact: the injection did nothing", c.seed)
			case !tree && (a.ExactOptimal != a.Pairs || a.MaxTileError > 1):
				t.Errorf("seed %d: solve: %d of %d pairs exact, max tile error %d px; want all and <= 1", c.seed, a.ExactOptimal, a.Pairs, a.MaxTileError)
			}
		}
	}
}

// TestDenoisedKeepsDistinctRawMatch is class 3 of issue 31 on our own
// data: the synth generator's hard level (shot and read noise,
// vignetting, per-tile gain) stitched without its flat-field correction,
// where many pairs fall below 0.9 and are searched again on
// Wiener-filtered tiles. Before, the filtered search jumped from a raw
// maximum that was the truth, and a distinct peak (nothing else in the
// box within align.NCCTolerance of it), to another peak 5-20 px away
// (13 such pairs on seeds 1-3), or, when the raw maximum stood out of
// its surface, by 1 px (2 pairs, seeds 2 and 3). Now the rule
// align.DenoisedOverrides keeps such a raw match: every one of them must
// come out of the refinement at the truth. Seed 3 is kept aside (for the
// jumps; its 1-px move was seen before the margin of the rule was set).
func TestDenoisedKeepsDistinctRawMatch(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5}[:underRace(5)] {
		g := synthGrid(t, synthConfig(synth.Hard, seed, 4, 5, 400, 300))
		src := g.source(t)
		opt := align.Options{NoFlatField: true}
		res, err := Sequential(context.Background(), src, opt)
		if err != nil {
			t.Fatal(err)
		}
		m := res.Model
		repaired := m.Repair(res.Relative)
		mx, my := align.MinOverlap(m.Width, m.Height, opt)
		raw, full := align.NewRefiner(), align.NewRefiner()
		kept, distinct := 0, 0
		for _, p := range align.Pairs(g.rows, g.cols) {
			tx, ty := g.trueTranslation(p)
			nr, nc := p.Neighbor()
			t1, t2 := g.tiles[nr*g.cols+nc], g.tiles[p.Row*g.cols+p.Col]
			start := repaired.At(p)
			r := raw.Refine(t1, t2, start, m.SearchRadius(), mx, my)
			if r.X != tx || r.Y != ty || r.Spread != 0 || r.Corr >= align.ConfidentCorr {
				continue
			}
			distinct++
			f := m.Refine(full, t1, t2, start)
			if f.X == tx && f.Y == ty {
				kept++
			} else {
				t.Errorf("seed %d %v: the raw maximum (%d,%d) NCC %.4f is the truth and distinct, refinement chose (%d,%d) NCC %.4f",
					seed, p, r.X, r.Y, r.Corr, f.X, f.Y, f.Corr)
			}
		}
		t.Logf("seed %d: %d weak pairs whose raw maximum is the truth and distinct, %d kept", seed, distinct, kept)
	}
}

// TestDenoisedOverridesRule pins the rule itself (overlap of 10000
// pixels: at NCC 0.68 one tolerance is 0.00538).
func TestDenoisedOverridesRule(t *testing.T) {
	const n = 10000
	tol := align.NCCTolerance(0.68, n)
	for _, c := range []struct {
		raw, den align.Translation
		want     bool
	}{
		{align.Translation{X: 10, Y: 0, Corr: 0.68, Margin: tol}, align.Translation{X: 11, Y: 1, Corr: 0.67}, true},                 // within 1 px, raw peak not standing out
		{align.Translation{X: 10, Y: 0, Corr: 0.68, Margin: 3.9 * tol}, align.Translation{X: 12, Y: 0, Corr: 0.67}, true},           // within 2 px
		{align.Translation{X: 10, Y: 0, Corr: 0.68, Margin: 4.1 * tol}, align.Translation{X: 11, Y: 0, Corr: 0.67}, false},          // raw peak stands out
		{align.Translation{X: 10, Y: 0, Corr: 0.68}, align.Translation{X: 13, Y: 0, Corr: 0.67}, false},                             // distinct raw peak, 3 px
		{align.Translation{X: 10, Y: 0, Corr: 0.68, Spread: 2, Margin: 9 * tol}, align.Translation{X: 13, Y: 0, Corr: 0.67}, true},  // flat raw surface
		{align.Translation{X: 10, Y: 0, Corr: 0.68, Spread: 1, Margin: 9 * tol}, align.Translation{X: 11, Y: 0, Corr: 0.679}, true}, // flat raw surface
	} {
		if got := align.DenoisedOverrides(c.raw, c.den, n); got != c.want {
			t.Errorf("DenoisedOverrides(%+v, %+v) = %v, want %v", c.raw, c.den, got, c.want)
		}
	}
}
