package synth

import (
	"image"
	"math"
	"math/cmplx"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/dsp/fourier"
)

// This file holds a small MIST-style pair aligner used only by the tests, to
// check that the levels keep the difficulty documented in doc.go.

type fft2 struct {
	w, h       int
	row, col   *fourier.CmplxFFT
	bufR, bufC []complex128
}

func newFFT2(w, h int) *fft2 {
	return &fft2{w: w, h: h, row: fourier.NewCmplxFFT(w), col: fourier.NewCmplxFFT(h),
		bufR: make([]complex128, w), bufC: make([]complex128, h)}
}

// transform does an in-place 2-D DFT (forward or inverse, unnormalised).
func (f *fft2) transform(data []complex128, inverse bool) {
	for y := 0; y < f.h; y++ {
		row := data[y*f.w : (y+1)*f.w]
		if inverse {
			f.row.Sequence(f.bufR, row)
		} else {
			f.row.Coefficients(f.bufR, row)
		}
		copy(row, f.bufR)
	}
	for x := 0; x < f.w; x++ {
		for y := 0; y < f.h; y++ {
			f.bufC[y] = data[y*f.w+x]
		}
		if inverse {
			f.col.Sequence(f.bufC, f.bufC)
		} else {
			f.col.Coefficients(f.bufC, f.bufC)
		}
		for y := 0; y < f.h; y++ {
			data[y*f.w+x] = f.bufC[y]
		}
	}
}

func grayToFloat(img *image.Gray16) []float64 {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := make([]float64, w*h)
	for y := range h {
		row := img.Pix[y*img.Stride:]
		for x := range w {
			out[y*w+x] = float64(uint16(row[2*x])<<8 | uint16(row[2*x+1]))
		}
	}
	return out
}

func (f *fft2) forward(img []float64) []complex128 {
	c := make([]complex128, len(img))
	for i, v := range img {
		c[i] = complex(v, 0)
	}
	f.transform(c, false)
	return c
}

// ncc is the normalised cross-correlation of a and b (w x h, row-major) over
// their overlap when b's top-left lies at (dx, dy) in a's frame; ok is false
// when the overlap is smaller than minArea pixels.
func ncc(a, b []float64, w, h, dx, dy, minArea int) (float64, bool) {
	x0, x1 := max(0, dx), min(w, w+dx)
	y0, y1 := max(0, dy), min(h, h+dy)
	if x1-x0 <= 0 || y1-y0 <= 0 || (x1-x0)*(y1-y0) < minArea {
		return 0, false
	}
	n := float64((x1 - x0) * (y1 - y0))
	var sa, sb float64
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			sa += a[y*w+x]
			sb += b[(y-dy)*w+x-dx]
		}
	}
	ma, mb := sa/n, sb/n
	var sab, saa, sbb float64
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			va, vb := a[y*w+x]-ma, b[(y-dy)*w+x-dx]-mb
			sab += va * vb
			saa += va * va
			sbb += vb * vb
		}
	}
	if saa == 0 || sbb == 0 {
		return 0, true
	}
	return sab / math.Sqrt(saa*sbb), true
}

// pciam returns the translation of tile b relative to tile a (b's top-left in
// a's frame) from their spectra, choosing among the top two peaks and their
// aliasing interpretations by cross-correlation, as MIST does.
func pciam(f *fft2, fa, fb []complex128, a, b []float64, minArea int) (dx, dy int, corr float64) {
	w, h := f.w, f.h
	p := make([]complex128, len(fa))
	for i := range p {
		v := fb[i] * cmplx.Conj(fa[i])
		if m := cmplx.Abs(v); m > 1e-12 {
			p[i] = v / complex(m, 0)
		}
	}
	f.transform(p, true)
	// The two largest values of the correlation surface.
	top := [2]int{-1, -1}
	for i, v := range p {
		switch {
		case top[0] < 0 || real(v) > real(p[top[0]]):
			top[1], top[0] = top[0], i
		case top[1] < 0 || real(v) > real(p[top[1]]):
			top[1] = i
		}
	}
	corr = math.Inf(-1)
	for _, k := range top {
		px, py := k%w, k/w
		for _, cx := range []int{px, px - w} {
			for _, cy := range []int{py, py - h} {
				// The peak sits at -d modulo the size for b(x) = a(x + d).
				c, ok := ncc(a, b, w, h, -cx, -cy, minArea)
				if ok && c > corr {
					corr, dx, dy = c, -cx, -cy
				}
			}
		}
	}
	return dx, dy, corr
}

