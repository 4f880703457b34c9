package main

import (
	"encoding/binary"
	"fmt"
	"math"
)

// This file holds the grey-level morphology of MorphOpen: erosion and
// dilation of 8-bit images by a flat disk, in the decomposition of a disk
// into horizontal segments (one per row of the disk). Each segment's
// minimum is a window minimum along the row, made from doubling windows
// (van Herk/Gil-Werman style: every window of length L is the minimum of
// two overlapping power-of-two windows); the disk's minimum is the minimum
// over its rows of the segment minima. The arithmetic works on eight pixels
// at once, packed in a uint64 (SWAR), so that no inner loop calls a
// function value.

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

// diskEroder erodes w x h 8-bit images by a flat disk; its buffers are
// reused from image to image (one eroder per goroutine).
type diskEroder struct {
	w, h, r int
	hw      []int    // half-width of each row of the disk
	widths  []int    // the distinct half-widths
	widx    []int    // index in widths of each row of the disk
	pad     int      // neutral bytes on each side of a padded row
	stride  int      // padded row length, a multiple of 8
	row     []byte   // the padded input row
	m       [][]byte // m[k][i] = min(row[i .. i+2^k-1]), k = 1..4
	ring    [][]byte // ring[wi*(2r+1) + y%(2r+1)]: row y's minimum over [x-hw, x+hw] for widths[wi]
	acc     []byte
}

// newDiskEroder returns an eroder of w x h images by the disk of radius r
// (at most 15, so that a row segment is at most 31 pixels).
func newDiskEroder(w, h, r int) (*diskEroder, error) {
	if r < 0 || r > 15 {
		return nil, fmt.Errorf("disk erosion: radius %d: want 0..15", r)
	}
	e := &diskEroder{w: w, h: h, r: r, hw: diskHalfWidths(r), pad: 24}
	idx := map[int]int{}
	for _, v := range e.hw {
		if _, ok := idx[v]; !ok {
			idx[v] = len(e.widths)
			e.widths = append(e.widths, v)
		}
		e.widx = append(e.widx, idx[v])
	}
	e.stride = (w + 2*e.pad + 7) &^ 7
	n := e.stride + 32 // slack for the unaligned loads past the end
	e.row = make([]byte, n)
	for i := range e.row {
		e.row[i] = 0xff
	}
	e.m = make([][]byte, 5)
	for k := 1; k <= 4; k++ {
		e.m[k] = make([]byte, n)
	}
	e.ring = make([][]byte, len(e.widths)*(2*r+1))
	for i := range e.ring {
		e.ring[i] = make([]byte, e.stride+8)
	}
	e.acc = make([]byte, e.stride+8)
	return e, nil
}

// erode writes into out the erosion of in by the disk: each pixel the
// minimum of in over the disk centred on it, pixels outside the image left
// out (as OpenCV's erode with its default border). With invert, in and out
// are both complemented (255 - v): the erosion of the complement, whose
// complement is the dilation of in. in and out must not overlap.
func (e *diskEroder) erode(in, out []uint8, invert bool) {
	w, h, r := e.w, e.h, e.r
	span := 2*r + 1
	var flip uint64
	if invert {
		flip = ^uint64(0)
	}
	for y := -r; y < h; y++ {
		// Row y+r enters the ring.
		if yy := y + r; yy < h {
			e.segments(in[yy*w:(yy+1)*w], yy%span, flip)
		}
		if y < 0 {
			continue
		}
		acc := e.acc
		first := true
		for dy := -r; dy <= r; dy++ {
			yy := y + dy
			if yy < 0 || yy >= h {
				continue
			}
			src := e.ring[e.widx[dy+r]*span+yy%span]
			if first {
				copy(acc, src)
				first = false
				continue
			}
			for i := 0; i < w; i += 8 {
				st(acc, i, min8(ld(acc, i), ld(src, i)))
			}
		}
		o := out[y*w : (y+1)*w]
		i := 0
		for ; i+8 <= w; i += 8 {
			st(o, i, ld(acc, i)^flip)
		}
		for ; i < w; i++ {
			o[i] = acc[i] ^ uint8(flip)
		}
	}
}

// segments computes the window minima of one image row (complemented by
// flip) for every distinct half-width into ring slot slot.
func (e *diskEroder) segments(src []uint8, slot int, flip uint64) {
	w, p, span := e.w, e.pad, 2*e.r+1
	row := e.row // its pads stay 0xff (newDiskEroder)
	copy(row[p:], src)
	if flip != 0 {
		for i := p; i < p+w; i++ {
			row[i] = ^row[i]
		}
	}
	n := e.stride
	prev := row
	for k := 1; k <= 4; k++ {
		m, s := e.m[k], 1<<(k-1)
		for i := 0; i < n; i += 8 {
			st(m, i, min8(ld(prev, i), ld(prev, i+s)))
		}
		for i := n; i < len(m); i++ {
			m[i] = 0xff
		}
		prev = m
	}
	for wi, a := range e.widths {
		dst := e.ring[wi*span+slot]
		if a == 0 {
			copy(dst[:w], row[p:p+w])
			continue
		}
		// The window [x-a, x+a] is the minimum of two windows of length
		// 2^k <= 2a+1 starting at x-a and at x+a-2^k+1.
		k := 1
		for 1<<(k+1) <= 2*a+1 {
			k++
		}
		m := e.m[k]
		lo, hi := p-a, p+a-(1<<k)+1
		for i := 0; i < w; i += 8 {
			st(dst, i, min8(ld(m, lo+i), ld(m, hi+i)))
		}
	}
}

// morphOpen computes the darkness image (255 - mean of RGB, rounded down)
// and opens it with the 19 x 19 disk: erosion (min over the disk) then
// dilation (max over the disk).
func morphOpen(rgb, out []uint8, w, h int) {
	n := w * h
	dark := make([]uint8, n)
	darkness(rgb, dark, n)
	e, err := newDiskEroder(w, h, openDiskRadius)
	if err != nil {
		panic(err) // the radius is a valid constant
	}
	eroded := make([]uint8, n)
	e.erode(dark, eroded, false)
	e.erode(eroded, out, true)
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
