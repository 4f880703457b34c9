package synth

import (
	"context"
	"fmt"
	"image"
	"math"
	"math/rand/v2"
	"slices"
)

// bucketSize is the side (px) of the square plane cells that scene objects
// are generated in. Every bucket's objects are a pure function of the seed
// and the bucket coordinates, so any window of the plane can be rendered
// without a global object list.
const bucketSize = 256

// Seed salts, so that the independent random streams of a scene differ.
const (
	saltStage   = 0x6a09e667f3bcc908
	saltBucket  = 0xbb67ae8584caa73b
	saltNoise   = 0x3c6ef372fe94f82b
	saltTile    = 0xa54ff53a5f1d36f1
	saltDust    = 0x510e527fade682d1
	saltEmpty   = 0x9b05688c2b3e6c1f
	saltTexture = 0x1f83d9abfb41bd6b
)

// Scene is the deterministic description of a synthetic specimen and of the
// acquisition of a tile grid over it. It is immutable after NewScene and safe
// for concurrent use; tiles are rendered on demand.
type Scene struct {
	cfg          Config
	p            Params
	seed         uint64
	stepX, stepY int
	x, y         []int
	planeW       int
	planeH       int

	bgSlow, bg1, bg2, bg3 noiseField
	tex1, tex2            noiseField
	empty1, empty2        noiseField
	emptyThreshold        float64
	reach                 float64 // max distance (px) from a bucket to a pixel its objects touch
	clipCap               float64 // soft-clip limit of the summed cell signal

	flat  []float64 // vignetting x dust gain, TileWidth x TileHeight
	dark  float64   // DN offset
	scale float64   // DN per intensity unit
	maxDN float64
}

// NewScene validates cfg and builds the scene: stage positions, noise fields,
// and the flat-field of the camera.
func NewScene(cfg Config) (*Scene, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := cfg.EffectiveParams()
	s := &Scene{cfg: cfg, p: p, seed: mix64(cfg.Seed ^ 0x243f6a8885a308d3)}
	s.stepX, s.stepY = cfg.Step()
	s.placeTiles()

	ns := s.seed ^ saltNoise
	s.bgSlow = newNoiseField(mix64(ns+1), 700)
	s.bg1 = newNoiseField(mix64(ns+2), 48)
	s.bg2 = newNoiseField(mix64(ns+3), 12)
	s.bg3 = newNoiseField(mix64(ns+4), 1.7)
	ts := s.seed ^ saltTexture
	s.tex1 = newNoiseField(mix64(ts+1), 1.5)
	s.tex2 = newNoiseField(mix64(ts+2), 4)
	es := s.seed ^ saltEmpty
	s.empty1 = newNoiseField(mix64(es+1), p.EmptyScale)
	s.empty2 = newNoiseField(mix64(es+2), p.EmptyScale/2.7)
	s.emptyThreshold = s.quantileOfEmptyField(p.EmptyFraction)

	maxR := p.CellRadius * math.Exp(2.5*p.CellRadiusSpread)
	maxCellBound := maxR * 2.2 * 1.6 // elongation, shape harmonics, edge and halo
	s.reach = 2.5*colonySigma(p, maxColonyCells(p))*1.5 + maxCellBound + 8
	if p.Modality == Fluorescence {
		s.clipCap = 1.5
	} else {
		s.clipCap = 0.8 * p.Background
		if s.clipCap < 0.05 {
			s.clipCap = 0.05
		}
	}

	maxDN := float64(int(1)<<cfg.BitDepth - 1)
	s.maxDN = maxDN
	s.dark = math.Round(p.DarkLevel * maxDN)
	s.scale = p.Exposure * (maxDN - s.dark)
	s.buildFlat()
	return s, nil
}

// Config returns the configuration the scene was built from.
func (s *Scene) Config() Config { return s.cfg }

// Params returns the effective scene and acquisition parameters.
func (s *Scene) Params() Params { return s.p }

