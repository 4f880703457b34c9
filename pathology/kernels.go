package pathology

import (
	"bytes"
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
// in (seed, tile), and returns the number of nuclei it drew (between 4
// and w*h/1500, uniformly: tiles differ widely in content).
func genTile(rgb []uint8, w, h int, seed uint64, tile int) int {
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
	return nuclei
}

// fillHoles fills the holes of a mask: a morphological reconstruction of
// the outside, the background pixels 4-connected to the image border
// through background; every other pixel is set (out 1, the outside 0).
// The reconstruction works on runs of background along the rows, in
// raster and anti-raster scans as in Vincent's hybrid scheme: a run is
// outside when it touches the border or a run outside in the row before
// (above in a raster scan, below in an anti-raster one); the scans repeat
// until one changes nothing (two or three, unless the background winds
// up and down).
func fillHoles(in, out []uint8, w, h int) {
	// States: fg 0, background not reached 1, outside 3.
	const bg, outside = 1, 3
	n := w * h
	s := make([]uint8, n)
	for i, v := range in[:n] {
		b := uint8(0)
		if v == 0 {
			b = bg
		}
		s[i] = b
	}
	fill := bytes.Repeat([]byte{outside}, w)
	// scan marks the runs of row y reached from row nb (-1: none) and
	// reports whether it marked any.
	scan := func(y, nb int) bool {
		r := s[y*w : (y+1)*w]
		var near []uint8
		if nb >= 0 {
			near = s[nb*w : (nb+1)*w]
		}
		changed := false
		for x := 0; x < w; {
			a := bytes.IndexByte(r[x:], bg)
			if a < 0 {
				break
			}
			a += x
			e := bytes.IndexByte(r[a:], 0)
			if e < 0 {
				e = w
			} else {
				e += a
			}
			if o := bytes.IndexByte(r[a:e], outside); o >= 0 { // the run ends at an outside pixel
				e = a + o
			}
			if y == 0 || y == h-1 || a == 0 || e == w || (a > 0 && r[a-1] == outside) || (e < w && r[e] == outside) ||
				(near != nil && bytes.IndexByte(near[a:e], outside) >= 0) {
				copy(r[a:e], fill)
				changed = true
			}
			x = e
		}
		return changed
	}
	for pass, changed := 0, true; changed; pass++ {
		changed = false
		if pass%2 == 0 {
			for y := range h {
				changed = scan(y, y-1) || changed
			}
		} else {
			for y := h - 1; y >= 0; y-- {
				nb := y + 1
				if nb == h {
					nb = -1
				}
				changed = scan(y, nb) || changed
			}
		}
	}
	for i, v := range s {
		out[i] = 1 - v>>1
	}
}

// maxLabels is the most objects a tile's 16-bit labels number.
const maxLabels = 65535

// objectRows returns the rows of a size x size tile's feature tables: one
// for every label the tile can hold, so that every nucleus has its
// features: at most maxLabels, and no more components than its pixels
// can separate ((size*size+1)/2, a checkerboard's 4-connected ones).
func objectRows(size int) int { return min(maxLabels, (size*size+1)/2) }

// Feature table columns: FeatIntensity's area, mean darkness and mean
// hematoxylin density (colour deconvolution), FeatGradient's mean Sobel
// magnitude and share of pixels on a Canny edge, FeatMorphometry's
// perimeter.
const (
	featArea = iota
	featMean
	featGrad
	featPerim
	featHema
	featEdge
	numFeatures
)

// intensityFeatures writes the area, mean darkness and mean hematoxylin
// density of each object into out, a row of numFeatures per label
// (labels past its rows are left out).
func intensityFeatures(rgb []uint8, labels []uint16, out []float64) {
	n, rows := len(labels), len(out)/numFeatures
	var od [256]float64
	for c := range od {
		od[c] = opticalDensity(uint8(c))
	}
	for i, l := range labels {
		if l == 0 || int(l) > rows {
			continue
		}
		row := (int(l) - 1) * numFeatures
		r, g, b := rgb[i], rgb[n+i], rgb[2*n+i]
		out[row+featArea]++
		out[row+featMean] += 255 - float64(int(r)+int(g)+int(b))/3
		out[row+featHema] += hemaR*od[r] + hemaG*od[g] + hemaB*od[b]
	}
	for r := range rows {
		if a := out[r*numFeatures+featArea]; a > 0 {
			out[r*numFeatures+featMean] /= a
			out[r*numFeatures+featHema] /= a
		}
	}
}

// gradientFeatures writes the mean Sobel gradient magnitude of each
// object and the share of its pixels on a Canny edge of the grey image.
func gradientFeatures(rgb []uint8, labels []uint16, out []float64, w, h int) {
	grey, edges := make([]uint8, w*h), make([]uint8, w*h)
	greyImage(rgb, grey, w*h)
	canny(grey, edges, w, h)
	area := make([]float64, len(out)/numFeatures)
	for y := range h {
		for x := range w {
			l := labels[y*w+x]
			if l == 0 || int(l) > len(area) {
				continue
			}
			row := (int(l) - 1) * numFeatures
			out[row+featGrad] += sobelAt(rgb, w, h, x, y)
			out[row+featEdge] += float64(edges[y*w+x])
			area[l-1]++
		}
	}
	for r, a := range area {
		if a > 0 {
			out[r*numFeatures+featGrad] /= a
			out[r*numFeatures+featEdge] /= a
		}
	}
}

// grayAt returns the mean of RGB at (x, y) of the planar w x h image rgb,
// the coordinates clamped into the image.
func grayAt(rgb []uint8, w, h, x, y int) float64 {
	n := w * h
	x, y = min(max(x, 0), w-1), min(max(y, 0), h-1)
	i := y*w + x
	return float64(int(rgb[i])+int(rgb[n+i])+int(rgb[2*n+i])) / 3
}

// sobelAt returns the Sobel gradient magnitude of the grey image at (x, y).
func sobelAt(rgb []uint8, w, h, x, y int) float64 {
	gx := grayAt(rgb, w, h, x+1, y-1) + 2*grayAt(rgb, w, h, x+1, y) + grayAt(rgb, w, h, x+1, y+1) -
		grayAt(rgb, w, h, x-1, y-1) - 2*grayAt(rgb, w, h, x-1, y) - grayAt(rgb, w, h, x-1, y+1)
	gy := grayAt(rgb, w, h, x-1, y+1) + 2*grayAt(rgb, w, h, x, y+1) + grayAt(rgb, w, h, x+1, y+1) -
		grayAt(rgb, w, h, x-1, y-1) - 2*grayAt(rgb, w, h, x, y-1) - grayAt(rgb, w, h, x+1, y-1)
	return math.Hypot(gx, gy)
}

// morphometryFeatures writes the perimeter (pixels with a background
// 4-neighbour) of each object.
func morphometryFeatures(labels []uint16, out []float64, w, h int) {
	rows := len(out) / numFeatures
	for y := range h {
		for x := range w {
			l := labels[y*w+x]
			if l == 0 || int(l) > rows {
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
