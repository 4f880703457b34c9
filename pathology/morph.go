package pathology

import (
	"encoding/binary"
	"fmt"
	"math"
)

// This file holds the grey-level morphology of MorphOpen: erosion and
// dilation of 8-bit images by a flat disk, in the decomposition of a disk
// into horizontal segments (one per row of the disk). Each segment's
// minimum is a window minimum along the row, made from doubling windows
// (every window of length L is the minimum of two overlapping
// power-of-two windows, as in van Herk/Gil-Werman's reuse of partial
// minima); the disk's minimum is the minimum over its rows of the segment
// minima. Every pass is a whole-row minimum or maximum of two byte rows
// (minBytes, maxBytes: SSE2 on amd64, eight bytes in a uint64 elsewhere),
// so that no inner loop calls a function value.

// openDiskRadius is the radius of MorphOpen's disk: 19 x 19, as in seed 001
// (Table I).
const openDiskRadius = 9

// diskHalfWidths returns the half-width of each row of the flat disk of
// radius r, rows -r..r: row dy covers dx in [-hw, hw] with hw =
// round(r*sqrt(1-dy^2/r^2)) (half to even), the elliptic structuring element OpenCV's
// getStructuringElement(MORPH_ELLIPSE, (2r+1, 2r+1)) makes.
func diskHalfWidths(r int) []int {
	hw := make([]int, 2*r+1)
	for dy := -r; dy <= r; dy++ {
		if r == 0 {
			break
		}
		hw[dy+r] = int(math.RoundToEven(float64(r) * math.Sqrt(float64(r*r-dy*dy)/float64(r*r))))
	}
	return hw
}

// hiBits has the top bit of every byte set.
const hiBits = 0x8080808080808080

// min8 returns the byte-wise unsigned minimum of a and b.
func min8(a, b uint64) uint64 {
	x := a ^ b
	d := (a | hiBits) - (b &^ hiBits)    // per byte 0x80 + low7(a) - low7(b): top bit set iff low7(a) >= low7(b)
	lt := ((b &^ a) | ^(x | d)) & hiBits // a < b: top bits differ with b's set, or equal and low7(a) < low7(b)
	m := (lt - lt>>7) | lt               // 0xff where a < b
	return b ^ (x & m)
}

// ld loads 8 bytes of b at i (little-endian: byte i is the lowest).
func ld(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }

// st stores v into 8 bytes of b at i.
func st(b []byte, i int, v uint64) { binary.LittleEndian.PutUint64(b[i:], v) }

// diskFilter erodes or dilates w x h 8-bit images by a flat disk; its
// buffers are reused from image to image (one filter per goroutine).
type diskFilter struct {
	w, h, r int
	widths  []int    // the distinct half-widths of the disk's rows
	widx    []int    // index in widths of each row of the disk
	pad     int      // neutral bytes on each side of a padded row
	stride  int      // padded row length
	row     []byte   // the padded input row
	m       [][]byte // m[k][i] = min (max) of row[i .. i+2^k-1], k = 1..4
	ring    [][]byte // ring[wi*(2r+1) + y%(2r+1)]: row y's min (max) over [x-a, x+a], a = widths[wi]
}

// newDiskFilter returns a filter of w x h images by the disk of radius r
// (at most 15, so that a row segment is at most 31 pixels).
func newDiskFilter(w, h, r int) (*diskFilter, error) {
	if r < 0 || r > 15 {
		return nil, fmt.Errorf("disk filter: radius %d: want 0..15", r)
	}
	e := &diskFilter{w: w, h: h, r: r, pad: 24}
	idx := map[int]int{}
	for _, v := range diskHalfWidths(r) {
		if _, ok := idx[v]; !ok {
			idx[v] = len(e.widths)
			e.widths = append(e.widths, v)
		}
		e.widx = append(e.widx, idx[v])
	}
	e.stride = w + 2*e.pad
	e.row = make([]byte, e.stride+16)
	e.m = make([][]byte, 5)
	for k := 1; k <= 4; k++ {
		e.m[k] = make([]byte, e.stride)
	}
	e.ring = make([][]byte, len(e.widths)*(2*r+1))
	for i := range e.ring {
		e.ring[i] = make([]byte, w)
	}
	return e, nil
}