// PlaneSize returns the size of the specimen plane that contains all tiles.
func (s *Scene) PlaneSize() (w, h int) { return s.planeW, s.planeH }

// Position returns the true top-left corner of tile (r, c) in the specimen
// plane. It panics if (r, c) is outside the grid.
func (s *Scene) Position(r, c int) (x, y int) {
	i := s.index(r, c)
	return s.x[i], s.y[i]
}

// Positions returns copies of the true tile positions, row-major.
func (s *Scene) Positions() (x, y []int) { return slices.Clone(s.x), slices.Clone(s.y) }

func (s *Scene) index(r, c int) int {
	if r < 0 || r >= s.cfg.Rows || c < 0 || c >= s.cfg.Cols {
		panic(fmt.Sprintf("synth: tile (%d, %d) outside %d x %d grid", r, c, s.cfg.Rows, s.cfg.Cols))
	}
	return r*s.cfg.Cols + c
}

// placeTiles draws the stage errors and the true integer tile positions.
func (s *Scene) placeTiles() {
	cfg := s.cfg
	rng := rand.New(rand.NewPCG(s.seed^saltStage, 1))
	uni := func(a float64) float64 { return (2*rng.Float64() - 1) * a }
	rowDX, rowDY := make([]float64, cfg.Rows), make([]float64, cfg.Rows)
	colDX, colDY := make([]float64, cfg.Cols), make([]float64, cfg.Cols)
	for r := range cfg.Rows {
		rowDX[r], rowDY[r] = uni(cfg.Drift), uni(cfg.Drift)
	}
	for c := range cfg.Cols {
		colDX[c], colDY[c] = uni(cfg.Drift), uni(cfg.Drift)
	}
	n := cfg.Rows * cfg.Cols
	fx, fy := make([]float64, n), make([]float64, n)
	minX, minY := math.Inf(1), math.Inf(1)
	maxX, maxY := math.Inf(-1), math.Inf(-1)
	for r := range cfg.Rows {
		for c := range cfg.Cols {
			i := r*cfg.Cols + c
			fx[i] = float64(c*s.stepX) + rowDX[r] + colDX[c] + uni(cfg.Jitter) - float64(r)*cfg.Skew
			fy[i] = float64(r*s.stepY) + rowDY[r] + colDY[c] + uni(cfg.Jitter) + float64(c)*cfg.Skew
			minX, minY = math.Min(minX, fx[i]), math.Min(minY, fy[i])
			maxX, maxY = math.Max(maxX, fx[i]), math.Max(maxY, fy[i])
		}
	}
	// A margin keeps every position non-negative and leaves some specimen
	// around the grid; it does not depend on the random draws beyond their
	// bounds, so positions stay comparable across seeds.
	const margin = 16
	ox := margin + math.Ceil(2*cfg.Drift+cfg.Jitter+math.Abs(cfg.Skew)*float64(cfg.Rows))
	oy := margin + math.Ceil(2*cfg.Drift+cfg.Jitter+math.Abs(cfg.Skew)*float64(cfg.Cols))
	s.x, s.y = make([]int, n), make([]int, n)
	for i := range n {
		s.x[i] = int(math.Round(fx[i] + ox))
		s.y[i] = int(math.Round(fy[i] + oy))
	}
	s.planeW = int(math.Round(maxX+ox)) + cfg.TileWidth + margin
	s.planeH = int(math.Round(maxY+oy)) + cfg.TileHeight + margin
}

// emptyAt is the slow field that decides where colonies may grow.
func (s *Scene) emptyAt(x, y float64) float64 {
	return s.empty1.at(x, y) + 0.5*s.empty2.at(x, y)
}

