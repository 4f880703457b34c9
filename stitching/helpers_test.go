package stitching

import (
	"context"
	"image"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// testGrid is a synthetic grid with ground truth.
type testGrid struct {
	rows, cols int
	tiles      []*image.Gray16
	x, y       []int // true positions, row-major
}

func (g *testGrid) source(t testing.TB) *tileio.MemoryTiles {
	t.Helper()
	m, err := tileio.NewMemoryTiles(g.rows, g.cols, g.tiles, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// trueTranslation is the exact translation of pair p.
func (g *testGrid) trueTranslation(p align.Pair) (x, y int) {
	i := p.Row*g.cols + p.Col
	nr, nc := p.Neighbor()
	j := nr*g.cols + nc
	return g.x[i] - g.x[j], g.y[i] - g.y[j]
}

// blobGrid is a small independent generator: a plane of random Gaussian
// blobs of several sizes over a smooth background, cut into tiles at
// jittered grid positions, each tile with its own noise. It is deliberately
// different from stitching/synth.
func blobGrid(seed uint64, rows, cols, w, h int, overlap float64, jitter int, noise float64) *testGrid {
	rng := rand.New(rand.NewPCG(seed, 7))
	g, plane, pw, ph := jitterGrid(rng, rows, cols, w, h, overlap, jitter)
	// Smooth background: a few low-frequency waves.
	addWaves(rng, plane, pw, ph, 300)
	addBlobs(rng, plane, pw, ph, pw*ph/300, func() (s, amp float64) {
		return 1.5 + rng.ExpFloat64()*3, (rng.Float64()*2 - 0.5) * 3000
	})
	g.cut(rng, plane, pw, w, h, 20000, 65535, noise)
	return g
}

// jitterGrid places rows x cols tiles of w x h with the given overlap at
// positions jittered by up to jitter px (drawn from rng, row-major), and
// returns the grid and a zero plane of pw x ph covering them.
func jitterGrid(rng *rand.Rand, rows, cols, w, h int, overlap float64, jitter int) (g *testGrid, plane []float64, pw, ph int) {
	stepX := int(math.Round(float64(w) * (1 - overlap)))
	stepY := int(math.Round(float64(h) * (1 - overlap)))
	g = &testGrid{rows: rows, cols: cols}
	pad := jitter + 2
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			g.x = append(g.x, pad+c*stepX+rng.IntN(2*jitter+1)-jitter)
			g.y = append(g.y, pad+r*stepY+rng.IntN(2*jitter+1)-jitter)
		}
	}
	pw = 2*pad + (cols-1)*stepX + w
	ph = 2*pad + (rows-1)*stepY + h
	return g, make([]float64, pw*ph), pw, ph
}

// addWaves adds four low-frequency waves (wave numbers below 0.02 rad/px)
// of random phase and an amplitude from amp to 2*amp to the pw x ph plane.
func addWaves(rng *rand.Rand, plane []float64, pw, ph int, amp float64) {
	for k := 0; k < 4; k++ {
		fx, fy := rng.Float64()*0.02, rng.Float64()*0.02
		ph0, a := rng.Float64()*2*math.Pi, amp+rng.Float64()*amp
		addWave(plane, pw, ph, a, fx, fy, ph0)
	}
}

// addWave adds amp * sin(fx*x + fy*y + ph0) to the pw x ph plane.
func addWave(plane []float64, pw, ph int, amp, fx, fy, ph0 float64) {
	for y := 0; y < ph; y++ {
		for x := 0; x < pw; x++ {
			plane[y*pw+x] += amp * math.Sin(fx*float64(x)+fy*float64(y)+ph0)
		}
	}
}

// setPixel sets pixel (x, y) of t to v rounded and clamped to [0, maxV].
func setPixel(t *image.Gray16, x, y int, v, maxV float64) {
	v = math.Max(0, math.Min(maxV, math.Round(v)))
	t.Pix[y*t.Stride+2*x] = uint8(uint16(v) >> 8)
	t.Pix[y*t.Stride+2*x+1] = uint8(uint16(v))
}

// logWrongPairs logs the pairs of res that differ from the truth of g.
func logWrongPairs(t *testing.T, g *testGrid, res *Result) {
	t.Helper()
	for _, p := range align.Pairs(g.rows, g.cols) {
		tx, ty := g.trueTranslation(p)
		nr, nc := p.Neighbor()
		if o := res.Optimized.At(p); o.X != tx || o.Y != ty {
			t.Logf("  %v: truth (%d,%d) NCC %.3f, relative %+v, optimized %+v, valid %v", p, tx, ty,
				align.NCC(g.tiles[nr*g.cols+nc], g.tiles[p.Row*g.cols+p.Col], tx, ty), res.Relative.At(p), o, res.Model.Valid(p))
		}
	}
}

// addBlobs adds n Gaussian blobs to the pw x ph plane, each at a random
// centre with the width and amplitude blob draws.
func addBlobs(rng *rand.Rand, plane []float64, pw, ph, n int, blob func() (s, amp float64)) {
	for k := 0; k < n; k++ {
		cx, cy := rng.Float64()*float64(pw), rng.Float64()*float64(ph)
		s, amp := blob()
		rad := int(3 * s)
		for y := max(0, int(cy)-rad); y < min(ph, int(cy)+rad+1); y++ {
			for x := max(0, int(cx)-rad); x < min(pw, int(cx)+rad+1); x++ {
				dx, dy := float64(x)-cx, float64(y)-cy
				plane[y*pw+x] += amp * math.Exp(-(dx*dx+dy*dy)/(2*s*s))
			}
		}
	}
}

// cut cuts the w x h tiles at the grid's positions out of the plane (row
// length pw), offset by base, with Gaussian noise of sigma noise, rounded
// and clamped to [0, maxV].
func (g *testGrid) cut(rng *rand.Rand, plane []float64, pw, w, h int, base, maxV, noise float64) {
	for i := range g.x {
		t := image.NewGray16(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				setPixel(t, x, y, base+plane[(g.y[i]+y)*pw+g.x[i]+x]+rng.NormFloat64()*noise, maxV)
			}
		}
		g.tiles = append(g.tiles, t)
	}
}

// synthGrid generates a grid with stitching/synth.
func synthGrid(t testing.TB, cfg synth.Config) *testGrid {
	t.Helper()
	sg, err := synth.Generate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &testGrid{rows: cfg.Rows, cols: cfg.Cols, tiles: sg.Tiles, x: sg.X, y: sg.Y}
}

// measure is Evaluate against the grid's truth.
func measure(g *testGrid, res *Result) Accuracy { return Evaluate(res, g.x, g.y) }
