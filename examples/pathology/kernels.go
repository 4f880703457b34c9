package main

import (
	"math"
	"math/rand/v2"
)

// This file holds a synthetic H&E-like tile generator, FillHoles and the
// feature operations. The other segmentation operations, as Table I of
// seed 001 defines them, are in morph.go (MorphOpen), recon.go (Vincent's
// reconstruction: RBCDetection, ReconToNuclei), label.go (AreaThreshold,
// BWLabel), edt.go (PreWatershed) and watershed.go (Watershed). They
// compute real results, so that a run can be checked: every policy must
// find the same nuclei.

// genTile fills planar RGB data (3 planes of w*h bytes) with a pink
// background, dark purple nuclei and a few red blood cells, deterministic
// in (seed, tile).
func genTile(rgb []uint8, w, h int, seed uint64, tile int) {
	r := rand.New(rand.NewPCG(seed, uint64(tile)+1<<32))
	R, G, B := rgb[:w*h], rgb[w*h:2*w*h], rgb[2*w*h:]
	for i := range w * h {
		R[i], G[i], B[i] = 235, 190+uint8(r.IntN(10)), 215
	}
	disc := func(cx, cy, rad int, cr, cg, cb uint8) {
		for y := max(0, cy-rad); y < min(h, cy+rad+1); y++ {
			for x := max(0, cx-rad); x < min(w, cx+rad+1); x++ {
				if (x-cx)*(x-cx)+(y-cy)*(y-cy) <= rad*rad {
					i := y*w + x
					R[i], G[i], B[i] = cr, cg, cb
				}
			}
		}
	}
	nuclei := 4 + r.IntN(max(1, w*h/1500))
	for range nuclei {
		disc(r.IntN(w), r.IntN(h), 3+r.IntN(5), 70, 40, 120)
	}
	for range 1 + r.IntN(3) {
		disc(r.IntN(w), r.IntN(h), 3+r.IntN(3), 200, 30, 40)
	}
}

// fillHoles fills the holes of a mask: a morphological reconstruction of
// the outside, the background pixels 4-connected to the image border
// through background; every other pixel is set (out 1, the outside 0).
// Vincent's hybrid scheme on a copy with a border of outside pixels: a
// raster and an anti-raster scan, then a FIFO queue of the outside pixels
// next to background not yet reached.
func fillHoles(in, out []uint8, w, h int) {
	const fg, bg, outside = 0, 1, 2
	W := w + 2
	s := make([]uint8, W*(h+2))
	for i := range s[:W] {
		s[i] = outside
		s[len(s)-W+i] = outside
	}
	for y := range h {
		r := s[(y+1)*W : (y+2)*W]
		r[0], r[W-1] = outside, outside
		for x, v := range in[y*w : (y+1)*w] {
			if v == 0 {
				r[x+1] = bg
			} else {
				r[x+1] = fg
			}
		}
	}
	for i := W + 1; i < len(s)-W-1; i++ {
		if s[i] == bg && (s[i-1] == outside || s[i-W] == outside) {
			s[i] = outside
		}
	}
	var queue []int32
	for i := len(s) - W - 2; i > W; i-- {
		if s[i] == bg && (s[i+1] == outside || s[i+W] == outside) {
			s[i] = outside
		}
		if s[i] == outside && (s[i+1] == bg || s[i+W] == bg) {
			queue = append(queue, int32(i))
		}
	}
	for len(queue) > 0 {
		p := int(queue[len(queue)-1])
		queue = queue[:len(queue)-1]
		for _, q := range [4]int{p - 1, p + 1, p - W, p + W} {
			if s[q] == bg {
				s[q] = outside
				queue = append(queue, int32(q))
			}
		}
	}
	for y := range h {
		r, o := s[(y+1)*W+1:(y+1)*W+1+w], out[y*w:(y+1)*w]
		for x, v := range r {
			if v == outside {
				o[x] = 0
			} else {
				o[x] = 1
			}
		}
	}
}

// maxObjects bounds the rows of the feature tables.
const maxObjects = 256

// Feature table columns.
const (
	featArea = iota
	featMean
	featGrad
	featPerim
	numFeatures
)

// intensityFeatures writes the area and mean darkness of each object.
func intensityFeatures(rgb []uint8, labels []uint16, out []float64) {
	n := len(labels)
	for i, l := range labels {
		if l == 0 || int(l) > maxObjects {
			continue
		}
		row := (int(l) - 1) * numFeatures
		out[row+featArea]++
		out[row+featMean] += 255 - float64(int(rgb[i])+int(rgb[n+i])+int(rgb[2*n+i]))/3
	}
	for r := range maxObjects {
		if a := out[r*numFeatures+featArea]; a > 0 {
			out[r*numFeatures+featMean] /= a
		}
	}
}

// gradientFeatures writes the mean Sobel gradient magnitude of each object.
func gradientFeatures(rgb []uint8, labels []uint16, out []float64, w, h int) {
	n := w * h
	gray := func(x, y int) float64 {
		x, y = min(max(x, 0), w-1), min(max(y, 0), h-1)
		i := y*w + x
		return float64(int(rgb[i])+int(rgb[n+i])+int(rgb[2*n+i])) / 3
	}
	area := make([]float64, maxObjects)
	for y := range h {
		for x := range w {
			l := labels[y*w+x]
			if l == 0 || int(l) > maxObjects {
				continue
			}
			gx := gray(x+1, y-1) + 2*gray(x+1, y) + gray(x+1, y+1) - gray(x-1, y-1) - 2*gray(x-1, y) - gray(x-1, y+1)
			gy := gray(x-1, y+1) + 2*gray(x, y+1) + gray(x+1, y+1) - gray(x-1, y-1) - 2*gray(x, y-1) - gray(x+1, y-1)
			out[(int(l)-1)*numFeatures+featGrad] += math.Hypot(gx, gy)
			area[l-1]++
		}
	}
	for r, a := range area {
		if a > 0 {
			out[r*numFeatures+featGrad] /= a
		}
	}
}

// morphometryFeatures writes the perimeter (pixels with a background
// 4-neighbour) of each object.
func morphometryFeatures(labels []uint16, out []float64, w, h int) {
	for y := range h {
		for x := range w {
			l := labels[y*w+x]
			if l == 0 || int(l) > maxObjects {
				continue
			}
			edge := x == 0 || y == 0 || x == w-1 || y == h-1 ||
				labels[y*w+x-1] != l || labels[y*w+x+1] != l || labels[(y-1)*w+x] != l || labels[(y+1)*w+x] != l
			if edge {
				out[(int(l)-1)*numFeatures+featPerim]++
			}
		}
	}
}