// quantileOfEmptyField estimates the q-quantile of the empty-region field over
// the plane (and a surrounding band), so that roughly a fraction q of the
// plane is left without colonies.
func (s *Scene) quantileOfEmptyField(q float64) float64 {
	if q <= 0 {
		return math.Inf(-1)
	}
	if q >= 1 {
		return math.Inf(1)
	}
	rng := rand.New(rand.NewPCG(s.seed^saltEmpty, 7))
	const n = 4096
	v := make([]float64, n)
	w, h := float64(s.planeW)+2*s.p.EmptyScale, float64(s.planeH)+2*s.p.EmptyScale
	for i := range v {
		v[i] = s.emptyAt(rng.Float64()*w-s.p.EmptyScale, rng.Float64()*h-s.p.EmptyScale)
	}
	slices.Sort(v)
	return v[min(n-1, int(q*n))]
}

func maxColonyCells(p Params) int {
	return int(math.Min(math.Ceil(4*p.ColonyCells), 1200))
}

// colonySigma is the spatial spread of a colony of n cells: cells pack at
// roughly one per (1.6 r)^2 in the core.
func colonySigma(p Params, n int) float64 {
	return 0.55 * p.CellRadius * math.Sqrt(float64(max(n, 1)))
}

// blob is one rendered object: a cell, a rounded cell, or a debris particle.
// Coordinates (u, v) are the pixel offset from the centre rotated into the
// blob frame and divided by the semi-axes; the boundary lies at normalised
// radius m(phi) = 1 + h2c cos 2phi + h2s sin 2phi + h3c cos 3phi + h3s sin 3phi.
type blob struct {
	cx, cy             float64
	cos, sin           float64
	ia, ib             float64 // inverse semi-axes
	h2c, h2s, h3c, h3s float64
	edge               float64 // half-width of the soft edge (normalised)
	amp                float64 // body amplitude (signed)
	dome               float64 // relative fall-off of the body towards the edge
	halo               float64 // halo amplitude (phase contrast)
	haloW              float64 // halo half-width (normalised)
	tex                float64 // texture modulation of body and nucleus
	nuc                bool
	nx, ny, inr, namp  float64 // nucleus centre (normalised), inverse radius, amplitude
	rmax2              float64 // squared normalised radius beyond which the blob is zero
	bound              float64 // bounding radius in px
}

// haloPx is the half-width of a phase-contrast halo in pixels.
const haloPx = 1.6

// finish derives the cached rendering quantities from the semi-axes a >= bAxis.
func (b *blob) finish(a, bAxis float64) {
	harm := math.Abs(b.h2c) + math.Abs(b.h2s) + math.Abs(b.h3c) + math.Abs(b.h3s)
	b.haloW = haloPx / bAxis
	rmax := (1 + harm) * (1 + b.edge + b.haloW + 0.05)
	b.rmax2 = rmax * rmax
	b.bound = math.Max(a, bAxis)*rmax + 1
	b.ia, b.ib = 1/a, 1/bAxis
}

// poisson draws a Poisson variate (Knuth for small means, rounded normal
// otherwise).
func poisson(rng *rand.Rand, mean float64) int {
	if mean <= 0 {
		return 0
	}
	if mean > 40 {
		return max(0, int(math.Round(mean+math.Sqrt(mean)*rng.NormFloat64())))
	}
	l := math.Exp(-mean)
	k, prod := 0, rng.Float64()
	for prod > l {
		k++
		prod *= rng.Float64()
	}
	return k
}

