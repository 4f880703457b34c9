package main

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
// Only the mask's pixels are visited after one scan of the image.
func watershed(dist []uint16, filled []uint8, out []uint16, w, h int) {
	n := w * h
	var pix []int32 // the mask's pixels, in raster order
	maxF := uint16(0)
	for i, m := range filled[:n] {
		if m != 0 {
			pix = append(pix, int32(i))
			maxF = max(maxF, min(dist[i], 0xfffe)+1)
		}
	}
	clear(out[:n])
	if len(pix) == 0 {
		return
	}
	fl := &flooder{w: w, h: h, dist: dist, filled: filled, state: make([]int32, n), maxF: maxF}
	fl.markers(pix)
	fl.levels = make([][]int32, int(maxF)+1)
	fl.pos = make([]int, int(maxF)+1)
	fl.cur = len(fl.levels)
	for _, p := range pix {
		if fl.state[p] > 0 {
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
		fl.state[p] = lab
		if lab > 0 {
			fl.pushNeighbours(p)
		}
	}
	for _, p := range pix {
		if fl.state[p] > 0 {
			out[p] = 1
		}
	}
}

// flooder is the state of a flooding: each pixel's state (a basin label or
// one of the states above) and the hierarchical queue, a FIFO per level
// maxF - f (the highest f first).
type flooder struct {
	w, h   int
	dist   []uint16
	filled []uint8
	state  []int32
	maxF   uint16
	levels [][]int32 // per level, the queued pixels; pos[k] is the next one out
	pos    []int
	cur    int // no level below cur holds a pixel
}

// f returns the relief at mask pixel p.
func (fl *flooder) f(p int) uint16 { return min(fl.dist[p], 0xfffe) + 1 }

// neighbours returns the in-image 8-neighbours of p into buf.
func (fl *flooder) neighbours(p int, buf *[8]int) []int {
	w, h := fl.w, fl.h
	x, y := p%w, p/w
	k := 0
	for dy := -1; dy <= 1; dy++ {
		yy := y + dy
		if yy < 0 || yy >= h {
			continue
		}
		for dx := -1; dx <= 1; dx++ {
			xx := x + dx
			if xx < 0 || xx >= w || (dx == 0 && dy == 0) {
				continue
			}
			buf[k] = yy*w + xx
			k++
		}
	}
	return buf[:k]
}

// markers labels the regional maxima of the relief among the mask pixels
// pix (raster order): the pixels below a neighbour and the plateaus they
// are on are marked notPeak, the rest labelled plateau by plateau; then
// the notPeak marks are cleared.
func (fl *flooder) markers(pix []int32) {
	var buf [8]int
	st := fl.state
	var stack []int32
	for _, p := range pix {
		v := fl.f(int(p))
		for _, q := range fl.neighbours(int(p), &buf) {
			if fl.filled[q] != 0 && fl.f(q) > v {
				st[p] = notPeak
				stack = append(stack, p)
				break
			}
		}
	}
	for len(stack) > 0 {
		p := int(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		v := fl.f(p)
		for _, q := range fl.neighbours(p, &buf) {
			if st[q] == free && fl.filled[q] != 0 && fl.f(q) == v {
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
			for _, q := range fl.neighbours(p, &buf) {
				if st[q] == free && fl.filled[q] != 0 {
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
	var buf [8]int
	lab := int32(0)
	for _, q := range fl.neighbours(p, &buf) {
		b := fl.state[q]
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
	var buf [8]int
	for _, q := range fl.neighbours(p, &buf) {
		if fl.filled[q] == 0 || fl.state[q] != free {
			continue
		}
		k := int(fl.maxF - fl.f(q))
		fl.levels[k] = append(fl.levels[k], int32(q))
		fl.state[q] = queued
		fl.cur = min(fl.cur, k)
	}
}
