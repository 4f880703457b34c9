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
// Vincent's hybrid scheme on a state image with a frame of outside pixels:
// a raster scan (which also builds the states) and an anti-raster scan
// (which also writes out), then a FIFO queue of the outside pixels next
// to background not yet reached, rare, which corrects out.
func fillHoles(in, out []uint8, w, h int) {
	// States: fg 0, background not reached 1, outside 3 (bit 1: outside).
	const bg, outside = 1, 3
	W := w + 2
	s := make([]uint8, W*(h+2))
	for i := range s[:W] {
		s[i] = outside
		s[len(s)-W+i] = outside
	}
	for y := 1; y <= h; y++ {
		r, up := s[y*W:(y+1)*W], s[(y-1)*W:y*W]
		r[0], r[W-1] = outside, outside
		src := in[(y-1)*w : y*w]
		for x, v := range src {
			b := uint8(0)
			if v == 0 {
				b = bg
			}
			r[x+1] = b | (b&((r[x]|up[x+1])>>1))<<1
		}
	}
	var queue []int32
	for y := h; y >= 1; y-- {
		r, down, o := s[y*W:(y+1)*W], s[(y+1)*W:(y+2)*W], out[(y-1)*w:y*w]
		for x := w; x >= 1; x-- {
			t := r[x]
			nb := r[x+1] | down[x]
			t |= (t & (nb >> 1)) << 1
			r[x] = t
			o[x-1] = 1 - t>>1
			if t == outside && (r[x+1] == bg || down[x] == bg) {
				queue = append(queue, int32(y*W+x))
			}
		}
	}
	for head := 0; head < len(queue); head++ {
		p := int(queue[head])
		for _, q := range [4]int{p - 1, p + 1, p - W, p + W} {
			if s[q] == bg {
				s[q] = outside
				out[(q/W-1)*w+q%W-1] = 0
				queue = append(queue, int32(q))
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