// pairResult is the outcome of aligning one adjacent pair.
type pairResult struct {
	i, j         int  // tile indices; j is east or south of i
	west         bool // j is the east neighbour of i
	dx, dy       int  // phase-correlation translation of j relative to i
	corr         float64
	raw, refined bool // exact before and after refinement
}

// solve aligns all adjacent pairs of g as a minimal MIST would: phase
// correlation with cross-correlation disambiguation, then a stage model
// (per column pair / row pair medians of the plausible translations) to
// replace implausible ones, then hill climbing on the cross-correlation
// within the random-jitter radius. It reports per pair whether the
// translation is exact before and after refinement.
func solve(g *Grid) []pairResult {
	cfg := g.Config
	w, h := cfg.TileWidth, cfg.TileHeight
	n := len(g.Tiles)
	fl := make([][]float64, n)
	sp := make([][]complex128, n)
	// parallel runs fn(f, k) for k in [0, count) on GOMAXPROCS goroutines,
	// each with its own FFT plan.
	parallel := func(count int, fn func(f *fft2, k int)) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f := newFFT2(w, h)
				for k := int(next.Add(1) - 1); k < count; k = int(next.Add(1) - 1) {
					fn(f, k)
				}
			}()
		}
		wg.Wait()
	}
	parallel(n, func(f *fft2, i int) {
		fl[i] = grayToFloat(g.Tiles[i])
		sp[i] = f.forward(fl[i])
	})
	const minArea = 200
	var pairs []pairResult
	for r := range cfg.Rows {
		for c := range cfg.Cols {
			i := r*cfg.Cols + c
			if c+1 < cfg.Cols {
				pairs = append(pairs, pairResult{i: i, j: i + 1, west: true})
			}
			if r+1 < cfg.Rows {
				pairs = append(pairs, pairResult{i: i, j: i + cfg.Cols})
			}
		}
	}
	parallel(len(pairs), func(f *fft2, k int) {
		p := &pairs[k]
		p.dx, p.dy, p.corr = pciam(f, sp[p.i], sp[p.j], fl[p.i], fl[p.j], minArea)
	})
	sx, sy := cfg.Step()
	rep := int(math.Ceil(2*cfg.Drift + 2*cfg.Jitter + 1))
	skew := int(math.Ceil(math.Abs(cfg.Skew))) + rep
	plausible := func(p pairResult) bool {
		if p.west {
			return abs(p.dx-sx) <= rep && abs(p.dy) <= skew
		}
		return abs(p.dy-sy) <= rep && abs(p.dx) <= skew
	}
	median := func(v []int) int { slices.Sort(v); return v[len(v)/2] }
	estimate := func(p pairResult) (int, int) {
		var xs, ys []int
		for _, q := range pairs {
			if q.west != p.west || !plausible(q) {
				continue
			}
			if (p.west && q.i%cfg.Cols != p.i%cfg.Cols) || (!p.west && q.i/cfg.Cols != p.i/cfg.Cols) {
				continue
			}
			xs, ys = append(xs, q.dx), append(ys, q.dy)
		}
		switch {
		case len(xs) > 0:
			return median(xs), median(ys)
		case p.west:
			return sx, 0
		}
		return 0, sy
	}
	radius := int(math.Ceil(2*cfg.Jitter + 1))
	for k := range pairs {
		p := &pairs[k]
		tx, ty := g.X[p.j]-g.X[p.i], g.Y[p.j]-g.Y[p.i]
		p.raw = p.dx == tx && p.dy == ty
		x, y := p.dx, p.dy
		if !plausible(*p) {
			x, y = estimate(*p)
		}
		x0, y0 := x, y
		best, _ := ncc(fl[p.i], fl[p.j], w, h, x, y, minArea)
		for {
			bx, by, bv := x, y, best
			for _, d := range [4][2]int{{1, 0}, {-1, 0}, {0, 1}, {0, -1}} {
				nx, ny := x+d[0], y+d[1]
				if abs(nx-x0) > radius || abs(ny-y0) > radius {
					continue
				}
				if v, ok := ncc(fl[p.i], fl[p.j], w, h, nx, ny, minArea); ok && v > bv {
					bx, by, bv = nx, ny, v
				}
			}
			if bx == x && by == y {
				break
			}
			x, y, best = bx, by, bv
		}
		p.refined = x == tx && y == ty
	}
	return pairs
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