// bucketObjects appends the objects generated in bucket (bx, by) to out.
func (s *Scene) bucketObjects(bx, by int, out []blob) []blob {
	p := &s.p
	rng := rand.New(rand.NewPCG(s.seed^saltBucket, hash2(s.seed, bx, by)))
	area := float64(bucketSize*bucketSize) / 1e6
	ox, oy := float64(bx*bucketSize), float64(by*bucketSize)

	nCol := poisson(rng, p.ColonyDensity*area)
	for range nCol {
		ccx, ccy := ox+rng.Float64()*bucketSize, oy+rng.Float64()*bucketSize
		n := int(math.Round(p.ColonyCells * math.Exp(0.7*rng.NormFloat64())))
		n = min(max(n, 1), maxColonyCells(*p))
		sig := colonySigma(*p, n)
		el := 1 + 0.5*rng.Float64()
		ang := rng.Float64() * math.Pi
		ca, sa := math.Cos(ang), math.Sin(ang)
		sx, sy := sig*el, sig/el
		// Draw the colony fully even if it is rejected, so that the stream
		// is consumed the same way whatever the empty-region field says.
		keep := s.emptyAt(ccx, ccy) >= s.emptyThreshold
		for range n {
			var gx, gy float64
			for {
				gx, gy = rng.NormFloat64(), rng.NormFloat64()
				if gx*gx+gy*gy <= 2.5*2.5 {
					break
				}
			}
			px := ccx + ca*gx*sx - sa*gy*sy
			py := ccy + sa*gx*sx + ca*gy*sy
			c := s.newCell(rng, px, py)
			if keep {
				out = append(out, c)
			}
		}
	}
	nIso := poisson(rng, p.IsolatedCells*area)
	for range nIso {
		px, py := ox+rng.Float64()*bucketSize, oy+rng.Float64()*bucketSize
		c := s.newCell(rng, px, py)
		if s.emptyAt(px, py) >= s.emptyThreshold {
			out = append(out, c)
		}
	}
	nDeb := poisson(rng, p.Debris*area)
	for range nDeb {
		px, py := ox+rng.Float64()*bucketSize, oy+rng.Float64()*bucketSize
		out = append(out, s.newDebris(rng, px, py))
	}
	return out
}

// newCell draws the shape and appearance of one cell centred at (x, y).
func (s *Scene) newCell(rng *rand.Rand, x, y float64) blob {
	p := &s.p
	r := p.CellRadius * math.Exp(p.CellRadiusSpread*clampNorm(rng))
	contrast := p.CellContrast * math.Exp(0.35*clampNorm(rng))
	ang := rng.Float64() * math.Pi
	b := blob{cx: x, cy: y, cos: math.Cos(ang), sin: math.Sin(ang)}
	rounded := p.Modality == PhaseContrast && rng.Float64() < 0.1
	var el float64
	if rounded {
		// Rounded (e.g. mitotic) cell: small, bright, sharp, strong halo.
		r *= 0.7
		el = 1 + 0.08*rng.Float64()
		b.edge = 0.06
		b.amp = 0.9 * contrast
		b.halo = 0.9 * contrast
		b.dome = -0.3
		b.tex = 0.3 * p.CellTexture
	} else {
		el = 1 + 1.0*rng.Float64()*rng.Float64()
		harm := 0.14
		b.h2c, b.h2s = harm*(2*rng.Float64()-1), harm*(2*rng.Float64()-1)
		b.h3c, b.h3s = 0.6*harm*(2*rng.Float64()-1), 0.6*harm*(2*rng.Float64()-1)
		b.edge = 0.06 + 0.12*rng.Float64()
		b.tex = p.CellTexture * (0.5 + rng.Float64())
		if p.Modality == PhaseContrast {
			b.amp = -contrast
			b.halo = 0.6 * contrast * (0.5 + rng.Float64())
			b.dome = -0.4 // thicker, darker centre
		} else {
			b.amp = contrast
			b.dome = 0.3
		}
	}
	if !rounded && rng.Float64() < p.NucleusFraction {
		b.nuc = true
		nr := 0.3 + 0.15*rng.Float64()
		b.inr = 1 / nr
		b.nx = (2*rng.Float64() - 1) * 0.25
		b.ny = (2*rng.Float64() - 1) * 0.25
		if p.Modality == PhaseContrast {
			b.namp = -0.5 * contrast * (0.5 + rng.Float64())
		} else {
			b.namp = 1.2 * contrast * (0.5 + rng.Float64())
		}
	}
	a := r * math.Sqrt(el)
	b.finish(a, r/math.Sqrt(el))
	return b
}