// erode writes into out the erosion of in by the disk: each pixel the
// minimum of in over the disk centred on it, pixels outside the image left
// out (as OpenCV's erode with its default border). in and out must not
// overlap.
func (e *diskFilter) erode(in, out []uint8) { e.apply(in, out, minBytes, 0xff) }

// dilate writes into out the dilation of in by the disk (the maximum over
// the disk; the disk is symmetric), pixels outside the image left out.
func (e *diskFilter) dilate(in, out []uint8) { e.apply(in, out, maxBytes, 0) }

// apply filters in into out by op (minBytes or maxBytes, called once per
// row and pass), neutral being op's neutral element.
func (e *diskFilter) apply(in, out []uint8, op func(dst, a, b []byte), neutral byte) {
	w, h, r := e.w, e.h, e.r
	span := 2*r + 1
	for i := range e.row {
		e.row[i] = neutral
	}
	for y := -r; y < h; y++ {
		// Row y+r enters the ring.
		if yy := y + r; yy < h {
			e.segments(in[yy*w:(yy+1)*w], yy%span, op)
		}
		if y < 0 {
			continue
		}
		o := out[y*w : (y+1)*w]
		first := true
		for dy := -r; dy <= r; dy++ {
			yy := y + dy
			if yy < 0 || yy >= h {
				continue
			}
			src := e.ring[e.widx[dy+r]*span+yy%span]
			if first {
				copy(o, src)
				first = false
			} else {
				op(o, o, src)
			}
		}
	}
}

// segments computes the window minima (maxima) of one image row for every
// distinct half-width into ring slot slot. The window [x-a, x+a] is the
// minimum of the two power-of-two windows of length 2^k <= 2a+1 starting
// at x-a and at x+a-2^k+1, made by doubling.
func (e *diskFilter) segments(src []uint8, slot int, op func(dst, a, b []byte)) {
	w, p, span := e.w, e.pad, 2*e.r+1
	row := e.row // its pads hold the neutral element (apply)
	copy(row[p:p+w], src)
	n := e.stride
	prev := row
	for k := 1; k <= 4; k++ {
		s := 1 << (k - 1)
		op(e.m[k][:n-s], prev[:n-s], prev[s:n])
		prev = e.m[k]
		n -= s
	}
	for wi, a := range e.widths {
		dst := e.ring[wi*span+slot]
		if a == 0 {
			copy(dst, row[p:p+w])
			continue
		}
		k := 1
		for 1<<(k+1) <= 2*a+1 {
			k++
		}
		lo, hi := p-a, p+a-(1<<k)+1
		op(dst, e.m[k][lo:lo+w], e.m[k][hi:hi+w])
	}
}

// morphOpen computes the darkness image (255 - mean of RGB, rounded down)
// and opens it with the 19 x 19 disk: erosion (min over the disk) then
// dilation (max over the disk).
func morphOpen(rgb, out []uint8, w, h int) {
	n := w * h
	dark := make([]uint8, n)
	darkness(rgb, dark, n)
	e, err := newDiskFilter(w, h, openDiskRadius)
	if err != nil {
		panic(err) // the radius is a valid constant
	}
	eroded := make([]uint8, n)
	e.erode(dark, eroded)
	e.dilate(eroded, out)
}

// darkness writes 255 - (R+G+B)/3 (integer division) of each pixel of the
// planar RGB image rgb into dark.
func darkness(rgb, dark []uint8, n int) {
	var lut [766]uint8
	for s := range lut {
		lut[s] = uint8(255 - s/3)
	}
	R, G, B := rgb[:n], rgb[n:2*n], rgb[2*n:3*n]
	dark = dark[:n]
	for i := range dark {
		dark[i] = lut[int(R[i])+int(G[i])+int(B[i])]
	}
}
