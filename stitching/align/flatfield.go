package align

import (
	"context"
	"fmt"
	"image"
	"math"
	"runtime"
	"slices"
	"sync"
)

// flatFieldDegree is the total degree of the polynomial surface fitted to
// the mean tile; flatFieldSamples bounds the number of pixels used in the
// fit.
const (
	flatFieldDegree  = 4
	flatFieldSamples = 1 << 14
)

// FlatField is a smooth multiplicative illumination model shared by all
// tiles of an acquisition (vignetting: the camera sees the specimen darker
// towards its corners). Such a pattern is the same in every tile, so it
// biases phase correlation towards zero shift and, worse, makes the NCC of
// narrow strips along the tile borders high whatever the content. Dividing
// every tile by the flat field removes the bias.
//
// MIST itself does not correct the illumination; [Options.NoFlatField]
// switches the correction off to get MIST's behaviour.
type FlatField struct {
	w, h         int
	gain         []float32 // per-pixel correction factor mean(S)/S
	fall         float64   // min(S)/max(S)
	significance float64
	identity     bool
}

// EstimateFlatField estimates the flat field of w x h tiles from n
// sample tiles: tile(0), ..., tile(n-1), called once each, in order, on
// the calling goroutine (stitching.EstimateFlatField says which tiles
// stitching.Sequential and stitching.Stitch take). An error from tile is returned
// as it is; a tile of another size is an error. Each tile is fitted by a
// smooth surface (a 2-D Legendre polynomial of total degree 4, least
// squares on a subsample of pixels) normalized to mean 1; the flat field
// is the mean of those surfaces. The polynomial is smooth enough not to
// follow the specimen and flexible enough for vignetting; dust and other
// small fixed patterns are not modelled.
//
// The specimen does not fully average out over a few tiles, so the mean
// surface is only trusted when it differs from flat significantly: its RMS
// deviation from 1 must exceed 3 times the RMS standard error of the mean
// (from the spread of the per-tile surfaces). Otherwise, or with fewer than
// 3 tiles, the flat field is the identity ([FlatField.Identity] reports
// it) and correcting is skipped. ctx is checked before each tile. The
// fits and the surface run on up to GOMAXPROCS goroutines (see
// [EstimateFlatFieldWorkers]).
func EstimateFlatField(ctx context.Context, w, h, n int, tile func(i int) (*image.Gray16, error)) (*FlatField, error) {
	return EstimateFlatFieldWorkers(ctx, w, h, n, runtime.GOMAXPROCS(0), tile)
}

// EstimateFlatFieldWorkers is [EstimateFlatField] with at most workers
// goroutines fitting tiles and evaluating the surface; workers <= 1 does
// all of it on the calling goroutine. The result does not depend on
// workers.
func EstimateFlatFieldWorkers(ctx context.Context, w, h, n, workers int, tile func(i int) (*image.Gray16, error)) (*FlatField, error) {
	if n <= 0 || w < 1 || h < 1 {
		return nil, fmt.Errorf("align: flat field from %d tiles of %dx%d: nothing to estimate it from", n, w, h)
	}
	fit := newSurfaceFit(w, h)
	// The tiles are fitted in parallel (a few at a time, so that few are
	// held), the coefficients kept in tile order: the result is the
	// sequential one.
	fits := make([][]float64, n)
	busy := make(chan struct{}, max(1, workers))
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t, err := tile(i)
		if err != nil {
			return nil, err
		}
		if b := t.Bounds(); b.Dx() != w || b.Dy() != h {
			return nil, fmt.Errorf("align: flat field: sample tile %d is %dx%d, expected %dx%d", i, b.Dx(), b.Dy(), w, h)
		}
		if workers <= 1 {
			if c, ok := fit.fitTile(t); ok {
				fits[i] = c
			}
			continue
		}
		busy <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c, ok := fit.fitTile(t); ok {
				fits[i] = c
			}
			<-busy
		}()
	}
	wg.Wait()
	var coefs [][]float64
	for _, c := range fits {
		if c != nil {
			coefs = append(coefs, c)
		}
	}
	return fit.flatField(coefs, workers), nil
}