// newDebris draws a small particle centred at (x, y).
func (s *Scene) newDebris(rng *rand.Rand, x, y float64) blob {
	p := &s.p
	r := 0.8 + 2*rng.Float64()*rng.Float64()
	ang := rng.Float64() * math.Pi
	b := blob{cx: x, cy: y, cos: math.Cos(ang), sin: math.Sin(ang), edge: 0.35}
	c := p.CellContrast * (0.3 + 0.7*rng.Float64())
	if p.Modality == Fluorescence {
		b.amp = 0.5 * c
	} else if rng.Float64() < 0.6 {
		b.amp = -c
	} else {
		b.amp = c
	}
	el := 1 + 0.5*rng.Float64()
	b.finish(r*math.Sqrt(el), r/math.Sqrt(el))
	return b
}

// clampNorm is a standard normal variate clipped to [-2.5, 2.5].
func clampNorm(rng *rand.Rand) float64 {
	return math.Max(-2.5, math.Min(2.5, rng.NormFloat64()))
}

// render adds the blob to d over the w x h window at (x0, y0); t is the
// texture field over the same window.
func (b *blob) render(d, t []float64, x0, y0, w, h int) {
	ix0 := max(x0, int(math.Floor(b.cx-b.bound)))
	ix1 := min(x0+w, int(math.Ceil(b.cx+b.bound))+1)
	iy0 := max(y0, int(math.Floor(b.cy-b.bound)))
	iy1 := min(y0+h, int(math.Ceil(b.cy+b.bound))+1)
	if ix0 >= ix1 || iy0 >= iy1 {
		return
	}
	bodyEnd := 1 + b.edge
	inv2e := 1 / (2 * b.edge)
	haloC := 1 + 0.5*b.edge + 0.5*b.haloW
	invHalo := 1 / b.haloW
	const nucEdge = 0.35
	for py := iy0; py < iy1; py++ {
		dy := float64(py) - b.cy
		row := (py-y0)*w - x0
		for px := ix0; px < ix1; px++ {
			dx := float64(px) - b.cx
			u := (dx*b.cos + dy*b.sin) * b.ia
			v := (dy*b.cos - dx*b.sin) * b.ib
			rho2 := u*u + v*v
			if rho2 >= b.rmax2 {
				continue
			}
			rho := math.Sqrt(rho2)
			m := 1.0
			if rho > 1e-9 {
				cu, sv := u/rho, v/rho
				c2, s2 := cu*cu-sv*sv, 2*cu*sv
				c3, s3 := cu*c2-sv*s2, sv*c2+cu*s2
				m = 1 + b.h2c*c2 + b.h2s*s2 + b.h3c*c3 + b.h3s*s3
			}
			r := rho / m
			idx := row + px
			val := 0.0
			if r < bodyEnd {
				q := (bodyEnd - r) * inv2e
				if q > 1 {
					q = 1
				}
				body := q * q * (3 - 2*q)
				rr := min(r, 1)
				val = b.amp * body * (1 - b.dome*rr*rr)
				if b.nuc {
					du, dv := u-b.nx, v-b.ny
					rn := math.Sqrt(du*du+dv*dv) * b.inr
					if rn < 1+nucEdge {
						qn := (1 + nucEdge - rn) / (2 * nucEdge)
						if qn > 1 {
							qn = 1
						}
						val += b.namp * qn * qn * (3 - 2*qn)
					}
				}
				if b.tex != 0 {
					val *= 1 + b.tex*t[idx]
				}
			}
			if b.halo != 0 {
				z := (r - haloC) * invHalo
				if z > -1 && z < 1 {
					z = 1 - z*z
					val += b.halo * z * z
				}
			}
			d[idx] += val
		}
	}
}

// scratch is the per-goroutine working memory of the renderer.
type scratch struct {
	bg, d, t []float64
	objs     []blob
	noise    noiseScratch
}

