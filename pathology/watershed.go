package pathology

import "encoding/binary"

// This file holds the marker-based Watershed (Meyer's flooding, the
// algorithm of OpenCV's watershed): the markers are the regional maxima of
// PreWatershed's map inside the filled mask, each 8-connected maximum one
// marker; the basins grow from them through the mask, highest value first
// (a hierarchical queue: one FIFO per value), and a pixel reached by two
// basins becomes a watershed line and stops the flooding there.

// regionalMaxima writes into out 1 for each pixel of the regional maxima
// of f (the 8-connected plateaus with no higher neighbour) where f > 0, 0
// elsewhere: f - R(f-1, f) > 0, R the reconstruction by dilation.
func regionalMaxima(f []uint16, out []uint8, w, h int) {
	n := w * h
	lower := make([]uint16, n)
	for i, v := range f[:n] {
		lower[i] = v - min(v, 1)
	}
	reconstruct(lower, f, lower, w, h)
	for i, v := range f[:n] {
		if v > lower[i] {
			out[i] = 1
		} else {
			out[i] = 0
		}
	}
}

// Pixel states of a flooding, beside the basin labels 1, 2, ...
const (
	line    = -1 // a watershed line
	queued  = -2 // in the hierarchical queue
	notPeak = -3 // (finding the markers) on a plateau with a higher neighbour
	outMask = -4 // not in the mask (the frame around the image included)
	free    = 0  // none of the above
)

// watershed floods the relief of PreWatershed's map dist inside the mask
// filled from its regional maxima and writes into out 1 for the pixels of
// the basins and 0 for the background, the watershed lines and any mask
// pixel no basin reached. Two different basins are never 8-adjacent: the
// lines separate them under 4- and 8-connectivity. The markers are the
// 8-connected plateaus of the relief f = dist+1 (inside the mask; 0
// outside) with no higher neighbour, labelled in the raster order of their
// first pixel; a basin takes the pixels of the mask in the order of the
// hierarchical queue: the highest f first, first in, first out at a level.
// After one scan of the image, which copies the relief into a buffer with
// a one-pixel frame (so that neighbours need no bounds checks) and skips
// the background eight pixels at a time, only the mask's pixels are
// visited.
func watershed(dist []uint16, filled []uint8, out []uint16, w, h int) {
	W := w + 2
	fl := &flooder{W: W, f: make([]uint16, W*(h+2)), state: make([]int32, W*(h+2))}
	fl.off = [8]int{-W - 1, -W, -W + 1, -1, 1, W - 1, W, W + 1}
	var pix, at []int32 // the mask's pixels in raster order: index in the frame, in the image
	st := fl.state
	outRow := st[:W] // the top frame row, then the model of every row
	for i := range outRow {
		outRow[i] = outMask
	}
	copy(st[len(st)-W:], outRow)
	for y := range h {
		fr, sr := fl.f[(y+1)*W:(y+2)*W], st[(y+1)*W:(y+2)*W]
		copy(sr, outRow) // outside the mask, but for the mask's pixels below
		row := filled[y*w : (y+1)*w]
		for x := 0; x < w; {
			if x+8 <= w && binary.LittleEndian.Uint64(row[x:]) == 0 {
				x += 8 // eight pixels of background: the mask is sparse
				continue
			}
			if row[x] != 0 {
				v := relief(dist[y*w+x])
				fr[x+1], sr[x+1] = v, free
				fl.maxF = max(fl.maxF, v)
				pix = append(pix, int32((y+1)*W+x+1))
				at = append(at, int32(y*w+x))
			}
			x++
		}
	}
	clear(out[:w*h])
	if len(pix) == 0 {
		return
	}
	fl.markers(pix)
	fl.levels = make([][]int32, int(fl.maxF)+1)
	fl.pos = make([]int, int(fl.maxF)+1)
	fl.cur = len(fl.levels)
	for _, p := range pix {
		if st[p] > 0 {
			fl.pushNeighbours(int(p))
		}
	}
	for fl.cur < len(fl.levels) {
		k := fl.cur
		if fl.pos[k] == len(fl.levels[k]) {
			fl.levels[k], fl.pos[k] = fl.levels[k][:0], 0
			fl.cur++
			continue
		}
		p := int(fl.levels[k][fl.pos[k]])
		fl.pos[k]++
		// The label of the basins around p: one, or a line.
		lab := fl.around(p)
		st[p] = lab
		if lab > 0 {
			fl.pushNeighbours(p)
		}
	}
	for k, p := range pix {
		if st[p] > 0 {
			out[at[k]] = 1
		}
	}
}

// relief returns the relief the watershed floods at a mask pixel of
// PreWatershed's distance d: d+1 (saturated), so that 0 is left for the
// pixels outside the mask.
func relief(d uint16) uint16 { return min(d, 0xfffe) + 1 }

// flooder is the state of a flooding on an image with a one-pixel frame
// (rows of W pixels): each pixel's relief and state (a basin label or one
// of the states above) and the hierarchical queue, a FIFO per level
// maxF - f (the highest f first).
type flooder struct {
	W      int
	off    [8]int // the offsets of the 8 neighbours
	f      []uint16
	state  []int32
	maxF   uint16
	levels [][]int32 // per level, the queued pixels; pos[k] is the next one out
	pos    []int
	cur    int // no level below cur holds a pixel
}

// markers labels the regional maxima of the relief among the mask pixels
// pix (raster order): the pixels below a neighbour and the plateaus they
// are on are marked notPeak, the rest labelled plateau by plateau; then
// the notPeak marks are cleared.
func (fl *flooder) markers(pix []int32) {
	st, f := fl.state, fl.f
	var stack []int32
	for _, p := range pix {
		v := f[p]
		for _, o := range fl.off {
			if f[int(p)+o] > v { // outside the mask f is 0
				st[p] = notPeak
				stack = append(stack, p)
				break
			}
		}
	}
	for len(stack) > 0 {
		p := int(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		v := f[p]
		for _, o := range fl.off {
			if q := p + o; st[q] == free && f[q] == v {
				st[q] = notPeak
				stack = append(stack, int32(q))
			}
		}
	}
	n := int32(0)
	for _, s := range pix {
		if st[s] != free {
			continue
		}
		n++
		st[s] = n
		stack = append(stack[:0], s)
		for len(stack) > 0 {
			p := int(stack[len(stack)-1])
			stack = stack[:len(stack)-1]
			for _, o := range fl.off {
				if q := p + o; st[q] == free {
					st[q] = n
					stack = append(stack, int32(q))
				}
			}
		}
	}
	for _, p := range pix {
		if st[p] == notPeak {
			st[p] = free
		}
	}
}

// around returns the one basin label among p's neighbours, or line if
// there are several (0 if none).
func (fl *flooder) around(p int) int32 {
	lab := int32(0)
	for _, o := range fl.off {
		b := fl.state[p+o]
		if b <= 0 {
			continue
		}
		if lab == 0 {
			lab = b
		} else if b != lab {
			return line
		}
	}
	return lab
}

// pushNeighbours queues the mask neighbours of p that are in no basin,
// line or queue, at their levels.
func (fl *flooder) pushNeighbours(p int) {
	for _, o := range fl.off {
		q := p + o
		if fl.state[q] != free {
			continue
		}
		k := int(fl.maxF - fl.f[q])
		fl.levels[k] = append(fl.levels[k], int32(q))
		fl.state[q] = queued
		fl.cur = min(fl.cur, k)
	}
}