// surfaceFit fits Legendre surfaces to tiles on a fixed subsample.
type surfaceFit struct {
	w, h   int
	terms  [][2]int    // (degree in x, degree in y)
	px, py [][]float64 // Legendre values per column / row
	xs, ys []int       // sample coordinates
	chol   []float64   // Cholesky factor of the normal matrix
}

func newSurfaceFit(w, h int) *surfaceFit {
	f := &surfaceFit{w: w, h: h}
	for d := 0; d <= flatFieldDegree; d++ {
		for i := 0; i <= d; i++ {
			f.terms = append(f.terms, [2]int{i, d - i})
		}
	}
	coord := func(x, n int) float64 {
		if n == 1 {
			return 0
		}
		return 2*float64(x)/float64(n-1) - 1
	}
	f.px = make([][]float64, w)
	for x := range f.px {
		f.px[x] = make([]float64, flatFieldDegree+1)
		legendre(coord(x, w), f.px[x])
	}
	f.py = make([][]float64, h)
	for y := range f.py {
		f.py[y] = make([]float64, flatFieldDegree+1)
		legendre(coord(y, h), f.py[y])
	}
	step := max(1, int(math.Sqrt(float64(w*h)/flatFieldSamples)))
	for y := 0; y < h; y += step {
		f.ys = append(f.ys, y)
	}
	for x := 0; x < w; x += step {
		f.xs = append(f.xs, x)
	}
	m := len(f.terms)
	ata := make([]float64, m*m)
	basis := make([]float64, m)
	for _, y := range f.ys {
		for _, x := range f.xs {
			f.basis(x, y, basis)
			for a := 0; a < m; a++ {
				for b := 0; b <= a; b++ {
					ata[a*m+b] += basis[a] * basis[b]
				}
			}
		}
	}
	for a := 0; a < m; a++ {
		for b := 0; b < a; b++ {
			ata[b*m+a] = ata[a*m+b]
		}
	}
	f.chol = ata
	if !cholesky(f.chol, m) {
		// Cannot happen for a tile of at least 1x1 pixels with the ridge.
		panic("align: flat-field normal matrix not positive definite")
	}
	return f
}

func (f *surfaceFit) basis(x, y int, dst []float64) {
	for t, tm := range f.terms {
		dst[t] = f.px[x][tm[0]] * f.py[y][tm[1]]
	}
}

func (f *surfaceFit) eval(c []float64, x, y int) float64 {
	v := 0.0
	for t, tm := range f.terms {
		v += c[t] * f.px[x][tm[0]] * f.py[y][tm[1]]
	}
	return v
}

// fitTile returns the coefficients of the tile's surface scaled to mean 1
// (the constant Legendre term is the mean); ok is false for a black tile.
func (f *surfaceFit) fitTile(t *image.Gray16) ([]float64, bool) {
	m := len(f.terms)
	atb := make([]float64, m)
	basis := make([]float64, m)
	b := t.Bounds()
	for _, y := range f.ys {
		for _, x := range f.xs {
			i := t.PixOffset(b.Min.X+x, b.Min.Y+y)
			v := float64(uint16(t.Pix[i])<<8 | uint16(t.Pix[i+1]))
			f.basis(x, y, basis)
			for a := range atb {
				atb[a] += basis[a] * v
			}
		}
	}
	c := cholSolve(f.chol, atb, m)
	if !(c[0] > 0) {
		return nil, false
	}
	inv := 1 / c[0]
	for i := range c {
		c[i] *= inv
	}
	return c, true
}

