package pathology

// This file holds Vincent's morphological reconstruction (L. Vincent,
// "Morphological grayscale reconstruction in image analysis", IEEE TIP
// 1993), the hybrid algorithm: a raster and an anti-raster scan propagate
// the marker under the mask, then a FIFO queue of the pixels that can
// still spread finishes the propagation. Images are 8-connected; the
// marker and mask are copied into buffers with a one-pixel border of zeros,
// so that no neighbour needs a bounds check.

// reconstruct writes into out the reconstruction by dilation of marker
// under mask (w x h, 8-connectivity): the largest image <= mask whose
// regional maxima are those of min(marker, mask) it can reach, i.e. the
// limit of dilating min(marker, mask) by the 3x3 square and clipping by mask.
// out may be marker.
func reconstruct[T uint8 | uint16](marker, mask, out []T, w, h int) {
	W := w + 2
	J := make([]T, W*(h+2))
	I := make([]T, W*(h+2))
	for y := range h {
		jr, ir := J[(y+1)*W+1:(y+1)*W+1+w], I[(y+1)*W+1:(y+1)*W+1+w]
		copy(ir, mask[y*w:(y+1)*w])
		mr := marker[y*w : (y+1)*w]
		for x, m := range mr {
			jr[x] = min(m, ir[x])
		}
	}
	// Raster scan: the neighbours before the pixel. Where the mask is 0,
	// so is the result (and such a pixel raises no neighbour): skipped,
	// which makes sparse masks cheap.
	for y := 1; y <= h; y++ {
		for i := y*W + 1; i <= y*W+w; i++ {
			if I[i] == 0 {
				continue
			}
			v := max(J[i], J[i-1], J[i-W-1], J[i-W], J[i-W+1])
			J[i] = min(v, I[i])
		}
	}
	// Anti-raster scan: the neighbours after the pixel; a pixel that could
	// still raise one of them goes into the queue.
	var queue []int32
	for y := h; y >= 1; y-- {
		for i := y*W + w; i >= y*W+1; i-- {
			if I[i] == 0 {
				continue
			}
			v := min(max(J[i], J[i+1], J[i+W-1], J[i+W], J[i+W+1]), I[i])
			J[i] = v
			if (J[i+1] < v && J[i+1] < I[i+1]) || (J[i+W-1] < v && J[i+W-1] < I[i+W-1]) ||
				(J[i+W] < v && J[i+W] < I[i+W]) || (J[i+W+1] < v && J[i+W+1] < I[i+W+1]) {
				queue = append(queue, int32(i))
			}
		}
	}
	offs := [8]int{-W - 1, -W, -W + 1, -1, 1, W - 1, W, W + 1}
	for head := 0; head < len(queue); head++ {
		p := int(queue[head])
		v := J[p]
		for _, o := range offs {
			q := p + o
			if J[q] < v && J[q] != I[q] {
				J[q] = min(v, I[q])
				queue = append(queue, int32(q))
			}
		}
		if head > 1<<16 && head > len(queue)/2 { // drop the consumed half
			queue = queue[:copy(queue, queue[head+1:])]
			head = -1
		}
	}
	for y := range h {
		copy(out[y*w:(y+1)*w], J[(y+1)*W+1:(y+1)*W+1+w])
	}
}

// RBC thresholds: a seed is strongly red; the cell around it is reddish.
func rbcSeed(r, g, b uint8) bool  { return r > 150 && g < 80 && b < 100 }
func rbcLoose(r, g, b uint8) bool { return r > 120 && g < 110 && b < 130 }

// rbcDetect marks the red blood cells of the planar RGB w x h image: the
// 8-connected reddish regions (R > 120, G < 110, B < 130) that hold a
// strongly red pixel (R > 150, G < 80, B < 100), found by binary
// morphological reconstruction of the strong pixels under the reddish
// ones. out gets 1 for a red-blood-cell pixel, 0 elsewhere.
func rbcDetect(rgb, out []uint8, w, h int) {
	n := w * h
	R, G, B := rgb[:n], rgb[n:2*n], rgb[2*n:3*n]
	seed, loose := make([]uint8, n), make([]uint8, n)
	for i := range n {
		r, g, b := R[i], G[i], B[i]
		if rbcLoose(r, g, b) {
			loose[i] = 1
			if rbcSeed(r, g, b) {
				seed[i] = 1
			}
		}
	}
	reconstruct(seed, loose, out, w, h)
}

// candidateThreshold is the least height, in darkness levels, of a
// nucleus candidate above the reconstructed background.
const candidateThreshold = 50

// reconToNuclei finds the nucleus candidates: the darkness image minus its
// opening by reconstruction (the reconstruction of the opened image under
// the darkness image, which restores the structures the disk fits in and
// removes the smaller dark blobs), at least candidateThreshold, outside
// the red blood cells. out gets 1 for a candidate pixel, 0 elsewhere.
func reconToNuclei(rgb, opened, rbc, out []uint8, w, h int) {
	n := w * h
	dark, rec := make([]uint8, n), make([]uint8, n)
	darkness(rgb, dark, n)
	reconstruct(opened, dark, rec, w, h)
	for i := range out[:n] {
		if int(dark[i])-int(rec[i]) >= candidateThreshold && rbc[i] == 0 {
			out[i] = 1
		} else {
			out[i] = 0
		}
	}
}
