package pathology

import "encoding/binary"

// This file holds the marker-based Watershed: Meyer's flooding (the
// algorithm of OpenCV's watershed) in synchronous rounds, so that its
// result depends on no order of visit and a GPU computes the same. The
// markers are the regional maxima of PreWatershed's map inside the filled
// mask, each 8-connected maximum one marker. The basins grow from them
// through the mask, highest level first; within a level they grow by
// breadth-first rounds, all basins at once, and a pixel that two basins
// reach in the same round becomes a watershed line.
//
// Precisely: let f be the relief (dist+1 in the mask, 0 outside). The
// flood reaches a pixel p at level f(p): from p a path that never
// descends leads to a regional maximum, a marker. Let D(p) be 0 on the
// markers, 1 where p has a neighbour of higher f, and otherwise 1 more
// than the least D of its neighbours of p's level (the round in which the
// flood reaches p). The predecessors of p are its 8 neighbours q in the
// mask with (f(q), -D(q)) > (f(p), -D(p)). A marker pixel is in its
// marker's basin; any other mask pixel's candidate is the one basin its
// predecessors are in, or none if they are in several or none (all on
// lines). The pixel is in its candidate basin unless a neighbour with its
// key has another candidate basin; otherwise it is on a line.

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

	// roundMark - c marks a pixel of the round in progress whose
	// candidate basin is c (0: a line).
	roundMark = -5
)

// watershed floods the relief of PreWatershed's map dist inside the mask
// filled from its regional maxima (see the top of this file) and writes
// into out 1 for the pixels of the basins and 0 for the background and the
// watershed lines. Two different basins are never 8-adjacent: the lines
// separate them under 4- and 8-connectivity. The markers are the
// 8-connected plateaus of the relief with no higher neighbour, labelled in
// the raster order of their first pixel. The hierarchical queue (a FIFO
// per level, the highest first) holds each round of a level in a run of
// its FIFO, settled in two passes: the round's pixels take their
// candidate basins from the pixels done before the round, then each keeps
// its candidate unless a neighbour in the round has another, and queues
// its free neighbours at their levels. After one scan of the image,
// which copies the relief into a buffer with a one-pixel frame (so that
// neighbours need no bounds checks) and skips the background eight pixels
// at a time, only the mask's pixels are visited.
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
	var lines []int32
	for fl.cur < len(fl.levels) {
		k := fl.cur
		end := len(fl.levels[k])
		if fl.pos[k] == end {
			fl.levels[k], fl.pos[k] = fl.levels[k][:0], 0
			fl.cur++
			continue
		}
		round := fl.levels[k][fl.pos[k]:end]
		fl.pos[k] = end
		// Each pixel's candidate c, the one basin of the pixels done
		// before the round around it (0: a line), marked roundMark-c
		// (around ignores the marks).
		for _, p := range round {
			st[p] = roundMark - max(fl.around(int(p)), 0)
		}
		// Each pixel keeps its candidate unless a neighbour in the round
		// is marked with another. (None has been given another yet: it
		// would have seen this pixel's mark. Lines keep their marks
		// until the round is done, for their neighbours to read.)
		lines = lines[:0]
		for _, p := range round {
			c := roundMark - st[p]
			keep := c > 0
			for _, o := range fl.off {
				if !keep {
					break
				}
				b := st[int(p)+o]
				keep = b >= roundMark || b == roundMark-c
			}
			if keep {
				st[p] = c
			} else {
				lines = append(lines, p)
			}
			fl.pushNeighbours(int(p))
		}
		for _, p := range lines {
			st[p] = line
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
// line or queue, at their levels. None is higher than the level in
// progress: it would have a path up to a marker and be done already.
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