// flatField averages normalized surfaces and tests their significance,
// evaluating the surface on up to workers goroutines.
func (f *surfaceFit) flatField(coefs [][]float64, workers int) *FlatField {
	ff := &FlatField{w: f.w, h: f.h, gain: make([]float32, f.w*f.h), fall: 1, identity: true}
	for i := range ff.gain {
		ff.gain[i] = 1
	}
	k := len(coefs)
	if k < 3 {
		return ff
	}
	m := len(f.terms)
	mean := make([]float64, m)
	for _, c := range coefs {
		for i, v := range c {
			mean[i] += v / float64(k)
		}
	}
	// Significance on a coarse grid of points.
	const g = 16
	var dev2, se2 float64
	for gy := 0; gy < g; gy++ {
		y := (2*gy + 1) * f.h / (2 * g)
		for gx := 0; gx < g; gx++ {
			x := (2*gx + 1) * f.w / (2 * g)
			mv := f.eval(mean, x, y)
			v := 0.0
			for _, c := range coefs {
				d := f.eval(c, x, y) - mv
				v += d * d
			}
			v /= float64(k - 1)
			dev2 += (mv - 1) * (mv - 1)
			se2 += v / float64(k)
		}
	}
	ff.significance = math.Sqrt(dev2 / math.Max(se2, 1e-300))
	if ff.significance < 3 {
		return ff
	}
	s := make([]float64, f.w*f.h)
	// The surface, by bands of rows in parallel.
	bands := max(1, min(workers, f.h))
	maxes := make([]float64, bands)
	band := func(k int) {
		m := math.Inf(-1)
		for y := k * f.h / bands; y < (k+1)*f.h/bands; y++ {
			for x := 0; x < f.w; x++ {
				v := f.eval(mean, x, y)
				s[y*f.w+x] = v
				m = max(m, v)
			}
		}
		maxes[k] = m
	}
	var wg sync.WaitGroup
	for k := 1; k < bands; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			band(k)
		}()
	}
	band(0)
	wg.Wait()
	smax := slices.Max(maxes)
	// Guard against a fit that dips towards zero.
	floor := 0.05 * smax
	smin, avg := math.Inf(1), 0.0
	for i, v := range s {
		v = max(v, floor)
		s[i] = v
		smin = min(smin, v)
		avg += v
	}
	avg /= float64(len(s))
	for i, v := range s {
		ff.gain[i] = float32(avg / v)
	}
	ff.fall = smin / smax
	ff.identity = false
	return ff
}

// cholesky factors the symmetric positive definite m x m row-major matrix
// a in place (lower triangle), after adding a tiny ridge.
func cholesky(a []float64, m int) bool {
	tr := 0.0
	for i := 0; i < m; i++ {
		tr += a[i*m+i]
	}
	for i := 0; i < m; i++ {
		a[i*m+i] += 1e-12 * tr / float64(m)
	}
	for j := 0; j < m; j++ {
		d := a[j*m+j]
		for k := 0; k < j; k++ {
			d -= a[j*m+k] * a[j*m+k]
		}
		if !(d > 0) {
			return false
		}
		d = math.Sqrt(d)
		a[j*m+j] = d
		for i := j + 1; i < m; i++ {
			s := a[i*m+j]
			for k := 0; k < j; k++ {
				s -= a[i*m+k] * a[j*m+k]
			}
			a[i*m+j] = s / d
		}
	}
	return true
}

// cholSolve solves L L^T x = b for the factor of cholesky.
func cholSolve(l, b []float64, m int) []float64 {
	x := make([]float64, m)
	for i := 0; i < m; i++ {
		s := b[i]
		for k := 0; k < i; k++ {
			s -= l[i*m+k] * x[k]
		}
		x[i] = s / l[i*m+i]
	}
	for i := m - 1; i >= 0; i-- {
		s := x[i]
		for k := i + 1; k < m; k++ {
			s -= l[k*m+i] * x[k]
		}
		x[i] = s / l[i*m+i]
	}
	return x
}

