package main

import (
	"math"
	"math/rand/v2"
)

// This file holds small, real image kernels for the real-time run: a
// synthetic H&E-like tile generator and simplified versions of the
// segmentation and feature operations. They are deliberately cheap (the
// modelled costs of the simulated devices dominate) but compute real
// results, so that a run can be checked: every policy must find the same
// nuclei.

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

// rbcDetect marks red blood cells: strongly red, little green and blue.
func rbcDetect(rgb, out []uint8, n int) {
	for i := range n {
		if rgb[i] > 150 && rgb[n+i] < 80 && rgb[2*n+i] < 100 {
			out[i] = 1
		} else {
			out[i] = 0
		}
	}
}

// morphOpen computes the darkness image (255 - mean of RGB) and opens it
// with a 3x3 square: erosion (min) then dilation (max).
func morphOpen(rgb, out []uint8, w, h int) {
	n := w * h
	dark := make([]uint8, n)
	for i := range n {
		dark[i] = 255 - uint8((int(rgb[i])+int(rgb[n+i])+int(rgb[2*n+i]))/3)
	}
	eroded := make([]uint8, n)
	filter3(dark, eroded, w, h, func(a, b uint8) uint8 { return min(a, b) }, 255)
	filter3(eroded, out, w, h, func(a, b uint8) uint8 { return max(a, b) }, 0)
}

// filter3 applies a 3x3 reduction f with neutral element z.
func filter3(in, out []uint8, w, h int, f func(a, b uint8) uint8, z uint8) {
	for y := range h {
		for x := range w {
			acc := z
			for dy := -1; dy <= 1; dy++ {
				for dx := -1; dx <= 1; dx++ {
					xx, yy := x+dx, y+dy
					if xx >= 0 && xx < w && yy >= 0 && yy < h {
						acc = f(acc, in[yy*w+xx])
					}
				}
			}
			out[y*w+x] = acc
		}
	}
}

// reconToNuclei keeps dark regions that are not red blood cells.
func reconToNuclei(opened, rbc, out []uint8) {
	for i := range out {
		if opened[i] > 100 && rbc[i] == 0 {
			out[i] = 1
		} else {
			out[i] = 0
		}
	}
}

// areaThreshold drops isolated pixels: a pixel stays if at least 5 pixels
// of its 3x3 neighbourhood are set.
func areaThreshold(in, out []uint8, w, h int) {
	for y := range h {
		for x := range w {
			c := 0
			for dy := -1; dy <= 1; dy++ {
				for dx := -1; dx <= 1; dx++ {
					xx, yy := x+dx, y+dy
					if xx >= 0 && xx < w && yy >= 0 && yy < h && in[yy*w+xx] != 0 {
						c++
					}
				}
			}
			if in[y*w+x] != 0 && c >= 5 {
				out[y*w+x] = 1
			} else {
				out[y*w+x] = 0
			}
		}
	}
}

// fillHoles fills the holes of a mask: a morphological reconstruction of
// the outside, the background pixels 4-connected to the image border
// through background, found breadth-first; every other pixel is set.
func fillHoles(in, out []uint8, w, h int) {
	reach := make([]bool, w*h)
	queue := make([]int32, 0, 2*(w+h))
	seed := func(x, y int) {
		i := y*w + x
		if in[i] == 0 && !reach[i] {
			reach[i] = true
			queue = append(queue, int32(i))
		}
	}
	for x := range w {
		seed(x, 0)
		seed(x, h-1)
	}
	for y := range h {
		seed(0, y)
		seed(w-1, y)
	}
	for len(queue) > 0 {
		i := int(queue[len(queue)-1])
		queue = queue[:len(queue)-1]
		x, y := i%w, i/w
		if x > 0 {
			seed(x-1, y)
		}
		if x < w-1 {
			seed(x+1, y)
		}
		if y > 0 {
			seed(x, y-1)
		}
		if y < h-1 {
			seed(x, y+1)
		}
	}
	for i := range out {
		if in[i] != 0 || !reach[i] {
			out[i] = 1
		} else {
			out[i] = 0
		}
	}
}

// distanceTransform computes the city-block distance of each mask pixel to
// the background (two passes).
func distanceTransform(mask []uint8, dist []uint16, w, h int) {
	const inf = math.MaxUint16
	for i := range dist {
		if mask[i] != 0 {
			dist[i] = inf
		} else {
			dist[i] = 0
		}
	}
	for y := range h {
		for x := range w {
			i := y*w + x
			if dist[i] == 0 {
				continue
			}
			d := uint32(inf)
			if x > 0 {
				d = min(d, uint32(dist[i-1])+1)
			} else {
				d = 1
			}
			if y > 0 {
				d = min(d, uint32(dist[i-w])+1)
			} else {
				d = 1
			}
			dist[i] = uint16(min(d, inf))
		}
	}
	for y := h - 1; y >= 0; y-- {
		for x := w - 1; x >= 0; x-- {
			i := y*w + x
			if dist[i] == 0 {
				continue
			}
			d := uint32(dist[i])
			if x < w-1 {
				d = min(d, uint32(dist[i+1])+1)
			} else {
				d = 1
			}
			if y < h-1 {
				d = min(d, uint32(dist[i+w])+1)
			} else {
				d = 1
			}
			dist[i] = uint16(d)
		}
	}
}

// watershedCores keeps the cores of objects (distance >= 2), which splits
// objects touching through thin necks.
func watershedCores(dist []uint16, filled []uint8, out []uint16) {
	for i := range out {
		if filled[i] != 0 && dist[i] >= 2 {
			out[i] = 1
		} else {
			out[i] = 0
		}
	}
}

// bwLabel labels the 4-connected components of mask with 1, 2, ... using
// union-find, and returns the number of components.
func bwLabel(mask []uint16, labels []uint16, w, h int) int {
	parent := make([]int32, w*h)
	var find func(i int32) int32
	find = func(i int32) int32 {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for i := range parent {
		parent[i] = int32(i)
	}
	for y := range h {
		for x := range w {
			i := int32(y*w + x)
			if mask[i] == 0 {
				continue
			}
			if x > 0 && mask[i-1] != 0 {
				a, b := find(i), find(i-1)
				parent[max(a, b)] = min(a, b)
			}
			if y > 0 && mask[i-int32(w)] != 0 {
				a, b := find(i), find(i-int32(w))
				parent[max(a, b)] = min(a, b)
			}
		}
	}
	next := uint16(0)
	ids := map[int32]uint16{}
	for i := range labels {
		if mask[i] == 0 {
			labels[i] = 0
			continue
		}
		r := find(int32(i))
		id, ok := ids[r]
		if !ok && next < math.MaxUint16 {
			next++
			id = next
			ids[r] = id
		}
		labels[i] = id
	}
	return int(next)
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
