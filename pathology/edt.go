package pathology

import "math"

// This file holds PreWatershed: the exact Euclidean distance transform of
// the filled mask (Meijster, Roerdink and Hesselink's two-phase algorithm,
// the same distances as OpenCV's distanceTransform with DIST_L2 and
// DIST_MASK_PRECISE, and equal to or better than Danielsson's), followed
// by Vincent's reconstruction to flatten the maxima lower than one pixel
// (the h-maxima transform that keeps the watershed from cutting a nucleus
// at every bump of its distance map).

// distScale is the fixed point of the distance maps: a distance of one
// pixel is distScale (eighths of a pixel, rounded).
const distScale = 8

// distSat is the saturated distance (no background pixel in the image).
const distSat = math.MaxUint16

// distanceTransform writes into dist, for each pixel of mask that is not
// zero, its Euclidean distance to the nearest zero pixel of the image, in
// eighths of a pixel rounded to nearest (distSat when the image has no zero
// pixel or the value does not fit); zero pixels get 0. Pixels outside the
// image are not background.
func distanceTransform(mask []uint8, dist []uint16, w, h int) {
	inf := int32(w + h + 1) // more than any distance along a column or row
	g := make([]int32, w*h)
	// Phase 1: distance to the nearest zero in the same column, by a
	// downward and an upward pass (row by row, for the memory).
	for x := range w {
		if mask[x] == 0 {
			g[x] = 0
		} else {
			g[x] = inf
		}
	}
	for y := 1; y < h; y++ {
		mr, gr, up := mask[y*w:(y+1)*w], g[y*w:(y+1)*w], g[(y-1)*w:y*w]
		for x, m := range mr {
			if m == 0 {
				gr[x] = 0
			} else {
				gr[x] = min(up[x]+1, inf)
			}
		}
	}
	for y := h - 2; y >= 0; y-- {
		gr, down := g[y*w:(y+1)*w], g[(y+1)*w:(y+2)*w]
		for x, v := range gr {
			if d := down[x] + 1; d < v {
				gr[x] = d
			}
		}
	}
	// Phase 2: per row, the lower envelope of the parabolas
	// (x-i)^2 + g(i)^2, scanned left to right.
	s := make([]int32, w) // apexes of the envelope's parabolas
	t := make([]int32, w) // where each starts to be the lowest
	var lut [1 << 12]uint16
	for d2 := range lut {
		lut[d2] = uint16(math.Round(distScale * math.Sqrt(float64(d2))))
	}
	inf2 := int64(inf) * int64(inf)
	for y := range h {
		gr, dr := g[y*w:(y+1)*w], dist[y*w:(y+1)*w]
		zero := true
		for _, v := range gr {
			if v != 0 {
				zero = false
				break
			}
		}
		if zero {
			clear(dr)
			continue
		}
		q := 0
		s[0], t[0] = 0, 0
		for u := 1; u < w; u++ {
			gu := int64(gr[u])
			for q >= 0 {
				si := int64(s[q])
				gi := int64(gr[si])
				fq := (int64(t[q])-si)*(int64(t[q])-si) + gi*gi
				fu := (int64(t[q])-int64(u))*(int64(t[q])-int64(u)) + gu*gu
				if fq <= fu {
					break
				}
				q--
			}
			if q < 0 {
				q = 0
				s[0], t[0] = int32(u), 0
				continue
			}
			// sep: the first x where u's parabola is below s[q]'s.
			si := int64(s[q])
			gi := int64(gr[si])
			num := int64(u)*int64(u) - si*si + gu*gu - gi*gi
			den := 2 * (int64(u) - si)
			sep := num / den
			if num%den != 0 && num < 0 {
				sep-- // floor
			}
			sep++
			if sep < int64(w) {
				q++
				s[q], t[q] = int32(u), int32(max(sep, 0))
			}
		}
		for u := w - 1; u >= 0; u-- {
			if gr[u] == 0 {
				dr[u] = 0
			} else {
				si := int64(s[q])
				gi := int64(gr[si])
				d2 := (int64(u)-si)*(int64(u)-si) + gi*gi
				switch {
				case d2 >= inf2:
					dr[u] = distSat
				case d2 < int64(len(lut)):
					dr[u] = lut[d2]
				default:
					dr[u] = uint16(min(math.Round(distScale*math.Sqrt(float64(d2))), distSat))
				}
			}
			if u == int(t[q]) {
				q--
			}
		}
	}
}

// hMaxHeight is the height of the maxima PreWatershed flattens: one pixel.
const hMaxHeight = distScale

// preWatershed writes into out the distance map of filled (see
// distanceTransform) with its maxima lower than hMaxHeight flattened: the
// reconstruction by dilation of the distance minus hMaxHeight under the
// distance (the h-maxima transform).
func preWatershed(filled []uint8, out []uint16, w, h int) {
	n := w * h
	dist := make([]uint16, n)
	distanceTransform(filled, dist, w, h)
	marker := make([]uint16, n)
	for i, d := range dist {
		marker[i] = d - min(d, hMaxHeight)
	}
	reconstruct(marker, dist, out, w, h)
}
