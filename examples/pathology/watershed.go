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

// watershed floods the relief of PreWatershed's map dist inside the mask
// filled from its regional maxima and writes into out 1 for the pixels of
// the basins and 0 for the background, the watershed lines and any mask
// pixel no basin reached. Two different basins are never 8-adjacent: the
// lines separate them under 4- and 8-connectivity.
func watershed(dist []uint16, filled []uint8, out []uint16, w, h int) {
	n := w * h
	// The relief: f = dist+1 inside the mask (so that every component of
	// the mask has a maximum), 0 outside.
	f := make([]uint16, n)
	maxF := uint16(0)
	for i, m := range filled[:n] {
		if m != 0 {
			f[i] = min(dist[i], 0xfffe) + 1
			maxF = max(maxF, f[i])
		}
	}
	peaks := make([]uint8, n)
	regionalMaxima(f, peaks, w, h)
	var l labeller
	basin := make([]int32, n)
	label(&l, peaks, basin, w, h, true)
	fl := &flooder{w: w, h: h, f: f, basin: basin, maxF: maxF, next: make([]int32, n), queued: make([]bool, n)}
	levels := int(maxF) + 1
	fl.head, fl.tail = make([]int32, levels), make([]int32, levels)
	for k := range fl.head {
		fl.head[k], fl.tail[k] = -1, -1
	}
	fl.cur = levels
	for p, b := range basin {
		if b > 0 {
			fl.pushNeighbours(p)
		}
	}
	head, tail, next := fl.head, fl.tail, fl.next
	for fl.cur < levels {
		cur := fl.cur
		p := int(head[cur])
		if p < 0 {
			fl.cur++
			continue
		}
		head[cur] = next[p]
		if head[cur] < 0 {
			tail[cur] = -1
		}
		// The label of the basins around p: one, or a line.
		x, y := p%w, p/w
		lab := int32(0)
		for dy := -1; dy <= 1 && lab != line; dy++ {
			yy := y + dy
			if yy < 0 || yy >= h {
				continue
			}
			for dx := -1; dx <= 1; dx++ {
				xx := x + dx
				if xx < 0 || xx >= w {
					continue
				}
				b := basin[yy*w+xx]
				if b <= 0 {
					continue
				}
				if lab == 0 {
					lab = b
				} else if b != lab {
					lab = line
					break
				}
			}
		}
		basin[p] = lab
		if lab > 0 {
			fl.pushNeighbours(p)
		}
	}
	for i, b := range basin {
		if b > 0 {
			out[i] = 1
		} else {
			out[i] = 0
		}
	}
}

// line is the basin label of a watershed line pixel.
const line = -1

// flooder is the hierarchical queue of a flooding: a FIFO per level
// maxF - f (the highest values first), linked through next.
type flooder struct {
	w, h       int
	f          []uint16
	basin      []int32
	maxF       uint16
	head, tail []int32 // per level: first and last queued pixel, -1 if none
	next       []int32 // per pixel: the next in its level's FIFO
	queued     []bool
	cur        int // no level below holds a pixel
}

// push queues pixel q at its level.
func (fl *flooder) push(q int) {
	k := int(fl.maxF - fl.f[q])
	fl.next[q] = -1
	if fl.tail[k] < 0 {
		fl.head[k] = int32(q)
	} else {
		fl.next[fl.tail[k]] = int32(q)
	}
	fl.tail[k] = int32(q)
	fl.queued[q] = true
	fl.cur = min(fl.cur, k)
}

// pushNeighbours queues the unlabelled, unqueued mask neighbours of p.
func (fl *flooder) pushNeighbours(p int) {
	w, h := fl.w, fl.h
	x, y := p%w, p/w
	for dy := -1; dy <= 1; dy++ {
		yy := y + dy
		if yy < 0 || yy >= h {
			continue
		}
		for dx := -1; dx <= 1; dx++ {
			xx := x + dx
			q := yy*w + xx
			if xx < 0 || xx >= w || q == p || fl.f[q] == 0 || fl.basin[q] != 0 || fl.queued[q] {
				continue
			}
			fl.push(q)
		}
	}
}