// specimen renders the noise-free specimen intensity over the w x h window at
// (x0, y0) into sc.bg and returns it.
func (s *Scene) specimen(ctx context.Context, x0, y0, w, h int, sc *scratch) ([]float64, error) {
	n := w * h
	sc.bg = grow(sc.bg, n)
	sc.d = grow(sc.d, n)
	sc.t = grow(sc.t, n)
	bg, d, t := sc.bg, sc.d, sc.t
	clear(d)
	clear(t)
	p := &s.p
	for i := range bg {
		bg[i] = p.Background
	}
	s.bgSlow.add(bg, x0, y0, w, h, 0.1*p.Background, &sc.noise)
	s.bg1.add(bg, x0, y0, w, h, p.BackgroundTexture, &sc.noise)
	s.bg2.add(bg, x0, y0, w, h, 0.6*p.BackgroundTexture, &sc.noise)
	s.bg3.add(bg, x0, y0, w, h, 0.5*p.BackgroundTexture, &sc.noise)
	s.tex1.add(t, x0, y0, w, h, 1, &sc.noise)
	s.tex2.add(t, x0, y0, w, h, 0.6, &sc.noise)
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	fx0, fy0 := float64(x0)-s.reach, float64(y0)-s.reach
	fx1, fy1 := float64(x0+w)+s.reach, float64(y0+h)+s.reach
	bx0, bx1 := int(math.Floor(fx0/bucketSize)), int(math.Floor(fx1/bucketSize))
	by0, by1 := int(math.Floor(fy0/bucketSize)), int(math.Floor(fy1/bucketSize))
	wx0, wy0 := float64(x0), float64(y0)
	wx1, wy1 := float64(x0+w-1), float64(y0+h-1)
	for by := by0; by <= by1; by++ {
		for bx := bx0; bx <= bx1; bx++ {
			sc.objs = s.bucketObjects(bx, by, sc.objs[:0])
			for i := range sc.objs {
				o := &sc.objs[i]
				if o.cx+o.bound < wx0 || o.cx-o.bound > wx1 || o.cy+o.bound < wy0 || o.cy-o.bound > wy1 {
					continue
				}
				o.render(d, t, x0, y0, w, h)
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	c := s.clipCap
	for i, v := range d {
		bg[i] += v / (1 + math.Abs(v)/c)
	}
	return bg, nil
}

// buildFlat precomputes the camera gain per tile pixel: vignetting times the
// shadows of camera-fixed dust.
func (s *Scene) buildFlat() {
	w, h := s.cfg.TileWidth, s.cfg.TileHeight
	s.flat = make([]float64, w*h)
	// Optical centre slightly off the tile centre, as in real systems.
	cx, cy := 0.52*float64(w-1), 0.47*float64(h-1)
	hx, hy := 0.5*float64(w), 0.5*float64(h)
	ax := make([]float64, w)
	for i := range ax {
		q := (float64(i) - cx) / hx
		ax[i] = 0.5 * q * q
	}
	v := s.p.Vignetting
	for j := range h {
		q := (float64(j) - cy) / hy
		ay := 0.5 * q * q
		row := s.flat[j*w : (j+1)*w]
		for i := range row {
			g := 1 - v*(ax[i]+ay)
			row[i] = math.Max(g, 0.05)
		}
	}
	rng := rand.New(rand.NewPCG(s.seed^saltDust, 3))
	for range s.p.Dust {
		dx, dy := rng.Float64()*float64(w), rng.Float64()*float64(h)
		rad := 3 + 6*rng.Float64()
		att := 0.04 + 0.08*rng.Float64()
		x0, x1 := max(0, int(dx-2*rad)), min(w, int(dx+2*rad)+1)
		y0, y1 := max(0, int(dy-2*rad)), min(h, int(dy+2*rad)+1)
		for j := y0; j < y1; j++ {
			for i := x0; i < x1; i++ {
				ex, ey := (float64(i)-dx)/rad, (float64(j)-dy)/rad
				r2 := ex*ex + ey*ey
				if r2 < 4 {
					// Out-of-focus dust: a soft dark disc with a darker rim.
					z := 1 - r2/4
					s.flat[j*w+i] *= 1 - att*z*(0.6+0.4*r2)
				}
			}
		}
	}
}

// RenderTile renders tile (r, c) as the camera records it: specimen, per-tile
// brightness, vignetting and dust, shot and read noise, quantised and clamped
// to the bit depth. The result depends only on the configuration and (r, c).
func (s *Scene) RenderTile(ctx context.Context, r, c int) (*image.Gray16, error) {
	var sc scratch
	return s.renderTile(ctx, r, c, &sc)
}

func (s *Scene) renderTile(ctx context.Context, r, c int, sc *scratch) (*image.Gray16, error) {
	i := s.index(r, c)
	w, h := s.cfg.TileWidth, s.cfg.TileHeight
	spec, err := s.specimen(ctx, s.x[i], s.y[i], w, h, sc)
	if err != nil {
		return nil, err
	}
	p := &s.p
	rng := rand.New(rand.NewPCG(s.seed^saltTile, uint64(i)+1))
	gain := math.Max(0.5, 1+p.TileBrightness*rng.NormFloat64())
	shot := 0.0
	if p.Photons > 0 {
		shot = s.scale * s.scale / p.Photons
	}
	read2 := p.ReadNoise * p.ReadNoise
	img := image.NewGray16(image.Rect(0, 0, w, h))
	for y := range h {
		if y&63 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		src := spec[y*w : (y+1)*w]
		fl := s.flat[y*w : (y+1)*w]
		pix := img.Pix[y*img.Stride : y*img.Stride+2*w]
		for x, v := range src {
			sig := v * fl[x] * gain
			if sig < 0 {
				sig = 0
			}
			dn := s.dark + s.scale*sig + math.Sqrt(shot*sig+read2)*rng.NormFloat64()
			u := quantize(dn, s.maxDN)
			pix[2*x], pix[2*x+1] = byte(u>>8), byte(u)
		}
	}
	return img, nil
}

// quantize rounds dn to the nearest integer and clamps it to [0, maxDN].
func quantize(dn, maxDN float64) uint16 {
	switch {
	case dn <= 0 || dn != dn: // also NaN
		return 0
	case dn >= maxDN:
		return uint16(maxDN)
	}
	return uint16(dn + 0.5)
}

// maxSpecimenPixels bounds the window Specimen may render at once.
const maxSpecimenPixels = 1 << 28

// Specimen renders the noise-free specimen over rect (plane coordinates; any
// rectangle, also beyond the plane) with the camera's DN scaling but without
// vignetting, dust, per-tile brightness or noise. It is the ground truth a
// perfectly stitched and flat-field-corrected mosaic would approach.
func (s *Scene) Specimen(ctx context.Context, rect image.Rectangle) (*image.Gray16, error) {
	w, h := rect.Dx(), rect.Dy()
	if w <= 0 || h <= 0 {
		return nil, fmt.Errorf("synth: empty specimen rectangle %v", rect)
	}
	if w > maxSpecimenPixels/h {
		return nil, fmt.Errorf("synth: specimen rectangle %v exceeds %d pixels", rect, maxSpecimenPixels)
	}
	var sc scratch
	spec, err := s.specimen(ctx, rect.Min.X, rect.Min.Y, w, h, &sc)
	if err != nil {
		return nil, err
	}
	img := image.NewGray16(rect)
	for y := range h {
		pix := img.Pix[y*img.Stride : y*img.Stride+2*w]
		for x, v := range spec[y*w : (y+1)*w] {
			u := quantize(s.dark+s.scale*v, s.maxDN)
			pix[2*x], pix[2*x+1] = byte(u>>8), byte(u)
		}
	}
	return img, nil
}