// Falloff returns min(S)/max(S) of the fitted illumination surface: 1 for
// flat illumination (or an identity flat field), 0.7 for a 30% fall-off
// towards the corners.
func (f *FlatField) Falloff() float64 { return f.fall }

// Significance returns the RMS deviation from flat of the mean surface in
// units of its RMS standard error (0 when fewer than 3 tiles were usable).
func (f *FlatField) Significance() float64 { return f.significance }

// Identity reports whether the flat field is the identity (illumination
// not significantly uneven): correcting with it changes nothing.
func (f *FlatField) Identity() bool { return f.identity }

// Apply returns a flat-field corrected copy of tile (pixel * gain, rounded
// and clamped to 16 bits). It panics if the tile size differs from the
// flat field's. Apply is safe for concurrent use.
func (f *FlatField) Apply(tile *image.Gray16) *image.Gray16 {
	out := image.NewGray16(image.Rect(0, 0, f.w, f.h))
	f.apply(out, tile, "Apply")
	return out
}

// ApplyInPlace corrects tile itself, as [FlatField.Apply] would into a new
// image, for callers that own the tile. It panics if the tile's size is
// not the flat field's.
func (f *FlatField) ApplyInPlace(tile *image.Gray16) { f.apply(tile, tile, "ApplyInPlace") }

func (f *FlatField) apply(out, tile *image.Gray16, op string) {
	b := tile.Bounds()
	if b.Dx() != f.w || b.Dy() != f.h {
		panic(fmt.Sprintf("align: FlatField.%s: tile is %dx%d, flat field %dx%d", op, b.Dx(), b.Dy(), f.w, f.h))
	}
	ob := out.Bounds()
	for y := 0; y < f.h; y++ {
		src := tile.Pix[tile.PixOffset(b.Min.X, b.Min.Y+y):]
		dst := out.Pix[out.PixOffset(ob.Min.X, ob.Min.Y+y):]
		g := f.gain[y*f.w : (y+1)*f.w]
		for x, gv := range g {
			u := correct(uint16(src[2*x])<<8|uint16(src[2*x+1]), gv)
			dst[2*x] = uint8(u >> 8)
			dst[2*x+1] = uint8(u)
		}
	}
}

// correct is the correction of one pixel: v·gain rounded to the nearest
// integer (half up) and clamped to [0, 65535], in float32 arithmetic, the
// product rounded before the addition (no fused multiply-add). A GPU
// implementation computes the same with __fmul_rn and __fadd_rn.
func correct(v uint16, gain float32) uint16 {
	// The conversion rounds the product: without it Go may fuse the
	// multiply and add (it does on arm64), and results would differ by
	// platform.
	r := float32(float32(v)*gain) + 0.5
	switch {
	case r >= 65535:
		return 65535
	case r > 0:
		return uint16(r)
	}
	return 0
}

// Gains returns the per-pixel correction factors, row-major (W·H values):
// a pixel v at (x, y) becomes v·Gains()[y·W+x], rounded half up and
// clamped to 16 bits, computed in float32. They belong to the flat field
// and must not be modified. Implementations of [FlatField.Apply] elsewhere
// (a GPU) use them.
func (f *FlatField) Gains() []float32 { return f.gain }

// CorrectPixel returns pixel value v at (x, y) corrected as
// [FlatField.Apply] corrects it.
func (f *FlatField) CorrectPixel(x, y int, v uint16) uint16 { return correct(v, f.gain[y*f.w+x]) }

// legendre fills p with the Legendre polynomials P_0..P_{len(p)-1} at u.
func legendre(u float64, p []float64) {
	p[0] = 1
	if len(p) > 1 {
		p[1] = u
	}
	for n := 2; n < len(p); n++ {
		p[n] = ((2*float64(n)-1)*u*p[n-1] - (float64(n)-1)*p[n-2]) / float64(n)
	}
}
