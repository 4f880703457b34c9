package pathology

import "math"

// This file holds connected-component labelling by union-find (the
// pattern of seed 001's BWLabel): a raster pass gives each foreground
// pixel a provisional label from its labelled neighbours, merging the
// trees of the labels it joins (the smaller label stays the root); a pass
// over the labels flattens the trees into final labels numbered in the
// raster order of each component's first pixel; a last pass relabels the
// pixels. It backs AreaThreshold (8-connected) and BWLabel (4-connected).

// labeller labels binary images; its union-find forest is reused.
type labeller struct {
	parent []int32
}

// newLabel starts a provisional label and returns it.
func (l *labeller) newLabel() int32 {
	l.parent = append(l.parent, int32(len(l.parent)))
	return int32(len(l.parent) - 1)
}

// find returns the root of label a, halving the path.
func (l *labeller) find(a int32) int32 {
	p := l.parent
	for p[a] != a {
		p[a] = p[p[a]]
		a = p[a]
	}
	return a
}

// union merges the trees of a and b under the smaller root and returns it.
func (l *labeller) union(a, b int32) int32 {
	a, b = l.find(a), l.find(b)
	if a == b {
		return a
	}
	if a > b {
		a, b = b, a
	}
	l.parent[b] = a
	return a
}

// label writes into lab the components of the pixels of mask that are not
// zero (0 for the background, 1.. for the components in the raster order
// of their first pixel), 8-connected when eight is set, 4-connected
// otherwise, and returns the number of components.
func label[T uint8 | uint16](l *labeller, mask []T, lab []int32, w, h int, eight bool) int {
	labelPass(l, mask, lab, w, h, eight, math.MaxInt32)
	return relabel(l, lab[:w*h])
}

// relabel flattens the forest of labelPass and replaces the provisional
// labels in lab by the final ones; it returns their number.
func relabel[L uint16 | int32](l *labeller, lab []L) int {
	n := l.flatten()
	p := l.parent
	for i, v := range lab {
		lab[i] = L(p[v])
	}
	return n
}

// labelPass is the raster pass of label: it writes provisional labels
// into lab and their forest into l. It stops and returns false if a
// provisional label would exceed limit.
func labelPass[T uint8 | uint16, L uint16 | int32](l *labeller, mask []T, lab []L, w, h int, eight bool, limit int) bool {
	l.parent = append(l.parent[:0], 0) // label 0: the background
	for y := range h {
		row, lr := mask[y*w:(y+1)*w], lab[y*w:(y+1)*w]
		if len(l.parent)-1+(w+1)/2 > limit {
			return false // this row could take the labels past the limit
		}
		if y == 0 {
			for x, v := range row {
				switch {
				case v == 0:
					lr[x] = 0
				case x > 0 && lr[x-1] != 0:
					lr[x] = lr[x-1]
				default:
					lr[x] = L(l.newLabel())
				}
			}
			continue
		}
		up := lab[(y-1)*w : y*w]
		for x, v := range row {
			if v == 0 {
				lr[x] = 0
				continue
			}
			var left, ul, ur L
			if x > 0 {
				left = lr[x-1]
				if eight {
					ul = up[x-1]
				}
			}
			if eight && x+1 < w {
				ur = up[x+1]
			}
			u := up[x]
			switch {
			case u != 0:
				// Up is joined to left, up-left and up-right already
				// (they are its neighbours, labelled before), except to
				// left under 4-connectivity.
				if !eight && left != 0 && left != u {
					u = L(l.union(int32(u), int32(left)))
				}
				lr[x] = u
			case left != 0:
				if ur != 0 && ur != left {
					left = L(l.union(int32(left), int32(ur)))
				}
				lr[x] = left
			case ul != 0:
				if ur != 0 && ur != ul {
					ul = L(l.union(int32(ul), int32(ur)))
				}
				lr[x] = ul
			case ur != 0:
				lr[x] = ur
			default:
				lr[x] = L(l.newLabel())
			}
		}
	}
	return true
}

// flatten turns the forest into the final labels: parent[a] becomes the
// final label of provisional label a, a root getting the next final label
// and any other label its root's (roots are smaller than the labels under
// them). It returns the number of final labels.
func (l *labeller) flatten() int {
	p := l.parent
	n := int32(0)
	for a := 1; a < len(p); a++ {
		if p[a] == int32(a) {
			n++
			p[a] = n
		} else {
			p[a] = p[p[a]]
		}
	}
	return int(n)
}

// minNucleusArea is AreaThreshold's least area, in pixels, of a nucleus.
const minNucleusArea = 20

// areaThreshold keeps the 8-connected components of in with at least
// minNucleusArea pixels: out gets 1 on their pixels, 0 elsewhere.
func areaThreshold(in, out []uint8, w, h int) {
	var l labeller
	lab := make([]int32, w*h)
	n := label(&l, in, lab, w, h, true)
	area := make([]int32, n+1)
	for _, v := range lab {
		area[v]++
	}
	keep := make([]uint8, n+1)
	for c := 1; c <= n; c++ {
		if area[c] >= minNucleusArea {
			keep[c] = 1
		}
	}
	for i, v := range lab {
		out[i] = keep[v]
	}
}

// bwLabel labels the 4-connected components of mask with 1, 2, ... in the
// raster order of their first pixel, by union-find, and returns the
// number of labels written: components past the 65535th are left out (0).
// The provisional labels go straight into labels when they fit in 16 bits
// (the usual case), into a 32-bit scratch image otherwise.
func bwLabel(mask []uint16, labels []uint16, w, h int) int {
	var l labeller
	if labelPass(&l, mask, labels, w, h, false, math.MaxUint16) {
		return relabel(&l, labels[:w*h])
	}
	lab := make([]int32, w*h)
	n := label(&l, mask, lab, w, h, false)
	for i, v := range lab {
		if v > math.MaxUint16 {
			v = 0
		}
		labels[i] = uint16(v)
	}
	return min(n, math.MaxUint16)
}
