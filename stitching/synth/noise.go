package synth

import "math"

// This file holds the deterministic random functions of plane coordinates
// that make lazy, per-tile rendering possible: every value depends only on
// the scene seed and the integer coordinates it is evaluated at, never on the
// order in which tiles are rendered.

// mix64 is the splitmix64 finaliser: a cheap, well-distributed 64-bit mixer.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// hash2 hashes a pair of integer coordinates under a seed.
func hash2(seed uint64, x, y int) uint64 {
	h := seed ^ mix64(uint64(int64(x))*0x9e3779b97f4a7c15+0x632be59bd9b4e019)
	return mix64(h ^ (uint64(int64(y)) * 0xc2b2ae3d27d4eb4f))
}

// latticeValue is a uniform value in [-1, 1) attached to lattice point (x, y).
func latticeValue(seed uint64, x, y int) float64 {
	return float64(hash2(seed, x, y)>>11)*(2.0/(1<<53)) - 1
}

// fade is the C1 smoothstep used to interpolate lattice values.
func fade(t float64) float64 { return t * t * (3 - 2*t) }

// noiseField is one octave of smoothed value noise: random values on a square
// lattice of spacing scale (pixels), offset by a seed-dependent fraction of a
// cell so that octaves do not share lattice lines, interpolated with
// smoothstep weights. Values lie in [-1, 1].
type noiseField struct {
	seed   uint64
	scale  float64
	ox, oy float64 // lattice offset in lattice units
}

func newNoiseField(seed uint64, scale float64) noiseField {
	h := mix64(seed ^ 0x5851f42d4c957f2d)
	return noiseField{
		seed:  seed,
		scale: scale,
		ox:    float64(h&0xffff) / 65536,
		oy:    float64((h>>16)&0xffff) / 65536,
	}
}

// at evaluates the field at plane point (x, y).
func (f noiseField) at(x, y float64) float64 {
	u := x/f.scale + f.ox
	v := y/f.scale + f.oy
	iu, iv := math.Floor(u), math.Floor(v)
	fu, fv := fade(u-iu), fade(v-iv)
	ix, iy := int(iu), int(iv)
	a := latticeValue(f.seed, ix, iy)
	b := latticeValue(f.seed, ix+1, iy)
	c := latticeValue(f.seed, ix, iy+1)
	d := latticeValue(f.seed, ix+1, iy+1)
	top := a + fu*(b-a)
	bot := c + fu*(d-c)
	return top + fv*(bot-top)
}

// noiseScratch holds reusable buffers for noiseField.add.
type noiseScratch struct {
	lattice []float64
	rowInt  []float64
	colIdx  []int
	colW    []float64
}

// add adds amp times the field, sampled at the integer pixel centres of the
// w x h window with top-left (x0, y0), to dst (row-major, stride w). It gives
// the same values as at, but costs a few nanoseconds per pixel.
func (f noiseField) add(dst []float64, x0, y0, w, h int, amp float64, s *noiseScratch) {
	if amp == 0 || w <= 0 || h <= 0 {
		return
	}
	inv := 1 / f.scale
	lx0 := int(math.Floor(float64(x0)*inv + f.ox))
	lx1 := int(math.Floor(float64(x0+w-1)*inv+f.ox)) + 1
	ly0 := int(math.Floor(float64(y0)*inv + f.oy))
	ly1 := int(math.Floor(float64(y0+h-1)*inv+f.oy)) + 1
	nx, ny := lx1-lx0+1, ly1-ly0+1
	s.lattice = grow(s.lattice, nx*ny)
	for j := 0; j < ny; j++ {
		row := s.lattice[j*nx : (j+1)*nx]
		for i := range row {
			row[i] = latticeValue(f.seed, lx0+i, ly0+j)
		}
	}
	s.colIdx = growInt(s.colIdx, w)
	s.colW = grow(s.colW, w)
	for i := 0; i < w; i++ {
		u := float64(x0+i)*inv + f.ox
		iu := math.Floor(u)
		s.colIdx[i] = int(iu) - lx0
		s.colW[i] = fade(u - iu)
	}
	s.rowInt = grow(s.rowInt, nx)
	tmp := s.rowInt[:nx]
	colIdx, colW := s.colIdx[:w], s.colW[:w]
	for j := 0; j < h; j++ {
		v := float64(y0+j)*inv + f.oy
		iv := math.Floor(v)
		wv := fade(v - iv)
		k := int(iv) - ly0
		r0 := s.lattice[k*nx : (k+1)*nx]
		r1 := s.lattice[(k+1)*nx : (k+2)*nx]
		for i := range tmp {
			tmp[i] = r0[i] + wv*(r1[i]-r0[i])
		}
		out := dst[j*w : (j+1)*w]
		for i, ci := range colIdx {
			a, b := tmp[ci], tmp[ci+1]
			out[i] += amp * (a + colW[i]*(b-a))
		}
	}
}

func grow(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	return b[:n]
}

func growInt(b []int, n int) []int {
	if cap(b) < n {
		return make([]int, n)
	}
	return b[:n]
}
