package pathology

import "math"

// This file holds the two image transformations of seed 001's feature
// stage besides the gradient: Canny's edges (FeatGradient's edge share)
// and colour deconvolution (FeatIntensity's hematoxylin).

// Thresholds of the Canny edges, on the L1 Sobel magnitude of the grey
// image (as cv2.Canny(grey, cannyLow, cannyHigh)).
const (
	cannyLow  = 50
	cannyHigh = 150
)

// greyImage writes into g the grey image of the planar RGB image rgb of n
// pixels: (R+G+B)/3, rounded down.
func greyImage(rgb, g []uint8, n int) {
	r, gr, b, g := rgb[:n], rgb[n:2*n], rgb[2*n:3*n], g[:n]
	for i, v := range r {
		g[i] = uint8((uint(v) + uint(gr[i]) + uint(b[i])) / 3)
	}
}

// cannyTan22 is tan(22.5 degrees) in fixed point (15 bits), as OpenCV's
// Canny rounds it.
const cannyTan22 = 13573

// canny writes into edges 1 for the Canny edges of the w x h grey image
// g and 0 elsewhere: OpenCV's cv2.Canny(g, cannyLow, cannyHigh) (aperture
// 3, L1 magnitude). The Sobel derivatives replicate the border; a pixel
// is a candidate where its magnitude m exceeds cannyLow and is a maximum
// across the gradient (the direction quantised to 0, 45, 90 or 135
// degrees; m greater than the neighbour behind, at least the one ahead
// horizontally and vertically, greater than both diagonally; magnitudes
// outside the image 0); the edges are the candidates 8-connected through
// candidates to one whose magnitude exceeds cannyHigh. The magnitudes go
// into a buffer with a zero frame, so that the neighbours of any pixel
// are at fixed offsets; the derivatives are computed again where a
// pixel's magnitude passes cannyLow (a small share).
func canny(g, edges []uint8, w, h int) {
	n, W := w*h, w+2
	mag := make([]int16, W*(h+2))
	for y := range h {
		row := mag[(y+1)*W+1 : (y+1)*W+1+w]
		if y == 0 || y == h-1 || w < 3 {
			for x := range w {
				dx, dy := cannyD(g, w, h, x, y)
				row[x] = int16(abs32(dx) + abs32(dy))
			}
			continue
		}
		up := g[(y-1)*w : y*w]
		mid, down, row := g[y*w : (y+1)*w][:len(up)], g[(y+1)*w : (y+2)*w][:len(up)], row[:len(up)]
		for _, x := range [2]int{0, w - 1} {
			dx, dy := cannyD(g, w, h, x, y)
			row[x] = int16(abs32(dx) + abs32(dy))
		}
		// A window of three columns slides along the three rows.
		u0, u1, m0, d0, d1 := int32(up[0]), int32(up[1]), int32(mid[0]), int32(down[0]), int32(down[1])
		m1 := int32(mid[1])
		for x := 1; x+1 < len(up); x++ {
			u2, m2, d2 := int32(up[x+1]), int32(mid[x+1]), int32(down[x+1])
			dx := u2 + 2*m2 + d2 - u0 - 2*m0 - d0
			dy := d0 + 2*d1 + d2 - u0 - 2*u1 - u2
			row[x] = int16(abs32(dx) + abs32(dy))
			u0, u1, m0, m1, d0, d1 = u1, u2, m1, m2, d1, d2
		}
	}
	clear(edges[:n])
	var stack, cands []int32
	for y := range h {
		base := (y+1)*W + 1
		for x, m := range mag[base : base+w] {
			if m <= cannyLow {
				continue
			}
			v, i, p := int32(m), y*w+x, base+x
			var dx, dy int32
			if x > 0 && x < w-1 && y > 0 && y < h-1 {
				ul, um, ur := int32(g[i-w-1]), int32(g[i-w]), int32(g[i-w+1])
				ml, mr := int32(g[i-1]), int32(g[i+1])
				dl, dm, dr := int32(g[i+w-1]), int32(g[i+w]), int32(g[i+w+1])
				dx, dy = ur+2*mr+dr-ul-2*ml-dl, dl+2*dm+dr-ul-2*um-ur
			} else {
				dx, dy = cannyD(g, w, h, x, y)
			}
			var behind, ahead int // the neighbours across the gradient
			strict := false       // v must exceed the one ahead too
			switch cannyDir(dx, dy) {
			case 0:
				behind, ahead = p-1, p+1
			case 1:
				behind, ahead = p-W, p+W
			default:
				behind, ahead, strict = p-W-1, p+W+1, true
				if (dx ^ dy) < 0 {
					behind, ahead = p-W+1, p+W-1
				}
			}
			if v <= int32(mag[behind]) || v < int32(mag[ahead]) || strict && v == int32(mag[ahead]) {
				continue
			}
			edges[i] = 1 // a candidate
			cands = append(cands, int32(i))
			if v > cannyHigh {
				edges[i] = 2
				stack = append(stack, int32(i))
			}
		}
	}
	for len(stack) > 0 {
		i := int(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		x, y := i%w, i/w
		for yy := max(y-1, 0); yy <= min(y+1, h-1); yy++ {
			for xx := max(x-1, 0); xx <= min(x+1, w-1); xx++ {
				if j := yy*w + xx; edges[j] == 1 {
					edges[j] = 2
					stack = append(stack, int32(j))
				}
			}
		}
	}
	for _, i := range cands {
		edges[i] >>= 1
	}
}

// cannyD returns the Sobel derivatives of the w x h grey image g at
// (x, y), the border replicated.
func cannyD(g []uint8, w, h, x, y int) (dx, dy int32) {
	at := func(x, y int) int32 { return int32(g[min(max(y, 0), h-1)*w+min(max(x, 0), w-1)]) }
	a, b, c := at(x-1, y-1), at(x, y-1), at(x+1, y-1)
	d, f := at(x-1, y), at(x+1, y)
	p, q, r := at(x-1, y+1), at(x, y+1), at(x+1, y+1)
	return c + 2*f + r - a - 2*d - p, p + 2*q + r - a - 2*b - c
}

// cannyDir returns the direction of the gradient (xs, ys) as Canny
// quantises it: 0 horizontal, 1 vertical, 2 diagonal (OpenCV's fixed
// point tangents of 22.5 and 67.5 degrees).
func cannyDir(xs, ys int32) int {
	ax, ay := int64(abs32(xs)), int64(abs32(ys))<<15
	tg22x := ax * cannyTan22
	switch {
	case ay < tg22x:
		return 0
	case ay > tg22x+ax<<16:
		return 1
	}
	return 2
}

// abs32 returns |v| without a branch.
func abs32(v int32) int32 {
	s := v >> 31
	return (v ^ s) - s
}

// Colour deconvolution (Ruifrok and Johnston's, with their H&E-DAB stain
// vectors (0.65, 0.70, 0.29), (0.07, 0.99, 0.11) and (0.27, 0.57, 0.78)):
// a pixel's optical densities, -ln((c+1)/256) for each of its channels c,
// are a mix of the stains'; hemaR, hemaG and hemaB, the hematoxylin
// column of the inverse of the stain matrix (the vectors as rows), give a
// pixel's hematoxylin density as their dot product with its densities.
const (
	hemaR = 1.87798274
	hemaG = -0.06590806
	hemaB = -0.60190736
)

// opticalDensity returns -ln((c+1)/256), the optical density of channel
// value c.
func opticalDensity(c uint8) float64 { return -math.Log((float64(c) + 1) / 256) }

// hematoxylin returns the hematoxylin density of the pixel (r, g, b).
func hematoxylin(r, g, b uint8) float64 {
	return hemaR*opticalDensity(r) + hemaG*opticalDensity(g) + hemaB*opticalDensity(b)
}
